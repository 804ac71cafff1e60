//! One UDP worker thread: its sockets, the request mix it draws from, and the loop that
//! receives, times out, issues and sends.
//!
//! The loop reads the clock once per batch. Closed loop, it refills every free slot at
//! once; open loop (`--rate`), it issues each request at its due time (`pace.rs`) on the
//! next socket with room, and a request that finds none stays due, so its latency counts
//! the wait. Between ticks an open-loop worker sleeps in `ppoll` until the next request is
//! due or an answer arrives, and then reads only the sockets that have one. Each socket
//! renews its connection id at a random moment 60–110 s after it got it.
//!
//! A worker is built, and its peers laid out, before the run's clock starts: set-up time
//! at 30 million peers once made every open-loop request of the first seconds late, and the
//! run counted that as the tracker's latency.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use shoal_datagrams::{Datagrams, SendBatch, Wait};
use shoal_proto::udp::{AnnounceRequest, ConnectRequest, Request, ScrapeRequest};
use shoal_proto::InfoHash;

use super::answer::{self, Answer, Asked};
use super::pace::Schedule;
use super::sock::Sock;
use super::spread;
use super::spread::Share;
use super::UdpArgs;
use crate::passkeys::Passkeys;
use crate::run::Control;
use crate::stats::{ErrorKind, Op, Stats};
use crate::sys::{self, MAX_DATAGRAM};
use crate::workload::{RequestKind, Workload};

/// Connection ids are reused for a random time in this range, as clients do.
const RECONNECT_MIN: Duration = Duration::from_secs(60);
const RECONNECT_MAX: Duration = Duration::from_secs(110);

pub(super) struct Worker {
    /// The instant all of this worker's times count from (fill and run alike, so that a
    /// connection id or a slot's send time outlives the fill).
    epoch: Instant,
    pub(super) socks: Vec<Sock>,
    pub(super) workload: Workload,
    pub(super) stats: Stats,
    ipv6: bool,
    /// `--peer-ips`: each peer's own address in the announce.
    peer_ips: bool,
    timeout_ns: u64,
    /// Open loop: when this worker's requests are due.
    schedule: Option<Schedule>,
    /// In the fill, which is closed loop whatever the run is.
    pub(super) filling: bool,
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
    pub(super) fn new(
        args: &UdpArgs,
        index: usize,
        workers: usize,
        slots_per_socket: &[usize],
        passkeys: Option<Arc<Passkeys>>,
    ) -> Result<Self> {
        let keys = passkeys.as_ref().map_or(1, |p| p.keys().len());
        let mut workload = Workload::new(&args.workload, index, workers).with_keys(keys);
        let nsock = slots_per_socket.len().max(1);
        let url_data = passkeys.as_ref().map_or(0, |p| p.udp_url_data_len());
        let buf_len = (16 + 20 * args.workload.scrape_hashes.max(1))
            .max(shoal_proto::udp::ANNOUNCE_REQUEST_LEN + url_data);
        let mut socks = Vec::new();
        for (s, &nslots) in slots_per_socket.iter().enumerate() {
            let k = (index + s * workers) as u32;
            let peers = Share::of(s, nsock, workload.peer_count());
            let generation = workload.rng.u16(..);
            socks.push(Sock::open(args, k, nslots, buf_len, peers, generation)?);
        }
        let schedule = args
            .run
            .rate
            .map(|r| Schedule::new(r / workers as f64, args.tick));
        Ok(Self {
            epoch: Instant::now(),
            socks,
            workload,
            stats: Stats::new(),
            ipv6: args.target.is_ipv6(),
            peer_ips: args.peer_ips,
            timeout_ns: args.run.timeout.as_nanos() as u64,
            schedule,
            filling: false,
            recv: Datagrams::new(args.batch.clamp(1, 1024), MAX_DATAGRAM),
            send: SendBatch::new().gso(!args.no_gso),
            hashes: Vec::new(),
            packet: Vec::with_capacity(buf_len),
            passkeys,
        })
    }

    pub(super) fn now(&self) -> u64 {
        ns_since(self.epoch, Instant::now())
    }

    /// Runs the load between `ctl`'s start and end and returns what it counted over the
    /// measured window.
    pub(super) fn run(mut self, ctl: Arc<Control>) -> Stats {
        let start_ns = ns_since(self.epoch, ctl.start);
        let measure_from_ns = ns_since(self.epoch, ctl.measure_from);
        let end_ns = ns_since(self.epoch, ctl.end);
        if self.schedule.is_some() {
            // Best effort: without it a tick's wake-up may come 50 µs late.
            let _ = sys::set_timer_slack(1_000);
        }
        let mut measuring = false;
        self.stats.reset();
        let mut next_timeout_scan = 0u64;
        // Open loop: index of the next due request of this worker, and whether the requests
        // now leaving were held back by a full in-flight window (so their lateness is the
        // tracker's slowness to answer, not the sender's).
        let mut next_due = 0u64;
        let mut blocked = false;
        let mut reported = 0u64;
        // Sockets to read: bit s for socket s (past 64, the last bit stands for the rest).
        let mut readable = u64::MAX;
        loop {
            let now = self.now();
            if now >= end_ns || ctl.stopped() {
                break;
            }
            if !measuring && now >= measure_from_ns {
                self.stats.reset();
                measuring = true;
            }
            let (received, now) = self.tend(readable, &mut next_timeout_scan);
            match self.schedule {
                None => {
                    for s in 0..self.socks.len() {
                        while self.can_issue(s, now) {
                            self.issue(s, now);
                        }
                    }
                }
                Some(schedule) => {
                    let nsock = self.socks.len();
                    'due: loop {
                        let due = schedule.due_ns(next_due);
                        if start_ns + due > now {
                            blocked = false;
                            break;
                        }
                        // A tick's requests go out on one socket, the next tick's on the
                        // next: one send and one read of answers per tick, where a socket
                        // per request took a system call each (and a wake-up each).
                        let mut s = (due / schedule.tick_ns()) as usize % nsock;
                        let mut tried = 0;
                        while !self.can_issue(s, now) {
                            s = (s + 1) % nsock;
                            tried += 1;
                            if tried == nsock {
                                // Every slot busy: the request stays due, and its latency
                                // will count the wait.
                                blocked = true;
                                break 'due;
                            }
                        }
                        let due = start_ns + due;
                        if blocked {
                            self.stats.slot_waits += 1;
                        } else {
                            self.stats.send_lag.saturating_record(now - due);
                        }
                        self.issue(s, due);
                        next_due += 1;
                    }
                }
            }
            let sent = self.flush();
            self.report_responses(&ctl.responses, &mut reported);
            readable = u64::MAX;
            match self.schedule {
                None if received == 0 && sent == 0 => self.wait_any(),
                None => {}
                Some(schedule) => {
                    let now = self.now();
                    let due = start_ns + schedule.due_ns(next_due);
                    // A request that is due but found no room waits for an answer to free a
                    // slot (or for a timeout to): no sooner than the next answer, no later
                    // than the next timeout scan. One that fell due while this round was
                    // sending goes at once: waiting for an answer there, with every slot
                    // idle, once slept 10 ms at a time and made the sender late.
                    let wake = if due > now {
                        due.min(next_timeout_scan)
                    } else if blocked {
                        next_timeout_scan
                    } else {
                        now
                    }
                    .min(end_ns);
                    if wake > now {
                        readable = sys::wait_readable_for(
                            self.socks.iter().map(|s| s.socket.as_fd()),
                            Duration::from_nanos(wake - now),
                        )
                        .unwrap_or(u64::MAX);
                    }
                }
            }
        }
        if let Some(schedule) = self.schedule {
            // Requests due in the measured window that never left: the generator's backlog.
            let due = schedule.due_by(end_ns.saturating_sub(start_ns));
            self.stats.unsent = due.saturating_sub(next_due);
        }
        if !measuring {
            // The run ended inside the warm-up (or was stopped): nothing was measured.
            self.stats.reset();
        }
        self.stats
    }

    /// The start of each round of a loop over the sockets: drains those whose bit is set in
    /// `readable` (bit s for socket s; past 64, the last bit stands for the rest), times
    /// out old requests once `next_timeout_scan` has come (and sets the next scan 10 ms
    /// on), and renews connections. Returns how many datagrams arrived, and the time after
    /// reading them.
    pub(super) fn tend(&mut self, readable: u64, next_timeout_scan: &mut u64) -> (usize, u64) {
        let mut received = 0;
        for s in 0..self.socks.len() {
            if readable & (1 << s.min(63)) != 0 {
                received += self.receive(s);
            }
        }
        let now = self.now();
        if now >= *next_timeout_scan {
            self.expire(now);
            *next_timeout_scan = now + 10_000_000;
        }
        self.maintain_connections(now);
        (received, now)
    }

    /// Adds the responses counted since `reported` to `counter` (for the progress bar).
    pub(super) fn report_responses(&self, counter: &AtomicU64, reported: &mut u64) {
        let total = self.stats.total_responses();
        if total != *reported {
            counter.fetch_add(total.saturating_sub(*reported), Ordering::Relaxed);
            *reported = total;
        }
    }

    /// Waits up to 1 ms for any socket to become readable.
    pub(super) fn wait_any(&self) {
        let _ = sys::wait_readable(self.socks.iter().map(|s| s.socket.as_fd()), 1);
    }

    /// Drains one socket's waiting datagrams; returns how many arrived.
    pub(super) fn receive(&mut self, s: usize) -> usize {
        let mut total = 0;
        for _ in 0..4 {
            let n = match self.recv.recv(&self.socks[s].socket, Wait::No) {
                Ok(n) => n,
                Err(_) => {
                    // ECONNREFUSED: the target port is closed (ICMP port unreachable).
                    self.stats.error(ErrorKind::Connection);
                    let now = self.now();
                    self.socks[s].back_off(now);
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
        let Some(slot) = sock.answered(tid) else {
            self.stats.error(ErrorKind::UnknownTransaction);
            return;
        };
        let latency = now.saturating_sub(slot.origin_ns);
        let outcome = match answer::check(data, truncated, self.ipv6, slot.asked) {
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
                self.stats.record(slot.asked.op, latency);
            }
            Err(kind) => self.stats.error(kind),
        }
    }

    /// Times out requests that were sent more than `timeout` ago.
    pub(super) fn expire(&mut self, now: u64) {
        for sock in &mut self.socks {
            self.stats.errors[ErrorKind::Timeout as usize] += sock.expire(now, self.timeout_ns);
        }
    }

    /// Sends a connect on every socket whose connection id is missing or old.
    pub(super) fn maintain_connections(&mut self, now: u64) {
        for s in 0..self.socks.len() {
            let sock = &self.socks[s];
            let needs = sock.conn.is_none() || now >= sock.conn_expires_ns;
            if needs && !sock.connecting && sock.has_room(now) {
                self.start(s, RequestKind::Connect, now);
            }
        }
    }

    pub(super) fn can_issue(&self, s: usize, now: u64) -> bool {
        let sock = &self.socks[s];
        sock.conn.is_some() && sock.has_room(now)
    }

    /// Issues the next request of the mix on socket `s`, with latency counted from
    /// `origin_ns`.
    fn issue(&mut self, s: usize, origin_ns: u64) {
        let kind = self.workload.next_kind();
        self.start(s, kind, origin_ns);
    }

    /// Encodes a request of `kind` into a free slot of socket `s` and queues it.
    fn start(&mut self, s: usize, kind: RequestKind, origin_ns: u64) {
        self.start_with(s, kind, None, origin_ns);
    }

    /// Queues an announce of the worker's peer `p` on socket `s` (a fill's).
    pub(super) fn announce_peer(&mut self, s: usize, p: usize, origin_ns: u64) {
        self.start_with(s, RequestKind::Announce, Some(p), origin_ns);
    }

    /// [`Self::start`], an announce by `peer` where given, else by a random peer of the
    /// socket.
    fn start_with(&mut self, s: usize, kind: RequestKind, peer: Option<usize>, origin_ns: u64) {
        let sock = &mut self.socks[s];
        let Some((idx, tid)) = sock.claim() else {
            return;
        };
        let conn = sock.conn.unwrap_or_default();
        self.packet.clear();
        let asked = match kind {
            RequestKind::Connect => {
                sock.connecting = true;
                Request::Connect(ConnectRequest {
                    transaction_id: tid,
                })
                .write(&mut self.packet);
                Asked {
                    op: Op::Connect,
                    numwant: 0,
                    hashes: 0,
                }
            }
            RequestKind::Announce => {
                let p = peer.unwrap_or_else(|| {
                    let k = if self.workload.args.sweep {
                        sock.next_in_turn()
                    } else {
                        self.workload.rng.u32(..sock.peers.count())
                    };
                    sock.peers.nth(k)
                });
                let a = self.workload.announce(p);
                Request::Announce(AnnounceRequest {
                    connection_id: conn,
                    transaction_id: tid,
                    info_hash: a.info_hash,
                    peer_id: a.peer_id,
                    downloaded: a.downloaded,
                    left: a.left,
                    uploaded: a.uploaded,
                    event: a.event,
                    ip: if self.peer_ips {
                        spread::peer_ip(a.peer)
                    } else {
                        [0; 4]
                    },
                    key: a.key,
                    numwant: a.numwant as i32,
                    port: a.port,
                })
                .write(&mut self.packet);
                if let Some(keys) = &self.passkeys {
                    keys.write_udp_url_data(a.peer, &mut self.packet);
                }
                Asked {
                    op: Op::Announce,
                    numwant: a.numwant,
                    hashes: 0,
                }
            }
            RequestKind::Scrape => {
                self.workload.scrape(&mut self.hashes);
                Request::Scrape(ScrapeRequest {
                    connection_id: conn,
                    transaction_id: tid,
                    info_hashes: &self.hashes,
                })
                .write(&mut self.packet);
                Asked {
                    op: Op::Scrape,
                    numwant: 0,
                    hashes: self.hashes.len() as u16,
                }
            }
        };
        self.socks[s].queue(idx, tid, &self.packet, asked, origin_ns);
        self.stats.sent[asked.op as usize] += 1;
    }

    /// Hands every queued request to the kernel, one `sendmmsg` per socket.
    pub(super) fn flush(&mut self) -> usize {
        let mut total = 0;
        let closed_loop = self.schedule.is_none() || self.filling;
        for s in 0..self.socks.len() {
            if !self.socks[s].has_queued() {
                continue;
            }
            let now = self.now();
            total += self.socks[s].send_queued(&mut self.send, now, closed_loop, &mut self.stats);
        }
        total
    }
}
