//! Peers put straight into an in-process tracker's store, as an announce would put them:
//! for tests that need a swarm larger or more varied than a client could make quickly.

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::{Announce, Family, PeerSink};
use shoal_tracker::swarms::Swarms;

/// Adds (or refreshes) one peer (either family) with a `started` announce that asks for
/// no peers.
pub fn add_peer<A: Family>(store: &Swarms, info_hash: InfoHash, peer_id: PeerId, addr: A, left: u64)
where
    Vec<A>: PeerSink<A>,
{
    let mut out: Vec<A> = Vec::new();
    store.announce_accounted(
        &Announce {
            info_hash,
            peer_id,
            addr,
            event: AnnounceEvent::Started,
            left,
            numwant: 0,
        },
        shoal_swarm::clock::now(),
        &mut out,
        None,
    );
}
