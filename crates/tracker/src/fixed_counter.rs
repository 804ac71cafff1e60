//! Counters whose name and labels are fixed, for the counts taken on every request.
//!
//! The `metrics` facade's `counter!` hashes the name and labels and looks them up in the
//! recorder's registry on every call (and the server's tallying recorder wraps
//! each `shoal_requests_total` handle it hands out in a fresh `Arc`). Under
//! `aquatic_ws_load_test`, with up to a dozen counts per announce, the registry look-up
//! (`register_counter`) alone was 1% of the WebTorrent front end's profile, beside the
//! label hashing and an `Arc` allocated and freed per count. A [`FixedCounter`] registers once and then increments its handle.
//!
//! A handle taken while no recorder is installed would count nowhere for good, so until
//! the server's metrics installer has run (it calls [`recorder_installed`]), increments go
//! through the facade each time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use metrics::{Counter, Label};

static RECORDER_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Called by the metrics recorder's installer, once it is the global recorder.
pub fn recorder_installed() {
    RECORDER_INSTALLED.store(true, Ordering::Release);
}

/// A counter with a fixed name and fixed labels, usually a `static`.
pub struct FixedCounter {
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    handle: OnceLock<Counter>,
}

impl FixedCounter {
    pub const fn new(name: &'static str, labels: &'static [(&'static str, &'static str)]) -> Self {
        Self {
            name,
            labels,
            handle: OnceLock::new(),
        }
    }

    #[inline]
    pub fn increment(&self, value: u64) {
        if let Some(handle) = self.handle.get() {
            handle.increment(value);
        } else if RECORDER_INSTALLED.load(Ordering::Acquire) {
            self.handle.get_or_init(|| self.register()).increment(value);
        } else {
            self.register().increment(value);
        }
    }

    /// Its labels (for tests of tables of counters).
    pub fn labels(&self) -> &'static [(&'static str, &'static str)] {
        self.labels
    }

    #[cold]
    fn register(&self) -> Counter {
        let labels: Vec<Label> = self
            .labels
            .iter()
            .map(|&(k, v)| Label::from_static_parts(k, v))
            .collect();
        metrics::counter!(self.name, labels)
    }
}

/// A `&'static FixedCounter` for a name and labels written out as literals:
/// `fixed_counter!("shoal_requests_total", "protocol" => "ws", "result" => "ok")`. Each
/// use is a `static` of its own.
#[macro_export]
macro_rules! fixed_counter {
    ($name:literal $(, $k:literal => $v:literal)* $(,)?) => {{
        static COUNTER: $crate::fixed_counter::FixedCounter =
            $crate::fixed_counter::FixedCounter::new($name, &[$(($k, $v)),*]);
        &COUNTER
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reach_the_installed_recorder_with_their_labels() {
        static C: FixedCounter = FixedCounter::new(
            "shoal_fixed_counter_test_total",
            &[("protocol", "ws"), ("result", "ok")],
        );
        C.increment(2);
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
        recorder_installed();
        C.increment(3);
        C.increment(4);
        let text = handle.render();
        let line = text
            .lines()
            .find(|l| l.starts_with("shoal_fixed_counter_test_total{"))
            .unwrap_or_else(|| panic!("counter missing:\n{text}"));
        assert!(
            line.contains(r#"protocol="ws""#) && line.contains(r#"result="ok""#),
            "{line}"
        );
        // The first increment may predate the recorder (then it counted nowhere, as the
        // facade does); the two after it always count, through one handle.
        let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(n == 7 || n == 9, "{line}");
        assert!(C.handle.get().is_some());
    }
}
