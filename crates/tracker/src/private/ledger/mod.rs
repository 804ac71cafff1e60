//! The in-memory accounting ledger: every private-tracker announce is recorded here, and
//! the sums per (user, torrent) wait here until the database writer drains them. Its
//! [`file`] carries the records and unwritten sums over a restart.
//!
//! # Where a client's record lives
//!
//! A client's record (its counters at its last announce, and what its announces added
//! since the last drain) lives in one of two places:
//!
//! - **in its swarm slot** ([`SlotRecord`], the private store's per-peer extension), when
//!   the client is one peer of one swarm: the common case. UDP and HTTP announces come with
//!   an accounting ticket from the policy, and [`Ledger::announce`] credits it to the slot
//!   the store has just found, under the torrent's lock: no look-up, hash or lock of the
//!   ledger's own on the announce path (a prototype of this measured on 2026-11-27 at 1.095x
//!   of the map's speed on the VM; `docs/benchmarks/private-udp/`). The ledger's map holds
//!   a marker for it ([`Kept::InSlot`]: the torrent and address), so the client is found
//!   wherever else it shows up.
//! - **in the ledger's map**, keyed by (user, torrent, peer id), for every other record: a
//!   client seen at more than one slot (IPv4 and IPv6, a new port while the old slot lives,
//!   WebTorrent beside UDP), WebTorrent's, records parked when their slot went (expired,
//!   taken over by another client or another node's peer), adopted from other nodes and
//!   restored from the ledger file. A slot whose record is parked takes it back at its
//!   client's next announce; a record found in a slot by an announce elsewhere is taken
//!   back into the map (`Ledger::unslot`), and every slot of that client then sends its
//!   announces to the map ([`SlotState::InLedger`]), as all announces went before.
//!
//! So each client has one record, wherever it announces from, and every rule of
//! [`super::credit`] applies to it unchanged. Lock order: a torrent's lock, then a ledger
//! shard's; nothing here takes a torrent's lock while holding a shard's.
//!
//! # The map
//!
//! Announces arrive from every worker thread of every front end, so the map is sharded:
//! one keyed hash of (user, torrent) picks a shard, whose `parking_lot` mutex is held only
//! while that one announce is compared and added (a few map operations, no I/O, no
//! allocation once the maps have grown). Everything about one (user, torrent) account, its
//! peers, its pending sums and its snatch, lives in the same shard, so a record takes
//! exactly one lock and two accounts never contend unless they share a shard.
//!
//! The ledger never waits on the database and never loses a sum: [`Ledger::drain`] hands
//! the pending sums over (the map's and the slots') and forgets them; if writing them
//! fails, [`Ledger::restore`] adds them back (merged with whatever arrived meanwhile). The
//! per-peer records in the map are bounded by [`Ledger::expire`], those in slots by the
//! store's own expiry (which parks them here); the pending sums by the number of accounts
//! with activity since the last successful write.

pub mod file;
mod map;
mod saved;
mod sharing;
mod slots;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use shoal_proto::AnnounceEvent;
use shoal_swarm::sharded::Hasher;

use crate::private::credit::{credit, AccountedAnnounce, Delta, PeerRecord};

use map::{add_pending, snatch, Account, Kept, PeerEntry, PeerKey, Shard, Sums};
pub use map::{SharedRecord, SlotAt};
pub use saved::SavedPeer;
pub use slots::{SlotRecord, SlotState, SlotStore};

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
    /// A snatch by a client that already has sums waiting is still recorded, and adds its
    /// account to the pending sums even past the bound (at most once per user and
    /// torrent: a snatch counts once).
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

/// The answer for an announce not recorded because the sums are at their bound.
fn deferred(a: &AccountedAnnounce, known: bool) -> Recorded {
    Recorded {
        delta: Delta::new(a.user_id, a.torrent_id),
        known,
        deferred: true,
    }
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
    /// Whether changed records are kept for [`Ledger::take_shared`].
    sharing: AtomicBool,
    /// The store whose slots hold records ([`Ledger::attach`]).
    slots: OnceLock<Arc<SlotStore>>,
}

/// The most times an announce follows its record from the map to a slot and back before
/// it is recorded against the map as it is (only announces of one client racing each other
/// over two addresses could need a second).
const FOLLOW: usize = 3;

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
            sharing: AtomicBool::new(false),
            slots: OnceLock::new(),
        }
    }

    /// Lets the records of `store`'s slots count as this ledger's: drains, the ledger file
    /// and the cluster read them there. Once, before the first announce through
    /// [`Ledger::announce`].
    pub fn attach(&self, store: Arc<SlotStore>) {
        let _ = self.slots.set(store);
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

    /// Accounts one announce against the map: compares it with the peer's previous one,
    /// adds what it is worth to its (user, torrent) pending sums, counts a `completed` as
    /// the snatch if it is the user's first on this torrent, and keeps the peer's counters
    /// for next time (or forgets the peer on `stopped`). A record found in a slot is taken
    /// back into the map first (WebTorrent announces, and slots of a client seen at more
    /// than one).
    pub fn record(&self, a: &AccountedAnnounce) -> Recorded {
        let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
        // Still in a slot after following it (announces racing over two addresses): this
        // one sets no baseline and is not counted; the slot keeps the client's record.
        self.in_map(&key, |key| self.try_record(a, key))
            .unwrap_or_else(|| deferred(a, true))
    }

    /// Runs `step` on `key`'s record in the map, taking the record back from its slot
    /// first each time `step` finds it there; `None` if it is still in a slot after
    /// [`FOLLOW`] tries.
    fn in_map<T>(&self, key: &PeerKey, step: impl Fn(&PeerKey) -> Result<T, SlotAt>) -> Option<T> {
        for _ in 0..FOLLOW {
            match step(key) {
                Ok(done) => return Some(done),
                Err(at) => self.unslot(&at, key),
            }
        }
        None
    }

    fn try_record(&self, a: &AccountedAnnounce, key: &PeerKey) -> Result<Recorded, SlotAt> {
        let key = *key;
        let account = key.account;
        let gap = self.config.max_gap;
        let mut guard = self.shard(&account).lock();
        let shard = &mut *guard;
        let full = shard.waiting() >= self.pending_cap;
        // One lookup per announce: the entry is read, compared and replaced in place.
        if a.event == AnnounceEvent::Stopped {
            let entry = match shard.peers.get(&key) {
                Some(Kept::InSlot(at)) => return Err(*at),
                Some(Kept::Entry(entry)) => *entry,
                None => {
                    // Another node may hold the client's record: the stop ends it there too.
                    self.share(&mut shard.shared, &key, PeerRecord::after(None, a), true);
                    return Ok(Recorded {
                        delta: credit(None, a, gap),
                        known: false,
                        deferred: false,
                    });
                }
            };
            shard.peers.remove(&key);
            let ended = PeerRecord::after(Some(&entry.record), a);
            self.share(&mut shard.shared, &key, ended, true);
            // A stop is never a snatch (its event is `stopped`).
            let delta = credit(Some(&entry.record), a, gap);
            shard.forget(&key, &entry);
            if !delta.is_empty() {
                shard.add(&delta);
            }
            return Ok(Recorded {
                delta,
                known: true,
                deferred: false,
            });
        }
        let Shard {
            peers,
            pending,
            dirty,
            snatched,
            shared,
        } = shard;
        match peers.entry(key) {
            Entry::Occupied(mut seen) => {
                let entry = match seen.get_mut() {
                    Kept::Entry(entry) => entry,
                    Kept::InSlot(at) => return Err(*at),
                };
                if full && entry.unwritten.is_empty() {
                    return Ok(deferred(a, true));
                }
                let mut delta = credit(Some(&entry.record), a, gap);
                snatch(snatched, a, &mut delta);
                entry.record = PeerRecord::after(Some(&entry.record), a);
                self.share(shared, &key, entry.record, false);
                Shard::add_to(dirty, pending, entry, &delta);
                Ok(Recorded {
                    delta,
                    known: true,
                    deferred: false,
                })
            }
            Entry::Vacant(new) => {
                if full {
                    return Ok(deferred(a, false));
                }
                let mut delta = credit(None, a, gap);
                snatch(snatched, a, &mut delta);
                let record = PeerRecord::after(None, a);
                self.share(shared, &key, record, false);
                let Kept::Entry(entry) = new.insert(Kept::Entry(PeerEntry {
                    record,
                    unwritten: Sums::default(),
                })) else {
                    unreachable!("just inserted an entry")
                };
                Shard::add_to(dirty, pending, entry, &delta);
                Ok(Recorded {
                    delta,
                    known: false,
                    deferred: false,
                })
            }
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

    /// Takes every pending sum, leaving none: the batch for one database write, one sum per
    /// account. The order is unspecified. Shards (the ledger's, then the store's) are
    /// visited one at a time, so announces keep being recorded meanwhile (into the next
    /// batch).
    pub fn drain(&self) -> Vec<Delta> {
        let mut batch: HashMap<Account, Delta, Hasher> = HashMap::default();
        for shard in self.shards.iter() {
            let mut guard = shard.lock();
            let shard = &mut *guard;
            if shard.dirty > 0 {
                for (key, kept) in shard.peers.iter_mut() {
                    if let Kept::Entry(entry) = kept {
                        if !entry.unwritten.is_empty() {
                            let sums = std::mem::take(&mut entry.unwritten).delta(&key.account);
                            add_pending(&mut shard.pending, &sums);
                        }
                    }
                }
                shard.dirty = 0;
            }
            batch.extend(shard.pending.drain());
        }
        if let Some(store) = self.slots.get() {
            store.for_each_ext_mut(|_, _, x| {
                if x.state == SlotState::Held && !x.entry.unwritten.is_empty() {
                    let account = x.account();
                    let sums = std::mem::take(&mut x.entry.unwritten).delta(&account);
                    add_pending(&mut batch, &sums);
                }
            });
        }
        batch.into_values().collect()
    }

    /// Puts a drained batch back (its write failed): each delta is added to whatever its
    /// account gathered since, so nothing is lost and nothing counted twice.
    pub fn restore(&self, batch: Vec<Delta>) {
        for delta in &batch {
            self.shard(&Account::of(delta)).lock().add(delta);
        }
    }

    /// Forgets the peers silent for longer than the peer TTL (their last delta was
    /// counted when they last announced). Returns how many were forgotten. Records in slots
    /// leave with their peers ([`Ledger::park`]) and expire here from then on.
    pub fn expire(&self, now: u32) -> usize {
        let ttl = self.config.peer_ttl;
        self.shards
            .iter()
            .map(|shard| {
                let mut guard = shard.lock();
                let shard = &mut *guard;
                let before = shard.peers.len();
                let mut gone = Vec::new();
                shard.peers.retain(|k, kept| {
                    let Kept::Entry(p) = kept else {
                        return true;
                    };
                    let keep = now.saturating_sub(p.record.seen) <= ttl;
                    if !keep {
                        gone.push((*k, *p));
                    }
                    keep
                });
                for (key, entry) in &gone {
                    shard.forget(key, entry);
                }
                before - shard.peers.len()
            })
            .sum()
    }

    /// Clients whose previous announce the ledger remembers (in its map or in their slots).
    pub fn peers(&self) -> usize {
        self.shards.iter().map(|s| s.lock().peers.len()).sum()
    }

    /// Sums waiting for [`Ledger::drain`], wherever they wait: in the ledger's map (one per
    /// client with some, and one per account of clients forgotten since) and in swarm slots
    /// (one per slot holding a client's record with some). An upper bound on the accounts a
    /// drain returns: two clients of one account are two here and one sum there.
    pub fn pending_accounts(&self) -> usize {
        self.pending_in_map() + self.pending_in_slots()
    }

    /// The map's part of [`Ledger::pending_accounts`]: what [`LedgerConfig::max_pending`]
    /// bounds.
    pub fn pending_in_map(&self) -> usize {
        self.shards.iter().map(|s| s.lock().waiting()).sum()
    }

    /// The slots' part of [`Ledger::pending_accounts`]: the slots holding a record with
    /// unwritten sums, counted by one walk over the store, so the announce path keeps no
    /// count of its own. The walk is the one [`Ledger::drain`] makes every flush interval
    /// (the store's shards one at a time, each locked only while its own slots are read):
    /// 8 ms for 100,000 slots and 63 ms for 1,000,000 on the shared 2-core VM
    /// (`benches/ledger.rs`, 2026-11-27), so each shard is held about 0.1 ms. For the
    /// metrics scrape, not for every announce.
    pub fn pending_in_slots(&self) -> usize {
        let Some(store) = self.slots.get() else {
            return 0;
        };
        let mut n = 0;
        store.for_each_ext_mut(|_, _, x| {
            if x.state == SlotState::Held && !x.entry.unwritten.is_empty() {
                n += 1;
            }
        });
        n
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(LedgerConfig::default())
    }
}
