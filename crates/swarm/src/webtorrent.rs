//! The WebTorrent store: swarms whose peers are WebSocket connections, not addresses.
//!
//! A WebTorrent peer cannot be handed out as an IP and port: the tracker relays its WebRTC
//! offers to other peers and their answers back. So these swarms live apart from the
//! UDP/HTTP ones in [`crate::Store`], kept the same way (a [`Sharded`] map by info hash,
//! each shard behind its own lock), and each peer points at an opaque [`ConnectionId`] that the
//! server maps to a live connection. The store never sees a socket or a runtime.
//!
//! It also remembers which offers it relayed to which peer, so that only answers to real
//! offers are relayed. The store is split by job:
//!
//! - this file: the store itself, announces, scrapes, totals and the cleaner;
//! - `torrent`: one swarm's peers and the counts kept beside them;
//! - `offers`: where offers go, the pending offers each peer remembers, and the answer
//!   check;
//! - `remote`: peers that another node of a cluster serves.

mod offers;
mod pending;
mod remote;
mod torrent;

use shoal_proto::ws::OfferId;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

pub use offers::{AnswerRefusal, OfferIds, OfferTarget};
pub use remote::{is_remote, REMOTE_CONNECTION};

use crate::sharded::Sharded;
use crate::TorrentStats;
use torrent::WsTorrent;

/// The server's name for one live connection. Opaque to the store; never reused by the
/// server while a peer may still point at it.
pub type ConnectionId = u64;

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
    /// Offers remembered per recipient peer. A peer that holds this many unanswered ones,
    /// none expired, is not chosen for another (which would push out the oldest, and its
    /// answer would be refused); only offers relayed for another node of a cluster push out
    /// the oldest. An offer can wait in the recipient's socket buffers for as long as its client takes to read
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

/// One WebTorrent announce, as the store needs it (already validated by the front end).
#[derive(Clone, Copy, Debug)]
pub struct WsAnnounce {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub conn: ConnectionId,
    pub event: AnnounceEvent,
    pub seeder: bool,
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
        mut offers: &[OfferId],
        now: u32,
        out: &mut Vec<OfferTarget>,
    ) -> WsAnnounceOutcome {
        self.announce_to(req, &mut offers, now, out, |_| true)
    }

    /// [`WebTorrentStore::announce`], with offers going only to peers whose connection
    /// `takes_offers` now (its outgoing queue has room): an offer that would be dropped on
    /// the way neither takes a target from the offers that would arrive nor leaves a
    /// pending entry that pushes out the offers a peer did receive (whose answers would
    /// then be refused as unknown). Called under the torrent's lock: `takes_offers` must
    /// not touch this store.
    pub fn announce_to(
        &self,
        req: &WsAnnounce,
        offers: &mut dyn OfferIds,
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
                torrent.set_seeder(&req.peer_id, req.seeder)
            }
            None => {
                torrent.insert(req.peer_id, req.conn, req.seeder, expires);
                outcome.joined = true;
                req.seeder
            }
        };
        if became_seeder && req.event == AnnounceEvent::Completed {
            torrent.completed = torrent.completed.saturating_add(1);
        }
        if offers.count() > 0 {
            self.choose_targets(torrent, req, offers, now, out, &takes_offers);
        }
        outcome.stats = torrent.stats();
        outcome
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
