//! The domain values: tasks and their messages, stream events, tools and
//! their results, the agent descriptor, timestamps. Plain data, read from
//! any wire shape and written in the one a peer speaks.

pub(crate) mod agent;
pub(crate) mod event;
pub(crate) mod part;
pub(crate) mod task;
pub(crate) mod time;
pub(crate) mod tool;
