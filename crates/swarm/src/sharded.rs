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

use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};
use shoal_proto::InfoHash;

/// The keyed hasher of info hashes (and, in [`crate::Store`], of peer addresses).
pub type Hasher = foldhash::fast::RandomState;

/// One lock's worth of torrents.
pub struct Shard<T> {
    torrents: HashTable<(InfoHash, T)>,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Self {
            torrents: HashTable::new(),
        }
    }
}

impl<T> Shard<T> {
    /// The shard's torrents, in no particular order.
    #[inline]
    pub fn torrents(&self) -> impl Iterator<Item = (&InfoHash, &T)> {
        self.torrents.iter().map(|(h, t)| (h, t))
    }

    /// Keeps the torrents for which `keep` answers true.
    #[inline]
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        self.torrents.retain(|(_, t)| keep(t));
    }

    /// [`retain`](Self::retain), telling `keep` each torrent's info hash too.
    #[inline]
    pub fn retain_keyed(&mut self, mut keep: impl FnMut(&InfoHash, &mut T) -> bool) {
        self.torrents.retain(|(h, t)| keep(h, t));
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
        Self {
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            shard_mask: n - 1,
            hasher: Hasher::default(),
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
        // hashbrown uses the low bits for the bucket and the top 7 for its tag: take the
        // shard from the middle so that the two do not correlate.
        let shard = &self.shards[(hash >> 32) as usize & self.shard_mask];
        Slot {
            shard: shard.lock(),
            hash,
            info_hash: *info_hash,
            hasher: &self.hasher,
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
    hasher: &'a Hasher,
}

impl<T> Slot<'_, T> {
    /// The torrent, if the shard holds it. Mutable for readers too: the slot holds its
    /// shard's lock exclusively either way.
    #[inline]
    pub fn get(&mut self) -> Option<&mut T> {
        let ih = &self.info_hash;
        self.shard
            .torrents
            .find_mut(self.hash, |(h, _)| h == ih)
            .map(|(_, t)| t)
    }

    /// The torrent, inserted empty first if the shard did not hold it.
    #[inline]
    pub fn get_or_insert_default(&mut self) -> &mut T
    where
        T: Default,
    {
        let (ih, hash, hasher) = (self.info_hash, self.hash, self.hasher);
        // A lookup, then an insert only when absent; unlike `entry`, `find_entry` does not
        // reserve room (and so never grows a full table) when the torrent is already there.
        match self.shard.torrents.find_entry(hash, |(h, _)| *h == ih) {
            Ok(found) => &mut found.into_mut().1,
            Err(absent) => {
                &mut absent
                    .into_table()
                    .insert_unique(hash, (ih, T::default()), |(h, _)| hasher.hash_one(h))
                    .into_mut()
                    .1
            }
        }
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
