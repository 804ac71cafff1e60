//! The flood test of issue 13: one source floods, a normal client keeps announcing, and
//! per-source rate limits keep the normal client served.
//!
//! ```sh
//! cargo run --release -p shoal-server --example flood -- [OPTIONS] > flood.md
//!   --seconds S        length of each phase (default 30)
//!   --runs N           runs, each on a new tracker (default 1)
//!   --protocol P       udp, http or both (default both)
//!   --rate R           the normal client's announces a second (default 50)
//!   --rps N --burst N  the tracker's [rate_limit] (default 100 and 1000)
//!   --recv-buffer B    the tracker's udp.recv_buffer_bytes (default: the config's)
//!   --pin              tracker on CPU 1; flood, normal client and sampler on CPU 0
//!   --probe-nice N     the normal client's thread at nice N (e.g. -10)
//!   --tracker-nice N   the tracker's threads at nice N
//! ```
//!
//! An in-process tracker (one UDP worker, one HTTP worker, `[rate_limit]` on) on loopback.
//! For each protocol, first unloaded, then under a flood, for S seconds each:
//!
//! - a normal client at 127.0.0.3 announces at a steady R a second (UDP: one connection
//!   id; HTTP: one keep-alive connection), timing each answer (1 s without one is a loss);
//! - a flooding source at 127.0.0.2 sends announces as fast as one thread can (UDP: one
//!   socket, answers drained by a second thread; HTTP: pipelined on keep-alive
//!   connections, reopened when the tracker closes them after its 429s).
//!
//! The normal client stands for a client on another machine: on one machine it shares the
//! cores with the flood and the tracker, so `--pin` gives the tracker a core of its own
//! (the flood cannot take it), and `--probe-nice` lets the normal client's thread run as
//! soon as it wakes instead of waiting behind the flooding thread on its core. Placement
//! is done with `taskset -p` and `renice -p` on thread ids (the example's threads inherit
//! the main thread's placement when they are spawned).
//!
//! During the UDP flood a sampler reads the tracker socket's receive queue and drop count
//! from `/proc/net/udp` every 10 ms: it shows whether the normal client's datagrams wait
//! behind a queue of flood datagrams.
//!
//! It prints a Markdown report: per run, the normal client's answers and latency
//! percentiles unloaded and under the flood, and what the flood got; then min / median /
//! max over the runs. The issue's criteria are checked per run: no answer lost by the
//! normal client, its p99 under the flood within 3x of unloaded, the flood's excess
//! unanswered (UDP) or answered 429 (HTTP). It exits 1 if one fails.
//!
//! The program is split by job: `phase.rs` (one phase: the normal client timed, unloaded
//! then flooded), `udp.rs` and `http.rs` (each protocol's normal client and flood),
//! `host.rs` (thread placement, CPU time); this file parses the options, runs the tracker
//! and prints the report.

#![forbid(unsafe_code)]

mod host;
mod http;
mod phase;
mod udp;

use std::time::Instant;

use shoal_server::{Config, Tracker};

use host::{cpu_seconds, place_this_thread};
use phase::{run_phase, FloodResult, Normal, Phase};

pub const NORMAL: &str = "127.0.0.3";
pub const FLOOD: &str = "127.0.0.2";
const TRACKER_CPU: &str = "1";
const CLIENT_CPU: &str = "0";

#[derive(Clone, Debug)]
pub struct Options {
    pub seconds: f64,
    pub runs: usize,
    pub udp: bool,
    pub http: bool,
    pub rate: f64,
    rps: u32,
    burst: u32,
    recv_buffer: Option<usize>,
    pin: bool,
    probe_nice: Option<i32>,
    tracker_nice: Option<i32>,
}

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            seconds: 30.0,
            runs: 1,
            udp: true,
            http: true,
            rate: 50.0,
            rps: 100,
            burst: 1000,
            recv_buffer: None,
            pin: false,
            probe_nice: None,
            tracker_nice: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
            match a.as_str() {
                "--seconds" => o.seconds = value().parse().expect("--seconds S"),
                "--runs" => o.runs = value().parse().expect("--runs N"),
                "--protocol" => {
                    let p = value();
                    o.udp = p == "udp" || p == "both";
                    o.http = p == "http" || p == "both";
                }
                "--rate" => o.rate = value().parse().expect("--rate R"),
                "--rps" => o.rps = value().parse().expect("--rps N"),
                "--burst" => o.burst = value().parse().expect("--burst N"),
                "--recv-buffer" => o.recv_buffer = Some(value().parse().expect("--recv-buffer B")),
                "--pin" => o.pin = true,
                "--probe-nice" => o.probe_nice = Some(value().parse().expect("--probe-nice N")),
                "--tracker-nice" => {
                    o.tracker_nice = Some(value().parse().expect("--tracker-nice N"))
                }
                other => panic!("unknown option {other} (see the example's doc comment)"),
            }
        }
        o
    }
}

fn tracker_config(o: &Options) -> Config {
    let mut c = Config::ephemeral();
    c.workers = 1;
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.rate_limit.enabled = true;
    c.rate_limit.requests_per_second = o.rps;
    c.rate_limit.burst = o.burst;
    if let Some(b) = o.recv_buffer {
        c.udp.recv_buffer_bytes = b;
    }
    c
}

/// One run: a new tracker, then each protocol's phases. Returns (protocol, phase).
fn run_once(o: &Options) -> Vec<(&'static str, Phase)> {
    // The tracker's threads inherit the main thread's CPU and nice; then the main thread
    // (the normal client) and what it spawns (flood, sampler) move to the other CPU.
    place_this_thread(o.pin.then_some(TRACKER_CPU), o.tracker_nice);
    let tracker = Tracker::start(tracker_config(o)).expect("the tracker starts");
    let nice = o.probe_nice.or(o.tracker_nice.map(|_| 0));
    place_this_thread(o.pin.then_some(CLIENT_CPU), nice);
    let udp = tracker.udp_addrs()[0];
    let http = tracker.http_addrs()[0];
    // The flood runs 0.5 s before the flooded phase and stops after it.
    let allowed = o.burst as f64 + o.rps as f64 * (o.seconds + 1.0);
    let mut phases = Vec::new();
    if o.udp {
        let before = tracker.udp_counters().rate_limited;
        let cpu_before = cpu_seconds("udp-");
        let phase = run_phase(
            || udp::normal(udp, o),
            move |stop| {
                let sampler = {
                    let stop = stop.clone();
                    std::thread::spawn(move || udp::sample_queue(udp.port(), stop))
                };
                let started = Instant::now();
                let (sent, answered) = udp::flood(udp, stop);
                let rate = sent as f64 / started.elapsed().as_secs_f64();
                let (q50, qmax, drops) = sampler.join().unwrap();
                FloodResult {
                    text: format!(
                        "{sent} sent ({:.0}k/s), {answered} answered (limit allows ~{allowed:.0}); \
                         tracker queue median {} KiB, max {} KiB; kernel drops {drops}",
                        rate / 1000.0,
                        q50 / 1024,
                        qmax / 1024
                    ),
                    excess_refused: (answered as f64) <= allowed * 1.1 + 1.0,
                }
            },
        );
        let limited = tracker.udp_counters().rate_limited - before;
        // Over both phases, but the unloaded one costs next to nothing.
        let cpu = cpu_seconds("udp-") - cpu_before;
        let mut phase = phase;
        phase.flood.text += &format!(
            "; tracker counted {limited} over the limit, its UDP worker used {cpu:.1} CPU s \
             ({:.0} ns a datagram)",
            cpu * 1e9 / limited.max(1) as f64
        );
        phases.push(("UDP", phase));
    }
    if o.http {
        let phase = run_phase(
            || http::normal(http, o),
            move |stop| {
                let (sent, ok, limited) = http::flood(http, stop);
                FloodResult {
                    text: format!(
                        "{sent} sent, {ok} answered 200, {limited} answered 429 (limit allows \
                         ~{allowed:.0} 200s)"
                    ),
                    excess_refused: (ok as f64) <= allowed * 1.1 + 1.0 && limited > 0,
                }
            },
        );
        phases.push(("HTTP", phase));
    }
    tracker.shutdown();
    // Back to the default placement before the next run's tracker starts.
    place_this_thread(o.pin.then_some("0-63"), nice.map(|_| 0));
    phases
}

fn min_median_max(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "{:.3} / {:.3} / {:.3}",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1]
    )
}

fn main() {
    let o = Options::parse();
    println!(
        "# Flood test: one source floods, a normal client announces {}/s\n",
        o.rate
    );
    println!(
        "Rate limit: {} requests/s per source, bursts of {}; {} s per phase; {} run(s); one \
         tracker worker per protocol; udp.recv_buffer_bytes {}; pinned: {}; normal client's \
         nice: {}; tracker's nice: {}.\n",
        o.rps,
        o.burst,
        o.seconds,
        o.runs,
        o.recv_buffer
            .map_or("default".to_string(), |b| b.to_string()),
        if o.pin {
            "tracker on CPU 1, clients on CPU 0"
        } else {
            "no"
        },
        o.probe_nice.unwrap_or(0),
        o.tracker_nice.unwrap_or(0)
    );
    println!(
        "| run | protocol | normal answered unloaded | p50 / p99 / p99.9 / max unloaded (ms) | \
         normal answered flooded | p50 / p99 / p99.9 / max flooded (ms) | p99 ratio | flood |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    let mut pass = true;
    let mut all: Vec<(&str, Phase)> = Vec::new();
    for run in 1..=o.runs {
        for (protocol, p) in run_once(&o) {
            let pct = |n: &Normal| {
                format!(
                    "{:.3} / {:.3} / {:.3} / {:.3}",
                    n.percentile(0.5),
                    n.percentile(0.99),
                    n.percentile(0.999),
                    n.percentile(1.0)
                )
            };
            println!(
                "| {run} | {protocol} | {}/{} | {} | {}/{} | {} | {:.2} | {} |",
                p.unloaded.latencies.len(),
                p.unloaded.sent,
                pct(&p.unloaded),
                p.flooded.latencies.len(),
                p.flooded.sent,
                pct(&p.flooded),
                p.ratio(),
                p.flood.text
            );
            let checks = [
                ("normal client lost no answer", p.flooded.lost() == 0),
                ("normal p99 within 3x of unloaded", p.ratio() <= 3.0),
                ("flood's excess not served", p.flood.excess_refused),
            ];
            for (what, ok) in checks {
                pass &= ok;
                eprintln!(
                    "{} run {run} {protocol}: {what}",
                    if ok { "PASS" } else { "FAIL" }
                );
            }
            all.push((protocol, p));
        }
    }
    println!("\nOver the runs, min / median / max:\n");
    println!(
        "| protocol | p99 unloaded (ms) | p99 flooded (ms) | p99 ratio | normal answers lost |"
    );
    println!("|---|---:|---:|---:|---:|");
    for protocol in ["UDP", "HTTP"] {
        let of: Vec<&Phase> = all
            .iter()
            .filter(|(p, _)| *p == protocol)
            .map(|(_, p)| p)
            .collect();
        if of.is_empty() {
            continue;
        }
        let lost: usize = of.iter().map(|p| p.flooded.lost()).sum();
        println!(
            "| {protocol} | {} | {} | {} | {lost} |",
            min_median_max(of.iter().map(|p| p.unloaded.percentile(0.99)).collect()),
            min_median_max(of.iter().map(|p| p.flooded.percentile(0.99)).collect()),
            min_median_max(of.iter().map(|p| p.ratio()).collect()),
        );
    }
    std::process::exit(if pass { 0 } else { 1 });
}
