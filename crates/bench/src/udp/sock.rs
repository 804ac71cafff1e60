//! One UDP socket of a worker and the requests it keeps in flight.
//!
//! A request lives in a fixed *slot* from the moment it is encoded until its answer, its
//! timeout or a refused send frees it; its transaction id is `generation << 16 | slot`, so
//! matching an answer is an array look-up and a late or forged answer is caught by the
//! generation. The encoded bytes wait in the slot's buffer until the next send hands the
//! socket's whole queue to the kernel at once. The worker decides what to send and when;
//! this file keeps the slots' books, in one place for every way a request ends.

use std::net::{SocketAddr, UdpSocket};

use anyhow::{Context, Result};
use shoal_datagrams::SendBatch;
use shoal_proto::udp::{ConnectionId, TransactionId};
use socket2::{Domain, Protocol, Socket, Type};

use super::answer::Asked;
use super::spread::{self, Share};
use super::UdpArgs;
use crate::stats::{ErrorKind, Op, Stats};

/// Nanoseconds a socket waits before sending again after the kernel refused it.
const BACKOFF_NS: u64 = 10_000_000;

#[derive(Clone, Copy, Default)]
pub(super) struct Slot {
    tid: u32,
    busy: bool,
    /// Queued but not yet handed to the kernel.
    queued: bool,
    /// What the answer must match.
    pub(super) asked: Asked,
    /// When it left (for timeouts).
    sent_ns: u64,
    /// Latency origin: the send time (closed loop) or the due time (open loop).
    pub(super) origin_ns: u64,
    len: u16,
}

pub(super) struct Sock {
    pub(super) socket: UdpSocket,
    slots: Vec<Slot>,
    bufs: Vec<u8>,
    buf_len: usize,
    free: Vec<u16>,
    queue: Vec<u16>,
    generation: u16,
    pub(super) conn: Option<ConnectionId>,
    pub(super) conn_expires_ns: u64,
    pub(super) connecting: bool,
    /// The worker's peers that live behind this socket.
    pub(super) peers: Share,
    /// `--sweep`: the next of `peers` to announce.
    cursor: u32,
    backoff_until_ns: u64,
}

impl Sock {
    /// Opens the `k`th socket of the load (which picks its source address), bound and
    /// connected to the target, with `nslots` slots of `buf_len` bytes each.
    pub(super) fn open(
        args: &UdpArgs,
        k: u32,
        nslots: usize,
        buf_len: usize,
        peers: Share,
        generation: u16,
    ) -> Result<Sock> {
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
        Ok(Sock {
            socket: socket.into(),
            slots: vec![Slot::default(); nslots],
            bufs: vec![0; nslots * buf_len],
            buf_len,
            free: (0..nslots as u16).rev().collect(),
            queue: Vec::with_capacity(nslots),
            generation,
            conn: None,
            conn_expires_ns: 0,
            connecting: false,
            peers,
            cursor: 0,
            backoff_until_ns: 0,
        })
    }

    /// `--sweep`: the position in `peers` of the next peer to announce, in turn.
    pub(super) fn next_in_turn(&mut self) -> u32 {
        let k = self.cursor;
        self.cursor = (k + 1) % self.peers.count().max(1);
        k
    }

    /// Whether a request of any kind may start now: a slot is free and no back-off runs.
    pub(super) fn has_room(&self, now: u64) -> bool {
        !self.free.is_empty() && now >= self.backoff_until_ns
    }

    /// Requests queued or in flight.
    pub(super) fn busy(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Holds sends back for a while (the target port refused, most often).
    pub(super) fn back_off(&mut self, now: u64) {
        self.backoff_until_ns = now + BACKOFF_NS;
    }

    /// Takes a free slot for a new request: its index and the request's transaction id.
    pub(super) fn claim(&mut self) -> Option<(u16, TransactionId)> {
        let idx = self.free.pop()?;
        self.generation = self.generation.wrapping_add(1);
        Some((
            idx,
            TransactionId(((self.generation as u32) << 16) | idx as u32),
        ))
    }

    /// Stores the request `packet` (cut to the slot's size) in the claimed slot `idx` and
    /// queues it for the next send. Returns the bytes stored.
    pub(super) fn queue(
        &mut self,
        idx: u16,
        tid: TransactionId,
        packet: &[u8],
        asked: Asked,
        origin_ns: u64,
    ) -> usize {
        let len = packet.len().min(self.buf_len);
        let at = idx as usize * self.buf_len;
        self.bufs[at..at + len].copy_from_slice(&packet[..len]);
        self.slots[idx as usize] = Slot {
            tid: tid.0,
            busy: true,
            queued: true,
            asked,
            sent_ns: 0,
            origin_ns,
            len: len as u16,
        };
        self.queue.push(idx);
        len
    }

    /// Frees slot `idx`, however its request ended; a connect that ends lets the next one
    /// start.
    fn release(&mut self, idx: u16) {
        let slot = &mut self.slots[idx as usize];
        slot.busy = false;
        slot.queued = false;
        if slot.asked.op == Op::Connect {
            self.connecting = false;
        }
        self.free.push(idx);
    }

    /// The request that an answer with transaction id `tid` answers, its slot freed; `None`
    /// for an answer to no request in flight (late, repeated or forged).
    pub(super) fn answered(&mut self, tid: u32) -> Option<Slot> {
        let idx = (tid & 0xffff) as usize;
        let slot = *self.slots.get(idx)?;
        if !slot.busy || slot.queued || slot.tid != tid {
            return None;
        }
        self.release(idx as u16);
        Some(slot)
    }

    /// Frees the requests sent more than `timeout_ns` before `now`; how many there were.
    pub(super) fn expire(&mut self, now: u64, timeout_ns: u64) -> u64 {
        let mut expired = 0;
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            if slot.busy && !slot.queued && now.saturating_sub(slot.sent_ns) > timeout_ns {
                self.release(i as u16);
                expired += 1;
            }
        }
        expired
    }

    /// Hands every queued request to the kernel in one call, counting the bytes sent into
    /// `stats`; latency runs from now where `closed_loop` (and for connects). A refused
    /// send drops the queue and backs off. Returns how many requests left.
    pub(super) fn send_queued(
        &mut self,
        send: &mut SendBatch,
        now: u64,
        closed_loop: bool,
        stats: &mut Stats,
    ) -> usize {
        if send.gso_enabled() {
            // GSO sends each run of equal-sized datagrams as one message: requests of
            // one size in a row make the runs as long as the kernel allows (aquatic's
            // mix, half connects and half announces, otherwise has runs of two). The
            // order of independent requests means nothing to the tracker.
            let slots = &self.slots;
            self.queue.sort_unstable_by_key(|&i| slots[i as usize].len);
        }
        let packets: Vec<&[u8]> = self
            .queue
            .iter()
            .map(|&i| {
                let at = i as usize * self.buf_len;
                &self.bufs[at..at + self.slots[i as usize].len as usize]
            })
            .collect();
        let result = send.send(&self.socket, &packets);
        drop(packets);
        match result {
            Ok(n) => {
                for &i in &self.queue[..n] {
                    let slot = &mut self.slots[i as usize];
                    slot.queued = false;
                    slot.sent_ns = now;
                    if closed_loop || slot.asked.op == Op::Connect {
                        slot.origin_ns = now;
                    }
                    stats.bytes_out += slot.len as u64;
                }
                self.queue.drain(..n);
                n
            }
            Err(_) => {
                // The kernel refused the batch (ECONNREFUSED after an ICMP port
                // unreachable, most often): drop it and back off a little.
                stats.error(ErrorKind::Send);
                for k in 0..self.queue.len() {
                    self.release(self.queue[k]);
                }
                self.queue.clear();
                self.back_off(now);
                0
            }
        }
    }

    /// Whether requests wait for the next send.
    pub(super) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }
}
