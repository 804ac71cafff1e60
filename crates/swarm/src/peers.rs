//! One address family's peers of one torrent.
//!
//! The peers are kept as two parallel arrays: their addresses in wire form (6 bytes for
//! IPv4, 18 for IPv6) and the rest (peer id, expiry). The hot work of an announce only
//! touches the addresses: finding the announcer is a scan or an index probe over them, and
//! the peers sent back are copied straight out of them. Keeping them dense means a 30-peer
//! response reads three cache lines instead of fifteen; the profile of the UDP handler is
//! dominated by exactly these cache misses.
//!
//! Both arrays are partitioned the same way: leechers first, then seeders. That makes the
//! two selections a response needs into one random window each: a leecher gets a window
//! over all peers, a seeder a window over the leechers only ("seeders are not sent other
//! seeders"). Being a seeder is being past the boundary, so no flag is stored. A state
//! change or a removal is a couple of swaps at the boundary.
//!
//! Small swarms (most torrents) are searched linearly. Past [`INDEX_THRESHOLD`] peers a
//! hash index of positions (4 bytes a slot) keeps lookups constant-time. The arrays grow by
//! a quarter rather than doubling: they are the bulk of the store's memory, and amortised
//! growth stays constant-time.
//!
//! The arrays ([`Slots`]) are boxed slices as long as their capacity, with one peer count
//! (`u32`) for both, rather than two `Vec`s: 16 bytes less in every torrent (a `Vec` is
//! pointer, capacity and length, 24 bytes; a boxed slice 16). A swarm of capacity one keeps
//! its peer inline where its slot type says so ([`PeerExt::One`]). The slots past the count
//! are spare capacity, holding defaults or peers that left. What one peer is (its
//! address, its value, its slot) is in [`crate::peer`].

use std::hash::BuildHasher;

use shoal_proto::PeerId;

use crate::peer::{Address, KeptId, OnePeer, Peer, PeerExt, PeerMeta, PeerSink};
use crate::positions::Positions;
use crate::slots::Slots;

/// Above this many peers a swarm keeps a hash index of positions.
pub const INDEX_THRESHOLD: usize = 32;

/// Peers of one family: leechers in `..leechers`, seeders after, in both arrays.
#[derive(Debug)]
pub struct Swarm<A: Address, X: PeerExt = ()> {
    /// Addresses and the rest of each peer, as long as the capacity: the first `len` are
    /// the peers.
    slots: Slots<A, X>,
    len: u32,
    leechers: u32,
    index: Option<Box<Positions>>,
}

impl<A: Address, X: PeerExt> Default for Swarm<A, X> {
    fn default() -> Self {
        Self {
            slots: Slots::default(),
            len: 0,
            leechers: 0,
            index: None,
        }
    }
}

impl<A: Address, X: PeerExt> Swarm<A, X> {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The peers' addresses, leechers first.
    #[inline]
    fn addrs(&self) -> &[A] {
        &self.slots.addrs()[..self.len as usize]
    }

    /// The peers' ids, expiries and extensions, at the same positions.
    #[inline]
    fn meta(&self) -> &[PeerMeta<X>] {
        &self.slots.meta()[..self.len as usize]
    }

    fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Gives both arrays `capacity` slots (at least the peer count).
    fn reallocate(&mut self, capacity: usize) {
        debug_assert!(capacity >= self.len());
        self.slots.reallocate(capacity);
    }

    pub fn leechers(&self) -> u32 {
        self.leechers
    }

    pub fn seeders(&self) -> u32 {
        self.len - self.leechers
    }

    /// The peer at position `i`.
    pub fn peer(&self, i: usize) -> Peer<A> {
        let meta = &self.slots.meta()[i];
        Peer {
            peer_id: meta.peer_id.id(),
            addr: self.slots.addrs()[i],
            expires: meta.expires,
            seeder: i >= self.leechers as usize,
        }
    }

    /// Every peer, leechers first.
    pub fn peers(&self) -> impl ExactSizeIterator<Item = Peer<A>> + Clone + '_ {
        (0..self.len()).map(|i| self.peer(i))
    }

    fn find(&self, addr: &A, hasher: &impl BuildHasher) -> Option<usize> {
        let addrs = self.slots.addrs();
        match &self.index {
            Some(index) => index.find(hasher.hash_one(addr), |i| addrs[i] == *addr),
            None => self.addrs().iter().position(|a| a == addr),
        }
    }

    /// Swaps the peers at `a` and `b`, keeping the index right.
    fn swap(&mut self, a: usize, b: usize, hasher: &impl BuildHasher) {
        if a == b {
            return;
        }
        if let Some(index) = &mut self.index {
            let addrs = self.slots.addrs();
            index.swap(hasher.hash_one(addrs[a]), a, hasher.hash_one(addrs[b]), b);
        }
        let (addrs, meta) = self.slots.both_mut();
        addrs.swap(a, b);
        meta.swap(a, b);
    }

    fn rebuild_index(&mut self, hasher: &impl BuildHasher) {
        if self.len() <= INDEX_THRESHOLD {
            self.index = None;
            return;
        }
        let hashes = self.addrs().iter().map(|a| hasher.hash_one(a));
        self.index = Some(Box::new(Positions::build(hashes)));
    }

    fn shrink_if_sparse(&mut self) {
        let len = self.len();
        if self.capacity() > 2 * len + 8 {
            self.reallocate(len + len / 4 + 2);
        } else if X::One::<A>::INLINE && len <= 1 && self.capacity() > len {
            // Down to one peer (inline) or none (nothing allocated). Slots that keep no
            // peer inline keep the rule above, as they always did: going from three slots
            // to one would save one small chunk at the price of a reallocation each time a
            // swarm goes from two peers to one and back.
            self.reallocate(len);
        }
    }

    /// Removes the peer at `pos`, keeping the partition.
    fn remove_at(&mut self, pos: usize, hasher: &impl BuildHasher) {
        let last = self.len() - 1;
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
            index.remove(hasher.hash_one(self.slots.addrs()[last]), last);
        }
        self.len -= 1;
        match &self.index {
            Some(_) if self.len() <= INDEX_THRESHOLD / 2 => self.index = None,
            // Six slots a peer, nearly four times what a rebuild gives (1.6): rebuilt
            // smaller, for what the swarm now holds (an O(peers) rebuild after removals
            // of about three times as many).
            Some(index) if index.slot_count() > 6 * self.len() => self.rebuild_index(hasher),
            _ => {}
        }
        self.shrink_if_sparse();
    }

    fn push(&mut self, peer: Peer<A>, hasher: &impl BuildHasher) -> usize {
        let pos = self.len();
        if pos == self.capacity() {
            // One slot for a torrent's first peer (most torrents have one or two), then
            // two, then a quarter more.
            let more = if pos == 0 { 1 } else { (pos / 4).max(2) };
            self.reallocate(pos + more);
        }
        let (addrs, meta) = self.slots.both_mut();
        addrs[pos] = peer.addr;
        meta[pos] = PeerMeta {
            peer_id: X::Id::keep(peer.peer_id),
            expires: peer.expires,
            ext: X::default(),
        };
        self.len += 1;
        let indexed = match &mut self.index {
            Some(index) => index.insert(hasher.hash_one(peer.addr), pos),
            None => self.len() <= INDEX_THRESHOLD,
        };
        if !indexed {
            // No index yet, or a full one: one of every position, with room to grow.
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

    /// Moves the peer at `pos` across the boundary if its state changed; returns its new
    /// position.
    fn set_seeder(&mut self, pos: usize, seeder: bool, hasher: &impl BuildHasher) -> usize {
        let is_seeder = pos >= self.leechers as usize;
        if is_seeder == seeder {
            return pos;
        }
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

    /// Records an announce (or a stop). Returns the announcer's position after the update
    /// (`None` if it left) and whether it became a seeder with this announce.
    pub fn upsert(&mut self, peer: Peer<A>, stopped: bool, hasher: &impl BuildHasher) -> Upsert {
        self.upsert_with(peer, stopped, hasher, |_| ()).0
    }

    /// [`upsert`](Self::upsert), handing `visit` the announcer's extension (see
    /// [`ExtSlot`]) while the slot is at hand.
    #[inline(always)]
    pub fn upsert_with<R>(
        &mut self,
        peer: Peer<A>,
        stopped: bool,
        hasher: &impl BuildHasher,
        visit: impl FnOnce(ExtSlot<'_, X>) -> R,
    ) -> (Upsert, R) {
        let left = Upsert {
            position: None,
            became_seeder: false,
        };
        match self.find(&peer.addr, hasher) {
            Some(pos) if stopped => {
                let meta = self.slots.meta()[pos];
                self.remove_at(pos, hasher);
                (left, visit(ExtSlot::Removed(meta.peer_id.id(), meta.ext)))
            }
            None if stopped => (left, visit(ExtSlot::Absent)),
            Some(pos) => {
                let was_seeder = pos >= self.leechers as usize;
                let meta = &mut self.slots.meta_mut()[pos];
                let r = if std::mem::size_of::<X>() == 0 {
                    // Nothing kept beside the store's own: write the slot without reading
                    // it. A write to a line not in the cache waits in the store buffer; a
                    // read (comparing the peer id) waits for the line, and that miss
                    // measured a third of open mode's announce in `benches/store.rs`.
                    *meta = PeerMeta {
                        peer_id: X::Id::keep(peer.peer_id),
                        expires: peer.expires,
                        ext: X::default(),
                    };
                    visit(ExtSlot::Found(&mut meta.ext))
                } else if meta.peer_id.is(&peer.peer_id) {
                    meta.expires = peer.expires;
                    visit(ExtSlot::Found(&mut meta.ext))
                } else {
                    // Another client on the same address: the slot is now its.
                    let old = (meta.peer_id.id(), std::mem::take(&mut meta.ext));
                    meta.peer_id = X::Id::keep(peer.peer_id);
                    meta.expires = peer.expires;
                    visit(ExtSlot::Replaced(old.0, old.1, &mut meta.ext))
                };
                let pos = self.set_seeder(pos, peer.seeder, hasher);
                let done = Upsert {
                    position: Some(pos),
                    became_seeder: peer.seeder && !was_seeder,
                };
                (done, r)
            }
            None => {
                let pos = self.push(peer, hasher);
                let r = visit(ExtSlot::New(&mut self.slots.meta_mut()[pos].ext));
                let done = Upsert {
                    position: Some(pos),
                    became_seeder: peer.seeder,
                };
                (done, r)
            }
        }
    }

    /// Sends up to `numwant` peers to `out`: a random window over the leechers if the asker
    /// is a seeder, over everyone otherwise, skipping the asker at `me`. The window is
    /// handed over as at most three runs of consecutive peers (it may wrap around the end
    /// and be split by the asker).
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
            self.len()
        };
        let me = me.filter(|&m| m < range);
        let available = range - usize::from(me.is_some());
        let mut want = numwant.min(available);
        if want == 0 {
            return;
        }
        let start = if want == available {
            0
        } else {
            fastrand::usize(..range)
        };
        // Walk [start, range) then [0, start), emitting runs that stop short of `me`.
        let mut at = start;
        let mut end = range;
        let mut wrapped = false;
        while want > 0 {
            if at == end {
                if wrapped {
                    break;
                }
                wrapped = true;
                at = 0;
                end = start;
            }
            let mut run_end = (at + want).min(end);
            if let Some(m) = me.filter(|&m| m >= at && m < run_end) {
                run_end = m;
            }
            if run_end > at {
                out.push_run(
                    &self.slots.addrs()[at..run_end],
                    &self.slots.meta()[at..run_end],
                );
                want -= run_end - at;
                at = run_end;
            } else {
                // `at` is the asker: step over it.
                at += 1;
            }
        }
    }

    /// Drops peers whose expiry is before `now`; returns how many were dropped.
    pub fn expire(&mut self, now: u32, hasher: &impl BuildHasher) -> usize {
        self.expire_with(now, hasher, |_, _, _| ())
    }

    /// [`expire`](Self::expire), handing `gone` each dropped peer's address, id and
    /// extension.
    pub fn expire_with(
        &mut self,
        now: u32,
        hasher: &impl BuildHasher,
        mut gone: impl FnMut(A, PeerId, X),
    ) -> usize {
        let before = self.len();
        let expired = self.meta().iter().filter(|m| m.expires < now).count();
        if expired == 0 {
            return 0;
        }
        if self.index.is_some() && expired * 4 < before {
            // A few peers of a large swarm: remove them one by one rather than rebuild the
            // index of every peer (at 12 million peers a rebuild held the shard's lock for
            // most of a second).
            return self.expire_from(0, usize::MAX, now, hasher, gone).0;
        }
        // Compact both arrays in place, keeping order (and so the partition).
        let leechers = self.leechers as usize;
        let mut kept = 0;
        let mut kept_leechers = 0;
        let (addrs, meta) = self.slots.both_mut();
        for i in 0..before {
            if meta[i].expires >= now {
                addrs[kept] = addrs[i];
                meta[kept] = meta[i];
                kept += 1;
                if i < leechers {
                    kept_leechers += 1;
                }
            } else {
                gone(addrs[i], meta[i].peer_id.id(), meta[i].ext);
            }
        }
        self.len = kept as u32;
        self.leechers = kept_leechers;
        self.shrink_if_sparse();
        if self.index.is_some() || kept > INDEX_THRESHOLD {
            self.rebuild_index(hasher);
        }
        before - kept
    }

    /// Drops the expired peers among the `limit` positions from `from`, one by one (a
    /// couple of swaps and index updates each), handing `gone` each as
    /// [`expire_with`](Self::expire_with) does. Returns how many were dropped and the
    /// position to go on from: a large swarm is swept a chunk per lock this way. Positions
    /// before `from` are not looked at, and a removal only brings into its place a peer
    /// from after it, which is then looked at; so between two calls the peers that others'
    /// removals move before `from` wait for the next sweep.
    pub fn expire_from(
        &mut self,
        from: usize,
        limit: usize,
        now: u32,
        hasher: &impl BuildHasher,
        mut gone: impl FnMut(A, PeerId, X),
    ) -> (usize, usize) {
        let (mut i, mut looked, mut dropped) = (from, 0, 0);
        while i < self.len() && looked < limit {
            looked += 1;
            let meta = self.slots.meta()[i];
            if meta.expires < now {
                gone(self.slots.addrs()[i], meta.peer_id.id(), meta.ext);
                self.remove_at(i, hasher);
                dropped += 1;
            } else {
                i += 1;
            }
        }
        (dropped, i)
    }

    /// The id and extension of the peer at `addr`, if there is one.
    pub fn ext_at(&mut self, addr: &A, hasher: &impl BuildHasher) -> Option<(PeerId, &mut X)> {
        let pos = self.find(addr, hasher)?;
        let meta = &mut self.slots.meta_mut()[pos];
        Some((meta.peer_id.id(), &mut meta.ext))
    }

    /// Every peer's id and extension, to read or change in place (a walk that does not
    /// move peers).
    pub fn exts_mut(&mut self) -> impl Iterator<Item = (PeerId, &mut X)> + '_ {
        let len = self.len();
        self.slots.meta_mut()[..len]
            .iter_mut()
            .map(|m| (m.peer_id.id(), &mut m.ext))
    }

    /// Inserts a peer as restored from a snapshot (no event semantics). A peer already
    /// at the address (a live announce, or a newer record read first) is kept as it is,
    /// with its extension.
    pub fn restore(&mut self, peer: Peer<A>, hasher: &impl BuildHasher) {
        if self.find(&peer.addr, hasher).is_none() {
            self.push(peer, hasher);
        }
    }

    /// Whether a peer is at `addr`.
    pub fn has(&self, addr: &A, hasher: &impl BuildHasher) -> bool {
        self.find(addr, hasher).is_some()
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self, hasher: &impl BuildHasher) {
        assert_eq!(self.slots.addrs().len(), self.slots.meta().len());
        assert!(self.len() <= self.capacity());
        assert!(self.leechers as usize <= self.len());
        if let Some(index) = &self.index {
            assert_eq!(index.len(), self.len());
            for (i, a) in self.addrs().iter().enumerate() {
                let h = hasher.hash_one(a);
                assert_eq!(index.find(h, |j| j == i), Some(i), "index {i}");
            }
        } else {
            assert!(self.len() <= INDEX_THRESHOLD);
        }
    }
}

/// What [`Swarm::upsert`] did.
#[derive(Clone, Copy, Debug)]
pub struct Upsert {
    pub position: Option<usize>,
    pub became_seeder: bool,
}

/// The announcer's extension as [`Swarm::upsert_with`] hands it over.
#[derive(Debug)]
pub enum ExtSlot<'a, X> {
    /// The peer was there with the same peer id: its extension, to update in place.
    Found(&'a mut X),
    /// The peer is new: its extension, `X::default()`, to fill.
    New(&'a mut X),
    /// The address was another client's (another peer id): that client's id and extension,
    /// and the new client's, `X::default()`, to fill.
    Replaced(PeerId, X, &'a mut X),
    /// A stop removed the peer: its id and what its slot held.
    Removed(PeerId, X),
    /// A stop for a peer that was not there.
    Absent,
}
