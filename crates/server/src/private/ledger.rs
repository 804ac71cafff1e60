//! The in-memory accounting ledger: every private-tracker announce is recorded here, and
//! the sums per (user, torrent) wait here until the database writer drains them.
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
//!   ledger's own on the announce path (session 16 measured a prototype of this at 1.095x
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

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::sharded::Hasher;
use shoal_swarm::{Announce, ExtSlot, Family, PeerExt, PeerSink, Store, TorrentStats};

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

impl PeerKey {
    fn new(user_id: u64, torrent_id: u64, peer_id: PeerId) -> Self {
        Self {
            account: Account {
                user_id,
                torrent_id,
            },
            peer_id,
        }
    }
}

/// What the ledger keeps of one client: its counters at its last announce, and what its
/// announces added since the last drain. Keeping the sums with the record costs the
/// announce one map access instead of two (the record and an account's sums): profiled,
/// the second access was a third of the ledger's time on the announce path.
///
/// 64 bytes, 104 with its key (136 when the sums were a whole [`Delta`]): the ledger keeps
/// every client for hours ([`LedgerConfig::peer_ttl`]), so a tracker with a million
/// clients holds 32 MB less. The sums leave out what the key already says (user, torrent)
/// and the rare snatch, which goes straight to the account's pending sums. A record's time
/// did not change measurably (`benches/ledger.rs`, 9 alternated runs: 366 ns before, 377
/// ns after, medians, within this VM's noise): the entry spans two cache lines either way.
#[derive(Clone, Copy, Debug, Default)]
struct PeerEntry {
    record: PeerRecord,
    unwritten: Sums,
}

const _: () = assert!(std::mem::size_of::<PeerEntry>() == 64);

/// A client's unwritten sums: a [`Delta`] without its account and its snatch. Seconds fit
/// a `u32` (136 years) and saturate there; they are drained at every flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sums {
    uploaded: u64,
    downloaded: u64,
    uploaded_raw: u64,
    downloaded_raw: u64,
    seed_seconds: u32,
    leech_seconds: u32,
}

impl Sums {
    #[inline]
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds `delta`'s bytes and seconds (not its snatch).
    #[inline]
    fn add(&mut self, delta: &Delta) {
        let secs = |s: u64| u32::try_from(s).unwrap_or(u32::MAX);
        self.uploaded = self.uploaded.saturating_add(delta.uploaded);
        self.downloaded = self.downloaded.saturating_add(delta.downloaded);
        self.uploaded_raw = self.uploaded_raw.saturating_add(delta.uploaded_raw);
        self.downloaded_raw = self.downloaded_raw.saturating_add(delta.downloaded_raw);
        self.seed_seconds = self.seed_seconds.saturating_add(secs(delta.seed_seconds));
        self.leech_seconds = self.leech_seconds.saturating_add(secs(delta.leech_seconds));
    }

    /// The sums as `account`'s delta.
    #[inline]
    fn delta(&self, account: &Account) -> Delta {
        Delta {
            user_id: account.user_id,
            torrent_id: account.torrent_id,
            uploaded: self.uploaded,
            downloaded: self.downloaded,
            uploaded_raw: self.uploaded_raw,
            downloaded_raw: self.downloaded_raw,
            seed_seconds: u64::from(self.seed_seconds),
            leech_seconds: u64::from(self.leech_seconds),
            completed: false,
        }
    }
}

/// Adds `delta` to its account's pending sums. A free function, not a method of [`Shard`],
/// so that it can be called while another field of the shard is borrowed.
fn add_pending(pending: &mut HashMap<Account, Delta, Hasher>, delta: &Delta) {
    pending
        .entry(Account::of(delta))
        .or_insert_with(|| Delta::new(delta.user_id, delta.torrent_id))
        .merge(delta);
}

/// One lock's worth of accounts.
#[derive(Default)]
struct Shard {
    /// Every client's record, or where it is: in its swarm slot ([`Kept::InSlot`]).
    peers: HashMap<PeerKey, Kept, Hasher>,
    /// Sums of clients the ledger forgot (stopped, expired) and of batches put back,
    /// per account, until the next drain.
    pending: HashMap<Account, Delta, Hasher>,
    /// Clients whose `unwritten` is not empty.
    dirty: usize,
    snatched: HashSet<Account, Hasher>,
    /// Records changed by this node's announces since the cluster last took them (only
    /// while [`Ledger::share_records`] is on).
    shared: Vec<SharedRecord>,
}

impl Shard {
    fn add(&mut self, delta: &Delta) {
        add_pending(&mut self.pending, delta);
    }

    /// Sums waiting for a drain (clients with some, and forgotten accounts).
    fn waiting(&self) -> usize {
        self.dirty + self.pending.len()
    }

    /// Adds `delta` to a client's unwritten sums; its snatch, if it is one, goes to the
    /// account's pending sums.
    fn add_to(
        dirty: &mut usize,
        pending: &mut HashMap<Account, Delta, Hasher>,
        entry: &mut PeerEntry,
        delta: &Delta,
    ) {
        if delta.completed {
            let mut snatch = Delta::new(delta.user_id, delta.torrent_id);
            snatch.completed = true;
            add_pending(pending, &snatch);
        }
        let before = entry.unwritten.is_empty();
        entry.unwritten.add(delta);
        if before && !entry.unwritten.is_empty() {
            *dirty += 1;
        }
    }

    /// Moves a forgotten client's unwritten sums to `pending`.
    fn forget(&mut self, key: &PeerKey, entry: &PeerEntry) {
        if !entry.unwritten.is_empty() {
            self.dirty -= 1;
            self.add(&entry.unwritten.delta(&key.account));
        }
    }

    /// Moves the unwritten sums of a record that was not in the map (a slot's) to
    /// `pending`.
    fn keep_sums(&mut self, key: &PeerKey, entry: &PeerEntry) {
        if !entry.unwritten.is_empty() {
            self.add(&entry.unwritten.delta(&key.account));
        }
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

/// A client's record as an announce to this node left it, for the other nodes of a cluster
/// (see [`Ledger::share_records`]): with it, a client whose next announce reaches another
/// node is compared there with this announce, as it would have been here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedRecord {
    pub user_id: u64,
    pub torrent_id: u64,
    pub peer_id: PeerId,
    /// The record after the announce (`seen` on this process's coarse clock).
    pub record: PeerRecord,
    /// The announce was `stopped`: the client's session ended and its record is gone.
    pub ended: bool,
}

impl SharedRecord {
    /// Whether this record comes after `current`: a later announce by more than
    /// [`SAME_MOMENT`]; within it, the one with the higher counters (or, with the same
    /// counters, the later one). Times travel between nodes as Unix seconds and come back
    /// on each node's own coarse clock, so two records of one moment may read a second
    /// apart; the counters of one client never go down within a session.
    fn supersedes(&self, current: &PeerRecord) -> bool {
        let r = &self.record;
        if r.seen > current.seen.saturating_add(SAME_MOMENT) {
            return true;
        }
        if r.seen.saturating_add(SAME_MOMENT) < current.seen {
            return false;
        }
        (r.uploaded, r.downloaded, r.seen) > (current.uploaded, current.downloaded, current.seen)
    }
}

/// Seconds within which two records' times are taken as the same moment (see
/// [`SharedRecord::supersedes`]).
const SAME_MOMENT: u32 = 1;

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

/// Where a client's record is kept, in the ledger's map.
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// Here: the record and its unwritten sums.
    Entry(PeerEntry),
    /// In the client's swarm slot ([`SlotRecord`]), at this torrent and address.
    InSlot(SlotAt),
}

/// A swarm slot: the torrent (its swarm's info hash) and the peer's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotAt {
    pub info_hash: InfoHash,
    pub addr: AnyAddr,
}

/// What a private store's peer slot keeps beside the store's own: the client's accounting
/// record, when the slot holds it (see [`Ledger::announce`]).
///
/// A client whose one slot is its only presence keeps its record here: the announce that
/// finds the slot has the record in the same cache lines, where the ledger's map was a
/// memory access, a hash and a lock of its own (session 16 measured the difference:
/// `docs/benchmarks/private-udp/2026-11-27-session16/`). A client seen at more than one
/// slot (IPv4 and IPv6, a new address, WebTorrent too) keeps its record in the ledger's
/// map, which every slot of it then reads ([`SlotState::InLedger`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotRecord {
    user_id: u64,
    torrent_id: u64,
    entry: PeerEntry,
    state: SlotState,
}

/// Whose a slot's record is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlotState {
    /// Nothing yet: the next announce looks in the ledger's map, and takes the client's
    /// record from there (or starts one) unless another slot holds it.
    #[default]
    Empty,
    /// The slot holds the record; the ledger's map says so with [`Kept::InSlot`].
    Held,
    /// The client's record is in the ledger's map: this slot's announces go there.
    InLedger,
}

impl PeerExt for SlotRecord {}

impl SlotRecord {
    #[inline]
    fn holds(&self, a: &AccountedAnnounce) -> bool {
        self.state == SlotState::Held
            && self.user_id == a.user_id
            && self.torrent_id == a.torrent_id
    }

    #[inline]
    fn account(&self) -> Account {
        Account {
            user_id: self.user_id,
            torrent_id: self.torrent_id,
        }
    }

    /// Whose the slot's record is (for tests and views).
    pub fn state(&self) -> SlotState {
        self.state
    }
}

/// A private store: each peer slot keeps its client's accounting record.
pub type SlotStore = Store<SlotRecord>;

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

    /// From now on, every record an announce changes is also kept for
    /// [`Ledger::take_shared`] (a node of a cluster sends them to the other nodes, which
    /// [`Ledger::adopt`] them). Off on a single node: the announce path then pays one
    /// relaxed load for it.
    pub fn share_records(&self) {
        self.sharing.store(true, Ordering::Relaxed);
    }

    #[inline]
    fn sharing(&self) -> bool {
        self.sharing.load(Ordering::Relaxed)
    }

    /// Keeps `record` for the cluster, if sharing is on and the shard holds fewer than its
    /// bound (past it, the other nodes fall back to the baseline rule for that client).
    #[inline]
    fn share(
        &self,
        shared: &mut Vec<SharedRecord>,
        key: &PeerKey,
        record: PeerRecord,
        ended: bool,
    ) {
        if self.sharing() && shared.len() < self.pending_cap {
            shared.push(SharedRecord {
                user_id: key.account.user_id,
                torrent_id: key.account.torrent_id,
                peer_id: key.peer_id,
                record,
                ended,
            });
        }
    }

    /// The records this node's announces changed since the last call, oldest first within
    /// a shard.
    pub fn take_shared(&self) -> Vec<SharedRecord> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.append(&mut shard.lock().shared);
        }
        out
    }

    /// Takes in a record another node of the cluster shared: it replaces this node's
    /// record of the client if it is the later one (so the client's next announce here is
    /// compared with its last one anywhere), and an ended one takes this node's record out
    /// (its unwritten sums stay pending). What this node still has to write of the client
    /// is kept either way. Returns whether it changed anything. A record in a slot comes
    /// back to the map first.
    pub fn adopt(&self, shared: &SharedRecord) -> bool {
        let key = PeerKey::new(shared.user_id, shared.torrent_id, shared.peer_id);
        for _ in 0..FOLLOW {
            match self.try_adopt(shared, &key) {
                Ok(changed) => return changed,
                Err(at) => self.unslot(&at, &key),
            }
        }
        false
    }

    fn try_adopt(&self, shared: &SharedRecord, key: &PeerKey) -> Result<bool, SlotAt> {
        let mut guard = self.shard(&key.account).lock();
        let shard = &mut *guard;
        match shard.peers.get_mut(key) {
            Some(Kept::InSlot(at)) => Err(*at),
            Some(Kept::Entry(entry)) => {
                if !shared.supersedes(&entry.record) {
                    return Ok(false);
                }
                if shared.ended {
                    let entry = *entry;
                    shard.peers.remove(key);
                    shard.forget(key, &entry);
                } else {
                    entry.record = shared.record;
                }
                Ok(true)
            }
            None if shared.ended => Ok(false),
            None => {
                shard.peers.insert(
                    *key,
                    Kept::Entry(PeerEntry {
                        record: shared.record,
                        unwritten: Sums::default(),
                    }),
                );
                Ok(true)
            }
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

    /// Takes the record of `key`'s client out of its slot `at` back into the map (the
    /// client has shown up elsewhere); the slot then sends its announces to the map. A
    /// marker whose slot no longer holds the record is dropped.
    fn unslot(&self, at: &SlotAt, key: &PeerKey) {
        let take = |found: Option<(PeerId, &mut SlotRecord)>| {
            let (id, x) = found?;
            if id != key.peer_id || x.state != SlotState::Held || x.account() != key.account {
                return None;
            }
            x.state = SlotState::InLedger;
            Some(std::mem::take(&mut x.entry))
        };
        let taken = match self.slots.get() {
            Some(store) => match at.addr {
                AnyAddr::V4(a) => store.with_peer_ext(&at.info_hash, &a, take),
                AnyAddr::V6(a) => store.with_peer_ext(&at.info_hash, &a, take),
            },
            None => None,
        };
        let mut guard = self.shard(&key.account).lock();
        let shard = &mut *guard;
        match (shard.peers.get(key).copied(), taken) {
            (Some(Kept::InSlot(m)), Some(entry)) if m == *at => {
                if !entry.unwritten.is_empty() {
                    shard.dirty += 1;
                }
                shard.peers.insert(*key, Kept::Entry(entry));
            }
            (Some(Kept::InSlot(m)), None) if m == *at => {
                shard.peers.remove(key);
            }
            // The map changed meanwhile: keep what it says, and the slot's sums.
            (_, Some(entry)) => shard.keep_sums(key, &entry),
            (_, None) => {}
        }
    }

    /// Puts a record that leaves its slot `at` (expired, replaced by another client, taken
    /// over by another node's peer) back into the map, unwritten sums and all.
    fn park(&self, peer_id: PeerId, x: &SlotRecord, at: &SlotAt) {
        if x.state != SlotState::Held {
            return;
        }
        let key = PeerKey {
            account: x.account(),
            peer_id,
        };
        let mut guard = self.shard(&key.account).lock();
        let shard = &mut *guard;
        match shard.peers.get(&key).copied() {
            None => {}
            Some(Kept::InSlot(m)) if m == *at => {}
            // Not this slot's any more (cannot happen while every slot parks): its sums
            // are kept, its record is not.
            Some(_) => {
                shard.keep_sums(&key, &x.entry);
                return;
            }
        }
        if !x.entry.unwritten.is_empty() {
            shard.dirty += 1;
        }
        shard.peers.insert(key, Kept::Entry(x.entry));
    }

    /// [`park`](Self::park) for the slot at `addr` in `info_hash`'s swarm, as the store's
    /// calls that hand a slot's record back take it (`clean_with`, `upsert_remote_with`,
    /// `remove_remote_with`).
    pub fn parker<'a>(
        &'a self,
        info_hash: &InfoHash,
        addr: AnyAddr,
    ) -> impl FnOnce(PeerId, SlotRecord) + 'a {
        let at = SlotAt {
            info_hash: *info_hash,
            addr,
        };
        move |peer_id, x| self.park(peer_id, &x, &at)
    }

    /// Records announce `req` in `store` (the one [`Ledger::attach`]ed) with its accounting
    /// ticket `a`: in the announcer's slot when the slot holds its client's record, in the
    /// map otherwise. The peers chosen for the answer go into `out`, as
    /// [`Store::announce`] does.
    #[inline]
    pub fn announce<A: Family>(
        &self,
        store: &SlotStore,
        req: &Announce<A>,
        now: u32,
        out: &mut impl PeerSink<A>,
        a: &AccountedAnnounce,
    ) -> (TorrentStats, Recorded) {
        let at = SlotAt {
            info_hash: req.info_hash,
            addr: req.addr.any(),
        };
        let (stats, done) = store.announce_with(req, now, out, |slot| self.in_slot(slot, a, &at));
        let recorded = done.unwrap_or_else(|| self.record(a));
        (stats, recorded)
    }

    /// The slot's part of [`Ledger::announce`], under the torrent's lock: `None` sends the
    /// announce to the map.
    #[inline]
    fn in_slot(
        &self,
        slot: ExtSlot<'_, SlotRecord>,
        a: &AccountedAnnounce,
        at: &SlotAt,
    ) -> Option<Recorded> {
        match slot {
            ExtSlot::Found(x) => {
                if x.holds(a) {
                    return Some(self.credit_slot(x, a, true));
                }
                match x.state {
                    SlotState::InLedger => None,
                    SlotState::Held => {
                        // The same peer id for another user or torrent: not this client.
                        self.park(a.peer_id, x, at);
                        *x = SlotRecord::default();
                        self.claim(x, a, at)
                    }
                    SlotState::Empty => self.claim(x, a, at),
                }
            }
            ExtSlot::New(x) => self.claim(x, a, at),
            ExtSlot::Replaced(old_id, old, x) => {
                self.park(old_id, &old, at);
                self.claim(x, a, at)
            }
            ExtSlot::Removed(old_id, old) => {
                if old_id == a.peer_id && old.holds(a) {
                    return Some(self.stop_slot(&old, a, at));
                }
                self.park(old_id, &old, at);
                None
            }
            ExtSlot::Absent => None,
        }
    }

    /// A slot without a record: takes the client's from the map, or starts one, unless
    /// another slot holds it (then this slot's announces go to the map).
    fn claim(&self, x: &mut SlotRecord, a: &AccountedAnnounce, at: &SlotAt) -> Option<Recorded> {
        let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
        let known = {
            let mut guard = self.shard(&key.account).lock();
            let shard = &mut *guard;
            let known = match shard.peers.get(&key).copied() {
                None => None,
                Some(Kept::Entry(entry)) => Some(entry),
                // A marker for this very slot, whose record is gone: start afresh.
                Some(Kept::InSlot(m)) if m == *at => None,
                Some(Kept::InSlot(_)) => {
                    x.state = SlotState::InLedger;
                    return None;
                }
            };
            if let Some(entry) = &known {
                if !entry.unwritten.is_empty() {
                    shard.dirty -= 1;
                }
            }
            shard.peers.insert(key, Kept::InSlot(*at));
            known
        };
        *x = SlotRecord {
            user_id: a.user_id,
            torrent_id: a.torrent_id,
            entry: known.unwrap_or_default(),
            state: SlotState::Held,
        };
        Some(self.credit_slot(x, a, known.is_some()))
    }

    /// Credits announce `a` to the record in slot `x` (`known`: the record is the client's
    /// last announce; otherwise the announce sets its baseline). The lock of the account's
    /// shard is taken only for a snatch or when records are shared.
    #[inline]
    fn credit_slot(&self, x: &mut SlotRecord, a: &AccountedAnnounce, known: bool) -> Recorded {
        let previous = known.then_some(&x.entry.record);
        let mut delta = credit(previous, a, self.config.max_gap);
        let record = PeerRecord::after(previous, a);
        x.entry.record = record;
        if a.event == AnnounceEvent::Completed || self.sharing() {
            let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
            let mut guard = self.shard(&key.account).lock();
            let shard = &mut *guard;
            if a.event == AnnounceEvent::Completed && shard.snatched.insert(key.account) {
                delta.completed = true;
                let mut snatch = Delta::new(a.user_id, a.torrent_id);
                snatch.completed = true;
                shard.add(&snatch);
            }
            self.share(&mut shard.shared, &key, record, false);
        }
        x.entry.unwritten.add(&delta);
        Recorded {
            delta,
            known,
            deferred: false,
        }
    }

    /// A stop that took the slot holding its client's record out: the last delta and the
    /// unwritten sums go to the account, and the client is forgotten.
    fn stop_slot(&self, x: &SlotRecord, a: &AccountedAnnounce, at: &SlotAt) -> Recorded {
        let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
        let mut delta = credit(Some(&x.entry.record), a, self.config.max_gap);
        let ended = PeerRecord::after(Some(&x.entry.record), a);
        let mut guard = self.shard(&key.account).lock();
        let shard = &mut *guard;
        if a.event == AnnounceEvent::Completed {
            delta.completed = shard.snatched.insert(key.account);
        }
        self.share(&mut shard.shared, &key, ended, true);
        if matches!(shard.peers.get(&key), Some(Kept::InSlot(m)) if m == at) {
            shard.peers.remove(&key);
        }
        let unwritten = x.entry.unwritten.delta(&key.account);
        if !unwritten.is_empty() {
            shard.add(&unwritten);
        }
        if !delta.is_empty() {
            shard.add(&delta);
        }
        Recorded {
            delta,
            known: true,
            deferred: false,
        }
    }

    /// Accounts one announce against the map: compares it with the peer's previous one,
    /// adds what it is worth to its (user, torrent) pending sums, counts a `completed` as
    /// the snatch if it is the user's first on this torrent, and keeps the peer's counters
    /// for next time (or forgets the peer on `stopped`). A record found in a slot is taken
    /// back into the map first (WebTorrent announces, and slots of a client seen at more
    /// than one).
    pub fn record(&self, a: &AccountedAnnounce) -> Recorded {
        let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
        for _ in 0..FOLLOW {
            match self.try_record(a, &key) {
                Ok(recorded) => return recorded,
                Err(at) => self.unslot(&at, &key),
            }
        }
        // Still in a slot after following it (announces racing over two addresses): this
        // one sets no baseline and is not counted; the slot keeps the client's record.
        deferred(a, true)
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
            let mut delta = credit(Some(&entry.record), a, gap);
            delta.completed = a.event == AnnounceEvent::Completed && shard.snatched.insert(account);
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
                delta.completed = a.event == AnnounceEvent::Completed && snatched.insert(account);
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
                delta.completed = a.event == AnnounceEvent::Completed && snatched.insert(account);
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

    /// Every peer record, the map's and the slots' (for the file that carries them over a
    /// restart).
    pub fn peer_records(&self) -> Vec<SavedPeer> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(
                shard
                    .lock()
                    .peers
                    .iter()
                    .filter_map(|(k, kept)| match kept {
                        Kept::Entry(entry) => Some(SavedPeer {
                            user_id: k.account.user_id,
                            torrent_id: k.account.torrent_id,
                            peer_id: k.peer_id,
                            record: entry.record,
                        }),
                        Kept::InSlot(_) => None,
                    }),
            );
        }
        if let Some(store) = self.slots.get() {
            store.for_each_ext_mut(|_, peer_id, x| {
                if x.state == SlotState::Held {
                    out.push(SavedPeer {
                        user_id: x.user_id,
                        torrent_id: x.torrent_id,
                        peer_id,
                        record: x.entry.record,
                    });
                }
            });
        }
        out
    }

    /// Puts saved peer records back (at start, before any announce): each peer's next
    /// announce is then compared with its last one before the restart.
    pub fn restore_peers(&self, peers: impl IntoIterator<Item = SavedPeer>) {
        for p in peers {
            let key = PeerKey::new(p.user_id, p.torrent_id, p.peer_id);
            let account = key.account;
            let entry = PeerEntry {
                record: p.record,
                unwritten: Sums::default(),
            };
            let mut shard = self.shard(&account).lock();
            if let Some(Kept::Entry(old)) = shard.peers.insert(key, Kept::Entry(entry)) {
                shard.forget(&key, &old);
            }
        }
    }

    /// Clients whose previous announce the ledger remembers (in its map or in their slots).
    pub fn peers(&self) -> usize {
        self.shards.iter().map(|s| s.lock().peers.len()).sum()
    }

    /// Sums waiting for [`Ledger::drain`] in the ledger's map: one per client with some,
    /// and one per account of clients forgotten since (an upper bound on the accounts a
    /// drain returns from the map; the sums in slots are not counted, they take no memory
    /// of their own).
    pub fn pending_accounts(&self) -> usize {
        self.shards.iter().map(|s| s.lock().waiting()).sum()
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(LedgerConfig::default())
    }
}
