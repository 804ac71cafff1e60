//! What every WebTorrent connection shares: [`WsContext`] (the settings, the tracker's
//! [`Core`] whose WebTorrent store keeps the connection-keyed swarms, the [`Registry`] of
//! outgoing queues,
//! the connection count) and the [`WsSettings`] taken from the config. Its own file so that
//! the connection task and the handler import it from a sibling.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::registry::Registry;
use crate::config::{Config, WsConfig};
use shoal_cluster::WsLink;
use shoal_tracker::Core;

/// Settings of the WebTorrent front end, resolved from the config.
#[derive(Clone, Debug)]
pub struct WsSettings {
    /// The `[ws]` section as configured (validated, so its minimums hold).
    pub limits: WsConfig,
    /// `ws.send_timeout`, `ws.ping_interval` and `ws.idle_timeout`, as durations.
    pub send_timeout: Duration,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
}

impl WsSettings {
    pub fn from_config(config: &Config) -> Self {
        let ws = &config.ws;
        Self {
            limits: ws.clone(),
            send_timeout: Duration::from_secs(ws.send_timeout),
            ping_interval: Duration::from_secs(ws.ping_interval.max(1)),
            idle_timeout: Duration::from_secs(ws.idle_timeout),
        }
    }
}

/// What every WebTorrent connection shares. Build one per tracker with [`WsContext::new`]
/// and pass it (in an `Arc`) to every `serve_upgrade`.
pub struct WsContext {
    pub settings: WsSettings,
    /// The tracker's core: every announce and scrape goes through it, and answers are
    /// matched against its WebTorrent store.
    pub core: Arc<Core>,
    pub registry: Registry,
    /// The cluster exchange's link, when the cluster is on.
    pub cluster: Option<Arc<WsLink>>,
    next_id: AtomicU64,
    open: AtomicUsize,
}

impl WsContext {
    /// The WebTorrent state for a tracker configured by `config`, under `policy` (the
    /// tracker's, so a reload applies to WebTorrent too).
    pub fn new(config: &Config, core: Arc<Core>) -> Self {
        let settings = WsSettings::from_config(config);
        Self {
            settings,
            core,
            registry: Registry::new(),
            cluster: config
                .cluster
                .enabled
                .then(|| Arc::new(WsLink::new(config.cluster.node_id()))),
            next_id: AtomicU64::new(1),
            open: AtomicUsize::new(0),
        }
    }

    /// WebSocket connections open right now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Takes a connection slot, if one is free.
    pub(super) fn admit(self: &Arc<Self>) -> Option<Admission> {
        let max = self.settings.limits.max_connections;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        metrics::gauge!("shoal_ws_connections").increment(1.0);
        Some(Admission {
            ctx: self.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
        })
    }
}

/// A connection slot, given back when dropped.
pub(super) struct Admission {
    ctx: Arc<WsContext>,
    pub(super) id: u64,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.ctx.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("shoal_ws_connections").decrement(1.0);
    }
}
