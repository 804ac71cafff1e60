//! The ledger's map: its keys (an account, a client of an account), what it keeps of a
//! client ([`PeerEntry`]: the record and its unwritten sums, or where else it is:
//! [`SlotAt`]) and one lock's worth of it ([`Shard`], with the records kept for the other
//! nodes: [`SharedRecord`]), and the one place the snatch rule is written ([`snatch`]).

use std::collections::{HashMap, HashSet};

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::sharded::Hasher;

use crate::private::credit::{AccountedAnnounce, Delta, PeerRecord};

/// One (user, torrent) account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Account {
    pub(super) user_id: u64,
    pub(super) torrent_id: u64,
}

impl Account {
    #[inline]
    pub(super) fn of(delta: &Delta) -> Self {
        Self {
            user_id: delta.user_id,
            torrent_id: delta.torrent_id,
        }
    }
}

/// One client of one user on one torrent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PeerKey {
    pub(super) account: Account,
    pub(super) peer_id: PeerId,
}

impl PeerKey {
    pub(super) fn new(user_id: u64, torrent_id: u64, peer_id: PeerId) -> Self {
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
pub(super) struct PeerEntry {
    pub(super) record: PeerRecord,
    pub(super) unwritten: Sums,
}

const _: () = assert!(std::mem::size_of::<PeerEntry>() == 64);

/// A client's unwritten sums: a [`Delta`] without its account and its snatch. Seconds fit
/// a `u32` (136 years) and saturate there; they are drained at every flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sums {
    pub(super) uploaded: u64,
    pub(super) downloaded: u64,
    pub(super) uploaded_raw: u64,
    pub(super) downloaded_raw: u64,
    pub(super) seed_seconds: u32,
    pub(super) leech_seconds: u32,
}

impl Sums {
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds `delta`'s bytes and seconds (not its snatch).
    #[inline]
    pub(super) fn add(&mut self, delta: &Delta) {
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
    pub(super) fn delta(&self, account: &Account) -> Delta {
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
            completed_at: None,
        }
    }
}

/// Adds `delta` to its account's pending sums. A free function, not a method of [`Shard`],
/// so that it can be called while another field of the shard is borrowed.
pub(super) fn add_pending(pending: &mut HashMap<Account, Delta, Hasher>, delta: &Delta) {
    pending
        .entry(Account::of(delta))
        .or_insert_with(|| Delta::new(delta.user_id, delta.torrent_id))
        .merge(delta);
}

/// One lock's worth of accounts.
#[derive(Default)]
pub(super) struct Shard {
    /// Every client's record, or where it is: in its swarm slot ([`Kept::InSlot`]).
    pub(super) peers: HashMap<PeerKey, Kept, Hasher>,
    /// Sums of clients the ledger forgot (stopped, expired) and of batches put back,
    /// per account, until the next drain.
    pub(super) pending: HashMap<Account, Delta, Hasher>,
    /// Clients whose `unwritten` is not empty.
    pub(super) dirty: usize,
    pub(super) snatched: HashSet<Account, Hasher>,
    /// Records changed by this node's announces since the cluster last took them (only
    /// while [`Ledger::share_records`] is on).
    pub(super) shared: Vec<SharedRecord>,
}

impl Shard {
    pub(super) fn add(&mut self, delta: &Delta) {
        add_pending(&mut self.pending, delta);
    }

    /// Sums waiting for a drain (clients with some, and forgotten accounts).
    pub(super) fn waiting(&self) -> usize {
        self.dirty + self.pending.len()
    }

    /// Adds `delta` to a client's unwritten sums; its snatch, if it is one, goes to the
    /// account's pending sums.
    pub(super) fn add_to(
        dirty: &mut usize,
        pending: &mut HashMap<Account, Delta, Hasher>,
        entry: &mut PeerEntry,
        delta: &Delta,
    ) {
        if let (true, Some(at)) = (delta.completed, delta.completed_at) {
            add_pending(pending, &Delta::snatch(delta.user_id, delta.torrent_id, at));
        }
        let before = entry.unwritten.is_empty();
        entry.unwritten.add(delta);
        if before && !entry.unwritten.is_empty() {
            *dirty += 1;
        }
    }

    /// Moves a forgotten client's unwritten sums to `pending`.
    pub(super) fn forget(&mut self, key: &PeerKey, entry: &PeerEntry) {
        if !entry.unwritten.is_empty() {
            self.dirty -= 1;
            self.add(&entry.unwritten.delta(&key.account));
        }
    }

    /// Moves the unwritten sums of a record that was not in the map (a slot's) to
    /// `pending`.
    pub(super) fn keep_sums(&mut self, key: &PeerKey, entry: &PeerEntry) {
        if !entry.unwritten.is_empty() {
            self.add(&entry.unwritten.delta(&key.account));
        }
    }
}

/// Where a client's record is kept, in the ledger's map.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kept {
    /// Here: the record and its unwritten sums.
    Entry(PeerEntry),
    /// In the client's swarm slot ([`SlotRecord`]), at this torrent and address.
    InSlot(SlotAt),
}

/// The snatch rule, the one place it is written: a `completed` is the snatch of its account
/// the first time that account completes, and never again. Marks `delta` (announce `a`'s)
/// as the snatch, at the announce's time, when it is one.
#[inline]
pub(super) fn snatch(
    snatched: &mut HashSet<Account, Hasher>,
    a: &AccountedAnnounce,
    delta: &mut Delta,
) -> bool {
    let first = a.event == AnnounceEvent::Completed
        && snatched.insert(Account {
            user_id: a.user_id,
            torrent_id: a.torrent_id,
        });
    if first {
        delta.completed = true;
        delta.completed_at = Some(a.now);
    }
    first
}

/// A swarm slot: the torrent (its swarm's info hash) and the peer's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotAt {
    pub info_hash: InfoHash,
    pub addr: AnyAddr,
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
