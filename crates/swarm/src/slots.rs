//! A swarm's two peer arrays ([`crate::Swarm`]): the addresses, and the rest of each peer at
//! the same positions, both as long as the swarm's capacity.
//!
//! Half the torrents of a public tracker have one peer (505,725 torrents named by 3 million
//! peers drawn as `shoal-bench --pareto-shape 0.2` draws them: 252,962 with one). Kept in
//! two heap blocks, such a peer costs two of the allocator's smallest chunks, 64 bytes, for
//! the 10 it holds where no peer id is kept ([`crate::Anonymous`]). There a swarm of
//! capacity one keeps its peer inline, beside the heap pointers (in their niche: no tag, no
//! byte more): 17 MiB less at 3 million peers over 505,725 torrents (121 MiB against 138).
//!
//! Where the slot holds a peer id (30 bytes a peer, more in private mode) the inline peer
//! would need the enum's tag, 8 bytes more in every swarm, and was measured to lose: 4 MiB
//! less at 3 million peers and 67 MiB less at 30 million (Pareto draws), but 15 MiB more at
//! 1 million peers over 100,000 torrents filled in turn (the allocator's holes: leaving the
//! inline slot for two heap blocks that then grow in step with every other torrent's). Those
//! slot types name [`crate::NotInline`], a type with no value, and the variant takes no room.

use crate::peer::{Address, OnePeer, PeerExt, PeerMeta};

/// The arrays of one swarm, as long as its capacity.
#[derive(Debug)]
pub(crate) enum Slots<A: Address, X: PeerExt> {
    /// On the heap: any capacity but one (none allocates nothing).
    Heap {
        addrs: Box<[A]>,
        meta: Box<[PeerMeta<X>]>,
    },
    /// Capacity one, inline, where the slot type keeps one peer so ([`PeerExt::One`];
    /// elsewhere the variant cannot exist and takes no room).
    One(X::One<A>),
}

impl<A: Address, X: PeerExt> Default for Slots<A, X> {
    fn default() -> Self {
        Self::Heap {
            addrs: Box::default(),
            meta: Box::default(),
        }
    }
}

impl<A: Address, X: PeerExt> Slots<A, X> {
    #[inline]
    pub(crate) fn addrs(&self) -> &[A] {
        match self {
            Self::Heap { addrs, .. } => addrs,
            Self::One(one) => std::slice::from_ref(one.parts().0),
        }
    }

    #[inline]
    pub(crate) fn meta(&self) -> &[PeerMeta<X>] {
        match self {
            Self::Heap { meta, .. } => meta,
            Self::One(one) => std::slice::from_ref(one.parts().1),
        }
    }

    #[inline]
    pub(crate) fn meta_mut(&mut self) -> &mut [PeerMeta<X>] {
        self.both_mut().1
    }

    /// Both arrays, to change together.
    #[inline]
    pub(crate) fn both_mut(&mut self) -> (&mut [A], &mut [PeerMeta<X>]) {
        match self {
            Self::Heap { addrs, meta } => (addrs, meta),
            Self::One(one) => {
                let (addr, meta) = one.parts_mut();
                (std::slice::from_mut(addr), std::slice::from_mut(meta))
            }
        }
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Self::Heap { addrs, .. } => addrs.len(),
            Self::One(_) => 1,
        }
    }

    /// Gives both arrays `capacity` slots, keeping the first ones (as many as fit). On the
    /// heap through `Vec`, so that the allocator can grow or shrink a block in place (a
    /// large one is remapped, not copied).
    pub(crate) fn reallocate(&mut self, capacity: usize) {
        if capacity == 0 {
            *self = Self::default();
            return;
        }
        if capacity == 1 {
            let addr = self.addrs().first().copied().unwrap_or_default();
            let meta = self.meta().first().copied().unwrap_or_default();
            if let Some(one) = X::One::<A>::new(addr, meta) {
                *self = Self::One(one);
                return;
            }
        }
        let (addrs, meta) = match std::mem::take(self) {
            Self::Heap { addrs, meta } => (addrs.into_vec(), meta.into_vec()),
            Self::One(one) => {
                let (addr, meta) = one.parts();
                (vec_of(*addr, capacity), vec_of(*meta, capacity))
            }
        };
        *self = Self::Heap {
            addrs: resize(addrs, capacity),
            meta: resize(meta, capacity),
        };
    }
}

/// A vector of `first` with room for `capacity`.
fn vec_of<T>(first: T, capacity: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(capacity.max(1));
    v.push(first);
    v
}

fn resize<T: Copy + Default>(mut v: Vec<T>, capacity: usize) -> Box<[T]> {
    if capacity > v.len() {
        v.reserve_exact(capacity - v.len());
        v.resize(capacity, T::default());
    } else {
        v.truncate(capacity);
    }
    v.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::Anonymous;
    use shoal_proto::CompactPeerV4;

    fn addr(n: u8) -> CompactPeerV4 {
        CompactPeerV4::new([10, 0, 0, n].into(), 6881)
    }

    #[test]
    fn a_slot_with_an_id_never_goes_inline() {
        let mut s: Slots<CompactPeerV4, ()> = Slots::default();
        s.reallocate(1);
        assert!(matches!(s, Slots::Heap { .. }));
        s.both_mut().0[0] = addr(7);
        s.reallocate(3);
        assert_eq!(
            s.addrs(),
            &[addr(7), CompactPeerV4::default(), CompactPeerV4::default()]
        );
        s.reallocate(1);
        assert_eq!((s.capacity(), s.addrs()), (1, &[addr(7)][..]));
    }

    #[test]
    fn reallocation_keeps_the_first_slots_through_inline_and_heap() {
        let meta = |expires| PeerMeta::<Anonymous> {
            expires,
            ..PeerMeta::default()
        };
        let none = CompactPeerV4::default();
        let mut s: Slots<CompactPeerV4, Anonymous> = Slots::default();
        assert_eq!(s.capacity(), 0);
        s.reallocate(1);
        assert!(matches!(s, Slots::One(_)));
        let (a, m) = s.both_mut();
        (a[0], m[0]) = (addr(7), meta(70));
        s.reallocate(3);
        assert!(matches!(s, Slots::Heap { .. }));
        assert_eq!(s.addrs(), &[addr(7), none, none]);
        let (a, m) = s.both_mut();
        (a[1], m[1]) = (addr(8), meta(80));
        s.reallocate(5);
        assert_eq!(s.addrs(), &[addr(7), addr(8), none, none, none]);
        assert_eq!(s.meta()[1].expires, 80);
        s.reallocate(1);
        assert!(matches!(s, Slots::One(_)));
        assert_eq!((s.addrs(), s.meta()[0].expires), (&[addr(7)][..], 70));
        s.reallocate(0);
        assert_eq!((s.capacity(), s.addrs().len(), s.meta().len()), (0, 0, 0));
    }
}
