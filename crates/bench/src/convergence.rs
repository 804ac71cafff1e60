//! How long a cluster takes to converge: `shoal-bench convergence --from A --to B`
//! announces a seeder of a fresh torrent to node A over UDP, then scrapes node B over UDP
//! every millisecond until B counts it, and reports the times (p50, p99, max) over many
//! samples. Run it while another shoal-bench loads the nodes to see convergence under load.
//!
//! It also reads the nodes' `/metrics` (with `--metrics URL`, repeatable) before and after
//! and reports the Redis commands per announce the whole run cost them
//! (`shoal_cluster_redis_commands_total` over `shoal_requests_total{action="announce"}`).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, ScrapeRequest, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

#[derive(Args, Debug)]
pub struct ConvergenceArgs {
    /// Node the seeder announces to (UDP address).
    #[arg(long)]
    pub from: SocketAddr,
    /// Node that is scraped until it counts the seeder (UDP address).
    #[arg(long)]
    pub to: SocketAddr,
    /// Fresh torrents to time.
    #[arg(long, default_value_t = 100)]
    pub samples: u32,
    /// Give up on one sample after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// A node's metrics URL (`http://127.0.0.1:6970/metrics`), read before and after.
    #[arg(long)]
    pub metrics: Vec<String>,
}

/// One UDP client with its connection id.
struct Node {
    socket: UdpSocket,
    addr: SocketAddr,
    cid: ConnectionId,
    tid: u32,
}

impl Node {
    fn connect(addr: SocketAddr) -> Result<Self> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut n = Self {
            socket,
            addr,
            cid: ConnectionId(0),
            tid: 0,
        };
        match n.ask(|tid| {
            Request::Connect(ConnectRequest {
                transaction_id: TransactionId(tid),
            })
        })? {
            Reply::Connected(cid) => n.cid = cid,
            _ => bail!("{addr} answered no connect"),
        }
        Ok(n)
    }

    fn ask<'a>(&mut self, request: impl Fn(u32) -> Request<'a>) -> Result<Reply> {
        for _ in 0..5 {
            self.tid = self.tid.wrapping_add(1);
            let mut out = Vec::new();
            request(self.tid).write(&mut out);
            self.socket.send_to(&out, self.addr)?;
            let mut buf = [0u8; 2048];
            let Ok((n, _)) = self.socket.recv_from(&mut buf) else {
                continue;
            };
            return Ok(match Response::parse(&buf[..n], false) {
                Ok(Response::Connect { connection_id, .. }) => Reply::Connected(connection_id),
                Ok(Response::Scrape { stats, .. }) => {
                    Reply::Seeders(stats.first().map_or(0, |s| s.seeders()))
                }
                Ok(_) => Reply::Other,
                Err(_) => Reply::Other,
            });
        }
        bail!("{} does not answer", self.addr)
    }
}

enum Reply {
    Connected(ConnectionId),
    Seeders(u32),
    Other,
}

/// A fresh info hash per sample (not one the load uses).
fn torrent(run: u64, i: u32) -> InfoHash {
    let mut h = [0xc0u8; 20];
    h[..8].copy_from_slice(&run.to_le_bytes());
    h[8..12].copy_from_slice(&i.to_le_bytes());
    InfoHash(h)
}

/// The sum of every sample of `name` in a Prometheus text page whose labels contain `with`.
fn metric(page: &str, name: &str, with: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l.contains(with))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn fetch(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .context("metrics URLs are http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    use std::io::{Read, Write};
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}

/// (Redis commands, announces) over every node's metrics page.
fn counts(urls: &[String]) -> Result<(f64, f64)> {
    let mut t = (0.0, 0.0);
    for url in urls {
        let page = fetch(url)?;
        t.0 += metric(&page, "shoal_cluster_redis_commands_total", "");
        t.1 += metric(&page, "shoal_requests_total", "action=\"announce\"");
    }
    Ok(t)
}

pub fn run(args: &ConvergenceArgs) -> Result<()> {
    let mut from = Node::connect(args.from)?;
    let mut to = Node::connect(args.to)?;
    let before = counts(&args.metrics)?;
    // Fresh torrents every run: the clock's nanoseconds name this run's.
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    let mut times = Vec::new();
    let mut lost = 0;
    for i in 0..args.samples {
        let info_hash = torrent(run_id, i);
        let cid = from.cid;
        let started = Instant::now();
        from.ask(|tid| {
            Request::Announce(AnnounceRequest {
                connection_id: cid,
                transaction_id: TransactionId(tid),
                info_hash,
                peer_id: PeerId([7; 20]),
                downloaded: 0,
                left: 0,
                uploaded: 0,
                event: AnnounceEvent::Started,
                ip: [0; 4],
                key: 0,
                numwant: 0,
                port: 6881,
            })
        })?;
        let cid = to.cid;
        let hashes = [info_hash];
        loop {
            let seen = match to.ask(|tid| {
                Request::Scrape(ScrapeRequest {
                    connection_id: cid,
                    transaction_id: TransactionId(tid),
                    info_hashes: &hashes,
                })
            })? {
                Reply::Seeders(n) => n > 0,
                _ => false,
            };
            if seen {
                times.push(started.elapsed());
                break;
            }
            if started.elapsed() > Duration::from_millis(args.timeout_ms) {
                lost += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let after = counts(&args.metrics)?;
    times.sort();
    let at = |q: f64| -> Duration {
        times
            .get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "convergence {} -> {}: {} samples, {} timed out; p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        args.from,
        args.to,
        times.len(),
        lost,
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        times.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
    if !args.metrics.is_empty() {
        let (commands, announces) = (after.0 - before.0, after.1 - before.1);
        println!(
            "Redis commands {commands:.0}, announces {announces:.0}: {:.4} commands per announce",
            if announces > 0.0 {
                commands / announces
            } else {
                0.0
            }
        );
    }
    Ok(())
}
