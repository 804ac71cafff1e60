//! The slot bridge: a private store's peer slot keeps its client's accounting record
//! ([`SlotRecord`]), and the ledger credits an announce there under the torrent's lock
//! ([`Ledger::announce`]), parks a record that leaves its slot in the map, and takes one
//! back from a slot when its client shows up elsewhere.

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::{Announce, ExtSlot, Family, PeerExt, PeerSink, Store, TorrentStats};

use crate::private::credit::{credit, AccountedAnnounce, Delta, PeerRecord};

use super::map::{snatch, Account, Kept, PeerEntry, PeerKey, SlotAt};
use super::{Ledger, Recorded};

/// What a private store's peer slot keeps beside the store's own: the client's accounting
/// record, when the slot holds it (see [`Ledger::announce`]).
///
/// A client whose one slot is its only presence keeps its record here: the announce that
/// finds the slot has the record in the same cache lines, where the ledger's map was a
/// memory access, a hash and a lock of its own (measured on 2026-11-27:
/// `docs/benchmarks/private-udp/2026-11-27-slot-prototype/`). A client seen at more than one
/// slot (IPv4 and IPv6, a new address, WebTorrent too) keeps its record in the ledger's
/// map, which every slot of it then reads ([`SlotState::InLedger`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotRecord {
    pub(super) user_id: u64,
    pub(super) torrent_id: u64,
    pub(super) entry: PeerEntry,
    pub(super) state: SlotState,
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

impl PeerExt for SlotRecord {
    type Id = PeerId;
    type One<A: shoal_swarm::Address> = shoal_swarm::NotInline;
}

impl SlotRecord {
    #[inline]
    pub(super) fn holds(&self, a: &AccountedAnnounce) -> bool {
        self.state == SlotState::Held
            && self.user_id == a.user_id
            && self.torrent_id == a.torrent_id
    }

    #[inline]
    pub(super) fn account(&self) -> Account {
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

impl Ledger {
    /// Takes the record of `key`'s client out of its slot `at` back into the map (the
    /// client has shown up elsewhere); the slot then sends its announces to the map. A
    /// marker whose slot no longer holds the record is dropped.
    pub(super) fn unslot(&self, at: &SlotAt, key: &PeerKey) {
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
    pub(super) fn park(&self, peer_id: PeerId, x: &SlotRecord, at: &SlotAt) {
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
    pub(super) fn in_slot(
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
    pub(super) fn claim(
        &self,
        x: &mut SlotRecord,
        a: &AccountedAnnounce,
        at: &SlotAt,
    ) -> Option<Recorded> {
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
    pub(super) fn credit_slot(
        &self,
        x: &mut SlotRecord,
        a: &AccountedAnnounce,
        known: bool,
    ) -> Recorded {
        let previous = known.then_some(&x.entry.record);
        let mut delta = credit(previous, a, self.config.max_gap);
        let record = PeerRecord::after(previous, a);
        x.entry.record = record;
        if a.event == AnnounceEvent::Completed || self.sharing() {
            let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
            let mut guard = self.shard(&key.account).lock();
            let shard = &mut *guard;
            if snatch(&mut shard.snatched, a, &mut delta) {
                shard.add(&Delta::snatch(a.user_id, a.torrent_id, a.now));
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
    pub(super) fn stop_slot(&self, x: &SlotRecord, a: &AccountedAnnounce, at: &SlotAt) -> Recorded {
        let key = PeerKey::new(a.user_id, a.torrent_id, a.peer_id);
        let delta = credit(Some(&x.entry.record), a, self.config.max_gap);
        let ended = PeerRecord::after(Some(&x.entry.record), a);
        let mut guard = self.shard(&key.account).lock();
        let shard = &mut *guard;
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
}
