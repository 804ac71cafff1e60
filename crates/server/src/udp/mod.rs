//! The UDP tracker front end (BEP 15).
//!
//! - [`front_end`]: the sockets and worker threads ([`UdpFrontEnd`], [`UdpSettings`]).
//! - [`handler`]: one datagram in, one reply out (parse, connection id, policy, store).
//! - [`connection_id`]: stateless connection ids under a keyed MAC.
//! - [`counters`]: per-worker request counters, published for metrics.

pub mod connection_id;
pub mod counters;
pub mod front_end;
pub mod handler;

pub use front_end::{UdpFrontEnd, UdpSettings};
