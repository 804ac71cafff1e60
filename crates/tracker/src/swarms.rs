//! The tracker's swarm store, as every part of the tracker sees it: an open tracker's
//! [`Store`], whose peer slots keep nothing beyond the store's own, or a private tracker's
//! [`SlotStore`], whose slots keep their clients' accounting records (see
//! [`crate::private::ledger`]), or an open tracker's store that keeps no peer ids
//! (`[store] peer_ids = false`). The choice is made once, at start, by `[private] enabled`;
//! each call here is one `match` on it, the same branch every time, and below it the code of
//! each store is compiled for its own slot type (open mode's slots stay 24 bytes).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash};
use shoal_swarm::journal::Change;
use shoal_swarm::{
    Announce, Anonymous, CleanReport, Family, Peer, PeerSink, Store, StoreConfig, Torrent,
    TorrentStats,
};

use crate::private::{AccountedAnnounce, Ledger, Recorded, SlotStore};

/// One store, open or private.
pub enum Swarms {
    /// Open mode: nothing accounted.
    Open(Store),
    /// Open mode keeping no peer id ([`Anonymous`] slots, 10 bytes an IPv4 peer against 30).
    Anonymous(Store<Anonymous>),
    /// Private mode: the store whose slots hold records, and the ledger that owns them
    /// (and has the store [`Ledger::attach`]ed).
    Private {
        store: Arc<SlotStore>,
        ledger: Arc<Ledger>,
    },
}

/// Runs `$body` with `$s` bound to the store, whichever it is: each store's code is
/// compiled for its own slot type. For the crates that keep the store (snapshots) too.
#[macro_export]
macro_rules! on_store {
    ($swarms:expr, $s:ident => $body:expr) => {
        match $swarms {
            $crate::Swarms::Open($s) => $body,
            $crate::Swarms::Anonymous($s) => $body,
            $crate::Swarms::Private { store: $s, .. } => $body,
        }
    };
}
use crate::on_store as each;

/// What a walk over the store shows of one torrent ([`Swarms::for_each_torrent`]).
#[derive(Clone, Copy, Debug)]
pub struct TorrentFigures {
    pub stats: TorrentStats,
    pub peers_v4: usize,
    pub peers_v6: usize,
}

/// One torrent's peers, as [`Swarms::torrent_peers`] copies them out.
#[derive(Clone, Debug, Default)]
pub struct TorrentPeers {
    pub stats: TorrentStats,
    pub v4: Vec<Peer<CompactPeerV4>>,
    pub v6: Vec<Peer<CompactPeerV6>>,
}

fn figures<X: shoal_swarm::PeerExt>(t: &Torrent<X>) -> TorrentFigures {
    TorrentFigures {
        stats: t.stats(),
        peers_v4: t.v4().len(),
        peers_v6: t.v6().map_or(0, |s| s.len()),
    }
}

impl Swarms {
    /// A private store, attached to `ledger`.
    pub fn private(store: SlotStore, ledger: Arc<Ledger>) -> Self {
        let store = Arc::new(store);
        ledger.attach(store.clone());
        Self::Private { store, ledger }
    }

    /// Whether the store keeps peer ids, for the answers that list them.
    pub fn keeps_peer_ids(&self) -> bool {
        !matches!(self, Self::Anonymous(_))
    }

    pub fn config(&self) -> &StoreConfig {
        each!(self, s => s.config())
    }

    pub fn numwant(&self, requested: Option<i64>) -> usize {
        each!(self, s => s.numwant(requested))
    }

    pub fn scrape(&self, info_hash: &InfoHash) -> TorrentStats {
        each!(self, s => s.scrape(info_hash))
    }

    pub fn take_changes(&self) -> Vec<Change> {
        each!(self, s => s.take_changes())
    }

    pub fn raise_completed(&self, info_hash: &InfoHash, completed: u32) {
        each!(self, s => s.raise_completed(info_hash, completed))
    }

    /// An announce with the accounting ticket the policy gave it, if any (private mode):
    /// recorded in the announcer's slot or the ledger ([`Ledger::announce`]). Without a
    /// ticket nothing is accounted.
    #[inline]
    pub fn announce_accounted<A: Family>(
        &self,
        req: &Announce<A>,
        now: u32,
        out: &mut impl PeerSink<A>,
        ticket: Option<&AccountedAnnounce>,
    ) -> TorrentStats {
        match self {
            // Open mode's policy issues no tickets.
            Self::Open(s) => s.announce(req, now, out),
            Self::Anonymous(s) => s.announce(req, now, out),
            Self::Private { store, ledger } => {
                private_announce(store, ledger, req, now, out, ticket)
            }
        }
    }

    /// Records the ticket of an announce whose peer this store does not hold (WebTorrent's)
    /// in the ledger's map; nothing in open mode (which issues no tickets).
    pub fn record_elsewhere(&self, ticket: &AccountedAnnounce) {
        if let Self::Private { ledger, .. } = self {
            count_deferred(ledger.record(ticket));
        }
    }

    /// The ledger, in private mode.
    pub fn ledger(&self) -> Option<&Arc<Ledger>> {
        match self {
            Self::Open(_) | Self::Anonymous(_) => None,
            Self::Private { ledger, .. } => Some(ledger),
        }
    }

    /// Records a peer another node knows; a local client's record whose slot it takes over
    /// goes back to the ledger.
    pub fn upsert_remote<A: Family>(&self, info_hash: &InfoHash, peer: Peer<A>) {
        match self {
            Self::Open(s) => s.upsert_remote(info_hash, peer),
            Self::Anonymous(s) => s.upsert_remote(info_hash, peer),
            Self::Private { store, ledger } => {
                let park = ledger.parker(info_hash, peer.addr.any());
                store.upsert_remote_with(info_hash, peer, park);
            }
        }
    }

    /// Removes a peer another node knew and no longer does; a local client's record in the
    /// slot goes back to the ledger.
    pub fn remove_remote<A: Family>(&self, info_hash: &InfoHash, addr: A) {
        match self {
            Self::Open(s) => s.remove_remote(info_hash, addr),
            Self::Anonymous(s) => s.remove_remote(info_hash, addr),
            Self::Private { store, ledger } => {
                let park = ledger.parker(info_hash, addr.any());
                store.remove_remote_with(info_hash, addr, park);
            }
        }
    }

    /// Drops expired peers and idle torrents ([`Store::clean`]); an expired client's
    /// record goes back to the ledger, which keeps it for its own TTL.
    pub fn clean(&self, now: u32) -> CleanReport {
        self.clean_until(now, &AtomicBool::new(false))
    }

    /// [`Swarms::clean`], given up once `stop` is set ([`Store::clean_until`]).
    pub fn clean_until(&self, now: u32, stop: &AtomicBool) -> CleanReport {
        match self {
            Self::Open(s) => s.clean_until(now, stop, |_, _, _, _| ()),
            Self::Anonymous(s) => s.clean_until(now, stop, |_, _, _, _| ()),
            Self::Private { store, ledger } => {
                store.clean_until(now, stop, |h, id, addr, x| ledger.parker(h, addr)(id, x))
            }
        }
    }

    /// Visits every torrent, one shard at a time under its lock (a full scrape, the
    /// status page's survey).
    pub fn for_each_torrent(&self, mut f: impl FnMut(&InfoHash, TorrentFigures)) {
        each!(self, s => s.for_each_shard(|shard| {
            for (h, t) in shard.torrents() {
                f(h, figures(t));
            }
        }))
    }

    /// One torrent's figures and peers (`None` if the store does not hold it).
    pub fn torrent_peers(&self, info_hash: &InfoHash) -> Option<TorrentPeers> {
        each!(self, s => s.with_torrent(info_hash, |t| TorrentPeers {
            stats: t.stats(),
            v4: t.v4().peers().collect(),
            v6: t.v6().map(|s| s.peers().collect()).unwrap_or_default(),
        }))
    }

    /// Figures of one torrent's swarms, if the store holds it.
    pub fn torrent_figures(&self, info_hash: &InfoHash) -> Option<TorrentFigures> {
        each!(self, s => s.with_torrent(info_hash, figures))
    }
}

/// Private mode's announce, out of line, so that open mode's announce path carries none of
/// its code. Measured on 2026-11-27 (commit fe24e21), open mode's announce in the server's
/// `benches/udp_handler.rs` against the build before it,
/// alternating runs: with both stores' announce inlined into one function, 543, 518 and
/// 570 ns against 504, 417 and 430; out of line, 745, 807 and 584 against 606, 574 and 501
/// in the first three runs and at par in fifteen more (medians 489 against 502 ns). Whether
/// the inlining cost anything, this VM's noise does not settle.
#[inline(never)]
fn private_announce<A: Family>(
    store: &SlotStore,
    ledger: &Ledger,
    req: &Announce<A>,
    now: u32,
    out: &mut impl PeerSink<A>,
    ticket: Option<&AccountedAnnounce>,
) -> TorrentStats {
    let Some(a) = ticket else {
        // An announce the policy did not account (none in private mode: its rule tickets
        // every admitted announce that has counters).
        return store.announce(req, now, out);
    };
    let (stats, recorded) = ledger.announce(store, req, now, out, a);
    count_deferred(recorded);
    stats
}

/// Counts an announce the ledger did not record (its sums are at their bound).
#[inline]
fn count_deferred(recorded: Recorded) {
    if recorded.deferred {
        metrics::counter!("shoal_private_deferred_total").increment(1);
    }
}
