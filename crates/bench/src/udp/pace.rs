//! When an open-loop worker's requests are due.
//!
//! Request `j` of a worker is due at `j × interval` from the start of the run, rounded up
//! to the next *tick* (`--tick`). The tick is what keeps the sender off a spinning CPU: at
//! 40,000 requests a second a request is due every 25 µs, and a sender that woke for each
//! one (or polled, as it did, with a timeout in whole milliseconds that rounded to zero)
//! spent its core on waking. With a 100 µs tick it wakes 10,000 times a second and sends the
//! tick's few requests in one `sendmmsg`. The tick is part of the schedule, not a delay of
//! it: latency still runs from each request's due time, which is its tick, so a sender that
//! keeps its ticks adds nothing, and one that falls behind shows as send lag (see
//! [`crate::stats::Stats::send_lag`]).

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub(super) struct Schedule {
    interval_ns: f64,
    tick_ns: u64,
}

impl Schedule {
    /// `rate` requests a second from this worker, due on a grid of `tick`.
    pub(super) fn new(rate: f64, tick: Duration) -> Self {
        Self {
            interval_ns: 1e9 / rate.max(1e-3),
            tick_ns: (tick.as_nanos() as u64).max(1),
        }
    }

    /// The step of the grid, ns.
    pub(super) fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// When request `j` is due, nanoseconds from the start of the run.
    pub(super) fn due_ns(&self, j: u64) -> u64 {
        let even = (j as f64 * self.interval_ns) as u64;
        even.div_ceil(self.tick_ns) * self.tick_ns
    }

    /// How many requests are due by `t` nanoseconds from the start (requests `0..n`).
    pub(super) fn due_by(&self, t: u64) -> u64 {
        // The first request past `t` by the even spacing, then back over the rounding.
        let mut n = (t as f64 / self.interval_ns) as u64 + 1;
        while n > 0 && self.due_ns(n - 1) > t {
            n -= 1;
        }
        while self.due_ns(n) <= t {
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_fall_on_ticks_at_the_rate_asked() {
        // 40,000/s on a 100 µs tick: 4 requests a tick, the first at 0.
        let s = Schedule::new(40_000.0, Duration::from_micros(100));
        let dues: Vec<u64> = (0..9).map(|j| s.due_ns(j)).collect();
        assert_eq!(
            dues,
            [0, 100_000, 100_000, 100_000, 100_000, 200_000, 200_000, 200_000, 200_000]
        );
        assert_eq!(s.due_by(0), 1);
        assert_eq!(s.due_by(99_999), 1);
        assert_eq!(s.due_by(100_000), 5);
        // A second holds the rate's worth, whatever the tick: requests 0 to 40,000 are
        // due by the end of the first second (the last three at its end, by the rounding).
        assert_eq!(s.due_by(1_000_000_000), 40_001);
        assert_eq!(s.due_by(999_999_999), 39_997);
        // Slower than the tick: every request has a tick of its own, none early.
        let slow = Schedule::new(1_000.0, Duration::from_micros(100));
        assert_eq!(slow.due_ns(3), 3_000_000);
        assert_eq!(slow.due_by(2_999_999), 3);
        for j in 0..10_000 {
            assert!(s.due_ns(j) >= (j as f64 * s.interval_ns) as u64);
            assert!(s.due_ns(j + 1) >= s.due_ns(j));
        }
    }
}
