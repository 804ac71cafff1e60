//! One node's side of the exchange, without the network: which of its peers' changes it has
//! to write, and the writes kept until a call carries them. The peers of every protocol
//! are written alike: the UDP/HTTP store's journal ([`Exchange::record`]) and the WebTorrent
//! front end's outbox ([`Exchange::record_webtorrent`]) both end in the same pending
//! [`Writes`], one per bucket, which one script call a round carries ([`Exchange::plan`])
//! and a failed call puts back under newer changes ([`Exchange::retry`]). What Redis
//! answers of the other nodes goes to [`RemotePeers`].
//!
//! Kept apart from the connection so that the rules are plain code over plain values, and
//! [`crate::node`] only moves them over the wire. The layout they travel in is
//! [`crate::feed`]'s.
//!
//! Only what changed is written: a re-announce of a peer as it was published (same peer id,
//! same seeder flag) is not written again until its expiry has moved by more than an
//! eighth of the peer lifetime, so a busy swarm's re-announces cost a map lookup each, and
//! the other nodes may drop a peer that went silent up to that eighth early, never late.
//!
//! In private mode the accounting records of this node's clients travel the same way
//! ([`Exchange::record_clients`]): each one an announce changed is written once a round
//! (the last of the round), and the other nodes' come out of [`Exchange::take_adopted`]
//! for the ledger to adopt.
//!
//! Memory: what this node published (one entry per live local peer, and per private client
//! seen within the ledger's record lifetime), the writes not yet sent, and the other nodes'
//! peers it holds (one entry per remote peer): all bounded by the swarms themselves.

use std::collections::HashMap;

use shoal_proto::InfoHash;
use shoal_swarm::journal::Change;
use shoal_tracker::private::{PeerRecord, SharedRecord};

use crate::feed::{
    bucket_of, client_bucket, ClientKey, ClientValue, Endpoint, NodeFeed, PeerKey, PeerValue,
    Record, BUCKETS,
};
use crate::remote::{RemotePeers, Stores};
use crate::ws_link::Outgoing;
use crate::Fast;

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

    /// Puts `older` (a failed call's writes) back under these: a change recorded since
    /// wins over the one that failed.
    fn put_back(&mut self, older: Writes) {
        for (key, value) in older.peers {
            self.peers.entry(key).or_insert(value);
        }
        for (info_hash, total) in older.completed {
            self.completed.entry(info_hash).or_insert(total);
        }
        for (key, value) in older.clients {
            self.clients.entry(key).or_insert(value);
        }
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
    /// This round's log entry (empty: nothing to write). WebTorrent peers come last: a node
    /// of an earlier version, which stops reading an entry at a kind it does not know,
    /// still reads everything else.
    pub fn entry(&self) -> Vec<u8> {
        let w = &self.writes;
        let mut out =
            Vec::with_capacity(w.peers.len() * 64 + w.completed.len() * 25 + w.clients.len() * 58);
        let peers = |webtorrent: bool| {
            w.peers
                .iter()
                .filter(move |(k, _)| matches!(k.1, Endpoint::WebTorrent(_)) == webtorrent)
                .map(|(&(info_hash, endpoint), &value)| Record::Peer {
                    info_hash,
                    endpoint,
                    value,
                })
        };
        for r in peers(false) {
            r.write(&mut out);
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
        for r in peers(true) {
            r.write(&mut out);
        }
        out
    }
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
    /// This node's own version of each bucket, as Redis last answered it (0: not known).
    own: Vec<u64>,
    rounds: u64,
    /// What this node last wrote of each of its private-mode clients.
    published_clients: HashMap<ClientKey, ClientValue, Fast>,
    /// Seconds a client record is worth keeping (the ledger's record lifetime).
    client_ttl: u64,
    /// What this node read of the other nodes.
    remote: RemotePeers,
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
            own: vec![0; BUCKETS],
            rounds: 0,
            published_clients: HashMap::default(),
            client_ttl: peer_ttl,
            remote: RemotePeers::default(),
        }
    }

    /// Private mode: client records are kept in Redis for `ttl` seconds after their
    /// announce (the ledger's record lifetime).
    pub fn keep_clients_for(&mut self, ttl: u64) {
        self.client_ttl = ttl;
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Folds the UDP/HTTP store's journal in: what changed since the last publication is
    /// pending.
    pub fn record(&mut self, changes: &[Change], unix_now: u64) {
        let expires = self.expires(unix_now);
        for change in changes {
            match *change {
                Change::Announced {
                    info_hash,
                    addr,
                    peer_id,
                    seeder,
                    completed,
                } => {
                    if completed {
                        self.completed_once(info_hash);
                    }
                    let value = PeerValue {
                        expires,
                        seeder,
                        peer_id,
                    };
                    self.announced((info_hash, addr.into()), value);
                }
                Change::Stopped { info_hash, addr } => self.stopped((info_hash, addr.into())),
                // Every node reads every bucket each round: a scrape needs nothing more.
                Change::Scraped { .. } => {}
            }
        }
    }

    /// Folds the WebTorrent front end's peers in, as [`Exchange::record`] does the
    /// journal's (forwarded messages are [`crate::relay`]'s, and left out here).
    pub fn record_webtorrent(&mut self, items: &[Outgoing], unix_now: u64) {
        let expires = self.expires(unix_now);
        for item in items {
            if let Outgoing::Peer {
                info_hash,
                peer_id,
                seeder,
                stopped,
            } = *item
            {
                let key = (info_hash, Endpoint::WebTorrent(peer_id));
                if stopped {
                    self.stopped(key);
                } else {
                    let value = PeerValue {
                        expires,
                        seeder,
                        peer_id,
                    };
                    self.announced(key, value);
                }
            }
        }
    }

    fn expires(&self, unix_now: u64) -> u32 {
        u32::try_from(unix_now + self.peer_ttl).unwrap_or(u32::MAX)
    }

    fn completed_once(&mut self, info_hash: InfoHash) {
        let c = self.completed.entry(info_hash).or_default();
        *c = c.saturating_add(1);
        self.pending[bucket_of(&info_hash)]
            .completed
            .insert(info_hash, *c);
    }

    /// A local peer announced: pending unless it was published as it is, within the slack.
    fn announced(&mut self, key: PeerKey, value: PeerValue) {
        let pending = &mut self.pending[bucket_of(&key.0)];
        match self.published.get_mut(&key) {
            Some(p)
                if p.seeder == value.seeder
                    && p.peer_id == value.peer_id
                    && u64::from(value.expires.saturating_sub(p.expires)) <= self.slack => {}
            Some(p) => {
                *p = value;
                pending.peers.insert(key, Some(value));
            }
            None => {
                self.published.insert(key, value);
                pending.peers.insert(key, Some(value));
            }
        }
    }

    /// A local peer left: a delete, if the others heard of it or are about to.
    fn stopped(&mut self, key: PeerKey) {
        let pending = &mut self.pending[bucket_of(&key.0)];
        if self.published.remove(&key).is_some() || pending.peers.contains_key(&key) {
            pending.peers.insert(key, None);
        }
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
        self.remote
            .take_clients()
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

    /// The calls of a round: one per bucket (each reads the others' news), with the
    /// bucket's pending writes, which leave the pending set; [`Exchange::retry`] puts back
    /// those of a failed call.
    pub fn plan(&mut self, unix_now: u64) -> Vec<Call> {
        self.plan_round(unix_now, |_| true)
    }

    /// A round's calls for the buckets `wanted` picks (the exchange leaves out a bucket
    /// whose call of an earlier round is still in flight: its writes stay pending).
    pub fn plan_round(&mut self, unix_now: u64, wanted: impl Fn(usize) -> bool) -> Vec<Call> {
        self.rounds += 1;
        if self.rounds.is_multiple_of(SWEEP_ROUNDS) {
            self.sweep_published(unix_now);
        }
        self.plan_some(wanted)
    }

    /// Calls between rounds, for the buckets `wanted` picks (retries): as a round's.
    pub fn plan_some(&mut self, wanted: impl Fn(usize) -> bool) -> Vec<Call> {
        (0..BUCKETS)
            .filter(|&bucket| wanted(bucket))
            .map(|bucket| Call {
                bucket,
                writes: std::mem::take(&mut self.pending[bucket]),
                held: self.remote.held(bucket),
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
        self.pending[call.bucket].put_back(call.writes);
    }

    /// Puts what Redis answered for one bucket into the stores (see [`RemotePeers::apply`]).
    pub fn apply(&mut self, stores: &Stores, bucket: usize, feeds: Vec<NodeFeed>, unix_now: u64) {
        self.remote
            .apply(stores, bucket, feeds, unix_now, &self.completed);
    }

    /// Takes out of the stores the remote peers whose expiry passed.
    pub fn expire(&mut self, stores: &Stores, unix_now: u64) {
        self.remote.expire(stores, unix_now);
    }

    /// Checks this node's own version of a bucket against what it wrote: a version that
    /// did not move as it should means Redis lost the bucket (a master back without its
    /// data, a failover to a replica behind), so everything this node publishes there is
    /// written again next round.
    pub fn check_own(&mut self, call: &Call, version: u64) {
        let b = call.bucket;
        let expected = self.own[b] + u64::from(!call.writes.is_empty());
        if self.own[b] != 0 && version != expected {
            let lost = Writes {
                peers: in_bucket(&self.published, b, |k| bucket_of(&k.0))
                    .map(|(k, v)| (k, Some(v)))
                    .collect(),
                completed: in_bucket(&self.completed, b, bucket_of).collect(),
                clients: in_bucket(&self.published_clients, b, |k| client_bucket(k.0))
                    .map(|(k, v)| (k, Some(v)))
                    .collect(),
            };
            self.pending[b].put_back(lost);
        }
        self.own[b] = version;
    }

    /// Forgets what this node read of a bucket: the next round reads it from the start.
    pub fn forget(&mut self, bucket: usize) {
        self.remote.forget(bucket);
    }

    /// Remote peers held, over every torrent and protocol.
    pub fn remote_peers(&self) -> usize {
        self.remote.len()
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

/// The entries of `map` whose key falls into `bucket`.
fn in_bucket<'a, K: Copy, V: Copy>(
    map: &'a HashMap<K, V, Fast>,
    bucket: usize,
    of: impl Fn(&K) -> usize + 'a,
) -> impl Iterator<Item = (K, V)> + 'a {
    map.iter()
        .filter(move |(k, _)| of(k) == bucket)
        .map(|(k, v)| (*k, *v))
}

#[cfg(test)]
mod tests;
