//! Several shoal nodes, one swarm: nodes share their torrents' peers through Redis (a
//! Redis Cluster, or one Redis) without putting the network on any request's path.
//!
//! Each node answers from its own store, as a single node does. The store journals what
//! this node's clients did ([`shoal_swarm::journal`]); once per exchange interval the
//! [`node`] thread sends, per torrent with local activity, one script call that writes this
//! node's changes and reads every node's live peers back ([`record`] has the key layout and
//! the script), and [`exchange`] puts other nodes' peers into the store, takes out those
//! that left, and raises the completed count to the cluster's. Redis commands per announce:
//! one per active torrent per interval, shared by every announce of that torrent in it.
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
