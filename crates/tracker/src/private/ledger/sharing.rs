//! Sharing records between the nodes of a cluster: every record an announce changes is kept
//! for the exchange ([`Ledger::take_shared`]), and a record another node shared replaces
//! this node's if it is the later one ([`Ledger::adopt`]).

use std::sync::atomic::Ordering;

use crate::private::credit::PeerRecord;

use super::map::{Kept, PeerEntry, PeerKey, SharedRecord, SlotAt, Sums};
use super::Ledger;

impl SharedRecord {
    /// Whether this record comes after `current`: a later announce by more than
    /// [`SAME_MOMENT`]; within it, the one with the higher counters (or, with the same
    /// counters, the later one). Times travel between nodes as Unix seconds and come back
    /// on each node's own coarse clock, so two records of one moment may read a second
    /// apart; the counters of one client never go down within a session.
    pub(super) fn supersedes(&self, current: &PeerRecord) -> bool {
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

impl Ledger {
    /// From now on, every record an announce changes is also kept for
    /// [`Ledger::take_shared`] (a node of a cluster sends them to the other nodes, which
    /// [`Ledger::adopt`] them). Off on a single node: the announce path then pays one
    /// relaxed load for it.
    pub fn share_records(&self) {
        self.sharing.store(true, Ordering::Relaxed);
    }

    #[inline]
    pub(super) fn sharing(&self) -> bool {
        self.sharing.load(Ordering::Relaxed)
    }

    /// Keeps `record` for the cluster, if sharing is on and the shard holds fewer than its
    /// bound (past it, the other nodes fall back to the baseline rule for that client).
    #[inline]
    pub(super) fn share(
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
        self.in_map(&key, |key| self.try_adopt(shared, key))
            .unwrap_or(false)
    }

    pub(super) fn try_adopt(&self, shared: &SharedRecord, key: &PeerKey) -> Result<bool, SlotAt> {
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
}
