//! One phase of a run: the normal client's steady announces, timed, first unloaded, then
//! while a flood runs on its own thread; and what each side saw.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::place_this_thread;

/// What the normal client saw over one phase.
pub struct Normal {
    pub sent: usize,
    pub latencies: Vec<Duration>,
}

impl Normal {
    pub fn lost(&self) -> usize {
        self.sent - self.latencies.len()
    }

    pub fn percentile(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let i = ((l.len() as f64 * p).ceil() as usize).saturating_sub(1);
        l.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Calls `once` `rate` times a second for `seconds`; `once` answers the latency.
pub fn steady(seconds: f64, rate: f64, mut once: impl FnMut(u32) -> Option<Duration>) -> Normal {
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut normal = Normal {
        sent: 0,
        latencies: Vec::new(),
    };
    let mut n = 0u32;
    while start.elapsed().as_secs_f64() < seconds {
        let due = start + every * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        n += 1;
        normal.sent += 1;
        if let Some(l) = once(n) {
            normal.latencies.push(l);
        }
    }
    normal
}

/// What a flood thread reports.
pub struct FloodResult {
    pub text: String,
    pub excess_refused: bool,
}

/// One protocol's figures in one run.
pub struct Phase {
    pub unloaded: Normal,
    pub flooded: Normal,
    pub flood: FloodResult,
}

impl Phase {
    pub fn ratio(&self) -> f64 {
        self.flooded.percentile(0.99) / self.unloaded.percentile(0.99)
    }
}

/// The normal client unloaded, then again while `flood` runs.
pub fn run_phase<F>(normal: impl Fn() -> Normal, flood: F) -> Phase
where
    F: FnOnce(Arc<AtomicBool>) -> FloodResult + Send + 'static,
{
    let unloaded = normal();
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // The flood runs at the default priority whatever the normal client's is.
            place_this_thread(None, Some(0));
            flood(stop)
        })
    };
    // Let the flood use up its burst first.
    std::thread::sleep(Duration::from_millis(500));
    let flooded = normal();
    stop.store(true, Ordering::Relaxed);
    let flood = flooding.join().unwrap();
    Phase {
        unloaded,
        flooded,
        flood,
    }
}
