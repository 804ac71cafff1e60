//! A swarm's two peer arrays ([`crate::Swarm`]): the addresses, and the rest of each peer at
//! the same positions, both as long as the swarm's capacity.
//!
//! Half the torrents of a public tracker have one peer (505,725 torrents named by 3 million
//! peers drawn as `shoal-bench --pareto-shape 0.2` draws them: 252,962 with one). Kept in
//! two heap blocks, such a peer costs two of the allocator's smallest chunks, 64 bytes, for
//! the 30 it holds (10 where no peer id is kept). A swarm of capacity one keeps its peer
//! inline instead, in the swarm itself: 8 bytes more in every swarm where peer ids are kept
//! (the enum's tag), none where they are not, 64 fewer in each swarm of one peer.

use crate::peers::{PeerExt, PeerMeta};

/// The arrays of one swarm, as long as its capacity.
#[derive(Debug)]
pub(crate) enum Slots<A, X: PeerExt> {
    /// On the heap: any capacity but one (none allocates nothing).
    Heap {
        addrs: Box<[A]>,
        meta: Box<[PeerMeta<X>]>,
    },
    /// Capacity one, inline.
    One { addr: A, meta: PeerMeta<X> },
}

impl<A, X: PeerExt> Default for Slots<A, X> {
    fn default() -> Self {
        Self::Heap {
            addrs: Box::default(),
            meta: Box::default(),
        }
    }
}

impl<A: Copy + Default, X: PeerExt> Slots<A, X> {
    #[inline]
    pub(crate) fn addrs(&self) -> &[A] {
        match self {
            Self::Heap { addrs, .. } => addrs,
            Self::One { addr, .. } => std::slice::from_ref(addr),
        }
    }

    #[inline]
    pub(crate) fn meta(&self) -> &[PeerMeta<X>] {
        match self {
            Self::Heap { meta, .. } => meta,
            Self::One { meta, .. } => std::slice::from_ref(meta),
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
            Self::One { addr, meta } => (std::slice::from_mut(addr), std::slice::from_mut(meta)),
        }
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Self::Heap { addrs, .. } => addrs.len(),
            Self::One { .. } => 1,
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
            *self = Self::One { addr, meta };
            return;
        }
        let (addrs, meta) = match std::mem::take(self) {
            Self::Heap { addrs, meta } => (addrs.into_vec(), meta.into_vec()),
            Self::One { addr, meta } => (vec_of(addr, capacity), vec_of(meta, capacity)),
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

    fn meta(expires: u32) -> PeerMeta<()> {
        PeerMeta {
            expires,
            ..PeerMeta::default()
        }
    }

    #[test]
    fn reallocation_keeps_the_first_slots_through_inline_and_heap() {
        let mut s: Slots<u64, ()> = Slots::default();
        assert_eq!(s.capacity(), 0);
        s.reallocate(1);
        assert!(matches!(s, Slots::One { .. }));
        let (a, m) = s.both_mut();
        (a[0], m[0]) = (7, meta(70));
        s.reallocate(3);
        assert!(matches!(s, Slots::Heap { .. }));
        assert_eq!(s.addrs(), &[7, 0, 0]);
        let (a, m) = s.both_mut();
        (a[1], m[1]) = (8, meta(80));
        s.reallocate(5);
        assert_eq!(s.addrs(), &[7, 8, 0, 0, 0]);
        assert_eq!(s.meta()[1].expires, 80);
        s.reallocate(1);
        assert!(matches!(s, Slots::One { addr: 7, .. }));
        assert_eq!(s.meta()[0].expires, 70);
        s.reallocate(0);
        assert_eq!((s.capacity(), s.addrs().len(), s.meta().len()), (0, 0, 0));
    }
}
