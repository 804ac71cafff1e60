//! The ledger's records taken out to survive a restart ([`SavedPeer`], written to the
//! ledger file by the server) and put back at the next start.

use shoal_proto::PeerId;

use crate::private::credit::PeerRecord;

use super::map::{Kept, PeerEntry, PeerKey, Sums};
use super::slots::SlotState;
use super::Ledger;

/// One peer's record, taken out of the ledger to survive a restart (see
/// [`Ledger::peer_records`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedPeer {
    pub user_id: u64,
    pub torrent_id: u64,
    pub peer_id: PeerId,
    pub record: PeerRecord,
}

impl Ledger {
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
}
