//! Several shoal nodes, one swarm: nodes share their torrents' peers through Redis (a
//! Redis Cluster, or one Redis) without putting the network on any request's path.
//!
//! Each node answers from its own store, as a single node does. The store journals what
//! this node's clients did ([`shoal_swarm::journal`]); once per exchange interval the
//! [`node`] thread sends one script call per bucket of torrents ([`feed`] has the key layout
//! and the script) that writes only what changed of this node's peers and answers only what
//! the other nodes changed since this node last read them, and [`exchange`] decides what is
//! worth writing and puts other nodes' peers into the store, takes out those that left or
//! expired, and raises completed counts to the cluster's. Redis commands per round: one per
//! bucket, whatever the number of torrents and announces. WebTorrent peers travel per
//! torrent ([`record`], [`ws_exchange`]).
//!
//! Faults: a call that fails (Redis down, a master down, a timeout) keeps its writes for the
//! next round; the node keeps serving from what it has and counts the failures
//! (`shoal_cluster_errors_total`). A node that dies stops refreshing its peers, whose
//! expiry (in each value) then removes them from every node within the peer lifetime.
//! `docs/cluster.md` has the operator's view.

pub mod exchange;
pub mod feed;
pub mod node;
pub mod record;
pub mod ws_exchange;

pub use node::{ClusterNode, ClusterView};
