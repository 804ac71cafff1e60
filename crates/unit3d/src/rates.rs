//! How often a user received peer lists: counts that decay exponentially over their
//! window, several windows per user (a minute and an hour by default). A count is kept as
//! of its last update and decayed when read, so nothing runs in the background.

use serde::Serialize;

/// One window's count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// The count as of `updated_at`.
    pub count: f64,
    /// Past this (decayed) count, no more lists.
    pub max_count: f64,
    /// Seconds over which a count decays to 1/e.
    pub window: f64,
    /// Unix seconds.
    pub updated_at: f64,
}

impl Rate {
    fn decayed(&self, now: f64) -> f64 {
        let elapsed = (now - self.updated_at).max(0.0);
        self.count * (-elapsed / self.window).exp()
    }
}

/// A user's windows for one kind of list.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    pub rates: Vec<Rate>,
}

impl Rates {
    /// Empty counts for `limits` (window seconds, lists).
    pub fn new(limits: &[(u32, u32)]) -> Self {
        Self {
            rates: limits
                .iter()
                .filter(|(window, _)| *window > 0)
                .map(|&(window, max_count)| Rate {
                    count: 0.0,
                    max_count: f64::from(max_count),
                    window: f64::from(window),
                    updated_at: 0.0,
                })
                .collect(),
        }
    }

    /// Whether one more list now stays within every window.
    pub fn allows(&self, now: f64) -> bool {
        self.rates
            .iter()
            .all(|r| r.decayed(now) + 1.0 <= r.max_count)
    }

    /// Counts one list received now.
    pub fn tick(&mut self, now: f64) {
        for r in &mut self.rates {
            r.count = r.decayed(now) + 1.0;
            r.updated_at = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_stopped_and_the_count_decays_over_the_window() {
        let mut r = Rates::new(&[(60, 3), (3600, 100)]);
        for _ in 0..3 {
            assert!(r.allows(1000.0));
            r.tick(1000.0);
        }
        assert!(!r.allows(1000.0), "a fourth list within the minute");
        // After one window the count is 3/e, about 1.1: room for one more.
        assert!(r.allows(1060.0));
        assert!((r.rates[0].decayed(1060.0) - 3.0 / std::f64::consts::E).abs() < 1e-9);
        // The hour's window still counts them all.
        assert!((r.rates[1].decayed(1060.0) - 3.0 * (-60.0f64 / 3600.0).exp()).abs() < 1e-9);
    }

    #[test]
    fn no_limits_allow_everything() {
        let mut r = Rates::new(&[]);
        r.tick(1.0);
        assert!(r.allows(1.0));
    }
}
