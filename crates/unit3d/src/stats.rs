//! The figures a UNIT3D site shows on its tracker page (`GET /announce/<key>/stats`): how
//! many requests and announce responses per second, over windows of 1, 10, 60, 900 and
//! 7200 seconds, when the server started and when it last saw each.
//!
//! Each window is a count that decays exponentially, as UNIT3D-Announce keeps it:
//! `count = count * e^(-elapsed / window) + 1` at every event; the rate shown is
//! `count / window` (for a steady `r` events a second, the count settles at `r * window`).
//! Two differences, both for the hot path and the reader:
//!
//! - Events are first counted in an atomic and folded into the decaying counts at most
//!   every [`FOLD_EVERY`] seconds (by the event that finds the last fold that old, or by
//!   the reader). An event is thus decayed from its fold, at most a millisecond after it
//!   happened: within 0.1% on the 1-second window, nothing measurable on the others.
//!   Every announce pays one clock read, one `fetch_add` and two relaxed atomics, and
//!   never waits on a lock (a fold that finds the lock taken leaves its events to the
//!   next).
//! - The rates shown are decayed to the moment they are read, so a server that went
//!   quiet shows its rates falling (UNIT3D-Announce shows them as of the last event).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;

/// The windows the site reads, in seconds.
pub const WINDOWS: [f64; 5] = [1.0, 10.0, 60.0, 900.0, 7200.0];

/// How long events may wait in the counter before they are folded, in seconds.
pub const FOLD_EVERY: f64 = 0.001;

/// Unix time now, in seconds with a fraction.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// An `f64` kept in an atomic.
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn new(v: f64) -> Self {
        Self(AtomicU64::new(v.to_bits()))
    }

    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
}

/// The decaying counts, as of `at`.
struct Folded {
    counts: [f64; WINDOWS.len()],
    at: f64,
}

/// One kind of event (requests, or announce responses) counted over the windows.
struct Decaying {
    /// Events not yet folded into the counts.
    unfolded: AtomicU64,
    /// When the counts were last folded (Unix seconds).
    folded_at: AtomicF64,
    /// When the last event happened.
    last_at: AtomicF64,
    folded: Mutex<Folded>,
}

impl Decaying {
    fn new(start: f64) -> Self {
        Self {
            unfolded: AtomicU64::new(0),
            folded_at: AtomicF64::new(start),
            last_at: AtomicF64::new(start),
            folded: Mutex::new(Folded {
                counts: [0.0; WINDOWS.len()],
                at: start,
            }),
        }
    }

    fn event(&self, now: f64) {
        self.unfolded.fetch_add(1, Ordering::Relaxed);
        self.last_at.store(now);
        if now - self.folded_at.load() >= FOLD_EVERY {
            if let Some(mut f) = self.folded.try_lock() {
                self.fold(&mut f, now);
            }
        }
    }

    /// Decays the counts to `now` and adds the events waiting.
    fn fold(&self, f: &mut Folded, now: f64) {
        // A clock set back decays nothing (and is not taken as the new origin).
        let elapsed = (now - f.at).max(0.0);
        let events = self.unfolded.swap(0, Ordering::Relaxed) as f64;
        for (count, window) in f.counts.iter_mut().zip(WINDOWS) {
            *count = *count * (-elapsed / window).exp() + events;
        }
        f.at = f.at.max(now);
        self.folded_at.store(f.at);
    }

    /// Events per second over each window, as of `now`.
    fn rates(&self, now: f64) -> [f64; WINDOWS.len()] {
        let mut f = self.folded.lock();
        self.fold(&mut f, now);
        let mut out = [0.0; WINDOWS.len()];
        for ((rate, count), window) in out.iter_mut().zip(f.counts).zip(WINDOWS) {
            *rate = count / window;
        }
        out
    }
}

/// The server's request and announce-response counts. One per process, shared by every
/// front end: [`Stats::request`] for every HTTP request served (announces and the site's
/// calls alike, as UNIT3D-Announce counts them), [`Stats::announce_response`] for every
/// announce answered, on any protocol.
pub struct Stats {
    created_at: f64,
    requests: Decaying,
    announce_responses: Decaying,
}

impl Default for Stats {
    fn default() -> Self {
        Self::starting_at(now())
    }
}

/// `GET /stats`, as the site reads it: every value a float (times in Unix seconds, rates
/// in events per second).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatsAnswer {
    pub created_at: f64,
    pub last_request_at: f64,
    pub last_announce_response_at: f64,
    pub requests_per_1s: f64,
    pub requests_per_10s: f64,
    pub requests_per_60s: f64,
    pub requests_per_900s: f64,
    pub requests_per_7200s: f64,
    pub announce_responses_per_1s: f64,
    pub announce_responses_per_10s: f64,
    pub announce_responses_per_60s: f64,
    pub announce_responses_per_900s: f64,
    pub announce_responses_per_7200s: f64,
}

impl Stats {
    /// Counts from now.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts from `start` (Unix seconds): the last times start there too, as
    /// UNIT3D-Announce's do.
    pub fn starting_at(start: f64) -> Self {
        Self {
            created_at: start,
            requests: Decaying::new(start),
            announce_responses: Decaying::new(start),
        }
    }

    /// One request served.
    pub fn request(&self) {
        self.request_at(now());
    }

    /// One announce answered.
    pub fn announce_response(&self) {
        self.announce_response_at(now());
    }

    /// One request served at `now` (Unix seconds).
    pub fn request_at(&self, now: f64) {
        self.requests.event(now);
    }

    /// One announce answered at `now` (Unix seconds).
    pub fn announce_response_at(&self, now: f64) {
        self.announce_responses.event(now);
    }

    /// The figures now.
    pub fn answer(&self) -> StatsAnswer {
        self.answer_at(now())
    }

    /// The figures as of `now` (Unix seconds).
    pub fn answer_at(&self, now: f64) -> StatsAnswer {
        let r = self.requests.rates(now);
        let a = self.announce_responses.rates(now);
        StatsAnswer {
            created_at: self.created_at,
            last_request_at: self.requests.last_at.load(),
            last_announce_response_at: self.announce_responses.last_at.load(),
            requests_per_1s: r[0],
            requests_per_10s: r[1],
            requests_per_60s: r[2],
            requests_per_900s: r[3],
            requests_per_7200s: r[4],
            announce_responses_per_1s: a[0],
            announce_responses_per_10s: a[1],
            announce_responses_per_60s: a[2],
            announce_responses_per_900s: a[3],
            announce_responses_per_7200s: a[4],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn events_at_one_instant_count_whole_and_are_divided_by_the_window() {
        let s = Stats::starting_at(1000.0);
        for _ in 0..30 {
            s.request_at(1000.5);
        }
        let a = s.answer_at(1000.5);
        assert!(close(a.requests_per_1s, 30.0), "{a:?}");
        assert!(close(a.requests_per_10s, 3.0), "{a:?}");
        assert!(close(a.requests_per_60s, 0.5), "{a:?}");
        assert!(close(a.requests_per_900s, 30.0 / 900.0), "{a:?}");
        assert!(close(a.requests_per_7200s, 30.0 / 7200.0), "{a:?}");
        assert_eq!(a.announce_responses_per_1s, 0.0);
        assert_eq!(a.created_at, 1000.0);
        assert_eq!(a.last_request_at, 1000.5);
        assert_eq!(a.last_announce_response_at, 1000.0);
    }

    #[test]
    fn counts_decay_as_unit3d_announce_decays_them() {
        // The formula, event by event: count = count * e^(-elapsed / window) + 1.
        let s = Stats::starting_at(0.0);
        let times = [1.0, 1.5, 4.0, 4.25, 30.0, 200.0];
        let mut expected = [0.0f64; 5];
        let mut last = 0.0;
        for t in times {
            s.announce_response_at(t);
            for (c, w) in expected.iter_mut().zip(WINDOWS) {
                *c = *c * (-(t - last) / w).exp() + 1.0;
            }
            last = t;
        }
        // Read 5 s after the last event: decayed to the reading.
        let a = s.answer_at(205.0);
        let got = [
            a.announce_responses_per_1s,
            a.announce_responses_per_10s,
            a.announce_responses_per_60s,
            a.announce_responses_per_900s,
            a.announce_responses_per_7200s,
        ];
        for ((g, c), w) in got.iter().zip(expected).zip(WINDOWS) {
            let want = c * (-5.0 / w).exp() / w;
            assert!(close(*g, want), "window {w}: {g} vs {want}");
        }
        assert_eq!(a.last_announce_response_at, 200.0);
    }

    #[test]
    fn a_steady_rate_reads_as_that_rate() {
        // 100 events a second for two minutes: the 1, 10 and 60 s windows read ~100.
        let s = Stats::starting_at(0.0);
        for i in 1..=12_000 {
            s.request_at(f64::from(i) / 100.0);
        }
        let a = s.answer_at(120.0);
        assert!((a.requests_per_1s - 100.0).abs() < 1.0, "{a:?}");
        assert!((a.requests_per_10s - 100.0).abs() < 1.0, "{a:?}");
        // 60 s window after 120 s: 100 * (1 - e^-2).
        assert!((a.requests_per_60s - 100.0 * (1.0 - (-2.0f64).exp())).abs() < 1.0);
    }

    #[test]
    fn a_clock_set_back_neither_grows_nor_breaks_the_counts() {
        let s = Stats::starting_at(100.0);
        s.request_at(100.0);
        s.request_at(50.0);
        let a = s.answer_at(40.0);
        assert!(close(a.requests_per_1s, 2.0), "{a:?}");
        assert!(a.requests_per_10s.is_finite());
    }

    #[test]
    fn counts_from_many_threads_are_all_kept() {
        let s = Stats::starting_at(1000.0);
        std::thread::scope(|scope| {
            for thread in 0..4u32 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..10_000u32 {
                        // Spread over 0.4 s, so that folds happen while others count.
                        s.request_at(1000.0 + f64::from(i * 4 + thread) * 1e-5);
                    }
                });
            }
        });
        let a = s.answer_at(1000.4);
        // At most 0.4 s of decay on the 7200 s window: under 0.006%.
        let total = a.requests_per_7200s * 7200.0;
        assert!(total > 39_997.0 && total <= 40_000.0 + 1e-6, "{total}");
    }
}
