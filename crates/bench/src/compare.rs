//! `shoal-bench compare`: several trackers under the same load, alternating and repeating,
//! and the Markdown report of seeds 000–003 with SVG charts and JSON beside it.
//!
//! Fairness is the point (benchmarking.md): each tracker is started fresh pinned to its
//! CPU set with `taskset`, the load generator pins itself to the other CPUs, contenders
//! alternate (A, B, A, B, ...) so that drift of the machine hits all alike, the figures are
//! min / median / max over rounds, and the CPU of tracker, load generator and everything
//! else is measured over the same window, so that a run disturbed by other work shows.
//! Trackers are stopped by the PID we started them with (SIGTERM, then SIGKILL).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::load::Load;
use crate::report::{self, thousands};
use crate::run::RunResult;

/// Flags of `shoal-bench compare`.
#[derive(Args, Clone, Debug)]
pub struct CompareArgs {
    /// A contender: a preset (shoal, aquatic_udp, aquatic_http, aquatic_ws, opentracker) or
    /// NAME=COMMAND, where COMMAND may use {port} and {config}. Repeat for each.
    #[arg(long = "tracker", required = true)]
    pub trackers: Vec<String>,
    /// Port the trackers listen on (below 32768, outside the ephemeral range).
    #[arg(long, default_value_t = 3100)]
    pub port: u16,
    /// CPUs for the tracker (taskset list).
    #[arg(long, default_value = "0")]
    pub tracker_cpus: String,
    /// CPUs for the load generator.
    #[arg(long, default_value = "1")]
    pub bench_cpus: String,
    /// Load-generator worker counts to run at (the x axis of the charts unless --clients
    /// varies too).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub levels: Vec<usize>,
    /// Concurrent clients to run at, at each worker count: connections for HTTP and
    /// WebTorrent, requests in flight per worker for UDP (default: the load's own flag).
    /// With more than one, they are the x axis of the charts.
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Also write each chart as PNG (rasterized from the SVG with the system's fonts).
    #[arg(long)]
    pub png: bool,
    /// Rounds (each contender once per round, alternating).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Directory for report.md, results.json and the charts.
    #[arg(long)]
    pub out: PathBuf,
    /// results.json of an earlier compare, for the "comparison with the previous run" table.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Directories searched first for tracker binaries (then PATH).
    #[arg(long)]
    pub bin_dir: Vec<PathBuf>,
    /// UDP: also run aquatic_udp_load_test (one worker, on the bench CPUs) against the first
    /// tracker each round, to compare load generators.
    #[arg(long)]
    pub vs_aquatic_load_test: bool,
    #[command(subcommand)]
    pub load: Load,
}

/// One tracker's runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Contender {
    pub name: String,
    pub command: String,
    pub runs: Vec<Run>,
}

/// One load level: load-generator workers, and clients when `--clients` was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
        match r {
            RunRepr::Now {
                round,
                workers,
                clients,
                result,
            } => Run {
                round,
                point: Point { workers, clients },
                result,
            },
            RunRepr::Tuple(round, workers, result) => Run {
                round,
                point: Point {
                    workers,
                    clients: None,
                },
                result,
            },
        }
    }
}

/// A run of another load generator, for the load-generator table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadGenRun {
    pub name: String,
    pub round: usize,
    pub responses_per_second: f64,
    pub cpu_percent: f64,
    pub tracker_cpu_percent: Option<f64>,
}

/// What `compare` writes to results.json.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub protocol: String,
    pub command_line: String,
    pub rounds: usize,
    pub levels: Vec<usize>,
    #[serde(default)]
    pub clients: Vec<usize>,
    pub tracker_cpus: String,
    pub bench_cpus: String,
    pub machine: String,
    pub contenders: Vec<Contender>,
    pub load_generators: Vec<LoadGenRun>,
}

/// A contender's command line, with placeholders filled in, and the config file written
/// for presets that need one.
fn resolve(
    spec: &str,
    load: &Load,
    port: u16,
    dir: &Path,
    bins: &[PathBuf],
) -> Result<(String, Vec<String>)> {
    let proto = load.protocol();
    let (name, template) = match spec.split_once('=') {
        Some((n, c)) => (n.to_string(), c.to_string()),
        None => {
            let t = match (spec, proto) {
                ("shoal", "udp") => "shoal --udp 127.0.0.1:{port} --workers 1 --state-file=",
                ("shoal", "http") => "shoal --http 127.0.0.1:{port} --workers 1 --state-file=",
                // WebTorrent is served on the HTTP listeners.
                ("shoal", "ws") => "shoal --http 127.0.0.1:{port} --workers 1 --state-file=",
                ("aquatic_udp", "udp") | ("aquatic_http", "http") | ("aquatic_ws", "ws") => {
                    "{bin} -c {config}"
                }
                ("opentracker", "udp") => "opentracker -i 127.0.0.1 -P {port}",
                ("opentracker", "http") => "opentracker -i 127.0.0.1 -p {port}",
                _ => bail!("no preset {spec:?} for {proto}; use NAME=COMMAND"),
            };
            (spec.to_string(), t.replace("{bin}", spec))
        }
    };
    let mut words: Vec<String> = template.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        bail!("empty command for {name}");
    }
    words[0] = find_binary(&words[0], bins);
    if template.contains("{config}") {
        let config = dir.join(format!("{name}.toml"));
        write_aquatic_config(&words[0], port, &config)?;
        for w in &mut words {
            *w = w.replace("{config}", &config.to_string_lossy());
        }
    }
    for w in &mut words {
        *w = w.replace("{port}", &port.to_string());
    }
    Ok((name, words))
}

fn find_binary(name: &str, bins: &[PathBuf]) -> String {
    if name.contains('/') {
        return name.to_string();
    }
    for d in bins {
        let p = d.join(name);
        if p.is_file() {
            return p.to_string_lossy().into_owned();
        }
    }
    name.to_string()
}

/// aquatic prints its default config with `-p`; we change only the listen address.
fn write_aquatic_config(bin: &str, port: u16, path: &Path) -> Result<()> {
    let out = Command::new(bin)
        .arg("-p")
        .output()
        .with_context(|| format!("running {bin} -p"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut done = false;
    let config: String = text
        .lines()
        .map(|l| {
            if !done && l.trim_start().starts_with("address = ") {
                done = true;
                format!("address = \"127.0.0.1:{port}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    if !done {
        bail!("no `address = ` line in the output of {bin} -p");
    }
    std::fs::write(path, config)?;
    Ok(())
}

/// A tracker we started; stopped (by its PID) when dropped.
struct Tracker {
    child: Child,
}

impl Tracker {
    fn start(cpus: &str, words: &[String], log: &Path) -> Result<Self> {
        let log = std::fs::File::create(log)?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpus)
            .args(words)
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", words.join(" ")))?;
        Ok(Self { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(&mut self) {
        let _ = crate::sys::terminate(self.child.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// Waits until the tracker answers (UDP connect, or a TCP connection), up to 10 s.
fn wait_ready(load: &Load, port: u16, tracker: &mut Tracker) -> Result<()> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = tracker.child.try_wait() {
            bail!("the tracker exited at start ({status}); see its log");
        }
        let ok = match load {
            Load::Udp(_) => {
                let s = UdpSocket::bind("127.0.0.1:0")?;
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
                let mut req = Vec::new();
                shoal_proto::udp::Request::Connect(shoal_proto::udp::ConnectRequest {
                    transaction_id: shoal_proto::udp::TransactionId(7),
                })
                .write(&mut req);
                let _ = s.send_to(&req, addr);
                let mut buf = [0u8; 64];
                matches!(s.recv_from(&mut buf), Ok((16, _)))
            }
            _ => std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok(),
        };
        if ok {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("the tracker did not answer on port {port} within 10 s")
}

fn port_is_free(load: &Load, port: u16) -> bool {
    match load {
        Load::Udp(_) => UdpSocket::bind(("127.0.0.1", port)).is_ok(),
        // With SO_REUSEADDR, as trackers bind: the TIME_WAIT connections the previous
        // contender left do not count, a live listener does.
        _ => {
            use socket2::{Domain, Socket, Type};
            let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
            Socket::new(Domain::IPV4, Type::STREAM, None)
                .and_then(|s| {
                    s.set_reuse_address(true)?;
                    s.bind(&addr.into())?;
                    s.listen(1)
                })
                .is_ok()
        }
    }
}

/// Runs aquatic_udp_load_test for the load's duration; returns (responses/s, its CPU %,
/// tracker CPU %).
fn aquatic_load_test(
    args: &CompareArgs,
    bins: &[PathBuf],
    tracker_pid: u32,
    dir: &Path,
) -> Result<(f64, f64, Option<f64>)> {
    let bin = find_binary("aquatic_udp_load_test", bins);
    let run = args.load.run_args();
    let warm = run.warmup.as_secs().max(1);
    let total = warm + run.duration.as_secs().max(1);
    let out = Command::new(&bin)
        .arg("-p")
        .output()
        .context("aquatic_udp_load_test -p")?;
    let config: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            if l.starts_with("server_address = ") {
                format!("server_address = \"127.0.0.1:{}\"", args.port)
            } else if l.starts_with("duration = ") {
                format!("duration = {total}")
            } else if l.starts_with("summarize_last = ") {
                format!("summarize_last = {}", run.duration.as_secs().max(1))
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let cfg = dir.join("aquatic_udp_load_test.toml");
    std::fs::write(&cfg, config)?;
    let child = Command::new("taskset")
        .arg("-c")
        .arg(&args.bench_cpus)
        .arg(&bin)
        .arg("-c")
        .arg(&cfg)
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting aquatic_udp_load_test")?;
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(warm));
    let a = crate::cpu::CpuSnapshot::take(Some(tracker_pid));
    let la = crate::cpu::process_cpu_seconds(Some(pid)).unwrap_or(0.0);
    std::thread::sleep(run.duration.saturating_sub(Duration::from_millis(300)));
    let b = crate::cpu::CpuSnapshot::take(Some(tracker_pid));
    let lb = crate::cpu::process_cpu_seconds(Some(pid)).unwrap_or(la);
    let output = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Average responses per second: "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("aquatic_udp_load_test printed no average")?;
    let wall = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let cpu = a.until(&b);
    Ok((rps, 100.0 * (lb - la) / wall, cpu.tracker_percent))
}

/// Runs the comparison and writes the report; returns the path of report.md.
pub fn run(args: &CompareArgs) -> Result<PathBuf> {
    std::fs::create_dir_all(&args.out)?;
    let bins = args.bin_dir.clone();
    let mut load = args.load.clone();
    load.set_port(args.port);
    // Before pinning, which would leave this process seeing only the bench CPUs.
    let machine = machine_description();
    if let Err(e) = crate::sys::pin_to_cpus(&args.bench_cpus) {
        eprintln!(
            "warning: could not pin the load generator to {}: {e}",
            args.bench_cpus
        );
    }
    let mut contenders = Vec::new();
    for spec in &args.trackers {
        let (name, words) = resolve(spec, &load, args.port, &args.out, &bins)?;
        contenders.push(Contender {
            name,
            command: words.join(" "),
            runs: Vec::new(),
        });
    }
    let points = points(&args.levels, &args.clients);
    let mut load_gens = Vec::new();
    let progress =
        indicatif::ProgressBar::new((args.rounds * contenders.len() * points.len()) as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} runs, ETA {eta} {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    progress.set_prefix(format!("compare {}", load.protocol()));
    for round in 0..args.rounds {
        for c in contenders.iter_mut() {
            // The previous contender's connections may hold the port for a while after
            // it exited (FIN_WAIT, or TIME_WAIT for trackers without SO_REUSEADDR).
            let free_by = std::time::Instant::now() + Duration::from_secs(60);
            while !port_is_free(&load, args.port) && std::time::Instant::now() < free_by {
                std::thread::sleep(Duration::from_millis(500));
            }
            if !port_is_free(&load, args.port) {
                bail!(
                    "port {} is in use; stop whatever listens there first",
                    args.port
                );
            }
            let words: Vec<String> = c.command.split_whitespace().map(str::to_string).collect();
            let log = args.out.join(format!("{}.log", c.name));
            let mut tracker = Tracker::start(&args.tracker_cpus, &words, &log)?;
            wait_ready(&load, args.port, &mut tracker)
                .with_context(|| format!("{} ({})", c.name, c.command))?;
            for &point in &points {
                let mut l = load.clone();
                if let Some(n) = point.clients {
                    l.set_clients(n);
                }
                let run = l.run_args_mut();
                run.workers = point.workers;
                run.tracker_pid = Some(tracker.pid());
                run.quiet = true;
                let at = describe(point);
                progress.set_message(format!("round {} {} {at}", round + 1, c.name));
                let result = l
                    .run()
                    .with_context(|| format!("{} round {} at {at}", c.name, round + 1))?;
                c.runs.push(Run {
                    round,
                    point,
                    result,
                });
                progress.inc(1);
            }
            if args.vs_aquatic_load_test
                && matches!(load, Load::Udp(_))
                && c.name == args.trackers[0]
            {
                progress.set_message(format!("round {} aquatic_udp_load_test", round + 1));
                match aquatic_load_test(args, &bins, tracker.pid(), &args.out) {
                    Ok((rps, cpu, tcpu)) => load_gens.push(LoadGenRun {
                        name: "aquatic_udp_load_test".into(),
                        round,
                        responses_per_second: rps,
                        cpu_percent: cpu,
                        tracker_cpu_percent: tcpu,
                    }),
                    Err(e) => eprintln!("aquatic_udp_load_test: {e:#}"),
                }
            }
            tracker.stop();
        }
    }
    progress.finish_and_clear();
    let comparison = Comparison {
        protocol: load.protocol().to_string(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        rounds: args.rounds,
        levels: args.levels.clone(),
        clients: args.clients.clone(),
        tracker_cpus: args.tracker_cpus.clone(),
        bench_cpus: args.bench_cpus.clone(),
        machine,
        contenders,
        load_generators: load_gens,
    };
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&comparison)?,
    )?;
    write_report(&comparison, args.baseline.as_deref(), &args.out, args.png)
}

/// Flags of `shoal-bench render`.
#[derive(Args, Clone, Debug)]
pub struct RenderArgs {
    /// results.json written by `compare`.
    pub results: PathBuf,
    /// Directory for report.md and the charts (default: the one results.json is in).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// results.json of an earlier compare, for the "comparison with the previous run" table.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Also write each chart as PNG.
    #[arg(long)]
    pub png: bool,
}

/// Writes report.md and the charts of an earlier comparison from its results.json.
pub fn render(args: &RenderArgs) -> Result<PathBuf> {
    let comparison = read_results(&args.results)?;
    let out = match &args.out {
        Some(d) => d.clone(),
        None => args
            .results
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    std::fs::create_dir_all(&out)?;
    write_report(&comparison, args.baseline.as_deref(), &out, args.png)
}

fn read_results(path: &Path) -> Result<Comparison> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Charts (SVG, and PNG if asked) and report.md into `out`; returns report.md's path.
fn write_report(
    comparison: &Comparison,
    baseline: Option<&Path>,
    out: &Path,
    png: bool,
) -> Result<PathBuf> {
    let baseline = baseline.map(read_results).transpose()?;
    for svg in write_charts(comparison, out)? {
        if png {
            crate::chart::png_from_svg(&svg)?;
        }
    }
    let path = out.join("report.md");
    std::fs::write(&path, markdown(comparison, baseline.as_ref()))?;
    Ok(path)
}

/// Every (workers, clients) pair, workers outermost.
fn points(levels: &[usize], clients: &[usize]) -> Vec<Point> {
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

fn describe(p: Point) -> String {
    match p.clients {
        Some(c) => format!("{} workers, {c} clients", p.workers),
        None => format!("{} workers", p.workers),
    }
}

fn machine_description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = info
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // Online CPUs of the machine, not of this process's affinity mask.
    let cores = info.lines().filter(|l| l.starts_with("processor")).count();
    let cores = if cores > 0 {
        cores
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} × {cpu}, Linux {}", kernel.trim())
}

impl Comparison {
    fn points(&self) -> Vec<Point> {
        points(&self.levels, &self.clients)
    }

    /// The axis the charts run along: clients when several were run, else workers.
    fn by_clients(&self) -> bool {
        self.clients.len() > 1
    }

    fn x_label(&self) -> &'static str {
        match (self.by_clients(), self.protocol.as_str()) {
            (false, _) => "load-generator workers",
            (true, "udp") => "requests in flight per worker",
            (true, _) => "connections",
        }
    }

    fn x_of(&self, p: Point) -> usize {
        if self.by_clients() {
            p.clients.unwrap_or(0)
        } else {
            p.workers
        }
    }
}

fn runs_at(c: &Contender, point: Point) -> Vec<&RunResult> {
    c.runs
        .iter()
        .filter(|r| r.point == point)
        .map(|r| &r.result)
        .collect()
}

/// An earlier comparison's runs of `c` at the same load as `p`: the same point, or for a
/// comparison made without clients levels, the same workers and concurrency.
fn same_load(c: &Contender, p: Point, concurrency: usize) -> Vec<&RunResult> {
    c.runs
        .iter()
        .filter(|r| {
            r.point == p
                || (r.point.workers == p.workers
                    && r.point.clients.is_none()
                    && r.result.concurrency == concurrency)
        })
        .map(|r| &r.result)
        .collect()
}

/// The charts' lines: one per contender, or per contender and worker count when both
/// vary; each with its name and points.
fn lines(cmp: &Comparison) -> Vec<(&Contender, String, Vec<Point>)> {
    let points = cmp.points();
    let mut out = Vec::new();
    for c in &cmp.contenders {
        if cmp.by_clients() && cmp.levels.len() > 1 {
            for &w in &cmp.levels {
                let at: Vec<Point> = points.iter().copied().filter(|p| p.workers == w).collect();
                out.push((c, format!("{} ({w} workers)", c.name), at));
            }
        } else {
            out.push((c, c.name.clone(), points.clone()));
        }
    }
    out
}

/// Writes throughput.svg and latency.svg; returns their paths.
fn write_charts(cmp: &Comparison, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut throughput = Vec::new();
    let mut latency = Vec::new();
    for (c, name, points) in lines(cmp) {
        let at: Vec<(usize, Vec<&RunResult>)> = points
            .iter()
            .map(|&p| (cmp.x_of(p), runs_at(c, p)))
            .collect();
        throughput.push(crate::chart::throughput_series(&name, &at));
        let medians: Vec<(usize, &RunResult)> = at
            .iter()
            .filter_map(|(x, runs)| Some((*x, report::median_run(runs)?)))
            .collect();
        latency.extend(crate::chart::latency_series(&name, &medians));
    }
    let proto = cmp.protocol.to_uppercase();
    let x_label = cmp.x_label();
    let t = dir.join("throughput.svg");
    crate::chart::line_chart(
        &t,
        &format!("{proto} throughput by {x_label}"),
        x_label,
        "responses per second",
        &throughput,
    )?;
    let l = dir.join("latency.svg");
    crate::chart::line_chart(
        &l,
        &format!("{proto} announce latency (median run) by {x_label}"),
        x_label,
        "latency (ms)",
        &latency,
    )?;
    Ok(vec![t, l])
}

/// The Markdown report.
pub fn markdown(cmp: &Comparison, baseline: Option<&Comparison>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let points = cmp.points();
    let with_clients = !cmp.clients.is_empty();
    let clients_head = if cmp.protocol == "udp" {
        "In flight per worker"
    } else {
        "Connections"
    };
    // The first cells of a row: workers, and clients when they were set.
    let point_cells = |p: Point| match p.clients {
        Some(c) if with_clients => format!("{} | {c}", p.workers),
        _ => p.workers.to_string(),
    };
    let point_head = if with_clients {
        format!("Load workers | {clients_head}")
    } else {
        "Load workers".to_string()
    };
    let point_rule = if with_clients { "---|---" } else { "---" };
    let _ = writeln!(
        out,
        "# {} tracker comparison\n",
        cmp.protocol.to_uppercase()
    );
    let _ = writeln!(
        out,
        "Machine: {}. Trackers pinned to CPUs `{}`, load generator to `{}`. {} rounds, \
         contenders alternating; figures are min / **median** / max over rounds.\n\n\
         Command: `{}`\n",
        cmp.machine, cmp.tracker_cpus, cmp.bench_cpus, cmp.rounds, cmp.command_line
    );
    out.push_str("| Contender | Command |\n|---|---|\n");
    for c in &cmp.contenders {
        let _ = writeln!(out, "| {} | `{}` |", c.name, c.command);
    }
    let _ = write!(
        out,
        "\n## Throughput by {} (responses per second)\n\n| {point_head} |",
        cmp.x_label()
    );
    for c in &cmp.contenders {
        let _ = write!(out, " {} |", c.name);
    }
    let _ = write!(out, "\n|{point_rule}|");
    for _ in &cmp.contenders {
        out.push_str("---|");
    }
    out.push('\n');
    for &p in &points {
        let _ = write!(out, "| {} |", point_cells(p));
        for c in &cmp.contenders {
            let _ = write!(out, " {} |", report::min_median_max(&runs_at(c, p)));
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\n![throughput](throughput.svg)\n\n## CPU use (median run at each level)\n\n\
        | Contender | {point_head} | Responses/s | Tracker CPU | Responses per tracker CPU-second | Load generator CPU | Responses per load-generator CPU-second | Others' CPU | Errors |\n\
        |---|{point_rule}|---|---|---|---|---|---|---|\n"
    );
    for c in &cmp.contenders {
        for &p in &points {
            let Some(r) = report::median_run(&runs_at(c, p)) else {
                continue;
            };
            let pct = |x: Option<f64>| x.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.0}% | {} | {} | {:.2}% |",
                c.name,
                point_cells(p),
                thousands(r.summary.responses_per_second as u64),
                pct(r.cpu.tracker_percent),
                r.responses_per_tracker_cpu_second
                    .map(|v| thousands(v as u64))
                    .unwrap_or_else(|| "-".into()),
                r.cpu.generator_percent,
                thousands(r.responses_per_generator_cpu_second as u64),
                pct(r.cpu.others_percent),
                100.0 * r.summary.error_rate
            );
        }
    }
    if !cmp.load_generators.is_empty() {
        let first = &cmp.contenders[0];
        out.push_str("\n## Load generators against the same tracker (one core each)\n\n\
            | Load generator | Responses/s (min / median / max) | Its CPU (median) | Responses per its CPU-second (median) |\n|---|---|---|---|\n");
        let ours = runs_at(first, points[0]);
        let mut cpu: Vec<f64> = ours.iter().map(|r| r.cpu.generator_percent).collect();
        let mut per: Vec<f64> = ours
            .iter()
            .map(|r| r.responses_per_generator_cpu_second)
            .collect();
        let _ = writeln!(
            out,
            "| shoal-bench ({}) | {} | {:.0}% | {} |",
            describe(points[0]),
            report::min_median_max(&ours),
            report::median(&mut cpu),
            thousands(report::median(&mut per) as u64)
        );
        let mut rps: Vec<f64> = cmp
            .load_generators
            .iter()
            .map(|g| g.responses_per_second)
            .collect();
        let mut gcpu: Vec<f64> = cmp.load_generators.iter().map(|g| g.cpu_percent).collect();
        let mut gper: Vec<f64> = cmp
            .load_generators
            .iter()
            .map(|g| 100.0 * g.responses_per_second / g.cpu_percent.max(1e-9))
            .collect();
        let m = report::median(&mut rps);
        let _ = writeln!(
            out,
            "| aquatic_udp_load_test (1 worker) | {} / **{}** / {} | {:.0}% | {} |",
            thousands(rps[0] as u64),
            thousands(m as u64),
            thousands(rps[rps.len() - 1] as u64),
            report::median(&mut gcpu),
            thousands(report::median(&mut gper) as u64)
        );
        let _ = writeln!(
            out,
            "\nBoth against {} on CPUs `{}`, alternating each round. aquatic_udp_load_test's mix \
             is its default (50 connect : 50 announce : 1 scrape); shoal-bench's is the one on \
             the command line above.",
            first.name, cmp.tracker_cpus
        );
    }
    out.push_str("\n## Latency by operation (median run)\n");
    for c in &cmp.contenders {
        for &p in &points {
            let Some(r) = report::median_run(&runs_at(c, p)) else {
                continue;
            };
            let _ = writeln!(
                out,
                "\n### {} ({}, {} in flight)\n",
                c.name,
                describe(p),
                r.concurrency
            );
            out.push_str(&report::ops_table(&r.summary.ops));
        }
    }
    out.push_str("\n![latency](latency.svg)\n");
    if let Some(base) = baseline {
        out.push_str("\n## Comparison with the previous run\n");
        for c in &cmp.contenders {
            let Some(old) = base.contenders.iter().find(|b| b.name == c.name) else {
                continue;
            };
            // The heaviest point run both times (the same load: same workers and clients).
            let found = points.iter().rev().find_map(|&p| {
                let cur = report::median_run(&runs_at(c, p))?;
                let prev = report::median_run(&same_load(old, p, cur.concurrency))?;
                Some((p, prev, cur))
            });
            let Some((p, prev, cur)) = found else {
                continue;
            };
            let _ = writeln!(out, "\n### {} ({}, median runs)\n", c.name, describe(p));
            out.push_str(&report::baseline_table(prev, cur));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::result;

    fn comparison(levels: Vec<usize>, clients: Vec<usize>) -> Comparison {
        let points = points(&levels, &clients);
        let contender = |name: &str, speed: u64| Contender {
            name: name.into(),
            command: format!("{name} --port 1"),
            runs: (0..3)
                .flat_map(|round| {
                    points.iter().map(move |&point| Run {
                        round,
                        point,
                        result: result(
                            point.clients.unwrap_or(64),
                            (speed * (round as u64 + 1), 0.0, 100.0, 300.0),
                            0,
                        ),
                    })
                })
                .collect(),
        };
        Comparison {
            protocol: "ws".into(),
            command_line: "shoal-bench compare ...".into(),
            rounds: 3,
            levels,
            clients,
            tracker_cpus: "0".into(),
            bench_cpus: "1".into(),
            machine: "2 × test CPU".into(),
            contenders: vec![contender("shoal", 2000), contender("aquatic_ws", 1000)],
            load_generators: Vec::new(),
        }
    }

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
    fn report_by_clients_has_a_row_per_level_with_min_median_max() {
        let md = markdown(&comparison(vec![1], vec![16, 256]), None);
        assert!(md.contains("Machine: 2 × test CPU"));
        assert!(md.contains("## Throughput by connections (responses per second)"));
        assert!(md.contains("| Load workers | Connections | shoal | aquatic_ws |"));
        // Rounds made 2000, 4000 and 6000 announces in 10 s: 200 / 400 / 600 per second.
        assert!(
            md.contains("| 1 | 16 | 200 / **400** / 600 | 100 / **200** / 300 |"),
            "{md}"
        );
        assert!(md.contains("| 1 | 256 | 200 / **400** / 600 |"));
        assert!(md.contains("### aquatic_ws (1 workers, 256 clients, 256 in flight)"));
        assert!(!md.contains("Comparison with the previous run"));
    }

    #[test]
    fn a_first_version_results_file_is_still_a_baseline() {
        // The first version wrote runs as [round, workers, result] and had no clients.
        let now = comparison(vec![1], vec![]);
        let mut old = serde_json::to_value(&now).unwrap();
        old.as_object_mut().unwrap().remove("clients");
        for c in old["contenders"].as_array_mut().unwrap() {
            for r in c["runs"].as_array_mut().unwrap() {
                let result = r["result"].clone();
                *r = serde_json::json!([r["round"], r["workers"], result]);
            }
        }
        let old: Comparison = serde_json::from_value(old).unwrap();
        assert_eq!(old.contenders[0].runs.len(), 3);
        assert_eq!(old.contenders[0].runs[2].point.workers, 1);
        let md = markdown(&comparison(vec![1], vec![]), Some(&old));
        assert!(md.contains("## Comparison with the previous run"));
        assert!(md.contains("### shoal (1 workers, median runs)"));
        assert!(
            md.contains("| Responses/s | 400 | 400 | No change |"),
            "{md}"
        );
    }

    #[test]
    fn a_baseline_without_clients_levels_is_matched_by_concurrency() {
        // Then: 64 connections (the load's default), no clients levels. Now: 16 and 64.
        let old = comparison(vec![1], vec![]);
        let md = markdown(&comparison(vec![1], vec![16, 64]), Some(&old));
        assert!(
            md.contains("### shoal (1 workers, 64 clients, median runs)"),
            "{md}"
        );
        // Nothing run at 256 then: no table rather than one against another load.
        let md = markdown(&comparison(vec![1], vec![256]), Some(&old));
        assert!(!md.contains("median runs)"), "{md}");
    }

    #[test]
    fn charts_run_along_clients_when_they_vary() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-cmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = write_charts(&comparison(vec![1, 2], vec![16, 256]), &dir).unwrap();
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(svg.contains("WS throughput by connections"));
        assert!(svg.contains("shoal (2 workers)") && svg.contains("aquatic_ws (1 workers)"));
        assert!(svg.contains(">\n256\n</text>"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
