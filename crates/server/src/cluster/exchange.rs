//! One node's side of the exchange, without the network: what it has to tell Redis about
//! each torrent (its own peers' changes and completions, from the store's journal), which
//! torrents it wants to hear about (local announces and scrapes since the last exchange),
//! and what it does with what Redis answers (other nodes' peers into the store, peers that
//! left out of it, the cluster's completed count).
//!
//! Kept apart from the connection so that the rules are plain code over plain values
//! ([`Exchange::plan`] then [`Exchange::apply`] or [`Exchange::retry`]), and [`super::node`]
//! only moves them over the wire.
//!
//! Memory: the pending writes are one entry per (torrent, changed peer) since the last
//! successful exchange of that torrent, and the remote view is one address per peer that
//! another node serves on a torrent this node serves: both bounded by the swarm itself.

use std::collections::{HashMap, HashSet};

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash};
use shoal_swarm::journal::{AnyAddr, Change};
use shoal_swarm::{clock, Peer, Store};

use super::record::{addr_of, field, Published, WATCH_ROUNDS};

/// What a node still has to write for one torrent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writes {
    /// Peers announced (field, value), the last announce of each.
    pub set: HashMap<AnyAddr, Published>,
    /// Peers that stopped.
    pub delete: HashSet<AnyAddr>,
    /// This node's completed total for the torrent, if it changed.
    pub completed: Option<u64>,
}

/// One torrent's round trip: what to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub info_hash: InfoHash,
    pub writes: Writes,
}

impl Call {
    /// The script's ARGV after now, lifetime and node: completed, the number of sets, the
    /// (field, value) pairs, the fields to delete.
    pub fn args(&self) -> Vec<Vec<u8>> {
        let w = &self.writes;
        let mut args = Vec::with_capacity(2 + 2 * w.set.len() + w.delete.len());
        args.push(
            w.completed
                .map_or_else(Vec::new, |c| c.to_string().into_bytes()),
        );
        args.push(w.set.len().to_string().into_bytes());
        for (addr, p) in &w.set {
            args.push(field(addr));
            args.push(p.encode());
        }
        args.extend(w.delete.iter().map(field));
        args
    }
}

/// The node's exchange state.
pub struct Exchange {
    node: String,
    /// Seconds a peer lives (the store's peer lifetime).
    peer_ttl: u64,
    pending: HashMap<InfoHash, Writes>,
    /// Torrents with local activity since their last exchange.
    /// Torrents with local activity, and how many more rounds to read them (see
    /// [`WATCH_ROUNDS`](super::record::WATCH_ROUNDS)).
    wanted: HashMap<InfoHash, u32>,
    /// This node's completed count per torrent (totals: idempotent to write).
    completed: HashMap<InfoHash, u64>,
    /// Other nodes' peers this node put into its store, per torrent.
    remote: HashMap<InfoHash, HashSet<AnyAddr>>,
}

impl Exchange {
    pub fn new(node: String, peer_ttl: u64) -> Self {
        Self {
            node,
            peer_ttl,
            pending: HashMap::new(),
            wanted: HashMap::new(),
            completed: HashMap::new(),
            remote: HashMap::new(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Folds the store's journal in.
    pub fn record(&mut self, changes: Vec<Change>, unix_now: u64) {
        for change in changes {
            match change {
                Change::Announced {
                    info_hash,
                    addr,
                    peer_id,
                    seeder,
                    completed,
                } => {
                    let w = self.pending.entry(info_hash).or_default();
                    w.delete.remove(&addr);
                    w.set.insert(
                        addr,
                        Published {
                            expires: unix_now + self.peer_ttl,
                            seeder,
                            node: self.node.clone(),
                            peer_id,
                        },
                    );
                    if completed {
                        let c = self.completed.entry(info_hash).or_default();
                        *c += 1;
                        w.completed = Some(*c);
                    }
                    self.wanted.insert(info_hash, WATCH_ROUNDS);
                }
                Change::Stopped { info_hash, addr } => {
                    let w = self.pending.entry(info_hash).or_default();
                    w.set.remove(&addr);
                    w.delete.insert(addr);
                    self.wanted.insert(info_hash, WATCH_ROUNDS);
                }
                Change::Scraped { info_hash } => {
                    self.wanted.insert(info_hash, WATCH_ROUNDS);
                }
            }
        }
    }

    /// The calls of this round: every torrent with writes pending or local interest. Their
    /// writes leave the pending set; [`Exchange::retry`] puts back those of a failed call.
    pub fn plan(&mut self) -> Vec<Call> {
        let mut calls = std::mem::take(&mut self.pending);
        self.wanted.retain(|info_hash, rounds| {
            calls.entry(*info_hash).or_default();
            *rounds -= 1;
            *rounds > 0
        });
        calls
            .into_iter()
            .map(|(info_hash, writes)| Call { info_hash, writes })
            .collect()
    }

    /// A call failed: its writes go back, under whatever was recorded since (newer
    /// announces of the same peer win), and the torrent stays wanted.
    pub fn retry(&mut self, call: Call) {
        let w = self.pending.entry(call.info_hash).or_default();
        for (addr, p) in call.writes.set {
            if !w.delete.contains(&addr) {
                w.set.entry(addr).or_insert(p);
            }
        }
        for addr in call.writes.delete {
            if !w.set.contains_key(&addr) {
                w.delete.insert(addr);
            }
        }
        if w.completed.is_none() {
            w.completed = call.writes.completed;
        }
        self.wanted.insert(call.info_hash, WATCH_ROUNDS);
    }

    /// Puts what Redis answered for one torrent into `store`: other nodes' live peers in,
    /// those that left out, the completed count up. Returns how many remote peers it has.
    pub fn apply(
        &mut self,
        store: &Store,
        info_hash: &InfoHash,
        live: &[Vec<u8>],
        done: u64,
        unix_now: u64,
    ) -> usize {
        let now = clock::now();
        let mut seen = HashSet::new();
        for pair in live.chunks_exact(2) {
            let (Some(addr), Some(p)) = (addr_of(&pair[0]), Published::decode(&pair[1])) else {
                continue;
            };
            if p.node == self.node || p.expires < unix_now {
                continue;
            }
            let left = u32::try_from(p.expires - unix_now).unwrap_or(u32::MAX);
            let expires = now.saturating_add(left);
            match addr {
                AnyAddr::V4(a) => store.upsert_remote(info_hash, peer(a, &p, expires)),
                AnyAddr::V6(a) => store.upsert_remote(info_hash, peer(a, &p, expires)),
            }
            seen.insert(addr);
        }
        let count = seen.len();
        let before = if seen.is_empty() {
            self.remote.remove(info_hash)
        } else {
            self.remote.insert(*info_hash, seen)
        };
        let now_seen = self.remote.get(info_hash);
        for gone in before.into_iter().flatten() {
            if now_seen.is_some_and(|s| s.contains(&gone)) {
                continue;
            }
            match gone {
                AnyAddr::V4(a) => store.remove_remote::<CompactPeerV4>(info_hash, a),
                AnyAddr::V6(a) => store.remove_remote::<CompactPeerV6>(info_hash, a),
            }
        }
        store.raise_completed(info_hash, u32::try_from(done).unwrap_or(u32::MAX));
        count
    }

    /// Remote peers held, over every torrent.
    pub fn remote_peers(&self) -> usize {
        self.remote.values().map(HashSet::len).sum()
    }

    /// Torrents with writes waiting for a retry.
    pub fn pending_torrents(&self) -> usize {
        self.pending.len()
    }
}

fn peer<A>(addr: A, p: &Published, expires: u32) -> Peer<A> {
    Peer {
        peer_id: p.peer_id,
        addr,
        expires,
        seeder: p.seeder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::PeerId;
    use shoal_swarm::StoreConfig;

    fn v4(port: u16) -> AnyAddr {
        AnyAddr::V4(CompactPeerV4::new("10.0.0.1".parse().unwrap(), port))
    }

    fn announced(port: u16, seeder: bool, completed: bool) -> Change {
        Change::Announced {
            info_hash: InfoHash([1; 20]),
            addr: v4(port),
            peer_id: PeerId([port as u8; 20]),
            seeder,
            completed,
        }
    }

    #[test]
    fn the_last_change_of_a_peer_wins_and_completions_are_totals() {
        let mut x = Exchange::new("a".into(), 100);
        x.record(
            vec![
                announced(1, false, false),
                announced(1, true, true),
                announced(2, false, false),
                Change::Stopped {
                    info_hash: InfoHash([1; 20]),
                    addr: v4(2),
                },
                Change::Scraped {
                    info_hash: InfoHash([9; 20]),
                },
            ],
            1000,
        );
        let mut calls = x.plan();
        calls.sort_by_key(|c| c.info_hash.0);
        assert_eq!(calls.len(), 2);
        let w = &calls[0].writes;
        assert_eq!(w.set.len(), 1);
        assert!(w.set[&v4(1)].seeder && w.set[&v4(1)].expires == 1100);
        assert_eq!(w.delete, HashSet::from([v4(2)]));
        assert_eq!(w.completed, Some(1));
        assert_eq!(calls[1].writes, Writes::default(), "a scrape only reads");
        // A failed call comes back, under what was recorded meanwhile.
        x.record(vec![announced(1, false, false)], 1010);
        x.retry(calls.remove(0));
        let again = x.plan();
        let w = &again
            .iter()
            .find(|c| c.info_hash == InfoHash([1; 20]))
            .unwrap()
            .writes;
        assert!(!w.set[&v4(1)].seeder, "the newer announce wins");
        assert_eq!(w.completed, Some(1));
        // Read for a few more rounds after the last local activity, with nothing to write.
        for _ in 1..WATCH_ROUNDS {
            let calls = x.plan();
            assert!(!calls.is_empty() && calls.iter().all(|c| c.writes == Writes::default()));
        }
        assert!(x.plan().is_empty(), "nothing left after the watch");
    }

    #[test]
    fn remote_peers_come_in_and_leave_and_own_peers_are_skipped() {
        let store = Store::new(StoreConfig::default());
        let ih = InfoHash([1; 20]);
        let mut x = Exchange::new("a".into(), 100);
        let value = |node: &str, expires| {
            Published {
                expires,
                seeder: true,
                node: node.into(),
                peer_id: PeerId([7; 20]),
            }
            .encode()
        };
        let live = vec![
            field(&v4(1)),
            value("b", 2000),
            field(&v4(2)),
            value("a", 2000),
            field(&v4(3)),
            value("c", 999),
        ];
        assert_eq!(x.apply(&store, &ih, &live, 4, 1000), 1);
        let st = store.scrape(&ih);
        assert_eq!((st.seeders, st.leechers, st.completed), (1, 0, 4));
        assert_eq!(x.apply(&store, &ih, &[], 2, 1000), 0);
        let st = store.scrape(&ih);
        assert_eq!(
            (st.seeders, st.completed),
            (0, 4),
            "gone; completed never goes down"
        );
        assert_eq!(x.remote_peers(), 0);
    }
}
