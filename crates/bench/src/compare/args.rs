//! The flags of `shoal-bench compare` and `render`, grouped by what they decide: who
//! competes, where things run, how much load, how noise is handled, where the report goes.
//!
//! The groups are clap `Args` structs flattened into the commands, so that a flag shared
//! by two commands (the report's `--baseline` and `--png`) is declared once.

use std::path::PathBuf;

use clap::Args;

use crate::chart::ChartArgs;
use crate::load::Load;

use super::results::Generator;

/// Flags of `shoal-bench compare`.
#[derive(Args, Clone, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub contenders: ContenderArgs,
    #[command(flatten)]
    pub pinning: PinningArgs,
    #[command(flatten)]
    pub levels: LevelArgs,
    /// Which program makes the load: shoal-bench (the subcommand's flags), aquatic's load
    /// tester for the protocol, or wrk without keep-alive (HTTP only).
    #[arg(long, value_enum, default_value = "shoal")]
    pub generator: Generator,
    #[command(flatten)]
    pub noise: NoiseArgs,
    #[command(flatten)]
    pub idle: IdleArgs,
    /// Directory for report.md, results.json, the charts and the trackers' logs.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub report: ReportArgs,
    /// UDP: also run aquatic_udp_load_test (one worker, on the bench CPUs) against the first
    /// tracker each round, to compare load generators.
    #[arg(long)]
    pub vs_aquatic_load_test: bool,
    #[command(subcommand)]
    pub load: Load,
}

/// Who competes.
#[derive(Args, Clone, Debug)]
pub struct ContenderArgs {
    /// A contender: a preset (shoal, shoal-private, aquatic_udp, aquatic_http, aquatic_ws,
    /// opentracker, torrust (torrust-tracker 3.x, UDP and HTTP), io-limit) or NAME=COMMAND,
    /// where COMMAND may use {port}, {config}, {cert} and {key}. Repeat for each.
    /// shoal-private is shoal in private mode (a fresh SQLite database in --out, the admin
    /// listener on --port + 1): the load needs --passkeys FILE, whose keys and the
    /// workload's torrents are registered through its admin API before the first run, and
    /// its database writes are reported; its state file is removed before every round.
    /// Any contender whose command has --private and --admin ADDR is treated so.
    #[arg(long = "tracker", required = true)]
    pub trackers: Vec<String>,
    /// Port the trackers listen on (below 32768, outside the ephemeral range).
    #[arg(long, default_value_t = 3100)]
    pub port: u16,
    /// Directories searched first for tracker and load-generator binaries (then PATH).
    #[arg(long)]
    pub bin_dir: Vec<PathBuf>,
    /// A line for the shoal preset's `[ws]` config section, e.g.
    /// `max_torrents_per_connection=10000` (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub shoal_ws: Vec<String>,
}

/// How many workers the trackers have, and where tracker and load generator run.
#[derive(Args, Clone, Debug)]
pub struct PinningArgs {
    /// Tracker worker counts, one tier each (seeds 000-002's tables): every contender is
    /// started with that many workers (shoal `--workers N`; aquatic's socket and swarm
    /// workers in its config; torrust's tokio worker threads; `{workers}` in a NAME=COMMAND;
    /// opentracker as it comes), pinned to the first N CPUs, the load generator to the rest.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub tracker_workers: Vec<usize>,
    /// CPUs for the tracker (taskset list), at every tier (default: the first N CPUs this
    /// process may use, for a tier of N workers).
    #[arg(long)]
    pub tracker_cpus: Option<String>,
    /// CPUs for the load generator, at every tier (default: the CPUs the tracker's set
    /// leaves).
    #[arg(long)]
    pub bench_cpus: Option<String>,
}

/// How much load, how often.
#[derive(Args, Clone, Debug)]
pub struct LevelArgs {
    /// Load-generator worker counts to run at (the x axis of the charts unless --clients
    /// varies too).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub levels: Vec<usize>,
    /// Concurrent clients to run at, at each worker count: connections for HTTP and
    /// WebTorrent, requests in flight per worker for UDP (default: the load's own flag).
    /// With more than one, they are the x axis of the charts.
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Rounds (each contender once per round, alternating).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

/// Runs disturbed by other work.
#[derive(Args, Clone, Debug)]
pub struct NoiseArgs {
    /// Drop a run (and run it again) when other processes used more than this % of one
    /// core over its window.
    #[arg(long, default_value_t = 10.0)]
    pub noisy: f64,
    /// How many times a noisy run is run again before it is kept, marked noisy.
    #[arg(long, default_value_t = 2)]
    pub noisy_retries: usize,
}

/// The idle-connection memory measurement (WebTorrent).
#[derive(Args, Clone, Debug)]
pub struct IdleArgs {
    /// Instead of load: open this many idle WebSocket connections (upgrade done, nothing
    /// sent) to each contender and report its RSS growth per connection.
    #[arg(long)]
    pub idle_connections: Option<usize>,
    /// Over which transports to measure idle connections.
    #[arg(long, value_delimiter = ',', default_value = "ws,wss")]
    pub idle_modes: Vec<String>,
    /// Spread idle connections over this many loopback source addresses (127.0.0.1 up).
    #[arg(long, default_value_t = 16)]
    pub idle_sources: u32,
}

/// What the report is compared with and how its charts are written: shared by `compare`
/// and `render`.
#[derive(Args, Clone, Debug)]
pub struct ReportArgs {
    /// results.json of an earlier compare, for the "comparison with the previous run" table.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub charts: ChartArgs,
}

/// Flags of `shoal-bench render`.
#[derive(Args, Clone, Debug)]
pub struct RenderArgs {
    /// results.json written by `compare`.
    pub results: PathBuf,
    /// Directory for report.md and the charts (default: the one results.json is in).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Flags of `shoal-bench headline`.
#[derive(Args, Clone, Debug)]
pub struct HeadlineArgs {
    /// Directories with a results.json each, in the order of the rows.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The line printed by `cargo run --release -p shoal-swarm --example memory`, for the
    /// memory-per-peer row.
    #[arg(long)]
    pub swarm_memory: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        compare: CompareArgs,
    }

    fn parse(flags: &str) -> Result<CompareArgs, clap::Error> {
        let words =
            format!("compare --tracker shoal --out /tmp/x {flags} udp --target 127.0.0.1:3100");
        Cli::try_parse_from(words.split_whitespace()).map(|c| c.compare)
    }

    #[test]
    fn tracker_workers_default_to_one_tier_of_one_on_the_default_cpus() {
        let a = parse("").unwrap();
        assert_eq!(a.pinning.tracker_workers, [1]);
        assert_eq!(a.pinning.tracker_cpus, None);
        assert_eq!(a.pinning.bench_cpus, None);
        let a = parse("--tracker-workers 1,2,4 --tracker-cpus 0-3").unwrap();
        assert_eq!(a.pinning.tracker_workers, [1, 2, 4]);
        assert_eq!(a.pinning.tracker_cpus.as_deref(), Some("0-3"));
        assert!(parse("--tracker-workers two").is_err());
        assert!(parse("--tracker-workers -1").is_err());
    }
}
