//! The failover loop.

pub mod step;
