//! The UDP front end's sockets and workers.
//!
//! One thread per worker and listening address, each with its own `SO_REUSEPORT` socket:
//! the kernel spreads clients over the sockets, and a worker never hands a request to
//! another thread. A worker receives a batch with one `recvmmsg`, answers every datagram
//! straight from the store, and sends the replies with one `sendmmsg`. The clock is read
//! once per batch. A receive timeout wakes idle workers so they notice shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};

use super::connection_id::ConnectionIds;
use super::counters::{self, WorkerCounters};
use super::handler::{Handler, HandlerConfig, Now};
use crate::config::Config;
use shoal_datagrams::{Datagrams, Wait};
use shoal_tracker::Core;

/// Bytes kept for one received datagram: a scrape of 100 hashes is 2016 bytes.
const RECV_SLOT: usize = 2048;

/// Settings of the UDP front end.
#[derive(Clone, Debug)]
pub struct UdpSettings {
    pub listen: Vec<SocketAddr>,
    pub workers: usize,
    pub batch_size: usize,
    pub recv_buffer_bytes: usize,
    pub handler: HandlerConfig,
    /// Largest peer count in a response (sizes the send buffers).
    pub max_numwant: usize,
}

impl UdpSettings {
    pub fn from_config(config: &Config) -> Self {
        Self {
            listen: config.udp.listen.clone(),
            workers: config.worker_count(),
            batch_size: config.udp.batch_size,
            recv_buffer_bytes: config.udp.recv_buffer_bytes,
            handler: HandlerConfig {
                interval: config.announce.interval,
                allow_ip_field: config.udp.allow_ip_field,
                max_scrape_hashes: config.udp.max_scrape_hashes,
            },
            max_numwant: config.announce.max_numwant,
        }
    }
}

/// The running UDP front end.
pub struct UdpFrontEnd {
    pub local_addrs: Vec<SocketAddr>,
    pub counters: Vec<Arc<WorkerCounters>>,
    threads: Vec<JoinHandle<()>>,
}

/// Whether the IPv6 wildcard `addr` also takes IPv4 traffic (as IPv4-mapped addresses):
/// yes, unless an IPv4 wildcard on the same port is configured too, with which it would
/// collide. So `listen = ["[::]:6969"]` alone is one dual-stack socket, and the default
/// pair keeps one socket per family.
pub fn dual_stack(addr: SocketAddr, listen: &[SocketAddr]) -> bool {
    addr.is_ipv6()
        && addr.ip().is_unspecified()
        && !listen
            .iter()
            .any(|a| a.is_ipv4() && a.ip().is_unspecified() && a.port() == addr.port())
}

fn bind(addr: SocketAddr, recv_buffer: usize, dual: bool) -> anyhow::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // Keep the families apart unless asked (see `dual_stack`); a dual-stack socket's
        // IPv4 clients arrive as `::ffff:a.b.c.d` and are IPv4 clients in the handler.
        socket.set_only_v6(!dual)?;
    }
    socket.set_reuse_port(true)?;
    if recv_buffer > 0 {
        // Best effort: the kernel caps it at net.core.rmem_max.
        let _ = socket.set_recv_buffer_size(recv_buffer);
    }
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("binding UDP {addr}"))?;
    Ok(socket)
}

impl UdpFrontEnd {
    /// Binds every socket (so errors surface before anything runs) and starts the workers.
    pub fn start(
        config: &Config,
        core: Arc<Core>,
        ids: ConnectionIds,
        shutdown: Arc<AtomicBool>,
    ) -> anyhow::Result<Self> {
        let settings = &UdpSettings::from_config(config);
        let mut sockets = Vec::new();
        let mut local_addrs = Vec::new();
        for &addr in &settings.listen {
            // The first socket may ask for port 0; the others join the port it got.
            let dual = dual_stack(addr, &settings.listen);
            let first = bind(addr, settings.recv_buffer_bytes, dual)?;
            let actual = first
                .local_addr()?
                .as_socket()
                .context("UDP socket has no IP address")?;
            local_addrs.push(actual);
            sockets.push(first);
            for _ in 1..settings.workers.max(1) {
                sockets.push(bind(actual, settings.recv_buffer_bytes, dual)?);
            }
        }
        let send_slot = (shoal_proto::udp::ANNOUNCE_RESPONSE_HEADER_LEN
            + settings.max_numwant * 18)
            .max(8 + settings.handler.max_scrape_hashes * 12)
            .max(256);
        let mut threads = Vec::new();
        let mut counters = Vec::new();
        for (i, socket) in sockets.into_iter().enumerate() {
            let worker_counters = Arc::new(WorkerCounters::default());
            counters.push(worker_counters.clone());
            let mut handler = Handler::new(core.clone(), ids.clone(), settings.handler.clone());
            let shutdown = shutdown.clone();
            let batch = settings.batch_size;
            let thread = std::thread::Builder::new()
                .name(format!("udp-{i}"))
                .spawn(move || {
                    // Looked up once: recording into a held handle costs no registry lookup.
                    let latency = metrics::histogram!(
                        "shoal_announce_duration_seconds",
                        "protocol" => "udp"
                    );
                    let mut inbox = Datagrams::new(batch, RECV_SLOT);
                    let mut outbox = Datagrams::new(batch, send_slot);
                    run_worker(
                        &socket,
                        &mut handler,
                        &mut inbox,
                        &mut outbox,
                        &worker_counters,
                        &latency,
                        &shutdown,
                    );
                })
                .context("spawning UDP worker")?;
            threads.push(thread);
        }
        Ok(Self {
            local_addrs,
            counters,
            threads,
        })
    }

    /// Sum of every worker's counters.
    pub fn totals(&self) -> counters::LocalCounters {
        counters::total(&self.counters)
    }

    /// Waits for the workers to stop (after the shutdown flag was set).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn run_worker(
    socket: &Socket,
    handler: &mut Handler,
    inbox: &mut Datagrams,
    outbox: &mut Datagrams,
    counters: &WorkerCounters,
    latency: &metrics::Histogram,
    shutdown: &AtomicBool,
) {
    while !shutdown.load(Ordering::Relaxed) {
        let received = match inbox.recv(socket, Wait::ForOne) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                tracing::warn!("UDP receive failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        answer_batch(socket, handler, inbox, outbox, counters, received, latency);
    }
    // Shutting down. First take this socket out of the kernel's choice for new datagrams:
    // a connected UDP socket is skipped when the SO_REUSEPORT group picks a socket by hash,
    // so during an upgrade everything new goes to the other process's sockets while this
    // one empties its queue. Only for a socket bound to one address: connecting a wildcard
    // socket would also fix its source address, and the drained replies would go out from
    // the wrong one. The peer (our own address, port 9) never sends.
    leave_reuseport_selection(socket);
    // Then answer what the kernel already queued for this socket, and let it close. Bounded, so a flood cannot hold the process up; during an upgrade the other
    // process's sockets take the traffic once this one is closed.
    // A short receive timeout rather than a non-blocking socket: replies must still wait
    // for send-buffer space instead of being dropped with EAGAIN.
    if socket
        .set_read_timeout(Some(Duration::from_millis(2)))
        .is_err()
    {
        return;
    }
    for _ in 0..DRAIN_BATCHES {
        match inbox.recv(socket, Wait::ForOne) {
            Ok(received) => {
                answer_batch(socket, handler, inbox, outbox, counters, received, latency)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Timed out: nothing queued any more.
            Err(_) => break,
        }
    }
}

fn leave_reuseport_selection(socket: &Socket) {
    let Some(local) = socket.local_addr().ok().and_then(|a| a.as_socket()) else {
        return;
    };
    if local.ip().is_unspecified() {
        return;
    }
    let sink = SocketAddr::new(local.ip(), 9);
    if let Err(e) = socket.connect(&sink.into()) {
        tracing::debug!("could not take {local} out of the reuseport group: {e}");
    }
}

/// Most batches a worker answers after the shutdown flag is set.
const DRAIN_BATCHES: usize = 1024;

fn answer_batch(
    socket: &Socket,
    handler: &mut Handler,
    inbox: &mut Datagrams,
    outbox: &mut Datagrams,
    counters: &WorkerCounters,
    received: usize,
    latency: &metrics::Histogram,
) {
    let started = std::time::Instant::now();
    let announces_before = handler.counters.announce;
    let now = Now::read();
    handler.start_batch();
    let mut replies = 0;
    for i in 0..received {
        let Some(src) = inbox.addr(i) else { continue };
        let packet = inbox.payload(i);
        if let Some(len) = handler.handle(packet, src, now, outbox.buffer_mut(replies)) {
            outbox.set_len(replies, len);
            outbox.copy_addr_from(replies, inbox, i);
            replies += 1;
        }
    }
    // Published before the replies leave, so a client that got its answer sees it
    // counted.
    counters.publish(&handler.counters);
    if replies > 0 {
        outbox.send(socket, replies);
    }
    // One latency sample per batch that held announces: receive to send.
    if handler.counters.announce != announces_before {
        latency.record(started.elapsed());
    }
}
