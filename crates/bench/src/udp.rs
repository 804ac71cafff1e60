//! The UDP (BEP 15) load generator.
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
mod spread;

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, ScrapeRequest, TransactionId,
};
use shoal_proto::InfoHash;
use socket2::{Domain, Protocol, Socket, Type};

use crate::passkeys::{udp_url_data_len, write_udp_url_data, Passkeys};
use crate::run::{supervise, Control, RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};
use crate::sys::{self, MAX_DATAGRAM};
use crate::workload::{RequestKind, Workload, WorkloadArgs};
use answer::{Answer, Asked};
use shoal_datagrams::{Datagrams, SendBatch, Wait};

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

/// Connection ids are reused for a random time in this range, as clients do.
const RECONNECT_MIN: Duration = Duration::from_secs(60);
const RECONNECT_MAX: Duration = Duration::from_secs(110);

/// Runs `shoal-bench udp` and returns its result.
pub fn run(args: &UdpArgs) -> Result<RunResult> {
    let passkeys = Passkeys::from_flag(args.workload.passkeys.as_deref())?.map(Arc::new);
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

#[derive(Clone, Copy, Default)]
struct Slot {
    tid: u32,
    busy: bool,
    /// Queued but not yet handed to the kernel.
    queued: bool,
    op: Op,
    numwant: u32,
    hashes: u16,
    /// When it left (for timeouts).
    sent_ns: u64,
    /// Latency origin: the send time (closed loop) or the due time (open loop).
    origin_ns: u64,
    len: u16,
}

struct Sock {
    socket: UdpSocket,
    slots: Vec<Slot>,
    bufs: Vec<u8>,
    buf_len: usize,
    free: Vec<u16>,
    queue: Vec<u16>,
    generation: u16,
    conn: Option<ConnectionId>,
    conn_expires_ns: u64,
    connecting: bool,
    /// Indices (into the worker's peers) of the peers that live behind this socket.
    peers: Vec<u32>,
    backoff_until_ns: u64,
}

struct Worker {
    ctl: Arc<Control>,
    socks: Vec<Sock>,
    workload: Workload,
    stats: Stats,
    ipv6: bool,
    timeout_ns: u64,
    measure_from_ns: u64,
    end_ns: u64,
    /// Open loop: nanoseconds between due times of this worker's requests.
    interval_ns: Option<f64>,
    recv: Datagrams,
    send: SendBatch,
    hashes: Vec<InfoHash>,
    packet: Vec<u8>,
    /// `--passkeys`: each announce carries its peer's key as BEP 41 URL data.
    passkeys: Option<Arc<Passkeys>>,
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

impl Worker {
    fn new(
        args: &UdpArgs,
        index: usize,
        workers: usize,
        slots_per_socket: &[usize],
        ctl: Arc<Control>,
        passkeys: Option<Arc<Passkeys>>,
    ) -> Result<Self> {
        let mut workload = Workload::new(&args.workload, index, workers);
        let nsock = slots_per_socket.len().max(1);
        let url_data = passkeys
            .as_ref()
            .map_or(0, |p| udp_url_data_len(p.longest()));
        let buf_len = (16 + 20 * args.workload.scrape_hashes.max(1))
            .max(shoal_proto::udp::ANNOUNCE_REQUEST_LEN + url_data);
        let mut socks = Vec::new();
        for (s, &nslots) in slots_per_socket.iter().enumerate() {
            let k = (index + s * workers) as u32;
            let socket = Socket::new(
                Domain::for_address(args.target),
                Type::DGRAM,
                Some(Protocol::UDP),
            )?;
            if args.recv_buffer > 0 {
                // Best effort: the kernel caps it at net.core.rmem_max.
                let _ = socket.set_recv_buffer_size(args.recv_buffer);
            }
            let bind = SocketAddr::new(spread::source_ip(args.target.ip(), args.source_ips, k), 0);
            socket
                .bind(&bind.into())
                .with_context(|| format!("binding a UDP socket to {bind}"))?;
            socket.set_nonblocking(true)?;
            socket
                .connect(&args.target.into())
                .with_context(|| format!("connecting a UDP socket to {}", args.target))?;
            let mut peers: Vec<u32> = (0..workload.peers.len())
                .filter(|p| p % nsock == s)
                .map(|p| p as u32)
                .collect();
            if peers.is_empty() {
                // Fewer peers than sockets: sockets share them.
                peers.push((s % workload.peers.len()) as u32);
            }
            socks.push(Sock {
                socket: socket.into(),
                slots: vec![Slot::default(); nslots],
                bufs: vec![0; nslots * buf_len],
                buf_len,
                free: (0..nslots as u16).rev().collect(),
                queue: Vec::with_capacity(nslots),
                generation: workload.rng.u16(..),
                conn: None,
                conn_expires_ns: 0,
                connecting: false,
                peers,
                backoff_until_ns: 0,
            });
        }
        let interval_ns = args.run.rate.map(|r| 1e9 * workers as f64 / r.max(1e-3));
        let start = ctl.start;
        Ok(Self {
            measure_from_ns: ns_since(start, ctl.measure_from),
            end_ns: ns_since(start, ctl.end),
            ctl,
            socks,
            workload,
            stats: Stats::new(),
            ipv6: args.target.is_ipv6(),
            timeout_ns: args.run.timeout.as_nanos() as u64,
            interval_ns,
            recv: Datagrams::new(args.batch.clamp(1, 1024), MAX_DATAGRAM),
            send: SendBatch::new().gso(!args.no_gso),
            hashes: Vec::new(),
            packet: Vec::with_capacity(buf_len),
            passkeys,
        })
    }

    fn now(&self) -> u64 {
        ns_since(self.ctl.start, Instant::now())
    }

    fn run(mut self) -> Stats {
        let mut measuring = self.measure_from_ns == 0;
        let mut next_timeout_scan = 0u64;
        // Open loop: index of the next due request of this worker.
        let mut next_due = 0u64;
        let mut reported = 0u64;
        loop {
            let now = self.now();
            if now >= self.end_ns || self.ctl.stopped() {
                break;
            }
            if !measuring && now >= self.measure_from_ns {
                self.stats.reset();
                measuring = true;
            }
            let mut received = 0;
            for s in 0..self.socks.len() {
                received += self.receive(s);
            }
            let now = self.now();
            if now >= next_timeout_scan {
                self.expire(now);
                next_timeout_scan = now + 10_000_000;
            }
            self.maintain_connections(now);
            match self.interval_ns {
                None => {
                    for s in 0..self.socks.len() {
                        while self.can_issue(s, now) {
                            self.issue(s, now);
                        }
                    }
                }
                Some(interval) => {
                    let nsock = self.socks.len();
                    let mut s = (next_due as usize) % nsock;
                    'due: while ((next_due as f64) * interval) as u64 <= now {
                        let mut tried = 0;
                        while !self.can_issue(s, now) {
                            s = (s + 1) % nsock;
                            tried += 1;
                            if tried == nsock {
                                // Every slot busy: the request stays due, and its latency
                                // will count the wait.
                                break 'due;
                            }
                        }
                        self.issue(s, ((next_due as f64) * interval) as u64);
                        next_due += 1;
                        s = (s + 1) % nsock;
                    }
                }
            }
            let sent = self.flush();
            let total = self.stats.total_responses();
            if total != reported {
                self.ctl
                    .responses
                    .fetch_add(total.saturating_sub(reported), Ordering::Relaxed);
                reported = total;
            }
            if received == 0 && sent == 0 {
                let wait_ms = match self.interval_ns {
                    None => 1,
                    Some(interval) => {
                        let due = ((next_due as f64) * interval) as u64;
                        (due.saturating_sub(self.now()) / 1_000_000).min(1) as u16
                    }
                };
                if wait_ms > 0 {
                    let _ =
                        sys::wait_readable(self.socks.iter().map(|s| s.socket.as_fd()), wait_ms);
                }
            }
        }
        if !measuring {
            // The run ended inside the warm-up (or was stopped): nothing was measured.
            self.stats.reset();
        }
        self.stats
    }

    /// Drains one socket's waiting datagrams; returns how many arrived.
    fn receive(&mut self, s: usize) -> usize {
        let mut total = 0;
        for _ in 0..4 {
            let n = match self.recv.recv(&self.socks[s].socket, Wait::No) {
                Ok(n) => n,
                Err(_) => {
                    // ECONNREFUSED: the target port is closed (ICMP port unreachable).
                    self.stats.error(ErrorKind::Connection);
                    let now = self.now();
                    self.socks[s].backoff_until_ns = now + 10_000_000;
                    return total;
                }
            };
            let now = self.now();
            for i in 0..n {
                self.on_datagram(s, i, now);
            }
            total += n;
            if n < self.recv.capacity() {
                break;
            }
        }
        total
    }

    fn on_datagram(&mut self, s: usize, i: usize, now: u64) {
        let (data, truncated) = (self.recv.payload(i), self.recv.truncated(i));
        self.stats.bytes_in += data.len() as u64;
        if data.len() < 8 {
            self.stats.error(ErrorKind::InvalidResponse);
            return;
        }
        let tid = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        let sock = &mut self.socks[s];
        let idx = (tid & 0xffff) as usize;
        let Some(slot) = sock.slots.get_mut(idx) else {
            self.stats.error(ErrorKind::UnknownTransaction);
            return;
        };
        if !slot.busy || slot.queued || slot.tid != tid {
            self.stats.error(ErrorKind::UnknownTransaction);
            return;
        }
        slot.busy = false;
        let slot = *slot;
        sock.free.push(idx as u16);
        if slot.op == Op::Connect {
            sock.connecting = false;
        }
        let latency = now.saturating_sub(slot.origin_ns);
        let asked = Asked {
            op: slot.op,
            numwant: slot.numwant,
            hashes: slot.hashes,
        };
        let outcome = match answer::check(data, truncated, self.ipv6, asked) {
            Ok(Answer::Connected(connection_id)) => {
                let life = self
                    .workload
                    .rng
                    .u64(RECONNECT_MIN.as_nanos() as u64..RECONNECT_MAX.as_nanos() as u64);
                sock.conn = Some(connection_id);
                sock.conn_expires_ns = now + life;
                Ok(0)
            }
            Ok(Answer::Peers(n)) => Ok(n),
            Err(ErrorKind::ErrorResponse) => {
                // Most likely an expired connection id: get a fresh one.
                sock.conn = None;
                Err(ErrorKind::ErrorResponse)
            }
            Err(kind) => Err(kind),
        };
        match outcome {
            Ok(peers) => {
                self.stats.peers_received += peers as u64;
                self.stats.record(slot.op, latency);
            }
            Err(kind) => self.stats.error(kind),
        }
    }

    /// Times out requests that were sent more than `timeout` ago.
    fn expire(&mut self, now: u64) {
        for sock in &mut self.socks {
            for (i, slot) in sock.slots.iter_mut().enumerate() {
                if slot.busy && !slot.queued && now.saturating_sub(slot.sent_ns) > self.timeout_ns {
                    slot.busy = false;
                    sock.free.push(i as u16);
                    if slot.op == Op::Connect {
                        sock.connecting = false;
                    }
                    self.stats.errors[ErrorKind::Timeout as usize] += 1;
                }
            }
        }
    }

    /// Sends a connect on every socket whose connection id is missing or old.
    fn maintain_connections(&mut self, now: u64) {
        for s in 0..self.socks.len() {
            let sock = &self.socks[s];
            let needs = sock.conn.is_none() || now >= sock.conn_expires_ns;
            if needs && !sock.connecting && !sock.free.is_empty() && now >= sock.backoff_until_ns {
                self.start(s, RequestKind::Connect, now);
            }
        }
    }

    fn can_issue(&self, s: usize, now: u64) -> bool {
        let sock = &self.socks[s];
        sock.conn.is_some() && !sock.free.is_empty() && now >= sock.backoff_until_ns
    }

    /// Issues the next request of the mix on socket `s`, with latency counted from
    /// `origin_ns`.
    fn issue(&mut self, s: usize, origin_ns: u64) {
        let kind = self.workload.next_kind();
        self.start(s, kind, origin_ns);
    }

    /// Encodes a request of `kind` into a free slot of socket `s` and queues it.
    fn start(&mut self, s: usize, kind: RequestKind, origin_ns: u64) {
        let sock = &mut self.socks[s];
        let Some(idx) = sock.free.pop() else { return };
        sock.generation = sock.generation.wrapping_add(1);
        let tid = TransactionId(((sock.generation as u32) << 16) | idx as u32);
        let conn = sock.conn.unwrap_or_default();
        self.packet.clear();
        let (op, numwant, hashes) = match kind {
            RequestKind::Connect => {
                sock.connecting = true;
                Request::Connect(ConnectRequest {
                    transaction_id: tid,
                })
                .write(&mut self.packet);
                (Op::Connect, 0, 0)
            }
            RequestKind::Announce => {
                let p = sock.peers[self.workload.rng.usize(..sock.peers.len())];
                let a = self.workload.announce(p as usize);
                Request::Announce(AnnounceRequest {
                    connection_id: conn,
                    transaction_id: tid,
                    info_hash: a.info_hash,
                    peer_id: a.peer_id,
                    downloaded: a.downloaded,
                    left: a.left,
                    uploaded: a.uploaded,
                    event: a.event,
                    ip: [0; 4],
                    key: a.key,
                    numwant: a.numwant as i32,
                    port: a.port,
                })
                .write(&mut self.packet);
                if let Some(keys) = &self.passkeys {
                    write_udp_url_data(keys.of(a.peer), &mut self.packet);
                }
                (Op::Announce, a.numwant, 0)
            }
            RequestKind::Scrape => {
                self.workload.scrape(&mut self.hashes);
                Request::Scrape(ScrapeRequest {
                    connection_id: conn,
                    transaction_id: tid,
                    info_hashes: &self.hashes,
                })
                .write(&mut self.packet);
                (Op::Scrape, 0, self.hashes.len() as u16)
            }
        };
        let sock = &mut self.socks[s];
        let len = self.packet.len().min(sock.buf_len);
        let at = idx as usize * sock.buf_len;
        sock.bufs[at..at + len].copy_from_slice(&self.packet[..len]);
        sock.slots[idx as usize] = Slot {
            tid: tid.0,
            busy: true,
            queued: true,
            op,
            numwant,
            hashes,
            sent_ns: 0,
            origin_ns,
            len: len as u16,
        };
        sock.queue.push(idx);
        self.stats.sent[op as usize] += 1;
    }

    /// Hands every queued request to the kernel, one `sendmmsg` per socket.
    fn flush(&mut self) -> usize {
        let mut total = 0;
        let closed_loop = self.interval_ns.is_none();
        for s in 0..self.socks.len() {
            if self.socks[s].queue.is_empty() {
                continue;
            }
            let now = self.now();
            let sock = &mut self.socks[s];
            if self.send.gso_enabled() {
                // GSO sends each run of equal-sized datagrams as one message: requests of
                // one size in a row make the runs as long as the kernel allows (aquatic's
                // mix, half connects and half announces, otherwise has runs of two). The
                // order of independent requests means nothing to the tracker.
                let slots = &sock.slots;
                sock.queue.sort_unstable_by_key(|&i| slots[i as usize].len);
            }
            let packets: Vec<&[u8]> = sock
                .queue
                .iter()
                .map(|&i| {
                    let at = i as usize * sock.buf_len;
                    &sock.bufs[at..at + sock.slots[i as usize].len as usize]
                })
                .collect();
            let result = self.send.send(&sock.socket, &packets);
            drop(packets);
            match result {
                Ok(n) => {
                    for &i in &sock.queue[..n] {
                        let slot = &mut sock.slots[i as usize];
                        slot.queued = false;
                        slot.sent_ns = now;
                        if closed_loop || slot.op == Op::Connect {
                            slot.origin_ns = now;
                        }
                        self.stats.bytes_out += slot.len as u64;
                    }
                    sock.queue.drain(..n);
                    total += n;
                }
                Err(_) => {
                    // The kernel refused the batch (ECONNREFUSED after an ICMP port
                    // unreachable, most often): drop it and back off a little.
                    self.stats.error(ErrorKind::Send);
                    for &i in &sock.queue {
                        let slot = &mut sock.slots[i as usize];
                        slot.busy = false;
                        slot.queued = false;
                        if slot.op == Op::Connect {
                            sock.connecting = false;
                        }
                        sock.free.push(i);
                    }
                    sock.queue.clear();
                    sock.backoff_until_ns = now + 10_000_000;
                }
            }
        }
        total
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
