//! What a host provides and how it runs the machines: the `Transport` trait
//! (the only door to the world) and the one generic driver.

pub(crate) mod driver;
pub(crate) mod transport;
