//! Request counters of the UDP front end: the core's ([`shoal_tracker::udp_counters`]).

pub use shoal_tracker::udp_counters::*;
