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
    /// How it was started at each tier of `--tracker-workers` (`command` is the first
    /// tier's); empty in files written before tiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<ContenderTier>,
}

/// A contender at one tier of tracker workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContenderTier {
    pub tracker_workers: usize,
    pub command: String,
    /// What gave it that many workers, in words: `--workers 2`, `socket_workers = 1,
    /// swarm_workers = 1`, or why nothing did (opentracker runs as it comes).
    pub workers_setting: String,
}

/// One tier of `--tracker-workers`: the tracker's worker count and where tracker and load
/// generator ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierSetup {
    pub tracker_workers: usize,
    pub tracker_cpus: String,
    pub bench_cpus: String,
}

/// One load level: the tracker's workers (the tier), load-generator workers, and clients
/// when `--clients` was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    pub workers: usize,
    pub clients: Option<usize>,
    /// 1 in files written before tiers.
    #[serde(default = "one")]
    pub tracker_workers: usize,
}

impl Default for Point {
    fn default() -> Self {
        Point {
            workers: 0,
            clients: None,
            tracker_workers: 1,
        }
    }
}

fn one() -> usize {
    1
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
        #[serde(default = "one")]
        tracker_workers: usize,
        result: RunResult,
    },
    Tuple(usize, usize, RunResult),
}

impl From<RunRepr> for Run {
    fn from(r: RunRepr) -> Self {
        let (round, point, result) = match r {
            RunRepr::Now {
                round,
                workers,
                clients,
                tracker_workers,
                result,
            } => (
                round,
                Point {
                    workers,
                    clients,
                    tracker_workers,
                },
                result,
            ),
            RunRepr::Tuple(round, workers, result) => (
                round,
                Point {
                    workers,
                    ..Point::default()
                },
                result,
            ),
        };
        Run {
            round,
            point,
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
    /// The tracker's `shoal_ws_*` series when the round's load had stopped, for a contender
    /// with an admin listener (see `ws_counters`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tracker_counters: BTreeMap<String, f64>,
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
    /// The tiers of `--tracker-workers`, in the order run; empty in files written before
    /// tiers (one tier of 1 worker on `tracker_cpus`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<TierSetup>,
    /// The first tier's CPU sets.
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
    /// Every load point of every tier, tiers outermost.
    pub fn points(&self) -> Vec<Point> {
        self.tier_setups()
            .iter()
            .flat_map(|t| {
                points(&self.levels, &self.clients)
                    .into_iter()
                    .map(move |p| Point {
                        tracker_workers: t.tracker_workers,
                        ..p
                    })
            })
            .collect()
    }

    /// The tiers run: those recorded, or for a file written before tiers, one tier of one
    /// worker on its CPU sets.
    pub fn tier_setups(&self) -> Vec<TierSetup> {
        if self.tiers.is_empty() {
            vec![TierSetup {
                tracker_workers: 1,
                tracker_cpus: self.tracker_cpus.clone(),
                bench_cpus: self.bench_cpus.clone(),
            }]
        } else {
            self.tiers.clone()
        }
    }

    /// Whether more than one tier was run (the tables then name the tier of each row).
    pub fn several_tiers(&self) -> bool {
        self.tiers.len() > 1
    }
}

/// The load generator's name as the report and the README call it.
pub fn generator_name(cmp: &Comparison) -> String {
    match (cmp.generator, cmp.protocol.as_str(), cmp.tls) {
        (Generator::Wrk, _, _) => "wrk -H 'Connection: close'".into(),
        (Generator::Aquatic, p, tls) => {
            format!(
                "aquatic_{p}_load_test{}",
                if tls && p == "http" { " over TLS" } else { "" }
            )
        }
        (Generator::Shoal, p, _) => format!("shoal-bench {p}"),
    }
}

/// Every (workers, clients) pair of one tier of one tracker worker, workers outermost.
pub fn points(levels: &[usize], clients: &[usize]) -> Vec<Point> {
    let clients: Vec<Option<usize>> = if clients.is_empty() {
        vec![None]
    } else {
        clients.iter().copied().map(Some).collect()
    };
    levels
        .iter()
        .flat_map(|&workers| {
            clients.iter().map(move |&clients| Point {
                workers,
                clients,
                tracker_workers: 1,
            })
        })
        .collect()
}

/// A load level in words: `2 workers`, `1 workers, 64 clients`, and for a tier of more
/// than one tracker worker `4 tracker workers, 2 workers`.
pub fn describe(p: Point) -> String {
    let load = match p.clients {
        Some(c) => format!("{} workers, {c} clients", p.workers),
        None => format!("{} workers", p.workers),
    };
    if p.tracker_workers == 1 {
        load
    } else {
        format!("{} tracker workers, {load}", p.tracker_workers)
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

    #[test]
    fn points_run_over_every_tier_and_old_files_have_one() {
        let mut cmp = Comparison {
            levels: vec![1, 2],
            tracker_cpus: "0".into(),
            bench_cpus: "1".into(),
            ..Default::default()
        };
        assert_eq!(cmp.tier_setups().len(), 1);
        assert!(cmp.points().iter().all(|p| p.tracker_workers == 1));
        cmp.tiers = [1, 4]
            .map(|n| TierSetup {
                tracker_workers: n,
                ..Default::default()
            })
            .to_vec();
        let tiers: Vec<(usize, usize)> = cmp
            .points()
            .iter()
            .map(|p| (p.tracker_workers, p.workers))
            .collect();
        assert_eq!(tiers, [(1, 1), (1, 2), (4, 1), (4, 2)]);
        assert_eq!(describe(cmp.points()[3]), "4 tracker workers, 2 workers");
        assert_eq!(describe(cmp.points()[1]), "2 workers");
        // A run written before tiers is at one tracker worker.
        let run: Run = serde_json::from_value(serde_json::json!({
            "round": 0, "workers": 2, "clients": null,
            "result": serde_json::to_value(crate::report::tests::result(1, (1, 0.0, 1.0, 1.0), 0)).unwrap()
        }))
        .unwrap();
        assert_eq!(run.point.tracker_workers, 1);
    }
}
