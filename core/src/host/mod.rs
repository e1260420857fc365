//! What a host provides and how it runs the machines: the `Transport` trait
//! (the only door to the world), the one generic driver, and (for the
//! server) the host's `Lock` for state that requests share.

pub(crate) mod driver;
pub(crate) mod lock;
pub(crate) mod transport;
