//! An address family's place in a torrent: its swarm, for code written once for both.

use shoal_proto::{CompactPeerV4, CompactPeerV6};

use crate::journal::AnyAddr;
use crate::{Address, PeerExt, Swarm, Torrent};

/// An address family's place in a torrent.
pub trait Family: Address {
    fn swarm<X: PeerExt>(t: &mut Torrent<X>) -> &mut Swarm<Self, X>;
    /// The family's swarm if the torrent has one (never creates it).
    fn peek_swarm<X: PeerExt>(t: &mut Torrent<X>) -> Option<&mut Swarm<Self, X>>;
    /// The address as either family's.
    fn any(self) -> AnyAddr;
}

impl Family for CompactPeerV4 {
    #[inline]
    fn swarm<X: PeerExt>(t: &mut Torrent<X>) -> &mut Swarm<Self, X> {
        &mut t.v4
    }
    #[inline]
    fn peek_swarm<X: PeerExt>(t: &mut Torrent<X>) -> Option<&mut Swarm<Self, X>> {
        Some(&mut t.v4)
    }
    #[inline]
    fn any(self) -> AnyAddr {
        AnyAddr::V4(self)
    }
}

impl Family for CompactPeerV6 {
    #[inline]
    fn swarm<X: PeerExt>(t: &mut Torrent<X>) -> &mut Swarm<Self, X> {
        t.v6.get_or_insert_with(Box::default)
    }
    #[inline]
    fn peek_swarm<X: PeerExt>(t: &mut Torrent<X>) -> Option<&mut Swarm<Self, X>> {
        t.v6.as_deref_mut()
    }
    #[inline]
    fn any(self) -> AnyAddr {
        AnyAddr::V6(self)
    }
}
