//! One node's side of the exchange, without the network: which of its peers' changes it
//! has to write (from the store's journal), and what it does with the other nodes' changes
//! Redis answers (their peers into the store, those that left or expired out of it, the
//! completed count up to the cluster's).
//!
//! Kept apart from the connection so that the rules are plain code over plain values
//! ([`Exchange::plan`] then [`Exchange::apply`] or [`Exchange::retry`]), and [`super::node`]
//! only moves them over the wire. The layout they travel in is [`super::feed`]'s.
//!
//! Only what changed is written: a re-announce of a peer as it was published (same peer id,
//! same seeder flag) is not written again until its expiry has moved by more than an
//! eighth of the peer lifetime, so a busy swarm's re-announces cost a map lookup each, and
//! the other nodes may drop a peer that went silent up to that eighth early, never late.
//!
//! In private mode the accounting records of this node's clients travel the same way
//! ([`Exchange::record_clients`]): each one an announce changed is written once a round
//! (the last of the round), and the other nodes' come out of [`Exchange::take_adopted`]
//! for the ledger to adopt (see [`crate::private`] on several nodes).
//!
//! Memory: what this node published (one entry per live local peer, and per private client
//! seen within the ledger's record lifetime), the writes not yet sent, and the other nodes'
//! peers it holds (one entry per remote peer): all bounded by the swarms themselves.

use std::collections::{BTreeMap, HashMap};

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use shoal_swarm::journal::{AnyAddr, Change};
use shoal_swarm::{clock, Peer};

use shoal_tracker::swarms::Swarms;

use super::feed::{
    bucket_of, client_bucket, ClientValue, News, NodeFeed, PeerValue, Record, BUCKETS,
};
use shoal_tracker::private::{PeerRecord, SharedRecord};

type Fast = foldhash::fast::RandomState;
type PeerKey = (InfoHash, AnyAddr);
/// A private-mode client: torrent id, user id, peer id.
type ClientKey = (u64, u64, PeerId);

/// Rounds between two sweeps of what this node published (to delete expired peers).
const SWEEP_ROUNDS: u64 = 30;

/// What a node still has to write to one bucket.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writes {
    /// Peers announced (`Some`) or gone (`None`), the last change of each.
    pub peers: HashMap<PeerKey, Option<PeerValue>, Fast>,
    /// This node's completed totals that changed.
    pub completed: HashMap<InfoHash, u32, Fast>,
    /// Private-mode client records that changed (`None`: too old, taken out of the hash).
    pub clients: HashMap<ClientKey, Option<ClientValue>, Fast>,
}

impl Writes {
    fn is_empty(&self) -> bool {
        self.peers.is_empty() && self.completed.is_empty() && self.clients.is_empty()
    }
}

/// One bucket's round trip: what to write, and the versions this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub bucket: usize,
    pub writes: Writes,
    pub held: Vec<(String, u64)>,
}

impl Call {
    /// This round's log entry (empty: nothing to write).
    pub fn entry(&self) -> Vec<u8> {
        let w = &self.writes;
        let mut out =
            Vec::with_capacity(w.peers.len() * 64 + w.completed.len() * 25 + w.clients.len() * 58);
        for (&(info_hash, addr), &value) in &w.peers {
            Record::Peer {
                info_hash,
                addr,
                value,
            }
            .write(&mut out);
        }
        for (&info_hash, &total) in &w.completed {
            Record::Completed { info_hash, total }.write(&mut out);
        }
        for (&(torrent_id, user_id, peer_id), &value) in &w.clients {
            Record::Client {
                torrent_id,
                user_id,
                peer_id,
                value,
            }
            .write(&mut out);
        }
        out
    }
}

/// A peer another node serves, as this node holds it.
#[derive(Clone, Copy, Debug)]
struct Remote {
    /// Index into [`Exchange::nodes`].
    node: u16,
    /// Unix seconds.
    expires: u32,
}

/// The node's exchange state.
pub struct Exchange {
    node: String,
    /// Seconds a peer lives (the store's peer lifetime).
    peer_ttl: u64,
    /// How far a re-announce may move a published expiry before it is written again.
    slack: u64,
    /// What this node last wrote of each of its peers.
    published: HashMap<PeerKey, PeerValue, Fast>,
    /// Writes not yet sent, per bucket.
    pending: Vec<Writes>,
    /// This node's completed count per torrent (totals: idempotent to write).
    completed: HashMap<InfoHash, u32, Fast>,
    /// Per bucket, the version of each other node's log this node has read up to.
    held: Vec<HashMap<String, u64>>,
    /// Other nodes' names; [`Remote::node`] indexes it.
    nodes: Vec<String>,
    /// Other nodes' peers this node put into its store, per bucket.
    remote: Vec<HashMap<PeerKey, Remote, Fast>>,
    /// Other nodes' completed totals per torrent.
    remote_completed: HashMap<InfoHash, Vec<(u16, u32)>, Fast>,
    /// Remote peers by expiry (Unix seconds), to take them out when it passes; an entry
    /// whose peer was refreshed since is skipped.
    expiring: BTreeMap<u32, Vec<PeerKey>>,
    /// This node's own version of each bucket, as Redis last answered it (0: not known).
    own: Vec<u64>,
    rounds: u64,
    /// What this node last wrote of each of its private-mode clients.
    published_clients: HashMap<ClientKey, ClientValue, Fast>,
    /// Seconds a client record is worth keeping (the ledger's record lifetime).
    client_ttl: u64,
    /// Other nodes' client records read since [`Exchange::take_adopted`].
    adopted: Vec<(ClientKey, ClientValue)>,
}

impl Exchange {
    pub fn new(node: String, peer_ttl: u64) -> Self {
        Self {
            node,
            peer_ttl,
            slack: peer_ttl / 8,
            published: HashMap::default(),
            pending: vec![Writes::default(); BUCKETS],
            completed: HashMap::default(),
            held: vec![HashMap::new(); BUCKETS],
            nodes: Vec::new(),
            remote: vec![HashMap::default(); BUCKETS],
            remote_completed: HashMap::default(),
            expiring: BTreeMap::new(),
            own: vec![0; BUCKETS],
            rounds: 0,
            published_clients: HashMap::default(),
            client_ttl: peer_ttl,
            adopted: Vec::new(),
        }
    }

    /// Private mode: client records are kept in Redis for `ttl` seconds after their
    /// announce (the ledger's record lifetime).
    pub fn keep_clients_for(&mut self, ttl: u64) {
        self.client_ttl = ttl;
    }

    /// Folds in the client records this node's announces changed (private mode): the last
    /// one of each client this round is pending. `unix_now` and `clock_now` are the wall
    /// clock and the ledger's coarse clock at the same moment.
    pub fn record_clients(&mut self, shared: &[SharedRecord], unix_now: u64, clock_now: u32) {
        for c in shared {
            let age = u64::from(clock_now.saturating_sub(c.record.seen));
            let value = ClientValue {
                uploaded: c.record.uploaded,
                downloaded: c.record.downloaded,
                seen: u32::try_from(unix_now.saturating_sub(age)).unwrap_or(u32::MAX),
                seeding: c.record.seeding,
                started: c.record.started,
                ended: c.ended,
            };
            let key = (c.torrent_id, c.user_id, c.peer_id);
            self.published_clients.insert(key, value);
            self.pending[client_bucket(c.torrent_id)]
                .clients
                .insert(key, Some(value));
        }
    }

    /// Other nodes' client records read since the last call, as the ledger takes them
    /// (`seen` on its coarse clock); those older than the record lifetime are left out.
    pub fn take_adopted(&mut self, unix_now: u64, clock_now: u32) -> Vec<SharedRecord> {
        let ttl = self.client_ttl;
        self.adopted
            .drain(..)
            .filter_map(|((torrent_id, user_id, peer_id), v)| {
                let age = unix_now.saturating_sub(u64::from(v.seen));
                (age <= ttl).then(|| SharedRecord {
                    user_id,
                    torrent_id,
                    peer_id,
                    record: PeerRecord {
                        uploaded: v.uploaded,
                        downloaded: v.downloaded,
                        seen: clock_now.saturating_sub(u32::try_from(age).unwrap_or(u32::MAX)),
                        seeding: v.seeding,
                        started: v.started,
                    },
                    ended: v.ended,
                })
            })
            .collect()
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Folds the store's journal in: what changed since the last publication is pending.
    pub fn record(&mut self, changes: &[Change], unix_now: u64) {
        let expires = u32::try_from(unix_now + self.peer_ttl).unwrap_or(u32::MAX);
        for change in changes {
            match *change {
                Change::Announced {
                    info_hash,
                    addr,
                    peer_id,
                    seeder,
                    completed,
                } => {
                    let value = PeerValue {
                        expires,
                        seeder,
                        peer_id,
                    };
                    let key = (info_hash, addr);
                    let b = bucket_of(&info_hash);
                    if completed {
                        let c = self.completed.entry(info_hash).or_default();
                        *c = c.saturating_add(1);
                        self.pending[b].completed.insert(info_hash, *c);
                    }
                    match self.published.get_mut(&key) {
                        Some(p)
                            if p.seeder == seeder
                                && p.peer_id == peer_id
                                && u64::from(expires.saturating_sub(p.expires)) <= self.slack => {}
                        Some(p) => {
                            *p = value;
                            self.pending[b].peers.insert(key, Some(value));
                        }
                        None => {
                            self.published.insert(key, value);
                            self.pending[b].peers.insert(key, Some(value));
                        }
                    }
                }
                Change::Stopped { info_hash, addr } => {
                    let key = (info_hash, addr);
                    let b = bucket_of(&info_hash);
                    if self.published.remove(&key).is_some()
                        || self.pending[b].peers.contains_key(&key)
                    {
                        self.pending[b].peers.insert(key, None);
                    }
                }
                // Every node reads every bucket each round: a scrape needs nothing more.
                Change::Scraped { .. } => {}
            }
        }
    }

    /// The calls of this round: one per bucket (each reads the others' news), with the
    /// bucket's pending writes, which leave the pending set; [`Exchange::retry`] puts back
    /// those of a failed call.
    pub fn plan(&mut self, unix_now: u64) -> Vec<Call> {
        self.rounds += 1;
        if self.rounds.is_multiple_of(SWEEP_ROUNDS) {
            self.sweep_published(unix_now);
        }
        (0..BUCKETS)
            .map(|bucket| Call {
                bucket,
                writes: std::mem::take(&mut self.pending[bucket]),
                held: self.held[bucket]
                    .iter()
                    .map(|(n, v)| (n.clone(), *v))
                    .collect(),
            })
            .collect()
    }

    /// Peers whose published expiry passed are deleted from Redis (the others dropped
    /// them already; this keeps the node's hash from growing).
    fn sweep_published(&mut self, unix_now: u64) {
        let pending = &mut self.pending;
        self.published.retain(|key, p| {
            let live = u64::from(p.expires) >= unix_now;
            if !live {
                pending[bucket_of(&key.0)].peers.entry(*key).or_insert(None);
            }
            live
        });
        let ttl = self.client_ttl;
        self.published_clients.retain(|key, c| {
            let live = u64::from(c.seen) + ttl >= unix_now;
            if !live {
                pending[client_bucket(key.0)]
                    .clients
                    .entry(*key)
                    .or_insert(None);
            }
            live
        });
    }

    /// A call failed: its writes go back, under whatever was recorded since (newer changes
    /// of the same peer win).
    pub fn retry(&mut self, call: Call) {
        let w = &mut self.pending[call.bucket];
        for (key, value) in call.writes.peers {
            w.peers.entry(key).or_insert(value);
        }
        for (info_hash, total) in call.writes.completed {
            w.completed.entry(info_hash).or_insert(total);
        }
        for (key, value) in call.writes.clients {
            w.clients.entry(key).or_insert(value);
        }
    }

    /// Puts what Redis answered for one bucket into `store`: other nodes' new peers in,
    /// those that left out, completed counts up.
    pub fn apply(&mut self, store: &Swarms, bucket: usize, feeds: Vec<NodeFeed>, unix_now: u64) {
        let mut raised = Vec::new();
        for feed in feeds {
            let node = self.node_index(&feed.node);
            match &feed.news {
                News::Log(entries) => {
                    for entry in entries {
                        // A malformed entry stops there; the rest of the feed still counts.
                        let _ = Record::read_log(entry, |r| {
                            self.take(store, bucket, node, r, unix_now, &mut raised);
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
                            info_hash, addr, ..
                        } = r
                        {
                            seen.insert((info_hash, addr), ());
                        }
                        self.take(store, bucket, node, r, unix_now, &mut raised);
                    }
                    let gone: Vec<PeerKey> = self.remote[bucket]
                        .iter()
                        .filter(|(k, r)| r.node == node && !seen.contains_key(*k))
                        .map(|(k, _)| *k)
                        .collect();
                    for key in gone {
                        self.remove(store, bucket, key);
                    }
                }
            }
            self.held[bucket].insert(feed.node, feed.version);
        }
        raised.sort_unstable_by_key(|ih: &InfoHash| ih.0);
        raised.dedup();
        for info_hash in raised {
            let remote: u64 = self
                .remote_completed
                .get(&info_hash)
                .map_or(0, |v| v.iter().map(|&(_, c)| u64::from(c)).sum());
            let own = u64::from(self.completed.get(&info_hash).copied().unwrap_or(0));
            let total = u32::try_from(own + remote).unwrap_or(u32::MAX);
            store.raise_completed(&info_hash, total);
        }
    }

    /// One record of another node's.
    fn take(
        &mut self,
        store: &Swarms,
        bucket: usize,
        node: u16,
        record: Record,
        unix_now: u64,
        raised: &mut Vec<InfoHash>,
    ) {
        match record {
            Record::Peer {
                info_hash,
                addr,
                value: Some(v),
            } if u64::from(v.expires) >= unix_now => {
                let left = u32::try_from(u64::from(v.expires) - unix_now).unwrap_or(u32::MAX);
                let expires = clock::now().saturating_add(left);
                match addr {
                    AnyAddr::V4(a) => store.upsert_remote(&info_hash, peer(a, &v, expires)),
                    AnyAddr::V6(a) => store.upsert_remote(&info_hash, peer(a, &v, expires)),
                }
                let key = (info_hash, addr);
                let before = self.remote[bucket].insert(
                    key,
                    Remote {
                        node,
                        expires: v.expires,
                    },
                );
                if before.is_none_or(|b| b.expires != v.expires) {
                    self.expiring.entry(v.expires).or_default().push(key);
                }
            }
            Record::Peer {
                info_hash, addr, ..
            } => {
                let key = (info_hash, addr);
                // Only the node that holds the peer here may take it out (a client that
                // moved between nodes is held by the last one that wrote it).
                if self.remote[bucket]
                    .get(&key)
                    .is_some_and(|r| r.node == node)
                {
                    self.remove(store, bucket, key);
                }
            }
            Record::Client {
                torrent_id,
                user_id,
                peer_id,
                value: Some(v),
            } => self.adopted.push(((torrent_id, user_id, peer_id), v)),
            // A client record taken out of another node's hash: nothing to do here (the
            // ledger's own records expire on their own).
            Record::Client { value: None, .. } => {}
            Record::Completed { info_hash, total } => {
                let totals = self.remote_completed.entry(info_hash).or_default();
                match totals.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, c)) => *c = (*c).max(total),
                    None => totals.push((node, total)),
                }
                raised.push(info_hash);
            }
        }
    }

    fn remove(&mut self, store: &Swarms, bucket: usize, key: PeerKey) {
        self.remote[bucket].remove(&key);
        match key.1 {
            AnyAddr::V4(a) => store.remove_remote::<CompactPeerV4>(&key.0, a),
            AnyAddr::V6(a) => store.remove_remote::<CompactPeerV6>(&key.0, a),
        }
    }

    /// Takes out of `store` the remote peers whose expiry passed (a node that died stops
    /// refreshing its peers: they leave here within the peer lifetime).
    pub fn expire(&mut self, store: &Swarms, unix_now: u64) {
        while let Some(entry) = self.expiring.first_entry() {
            if u64::from(*entry.key()) >= unix_now {
                break;
            }
            let at = *entry.key();
            for key in entry.remove() {
                let bucket = bucket_of(&key.0);
                if self.remote[bucket]
                    .get(&key)
                    .is_some_and(|r| r.expires == at)
                {
                    self.remove(store, bucket, key);
                }
            }
        }
    }

    /// Checks this node's own version of a bucket against what it wrote: a version that
    /// did not move as it should means Redis lost the bucket (a master back without its
    /// data, a failover to a replica behind), so everything this node publishes there is
    /// written again next round.
    pub fn check_own(&mut self, call: &Call, version: u64) {
        let b = call.bucket;
        let expected = self.own[b] + u64::from(!call.writes.is_empty());
        if self.own[b] != 0 && version != expected {
            let w = &mut self.pending[b];
            for (key, value) in &self.published {
                if bucket_of(&key.0) == b {
                    w.peers.entry(*key).or_insert(Some(*value));
                }
            }
            for (info_hash, total) in &self.completed {
                if bucket_of(info_hash) == b {
                    w.completed.entry(*info_hash).or_insert(*total);
                }
            }
            for (key, value) in &self.published_clients {
                if client_bucket(key.0) == b {
                    w.clients.entry(*key).or_insert(Some(*value));
                }
            }
        }
        self.own[b] = version;
    }

    /// Forgets what this node read of a bucket: the next round reads it from the start.
    pub fn forget(&mut self, bucket: usize) {
        self.held[bucket].clear();
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

    /// Remote peers held, over every torrent.
    pub fn remote_peers(&self) -> usize {
        self.remote.iter().map(HashMap::len).sum()
    }

    /// Torrents with writes waiting for a retry.
    pub fn pending_torrents(&self) -> usize {
        let mut torrents: Vec<InfoHash> = self
            .pending
            .iter()
            .filter(|w| !w.is_empty())
            .flat_map(|w| {
                w.peers
                    .keys()
                    .map(|k| k.0)
                    .chain(w.completed.keys().copied())
            })
            .collect();
        torrents.sort_unstable_by_key(|ih| ih.0);
        torrents.dedup();
        torrents.len()
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

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::PeerId;
    use shoal_swarm::StoreConfig;

    const IH: InfoHash = InfoHash([1; 20]);

    fn v4(port: u16) -> AnyAddr {
        AnyAddr::V4(CompactPeerV4::new("10.0.0.1".parse().unwrap(), port))
    }

    fn announced(port: u16, seeder: bool, completed: bool) -> Change {
        Change::Announced {
            info_hash: IH,
            addr: v4(port),
            peer_id: PeerId([port as u8; 20]),
            seeder,
            completed,
        }
    }

    /// The writes of this round, all buckets together.
    fn writes(x: &mut Exchange, unix: u64) -> Writes {
        let mut all = Writes::default();
        for call in x.plan(unix) {
            assert_eq!(call.entry().is_empty(), call.writes.is_empty());
            all.peers.extend(call.writes.peers);
            all.completed.extend(call.writes.completed);
            all.clients.extend(call.writes.clients);
        }
        all
    }

    #[test]
    fn only_what_changed_is_written_and_completions_are_totals() {
        let mut x = Exchange::new("a".into(), 800);
        x.record(
            &[
                announced(1, false, false),
                announced(1, true, true),
                announced(2, false, false),
                Change::Stopped {
                    info_hash: IH,
                    addr: v4(2),
                },
                Change::Stopped {
                    info_hash: IH,
                    addr: v4(3),
                },
                Change::Scraped { info_hash: IH },
            ],
            1000,
        );
        let w = writes(&mut x, 1000);
        assert_eq!(w.peers.len(), 2, "{w:?}");
        let one = w.peers[&(IH, v4(1))].unwrap();
        assert!(one.seeder && one.expires == 1800);
        assert_eq!(w.peers[&(IH, v4(2))], None, "stopped before it was sent");
        assert_eq!(w.completed[&IH], 1);
        // Re-announces as published, within an eighth of the lifetime: nothing to write.
        x.record(&[announced(1, true, false)], 1100);
        assert!(writes(&mut x, 1100).peers.is_empty());
        // Past it, or a change of state: written again.
        x.record(&[announced(1, true, false)], 1101);
        assert_eq!(
            writes(&mut x, 1101).peers[&(IH, v4(1))].unwrap().expires,
            1901
        );
        x.record(&[announced(1, false, false)], 1102);
        assert!(!writes(&mut x, 1102).peers[&(IH, v4(1))].unwrap().seeder);
        // A stop of a published peer is a delete; one nobody heard of is nothing.
        x.record(
            &[Change::Stopped {
                info_hash: IH,
                addr: v4(1),
            }],
            1103,
        );
        assert_eq!(writes(&mut x, 1103).peers[&(IH, v4(1))], None);
        x.record(&[announced(4, false, false)], 1104);
        assert!(writes(&mut x, 1104).peers.contains_key(&(IH, v4(4))));
        // Once its expiry passed, the sweep deletes it from Redis.
        let mut deleted = false;
        for _ in 0..SWEEP_ROUNDS {
            deleted |= writes(&mut x, 1904 + 1).peers.get(&(IH, v4(4))) == Some(&None);
        }
        assert!(deleted, "an expired peer is deleted");
    }

    #[test]
    fn a_failed_call_comes_back_under_newer_changes() {
        let mut x = Exchange::new("a".into(), 100);
        x.record(
            &[announced(1, false, false), announced(2, false, true)],
            1000,
        );
        let calls: Vec<Call> = x
            .plan(1000)
            .into_iter()
            .filter(|c| !c.writes.is_empty())
            .collect();
        assert_eq!(calls.len(), 1);
        x.record(&[announced(1, true, false)], 1010);
        x.retry(calls.into_iter().next().unwrap());
        let w = writes(&mut x, 1010);
        assert!(
            w.peers[&(IH, v4(1))].unwrap().seeder,
            "the newer announce wins"
        );
        assert!(w.peers.contains_key(&(IH, v4(2))));
        assert_eq!(w.completed[&IH], 1);
    }

    #[test]
    fn what_redis_lost_is_written_again() {
        let mut x = Exchange::new("a".into(), 800);
        x.record(&[announced(1, false, true)], 1000);
        let call = x
            .plan(1000)
            .into_iter()
            .find(|c| !c.writes.is_empty())
            .unwrap();
        x.check_own(&call, 7);
        // The next round writes nothing and finds its version as it left it: nothing.
        let idle = x.plan(1000).swap_remove(call.bucket);
        x.check_own(&idle, 7);
        assert!(writes(&mut x, 1000).peers.is_empty());
        // Redis came back empty: the version is not the one this node wrote.
        let idle = x.plan(1000).swap_remove(call.bucket);
        x.check_own(&idle, 0);
        let again = writes(&mut x, 1000);
        assert!(again.peers[&(IH, v4(1))].is_some() && again.completed[&IH] == 1);
    }

    fn entry(records: &[Record]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            r.write(&mut out);
        }
        out
    }

    fn set(port: u16, expires: u32) -> Record {
        Record::Peer {
            info_hash: IH,
            addr: v4(port),
            value: Some(PeerValue {
                expires,
                seeder: true,
                peer_id: PeerId([7; 20]),
            }),
        }
    }

    fn feed(node: &str, version: u64, news: News) -> NodeFeed {
        NodeFeed {
            node: node.into(),
            version,
            news,
        }
    }

    #[test]
    fn client_records_travel_with_their_times_and_leave_redis_when_old() {
        use shoal_tracker::private::{PeerRecord, SharedRecord};
        let record = |seen, uploaded| PeerRecord {
            uploaded,
            downloaded: 5,
            seen,
            seeding: false,
            started: false,
        };
        let shared = |seen, uploaded, ended| SharedRecord {
            user_id: 3,
            torrent_id: 300,
            peer_id: PeerId([9; 20]),
            record: record(seen, uploaded),
            ended,
        };
        // Node A: its ledger's clock reads 50 when the wall clock reads 10,000; two
        // announces of one client this round: the last is written.
        let mut a = Exchange::new("a".into(), 100);
        a.keep_clients_for(1000);
        a.record_clients(&[shared(40, 7, false), shared(45, 9, false)], 10_000, 50);
        let calls: Vec<Call> = a
            .plan(10_000)
            .into_iter()
            .filter(|c| !c.writes.is_empty())
            .collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].bucket, 300 % BUCKETS);
        let entry = calls[0].entry();
        // Node B (clock 7 at wall 10,002) reads it: seen 5 s before its wall clock.
        let store = Swarms::Open(shoal_swarm::Store::new(StoreConfig::default()));
        let mut b = Exchange::new("b".into(), 100);
        b.keep_clients_for(1000);
        b.apply(
            &store,
            300 % BUCKETS,
            vec![feed("a", 1, News::Log(vec![entry]))],
            10_002,
        );
        let got = b.take_adopted(10_002, 7);
        assert_eq!(
            got,
            vec![shared(0, 9, false)],
            "seen 7 - 7 s, saturating at 0"
        );
        assert!(b.take_adopted(10_002, 7).is_empty());
        // A record older than the record lifetime is not handed over.
        let mut old = Vec::new();
        Record::Client {
            torrent_id: 300,
            user_id: 3,
            peer_id: PeerId([9; 20]),
            value: Some(ClientValue {
                uploaded: 1,
                downloaded: 1,
                seen: 8_000,
                seeding: true,
                started: false,
                ended: false,
            }),
        }
        .write(&mut old);
        b.apply(
            &store,
            300 % BUCKETS,
            vec![feed("a", 2, News::Log(vec![old]))],
            10_002,
        );
        assert!(b.take_adopted(10_002, 7).is_empty());
        // On A, the record leaves Redis once it is older than the lifetime.
        let mut deleted = false;
        for _ in 0..SWEEP_ROUNDS {
            deleted |= writes(&mut a, 10_995 + 1000)
                .clients
                .values()
                .any(Option::is_none);
        }
        assert!(deleted, "an old client record is deleted");
    }

    #[test]
    fn other_nodes_peers_come_in_leave_and_expire() {
        let store = Swarms::Open(shoal_swarm::Store::new(StoreConfig::default()));
        let b = bucket_of(&IH);
        let mut x = Exchange::new("a".into(), 100);
        x.record(&[announced(9, false, true)], 1000);
        let log = entry(&[
            set(1, 2000),
            set(2, 2000),
            set(3, 999),
            Record::Completed {
                info_hash: IH,
                total: 4,
            },
        ]);
        x.apply(&store, b, vec![feed("b", 1, News::Log(vec![log]))], 1000);
        let st = store.scrape(&IH);
        assert_eq!((st.seeders, st.completed), (2, 5), "own completion + b's 4");
        assert_eq!(x.plan(1000)[b].held, vec![("b".to_string(), 1)]);
        // C says it left a peer that is B's here: B's stays. B says it left: it goes.
        let gone = entry(&[Record::Peer {
            info_hash: IH,
            addr: v4(1),
            value: None,
        }]);
        x.apply(
            &store,
            b,
            vec![feed("c", 1, News::Log(vec![gone.clone()]))],
            1000,
        );
        assert_eq!(store.scrape(&IH).seeders, 2);
        x.apply(&store, b, vec![feed("b", 2, News::Log(vec![gone]))], 1000);
        assert_eq!(store.scrape(&IH).seeders, 1);
        // B's whole hash read again: what is not in it leaves.
        let mut field = IH.0.to_vec();
        field.extend_from_slice(&CompactPeerV4::new("10.0.0.1".parse().unwrap(), 5).0);
        let mut value = Vec::new();
        PeerValue {
            expires: 1500,
            seeder: false,
            peer_id: PeerId([5; 20]),
        }
        .write(&mut value);
        x.apply(
            &store,
            b,
            vec![feed("b", 9, News::Whole(vec![field, value]))],
            1000,
        );
        let st = store.scrape(&IH);
        assert_eq!((st.seeders, st.leechers), (0, 1));
        assert_eq!(x.remote_peers(), 1);
        // Its expiry passes: it leaves, without a word from B (B may be dead).
        x.expire(&store, 1500);
        assert_eq!(x.remote_peers(), 1);
        x.expire(&store, 1501);
        assert_eq!((x.remote_peers(), store.scrape(&IH).leechers), (0, 0));
        assert_eq!(store.scrape(&IH).completed, 5, "completed never goes down");
    }
}
