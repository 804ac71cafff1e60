//! shoal's cluster exchange: several shoal nodes share their swarms through Redis (a Redis
//! Cluster, or one Redis) without putting the network on any request's path.
//!
//! Each node answers from its own stores, as a single node does. The UDP/HTTP store
//! journals what this node's clients did ([`shoal_swarm::journal`]) and the WebTorrent
//! front end hands its peers to a [`WsLink`]; once per exchange interval the [`node`]
//! thread sends one script call per bucket of torrents ([`feed`] has the key layout and the
//! script) that writes only what changed of this node's peers, of every protocol, and
//! answers only what the other nodes changed since this node last read them. [`exchange`]
//! decides what is worth writing and keeps it until a call carries it; [`remote`] puts the
//! other nodes' peers into the stores, takes out those that left or expired, and raises
//! completed counts to the cluster's. Redis commands per round: one per bucket, whatever
//! the number of torrents and announces, plus the heartbeat and [`relay`]'s list commands
//! that carry WebTorrent offers and answers to the node that serves their peer.
//!
//! Faults: a call that fails (Redis down, a master down, a timeout) keeps its writes for the
//! next round; the node keeps serving from what it has and counts the failures
//! (`shoal_cluster_errors_total`). A node that dies stops refreshing its peers, whose
//! expiry (in each value) then removes them from every node within the peer lifetime.
//! `docs/cluster.md` has the operator's view.
//!
//! Boundaries: the arrows point down, `shoal-server` -> this crate -> `shoal-tracker` ->
//! `shoal-swarm` -> `shoal-proto`. This crate knows nothing of the server: what it needs of
//! the config file comes as [`ClusterSettings`], the WebTorrent front end reaches it
//! through a [`WsLink`], and messages from other nodes go back to local connections
//! through a [`LocalDelivery`] the server implements.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use shoal_swarm::webtorrent::ConnectionId;

pub mod exchange;
pub mod feed;
mod link;
pub mod node;
mod pace;
pub mod relay;
pub mod remote;
mod round;
mod view;
pub mod ws_link;

pub use node::{ClusterNode, ClusterView};
pub use ws_link::WsLink;

/// The maps of this crate: keys are info hashes and addresses, not attacker-chosen strings
/// that need a keyed hash.
type Fast = foldhash::fast::RandomState;

/// What the exchange needs of the server's `[cluster]` section, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Seed nodes: `redis://host:port` of some Redis Cluster masters, or of one Redis.
    pub seeds: Vec<String>,
    /// This node's name among the nodes (each node's must differ).
    pub node: String,
    /// Time between two exchanges: how far behind the other nodes a node may be.
    pub every: Duration,
    /// Prefix of every key (several trackers may share one Redis).
    pub key_prefix: String,
    /// Seconds a peer lives (the store's peer lifetime): how long a node's peers outlive
    /// its last word.
    pub peer_ttl: u32,
}

/// Where messages that other nodes forwarded to this node's WebTorrent peers are handed
/// over: the server's registry of live connections.
pub trait LocalDelivery: Send + Sync {
    /// Queues `message` (an offer, or else an answer) for local connection `conn`, without
    /// waiting (a full queue or a closed connection drops it, as for a message relayed on
    /// one node).
    fn deliver(&self, conn: ConnectionId, message: String, offer: bool);
}

/// The WebTorrent front end, as the exchange sees it.
#[derive(Clone)]
pub struct WebTorrentFrontEnd {
    /// What the front end hands the exchange (its peers, messages for other nodes).
    pub link: Arc<WsLink>,
    /// Where messages from other nodes go.
    pub delivery: Arc<dyn LocalDelivery>,
}
