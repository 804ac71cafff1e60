//! Departures: the peers that said `stopped`, with the second they did, kept for the change
//! sections of the snapshot (`Store::write_snapshot_since`). A section holds each announced
//! torrent's peers heard since its start, merged over the older records at a restore; a
//! peer that left meanwhile is not among them, so the section says so with a departure,
//! which the restore applies first.
//!
//! Off until [`Departures::keep_from`] is first called (the state crate does, once it keeps
//! a snapshot file): an announce then pays one branch. On, a stop appends one entry under
//! one of 64 mutexes picked by the info hash (held for a push), and every section takes
//! those at or after its start and drops the older ones, so the list holds the stops of a
//! section's interval or so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use parking_lot::Mutex;
use shoal_proto::InfoHash;

use crate::journal::AnyAddr;

/// One stop: its store second, the torrent, the address that left.
type Stop = (u32, InfoHash, AnyAddr);

pub(crate) struct Departures {
    on: AtomicBool,
    /// Entries before this store second are no longer asked for.
    from: AtomicU32,
    shards: Box<[Mutex<Vec<Stop>>]>,
}

impl Default for Departures {
    fn default() -> Self {
        Self {
            on: AtomicBool::new(false),
            from: AtomicU32::new(0),
            shards: (0..64).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }
}

impl Departures {
    /// Records that `addr` left `info_hash` at store second `at`.
    #[inline]
    pub(crate) fn record(&self, at: u32, info_hash: &InfoHash, addr: AnyAddr) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        // Info hashes are SHA-1 (or SHA-256) output: their bytes are already uniform.
        let i = usize::from(info_hash.0[9]) & (self.shards.len() - 1);
        self.shards[i].lock().push((at, *info_hash, addr));
    }

    /// Turns recording on, and says that departures before store second `from` will not be
    /// asked for again (they are dropped at the next [`Departures::since`]).
    pub(crate) fn keep_from(&self, from: u32) {
        self.from.store(from, Ordering::Relaxed);
        self.on.store(true, Ordering::Relaxed);
    }

    /// Drops the departures before store second `before` (the cleaner's: one older than
    /// a peer's lifetime names a peer that any older record has let expire by now).
    pub(crate) fn prune(&self, before: u32) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        for shard in self.shards.iter() {
            shard.lock().retain(|&(at, _, _)| at >= before);
        }
    }

    /// The departures at or after store second `since`, by torrent; those before it, or
    /// before the last [`Departures::keep_from`], are dropped.
    pub(crate) fn since(&self, since: u32) -> HashMap<InfoHash, Vec<(u32, AnyAddr)>> {
        let drop_before = since.min(self.from.load(Ordering::Relaxed));
        let mut out: HashMap<InfoHash, Vec<(u32, AnyAddr)>> = HashMap::new();
        for shard in self.shards.iter() {
            let mut list = shard.lock();
            list.retain(|&(at, _, _)| at >= drop_before);
            for &(at, h, addr) in list.iter() {
                if at >= since {
                    out.entry(h).or_default().push((at, addr));
                }
            }
        }
        out
    }
}
