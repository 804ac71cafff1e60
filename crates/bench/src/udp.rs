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
//! omission).

mod answer;
mod sock;
mod spread;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use crate::passkeys::Passkeys;
use crate::run::{supervise, Control, RunArgs, RunResult};
use crate::stats::Stats;
use crate::workload::WorkloadArgs;
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
    #[command(flatten)]
    pub workload: WorkloadArgs,
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
    let ctl = Control::new(&args.run);
    let mut handles = Vec::new();
    for (w, sockets) in layout.into_iter().enumerate() {
        let worker = Worker::new(args, w, workers, &sockets, ctl.clone(), passkeys.clone())
            .with_context(|| format!("setting up UDP worker {w}"))?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("udp-{w}"))
                .spawn(move || worker.run())?,
        );
    }
    let cpu = supervise(&ctl, &args.run, &format!("udp {}", args.target));
    let mut stats = Stats::new();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a UDP worker panicked"))?;
        stats.merge(&s);
    }
    let cpu = cpu.map_err(|e| stats.explain(e))?;
    let summary = stats.summary(args.run.duration.as_secs_f64());
    Ok(RunResult::new(
        "udp",
        args.target.to_string(),
        &args.run,
        concurrency,
        summary,
        cpu,
    ))
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
