//! The outbound half: reading a peer's Agent Card, turning its skills into
//! tools, and calling one (`CallMachine`), alone or merged in a `Toolkit`.

pub(crate) mod auth;
pub(crate) mod call;
pub(crate) mod card;
pub(crate) mod config;
pub(crate) mod list;
pub(crate) mod sanitize;
pub(crate) mod toolkit;
