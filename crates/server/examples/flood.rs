// Over 600 lines: one self-contained program an operator runs alone (options, both protocols' clients and floods, queue and CPU sampling, the report).
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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::Command;
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
const TRACKER_CPU: &str = "1";
const CLIENT_CPU: &str = "0";

#[derive(Clone, Debug)]
struct Options {
    seconds: f64,
    runs: usize,
    udp: bool,
    http: bool,
    rate: f64,
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

/// The calling thread's id, for `taskset -p` and `renice -p`.
fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name().unwrap().to_string_lossy().into_owned()
}

/// Puts the calling thread on `cpu` and/or at `nice` (threads it spawns inherit both).
fn place_this_thread(cpu: Option<&str>, nice: Option<i32>) {
    let tid = thread_id();
    let run = |program: &str, args: &[&str]| {
        let ok = Command::new(program)
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{program} {args:?} failed");
    };
    if let Some(cpu) = cpu {
        run("taskset", &["-p", "-c", cpu, &tid]);
    }
    if let Some(nice) = nice {
        run("renice", &["-n", &nice.to_string(), "-p", &tid]);
    }
}

/// What the normal client saw over one phase.
struct Normal {
    sent: usize,
    latencies: Vec<Duration>,
}

impl Normal {
    fn lost(&self) -> usize {
        self.sent - self.latencies.len()
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let i = ((l.len() as f64 * p).ceil() as usize).saturating_sub(1);
        l.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Calls `once` `rate` times a second for `seconds`; `once` answers the latency.
fn steady(seconds: f64, rate: f64, mut once: impl FnMut(u32) -> Option<Duration>) -> Normal {
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate);
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

fn udp_normal(tracker: SocketAddr, o: &Options) -> Normal {
    let s = udp_socket(NORMAL);
    let cid = connect_udp(&s, tracker);
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    steady(o.seconds, o.rate, |tid| {
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

/// What a flood thread reports.
struct FloodResult {
    text: String,
    excess_refused: bool,
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

/// The tracker's UDP socket as `/proc/net/udp` shows it: (receive queue bytes, drops).
fn udp_socket_state(port: u16) -> Option<(u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f.get(1)?.ends_with(&local) {
            return None;
        }
        let rx = u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()?;
        Some((rx, f.last()?.parse().ok()?))
    })
}

/// Samples the tracker socket's queue every 10 ms until `stop`: (median and largest queue
/// in bytes, datagrams the kernel dropped because it was full).
fn sample_queue(port: u16, stop: Arc<AtomicBool>) -> (u64, u64, u64) {
    let first_drops = udp_socket_state(port).map_or(0, |s| s.1);
    let (mut queue, mut drops) = (Vec::new(), first_drops);
    while !stop.load(Ordering::Relaxed) {
        if let Some((rx, d)) = udp_socket_state(port) {
            queue.push(rx);
            drops = d;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    queue.sort_unstable();
    let median = queue.get(queue.len() / 2).copied().unwrap_or(0);
    let max = queue.last().copied().unwrap_or(0);
    (median, max, drops - first_drops)
}

/// CPU seconds used so far by this process's threads whose name starts with `prefix` (the
/// tracker's UDP workers are `udp-N`), from `/proc/self/task/*/stat`.
fn cpu_seconds(prefix: &str) -> f64 {
    let ticks = |task: &std::path::Path| -> Option<u64> {
        let comm = std::fs::read_to_string(task.join("comm")).ok()?;
        if !comm.starts_with(prefix) {
            return None;
        }
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let total: u64 = tasks.flatten().filter_map(|t| ticks(&t.path())).sum();
    // USER_HZ is 100 on Linux.
    total as f64 / 100.0
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

fn http_normal(tracker: SocketAddr, o: &Options) -> Normal {
    let mut s = tcp_from(NORMAL, tracker);
    let request = http_request(3);
    let mut buf = Vec::new();
    steady(o.seconds, o.rate, |_| {
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

/// One protocol's figures in one run.
struct Phase {
    unloaded: Normal,
    flooded: Normal,
    flood: FloodResult,
}

impl Phase {
    fn ratio(&self) -> f64 {
        self.flooded.percentile(0.99) / self.unloaded.percentile(0.99)
    }
}

/// The normal client unloaded, then again while `flood` runs.
fn run_phase<F>(normal: impl Fn() -> Normal, flood: F) -> Phase
where
    F: FnOnce(Arc<AtomicBool>) -> FloodResult + Send + 'static,
{
    let unloaded = normal();
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // The flood runs at the default priority whatever the normal client's is.
            place_this_thread(None, Some(0));
            flood(stop)
        })
    };
    // Let the flood use up its burst first.
    std::thread::sleep(Duration::from_millis(500));
    let flooded = normal();
    stop.store(true, Ordering::Relaxed);
    let flood = flooding.join().unwrap();
    Phase {
        unloaded,
        flooded,
        flood,
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
            || udp_normal(udp, o),
            move |stop| {
                let sampler = {
                    let stop = stop.clone();
                    std::thread::spawn(move || sample_queue(udp.port(), stop))
                };
                let started = Instant::now();
                let (sent, answered) = udp_flood(udp, stop);
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
            || http_normal(http, o),
            move |stop| {
                let (sent, ok, limited) = http_flood(http, stop);
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
