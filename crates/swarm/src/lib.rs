//! The swarm store: every torrent's peers, shared by the UDP, HTTP and WebTorrent front
//! ends.
//!
//! Torrents are keyed by info hash and sharded over many independently locked shards
//! ([`sharded::Sharded`]), so that workers on different cores almost never wait for each
//! other. One keyed hash of the info hash picks the shard and the slot inside it. Each
//! torrent keeps its IPv4 and IPv6 peers apart (an IPv4 announcer only ever gets IPv4
//! peers) and a completed count that is really counted.
//!
//! The store knows nothing of sockets, clocks or config files: callers pass the current
//! coarse time ([`clock::now`]) and the peers chosen for a response go into a caller's
//! reusable buffer ([`PeerSink`]), so an announce does not allocate in the steady state.
//!
//! WebTorrent peers, whose "address" is a connection, live in a store of their own,
//! [`webtorrent::WebTorrentStore`], sharded the same way.

#![forbid(unsafe_code)]

pub mod clock;
mod departures;
mod family;
pub mod journal;
mod peer;
mod peers;
mod positions;
pub mod sharded;
mod slots;
pub mod snapshot;
pub mod webtorrent;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use shoal_proto::{AnnounceEvent, CompactPeerV4, CompactPeerV6, InfoHash, PeerId};

pub use family::Family;
pub use peer::{
    Address, Anonymous, Inline, KeptId, NotInline, OnePeer, Peer, PeerExt, PeerMeta, PeerSink,
};
pub use peers::{ExtSlot, Swarm, INDEX_THRESHOLD};
pub use snapshot::{BaseId, SnapshotError, SnapshotHeader, SnapshotSummary};

use journal::{AnyAddr, Change, Journal};
use sharded::Sharded;

/// Peers a snapshot or a sweep handles under one lock in a torrent larger than this: such
/// a torrent is done a chunk at a time, its shard's lock taken again for each chunk, so
/// that its announces wait for a chunk (milliseconds) rather than the whole swarm (12
/// million peers held the lock for most of a second, `examples/pauses.rs`).
pub(crate) const LOCK_CHUNK: usize = 1 << 16;

/// Tunables of the store. The server fills it from its config.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Number of shards (rounded up to a power of two).
    pub shards: usize,
    /// Seconds a peer stays listed after its last announce.
    pub peer_ttl: u32,
    /// Seconds an empty torrent (and its completed count) is kept after its last announce.
    pub torrent_ttl: u32,
    /// Peers returned when the client does not say how many it wants.
    pub default_numwant: usize,
    /// Most peers returned, whatever the client asks.
    pub max_numwant: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            shards: 512,
            peer_ttl: 3600,
            torrent_ttl: 3600,
            default_numwant: 50,
            max_numwant: 200,
        }
    }
}

/// Figures of one torrent, as announce and scrape responses report them (both families).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TorrentStats {
    pub seeders: u32,
    pub leechers: u32,
    pub completed: u32,
}

/// One announce, as the store needs it. The front end has already validated it (port,
/// address) and resolved the address it is recorded under.
#[derive(Clone, Copy, Debug)]
pub struct Announce<A> {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub addr: A,
    pub event: AnnounceEvent,
    /// Bytes left to download; zero means seeder.
    pub left: u64,
    /// Peers wanted, as resolved by [`Store::numwant`].
    pub numwant: usize,
}

/// One torrent's state; `X` is what the layer above keeps in each peer's slot
/// ([`PeerExt`]).
#[derive(Debug, Default)]
pub struct Torrent<X: PeerExt = ()> {
    pub(crate) v4: Swarm<CompactPeerV4, X>,
    /// Most torrents never see an IPv6 peer: keep them one pointer wide.
    pub(crate) v6: Option<Box<Swarm<CompactPeerV6, X>>>,
    pub(crate) completed: u32,
    /// Store-clock second of the last announce, for removing empty torrents and for
    /// change sections; 0 for a torrent restored from a snapshot and not announced since.
    pub(crate) last_announce: u32,
}

impl<X: PeerExt> Torrent<X> {
    pub fn stats(&self) -> TorrentStats {
        let (s6, l6) = self
            .v6
            .as_ref()
            .map_or((0, 0), |s| (s.seeders(), s.leechers()));
        TorrentStats {
            seeders: self.v4.seeders() + s6,
            leechers: self.v4.leechers() + l6,
            completed: self.completed,
        }
    }

    pub fn v4(&self) -> &Swarm<CompactPeerV4, X> {
        &self.v4
    }

    pub fn v6(&self) -> Option<&Swarm<CompactPeerV6, X>> {
        self.v6.as_deref()
    }

    fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.as_ref().is_none_or(|s| s.is_empty())
    }

    /// Peers of both families.
    fn len(&self) -> usize {
        self.v4.len() + self.v6.as_ref().map_or(0, |s| s.len())
    }
}

/// One lock's worth of torrents, as [`Store::for_each_shard`] shows it.
pub type Shard<X = ()> = sharded::Shard<Torrent<X>>;

/// Totals kept up to date by the cleaner (cheap to read for metrics and the status page).
#[derive(Debug, Default)]
pub struct Totals {
    pub torrents: AtomicU64,
    pub seeders: AtomicU64,
    pub leechers: AtomicU64,
    pub peers_v6: AtomicU64,
}

/// What one cleaning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    pub peers_expired: usize,
    pub torrents_removed: usize,
    pub torrents: usize,
    pub peers: usize,
}

/// The store. Cheap to share: wrap it in an `Arc`. `X` is what the layer above keeps in
/// each peer's slot: nothing in open mode (`Store` is `Store<()>`).
pub struct Store<X: PeerExt = ()> {
    torrents: Sharded<Torrent<X>>,
    config: StoreConfig,
    totals: Totals,
    /// Local changes for the cluster exchange, when on ([`Store::with_journal`]).
    journal: Option<Journal>,
    /// Stops, for the snapshot's change sections, once asked for.
    departures: departures::Departures,
}

impl Store {
    /// An empty store whose peer slots keep nothing more.
    pub fn new(config: StoreConfig) -> Self {
        Self::with_extension(config)
    }
}

impl<X: PeerExt> Store<X> {
    /// An empty store whose peer slots each keep an `X` ([`Store::announce_with`]).
    pub fn with_extension(config: StoreConfig) -> Self {
        Self {
            torrents: Sharded::new(config.shards),
            config,
            totals: Totals::default(),
            journal: None,
            departures: Default::default(),
        }
    }

    /// This store, journaling local changes (at most about `capacity` between two takes)
    /// for [`Store::take_changes`].
    pub fn with_journal(self, capacity: usize) -> Self {
        Self {
            journal: Some(Journal::new(64, capacity)),
            ..self
        }
    }

    /// Local changes since the last call (none without a journal).
    pub fn take_changes(&self) -> Vec<Change> {
        self.journal.as_ref().map_or_else(Vec::new, Journal::take)
    }

    /// Changes the journal had to drop because it was full (since start).
    pub fn journal_dropped(&self) -> u64 {
        self.journal.as_ref().map_or(0, Journal::dropped)
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Resolves a client's `numwant` (negative or absent: the default) against the maximum.
    #[inline]
    pub fn numwant(&self, requested: Option<i64>) -> usize {
        match requested {
            Some(n) if n >= 0 => (n as u64).min(self.config.max_numwant as u64) as usize,
            _ => self.config.default_numwant.min(self.config.max_numwant),
        }
    }

    /// Records an announce and writes up to `numwant` peers of its family into `out`.
    pub fn announce<A: Family>(
        &self,
        req: &Announce<A>,
        now: u32,
        out: &mut impl PeerSink<A>,
    ) -> TorrentStats {
        self.announce_with(req, now, out, |_| ()).0
    }

    /// [`announce`](Self::announce), handing `visit` the announcer's extension while its
    /// slot is at hand, under the torrent's lock (see [`ExtSlot`]; a stop for a torrent the
    /// store does not hold is [`ExtSlot::Absent`]).
    pub fn announce_with<A: Family, R>(
        &self,
        req: &Announce<A>,
        now: u32,
        out: &mut impl PeerSink<A>,
        visit: impl FnOnce(ExtSlot<'_, X>) -> R,
    ) -> (TorrentStats, R) {
        let stopped = req.event == AnnounceEvent::Stopped;
        let seeder = req.left == 0 || req.event == AnnounceEvent::Completed;
        let mut slot = self.torrents.lock(&req.info_hash);
        let hasher = self.torrents.hasher();
        let Some(torrent) = slot.for_announce(stopped) else {
            return (TorrentStats::default(), visit(ExtSlot::Absent));
        };
        torrent.last_announce = now;
        if stopped {
            self.departures.record(now, &req.info_hash, req.addr.any());
        }
        let peer = Peer {
            peer_id: req.peer_id,
            addr: req.addr,
            expires: now.saturating_add(self.config.peer_ttl),
            seeder,
        };
        let (done, visited) = A::swarm(torrent).upsert_with(peer, stopped, hasher, visit);
        if done.became_seeder && req.event == AnnounceEvent::Completed {
            torrent.completed = torrent.completed.saturating_add(1);
        }
        if !stopped {
            A::swarm(torrent).select(req.numwant, seeder, done.position, out);
        }
        let stats = torrent.stats();
        drop(slot);
        if let Some(journal) = &self.journal {
            let addr = req.addr.any();
            journal.push(
                &req.info_hash,
                if stopped {
                    Change::Stopped {
                        info_hash: req.info_hash,
                        addr,
                    }
                } else {
                    Change::Announced {
                        info_hash: req.info_hash,
                        addr,
                        peer_id: req.peer_id,
                        seeder,
                        completed: req.event == AnnounceEvent::Completed,
                    }
                },
            );
        }
        (stats, visited)
    }

    /// Records a peer another node knows (no journal entry: it is not this node's to
    /// publish). `peer.expires` is on this store's clock.
    pub fn upsert_remote<A: Family>(&self, info_hash: &InfoHash, peer: Peer<A>) {
        self.upsert_remote_with(info_hash, peer, |_, _| ());
    }

    /// [`upsert_remote`](Self::upsert_remote), handing `displaced` the id and extension of
    /// a different client the address held (a local slot the remote peer takes over).
    pub fn upsert_remote_with<A: Family>(
        &self,
        info_hash: &InfoHash,
        peer: Peer<A>,
        displaced: impl FnOnce(PeerId, X),
    ) {
        let mut slot = self.torrents.lock(info_hash);
        let hasher = self.torrents.hasher();
        let torrent = slot.get_or_insert_default();
        A::swarm(torrent).upsert_with(peer, false, hasher, |ext| {
            if let ExtSlot::Replaced(id, old, _) = ext {
                displaced(id, old);
            }
        });
    }

    /// Removes a peer another node knew and no longer does.
    pub fn remove_remote<A: Family>(&self, info_hash: &InfoHash, addr: A) {
        self.remove_remote_with(info_hash, addr, |_, _| ());
    }

    /// [`remove_remote`](Self::remove_remote), handing `removed` the id and extension of
    /// the slot it took out, if there was one.
    pub fn remove_remote_with<A: Family>(
        &self,
        info_hash: &InfoHash,
        addr: A,
        removed: impl FnOnce(PeerId, X),
    ) {
        let mut slot = self.torrents.lock(info_hash);
        let hasher = self.torrents.hasher();
        if let Some(torrent) = slot.get() {
            let peer = Peer {
                peer_id: PeerId([0; 20]),
                addr,
                expires: 0,
                seeder: false,
            };
            A::swarm(torrent).upsert_with(peer, true, hasher, |ext| {
                if let ExtSlot::Removed(id, old) = ext {
                    removed(id, old);
                }
            });
        }
    }

    /// Runs `f` on the extension of the peer at `addr` in `info_hash`'s swarm of its
    /// family (`None` if there is no such peer), under the torrent's lock.
    pub fn with_peer_ext<A: Family, R>(
        &self,
        info_hash: &InfoHash,
        addr: &A,
        f: impl FnOnce(Option<(PeerId, &mut X)>) -> R,
    ) -> R {
        let mut slot = self.torrents.lock(info_hash);
        let hasher = self.torrents.hasher();
        match slot.get() {
            Some(torrent) => f(A::peek_swarm(torrent).and_then(|s| s.ext_at(addr, hasher))),
            None => f(None),
        }
    }

    /// Raises a torrent's completed count to `completed` (the cluster's total), if known.
    pub fn raise_completed(&self, info_hash: &InfoHash, completed: u32) {
        if let Some(t) = self.torrents.lock(info_hash).get() {
            t.completed = t.completed.max(completed);
        }
    }

    /// Figures of one torrent (zeros for an unknown one).
    pub fn scrape(&self, info_hash: &InfoHash) -> TorrentStats {
        if let Some(journal) = &self.journal {
            journal.push(
                info_hash,
                Change::Scraped {
                    info_hash: *info_hash,
                },
            );
        }
        self.torrents
            .lock(info_hash)
            .get()
            .map_or(TorrentStats::default(), |t| t.stats())
    }

    /// Runs `f` on one torrent under its shard's lock (admin views, tests).
    pub fn with_torrent<R>(
        &self,
        info_hash: &InfoHash,
        f: impl FnOnce(&Torrent<X>) -> R,
    ) -> Option<R> {
        self.torrents.lock(info_hash).get().map(|t| f(t))
    }

    /// Visits every shard in turn, each under its own lock only while `f` runs: a full
    /// scrape or a snapshot never stops the world.
    pub fn for_each_shard(&self, mut f: impl FnMut(&Shard<X>)) {
        for shard in self.torrents.lock_each() {
            f(&shard);
        }
    }

    /// Inserts a torrent's state as restored from a snapshot. A peer already at an
    /// address (heard from since the start) keeps its entry; the saved completed count
    /// is merged as `completed` says. The torrent's last announce stays what it was (0,
    /// "not announced here", for one the store did not hold: see
    /// [`Store::write_snapshot_since`]).
    pub fn restore_torrent(
        &self,
        info_hash: InfoHash,
        completed: snapshot::Completed,
        v4: impl IntoIterator<Item = Peer<CompactPeerV4>>,
        v6: impl IntoIterator<Item = Peer<CompactPeerV6>>,
    ) {
        let mut slot = self.torrents.lock(&info_hash);
        let hasher = self.torrents.hasher();
        let entry = slot.get_or_insert_default();
        entry.completed = match completed {
            snapshot::Completed::AtLeast(n) => entry.completed.max(n),
            snapshot::Completed::Plus(n) => entry.completed.saturating_add(n),
        };
        for p in v4 {
            entry.v4.restore(p, hasher);
        }
        for p in v6 {
            CompactPeerV6::swarm(entry).restore(p, hasher);
        }
    }

    /// Of the departures a snapshot names, those whose address holds no peer in the
    /// torrent (the others were heard from since, or read from a newer record).
    pub(crate) fn absent(
        &self,
        info_hash: &InfoHash,
        v4: Vec<CompactPeerV4>,
        v6: Vec<CompactPeerV6>,
    ) -> Vec<AnyAddr> {
        let mut slot = self.torrents.lock(info_hash);
        let hasher = self.torrents.hasher();
        let t = slot.get();
        let has4 = |a: &CompactPeerV4| t.as_ref().is_some_and(|t| t.v4.has(a, hasher));
        let mut out: Vec<AnyAddr> = v4
            .into_iter()
            .filter(|a| !has4(a))
            .map(AnyAddr::V4)
            .collect();
        let v6_of = t.as_ref().and_then(|t| t.v6.as_deref());
        out.extend(
            v6.into_iter()
                .filter(|a| !v6_of.is_some_and(|s| s.has(a, hasher)))
                .map(AnyAddr::V6),
        );
        out
    }

    /// Drops expired peers and torrents that stayed empty past their time, one shard at a
    /// time, and refreshes [`Store::totals`]. Each shard is locked only for its own pass,
    /// so workers wait at most one shard's worth of work.
    pub fn clean(&self, now: u32) -> CleanReport {
        self.clean_with(now, |_, _, _, _| ())
    }

    /// [`clean`](Self::clean), handing `gone` each expired peer's torrent, id, address and
    /// extension.
    pub fn clean_with(
        &self,
        now: u32,
        gone: impl FnMut(&InfoHash, PeerId, AnyAddr, X),
    ) -> CleanReport {
        self.clean_until(now, &AtomicBool::new(false), gone)
    }

    /// [`clean_with`](Self::clean_with), given up at the next shard once `stop` is set (the
    /// process stops: its final snapshot should not wait for a sweep, most of a second at
    /// 30 million peers). A sweep given up leaves [`Store::totals`] as they were.
    pub fn clean_until(
        &self,
        now: u32,
        stop: &AtomicBool,
        mut gone: impl FnMut(&InfoHash, PeerId, AnyAddr, X),
    ) -> CleanReport {
        let mut report = CleanReport::default();
        self.departures
            .prune(now.saturating_sub(self.config.peer_ttl));
        let (mut seeders, mut leechers, mut v6) = (0u64, 0u64, 0u64);
        let hasher = self.torrents.hasher();
        let ttl = self.config.torrent_ttl;
        let mut large = Vec::new();
        for mut shard in self.torrents.lock_each() {
            if stop.load(Ordering::Relaxed) {
                return report;
            }
            shard.retain_keyed(|h, t| {
                if t.len() > LOCK_CHUNK {
                    large.push(*h);
                    return true;
                }
                report.peers_expired +=
                    t.v4.expire_with(now, hasher, |a, id, x| gone(h, id, a.any(), x));
                if let Some(s6) = &mut t.v6 {
                    report.peers_expired +=
                        s6.expire_with(now, hasher, |a, id, x| gone(h, id, a.any(), x));
                    if s6.is_empty() {
                        t.v6 = None;
                    }
                }
                let keep = !t.is_empty() || now.saturating_sub(t.last_announce) < ttl;
                if keep {
                    let st = t.stats();
                    seeders += u64::from(st.seeders);
                    leechers += u64::from(st.leechers);
                    v6 += t.v6.as_ref().map_or(0, |s| s.len() as u64);
                } else {
                    report.torrents_removed += 1;
                }
                keep
            });
            report.torrents += shard.len();
        }
        // The large torrents a chunk of peers per lock, so that their announces wait for
        // a chunk rather than the whole swarm.
        for h in &large {
            if stop.load(Ordering::Relaxed) {
                return report;
            }
            let (mut from4, mut from6) = (0, 0);
            loop {
                let mut slot = self.torrents.lock(h);
                let Some(t) = slot.get() else { break };
                let v4_left = from4 < t.v4.len();
                if v4_left {
                    let (n, next) =
                        t.v4.expire_from(from4, LOCK_CHUNK, now, hasher, |a, id, x| {
                            gone(h, id, a.any(), x)
                        });
                    (report.peers_expired, from4) = (report.peers_expired + n, next);
                } else if let Some(s6) = t.v6.as_mut().filter(|s| from6 < s.len()) {
                    let (n, next) = s6.expire_from(from6, LOCK_CHUNK, now, hasher, |a, id, x| {
                        gone(h, id, a.any(), x)
                    });
                    (report.peers_expired, from6) = (report.peers_expired + n, next);
                } else {
                    if t.v6.as_ref().is_some_and(|s| s.is_empty()) {
                        t.v6 = None;
                    }
                    let st = t.stats();
                    seeders += u64::from(st.seeders);
                    leechers += u64::from(st.leechers);
                    v6 += t.v6.as_ref().map_or(0, |s| s.len() as u64);
                    break;
                }
            }
        }
        report.peers = (seeders + leechers) as usize;
        self.totals
            .torrents
            .store(report.torrents as u64, Ordering::Relaxed);
        self.totals.seeders.store(seeders, Ordering::Relaxed);
        self.totals.leechers.store(leechers, Ordering::Relaxed);
        self.totals.peers_v6.store(v6, Ordering::Relaxed);
        report
    }

    /// Visits every peer's id and extension, torrent by torrent, one shard at a time under
    /// its lock only (as [`Store::for_each_shard`]); nothing moves meanwhile.
    pub fn for_each_ext_mut(&self, mut f: impl FnMut(&InfoHash, PeerId, &mut X)) {
        for mut shard in self.torrents.lock_each() {
            for (h, t) in shard.torrents_mut() {
                for (id, x) in t.v4.exts_mut() {
                    f(h, id, x);
                }
                if let Some(s6) = &mut t.v6 {
                    for (id, x) in s6.exts_mut() {
                        f(h, id, x);
                    }
                }
            }
        }
    }

    /// Totals as of the last [`Store::clean`].
    pub fn totals(&self) -> &Totals {
        &self.totals
    }
}

#[cfg(test)]
mod ext_tests;
#[cfg(test)]
mod tests;
