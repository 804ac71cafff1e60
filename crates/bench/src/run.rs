//! What every load run shares, whatever the protocol: timing flags, the measured window,
//! CPU sampling, the progress bar and the result that reports and JSON are made from.
//!
//! A run is warm-up then measurement. Workers reset their own counters when the warm-up
//! ends (they read the same start instant), and this module samples CPU counters at the
//! same two instants, so throughput and CPU use cover exactly the same window.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::cpu::{CpuSnapshot, CpuUse};
use crate::stats::Summary;

/// Parses `20s`, `500ms`, `2m`, `1.5s` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (try 20s, 500ms, 2m)"))?;
    if !(0.0..=86_400.0).contains(&(v * mult)) {
        return Err(format!("duration out of range: {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Flags of every load run.
#[derive(Args, Clone, Debug, Serialize, Deserialize)]
pub struct RunArgs {
    /// Measured time (after the warm-up).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Warm-up, excluded from all figures.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Worker threads of the load generator.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// A request without answer after this long counts as a timeout.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Open loop: offer this many requests per second in total, whatever the answers, and
    /// measure latency from each request's scheduled send time. Without it: closed loop.
    #[arg(long)]
    pub rate: Option<f64>,
    /// PID of the tracker, to report its CPU use over the measured window.
    #[arg(long)]
    pub tracker_pid: Option<u32>,
    /// Write the result as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Open loop: a run whose requests left later than this against their due times (99th
    /// percentile) is marked not valid: the generator, not the tracker, was behind.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    #[serde(default = "crate::scale::default_max_send_lag")]
    pub max_send_lag: Duration,
}

/// Shared between the run's driver and its workers.
pub struct Control {
    pub start: Instant,
    pub measure_from: Instant,
    pub end: Instant,
    pub stop: AtomicBool,
    /// Responses so far (for the progress bar and the "target does not answer" check).
    pub responses: AtomicU64,
}

impl Control {
    pub fn new(args: &RunArgs) -> Arc<Self> {
        let start = Instant::now();
        Arc::new(Self {
            start,
            measure_from: start + args.warmup,
            end: start + args.warmup + args.duration,
            stop: AtomicBool::new(false),
            responses: AtomicU64::new(0),
        })
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The result of one run, as written to JSON.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    pub protocol: String,
    pub target: String,
    /// `closed` or `open`.
    pub mode: String,
    pub workers: usize,
    /// Concurrent requests (closed loop) or connections.
    pub concurrency: usize,
    pub offered_rate: Option<f64>,
    #[serde(flatten)]
    pub summary: Summary,
    pub cpu: CpuUse,
    /// Responses per CPU-second of the load generator: its efficiency.
    pub responses_per_generator_cpu_second: f64,
    /// Responses per CPU-second of the tracker, when its PID was given.
    pub responses_per_tracker_cpu_second: Option<f64>,
    /// Whether the run measured the tracker: false when the generator was behind (see
    /// `generator.behind`). Results written before it was judged read as valid.
    #[serde(default = "yes")]
    pub valid: bool,
    /// The generator's own memory and CPU per response, and why it was behind, if it was.
    #[serde(default)]
    pub generator: crate::scale::Generator,
    /// The fill before the measured window (`--fill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<crate::scale::Fill>,
}

fn yes() -> bool {
    true
}

impl RunResult {
    pub fn new(
        protocol: &str,
        target: String,
        args: &RunArgs,
        concurrency: usize,
        summary: Summary,
        cpu: CpuUse,
    ) -> Self {
        let per = |cpu_s: f64| {
            if cpu_s > 0.0 {
                summary.responses as f64 / cpu_s
            } else {
                0.0
            }
        };
        let generator = crate::scale::own(args, &summary, &cpu);
        Self {
            valid: generator.valid(),
            generator,
            fill: None,
            protocol: protocol.to_string(),
            target,
            mode: if args.rate.is_some() {
                "open"
            } else {
                "closed"
            }
            .to_string(),
            workers: args.workers,
            concurrency,
            offered_rate: args.rate,
            responses_per_generator_cpu_second: per(cpu.generator_cpu_seconds),
            responses_per_tracker_cpu_second: cpu.tracker_cpu_seconds.map(per),
            summary,
            cpu,
        }
    }

    pub fn write_json(&self, path: &std::path::Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// Drives the clock of a run from the main thread: shows progress, samples CPU at the
/// start and end of the measured window, and gives up early if nothing answers.
pub fn supervise(ctl: &Control, args: &RunArgs, what: &str) -> Result<CpuUse> {
    let total = ctl.end.duration_since(ctl.start);
    let bar = if args.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(total.as_millis() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {prefix} [{bar:30}] {elapsed}/{duration} {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar.set_prefix(what.to_string());
        bar
    };
    // A target that answers nothing within this long is reported as down.
    let give_up_after = (args.timeout * 3).max(Duration::from_secs(2));
    let mut first: Option<CpuSnapshot> = None;
    let mut last_count = 0;
    let mut last_at = Instant::now();
    let result = loop {
        let now = Instant::now();
        if first.is_none() && now >= ctl.measure_from {
            first = Some(CpuSnapshot::take(args.tracker_pid));
        }
        if now >= ctl.end {
            let end = CpuSnapshot::take(args.tracker_pid);
            let start = first.unwrap_or(end);
            break Ok(start.until(&end));
        }
        let count = ctl.responses.load(Ordering::Relaxed);
        if count == 0 && now.duration_since(ctl.start) > give_up_after {
            break Err(anyhow::anyhow!(
                "{what}: no valid response at all in {:.1}s; is the tracker running and \
                 listening there? (see the errors above for what came back, if anything)",
                give_up_after.as_secs_f64()
            ));
        }
        if now.duration_since(last_at) >= Duration::from_millis(500) {
            let rate = (count - last_count) as f64 / now.duration_since(last_at).as_secs_f64();
            let phase = if now < ctl.measure_from {
                "warm-up"
            } else {
                "measuring"
            };
            bar.set_message(format!("{phase}, {rate:.0} responses/s"));
            last_count = count;
            last_at = now;
        }
        bar.set_position(now.duration_since(ctl.start).as_millis() as u64);
        let next = ctl.end.min(now + Duration::from_millis(100));
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    };
    ctl.stop.store(true, Ordering::Relaxed);
    bar.finish_and_clear();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
