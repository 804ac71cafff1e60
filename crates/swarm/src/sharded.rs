//! The sharded map under both stores: torrents keyed by info hash, spread over many
//! independently locked shards, so that workers on different cores almost never wait for
//! each other.
//!
//! [`crate::Store`] (UDP and HTTP swarms) and [`crate::webtorrent::WebTorrentStore`] keep
//! different torrents but find them the same way: one keyed hash of the info hash picks the
//! shard *and* the slot inside it, and the shard's lock is held only while the caller works
//! on that one torrent. This type is that skeleton, written once.
//!
//! It sits on the UDP hot path, so it is generic (monomorphized per torrent type, no trait
//! objects), its lookups are `#[inline]`, and locating a torrent costs exactly one hash and
//! one lock: the hash is computed in [`Sharded::lock`] and carried in the returned
//! [`Slot`], which looks the torrent up (or inserts it) without hashing again.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};
use shoal_proto::InfoHash;

use crate::positions::Positions;

/// The keyed hasher of info hashes (and, in [`crate::Store`], of peer addresses).
pub type Hasher = foldhash::fast::RandomState;

/// One lock's worth of torrents.
///
/// The torrents themselves are kept dense, in one array in no set order, and the hash
/// table holds only their positions (`positions.rs`, 4 bytes a slot, 62.5% to 87.5% full).
/// A `hashbrown` table is between 44% and 88% full (it doubles at seven eighths), so
/// keeping the torrents in its slots left a third of their bytes empty on average and up
/// to half: at 1 million torrents offered (505,725 with peers, 988 a shard, each shard's
/// table at 2,048 slots of 88 bytes) that was 93 MB of table for 44 MB of torrents. The
/// array grows by a quarter, so it is at least four fifths full, and an announce reads one
/// more cache line (the position) than before.
pub struct Shard<T> {
    /// Positions in `torrents`, found by the info hash's keyed hash.
    index: Positions,
    torrents: Vec<(InfoHash, T)>,
    /// The shared keyed hasher: a removal moves the last torrent into the hole, and its
    /// position is found again by its hash.
    hasher: Hasher,
}

impl<T> Shard<T> {
    fn new(hasher: Hasher) -> Self {
        Self {
            index: Positions::new(),
            torrents: Vec::new(),
            hasher,
        }
    }

    /// The shard's torrents, in no particular order.
    #[inline]
    pub fn torrents(&self) -> impl Iterator<Item = (&InfoHash, &T)> {
        self.torrents.iter().map(|(h, t)| (h, t))
    }

    /// Keeps the torrents for which `keep` answers true.
    #[inline]
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        self.retain_keyed(|_, t| keep(t));
    }

    /// [`retain`](Self::retain), telling `keep` each torrent's info hash too. Each torrent
    /// is asked once; a removed one's place is taken by the last torrent, which is asked in
    /// its turn.
    pub fn retain_keyed(&mut self, mut keep: impl FnMut(&InfoHash, &mut T) -> bool) {
        let mut i = 0;
        while i < self.torrents.len() {
            let (h, t) = &mut self.torrents[i];
            if keep(h, t) {
                i += 1;
            } else {
                self.remove_at(i);
            }
        }
        // Give back what a mass expiry left unused (a quarter kept for the next growth).
        let len = self.torrents.len();
        if len < self.torrents.capacity() / 2 {
            self.torrents.shrink_to(len + len / 4);
        }
        if self.index.slot_count() > 6 * len + 8 {
            self.rebuild_index();
        }
    }

    /// The index of every torrent's position, with room to grow.
    fn rebuild_index(&mut self) {
        let hasher = &self.hasher;
        self.index = Positions::build(self.torrents.iter().map(|(h, _)| hasher.hash_one(h)));
    }

    /// Removes the torrent at `at`, moving the last one into its place.
    fn remove_at(&mut self, at: usize) {
        let last = self.torrents.len() - 1;
        self.index
            .remove(self.hasher.hash_one(self.torrents[at].0), at);
        self.torrents.swap_remove(at);
        if at != last {
            let hash = self.hasher.hash_one(self.torrents[at].0);
            self.index.relocate(hash, last, at);
        }
    }

    /// The shard's torrents, to change in place, in no particular order.
    #[inline]
    pub fn torrents_mut(&mut self) -> impl Iterator<Item = (&InfoHash, &mut T)> {
        self.torrents.iter_mut().map(|(h, t)| (&*h, t))
    }

    /// Number of torrents in the shard.
    #[inline]
    pub fn len(&self) -> usize {
        self.torrents.len()
    }

    /// Whether the shard holds no torrent.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.torrents.is_empty()
    }

    /// The position of `info_hash`, whose keyed hash is `hash`.
    #[inline]
    fn find(&self, hash: u64, info_hash: &InfoHash) -> Option<usize> {
        let torrents = &self.torrents;
        self.index.find(hash, |p| torrents[p].0 == *info_hash)
    }

    /// Appends `info_hash`'s torrent (known absent), returning its position.
    fn insert(&mut self, hash: u64, info_hash: InfoHash, torrent: T) -> usize {
        let at = self.torrents.len();
        if at == self.torrents.capacity() {
            // By a quarter (at least 8), not doubling: the array is most of the shard.
            self.torrents.reserve_exact((at / 4).max(8));
        }
        self.torrents.push((info_hash, torrent));
        if !self.index.insert(hash, at) {
            self.rebuild_index();
        }
        at
    }
}

/// Torrents of type `T` by info hash, over a power-of-two number of locked shards.
pub struct Sharded<T> {
    shards: Box<[Mutex<Shard<T>>]>,
    shard_mask: usize,
    hasher: Hasher,
}

impl<T> Sharded<T> {
    /// `shards` is rounded up to a power of two (at least one).
    pub fn new(shards: usize) -> Self {
        let n = shards.max(1).next_power_of_two();
        let hasher = Hasher::default();
        Self {
            shards: (0..n).map(|_| Mutex::new(Shard::new(hasher))).collect(),
            shard_mask: n - 1,
            hasher,
        }
    }

    /// The keyed hasher, shared with whatever the torrents index inside themselves.
    #[inline]
    pub fn hasher(&self) -> &Hasher {
        &self.hasher
    }

    /// Locks the shard of `info_hash` and returns its slot, holding the lock until dropped.
    #[inline]
    pub fn lock(&self, info_hash: &InfoHash) -> Slot<'_, T> {
        let hash = self.hasher.hash_one(info_hash);
        // The shard's index starts its probe from the top bits and tags entries with the
        // low ones: take the shard from the middle so that they do not correlate.
        let shard = &self.shards[(hash >> 32) as usize & self.shard_mask];
        Slot {
            shard: shard.lock(),
            hash,
            info_hash: *info_hash,
        }
    }

    /// Locks every shard in turn: each guard is released when the caller moves on to the
    /// next, so a full visit never stops the world, and stopping early locks no more.
    #[inline]
    pub fn lock_each(&self) -> impl Iterator<Item = MutexGuard<'_, Shard<T>>> {
        self.shards.iter().map(|s| s.lock())
    }

    /// Visits every shard with `visit` on `threads` threads at once (each shard under its
    /// lock only while `visit` runs on it) and hands each result to `take`, with no lock
    /// held, on the calling thread as it comes, in no set order. `take` returning `false` ends the visit: shards
    /// not yet begun are not visited. One thread (or none): the shards in turn, on the
    /// calling thread.
    pub fn visit_parallel<R: Send>(
        &self,
        threads: usize,
        visit: impl Fn(&Shard<T>) -> R + Sync,
        mut take: impl FnMut(R) -> bool,
    ) where
        T: Send,
    {
        if threads <= 1 {
            for shard in self.shards.iter() {
                // `take` runs with no lock held.
                let r = visit(&shard.lock());
                if !take(r) {
                    return;
                }
            }
            return;
        }
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            // Bounded: at most `threads` results wait for `take`, besides those being made.
            let (tx, rx) = std::sync::mpsc::sync_channel(threads);
            for _ in 0..threads {
                let (tx, next, visit) = (tx.clone(), &next, &visit);
                scope.spawn(move || {
                    while let Some(shard) = self.shards.get(next.fetch_add(1, Ordering::Relaxed)) {
                        // The lock is released before the result waits for room.
                        let r = visit(&shard.lock());
                        if tx.send(r).is_err() {
                            // `take` ended the visit.
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for r in rx {
                if !take(r) {
                    break;
                }
            }
        });
    }
}

/// One info hash's place in its locked shard: the torrent if present, or room for it.
pub struct Slot<'a, T> {
    shard: MutexGuard<'a, Shard<T>>,
    hash: u64,
    info_hash: InfoHash,
}

impl<T> Slot<'_, T> {
    /// The torrent, if the shard holds it. Mutable for readers too: the slot holds its
    /// shard's lock exclusively either way.
    #[inline]
    pub fn get(&mut self) -> Option<&mut T> {
        let at = self.shard.find(self.hash, &self.info_hash)?;
        Some(&mut self.shard.torrents[at].1)
    }

    /// The torrent, inserted empty first if the shard did not hold it.
    #[inline]
    pub fn get_or_insert_default(&mut self) -> &mut T
    where
        T: Default,
    {
        let at = match self.shard.find(self.hash, &self.info_hash) {
            Some(at) => at,
            None => self.shard.insert(self.hash, self.info_hash, T::default()),
        };
        &mut self.shard.torrents[at].1
    }

    /// The torrent an announce works on: inserted if absent, except for a `stopped`
    /// announce, which only ever leaves a swarm and must not create an empty torrent (the
    /// caller answers it with zeros).
    #[inline]
    pub fn for_announce(&mut self, stopped: bool) -> Option<&mut T>
    where
        T: Default,
    {
        if stopped {
            self.get()
        } else {
            Some(self.get_or_insert_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u32) -> InfoHash {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(&n.to_le_bytes());
        InfoHash(h)
    }

    #[test]
    fn removals_move_the_last_torrent_and_keep_every_other_findable() {
        // Few shards, so that each holds many torrents and removals move them around.
        let map: Sharded<u32> = Sharded::new(2);
        for n in 0..5_000 {
            *map.lock(&hash(n)).get_or_insert_default() = n;
        }
        // Drop every torrent whose number is a multiple of 3, in the shards' own order.
        let mut asked = 0;
        for mut shard in map.lock_each() {
            shard.retain_keyed(|h, t| {
                asked += 1;
                assert_eq!(*h, hash(*t), "each torrent is asked with its own hash");
                *t % 3 != 0
            });
        }
        assert_eq!(asked, 5_000, "every torrent is asked exactly once");
        for n in 0..5_000 {
            let found = map.lock(&hash(n)).get().copied();
            assert_eq!(found, (n % 3 != 0).then_some(n), "torrent {n}");
        }
        let left: usize = map.lock_each().map(|s| s.len()).sum();
        assert_eq!(left, 5_000 - 1_667);
        // Emptied, then filled again: the positions the index keeps stay right.
        for mut shard in map.lock_each() {
            shard.retain(|_| false);
            assert!(shard.is_empty());
        }
        for n in 0..100 {
            assert!(map.lock(&hash(n)).get().is_none());
            *map.lock(&hash(n)).get_or_insert_default() = n + 1;
        }
        for n in 0..100 {
            assert_eq!(map.lock(&hash(n)).get().copied(), Some(n + 1));
        }
    }
}
