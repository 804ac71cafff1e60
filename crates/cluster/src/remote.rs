//! The other nodes' peers, as this node holds them: what Redis answered of them goes into
//! the stores (UDP/HTTP peers into the swarm store, WebTorrent peers into the WebTorrent
//! store under the remote connection id that stands for their node), those that left or
//! whose expiry passed come out, and completed counts rise to the cluster's. Other nodes'
//! private-mode client records are kept for the ledger to adopt.
//!
//! Only the node that holds a peer here may take it out: a client that moved between nodes
//! is held by the last one that wrote it. A node that died says nothing more: its peers
//! leave within the peer lifetime, by their expiry ([`RemotePeers::expire`]).

use std::collections::{BTreeMap, HashMap};

use shoal_proto::InfoHash;
use shoal_swarm::{clock, Peer};
use shoal_tracker::Core;

use crate::feed::{bucket_of, BUCKETS};
use crate::feed::{ClientKey, ClientValue, Endpoint, News, NodeFeed, PeerKey, PeerValue, Record};
use crate::ws_link::WsLink;
use crate::Fast;

/// Where the other nodes' peers go.
pub struct Stores<'a> {
    /// The swarm store (UDP/HTTP peers) and the WebTorrent store.
    pub core: &'a Core,
    /// The WebTorrent front end's link: its remote connection ids stand for the nodes.
    pub link: &'a WsLink,
}

/// A peer another node serves, as this node holds it.
#[derive(Clone, Copy, Debug)]
struct Held {
    /// Index into [`RemotePeers::nodes`].
    node: u16,
    /// Unix seconds.
    expires: u32,
}

/// What this node read of the other nodes.
pub struct RemotePeers {
    /// Per bucket, the version of each other node's log this node has read up to.
    versions: Vec<HashMap<String, u64>>,
    /// Other nodes' names; [`Held::node`] indexes it.
    nodes: Vec<String>,
    /// Other nodes' peers this node put into its stores, per bucket.
    peers: Vec<HashMap<PeerKey, Held, Fast>>,
    /// Other nodes' completed totals per torrent.
    completed: HashMap<InfoHash, Vec<(u16, u32)>, Fast>,
    /// Remote peers by expiry (Unix seconds), to take them out when it passes; an entry
    /// whose peer was refreshed since is skipped.
    expiring: BTreeMap<u32, Vec<PeerKey>>,
    /// Other nodes' client records read since [`RemotePeers::take_clients`].
    clients: Vec<(ClientKey, ClientValue)>,
}

impl Default for RemotePeers {
    fn default() -> Self {
        Self {
            versions: vec![HashMap::new(); BUCKETS],
            nodes: Vec::new(),
            peers: vec![HashMap::default(); BUCKETS],
            completed: HashMap::default(),
            expiring: BTreeMap::new(),
            clients: Vec::new(),
        }
    }
}

impl RemotePeers {
    /// The versions of the other nodes' logs this node has read of `bucket`.
    pub fn held(&self, bucket: usize) -> Vec<(String, u64)> {
        self.versions[bucket]
            .iter()
            .map(|(n, v)| (n.clone(), *v))
            .collect()
    }

    /// Forgets what this node read of a bucket: the next round reads it from the start.
    pub fn forget(&mut self, bucket: usize) {
        self.versions[bucket].clear();
    }

    /// Remote peers held, over every torrent and protocol.
    pub fn len(&self) -> usize {
        self.peers.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Other nodes' client records read since the last call.
    pub fn take_clients(&mut self) -> impl Iterator<Item = (ClientKey, ClientValue)> + '_ {
        self.clients.drain(..)
    }

    /// Puts what Redis answered for one bucket into the stores: other nodes' new peers in,
    /// those that left out, completed counts up to `own` (this node's totals) plus the
    /// others'.
    pub fn apply(
        &mut self,
        stores: &Stores,
        bucket: usize,
        feeds: Vec<NodeFeed>,
        unix_now: u64,
        own: &HashMap<InfoHash, u32, Fast>,
    ) {
        let mut raised = Vec::new();
        for feed in feeds {
            let node = self.node_index(&feed.node);
            match &feed.news {
                News::Log(entries) => {
                    for entry in entries {
                        // A malformed entry stops there; the rest of the feed still counts.
                        let _ = Record::read_log(entry, |r| {
                            self.take(stores, bucket, node, r, unix_now, &mut raised);
                        });
                    }
                }
                News::Whole(pairs) => {
                    let mut seen = HashMap::<PeerKey, (), Fast>::default();
                    for pair in pairs.chunks_exact(2) {
                        let Some(r) = Record::from_field(&pair[0], Some(&pair[1])) else {
                            continue;
                        };
                        if let Record::Peer {
                            info_hash,
                            endpoint,
                            ..
                        } = r
                        {
                            seen.insert((info_hash, endpoint), ());
                        }
                        self.take(stores, bucket, node, r, unix_now, &mut raised);
                    }
                    let gone: Vec<PeerKey> = self.peers[bucket]
                        .iter()
                        .filter(|(k, r)| r.node == node && !seen.contains_key(*k))
                        .map(|(k, _)| *k)
                        .collect();
                    for key in gone {
                        self.remove(stores, bucket, key);
                    }
                }
            }
            self.versions[bucket].insert(feed.node, feed.version);
        }
        raised.sort_unstable_by_key(|ih: &InfoHash| ih.0);
        raised.dedup();
        for info_hash in raised {
            let remote: u64 = self
                .completed
                .get(&info_hash)
                .map_or(0, |v| v.iter().map(|&(_, c)| u64::from(c)).sum());
            let own = u64::from(own.get(&info_hash).copied().unwrap_or(0));
            let total = u32::try_from(own + remote).unwrap_or(u32::MAX);
            stores.core.swarms().raise_completed(&info_hash, total);
        }
    }

    /// One record of another node's.
    fn take(
        &mut self,
        stores: &Stores,
        bucket: usize,
        node: u16,
        record: Record,
        unix_now: u64,
        raised: &mut Vec<InfoHash>,
    ) {
        match record {
            Record::Peer {
                info_hash,
                endpoint,
                value: Some(v),
            } if u64::from(v.expires) >= unix_now => {
                let key = (info_hash, endpoint);
                self.upsert(stores, node, key, &v, unix_now);
                let before = self.peers[bucket].insert(
                    key,
                    Held {
                        node,
                        expires: v.expires,
                    },
                );
                if before.is_none_or(|b| b.expires != v.expires) {
                    self.expiring.entry(v.expires).or_default().push(key);
                }
            }
            Record::Peer {
                info_hash,
                endpoint,
                ..
            } => {
                let key = (info_hash, endpoint);
                if self.peers[bucket].get(&key).is_some_and(|r| r.node == node) {
                    self.remove(stores, bucket, key);
                }
            }
            Record::Client {
                torrent_id,
                user_id,
                peer_id,
                value: Some(v),
            } => self.clients.push(((torrent_id, user_id, peer_id), v)),
            // A client record taken out of another node's hash: nothing to do here (the
            // ledger's own records expire on their own).
            Record::Client { value: None, .. } => {}
            Record::Completed { info_hash, total } => {
                let totals = self.completed.entry(info_hash).or_default();
                match totals.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, c)) => *c = (*c).max(total),
                    None => totals.push((node, total)),
                }
                raised.push(info_hash);
            }
        }
    }

    /// Lists another node's peer in the store of its protocol, with its expiry moved onto
    /// the stores' coarse clock.
    fn upsert(&self, stores: &Stores, node: u16, key: PeerKey, v: &PeerValue, unix_now: u64) {
        let left = u32::try_from(u64::from(v.expires) - unix_now).unwrap_or(u32::MAX);
        let expires = clock::now().saturating_add(left);
        let (info_hash, swarms) = (&key.0, stores.core.swarms());
        match key.1 {
            Endpoint::V4(a) => swarms.upsert_remote(info_hash, peer(a, v, expires)),
            Endpoint::V6(a) => swarms.upsert_remote(info_hash, peer(a, v, expires)),
            Endpoint::WebTorrent(peer_id) => {
                let conn = stores.link.connection_of(&self.nodes[usize::from(node)]);
                stores
                    .core
                    .webtorrent()
                    .upsert_remote(info_hash, peer_id, conn, v.seeder, expires);
            }
        }
    }

    fn remove(&mut self, stores: &Stores, bucket: usize, key: PeerKey) {
        self.peers[bucket].remove(&key);
        let (info_hash, swarms) = (&key.0, stores.core.swarms());
        match key.1 {
            Endpoint::V4(a) => swarms.remove_remote(info_hash, a),
            Endpoint::V6(a) => swarms.remove_remote(info_hash, a),
            Endpoint::WebTorrent(peer_id) => {
                stores.core.webtorrent().remove_remote(info_hash, &peer_id);
            }
        }
    }

    /// Takes out of the stores the remote peers whose expiry passed (a node that died stops
    /// refreshing its peers: they leave here within the peer lifetime).
    pub fn expire(&mut self, stores: &Stores, unix_now: u64) {
        while let Some(entry) = self.expiring.first_entry() {
            if u64::from(*entry.key()) >= unix_now {
                break;
            }
            let at = *entry.key();
            for key in entry.remove() {
                let bucket = bucket_of(&key.0);
                if self.peers[bucket]
                    .get(&key)
                    .is_some_and(|r| r.expires == at)
                {
                    self.remove(stores, bucket, key);
                }
            }
        }
    }

    fn node_index(&mut self, name: &str) -> u16 {
        match self.nodes.iter().position(|n| n == name) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(name.to_string());
                (self.nodes.len() - 1) as u16
            }
        }
    }
}

fn peer<A>(addr: A, p: &PeerValue, expires: u32) -> Peer<A> {
    Peer {
        peer_id: p.peer_id,
        addr,
        expires,
        seeder: p.seeder,
    }
}
