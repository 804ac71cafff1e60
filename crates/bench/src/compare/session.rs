//! One comparison from start to results.json: contenders resolved, then for each tier of
//! `--tracker-workers` rounds in which every contender is started fresh with the tier's
//! workers on the tier's CPUs, loaded at every point (by shoal-bench or another load
//! generator), judged by the noisy-run rule and stopped; or, with `--idle-connections`,
//! the idle-memory measurement instead of load. Tiers are outermost, so that contenders
//! alternate within each tier as they do in a comparison of one; the run's headline
//! figures are then appended to the output directory's history.jsonl.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::load::Load;

use super::args::{CompareArgs, RenderArgs};
use super::contender::{self, Cert, Setting};
use super::figures;
use super::generator::GeneratorSetting;
use super::idle;
use super::private::PrivateTracker;
use super::report::write_report;
use super::results::{
    describe, read_results, Comparison, Contender, ContenderTier, Generator, LoadGenRun, Point,
    Run, TierSetup,
};
use super::tiers;
use super::tracker::{wait_port_free, Tracker};

/// Runs the comparison and writes the report; returns the path of report.md.
pub fn run(args: &CompareArgs) -> Result<PathBuf> {
    std::fs::create_dir_all(&args.out)?;
    // Relative paths stay relative: the reports show them, and trackers start here too.
    let out = args.out.clone();
    let mut load = args.load.clone();
    load.set_port(args.contenders.port);
    let protocol = load.protocol();
    let target = load.target();
    let tls = target.starts_with("https://") || target.starts_with("wss://");
    // Before pinning, which would leave this process seeing only the bench CPUs.
    let machine = crate::cpu::machine_description();
    let allowed = crate::sys::allowed_cpus().context("reading the CPUs this process may use")?;
    let tiers = tiers::plan(
        &args.pinning.tracker_workers,
        &allowed,
        args.pinning.tracker_cpus.as_deref(),
        args.pinning.bench_cpus.as_deref(),
    )?;
    if args.idle.idle_connections.is_some() && tiers.len() > 1 {
        anyhow::bail!("--idle-connections measures at one tier of --tracker-workers");
    }
    let date = crate::report::utc_now();
    // Trackers and load generators inherit it: thousands of connections need it.
    if let Err(e) = crate::sys::raise_nofile_limit() {
        eprintln!("warning: could not raise the open-file limit: {e}");
    }
    let mut comparison = Comparison {
        protocol: protocol.to_string(),
        command_line: crate::report::command_line(),
        date,
        rounds: args.levels.rounds,
        levels: args.levels.levels.clone(),
        clients: args.levels.clients.clone(),
        tiers: tiers.clone(),
        tracker_cpus: tiers[0].tracker_cpus.clone(),
        bench_cpus: tiers[0].bench_cpus.clone(),
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
    pin(&tiers[0].bench_cpus);
    if let Some(n) = args.idle.idle_connections {
        comparison.rounds = 1;
        idle::measure(
            args,
            &tiers[0].tracker_cpus,
            &out,
            &target,
            n,
            &mut comparison,
        )?;
        return finish(&comparison, args, &out);
    }
    let cert = tls.then(|| Cert::make(&out)).transpose()?;
    let setting = |workers| Setting {
        protocol,
        port: args.contenders.port,
        tls: cert.as_ref(),
        keep_alive: args.generator != Generator::Wrk,
        dir: &out,
        bins: &args.contenders.bin_dir,
        shoal_ws: &args.contenders.shoal_ws,
        workers,
    };
    // The first tier's commands now, so that a bad contender fails before anything runs;
    // the others' when their tier starts (shoal-private's database is made fresh then).
    for spec in &args.contenders.trackers {
        let n = tiers[0].tracker_workers;
        let (name, words) = contender::resolve(spec, &setting(n))?;
        comparison.contenders.push(Contender {
            name,
            command: words.join(" "),
            runs: Vec::new(),
            generator_runs: Vec::new(),
            tiers: vec![ContenderTier {
                tracker_workers: n,
                command: words.join(" "),
                workers_setting: tiers::workers_setting(spec, protocol, n),
            }],
        });
    }
    let privates: Vec<Option<PrivateTracker>> = comparison
        .contenders
        .iter()
        .map(|c| PrivateTracker::of_command(&c.command))
        .collect();
    let passkeys = crate::passkeys::Passkeys::from_args(load.workload())?;
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
    let generator_setting = |generator, t: usize| GeneratorSetting {
        generator,
        protocol,
        tls,
        port: args.contenders.port,
        path: crate::net::Endpoint::parse(&target)
            .map(|e| e.path)
            .unwrap_or_else(|_| "/announce".into()),
        warmup: run_args.warmup,
        duration: run_args.duration,
        bench_cpus: &tiers[t].bench_cpus,
        tracker_cpus: &tiers[t].tracker_cpus,
        bins: &args.contenders.bin_dir,
        dir: &out,
    };
    if args.generator != Generator::Shoal {
        let g = generator_setting(args.generator, 0);
        g.check()?;
        let (words, config) = g.command(comparison.points()[0])?;
        let line = shell_words(&words);
        comparison.generator_command = Some(match config {
            Some(c) => format!("{line}\n\n{c}"),
            None => line,
        });
    }
    let vs_aquatic = (args.vs_aquatic_load_test && protocol == "udp")
        .then(|| generator_setting(Generator::Aquatic, 0))
        .filter(|g| match g.check() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("--vs-aquatic-load-test left out: {e:#}");
                false
            }
        });
    let progress = indicatif::ProgressBar::new(
        (args.levels.rounds * comparison.contenders.len() * comparison.points().len()) as u64,
    );
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} runs, ETA {eta} {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    progress.set_prefix(format!("compare {protocol}"));
    for (t, tier) in tiers.iter().enumerate() {
        let n = tier.tracker_workers;
        if t > 0 {
            pin(&tier.bench_cpus);
            for (spec, c) in args
                .contenders
                .trackers
                .iter()
                .zip(&mut comparison.contenders)
            {
                let (_, words) = contender::resolve(spec, &setting(n))?;
                c.tiers.push(ContenderTier {
                    tracker_workers: n,
                    command: words.join(" "),
                    workers_setting: tiers::workers_setting(spec, protocol, n),
                });
            }
        }
        let external =
            (args.generator != Generator::Shoal).then(|| generator_setting(args.generator, t));
        let each = Tier {
            index: t,
            setup: tier,
            points: comparison
                .points()
                .into_iter()
                .filter(|p| p.tracker_workers == n)
                .collect(),
            external: external.as_ref(),
            vs_aquatic: vs_aquatic.as_ref().filter(|_| t == 0),
            privates: &privates,
            passkeys: passkeys.as_ref(),
            load: &load,
        };
        run_tier(&each, args, &out, &progress, &mut comparison)?;
    }
    progress.finish_and_clear();
    finish(&comparison, args, &out)
}

/// Pins this process, and so shoal-bench's own load, to the load generator's CPUs.
fn pin(cpus: &str) {
    if let Err(e) = crate::sys::pin_to_cpus(cpus) {
        eprintln!("warning: could not pin the load generator to {cpus}: {e}");
    }
}

/// What the rounds of one tier need.
struct Tier<'a> {
    index: usize,
    setup: &'a TierSetup,
    /// The load points of this tier.
    points: Vec<Point>,
    external: Option<&'a GeneratorSetting<'a>>,
    vs_aquatic: Option<&'a GeneratorSetting<'a>>,
    privates: &'a [Option<PrivateTracker>],
    passkeys: Option<&'a crate::passkeys::Passkeys>,
    load: &'a Load,
}

/// The rounds of one tier: each contender started fresh with the tier's command on its
/// CPUs, loaded at every point of the tier, judged by the noisy-run rule and stopped.
fn run_tier(
    tier: &Tier,
    args: &CompareArgs,
    out: &Path,
    progress: &indicatif::ProgressBar,
    comparison: &mut Comparison,
) -> Result<()> {
    let udp = matches!(tier.load, Load::Udp(_));
    let port = args.contenders.port;
    let first = comparison_first(args).to_string();
    for round in 0..args.levels.rounds {
        for (c, private) in comparison.contenders.iter_mut().zip(tier.privates) {
            wait_port_free(udp, port)?;
            let command = &c.tiers[tier.index].command;
            if let Some(p) = private {
                wait_port_free(false, p.admin.port())?;
                PrivateTracker::forget_state(command)?;
            }
            let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
            let log = match tier.setup.tracker_workers {
                1 => out.join(format!("{}.log", c.name)),
                n => out.join(format!("{}-{n}w.log", c.name)),
            };
            let mut tracker = Tracker::start(&tier.setup.tracker_cpus, &words, &log)?;
            tracker
                .wait_ready(udp, port)
                .with_context(|| format!("{} ({command})", c.name))?;
            if let (Some(p), Some(keys), 0) = (private, tier.passkeys, round) {
                // The database keeps them for the tier's later rounds.
                p.register(keys, tier.load.workload().torrents)
                    .with_context(|| format!("registering users and torrents at {}", c.name))?;
            }
            for &point in &tier.points {
                let at = describe(point);
                progress.set_message(format!("round {} {} {at}", round + 1, c.name));
                for attempt in 0.. {
                    let others = match tier.external {
                        Some(g) => {
                            let log = out.join(format!("{}-load.log", c.name));
                            // shoal's WebTorrent counters, read when the window ends.
                            let admin = super::ws_counters::admin_of(command)
                                .filter(|_| g.protocol == "ws");
                            let mut counters = None;
                            let mut read = || {
                                if let Some(a) = admin {
                                    counters = Some(super::ws_counters::read(a));
                                }
                            };
                            let mut r = g
                                .run_with(point, round, tracker.pid(), &log, &mut read)
                                .with_context(|| {
                                    format!("{} round {} at {at}", c.name, round + 1)
                                })?;
                            if let Some(c2) = counters {
                                r.tracker_counters =
                                    c2.with_context(|| format!("{}'s /metrics", c.name))?;
                            }
                            let others = r.cpu.others_percent;
                            c.generator_runs.push(r);
                            others
                        }
                        None => {
                            let run = || shoal_load(tier.load, point, tracker.pid());
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
                    if tier.external.is_some() {
                        c.generator_runs.pop();
                    } else {
                        c.runs.pop();
                    }
                }
                progress.inc(1);
            }
            if let Some(g) = tier.vs_aquatic.filter(|_| c.name == first) {
                progress.set_message(format!("round {} aquatic_udp_load_test", round + 1));
                let log = out.join("aquatic_udp_load_test.log");
                let point = Point {
                    workers: 1,
                    ..Point::default()
                };
                match g.run(point, round, tracker.pid(), &log) {
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
    Ok(())
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

/// Writes results.json, appends the run's figures to the directory's history (not for the
/// idle measurement, which has no load figures) and writes the report.
fn finish(comparison: &Comparison, args: &CompareArgs, out: &Path) -> Result<PathBuf> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(comparison)?,
    )?;
    let (runs, skipped) = if comparison.idle.is_empty() {
        let run = figures::history_run(comparison, crate::history::commit());
        crate::history::record(out, &run)
    } else {
        Default::default()
    };
    write_report(comparison, &args.report, out, (&runs, &skipped))
}

/// Writes report.md and the charts of an earlier comparison from its results.json.
pub fn render(args: &RenderArgs) -> Result<PathBuf> {
    let comparison = read_results(&args.results)?;
    let dir = args
        .results
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let out = args.out.clone().unwrap_or_else(|| dir.clone());
    std::fs::create_dir_all(&out)?;
    // The history beside results.json, as it stands (nothing is appended: nothing ran).
    let (runs, skipped) = crate::history::read(&dir);
    for w in &skipped {
        eprintln!("warning: {w}");
    }
    write_report(&comparison, &args.report, &out, (&runs, &skipped))
}
