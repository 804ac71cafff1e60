//! Peers another node of a cluster serves, listed here so that local peers can be sent
//! offers from them and to them.
//!
//! Such a peer sits on a "connection" id with [`REMOTE_CONNECTION`] set, which stands for
//! the node: the server forwards its offers and answers there instead of delivering them.
//! A peer a local connection has announced always wins over the same peer id from another
//! node.

use shoal_proto::ws::OfferId;
use shoal_proto::{InfoHash, PeerId};

use super::{ConnectionId, WebTorrentStore};

/// Connection ids with this bit set stand for another node of a cluster (the rest of the
/// bits say which): a peer on such a "connection" is served by that node, and offers and
/// answers for it are forwarded there instead of delivered here.
pub const REMOTE_CONNECTION: ConnectionId = 1 << 63;

/// Whether `conn` stands for another node (see [`REMOTE_CONNECTION`]).
#[inline]
pub fn is_remote(conn: ConnectionId) -> bool {
    conn & REMOTE_CONNECTION != 0
}

impl WebTorrentStore {
    /// Lists a peer another node serves, on that node's remote connection id (see
    /// [`REMOTE_CONNECTION`]), unless a local connection has announced it here. `expires` is
    /// on this store's clock.
    pub fn upsert_remote(
        &self,
        info_hash: &InfoHash,
        peer_id: PeerId,
        conn: ConnectionId,
        seeder: bool,
        expires: u32,
    ) {
        debug_assert!(is_remote(conn));
        let mut slot = self.torrents.lock(info_hash);
        let t = slot.get_or_insert_default();
        match t.peers.get_mut(&peer_id) {
            Some(p) if !is_remote(p.conn) => {}
            Some(p) => {
                p.conn = conn;
                p.expires = expires;
                t.set_seeder(&peer_id, seeder);
            }
            None => t.insert(peer_id, conn, seeder, expires),
        }
    }

    /// Unlists a peer another node served, if it is still listed as that node's.
    pub fn remove_remote(&self, info_hash: &InfoHash, peer_id: &PeerId) {
        if let Some(t) = self.torrents.lock(info_hash).get() {
            if t.peers.get(peer_id).is_some_and(|p| is_remote(p.conn)) {
                t.remove(peer_id);
            }
        }
    }

    /// An offer from `from`, a peer of the node `from_conn` stands for, to `to`, forwarded by
    /// that node: if `to` is a local peer, the offer is remembered (so that `to`'s answer is
    /// accepted, by the same rule as a local offer) and `to`'s connection returned for
    /// delivery. An offerer not yet listed here (the exchange has not brought it) is listed
    /// for as long as its answer may come.
    pub fn accept_remote_offer(
        &self,
        info_hash: &InfoHash,
        to: &PeerId,
        (from, from_conn): (&PeerId, ConnectionId),
        offer_id: OfferId,
        now: u32,
    ) -> Option<ConnectionId> {
        debug_assert!(is_remote(from_conn));
        let mut slot = self.torrents.lock(info_hash);
        let t = slot.get()?;
        if t.peers.get(to).is_none_or(|p| is_remote(p.conn)) {
            return None;
        }
        if !t.peers.contains_key(from) {
            let expires = now.saturating_add(self.config.offer_max_age);
            t.insert(*from, from_conn, false, expires);
        }
        self.remember_offer(t, to, &offer_id, from, now)
    }
}
