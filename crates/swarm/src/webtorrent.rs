//! The WebTorrent store: swarms whose peers are WebSocket connections, not addresses.
//!
//! A WebTorrent peer cannot be handed out as an IP and port: the tracker relays its WebRTC
//! offers to other peers and their answers back. So these swarms live apart from the
//! UDP/HTTP ones in [`crate::Store`], kept the same way (a [`Sharded`] map by info hash,
//! each shard behind its own lock), and each peer points at an opaque [`ConnectionId`] that the
//! server maps to a live connection. The store never sees a socket or a runtime.
//!
//! It also remembers which offers it relayed to which peer (on the recipient, a bounded
//! list of 16-byte tags), so that an answer is relayed only when it answers an offer that
//! really went to the answering connection, from the peer it names, not too long ago.
//! Forged answers and answers to peers that are gone are refused, not relayed blindly.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use indexmap::IndexMap;
use shoal_proto::ws::OfferId;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

use crate::sharded::{Hasher, Sharded};
use crate::TorrentStats;

/// The server's name for one live connection. Opaque to the store; never reused by the
/// server while a peer may still point at it.
pub type ConnectionId = u64;

/// Connection ids with this bit set stand for another node of a cluster (the rest of the
/// bits say which): a peer on such a "connection" is served by that node, and offers and
/// answers for it are forwarded there instead of delivered here.
pub const REMOTE_CONNECTION: ConnectionId = 1 << 63;

/// Whether `conn` stands for another node (see [`REMOTE_CONNECTION`]).
#[inline]
pub fn is_remote(conn: ConnectionId) -> bool {
    conn & REMOTE_CONNECTION != 0
}

/// Tunables of the WebTorrent store. The server fills it from its config.
#[derive(Clone, Debug)]
pub struct WsStoreConfig {
    /// Number of shards (rounded up to a power of two).
    pub shards: usize,
    /// Seconds a peer stays listed after its last announce (even if its connection stays
    /// open).
    pub peer_ttl: u32,
    /// Seconds an empty torrent (and its completed count) is kept.
    pub torrent_ttl: u32,
    /// Seconds an answer to a relayed offer is accepted after the offer went out.
    pub offer_max_age: u32,
    /// Offers remembered per recipient peer; older ones are forgotten first. An offer can
    /// wait in the recipient's socket buffers for as long as its client takes to read
    /// them, so this must cover what a busy peer has in flight, not what it answers in a
    /// round trip: 16 bytes an offer, and only a peer that is sent many offers fills it.
    pub max_pending_offers: usize,
}

impl Default for WsStoreConfig {
    fn default() -> Self {
        Self {
            shards: 512,
            peer_ttl: 3600,
            torrent_ttl: 3600,
            offer_max_age: 60,
            max_pending_offers: 16_384,
        }
    }
}

/// An offer relayed to a peer, waiting for its answer: a keyed hash of the offer's id and
/// the peer that made it (where the answer must go), and when it went out. A tag instead of
/// the 40 bytes it stands for keeps thousands of them per busy peer affordable. The key is
/// random per process and never leaves it, so an answerer has nothing to aim a forged pair
/// with: a match it was not sent is a guess, one in 2^64 per answer.
#[derive(Clone, Copy, Debug)]
struct PendingOffer {
    tag: u64,
    sent_at: u32,
}

/// The offers a peer was sent, oldest first (pushed in time order, so expired ones are at
/// the front).
#[derive(Debug, Default)]
struct Pending(VecDeque<PendingOffer>);

impl Pending {
    /// Remembers one more offer, forgetting expired ones and, past `cap`, the oldest.
    fn push(&mut self, tag: u64, now: u32, max_age: u32, cap: usize) {
        self.expire(now, max_age);
        if self.0.len() >= cap {
            self.0.pop_front();
        }
        self.0.push_back(PendingOffer { tag, sent_at: now });
    }

    fn expire(&mut self, now: u32, max_age: u32) {
        while self
            .0
            .front()
            .is_some_and(|o| now.saturating_sub(o.sent_at) > max_age)
        {
            self.0.pop_front();
        }
    }

    /// Takes the offer with this tag out (one answer per offer); when it went out.
    fn take(&mut self, tag: u64) -> Option<u32> {
        let at = self.0.iter().rposition(|o| o.tag == tag)?;
        self.0.remove(at).map(|o| o.sent_at)
    }

    /// After cleaning: gives back the memory of a list that emptied or shrank a lot.
    fn clean(&mut self, now: u32, max_age: u32) {
        self.expire(now, max_age);
        if self.0.is_empty() {
            self.0 = VecDeque::new();
        } else if self.0.capacity() > 4 * self.0.len() + 64 {
            self.0.shrink_to_fit();
        }
    }
}

#[derive(Debug)]
struct WsPeer {
    conn: ConnectionId,
    seeder: bool,
    expires: u32,
    /// Offers sent to this peer, oldest first. Empty (no allocation) for most peers
    /// most of the time.
    pending: Pending,
}

#[derive(Debug, Default)]
struct WsTorrent {
    /// Insertion-ordered map: O(1) lookup by peer id and O(1) access by index for
    /// random selection.
    peers: IndexMap<PeerId, WsPeer, Hasher>,
    seeders: u32,
    completed: u32,
    last_announce: u32,
}

impl WsTorrent {
    fn stats(&self) -> TorrentStats {
        TorrentStats {
            seeders: self.seeders,
            leechers: self.peers.len() as u32 - self.seeders,
            completed: self.completed,
        }
    }

    fn remove(&mut self, peer_id: &PeerId) -> Option<WsPeer> {
        let p = self.peers.swap_remove(peer_id)?;
        if p.seeder {
            self.seeders -= 1;
        }
        Some(p)
    }
}

/// One WebTorrent announce, as the store needs it (already validated by the front end).
#[derive(Clone, Copy, Debug)]
pub struct WsAnnounce {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub conn: ConnectionId,
    pub event: AnnounceEvent,
    pub seeder: bool,
}

/// Where one offer of an announce goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferTarget {
    /// Index of the offer in the announce's list.
    pub offer: usize,
    pub peer_id: PeerId,
    pub conn: ConnectionId,
}

/// What an announce did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsAnnounceOutcome {
    pub stats: TorrentStats,
    /// The peer is now listed for this connection and was not before (the connection
    /// must remember it, to remove it when it closes).
    pub joined: bool,
    /// The peer was listed for this connection and is no more (`stopped`).
    pub left: bool,
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

/// What one cleaning pass did and what is left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsCleanReport {
    pub peers_expired: usize,
    pub torrents_removed: usize,
    pub torrents: usize,
    pub peers: usize,
}

/// Torrents and peers in the WebTorrent store at one moment (see
/// [`WebTorrentStore::totals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsTotals {
    /// Torrents, including empty ones not yet removed by the cleaner.
    pub torrents: u64,
    pub seeders: u64,
    pub leechers: u64,
}

/// The WebTorrent store. Share it with an `Arc`.
pub struct WebTorrentStore {
    torrents: Sharded<WsTorrent>,
    config: WsStoreConfig,
    /// Keys the tags of pending offers (random per store).
    tags: foldhash::quality::RandomState,
}

impl WebTorrentStore {
    pub fn new(config: WsStoreConfig) -> Self {
        Self {
            torrents: Sharded::new(config.shards),
            config,
            tags: foldhash::quality::RandomState::default(),
        }
    }

    /// The tag of an offer `offer_id` made by `from`.
    fn tag(&self, offer_id: &OfferId, from: &PeerId) -> u64 {
        self.tags.hash_one((offer_id.as_bytes(), from.0))
    }

    pub fn config(&self) -> &WsStoreConfig {
        &self.config
    }

    /// Records an announce from `req.conn` and chooses where its offers go: each to a
    /// different random peer of the swarm (never the announcer, nothing on its own
    /// connection, and no seeder-to-seeder offers), at most one per offer id given. The
    /// targets are written to `out` (cleared first), and each target remembers the offer
    /// so that its answer can be checked.
    ///
    /// A `stopped` removes the peer only if it belongs to this connection; a peer id
    /// announced from another connection moves to this one (a client that reconnected).
    pub fn announce(
        &self,
        req: &WsAnnounce,
        offers: &[OfferId],
        now: u32,
        out: &mut Vec<OfferTarget>,
    ) -> WsAnnounceOutcome {
        self.announce_to(req, offers, now, out, |_| true)
    }

    /// [`WsStore::announce`], with offers going only to peers whose connection
    /// `takes_offers` now (its outgoing queue has room): an offer that would be dropped on
    /// the way neither takes a target from the offers that would arrive nor leaves a
    /// pending entry that pushes out the offers a peer did receive (whose answers would
    /// then be refused as unknown). Called under the torrent's lock: `takes_offers` must
    /// not touch this store.
    pub fn announce_to(
        &self,
        req: &WsAnnounce,
        offers: &[OfferId],
        now: u32,
        out: &mut Vec<OfferTarget>,
        takes_offers: impl Fn(ConnectionId) -> bool,
    ) -> WsAnnounceOutcome {
        out.clear();
        let stopped = req.event == AnnounceEvent::Stopped;
        let mut slot = self.torrents.lock(&req.info_hash);
        let Some(torrent) = slot.for_announce(stopped) else {
            return WsAnnounceOutcome::default();
        };
        torrent.last_announce = now;
        let mut outcome = WsAnnounceOutcome::default();
        if stopped {
            if torrent
                .peers
                .get(&req.peer_id)
                .is_some_and(|p| p.conn == req.conn)
            {
                torrent.remove(&req.peer_id);
                outcome.left = true;
            }
            outcome.stats = torrent.stats();
            return outcome;
        }
        let expires = now.saturating_add(self.config.peer_ttl);
        let became_seeder = match torrent.peers.get_mut(&req.peer_id) {
            Some(p) => {
                outcome.joined = p.conn != req.conn;
                p.conn = req.conn;
                p.expires = expires;
                let became = req.seeder && !p.seeder;
                if p.seeder != req.seeder {
                    p.seeder = req.seeder;
                    if req.seeder {
                        torrent.seeders += 1;
                    } else {
                        torrent.seeders -= 1;
                    }
                }
                became
            }
            None => {
                torrent.peers.insert(
                    req.peer_id,
                    WsPeer {
                        conn: req.conn,
                        seeder: req.seeder,
                        expires,
                        pending: Pending::default(),
                    },
                );
                outcome.joined = true;
                if req.seeder {
                    torrent.seeders += 1;
                }
                req.seeder
            }
        };
        if became_seeder && req.event == AnnounceEvent::Completed {
            torrent.completed = torrent.completed.saturating_add(1);
        }
        if !offers.is_empty() {
            self.choose_targets(torrent, req, offers, now, out, &takes_offers);
        }
        outcome.stats = torrent.stats();
        outcome
    }

    fn choose_targets(
        &self,
        torrent: &mut WsTorrent,
        req: &WsAnnounce,
        offers: &[OfferId],
        now: u32,
        out: &mut Vec<OfferTarget>,
        takes_offers: &impl Fn(ConnectionId) -> bool,
    ) {
        let len = torrent.peers.len();
        // What the swarm itself says; `takes_offers` asks the connection registry (a lock
        // and a look-up), so it is asked only of the peers drawn.
        let candidate = |i: usize| -> bool {
            let (pid, p) = torrent.peers.get_index(i).expect("index in range");
            *pid != req.peer_id && p.conn != req.conn && !(req.seeder && p.seeder)
        };
        let conn = |i: usize| torrent.peers.get_index(i).expect("index in range").1.conn;
        let eligible = |i: usize| candidate(i) && takes_offers(conn(i));
        // Distinct random indices: in a small swarm a partial shuffle of the candidates,
        // dropping those whose connection takes no offers as they are drawn; in a large
        // one draw at random with a bounded number of tries (a few collisions at most).
        let mut chosen: Vec<usize> = Vec::with_capacity(offers.len().min(len));
        if len <= 4 * offers.len() + 16 {
            let mut all: Vec<usize> = (0..len).filter(|&i| candidate(i)).collect();
            let mut n = 0;
            while n < offers.len() && n < all.len() {
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
            let mut tries = 8 * offers.len() + 16;
            while chosen.len() < offers.len() && tries > 0 {
                tries -= 1;
                let i = fastrand::usize(0..len);
                if !chosen.contains(&i) && eligible(i) {
                    chosen.push(i);
                }
            }
        }
        let max_age = self.config.offer_max_age;
        let cap = self.config.max_pending_offers.max(1);
        for (offer, i) in chosen.into_iter().enumerate() {
            let tag = self.tag(&offers[offer], &req.peer_id);
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

    /// Removes the peers a closed connection announced, all at once. Peers that have
    /// since moved to another connection stay. Returns how many were removed.
    pub fn remove_connection(
        &self,
        conn: ConnectionId,
        peers: impl IntoIterator<Item = (InfoHash, PeerId)>,
    ) -> usize {
        let mut removed = 0;
        for (info_hash, peer_id) in peers {
            if let Some(t) = self.torrents.lock(&info_hash).get() {
                if t.peers.get(&peer_id).is_some_and(|p| p.conn == conn) {
                    t.remove(&peer_id);
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Figures of one torrent (zeros for an unknown one).
    pub fn scrape(&self, info_hash: &InfoHash) -> TorrentStats {
        self.torrents
            .lock(info_hash)
            .get()
            .map_or(TorrentStats::default(), |t| t.stats())
    }

    /// Visits torrents shard by shard (each locked only for its own visit), stopping
    /// after `limit` of them: a full scrape never stops the world nor grows unbounded.
    pub fn scrape_all(&self, limit: usize, mut f: impl FnMut(InfoHash, TorrentStats)) {
        let mut n = 0;
        for shard in self.torrents.lock_each() {
            for (ih, t) in shard.torrents() {
                if n == limit {
                    return;
                }
                f(*ih, t.stats());
                n += 1;
            }
        }
    }

    /// Counts torrents, seeders and leechers now, one shard at a time (each locked only
    /// for its own count, which reads two numbers per torrent). For the sampler that
    /// feeds the metrics and the status page; not for the per-message path.
    pub fn totals(&self) -> WsTotals {
        let mut t = WsTotals::default();
        for shard in self.torrents.lock_each() {
            for (_, torrent) in shard.torrents() {
                let st = torrent.stats();
                t.torrents += 1;
                t.seeders += u64::from(st.seeders);
                t.leechers += u64::from(st.leechers);
            }
        }
        t
    }

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
                if p.seeder != seeder {
                    p.seeder = seeder;
                    if seeder {
                        t.seeders += 1;
                    } else {
                        t.seeders -= 1;
                    }
                }
            }
            None => {
                t.peers.insert(
                    peer_id,
                    WsPeer {
                        conn,
                        seeder,
                        expires,
                        pending: Pending::default(),
                    },
                );
                if seeder {
                    t.seeders += 1;
                }
            }
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
            t.peers.insert(
                *from,
                WsPeer {
                    conn: from_conn,
                    seeder: false,
                    expires: now.saturating_add(self.config.offer_max_age),
                    pending: Pending::default(),
                },
            );
        }
        let tag = self.tag(&offer_id, from);
        let p = t.peers.get_mut(to)?;
        p.pending.push(
            tag,
            now,
            self.config.offer_max_age,
            self.config.max_pending_offers.max(1),
        );
        Some(p.conn)
    }

    /// Whether `peer_id` is listed in `info_hash`, and on which connection (tests, admin).
    pub fn peer_connection(&self, info_hash: &InfoHash, peer_id: &PeerId) -> Option<ConnectionId> {
        self.torrents
            .lock(info_hash)
            .get()
            .and_then(|t| t.peers.get(peer_id))
            .map(|p| p.conn)
    }

    /// Drops expired peers, expired pending offers and torrents that stayed empty past
    /// their time, one shard at a time.
    pub fn clean(&self, now: u32) -> WsCleanReport {
        let mut report = WsCleanReport::default();
        let ttl = self.config.torrent_ttl;
        let max_age = self.config.offer_max_age;
        for mut shard in self.torrents.lock_each() {
            shard.retain(|t| {
                let before = t.peers.len();
                t.peers.retain(|_, p| {
                    p.pending.clean(now, max_age);
                    p.expires >= now
                });
                report.peers_expired += before - t.peers.len();
                t.seeders = t.peers.values().filter(|p| p.seeder).count() as u32;
                let keep = !t.peers.is_empty() || now.saturating_sub(t.last_announce) < ttl;
                if keep {
                    report.peers += t.peers.len();
                } else {
                    report.torrents_removed += 1;
                }
                keep
            });
            report.torrents += shard.len();
        }
        report
    }
}

#[cfg(test)]
#[path = "webtorrent_tests.rs"]
mod tests;
