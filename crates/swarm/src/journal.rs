//! The store's journal: what local announces and scrapes changed since someone last asked,
//! for a node that shares its swarms with other nodes (the server's cluster exchange).
//!
//! Off unless [`crate::Store::with_journal`] turned it on: an open tracker on one machine
//! pays one predictable branch per announce. On, an announce appends one [`Change`] to the
//! journal shard its info hash picks, under that shard's own mutex (held for a push; the
//! exchange swaps the whole vector out once a second), so workers on different torrents
//! rarely meet. Changes made for the exchange itself (peers learnt from other nodes,
//! [`crate::Store::upsert_remote`]) are not journaled: a node only ever publishes what its
//! own clients told it.
//!
//! Bounded: each shard keeps at most its share of [`Journal::new`]'s `capacity`; past it new
//! changes are dropped and counted ([`Journal::dropped`]). A dropped change is a peer the
//! other nodes learn of at its next announce instead.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};

/// A peer address of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnyAddr {
    V4(CompactPeerV4),
    V6(CompactPeerV6),
}

/// What happened to one torrent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A peer announced (anything but `stopped`); `completed` for the announce that said so.
    Announced {
        info_hash: InfoHash,
        addr: AnyAddr,
        peer_id: PeerId,
        seeder: bool,
        completed: bool,
    },
    /// A peer said `stopped`.
    Stopped { info_hash: InfoHash, addr: AnyAddr },
    /// Someone scraped the torrent: its figures are of interest here.
    Scraped { info_hash: InfoHash },
}

/// Changes since the last [`Journal::take`].
pub struct Journal {
    shards: Box<[Mutex<Vec<Change>>]>,
    per_shard: usize,
    dropped: AtomicU64,
}

impl Journal {
    /// A journal holding at most about `capacity` changes between two takes.
    pub fn new(shards: usize, capacity: usize) -> Self {
        let n = shards.max(1).next_power_of_two();
        Self {
            shards: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            per_shard: capacity.div_ceil(n).max(1),
            dropped: AtomicU64::new(0),
        }
    }

    /// Records `change` of `info_hash`.
    #[inline]
    pub fn push(&self, info_hash: &InfoHash, change: Change) {
        // Info hashes are SHA-1 (or SHA-256) output: their bytes are already uniform.
        let i = usize::from(info_hash.0[7]) & (self.shards.len() - 1);
        let mut shard = self.shards[i].lock();
        if shard.len() < self.per_shard {
            shard.push(change);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every change since the last take, shard by shard (in order within a torrent).
    pub fn take(&self) -> Vec<Change> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let mut taken = std::mem::take(&mut *shard.lock());
            all.append(&mut taken);
        }
        all
    }

    /// Changes dropped because the journal was full (since start).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
