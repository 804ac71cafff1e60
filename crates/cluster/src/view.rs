//! What the status page and `/metrics` show of the cluster: the exchange writes it, the
//! server's admin listener reads it.

use std::sync::atomic::AtomicU64;

/// What the status page and `/metrics` show of the cluster.
#[derive(Default)]
pub struct ClusterView {
    /// Nodes that exchanged within the last three intervals (this one included).
    pub nodes_seen: AtomicU64,
    /// Unix seconds of the last round that reached Redis (0: none yet).
    pub last_exchange_unix: AtomicU64,
    pub remote_peers: AtomicU64,
    pub errors: AtomicU64,
}
