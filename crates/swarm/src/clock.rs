//! The tracker's clocks, read in one place.
//!
//! - [`now`]: the store's coarse clock, whole seconds since the process started, plus one.
//!   Expiry only needs second resolution, and a `u32` of seconds keeps each peer small.
//!   Callers read it once per batch of requests, not once per request. It never reads 0:
//!   a torrent restored from a snapshot and not announced since is marked with 0, so that
//!   a change section (`Store::write_snapshot_since`) can leave it out.
//! - [`unix_now`]: Unix time in seconds, for what must survive a restart (connection ids,
//!   snapshot headers, the status page's timestamps).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

static START: OnceLock<Instant> = OnceLock::new();

/// Seconds since the first call in this process, plus one (saturating at `u32::MAX`,
/// ~136 years).
pub fn now() -> u32 {
    let start = *START.get_or_init(Instant::now);
    u32::try_from(start.elapsed().as_secs().saturating_add(1)).unwrap_or(u32::MAX)
}

/// Seconds since the Unix epoch (0 if the system clock is set before it).
#[inline]
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The Unix time of `at`, a reading of [`now`] in this process (for what goes to a
/// database or a file: the coarse clock means nothing outside the process).
#[inline]
pub fn unix_of(at: u32) -> u64 {
    unix_now().saturating_sub(u64::from(now().saturating_sub(at)))
}
