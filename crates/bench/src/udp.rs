//! The UDP (BEP 15) load generator: its flags and the run that spreads the load over
//! worker threads (`worker.rs`), each owning a few sockets (`sock.rs`); the rules of a valid
//! answer are in `answer.rs`, the spread of slots and source addresses in `spread.rs`.
//!
//! Each worker thread owns a few connected, non-blocking sockets, each bound to its own
//! loopback address (127.0.0.1, .2, ...) so that a tracker's `SO_REUSEPORT` sockets share
//! the load and the tracker sees many distinct peers. A socket keeps many requests in
//! flight in fixed *slots*; a transaction id is `generation << 16 | slot`, so matching a
//! response to its request is an array lookup, and a late or forged answer is caught by
//! the generation. Requests are encoded once into their slot's buffer, and a whole round
//! of them leaves in one `sendmmsg`; answers come back in `recvmmsg` batches. The clock is
//! read once per batch.
//!
//! Like a real client, a socket first connects, then reuses its connection id until a
//! random moment 60–110 s later (or an error response) and connects again. Every answer is
//! checked: transaction id, action, size, number of peers against `numwant`, number of
//! scrape entries against the hashes asked.
//!
//! Closed loop: a slot is refilled as soon as its answer arrives (throughput). Open loop
//! (`--rate`): requests are due at fixed times whatever happens, and latency runs from the
//! due time, so a stalled tracker is charged for the requests it delayed (no coordinated
//! omission); the sender sleeps between ticks of the schedule (`pace.rs`) and records how
//! late each request left, so that a generator that fell behind is told from a tracker
//! that did ([`crate::scale`]).
//!
//! With `--fill`, every simulated peer first announces once, closed loop (`fill.rs`); the
//! run's clock starts when all workers are done, and only then.

mod answer;
mod fill;
mod pace;
mod sock;
mod spread;
mod worker;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;

use crate::cpu::CpuSnapshot;
use crate::passkeys::Passkeys;
use crate::run::{parse_duration, supervise, Control, RunArgs, RunResult};
use crate::scale::Fill;
use crate::stats::{Op, Stats};
use crate::workload::WorkloadArgs;
use fill::Filled;
use worker::Worker;

/// Flags of `shoal-bench udp`.
#[derive(Args, Clone, Debug)]
pub struct UdpArgs {
    /// Tracker address, e.g. 127.0.0.1:3000.
    #[arg(long)]
    pub target: SocketAddr,
    #[command(flatten)]
    pub run: RunArgs,
    /// Sockets (source ports) per worker.
    #[arg(long, default_value_t = 4)]
    pub sockets_per_worker: usize,
    /// Put each simulated peer's own IPv4 address in the announce's IP field (10.0.0.0 plus
    /// its number), for a tracker told to honour it (shoal: `[udp] allow_ip_field`). A
    /// tracker knows a peer by its address: without it, a torrent's peers share the
    /// sockets' addresses and at most 64,000 ports, and a large torrent holds far fewer
    /// peers than were simulated.
    #[arg(long)]
    pub peer_ips: bool,
    /// Requests in flight per socket.
    #[arg(long, default_value_t = 64)]
    pub inflight: usize,
    /// Total requests in flight over all sockets (overrides --inflight; a sweep's "clients").
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Spread sockets over this many loopback source addresses (127.0.0.1, .2, ...); 0 binds
    /// to the unspecified address.
    #[arg(long, default_value_t = 16)]
    pub source_ips: u32,
    /// Socket receive buffer in bytes (0 = system default).
    #[arg(long, default_value_t = 8_000_000)]
    pub recv_buffer: usize,
    /// Datagrams per recvmmsg call.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Send each request as a datagram of its own instead of through UDP GSO (runs of
    /// equal-sized requests handed to the kernel as one message that it cuts into the
    /// same datagrams; turned off by itself where the kernel refuses it).
    #[arg(long)]
    pub no_gso: bool,
    /// Before the warm-up, announce every simulated peer once (`started`), as fast as the
    /// tracker answers (closed loop), and report the fill's rate and the tracker's memory
    /// after it (with --tracker-pid).
    #[arg(long)]
    pub fill: bool,
    /// Longest the fill may take; what is left is not announced.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub fill_timeout: Duration,
    /// Open loop: requests are due on a grid of this step (those due within one step leave
    /// together in one send, and are timed from the step), so that the sender sleeps
    /// between steps instead of waking for each request.
    #[arg(long, default_value = "100us", value_parser = parse_tick)]
    pub tick: Duration,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

/// `--tick`: a duration as `--duration` takes it, or microseconds as `100us`.
fn parse_tick(s: &str) -> Result<Duration, String> {
    match s.trim().strip_suffix("us") {
        Some(us) => us
            .trim()
            .parse::<u64>()
            .map(Duration::from_micros)
            .map_err(|_| format!("not a tick: {s:?} (try 100us, 1ms)")),
        None => parse_duration(s),
    }
}

/// Runs `shoal-bench udp` and returns its result.
pub fn run(args: &UdpArgs) -> Result<RunResult> {
    let passkeys = Passkeys::from_args(&args.workload)?.map(Arc::new);
    let mut args = args.clone();
    if passkeys.is_some() {
        // A UDP scrape has no room for URL data: a private tracker refuses them all.
        args.workload.weight_scrape = 0;
    }
    let args = &args;
    let workers = args.run.workers.max(1);
    let layout = spread::slots(
        workers,
        args.sockets_per_worker,
        args.inflight,
        args.concurrency,
    );
    let concurrency: usize = layout.iter().flatten().sum();
    // Every worker is built (sockets bound, peers laid out) before any clock starts.
    let mut built = Vec::new();
    for (w, sockets) in layout.into_iter().enumerate() {
        built.push(
            Worker::new(args, w, workers, &sockets, passkeys.clone())
                .with_context(|| format!("setting up UDP worker {w}"))?,
        );
    }
    let answered = Arc::new(AtomicU64::new(0));
    let (filled_tx, filled_rx) = mpsc::channel::<Filled>();
    let mut starts = Vec::new();
    let mut handles = Vec::new();
    for (w, mut worker) in built.into_iter().enumerate() {
        let (start_tx, start_rx) = mpsc::channel::<Arc<Control>>();
        starts.push(start_tx);
        let (fill, timeout) = (args.fill, args.fill_timeout);
        let (answered, filled_tx) = (answered.clone(), filled_tx.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("udp-{w}"))
                .spawn(move || {
                    if fill {
                        let _ = filled_tx.send(worker.fill(timeout, &answered));
                    }
                    drop(filled_tx);
                    // No start: the run was called off (a fill that failed).
                    start_rx.recv().map(|ctl| worker.run(ctl)).ok()
                })?,
        );
    }
    drop(filled_tx);
    let fill = if args.fill {
        Some(supervise_fill(args, workers, &filled_rx, &answered))
    } else {
        None
    };
    let ctl = Control::new(&args.run);
    for start in starts {
        let _ = start.send(ctl.clone());
    }
    let cpu = supervise(&ctl, &args.run, &format!("udp {}", args.target));
    let mut stats = Stats::new();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a UDP worker panicked"))?;
        stats.merge(&s.ok_or_else(|| anyhow::anyhow!("a UDP worker stopped before the run"))?);
    }
    let cpu = cpu.map_err(|e| stats.explain(e))?;
    let summary = stats.summary(args.run.duration.as_secs_f64());
    let mut result = RunResult::new(
        "udp",
        args.target.to_string(),
        &args.run,
        concurrency,
        summary,
        cpu,
    );
    result.fill = fill;
    Ok(result)
}

/// Waits for every worker's fill, showing progress, and sums them up with the CPU both
/// sides used and the memory both hold after it.
fn supervise_fill(
    args: &UdpArgs,
    workers: usize,
    filled: &mpsc::Receiver<Filled>,
    answered: &AtomicU64,
) -> Fill {
    let bar = if args.run.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(args.workload.peers as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} fill {prefix} [{bar:30}] {pos}/{len} answered, {per_sec} {elapsed}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar.set_prefix(args.target.to_string());
        bar
    };
    let start = Instant::now();
    let before = CpuSnapshot::take(args.run.tracker_pid);
    let mut stats = Stats::new();
    let (mut announced, mut asked, mut complete) = (0, 0, true);
    let mut torrents: Vec<u64> = Vec::new();
    let mut done = 0;
    while done < workers {
        match filled.recv_timeout(Duration::from_millis(200)) {
            Ok(f) => {
                stats.merge(&f.stats);
                announced += f.announced;
                asked += f.asked;
                complete &= f.complete;
                torrents.resize(torrents.len().max(f.torrents.len()), 0);
                for (a, b) in torrents.iter_mut().zip(&f.torrents) {
                    *a |= b;
                }
                done += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // A worker died: what the others did is still worth reporting.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                complete = false;
                break;
            }
        }
        bar.set_position(answered.load(Ordering::Relaxed));
    }
    let after = CpuSnapshot::take(args.run.tracker_pid);
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let cpu = before.until(&after);
    let summary = stats.summary(seconds);
    let answers = stats.responses(Op::Announce);
    Fill {
        peers: announced,
        peers_asked: asked,
        answered: answers,
        errors: summary.errors.into_iter().filter(|(_, n)| *n > 0).collect(),
        torrents: torrents.iter().map(|w| w.count_ones() as u64).sum(),
        seconds,
        per_second: answers as f64 / seconds.max(1e-9),
        complete,
        responses_per_tracker_cpu_second: cpu
            .tracker_cpu_seconds
            .filter(|&t| t > 0.0)
            .map(|t| answers as f64 / t),
        cpu,
        tracker_rss_kib: args.run.tracker_pid.and_then(crate::cpu::rss_kib),
        generator_rss_kib: crate::cpu::own_memory_kib().0,
        announce: summary.ops.get("announce").cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct A {
        #[command(flatten)]
        a: UdpArgs,
    }

    #[test]
    fn concurrency_spreads_over_sockets() {
        let a = A::parse_from(["t", "--target", "127.0.0.1:1", "--concurrency", "10"]).a;
        let slots = |a: &UdpArgs, workers| {
            spread::slots(workers, a.sockets_per_worker, a.inflight, a.concurrency)
        };
        let l = slots(&a, 2);
        assert_eq!(l.iter().flatten().sum::<usize>(), 10);
        assert_eq!(l.iter().map(|w| w.len()).sum::<usize>(), 8);
        let one = A::parse_from(["t", "--target", "127.0.0.1:1", "--concurrency", "1"]).a;
        assert_eq!(slots(&one, 2), vec![vec![1], vec![]]);
    }
}
