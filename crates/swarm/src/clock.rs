//! The store's coarse clock: whole seconds since the process started.
//!
//! Expiry only needs second resolution, and a `u32` of seconds keeps each peer small.
//! Callers read it once per batch of requests, not once per request.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Seconds since the first call in this process (saturating at `u32::MAX`, ~136 years).
pub fn now() -> u32 {
    let start = *START.get_or_init(Instant::now);
    u32::try_from(start.elapsed().as_secs()).unwrap_or(u32::MAX)
}
