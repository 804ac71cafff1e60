//! The cluster exchange's wiring. The exchange itself is `shoal-cluster` (`docs/cluster.md`
//! has the design); the server hands it what it needs and nothing more: the `[cluster]`
//! section resolved into [`ClusterSettings`], and the WebTorrent front end's registry as
//! the place where messages other nodes forward to local connections are delivered.

use std::sync::Arc;
use std::time::Duration;

use shoal_cluster::{ClusterSettings, LocalDelivery, WebTorrentFrontEnd};
use shoal_swarm::webtorrent::ConnectionId;

use crate::config::Config;
use crate::ws::WsContext;

pub use shoal_cluster::{ClusterNode, ClusterView};

/// The exchange's settings, from the config (`[cluster]`, and the store's peer lifetime).
pub fn settings(config: &Config) -> ClusterSettings {
    let c = &config.cluster;
    ClusterSettings {
        seeds: c.redis.clone(),
        node: c.node_id(),
        every: Duration::from_millis(c.exchange_interval_ms),
        key_prefix: c.key_prefix.clone(),
        peer_ttl: config.store.peer_ttl,
    }
}

/// The WebTorrent front end as the exchange sees it; `None` when the cluster is off.
pub fn webtorrent(ws: &Arc<WsContext>) -> Option<WebTorrentFrontEnd> {
    Some(WebTorrentFrontEnd {
        link: ws.cluster.clone()?,
        delivery: ws.clone(),
    })
}

impl LocalDelivery for WsContext {
    fn deliver(&self, conn: ConnectionId, message: String, offer: bool) {
        if offer {
            self.registry.deliver_offer(conn, message.into());
        } else {
            let now = shoal_swarm::clock::now();
            self.registry.deliver(conn, message.into(), now);
        }
    }
}
