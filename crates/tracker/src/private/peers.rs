//! Each client's state at its last announce, for the site schemas that keep a row per
//! client (UNIT3D's `peers`, Gazelle's `xbt_files_users`): where it is (address and port, or
//! none for a WebRTC peer), what it runs (its user agent, where the protocol says), what it
//! reported (its totals and what it has left), whether it seeds and whether its session is
//! still open.
//!
//! The ledger keeps what each announce is worth; this log keeps what the site shows. It is
//! off unless the schema in force writes such rows ([`crate::Core::with_peer_log`]): shoal's
//! own schema keeps none, and then the announce path pays one branch for it. On, an announce
//! overwrites its client's entry under one shard lock (the entry is the latest state, not a
//! history), and the database writer drains the entries changed since its last write.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::SocketAddr;

use parking_lot::Mutex;
use shoal_proto::{AnnounceEvent, PeerId};
use shoal_swarm::sharded::Hasher;

use super::credit::AccountedAnnounce;
use crate::request::Protocol;

/// A client's state at its last announce since the log was last drained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerState {
    pub user_id: u64,
    pub torrent_id: u64,
    pub peer_id: PeerId,
    pub protocol: Protocol,
    /// Where other peers reach it; `None` for a WebRTC peer (reached through its tracker
    /// connection).
    pub addr: Option<SocketAddr>,
    /// Its `User-Agent`, where the protocol carries one (HTTP, the WebSocket upgrade).
    pub agent: Option<Box<str>>,
    /// Its reported totals (of its current session, as clients report them).
    pub uploaded: u64,
    pub downloaded: u64,
    /// Bytes it still needs; `None` when a WebTorrent client did not say.
    pub left: Option<u64>,
    pub seeder: bool,
    /// False after its `stopped`: the session ended.
    pub active: bool,
    /// When it last announced (the store's coarse clock, seconds).
    pub announced: u32,
    /// Announces since the last drain.
    pub announces: u32,
}

/// One lock's worth of the log: entries by (user, torrent, peer id).
type Shard = Mutex<HashMap<(u64, u64, PeerId), PeerState, Hasher>>;

/// The log: one entry per client with announces since the last drain.
pub struct PeerLog {
    shards: Box<[Shard]>,
    hasher: Hasher,
}

impl Default for PeerLog {
    fn default() -> Self {
        Self::new(64)
    }
}

impl PeerLog {
    /// An empty log of `shards` locks (rounded up to a power of two).
    pub fn new(shards: usize) -> Self {
        let n = shards.max(1).next_power_of_two();
        Self {
            shards: (0..n).map(|_| Mutex::new(HashMap::default())).collect(),
            hasher: Hasher::default(),
        }
    }

    /// Notes the state announce `a` (its accounting ticket) leaves its client in.
    pub fn note(
        &self,
        a: &AccountedAnnounce,
        protocol: Protocol,
        addr: Option<SocketAddr>,
        agent: Option<&str>,
        left: Option<u64>,
    ) {
        let key = (a.user_id, a.torrent_id, a.peer_id);
        let state = PeerState {
            user_id: a.user_id,
            torrent_id: a.torrent_id,
            peer_id: a.peer_id,
            protocol,
            addr,
            agent: None,
            uploaded: a.uploaded,
            downloaded: a.downloaded,
            left,
            seeder: a.left == 0 || a.event == AnnounceEvent::Completed,
            active: a.event != AnnounceEvent::Stopped,
            announced: a.now,
            announces: 1,
        };
        match self.shard(&key).lock().entry(key) {
            Entry::Occupied(mut e) => {
                let old = e.get_mut();
                // The same agent as last time keeps its allocation.
                let agent = match old.agent.take() {
                    Some(kept) if Some(&*kept) == agent => Some(kept),
                    _ => agent.map(Box::from),
                };
                let announces = old.announces.saturating_add(1);
                *old = PeerState {
                    agent,
                    announces,
                    ..state
                };
            }
            Entry::Vacant(e) => {
                e.insert(PeerState {
                    agent: agent.map(Box::from),
                    ..state
                });
            }
        }
    }

    /// The shard of `key`'s entry.
    fn shard(&self, key: &(u64, u64, PeerId)) -> &Shard {
        &self.shards[self.hasher.hash_one(key) as usize & (self.shards.len() - 1)]
    }

    /// Takes every entry, leaving none (the batch of one database write).
    pub fn drain(&self) -> Vec<PeerState> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().drain().map(|(_, s)| s));
        }
        out
    }

    /// Puts entries of a batch whose write failed back, unless their client announced
    /// again meanwhile (the newer state wins; the announces add up).
    pub fn restore(&self, states: Vec<PeerState>) {
        for s in states {
            let key = (s.user_id, s.torrent_id, s.peer_id);
            match self.shard(&key).lock().entry(key) {
                Entry::Occupied(mut newer) => {
                    let newer = newer.get_mut();
                    newer.announces = newer.announces.saturating_add(s.announces);
                }
                Entry::Vacant(e) => {
                    e.insert(s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(peer: u8, event: AnnounceEvent, left: u64, now: u32) -> AccountedAnnounce {
        AccountedAnnounce {
            user_id: 1,
            torrent_id: 2,
            peer_id: PeerId([peer; 20]),
            uploaded: u64::from(now) * 10,
            downloaded: 5,
            left,
            event,
            now,
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }

    #[test]
    fn the_latest_state_per_client_and_a_failed_write_put_back() {
        let log = PeerLog::new(4);
        let addr: SocketAddr = "192.0.2.1:6881".parse().unwrap();
        let ua = Some("qBittorrent/4.6.5");
        log.note(
            &ticket(1, AnnounceEvent::Started, 100, 1),
            Protocol::Http,
            Some(addr),
            ua,
            Some(100),
        );
        log.note(
            &ticket(1, AnnounceEvent::Completed, 0, 2),
            Protocol::Http,
            Some(addr),
            ua,
            Some(0),
        );
        log.note(
            &ticket(2, AnnounceEvent::Stopped, 7, 3),
            Protocol::Ws,
            None,
            None,
            None,
        );
        let mut states = log.drain();
        states.sort_by_key(|s| s.peer_id.0[0]);
        assert!(log.drain().is_empty());
        assert_eq!(states.len(), 2);
        let (a, b) = (&states[0], &states[1]);
        assert_eq!(
            (a.announces, a.uploaded, a.left, a.seeder, a.active),
            (2, 20, Some(0), true, true)
        );
        assert_eq!((a.addr, a.agent.as_deref()), (Some(addr), ua));
        assert_eq!(
            (b.addr, b.active, b.seeder, b.left),
            (None, false, false, None)
        );
        // The write failed; meanwhile client 1 announced again: its newer state stays and
        // the announces add up; client 2's state comes back.
        log.note(
            &ticket(1, AnnounceEvent::None, 0, 9),
            Protocol::Udp,
            Some(addr),
            None,
            Some(0),
        );
        log.restore(states);
        let mut again = log.drain();
        again.sort_by_key(|s| s.peer_id.0[0]);
        assert_eq!(
            (again[0].announced, again[0].announces, again[0].protocol),
            (9, 3, Protocol::Udp)
        );
        assert_eq!(again[1].announced, 3);
    }
}
