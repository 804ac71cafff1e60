//! The in-memory accounting ledger: every private-tracker announce is recorded here, and
//! the sums per (user, torrent) wait here until the database writer drains them.
//!
//! Announces arrive from every worker thread of every front end, so the ledger is sharded:
//! one keyed hash of (user, torrent) picks a shard, whose `parking_lot` mutex is held only
//! while that one announce is compared and added (a few map operations, no I/O, no
//! allocation once the maps have grown). Everything about one (user, torrent) account, its
//! peers, its pending sums and its snatch, lives in the same shard, so a record takes
//! exactly one lock and two accounts never contend unless they share a shard.
//!
//! The ledger never waits on the database and never loses a sum: [`Ledger::drain`] hands
//! the pending sums over and forgets them; if writing them fails, [`Ledger::restore`] adds
//! them back (merged with whatever arrived meanwhile). The per-peer records are bounded by
//! [`Ledger::expire`]; the pending sums by the number of accounts with activity since the
//! last successful write.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use parking_lot::Mutex;
use shoal_proto::{AnnounceEvent, PeerId};
use shoal_swarm::sharded::Hasher;

use super::credit::{credit, AccountedAnnounce, Delta, PeerRecord};

/// Tunables of the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerConfig {
    /// Number of shards (rounded up to a power of two).
    pub shards: usize,
    /// The most seconds of seeding or leeching one announce can credit: a peer silent for
    /// longer was not (provably) there, so the rest of the gap is not credited.
    pub max_gap: u32,
    /// Seconds a silent peer's record is kept. Past it [`Ledger::expire`] drops the
    /// record; if the peer comes back its counters are only a new baseline. Keep it at
    /// least `max_gap`.
    pub peer_ttl: u32,
    /// The most accounts with pending sums (while the database is unreachable). Past it,
    /// an announce of an account with none pending is not recorded at all ("deferred"):
    /// the peer's record keeps its previous counters, so its next recorded announce
    /// carries the bytes (counters are cumulative), unless the client restarts meanwhile.
    pub max_pending: usize,
}

impl LedgerConfig {
    /// The defaults for an announce `interval` (seconds): time credited up to two
    /// intervals per announce, records kept for four, and never less than clients really
    /// wait: libtorrent re-announces over UDP at most once a minute whatever the interval,
    /// so time counts up to two minutes per announce and records stay two hours at least.
    pub fn for_interval(interval: u32) -> Self {
        Self {
            shards: 64,
            max_gap: interval.saturating_mul(2).max(120),
            peer_ttl: interval.saturating_mul(4).max(7200),
            max_pending: 1_000_000,
        }
    }
}

impl Default for LedgerConfig {
    /// For shoal's default announce interval (1800 s).
    fn default() -> Self {
        Self::for_interval(1800)
    }
}

/// One (user, torrent) account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Account {
    user_id: u64,
    torrent_id: u64,
}

impl Account {
    #[inline]
    fn of(delta: &Delta) -> Self {
        Self {
            user_id: delta.user_id,
            torrent_id: delta.torrent_id,
        }
    }
}

/// One client of one user on one torrent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PeerKey {
    account: Account,
    peer_id: PeerId,
}

/// One lock's worth of accounts.
#[derive(Default)]
struct Shard {
    peers: HashMap<PeerKey, PeerRecord, Hasher>,
    pending: HashMap<Account, Delta, Hasher>,
    snatched: HashSet<Account, Hasher>,
}

impl Shard {
    fn add(&mut self, delta: &Delta) {
        self.pending
            .entry(Account::of(delta))
            .or_insert_with(|| Delta::new(delta.user_id, delta.torrent_id))
            .merge(delta);
    }
}

/// One peer's record, taken out of the ledger to survive a restart (see
/// [`Ledger::peer_records`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedPeer {
    pub user_id: u64,
    pub torrent_id: u64,
    pub peer_id: PeerId,
    pub record: PeerRecord,
}

/// What [`Ledger::record`] did with one announce (for metrics and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// What the announce added to its account (`completed`: this was the snatch).
    pub delta: Delta,
    /// Whether the ledger knew the peer before (false: the announce set its baseline).
    pub known: bool,
    /// Not recorded: the pending sums are at their bound (see [`LedgerConfig::max_pending`]).
    pub deferred: bool,
}

/// Per (user, torrent) sums of every recorded announce, waiting for the database.
pub struct Ledger {
    shards: Box<[Mutex<Shard>]>,
    shard_mask: usize,
    /// `config.max_pending` per shard.
    pending_cap: usize,
    hasher: Hasher,
    config: LedgerConfig,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(config: LedgerConfig) -> Self {
        let n = config.shards.max(1).next_power_of_two();
        Self {
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            shard_mask: n - 1,
            pending_cap: config.max_pending.div_ceil(n).max(1),
            hasher: Hasher::default(),
            config,
        }
    }

    /// The tunables in force.
    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    #[inline]
    fn shard(&self, account: &Account) -> &Mutex<Shard> {
        // The maps inside hash with the same keys: take the shard from the high bits so the
        // two do not correlate.
        let hash = self.hasher.hash_one(account);
        &self.shards[(hash >> 32) as usize & self.shard_mask]
    }

    /// Accounts one announce: compares it with the peer's previous one, adds what it is
    /// worth to its (user, torrent) pending sums, counts a `completed` as the snatch if it
    /// is the user's first on this torrent, and keeps the peer's counters for next time
    /// (or forgets the peer on `stopped`).
    pub fn record(&self, a: &AccountedAnnounce) -> Recorded {
        let account = Account {
            user_id: a.user_id,
            torrent_id: a.torrent_id,
        };
        let key = PeerKey {
            account,
            peer_id: a.peer_id,
        };
        let gap = self.config.max_gap;
        let mut guard = self.shard(&account).lock();
        let shard = &mut *guard;
        if shard.pending.len() >= self.pending_cap && !shard.pending.contains_key(&account) {
            return Recorded {
                delta: Delta::new(a.user_id, a.torrent_id),
                known: shard.peers.contains_key(&key),
                deferred: true,
            };
        }
        // One lookup per announce: the entry is read, compared and replaced in place.
        let (mut delta, known) = if a.event == AnnounceEvent::Stopped {
            let previous = shard.peers.remove(&key);
            (credit(previous.as_ref(), a, gap), previous.is_some())
        } else {
            match shard.peers.entry(key) {
                Entry::Occupied(mut seen) => {
                    let delta = credit(Some(seen.get()), a, gap);
                    let next = PeerRecord::after(Some(seen.get()), a);
                    *seen.get_mut() = next;
                    (delta, true)
                }
                Entry::Vacant(new) => {
                    new.insert(PeerRecord::after(None, a));
                    (credit(None, a, gap), false)
                }
            }
        };
        delta.completed = a.event == AnnounceEvent::Completed && shard.snatched.insert(account);
        if !delta.is_empty() {
            shard.add(&delta);
        }
        Recorded {
            delta,
            known,
            deferred: false,
        }
    }

    /// Marks (user, torrent) as already snatched, so that a later `completed` is not counted
    /// again: for loading the snatches the database already holds.
    pub fn remember_snatch(&self, user_id: u64, torrent_id: u64) {
        let account = Account {
            user_id,
            torrent_id,
        };
        self.shard(&account).lock().snatched.insert(account);
    }

    /// Takes every pending sum, leaving none: the batch for one database write. The
    /// order is unspecified. Shards are visited one at a time, so announces keep being
    /// recorded meanwhile (into the next batch).
    pub fn drain(&self) -> Vec<Delta> {
        let mut batch = Vec::new();
        for shard in self.shards.iter() {
            batch.extend(shard.lock().pending.drain().map(|(_, d)| d));
        }
        batch
    }

    /// Puts a drained batch back (its write failed): each delta is added to whatever its
    /// account gathered since, so nothing is lost and nothing counted twice.
    pub fn restore(&self, batch: Vec<Delta>) {
        for delta in &batch {
            self.shard(&Account::of(delta)).lock().add(delta);
        }
    }

    /// Forgets the peers silent for longer than the peer TTL (their last delta was
    /// counted when they last announced). Returns how many were forgotten.
    pub fn expire(&self, now: u32) -> usize {
        let ttl = self.config.peer_ttl;
        self.shards
            .iter()
            .map(|shard| {
                let mut guard = shard.lock();
                let peers = &mut guard.peers;
                let before = peers.len();
                peers.retain(|_, p| now.saturating_sub(p.seen) <= ttl);
                before - peers.len()
            })
            .sum()
    }

    /// Every peer record (for the file that carries them over a restart).
    pub fn peer_records(&self) -> Vec<SavedPeer> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().peers.iter().map(|(k, record)| SavedPeer {
                user_id: k.account.user_id,
                torrent_id: k.account.torrent_id,
                peer_id: k.peer_id,
                record: *record,
            }));
        }
        out
    }

    /// Puts saved peer records back (at start, before any announce): each peer's next
    /// announce is then compared with its last one before the restart.
    pub fn restore_peers(&self, peers: impl IntoIterator<Item = SavedPeer>) {
        for p in peers {
            let account = Account {
                user_id: p.user_id,
                torrent_id: p.torrent_id,
            };
            let key = PeerKey {
                account,
                peer_id: p.peer_id,
            };
            self.shard(&account).lock().peers.insert(key, p.record);
        }
    }

    /// Peers whose previous announce the ledger remembers.
    pub fn peers(&self) -> usize {
        self.shards.iter().map(|s| s.lock().peers.len()).sum()
    }

    /// Accounts with sums waiting for [`Ledger::drain`].
    pub fn pending_accounts(&self) -> usize {
        self.shards.iter().map(|s| s.lock().pending.len()).sum()
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(LedgerConfig::default())
    }
}
