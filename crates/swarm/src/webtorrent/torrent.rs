//! One WebTorrent swarm as a shard holds it: its peers by id, each on a connection, and the
//! counts an announce or a scrape reports.
//!
//! The seeder count is kept beside the peers rather than counted on each announce, so every
//! change of a peer's seeder flag goes through [`WsTorrent::set_seeder`] or
//! [`WsTorrent::insert`], which keep the two in step.

use indexmap::IndexMap;
use shoal_proto::PeerId;

use super::pending::Pending;
use super::ConnectionId;
use crate::sharded::Hasher;
use crate::TorrentStats;

#[derive(Debug)]
pub(super) struct WsPeer {
    pub(super) conn: ConnectionId,
    pub(super) seeder: bool,
    pub(super) expires: u32,
    /// Offers sent to this peer, oldest first. Empty (no allocation) for most peers
    /// most of the time.
    pub(super) pending: Pending,
}

#[derive(Debug, Default)]
pub(super) struct WsTorrent {
    /// Insertion-ordered map: O(1) lookup by peer id and O(1) access by index for
    /// random selection.
    pub(super) peers: IndexMap<PeerId, WsPeer, Hasher>,
    pub(super) seeders: u32,
    pub(super) completed: u32,
    pub(super) last_announce: u32,
}

impl WsTorrent {
    pub(super) fn stats(&self) -> TorrentStats {
        TorrentStats {
            seeders: self.seeders,
            leechers: self.peers.len() as u32 - self.seeders,
            completed: self.completed,
        }
    }

    /// Lists a peer with no pending offers (replacing any listing it had).
    pub(super) fn insert(
        &mut self,
        peer_id: PeerId,
        conn: ConnectionId,
        seeder: bool,
        expires: u32,
    ) {
        let peer = WsPeer {
            conn,
            seeder,
            expires,
            pending: Pending::default(),
        };
        if self
            .peers
            .insert(peer_id, peer)
            .is_some_and(|old| old.seeder)
        {
            self.seeders -= 1;
        }
        if seeder {
            self.seeders += 1;
        }
    }

    /// Sets a listed peer's seeder flag, keeping the count in step. Returns whether the
    /// peer became a seeder (it was a leecher and now is not); false for an unknown peer.
    pub(super) fn set_seeder(&mut self, peer_id: &PeerId, seeder: bool) -> bool {
        let Some(p) = self.peers.get_mut(peer_id) else {
            return false;
        };
        if p.seeder == seeder {
            return false;
        }
        p.seeder = seeder;
        if seeder {
            self.seeders += 1;
        } else {
            self.seeders -= 1;
        }
        seeder
    }

    pub(super) fn remove(&mut self, peer_id: &PeerId) -> Option<WsPeer> {
        let p = self.peers.swap_remove(peer_id)?;
        if p.seeder {
            self.seeders -= 1;
        }
        Some(p)
    }
}
