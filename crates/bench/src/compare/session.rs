//! One comparison from start to results.json: contenders resolved, then rounds in which
//! every contender is started fresh, loaded at every point (by shoal-bench or another load
//! generator), judged by the noisy-run rule and stopped; or, with `--idle-connections`,
//! the idle-memory measurement instead of load.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::load::Load;

use super::args::{CompareArgs, RenderArgs};
use super::contender::{self, Cert, Setting};
use super::generator::GeneratorSetting;
use super::idle;
use super::private::PrivateTracker;
use super::report::write_report;
use super::results::{
    describe, read_results, Comparison, Contender, Generator, LoadGenRun, Point, Run,
};
use super::tracker::{wait_port_free, Tracker};

/// Runs the comparison and writes the report; returns the path of report.md.
pub fn run(args: &CompareArgs) -> Result<PathBuf> {
    std::fs::create_dir_all(&args.out)?;
    // Relative paths stay relative: the reports show them, and trackers start here too.
    let out = args.out.clone();
    let mut load = args.load.clone();
    load.set_port(args.contenders.port);
    let protocol = load.protocol();
    let udp = matches!(load, Load::Udp(_));
    let target = load.target();
    let tls = target.starts_with("https://") || target.starts_with("wss://");
    // Before pinning, which would leave this process seeing only the bench CPUs.
    let machine = machine_description();
    let date = crate::report::utc_now();
    // Trackers and load generators inherit it: thousands of connections need it.
    if let Err(e) = crate::sys::raise_nofile_limit() {
        eprintln!("warning: could not raise the open-file limit: {e}");
    }
    if let Err(e) = crate::sys::pin_to_cpus(&args.pinning.bench_cpus) {
        eprintln!(
            "warning: could not pin the load generator to {}: {e}",
            args.pinning.bench_cpus
        );
    }
    let mut comparison = Comparison {
        protocol: protocol.to_string(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        date,
        rounds: args.levels.rounds,
        levels: args.levels.levels.clone(),
        clients: args.levels.clients.clone(),
        tracker_cpus: args.pinning.tracker_cpus.clone(),
        bench_cpus: args.pinning.bench_cpus.clone(),
        machine,
        generator: args.generator,
        tls,
        generator_command: None,
        contenders: Vec::new(),
        load_generators: Vec::new(),
        noise_limit_percent: Some(args.noise.noisy),
        dropped: Vec::new(),
        idle: Vec::new(),
    };
    if let Some(n) = args.idle.idle_connections {
        comparison.rounds = 1;
        idle::measure(args, &out, &target, n, &mut comparison)?;
        return finish(&comparison, args, &out);
    }
    let cert = tls.then(|| Cert::make(&out)).transpose()?;
    let setting = Setting {
        protocol,
        port: args.contenders.port,
        tls: cert.as_ref(),
        keep_alive: args.generator != Generator::Wrk,
        dir: &out,
        bins: &args.contenders.bin_dir,
        shoal_ws: &args.contenders.shoal_ws,
    };
    for spec in &args.contenders.trackers {
        let (name, words) = contender::resolve(spec, &setting)?;
        comparison.contenders.push(Contender {
            name,
            command: words.join(" "),
            runs: Vec::new(),
            generator_runs: Vec::new(),
        });
    }
    let privates: Vec<Option<PrivateTracker>> = comparison
        .contenders
        .iter()
        .map(|c| PrivateTracker::of_command(&c.command))
        .collect();
    let passkeys = crate::passkeys::Passkeys::from_flag(load.workload().passkeys.as_deref())?;
    if let Some(i) = privates.iter().position(Option::is_some) {
        if passkeys.is_none() || args.generator != Generator::Shoal {
            anyhow::bail!(
                "{} is a private tracker: it needs shoal-bench's own load with --passkeys FILE \
                 (`shoal-bench passkeys > FILE` writes one)",
                comparison.contenders[i].name
            );
        }
    }
    let run_args = load.run_args();
    let generator_setting = |generator| GeneratorSetting {
        generator,
        protocol,
        tls,
        port: args.contenders.port,
        path: crate::net::Endpoint::parse(&target)
            .map(|e| e.path)
            .unwrap_or_else(|_| "/announce".into()),
        warmup: run_args.warmup,
        duration: run_args.duration,
        bench_cpus: &args.pinning.bench_cpus,
        tracker_cpus: &args.pinning.tracker_cpus,
        bins: &args.contenders.bin_dir,
        dir: &out,
    };
    let external = (args.generator != Generator::Shoal).then(|| generator_setting(args.generator));
    if let Some(g) = &external {
        g.check()?;
        let (words, config) = g.command(comparison.points()[0])?;
        let line = shell_words(&words);
        comparison.generator_command = Some(match config {
            Some(c) => format!("{line}\n\n{c}"),
            None => line,
        });
    }
    let vs_aquatic = (args.vs_aquatic_load_test && udp)
        .then(|| generator_setting(Generator::Aquatic))
        .filter(|g| match g.check() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("--vs-aquatic-load-test left out: {e:#}");
                false
            }
        });
    let points = comparison.points();
    let progress = indicatif::ProgressBar::new(
        (args.levels.rounds * comparison.contenders.len() * points.len()) as u64,
    );
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} runs, ETA {eta} {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    progress.set_prefix(format!("compare {protocol}"));
    for round in 0..args.levels.rounds {
        for (c, private) in comparison.contenders.iter_mut().zip(&privates) {
            wait_port_free(udp, args.contenders.port)?;
            if let Some(p) = private {
                wait_port_free(false, p.admin.port())?;
            }
            let words: Vec<String> = c.command.split_whitespace().map(str::to_string).collect();
            let log = out.join(format!("{}.log", c.name));
            let mut tracker = Tracker::start(&args.pinning.tracker_cpus, &words, &log)?;
            tracker
                .wait_ready(udp, args.contenders.port)
                .with_context(|| format!("{} ({})", c.name, c.command))?;
            if let (Some(p), Some(keys), 0) = (private, &passkeys, round) {
                // The database keeps them for the later rounds.
                p.register(keys, load.workload().torrents)
                    .with_context(|| format!("registering users and torrents at {}", c.name))?;
            }
            for &point in &points {
                let at = describe(point);
                progress.set_message(format!("round {} {} {at}", round + 1, c.name));
                for attempt in 0.. {
                    let others = match &external {
                        Some(g) => {
                            let log = out.join(format!("{}-load.log", c.name));
                            let r =
                                g.run(point, round, tracker.pid(), &log).with_context(|| {
                                    format!("{} round {} at {at}", c.name, round + 1)
                                })?;
                            let others = r.cpu.others_percent;
                            c.generator_runs.push(r);
                            others
                        }
                        None => {
                            let run = || shoal_load(&load, point, tracker.pid());
                            let result = match private {
                                Some(p) => p.measure(run),
                                None => run(),
                            }
                            .with_context(|| format!("{} round {} at {at}", c.name, round + 1))?;
                            let others = result.cpu.others_percent;
                            c.runs.push(Run {
                                round,
                                point,
                                result,
                            });
                            others
                        }
                    };
                    let keep = args.noise.settle(
                        &mut comparison.dropped,
                        &c.name,
                        round,
                        at.clone(),
                        others,
                        attempt,
                    );
                    if keep {
                        break;
                    }
                    // Dropped: out of the figures, kept only in `dropped`.
                    if external.is_some() {
                        c.generator_runs.pop();
                    } else {
                        c.runs.pop();
                    }
                }
                progress.inc(1);
            }
            if let Some(g) = vs_aquatic
                .as_ref()
                .filter(|_| c.name == comparison_first(args))
            {
                progress.set_message(format!("round {} aquatic_udp_load_test", round + 1));
                let log = out.join("aquatic_udp_load_test.log");
                match g.run(
                    Point {
                        workers: 1,
                        clients: None,
                    },
                    round,
                    tracker.pid(),
                    &log,
                ) {
                    Ok(r) => comparison.load_generators.push(LoadGenRun {
                        name: "aquatic_udp_load_test".into(),
                        round,
                        responses_per_second: r.responses_per_second,
                        cpu_percent: r.cpu.generator_percent,
                        tracker_cpu_percent: r.cpu.tracker_percent,
                    }),
                    Err(e) => eprintln!("aquatic_udp_load_test: {e:#}"),
                }
            }
            tracker.stop();
        }
    }
    progress.finish_and_clear();
    finish(&comparison, args, &out)
}

/// A command line as a shell would take it back: words with spaces in single quotes.
fn shell_words(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            if w.contains(' ') {
                format!("'{w}'")
            } else {
                w.clone()
            }
        })
        .collect();
    quoted.join(" ")
}

/// The name of the first contender on the command line.
fn comparison_first(args: &CompareArgs) -> &str {
    let spec = &args.contenders.trackers[0];
    spec.split_once('=').map(|(n, _)| n).unwrap_or(spec)
}

/// shoal-bench's own load at one point against the tracker `pid`.
fn shoal_load(load: &Load, point: Point, pid: u32) -> Result<crate::run::RunResult> {
    let mut l = load.clone();
    if let Some(n) = point.clients {
        l.set_clients(n);
    }
    let run = l.run_args_mut();
    run.workers = point.workers;
    run.tracker_pid = Some(pid);
    run.quiet = true;
    l.run()
}

fn finish(comparison: &Comparison, args: &CompareArgs, out: &Path) -> Result<PathBuf> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(comparison)?,
    )?;
    write_report(comparison, &args.report, out)
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
    write_report(&comparison, &args.report, &out)
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
