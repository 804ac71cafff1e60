//! What `compare` measured, as written to and read back from results.json.
//!
//! These types are the contract between a run and its report: `render`, `headline` and
//! `--baseline` read files written by earlier versions, so every field added since the
//! first version has a serde default, and runs written as `[round, workers, result]` by the
//! first version still parse.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cpu::CpuUse;
use crate::run::RunResult;

/// Which program makes the load: shoal-bench itself, or another load generator whose
/// figures the README quotes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    /// shoal-bench's own load (the `udp`/`http`/`ws` subcommand's flags).
    #[default]
    Shoal,
    /// aquatic's load tester for the protocol: aquatic_udp_load_test,
    /// aquatic_http_load_test (keep-alive, plain or TLS) or aquatic_ws_load_test (wss).
    Aquatic,
    /// `wrk -H 'Connection: close'` on one fixed announce URL (HTTP without keep-alive;
    /// trackers are started with keep-alive off where they have the option).
    Wrk,
}

/// One tracker's runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Contender {
    pub name: String,
    pub command: String,
    pub runs: Vec<Run>,
    /// Runs under another load generator (`--generator aquatic|wrk`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_runs: Vec<GeneratorRun>,
}

/// One load level: load-generator workers, and clients when `--clients` was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    pub workers: usize,
    pub clients: Option<usize>,
}

/// A contender's run at one point of one round.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "RunRepr")]
pub struct Run {
    pub round: usize,
    #[serde(flatten)]
    pub point: Point,
    pub result: RunResult,
}

/// How runs were written: as today, or as `[round, workers, result]` by the first
/// version, whose results.json files remain good baselines.
#[derive(Deserialize)]
#[serde(untagged)]
enum RunRepr {
    Now {
        round: usize,
        workers: usize,
        clients: Option<usize>,
        result: RunResult,
    },
    Tuple(usize, usize, RunResult),
}

impl From<RunRepr> for Run {
    fn from(r: RunRepr) -> Self {
        let (round, workers, clients, result) = match r {
            RunRepr::Now {
                round,
                workers,
                clients,
                result,
            } => (round, workers, clients, result),
            RunRepr::Tuple(round, workers, result) => (round, workers, None, result),
        };
        Run {
            round,
            point: Point { workers, clients },
            result,
        }
    }
}

/// A run of another load generator against a contender: its own figures, and the CPU of
/// tracker, generator and everything else over the window after the warm-up.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GeneratorRun {
    pub round: usize,
    #[serde(flatten)]
    pub point: Point,
    /// Everything the generator counts as a response, per second over the window.
    pub responses_per_second: f64,
    /// The generator's rates by kind (`connect`, `announce`, `scrape`, `error`, `offer`,
    /// `answer`, `failure`, `requests`, ...), per second over the window.
    pub rates: BTreeMap<String, f64>,
    /// CPU over the window; `generator` is the load generator's process.
    pub cpu: CpuUse,
    /// The tracker's resident memory at the end of the window, KiB.
    pub tracker_rss_kib: Option<u64>,
    /// wrk's latency percentiles (ms), when the generator reports them.
    pub latency_ms: BTreeMap<String, f64>,
    /// What looked wrong (error responses, socket errors, threads not pinned).
    pub notes: Vec<String>,
}

impl GeneratorRun {
    /// Responses of one kind (or all, `None`) per tracker CPU-second.
    pub fn per_tracker_cpu_second(&self, kind: Option<&str>) -> Option<f64> {
        let rate = match kind {
            None => self.responses_per_second,
            Some(k) => *self.rates.get(k)?,
        };
        let cpu = self.cpu.tracker_cpu_seconds?;
        (cpu > 0.0).then(|| rate * self.cpu.wall_seconds / cpu)
    }
}

/// A run of another load generator, for the load-generator table (`--vs-aquatic-load-test`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadGenRun {
    pub name: String,
    pub round: usize,
    pub responses_per_second: f64,
    pub cpu_percent: f64,
    pub tracker_cpu_percent: Option<f64>,
}

/// A run left out of the figures because other processes used more than the noise limit
/// of CPU over its window; it was run again (up to the retry bound).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DroppedRun {
    pub contender: String,
    pub round: usize,
    /// The load level, in words.
    pub at: String,
    pub others_percent: f64,
    /// True when no retry was left and this noisy run was kept after all.
    #[serde(default)]
    pub kept: bool,
}

/// Memory of one tracker holding idle WebSocket connections (`--idle-connections`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IdleRun {
    pub contender: String,
    /// `ws` or `wss`.
    pub mode: String,
    pub connections: IdleConnections,
    pub tracker: TrackerReadings,
}

/// What the tracker's process showed at the instants of an idle measurement.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TrackerReadings {
    /// Resident memory, KiB.
    pub rss_kib: Readings<u64>,
    /// Open file descriptors (it holds one per connection).
    pub fds: Readings<usize>,
}

/// What became of the idle connections asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IdleConnections {
    pub asked: usize,
    /// Upgrade done.
    pub opened: usize,
    /// Why the others failed (refused, timed out, no 101), with how many each.
    pub failed: BTreeMap<String, usize>,
    /// Still open (not closed by the tracker) when the measurement ended.
    pub alive_at_end: usize,
    /// How long opening them all took.
    pub open_seconds: f64,
}

impl IdleConnections {
    pub fn failed_count(&self) -> usize {
        self.failed.values().sum()
    }
}

/// A figure of the tracker at the three instants of an idle measurement: 2 s after it
/// first answered, 3 s after the last connection opened, 3 s after they were closed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Readings<T> {
    pub before: Option<T>,
    pub after: Option<T>,
    pub closed: Option<T>,
}

impl IdleRun {
    /// RSS growth per opened connection, KiB.
    pub fn kib_per_connection(&self) -> Option<f64> {
        let rss = &self.tracker.rss_kib;
        let (before, after) = (rss.before?, rss.after?);
        let opened = self.connections.opened;
        (opened > 0).then(|| (after as f64 - before as f64) / opened as f64)
    }
}

/// What `compare` writes to results.json.
/// Fields added since the first version take their default when an older file lacks them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Comparison {
    pub protocol: String,
    pub command_line: String,
    /// When the comparison started (UTC, `YYYY-MM-DD HH:MM:SS UTC`).
    pub date: String,
    pub rounds: usize,
    pub levels: Vec<usize>,
    pub clients: Vec<usize>,
    pub tracker_cpus: String,
    pub bench_cpus: String,
    pub machine: String,
    pub generator: Generator,
    /// Whether the load went over TLS (https://, wss://).
    pub tls: bool,
    /// The load generator's command and config, for the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_command: Option<String>,
    pub contenders: Vec<Contender>,
    pub load_generators: Vec<LoadGenRun>,
    /// Other processes' CPU limit (% of one core) above which a run was dropped.
    pub noise_limit_percent: Option<f64>,
    pub dropped: Vec<DroppedRun>,
    pub idle: Vec<IdleRun>,
}

impl Comparison {
    pub fn points(&self) -> Vec<Point> {
        points(&self.levels, &self.clients)
    }
}

/// Every (workers, clients) pair, workers outermost.
pub fn points(levels: &[usize], clients: &[usize]) -> Vec<Point> {
    let clients: Vec<Option<usize>> = if clients.is_empty() {
        vec![None]
    } else {
        clients.iter().copied().map(Some).collect()
    };
    levels
        .iter()
        .flat_map(|&workers| {
            clients
                .iter()
                .map(move |&clients| Point { workers, clients })
        })
        .collect()
}

/// A load level in words: `2 workers`, `1 workers, 64 clients`.
pub fn describe(p: Point) -> String {
    match p.clients {
        Some(c) => format!("{} workers, {c} clients", p.workers),
        None => format!("{} workers", p.workers),
    }
}

/// Reads a results.json written by `compare` (this version or an earlier one).
pub fn read_results(path: &Path) -> Result<Comparison> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_every_worker_count_with_every_client_count() {
        let p = points(&[1, 2], &[16, 64]);
        let pairs: Vec<(usize, Option<usize>)> = p.iter().map(|p| (p.workers, p.clients)).collect();
        assert_eq!(
            pairs,
            [(1, Some(16)), (1, Some(64)), (2, Some(16)), (2, Some(64))]
        );
        assert_eq!(points(&[1, 2], &[]).len(), 2);
    }
}
