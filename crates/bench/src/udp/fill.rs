//! One worker's share of the fill (`--fill`): each of its simulated peers announces once,
//! `started`, in order, closed loop (a slot is refilled as soon as its answer arrives, so
//! the fill goes as fast as the tracker takes it), until all are answered or timed out, or
//! `--fill-timeout` passes.
//!
//! A tracker measured at 30 million peers must hold them first: without a fill the
//! measured window starts against an empty store that fills as it goes, and what is
//! measured is neither. Each peer announces through the socket it uses in the run, so the
//! tracker sees it at the same address; its state byte says it has started, so its next
//! announce is a plain re-announce.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::worker::Worker;
use crate::stats::Stats;
use crate::sys;

/// What one worker's fill did.
pub(super) struct Filled {
    /// Its requests and answers (connects included), latency from each send.
    pub stats: Stats,
    /// Peers whose announce was sent.
    pub announced: u64,
    /// Peers it holds.
    pub asked: u64,
    /// Bit `t` set: torrent `t` was announced.
    pub torrents: Vec<u64>,
    /// Every peer announced and every announce answered or timed out.
    pub complete: bool,
}

impl Worker {
    /// Announces each of this worker's peers once, adding answers to `answered` as they
    /// come (for the progress bar), for at most `timeout`.
    pub(super) fn fill(&mut self, timeout: Duration, answered: &AtomicU64) -> Filled {
        let measured = std::mem::take(&mut self.stats);
        self.filling = true;
        let deadline = self.now() + timeout.as_nanos() as u64;
        let to_fill: Vec<u32> = self.socks.iter().map(|s| s.peers.fill_count()).collect();
        let mut next = vec![0u32; self.socks.len()];
        let mut torrents = vec![0u64; self.workload.args.torrents.div_ceil(64).max(1)];
        let mut next_timeout_scan = 0u64;
        let mut reported = 0u64;
        let complete = loop {
            let now = self.now();
            if now >= deadline {
                break false;
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
            for s in 0..self.socks.len() {
                while next[s] < to_fill[s] && self.can_issue(s, now) {
                    let p = self.socks[s].peers.nth(next[s]);
                    let t = self.workload.peer(p).torrent as usize;
                    torrents[t / 64] |= 1 << (t % 64);
                    self.announce_peer(s, p, now);
                    next[s] += 1;
                }
            }
            let sent = self.flush();
            let total = self.stats.total_responses();
            answered.fetch_add(total - reported, Ordering::Relaxed);
            reported = total;
            if next == to_fill && self.socks.iter().all(|s| s.busy() == 0) {
                break true;
            }
            if received == 0 && sent == 0 {
                let _ = sys::wait_readable(self.socks.iter().map(|s| s.socket.as_fd()), 1);
            }
        };
        self.filling = false;
        Filled {
            stats: std::mem::replace(&mut self.stats, measured),
            announced: next.iter().map(|&n| n as u64).sum(),
            asked: to_fill.iter().map(|&n| n as u64).sum(),
            torrents,
            complete,
        }
    }
}
