//! The flood test of issue 13: one source floods, a normal client keeps announcing, and
//! per-source rate limits keep the normal client served.
//!
//! ```sh
//! cargo run --release -p shoal-server --example flood -- 60 > flood.md
//! ```
//!
//! An in-process tracker (one UDP worker, one HTTP worker, `[rate_limit]` on with its
//! defaults: 20 requests a second, bursts of 1,000) on loopback. For each protocol, first
//! unloaded, then under a flood, for SECONDS (default 10) each:
//!
//! - a normal client at 127.0.0.3 announces at a steady 10 a second (UDP: one connection
//!   id; HTTP: one keep-alive connection), timing each answer;
//! - a flooding source at 127.0.0.2 sends announces as fast as one thread can (UDP: one
//!   socket, answers drained by a second thread; HTTP: pipelined on keep-alive
//!   connections, reopened when the tracker closes them after its 429s).
//!
//! It prints a Markdown report: the normal client's answers and p50/p99 unloaded and under
//! the flood, and what the flood got (answers, 429s, and what the tracker counted as over
//! the limit). The issue's criteria are checked and printed: no answer lost by the normal
//! client, its p99 under the flood within 3x of unloaded, the flood's excess unanswered
//! (UDP) or answered 429 (HTTP). It exits 1 if one fails. Timings depend on the machine: run
//! it on a quiet one (the tracker, both clients and the flood share its cores).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};

const NORMAL: &str = "127.0.0.3";
const FLOOD: &str = "127.0.0.2";
const NORMAL_RATE: f64 = 10.0;

/// What the normal client saw over one phase.
struct Normal {
    sent: usize,
    latencies: Vec<Duration>,
}

impl Normal {
    fn lost(&self) -> usize {
        self.sent - self.latencies.len()
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort_unstable();
        l.get(((l.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Calls `once` NORMAL_RATE times a second for `seconds`; `once` answers the latency.
fn steady(seconds: f64, mut once: impl FnMut(u32) -> Option<Duration>) -> Normal {
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / NORMAL_RATE);
    let mut normal = Normal {
        sent: 0,
        latencies: Vec::new(),
    };
    let mut n = 0u32;
    while start.elapsed().as_secs_f64() < seconds {
        let due = start + every * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        n += 1;
        normal.sent += 1;
        if let Some(l) = once(n) {
            normal.latencies.push(l);
        }
    }
    normal
}

fn udp_socket(from: &str) -> UdpSocket {
    let s = UdpSocket::bind(format!("{from}:0")).expect("a loopback address");
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s
}

fn connect_udp(s: &UdpSocket, tracker: SocketAddr) -> ConnectionId {
    let mut out = Vec::new();
    Request::Connect(ConnectRequest {
        transaction_id: TransactionId(0),
    })
    .write(&mut out);
    s.send_to(&out, tracker).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = s.recv_from(&mut buf).expect("a connect answer");
    match Response::parse(&buf[..n], false) {
        Ok(Response::Connect { connection_id, .. }) => connection_id,
        other => panic!("not a connect answer: {other:?}"),
    }
}

fn udp_announce(cid: ConnectionId, tid: u32, peer: u8, out: &mut Vec<u8>) {
    out.clear();
    Request::Announce(AnnounceRequest {
        connection_id: cid,
        transaction_id: TransactionId(tid),
        info_hash: InfoHash([0x42; 20]),
        peer_id: PeerId([peer; 20]),
        downloaded: 0,
        left: 1,
        uploaded: 0,
        event: AnnounceEvent::None,
        ip: [0; 4],
        key: 0,
        numwant: 10,
        port: 6881,
    })
    .write(out);
}

fn udp_normal(tracker: SocketAddr, seconds: f64) -> Normal {
    let s = udp_socket(NORMAL);
    let cid = connect_udp(&s, tracker);
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    steady(seconds, |tid| {
        udp_announce(cid, tid, 3, &mut out);
        let sent = Instant::now();
        s.send_to(&out, tracker).unwrap();
        // Answers to earlier (timed-out) requests are skipped by transaction id.
        while let Ok((n, _)) = s.recv_from(&mut buf) {
            if n >= 8 && buf[4..8] == tid.to_be_bytes() {
                return Some(sent.elapsed());
            }
        }
        None
    })
}

/// Floods from FLOOD until `stop`; returns (sent, answered).
fn udp_flood(tracker: SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64) {
    let s = udp_socket(FLOOD);
    let cid = connect_udp(&s, tracker);
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let answered = Arc::new(AtomicU64::new(0));
    let drain = {
        let (s, stop, answered) = (s.try_clone().unwrap(), stop.clone(), answered.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if s.recv_from(&mut buf).is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let mut out = Vec::new();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        udp_announce(cid, sent as u32, 2, &mut out);
        if s.send_to(&out, tracker).is_ok() {
            sent += 1;
        }
    }
    drain.join().unwrap();
    (sent, answered.load(Ordering::Relaxed))
}

/// A connection from loopback address `from` (retried while the ports are busy).
fn tcp_from(from: &str, tracker: SocketAddr) -> TcpStream {
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    loop {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if socket.bind(&local.into()).is_ok() && socket.connect(&tracker.into()).is_ok() {
            let s: TcpStream = socket.into();
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            return s;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn http_request(peer: u8) -> Vec<u8> {
    let ih = "%42".repeat(20);
    let pid = format!("{peer:02x}").repeat(10);
    format!(
        "GET /announce?info_hash={ih}&peer_id={pid}&port=6881&left=1&numwant=10 HTTP/1.1\r\n\
         Host: t\r\n\r\n"
    )
    .into_bytes()
}

/// Reads one response off `s` (its head and Content-Length body); returns its status.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<u16> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return head.split(' ').nth(1)?.parse().ok();
            }
        }
        let mut chunk = [0u8; 16384];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn http_normal(tracker: SocketAddr, seconds: f64) -> Normal {
    let mut s = tcp_from(NORMAL, tracker);
    let request = http_request(3);
    let mut buf = Vec::new();
    steady(seconds, |_| {
        let sent = Instant::now();
        if s.write_all(&request).is_err() {
            s = tcp_from(NORMAL, tracker);
            buf.clear();
            return None;
        }
        match read_response(&mut s, &mut buf) {
            Some(200) => Some(sent.elapsed()),
            _ => None,
        }
    })
}

/// Floods from FLOOD until `stop`: batches of pipelined announces on a keep-alive
/// connection, a new connection when the tracker closes one. Returns (sent, 200s, 429s).
fn http_flood(tracker: SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64, u64) {
    let batch: Vec<u8> = http_request(2).repeat(16);
    let (mut sent, mut ok, mut limited) = (0, 0, 0);
    while !stop.load(Ordering::Relaxed) {
        let mut s = tcp_from(FLOOD, tracker);
        let mut buf = Vec::new();
        'connection: while !stop.load(Ordering::Relaxed) {
            if s.write_all(&batch).is_err() {
                break;
            }
            sent += 16;
            for _ in 0..16 {
                match read_response(&mut s, &mut buf) {
                    Some(200) => ok += 1,
                    Some(429) => limited += 1,
                    _ => break 'connection,
                }
            }
        }
    }
    (sent, ok, limited)
}

struct Phase {
    protocol: &'static str,
    unloaded: Normal,
    flooded: Normal,
    flood: String,
    excess_refused: bool,
}

fn run_phase<F>(protocol: &'static str, normal: impl Fn() -> Normal, flood: F) -> Phase
where
    F: FnOnce(Arc<AtomicBool>) -> (String, bool) + Send + 'static,
{
    let unloaded = normal();
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = stop.clone();
        std::thread::spawn(move || flood(stop))
    };
    // Let the flood use up its burst first.
    std::thread::sleep(Duration::from_millis(500));
    let flooded = normal();
    stop.store(true, Ordering::Relaxed);
    let (flood, excess_refused) = flooding.join().unwrap();
    Phase {
        protocol,
        unloaded,
        flooded,
        flood,
        excess_refused,
    }
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS is a number"))
        .unwrap_or(10.0);
    let mut c = Config::ephemeral();
    c.workers = 1;
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.rate_limit.enabled = true;
    let limit = c.rate_limit.clone();
    let tracker = Tracker::start(c).expect("the tracker starts");
    let udp = tracker.udp_addrs()[0];
    let http = tracker.http_addrs()[0];
    let allowed = limit.burst as f64 + limit.requests_per_second as f64 * (seconds + 1.0);

    let udp_phase = run_phase(
        "UDP",
        || udp_normal(udp, seconds),
        move |stop| {
            let (sent, answered) = udp_flood(udp, stop);
            let text =
                format!("{sent} sent, {answered} answered (the limit allows about {allowed:.0})");
            (text, (answered as f64) <= allowed * 1.1 + 1.0)
        },
    );
    let udp_limited = tracker.udp_counters().rate_limited;
    let http_phase = run_phase(
        "HTTP",
        || http_normal(http, seconds),
        move |stop| {
            let (sent, ok, limited) = http_flood(http, stop);
            let text = format!(
                "{sent} sent, {ok} answered 200, {limited} answered 429 (the limit allows about \
             {allowed:.0} 200s)"
            );
            (text, (ok as f64) <= allowed * 1.1 + 1.0 && limited > 0)
        },
    );

    println!("# Flood test: one source floods, a normal client announces {NORMAL_RATE}/s\n");
    println!(
        "Rate limit: {} requests/s per source, bursts of {}; {seconds} s per phase; one \
         tracker worker per protocol. UDP datagrams dropped as over the limit (tracker's \
         count): {udp_limited}.\n",
        limit.requests_per_second, limit.burst
    );
    println!(
        "| protocol | normal answered (unloaded) | p50 / p99 unloaded (ms) | normal answered \
         (flooded) | p50 / p99 flooded (ms) | p99 ratio | flood |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut pass = true;
    for p in [&udp_phase, &http_phase] {
        let (u99, f99) = (p.unloaded.percentile(0.99), p.flooded.percentile(0.99));
        let ratio = ms(f99) / ms(u99).max(1e-3);
        println!(
            "| {} | {}/{} | {:.3} / {:.3} | {}/{} | {:.3} / {:.3} | {:.2} | {} |",
            p.protocol,
            p.unloaded.latencies.len(),
            p.unloaded.sent,
            ms(p.unloaded.percentile(0.5)),
            ms(u99),
            p.flooded.latencies.len(),
            p.flooded.sent,
            ms(p.flooded.percentile(0.5)),
            ms(f99),
            ratio,
            p.flood
        );
        let checks = [
            ("normal client lost no answer", p.flooded.lost() == 0),
            ("normal p99 within 3x of unloaded", ratio <= 3.0),
            ("flood's excess not served", p.excess_refused),
        ];
        for (what, ok) in checks {
            pass &= ok;
            eprintln!(
                "{} {}: {what}",
                if ok { "PASS" } else { "FAIL" },
                p.protocol
            );
        }
    }
    tracker.shutdown();
    std::process::exit(if pass { 0 } else { 1 });
}
