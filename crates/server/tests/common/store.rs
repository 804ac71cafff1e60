//! Peers put straight into an in-process tracker's store, as an announce would put them:
//! for tests that need a swarm larger or more varied than a client could make quickly.

use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_swarm::Announce;
use shoal_tracker::swarms::Swarms;

/// Adds (or refreshes) one IPv4 peer with a `started` announce that asks for no peers.
pub fn add_peer(
    store: &Swarms,
    info_hash: InfoHash,
    peer_id: PeerId,
    addr: CompactPeerV4,
    left: u64,
) {
    let mut out: Vec<CompactPeerV4> = Vec::new();
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
