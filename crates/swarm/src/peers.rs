//! One address family's peers of one torrent.
//!
//! The peers live in a single `Vec`, partitioned: leechers first, then seeders. That shape
//! makes the two selections a response needs into one random window each: a leecher gets
//! a window over all peers, a seeder a window over the leechers only ("seeders are not sent
//! other seeders"). A state change or a removal is a couple of swaps at the boundary.
//!
//! Small swarms (most torrents) are searched linearly: a few dozen 32-byte entries is one
//! or two cache lines per lookup and needs no allocation besides the `Vec`. Past
//! [`INDEX_THRESHOLD`] peers a hash index of positions (4 bytes a slot) keeps lookups
//! constant-time. The `Vec` grows by a quarter rather than doubling: it is the bulk of the
//! store's memory, and the amortised cost of growth is still constant.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use shoal_proto::{CompactPeerV4, CompactPeerV6, PeerId};

/// Above this many peers a swarm keeps a hash index of positions.
pub const INDEX_THRESHOLD: usize = 32;

/// A compact peer address of one family, in its wire form. A peer *is* its address (IP and
/// port): that is what other peers connect to, what the announcer must never be sent back,
/// and what another host cannot claim (the UDP connection id and TCP prove the source IP).
/// The peer id is kept as data: clients behind one NAT differ by port, and a client that
/// restarts with a fresh peer id on the same port replaces its old entry.
pub trait Address: Copy + Eq + std::hash::Hash + std::fmt::Debug {}

impl Address for CompactPeerV4 {}
impl Address for CompactPeerV6 {}

/// One peer: 32 bytes for IPv4, 44 for IPv6.
#[derive(Clone, Copy, Debug)]
pub struct Peer<A> {
    pub peer_id: PeerId,
    pub addr: A,
    /// Store-clock second after which the peer is dropped.
    pub expires: u32,
    pub seeder: bool,
}

/// Receives the peers chosen for a response.
pub trait PeerSink<A> {
    fn push_peer(&mut self, addr: &A, peer_id: &PeerId);
}

macro_rules! sinks {
    ($($a:ty),*) => {$(
        impl PeerSink<$a> for Vec<$a> {
            #[inline]
            fn push_peer(&mut self, addr: &$a, _: &PeerId) {
                self.push(*addr);
            }
        }
        impl PeerSink<$a> for Vec<($a, PeerId)> {
            #[inline]
            fn push_peer(&mut self, addr: &$a, peer_id: &PeerId) {
                self.push((*addr, *peer_id));
            }
        }
    )*};
}
sinks!(CompactPeerV4, CompactPeerV6);

/// Peers of one family, leechers in `peers[..leechers]`, seeders after.
#[derive(Debug)]
pub struct Swarm<A> {
    peers: Vec<Peer<A>>,
    leechers: u32,
    index: Option<Box<HashTable<u32>>>,
}

impl<A> Default for Swarm<A> {
    fn default() -> Self {
        Self {
            peers: Vec::new(),
            leechers: 0,
            index: None,
        }
    }
}

impl<A: Address> Swarm<A> {
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    pub fn leechers(&self) -> u32 {
        self.leechers
    }

    pub fn seeders(&self) -> u32 {
        self.peers.len() as u32 - self.leechers
    }

    pub fn peers(&self) -> &[Peer<A>] {
        &self.peers
    }

    /// Heap bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.peers.capacity() * std::mem::size_of::<Peer<A>>()
            + self.index.as_ref().map_or(0, |t| {
                t.capacity() * 5 + std::mem::size_of::<HashTable<u32>>()
            })
    }

    fn find(&self, addr: &A, hash: u64) -> Option<usize> {
        let matches = |p: &Peer<A>| p.addr == *addr;
        match &self.index {
            Some(index) => index
                .find(hash, |&i| matches(&self.peers[i as usize]))
                .map(|&i| i as usize),
            None => self.peers.iter().position(matches),
        }
    }

    /// Swaps the peers at `a` and `b`, keeping the index right. `hasher` hashes peer ids.
    fn swap(&mut self, a: usize, b: usize, hasher: &impl BuildHasher) {
        if a == b {
            return;
        }
        if let Some(index) = &mut self.index {
            // Both slots are found by position; a sentinel keeps the first rewrite from
            // being mistaken for the second slot when the two hashes collide.
            const MOVING: u32 = u32::MAX;
            let ha = hasher.hash_one(self.peers[a].addr);
            let hb = hasher.hash_one(self.peers[b].addr);
            if let Some(slot) = index.find_mut(ha, |&i| i as usize == a) {
                *slot = MOVING;
            }
            if let Some(slot) = index.find_mut(hb, |&i| i as usize == b) {
                *slot = a as u32;
            }
            if let Some(slot) = index.find_mut(ha, |&i| i == MOVING) {
                *slot = b as u32;
            }
        }
        self.peers.swap(a, b);
    }

    fn rebuild_index(&mut self, hasher: &impl BuildHasher) {
        if self.peers.len() <= INDEX_THRESHOLD {
            self.index = None;
            return;
        }
        let mut table = HashTable::with_capacity(self.peers.len());
        for (i, p) in self.peers.iter().enumerate() {
            let h = hasher.hash_one(p.addr);
            table.insert_unique(h, i as u32, |&j| {
                hasher.hash_one(self.peers[j as usize].addr)
            });
        }
        self.index = Some(Box::new(table));
    }

    /// Removes the peer at `pos`, keeping the partition.
    fn remove_at(&mut self, pos: usize, hasher: &impl BuildHasher) {
        let last = self.peers.len() - 1;
        let mut pos = pos;
        if pos < self.leechers as usize {
            // Move it to the end of the leechers, then swap the last seeder into its place.
            let boundary = self.leechers as usize - 1;
            self.swap(pos, boundary, hasher);
            pos = boundary;
            self.leechers -= 1;
        }
        self.swap(pos, last, hasher);
        if let Some(index) = &mut self.index {
            let h = hasher.hash_one(self.peers[last].addr);
            if let Ok(entry) = index.find_entry(h, |&i| i as usize == last) {
                entry.remove();
            }
        }
        self.peers.pop();
        if self.index.is_some() && self.peers.len() <= INDEX_THRESHOLD / 2 {
            self.index = None;
        }
        if self.peers.capacity() > 2 * self.peers.len() + 8 {
            self.peers
                .shrink_to(self.peers.len() + self.peers.len() / 4 + 2);
        }
    }

    fn push(&mut self, peer: Peer<A>, hasher: &impl BuildHasher) -> usize {
        if self.peers.len() == self.peers.capacity() {
            self.peers.reserve_exact((self.peers.len() / 4).max(2));
        }
        let pos = self.peers.len();
        self.peers.push(peer);
        if let Some(index) = &mut self.index {
            let h = hasher.hash_one(peer.addr);
            let peers = &self.peers;
            index.insert_unique(h, pos as u32, |&j| hasher.hash_one(peers[j as usize].addr));
        } else if self.peers.len() > INDEX_THRESHOLD {
            self.rebuild_index(hasher);
        }
        if !peer.seeder {
            // New leechers go to the boundary.
            let boundary = self.leechers as usize;
            self.swap(pos, boundary, hasher);
            self.leechers += 1;
            return boundary;
        }
        pos
    }

    /// Flips the peer at `pos` between leecher and seeder, keeping the partition; returns
    /// its new position.
    fn set_seeder(&mut self, pos: usize, seeder: bool, hasher: &impl BuildHasher) -> usize {
        if self.peers[pos].seeder == seeder {
            return pos;
        }
        self.peers[pos].seeder = seeder;
        if seeder {
            // Leecher -> seeder: swap to the last leecher slot, shrink the leecher range.
            let boundary = self.leechers as usize - 1;
            self.swap(pos, boundary, hasher);
            self.leechers -= 1;
            boundary
        } else {
            let boundary = self.leechers as usize;
            self.swap(pos, boundary, hasher);
            self.leechers += 1;
            boundary
        }
    }

    /// Records an announce. Returns the announcer's position after the update (`None` if it
    /// left) and whether it just completed (was not a seeder before and says completed).
    pub fn upsert(&mut self, peer: Peer<A>, stopped: bool, hasher: &impl BuildHasher) -> Upsert {
        let hash = hasher.hash_one(peer.addr);
        match self.find(&peer.addr, hash) {
            Some(pos) if stopped => {
                self.remove_at(pos, hasher);
                Upsert {
                    position: None,
                    became_seeder: false,
                }
            }
            None if stopped => Upsert {
                position: None,
                became_seeder: false,
            },
            Some(pos) => {
                let was_seeder = self.peers[pos].seeder;
                let p = &mut self.peers[pos];
                p.peer_id = peer.peer_id;
                p.expires = peer.expires;
                let pos = self.set_seeder(pos, peer.seeder, hasher);
                Upsert {
                    position: Some(pos),
                    became_seeder: peer.seeder && !was_seeder,
                }
            }
            None => Upsert {
                position: Some(self.push(peer, hasher)),
                became_seeder: peer.seeder,
            },
        }
    }

    /// Sends up to `numwant` peers to `out`: a random window over the leechers if the asker
    /// is a seeder, over everyone otherwise, skipping the asker at `me`.
    pub fn select(
        &self,
        numwant: usize,
        asker_is_seeder: bool,
        me: Option<usize>,
        out: &mut impl PeerSink<A>,
    ) {
        let range = if asker_is_seeder {
            self.leechers as usize
        } else {
            self.peers.len()
        };
        let me = me.filter(|&m| m < range);
        let available = range - usize::from(me.is_some());
        let take = numwant.min(available);
        if take == 0 {
            return;
        }
        let start = if take == available {
            0
        } else {
            fastrand::usize(..range)
        };
        let mut taken = 0;
        let mut i = start;
        while taken < take {
            if Some(i) != me {
                let p = &self.peers[i];
                out.push_peer(&p.addr, &p.peer_id);
                taken += 1;
            }
            i += 1;
            if i == range {
                i = 0;
            }
        }
    }

    /// Drops peers whose expiry is before `now`; returns how many were dropped.
    pub fn expire(&mut self, now: u32, hasher: &impl BuildHasher) -> usize {
        let before = self.peers.len();
        // `retain` keeps the order, so the leechers-first partition survives.
        self.peers.retain(|p| p.expires >= now);
        let removed = before - self.peers.len();
        if removed > 0 {
            self.leechers = self.peers.iter().take_while(|p| !p.seeder).count() as u32;
            if self.peers.capacity() > 2 * self.peers.len() + 8 {
                self.peers
                    .shrink_to(self.peers.len() + self.peers.len() / 4 + 2);
            }
            if self.index.is_some() {
                self.rebuild_index(hasher);
            }
        }
        removed
    }

    /// Inserts a peer as restored from a snapshot (no event semantics).
    pub fn restore(&mut self, peer: Peer<A>, hasher: &impl BuildHasher) {
        self.upsert(peer, false, hasher);
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self, hasher: &impl BuildHasher) {
        let l = self.leechers as usize;
        assert!(self.peers[..l].iter().all(|p| !p.seeder), "leecher range");
        assert!(self.peers[l..].iter().all(|p| p.seeder), "seeder range");
        if let Some(index) = &self.index {
            assert_eq!(index.len(), self.peers.len());
            for (i, p) in self.peers.iter().enumerate() {
                let h = hasher.hash_one(p.addr);
                assert!(index.find(h, |&j| j as usize == i).is_some(), "index {i}");
            }
        } else {
            assert!(self.peers.len() <= INDEX_THRESHOLD);
        }
    }
}

/// What [`Swarm::upsert`] did.
#[derive(Clone, Copy, Debug)]
pub struct Upsert {
    pub position: Option<usize>,
    pub became_seeder: bool,
}
