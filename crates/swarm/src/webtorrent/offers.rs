//! The offer relay: where an announce's WebRTC offers go, and which answers come back
//! through.
//!
//! Each offer goes to a different random peer of the swarm, and the recipient remembers it
//! (a bounded list of 16-byte tags, kept by `pending`), so that an answer is relayed only when it
//! answers an offer that really went to the answering connection, from the peer it names,
//! not too long ago. Forged answers and answers to peers that are gone are refused
//! ([`AnswerRefusal`]), not relayed blindly.

use std::hash::BuildHasher;

use shoal_proto::ws::OfferId;
use shoal_proto::{InfoHash, PeerId};

use super::torrent::WsTorrent;
use super::{ConnectionId, WebTorrentStore, WsAnnounce};

/// An announce's offer ids, as the relay picks their targets. The first target drawn gets
/// the first offer, the second the second, and so on: a caller may decode an offer only
/// when it is asked for (most offers of an announce under load find no target).
pub trait OfferIds {
    /// How many offers there are.
    fn count(&self) -> usize;
    /// The id of offer `i`, asked in order from 0; `None` if it cannot be read: it and
    /// the offers after it are not relayed.
    fn id(&mut self, i: usize) -> Option<OfferId>;
}

impl OfferIds for &[OfferId] {
    fn count(&self) -> usize {
        self.len()
    }

    fn id(&mut self, i: usize) -> Option<OfferId> {
        self.get(i).copied()
    }
}

/// Where one offer of an announce goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferTarget {
    /// Index of the offer in the announce's list.
    pub offer: usize,
    pub peer_id: PeerId,
    pub conn: ConnectionId,
}

/// Why an answer was not relayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefusal {
    /// The answering peer is not in the swarm on this connection.
    #[error("answer from a peer that is not in the swarm on this connection")]
    NotAPeer,
    /// No offer with this id from that peer was relayed to the answering peer.
    #[error("answer to an offer that was not relayed to this peer")]
    NoSuchOffer,
    /// The offer is older than the configured age.
    #[error("answer to an offer that has expired")]
    Expired,
    /// The peer that made the offer has left.
    #[error("answer to a peer that has left")]
    OffererGone,
}

impl AnswerRefusal {
    /// A short label for metrics.
    pub fn kind(self) -> &'static str {
        match self {
            AnswerRefusal::NotAPeer => "not_a_peer",
            AnswerRefusal::NoSuchOffer => "no_such_offer",
            AnswerRefusal::Expired => "expired",
            AnswerRefusal::OffererGone => "offerer_gone",
        }
    }
}

impl WebTorrentStore {
    /// The tag of an offer `offer_id` made by `from`.
    fn tag(&self, offer_id: &OfferId, from: &PeerId) -> u64 {
        self.tags.hash_one((offer_id.as_bytes(), from.0))
    }

    /// Makes peer `to` of `torrent` remember the offer `offer_id` from `from`, so that its
    /// answer will be let through; returns `to`'s connection (None if `to` is not listed).
    pub(super) fn remember_offer(
        &self,
        torrent: &mut WsTorrent,
        to: &PeerId,
        offer_id: &OfferId,
        from: &PeerId,
        now: u32,
    ) -> Option<ConnectionId> {
        let tag = self.tag(offer_id, from);
        let p = torrent.peers.get_mut(to)?;
        p.pending.push(
            tag,
            now,
            self.config.offer_max_age,
            self.config.max_pending_offers.max(1),
        );
        Some(p.conn)
    }

    /// Chooses where the announce `req`'s offers go (see [`WebTorrentStore::announce_to`])
    /// and makes each target remember its offer.
    pub(super) fn choose_targets(
        &self,
        torrent: &mut WsTorrent,
        req: &WsAnnounce,
        offers: &mut dyn OfferIds,
        now: u32,
        out: &mut Vec<OfferTarget>,
        takes_offers: &impl Fn(ConnectionId) -> bool,
    ) {
        let wanted = offers.count();
        let len = torrent.peers.len();
        let max_age = self.config.offer_max_age;
        let cap = self.config.max_pending_offers.max(1);
        // What the swarm itself says; `takes_offers` asks the connection registry (a lock
        // and a look-up), so it is asked only of the peers drawn. A peer that already has
        // `max_pending_offers` answerable offers is passed over: one more would push out
        // the oldest, and the answer its client then sent to it would be refused.
        let candidate = |i: usize| -> bool {
            let (pid, p) = torrent.peers.get_index(i).expect("index in range");
            *pid != req.peer_id
                && p.conn != req.conn
                && !(req.seeder && p.seeder)
                && !p.pending.is_full(now, max_age, cap)
        };
        let conn = |i: usize| torrent.peers.get_index(i).expect("index in range").1.conn;
        let eligible = |i: usize| candidate(i) && takes_offers(conn(i));
        // Distinct random indices: in a small swarm a partial shuffle of the candidates,
        // dropping those whose connection takes no offers as they are drawn; in a large
        // one draw at random with a bounded number of tries (a few collisions at most).
        let mut chosen: Vec<usize> = Vec::with_capacity(wanted.min(len));
        if len <= 4 * wanted + 16 {
            let mut all: Vec<usize> = (0..len).filter(|&i| candidate(i)).collect();
            let mut n = 0;
            while n < wanted && n < all.len() {
                let j = fastrand::usize(n..all.len());
                if takes_offers(conn(all[j])) {
                    all.swap(n, j);
                    n += 1;
                } else {
                    all.swap_remove(j);
                }
            }
            all.truncate(n);
            chosen = all;
        } else {
            let mut tries = 8 * wanted + 16;
            while chosen.len() < wanted && tries > 0 {
                tries -= 1;
                let i = fastrand::usize(0..len);
                if !chosen.contains(&i) && eligible(i) {
                    chosen.push(i);
                }
            }
        }
        for (offer, i) in chosen.into_iter().enumerate() {
            let Some(id) = offers.id(offer) else { break };
            let tag = self.tag(&id, &req.peer_id);
            let (pid, p) = torrent.peers.get_index_mut(i).expect("index in range");
            p.pending.push(tag, now, max_age, cap);
            out.push(OfferTarget {
                offer,
                peer_id: *pid,
                conn: p.conn,
            });
        }
    }

    /// Checks an answer from `answerer` (on connection `conn`) to the offer `offer_id`
    /// made by `to`, and returns the connection to relay it to. The offer is consumed:
    /// one answer per offer.
    pub fn answer(
        &self,
        info_hash: &InfoHash,
        answerer: &PeerId,
        conn: ConnectionId,
        to: &PeerId,
        offer_id: &OfferId,
        now: u32,
    ) -> Result<ConnectionId, AnswerRefusal> {
        let mut slot = self.torrents.lock(info_hash);
        let torrent = slot.get().ok_or(AnswerRefusal::NotAPeer)?;
        let me = torrent
            .peers
            .get_mut(answerer)
            .filter(|p| p.conn == conn)
            .ok_or(AnswerRefusal::NotAPeer)?;
        let sent_at = me
            .pending
            .take(self.tag(offer_id, to))
            .ok_or(AnswerRefusal::NoSuchOffer)?;
        if now.saturating_sub(sent_at) > self.config.offer_max_age {
            return Err(AnswerRefusal::Expired);
        }
        torrent
            .peers
            .get(to)
            .map(|p| p.conn)
            .ok_or(AnswerRefusal::OffererGone)
    }
}
