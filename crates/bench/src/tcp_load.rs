//! What the HTTP and WebTorrent generators share: a load of many TCP connections, each a
//! tokio task standing for one client, on a multi-thread runtime of `--workers` threads.
//!
//! The protocols differ only in what a connection says and checks; the rest is here, once:
//! the open-files check, the runtime, spawning the connection tasks, the run's clock (the
//! warm-up reset, the end and the stop flag) as each task sees it in [`ConnectionRun`],
//! timing connects, counting responses for the progress bar, and merging every task's
//! counts into the run's result. The UDP generator keeps its own threads (one socket
//! loop per thread, no runtime) and shares only [`Control`] and [`Stats`] with these.

use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use crate::net::Dialer;
use crate::run::{supervise, Control, RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};

/// Flags of every load over TCP connections (`http`, `ws`).
#[derive(Args, Clone, Debug)]
pub struct TcpArgs {
    /// Tracker URL: http://127.0.0.1:3000/announce or https://localhost:3443/announce for
    /// `http`, ws://127.0.0.1:3000 or wss://localhost:3443 for `ws`.
    #[arg(long)]
    pub target: String,
    /// Concurrent connections (each with one request in flight).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Spread connections over this many loopback source addresses.
    #[arg(long, default_value_t = 16)]
    pub source_ips: u32,
    /// Verify the tracker's TLS certificate against this PEM file (default: accept any).
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
}

impl TcpArgs {
    /// How connections to the target are opened (TLS offering `alpn` for https/wss).
    pub fn dialer(&self, alpn: &[&[u8]]) -> Result<Dialer> {
        Dialer::new(&self.target, self.ca_cert.as_deref(), alpn, self.source_ips)
    }
}

/// One run of a TCP generator: what it is called and how many connections it holds.
pub struct TcpLoad<'a> {
    /// `http` or `ws`: the result's protocol, and the progress bar's prefix.
    protocol: &'static str,
    target: &'a str,
    run: &'a RunArgs,
    connections: usize,
}

impl<'a> TcpLoad<'a> {
    /// A run of `tcp.connections` connections to `tcp.target`; an error if the process
    /// may not open that many files (after raising its limit as far as it can).
    pub fn new(protocol: &'static str, tcp: &'a TcpArgs, run: &'a RunArgs) -> Result<Self> {
        let connections = tcp.connections;
        if let Ok(limit) = crate::sys::raise_nofile_limit() {
            if (limit as usize) < connections + 64 {
                anyhow::bail!(
                    "{connections} connections need more open files than the limit of {limit}"
                );
            }
        }
        Ok(Self {
            protocol,
            target: &tcp.target,
            run,
            connections,
        })
    }

    /// Runs `connection` once per connection (at least one) with what they all share,
    /// drives the clock from this thread, and gathers their counts into the result.
    pub fn run<S, F, Fut>(&self, shared: S, connection: F) -> Result<RunResult>
    where
        S: Send + Sync + 'static,
        F: Fn(Arc<S>, ConnectionRun) -> Fut,
        Fut: Future<Output = Stats> + Send + 'static,
    {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.run.workers.max(1))
            .enable_all()
            .build()?;
        let ctl = Control::new(self.run);
        let shared = Arc::new(shared);
        let n = self.connections.max(1);
        let tasks: Vec<_> = (0..n)
            .map(|k| rt.spawn(connection(shared.clone(), ConnectionRun::new(k, n, &ctl))))
            .collect();
        let cpu = supervise(
            &ctl,
            self.run,
            &format!("{} {}", self.protocol, self.target),
        );
        let mut stats = Stats::for_tcp();
        rt.block_on(async {
            for t in tasks {
                if let Ok(s) = t.await {
                    stats.merge(&s);
                }
            }
        });
        rt.shutdown_timeout(Duration::from_secs(1));
        let cpu = cpu.map_err(|e| stats.explain(e))?;
        Ok(RunResult::new(
            self.protocol,
            self.target.to_string(),
            self.run,
            self.connections,
            stats.summary(self.run.duration.as_secs_f64()),
            cpu,
        ))
    }
}

/// One connection task's part of the run: which of the `n` it is, the run's clock, and
/// its own counts (no sharing on the hot path; merged at the end).
pub struct ConnectionRun {
    /// This connection's index, `0..n`.
    pub k: usize,
    /// Connections in the run.
    pub n: usize,
    pub ctl: Arc<Control>,
    pub stats: Stats,
    /// Whether the warm-up is over (and the counts were reset for it).
    measuring: bool,
}

impl ConnectionRun {
    fn new(k: usize, n: usize, ctl: &Arc<Control>) -> Self {
        Self {
            k,
            n,
            ctl: ctl.clone(),
            stats: Stats::for_tcp(),
            measuring: false,
        }
    }

    /// The time now, or `None` once the run is over (its end, or stopped); forgets the
    /// counts of the warm-up when it ends.
    pub fn next_round(&mut self) -> Option<Instant> {
        let now = Instant::now();
        if now >= self.ctl.end || self.ctl.stopped() {
            return None;
        }
        if !self.measuring && now >= self.ctl.measure_from {
            self.stats.reset();
            self.measuring = true;
        }
        Some(now)
    }

    /// Opens a connection with `open`, timed under `connect`; `None` (the failure counted,
    /// after a short pause if it was refused, so a dead target is not hammered) if it
    /// failed or took longer than `timeout`.
    pub async fn open<T>(
        &mut self,
        timeout: Duration,
        open: impl Future<Output = io::Result<T>>,
    ) -> Option<T> {
        let t = Instant::now();
        match tokio::time::timeout(timeout, open).await {
            Ok(Ok(s)) => {
                self.stats
                    .record(Op::Connect, t.elapsed().as_nanos() as u64);
                Some(s)
            }
            Ok(Err(_)) => {
                self.stats.error(ErrorKind::Connection);
                tokio::time::sleep(Duration::from_millis(10)).await;
                None
            }
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                None
            }
        }
    }

    /// Records a valid response to `op` whose latency runs from `origin`.
    pub fn answered(&mut self, op: Op, origin: Instant) {
        self.stats.record(op, origin.elapsed().as_nanos() as u64);
        self.ctl.responses.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts at the end: none if the run ended before the warm-up did.
    pub fn finish(mut self) -> Stats {
        if !self.measuring {
            self.stats.reset();
        }
        self.stats
    }
}
