//! What one peer is: its address ([`Address`]), its value ([`Peer`]), what its slot keeps
//! beside the address ([`PeerMeta`]: the peer id as [`PeerExt::Id`] keeps it, the expiry,
//! and the layer above's [`PeerExt`]), and where the peers chosen for an answer go
//! ([`PeerSink`]). A swarm keeps its peers in [`crate::Swarm`].

use shoal_proto::{CompactPeerV4, CompactPeerV6, PeerId};

/// A compact peer address of one family, in its wire form. A peer *is* its address (IP and
/// port): that is what other peers connect to, what the announcer must never be sent back,
/// and what another host cannot claim (the UDP connection id and TCP prove the source IP).
/// The peer id is kept as data: clients behind one NAT differ by port, and a client that
/// restarts with a fresh peer id on the same port replaces its old entry.
pub trait Address:
    Copy + Default + Eq + std::hash::Hash + std::fmt::Debug + Send + 'static
{
}

impl Address for CompactPeerV4 {}
impl Address for CompactPeerV6 {}

/// One peer, as a value (for announces, snapshots and admin views).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer<A> {
    pub peer_id: PeerId,
    pub addr: A,
    /// Store-clock second after which the peer is dropped.
    pub expires: u32,
    pub seeder: bool,
}

/// What the layer above keeps in a peer's own slot, beside what the store keeps: nothing
/// (`()`) in open mode, the client's accounting record in private mode. It lives inside the
/// slot's [`PeerMeta`], so the announce that finds the slot has it in the same cache lines.
pub trait PeerExt: Copy + Default + std::fmt::Debug + Send + 'static {
    /// What the slot keeps of the peer id: the id ([`PeerId`]), or nothing (`()`).
    type Id: KeptId;
    /// How a swarm of one peer keeps it: inline ([`Inline`]), or in the arrays like any
    /// other ([`NotInline`]). See `slots.rs`: inline pays where a peer's slot is small.
    type One<A: Address>: OnePeer<A, Self>;
}

impl PeerExt for () {
    type Id = PeerId;
    type One<A: Address> = NotInline;
}

/// Open mode's slot that keeps no peer id, as opentracker keeps none (`[store] peer_ids =
/// false`): an IPv4 peer is then its 6 bytes of address and 4 of expiry, 10 bytes against
/// 30. Answers that would list peer ids (HTTP's non-compact form) list none.
#[derive(Clone, Copy, Debug, Default)]
pub struct Anonymous;

impl PeerExt for Anonymous {
    type Id = ();
    type One<A: Address> = Inline<A, Self>;
}

/// A swarm's only peer, kept in the swarm itself ([`PeerExt::One`]).
pub trait OnePeer<A, X: PeerExt>: Copy + std::fmt::Debug + Send + 'static {
    /// Whether a lone peer is kept inline (`new` gives `Some`).
    const INLINE: bool;
    /// The peer to keep inline; `None` where the slot type keeps none.
    fn new(addr: A, meta: PeerMeta<X>) -> Option<Self>;
    fn parts(&self) -> (&A, &PeerMeta<X>);
    fn parts_mut(&mut self) -> (&mut A, &mut PeerMeta<X>);
}

/// The peer itself, inline.
#[derive(Clone, Copy, Debug)]
pub struct Inline<A, X: PeerExt>(A, PeerMeta<X>);

impl<A: Address, X: PeerExt> OnePeer<A, X> for Inline<A, X> {
    const INLINE: bool = true;
    #[inline]
    fn new(addr: A, meta: PeerMeta<X>) -> Option<Self> {
        Some(Self(addr, meta))
    }
    #[inline]
    fn parts(&self) -> (&A, &PeerMeta<X>) {
        (&self.0, &self.1)
    }
    #[inline]
    fn parts_mut(&mut self) -> (&mut A, &mut PeerMeta<X>) {
        (&mut self.0, &mut self.1)
    }
}

/// No peer inline: a value of this type cannot exist, so the swarm's enum has no variant
/// for it (and no tag).
#[derive(Clone, Copy, Debug)]
pub enum NotInline {}

impl<A, X: PeerExt> OnePeer<A, X> for NotInline {
    const INLINE: bool = false;
    #[inline]
    fn new(_: A, _: PeerMeta<X>) -> Option<Self> {
        None
    }
    #[inline]
    fn parts(&self) -> (&A, &PeerMeta<X>) {
        match *self {}
    }
    #[inline]
    fn parts_mut(&mut self) -> (&mut A, &mut PeerMeta<X>) {
        match *self {}
    }
}

/// A peer id as a slot keeps it ([`PeerExt::Id`]).
pub trait KeptId: Copy + Default + std::fmt::Debug + Send + 'static {
    fn keep(id: PeerId) -> Self;
    /// The id; zeros where none is kept.
    fn id(&self) -> PeerId;
    /// Whether an announce naming `id` comes from the client the slot holds (always, where
    /// no id is kept: the peer is its address).
    fn is(&self, id: &PeerId) -> bool;
}

impl KeptId for PeerId {
    #[inline]
    fn keep(id: PeerId) -> Self {
        id
    }
    #[inline]
    fn id(&self) -> PeerId {
        *self
    }
    #[inline]
    fn is(&self, id: &PeerId) -> bool {
        self == id
    }
}

impl KeptId for () {
    #[inline]
    fn keep(_: PeerId) -> Self {}
    #[inline]
    fn id(&self) -> PeerId {
        PeerId([0; 20])
    }
    #[inline]
    fn is(&self, _: &PeerId) -> bool {
        true
    }
}

/// What is kept of a peer besides its address.
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerMeta<X: PeerExt = ()> {
    pub peer_id: X::Id,
    pub expires: u32,
    pub ext: X,
}

/// Receives the peers chosen for a response, as runs of consecutive peers.
pub trait PeerSink<A> {
    fn push_run<X: PeerExt>(&mut self, addrs: &[A], meta: &[PeerMeta<X>]);
}

macro_rules! sinks {
    ($($a:ty),*) => {$(
        impl PeerSink<$a> for Vec<$a> {
            #[inline]
            fn push_run<X: PeerExt>(&mut self, addrs: &[$a], _: &[PeerMeta<X>]) {
                self.extend_from_slice(addrs);
            }
        }
        impl PeerSink<$a> for Vec<($a, PeerId)> {
            #[inline]
            fn push_run<X: PeerExt>(&mut self, addrs: &[$a], meta: &[PeerMeta<X>]) {
                self.extend(addrs.iter().zip(meta).map(|(a, m)| (*a, m.peer_id.id())));
            }
        }
    )*};
}
sinks!(CompactPeerV4, CompactPeerV6);
