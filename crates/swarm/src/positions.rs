//! Where in an array an entry is, found by its key's hash: a large swarm's index of its
//! peers ([`crate::Swarm`] past [`crate::INDEX_THRESHOLD`] peers, keyed by address) and each
//! shard's table of its torrents ([`crate::sharded::Shard`], keyed by info hash).
//!
//! Written here rather than taken from `hashbrown` for its memory: at 3 million peers over 1
//! million torrents (the `bench` draw) one torrent holds 1.2 million peers, and its
//! `HashTable<u32>` took 10.5 MB (a 4-byte slot and a control byte, a power of two of them,
//! 44% to 88% full), as much as those peers' own addresses and expiries where no peer id is
//! kept. This table is one `u32` a slot, any number of them, rebuilt 62.5% full and grown
//! at 87.5%: 4.6 to 6.4 bytes an entry instead of 5.7 to 11.4.
//!
//! A slot is empty (0), a tombstone ([`TOMBSTONE`]) or an entry: the position plus one in
//! the low bits, the hash's own low bits above it as a tag, so a probe rarely reads a key
//! it does not want. Lookups start at the slot the hash's high half picks
//! (multiplied into the table's length, so any length works) and probe linearly. A removal
//! leaves a tombstone unless the next slot is empty; the caller rebuilds the table (from
//! its keys) when [`Positions::insert`] finds it full.

/// A removed entry that a probe must step over.
const TOMBSTONE: u32 = u32::MAX;

/// A table is rebuilt with this many slots for each five entries (62.5% full, so a
/// growing swarm rebuilds it after 40% more peers)...
const REBUILT_SLOTS_PER_5: usize = 8;

/// ...and is full when entries and tombstones take seven eighths of it.
fn full(used: usize, slots: usize) -> bool {
    used * 8 > slots * 7
}

/// Positions by address hash; see the module's text.
#[derive(Debug)]
pub(crate) struct Positions {
    slots: Box<[u32]>,
    /// Entries.
    len: u32,
    /// Entries and tombstones.
    used: u32,
    /// Bits of a slot that hold the position plus one; the others are the tag.
    pos_bits: u32,
}

impl Positions {
    /// An empty index.
    pub(crate) fn new() -> Self {
        Self::build(std::iter::empty())
    }

    /// An index of positions `0..hashes.len()`, the `i`th with hash `hashes[i]`.
    pub(crate) fn build(hashes: impl ExactSizeIterator<Item = u64>) -> Self {
        let n = hashes.len();
        let slots = (n * REBUILT_SLOTS_PER_5)
            .div_ceil(5)
            .max(n + 2)
            .min(u32::MAX as usize);
        let mut table = Self {
            slots: vec![0; slots].into_boxed_slice(),
            len: 0,
            used: 0,
            // Positions plus one are below the slot count, so below 2^pos_bits - 1: an
            // entry's position bits are never all ones, and never equal the tombstone.
            pos_bits: usize::BITS - slots.leading_zeros(),
        };
        for (pos, hash) in hashes.enumerate() {
            let inserted = table.insert(hash, pos);
            debug_assert!(inserted);
        }
        table
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Slots in the table (entries, tombstones and empty ones).
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The mask of a slot's position bits.
    #[inline]
    fn pos_mask(&self) -> u32 {
        ((1u64 << self.pos_bits) - 1) as u32
    }

    /// The tag bits `hash` gives an entry.
    #[inline]
    fn tag(&self, hash: u64) -> u32 {
        hash as u32 & !self.pos_mask()
    }

    /// The slot a probe for `hash` starts at.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        (((hash >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    /// The slot holding an entry of `hash` whose position `is`.
    #[inline]
    fn find_slot(&self, hash: u64, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
        let (tag, mask, n) = (self.tag(hash), self.pos_mask(), self.slots.len());
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot != TOMBSTONE && slot & !mask == tag && is((slot & mask) as usize - 1) {
                return Some(i);
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// The position, among those with `hash`, for which `is` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u64, is: impl FnMut(usize) -> bool) -> Option<usize> {
        let i = self.find_slot(hash, is)?;
        Some((self.slots[i] & self.pos_mask()) as usize - 1)
    }

    /// Adds position `pos` with `hash`. False, changing nothing, when the table is full:
    /// then it is to be rebuilt (with `pos` among the positions).
    pub(crate) fn insert(&mut self, hash: u64, pos: usize) -> bool {
        let n = self.slots.len();
        let mut i = self.home(hash);
        while self.slots[i] != 0 && self.slots[i] != TOMBSTONE {
            i += 1;
            if i == n {
                i = 0;
            }
        }
        let fresh = self.slots[i] == 0;
        if fresh && full(self.used as usize + 1, n) {
            return false;
        }
        debug_assert!(pos + 1 < n);
        self.slots[i] = self.tag(hash) | (pos as u32 + 1);
        self.len += 1;
        self.used += u32::from(fresh);
        true
    }

    /// Removes position `pos`, whose hash is `hash`.
    pub(crate) fn remove(&mut self, hash: u64, pos: usize) {
        let Some(mut i) = self.find_slot(hash, |p| p == pos) else {
            debug_assert!(false, "position {pos} is not in the index");
            return;
        };
        self.len -= 1;
        let n = self.slots.len();
        if self.slots[(i + 1) % n] != 0 {
            self.slots[i] = TOMBSTONE;
            return;
        }
        // Nothing probes past an empty slot, so this one and the tombstones before it can
        // be empty too.
        loop {
            self.slots[i] = 0;
            self.used -= 1;
            i = i.checked_sub(1).unwrap_or(n - 1);
            if self.slots[i] != TOMBSTONE {
                break;
            }
        }
    }

    /// The entry of position `from` (hash `hash`) is now of position `to`.
    pub(crate) fn relocate(&mut self, hash: u64, from: usize, to: usize) {
        match self.find_slot(hash, |p| p == from) {
            Some(i) => self.slots[i] = self.tag(hash) | (to as u32 + 1),
            None => debug_assert!(false, "position {from} is not in the index"),
        }
    }

    /// The entries of positions `a` (hash `ha`) and `b` (hash `hb`) trade positions.
    pub(crate) fn swap(&mut self, ha: u64, a: usize, hb: u64, b: usize) {
        let (Some(sa), Some(sb)) = (
            self.find_slot(ha, |p| p == a),
            self.find_slot(hb, |p| p == b),
        ) else {
            debug_assert!(false, "positions {a} and {b} are not both in the index");
            return;
        };
        self.slots[sa] = self.tag(ha) | (b as u32 + 1);
        self.slots[sb] = self.tag(hb) | (a as u32 + 1);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Checks `table` against the positions it should hold (`hashes[i]` at `i`).
    fn check(table: &Positions, hashes: &[u64]) {
        assert_eq!(table.len(), hashes.len());
        for (i, &h) in hashes.iter().enumerate() {
            assert_eq!(table.find(h, |p| p == i), Some(i), "position {i}");
        }
        let entries = table
            .slots
            .iter()
            .filter(|&&s| s != 0 && s != TOMBSTONE)
            .count();
        let tombstones = table.slots.iter().filter(|&&s| s == TOMBSTONE).count();
        assert_eq!(entries, hashes.len());
        assert_eq!(entries + tombstones, table.used as usize);
        assert!((table.used as usize) < table.slot_count());
    }

    #[test]
    fn a_built_table_finds_every_position_and_has_room_to_grow() {
        let hashes: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let table = Positions::build(hashes.iter().copied());
        check(&table, &hashes);
        assert_eq!(table.slot_count(), 1600);
        assert_eq!(table.find(12345, |_| true), None);
    }

    #[test]
    fn equal_hashes_are_told_apart_by_position() {
        let hashes = [7u64; 40];
        let mut table = Positions::build(hashes.iter().copied());
        check(&table, &hashes);
        table.swap(7, 3, 7, 30);
        check(&table, &hashes);
        table.remove(7, 39);
        check(&table, &hashes[..39]);
    }

    #[test]
    fn a_full_table_refuses_an_insert_and_changes_nothing() {
        let mut hashes: Vec<u64> = (0..33u64).map(|i| i << 40).collect();
        let mut table = Positions::build(hashes.iter().copied());
        let slots = table.slot_count();
        while table.insert((hashes.len() as u64 * 31) << 40, hashes.len()) {
            hashes.push((hashes.len() as u64 * 31) << 40);
        }
        assert!(full(table.used as usize + 1, slots));
        check(&table, &hashes);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A new peer at the end.
        Push(u64),
        /// The peer at this position (modulo the length) leaves: the last one takes its
        /// place, as in `Swarm::remove_at`.
        Remove(usize),
        /// Two positions (modulo the length) trade places.
        Swap(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few distinct hashes, so that probes meet collisions and runs of tombstones.
        prop_oneof![
            3 => (0u64..64).prop_map(|h| Op::Push(h.wrapping_mul(0x9E37_79B9_7F4A_7C15))),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Swap(a, b)),
        ]
    }

    proptest! {
        /// Any run of pushes, removals and swaps, with rebuilds when the table is full,
        /// keeps every position findable.
        #[test]
        fn the_index_follows_the_positions(ops in proptest::collection::vec(op(), 1..400)) {
            let mut hashes: Vec<u64> = (0..33u64).map(|i| i << 33).collect();
            let mut table = Positions::build(hashes.iter().copied());
            for op in ops {
                match op {
                    Op::Push(h) => {
                        hashes.push(h);
                        if !table.insert(h, hashes.len() - 1) {
                            table = Positions::build(hashes.iter().copied());
                        }
                    }
                    Op::Remove(i) if hashes.len() > 1 => {
                        let (i, last) = (i % hashes.len(), hashes.len() - 1);
                        table.swap(hashes[i], i, hashes[last], last);
                        hashes.swap(i, last);
                        table.remove(hashes[last], last);
                        hashes.pop();
                    }
                    Op::Swap(a, b) if a % hashes.len() != b % hashes.len() => {
                        let (a, b) = (a % hashes.len(), b % hashes.len());
                        table.swap(hashes[a], a, hashes[b], b);
                        hashes.swap(a, b);
                    }
                    _ => {}
                }
                check(&table, &hashes);
            }
        }
    }
}
