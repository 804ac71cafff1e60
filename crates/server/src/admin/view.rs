//! What the admin listener sees of the tracker: one narrow handle naming every part it
//! reads or acts on, built by `Tracker::start`. The admin side owns none of the tracker's
//! parts except its own (the token, the samples); everything else it reaches through here.

use std::sync::Arc;
use std::time::Instant;

use super::samples::Samples;
use super::token::AdminToken;
use crate::cluster::ClusterView;
use crate::config::Config;
use crate::private::Accounts;
use crate::reload::Reload;
use crate::udp::counters::{self, LocalCounters, WorkerCounters};
use crate::ws::WsContext;
use shoal_state::StateFile;
use shoal_tracker::Core;

/// The admin listener's view of a running tracker.
pub struct TrackerView {
    /// The configuration in force (shown on the status page, secrets blanked).
    pub config: Config,
    /// The UDP workers' counters.
    pub udp_counters: Vec<Arc<WorkerCounters>>,
    /// The WebTorrent front end's state (its store and open connections).
    pub ws: Arc<WsContext>,
    /// The core: its policy (queried and edited by the API) and its stores.
    pub core: Arc<Core>,
    /// Private mode's database, tables and ledger (`None` when open).
    pub accounts: Option<Arc<Accounts>>,
    /// The cluster exchange's figures (`None` when the cluster is off).
    pub cluster: Option<Arc<ClusterView>>,
    /// The snapshot file, when snapshots are on.
    pub snapshots: Option<Arc<StateFile>>,
    /// What `POST /api/reload` runs (the same steps as SIGHUP).
    pub reload: Arc<Reload>,
    pub token: Arc<AdminToken>,
    pub samples: Samples,
    pub started: Instant,
    pub started_unix: u64,
}

impl TrackerView {
    /// Seconds since the cluster exchange last reached Redis (`None`: cluster off, or it
    /// never has).
    pub fn cluster_lag(&self) -> Option<u64> {
        let last = self
            .cluster
            .as_ref()?
            .last_exchange_unix
            .load(std::sync::atomic::Ordering::Relaxed);
        (last > 0).then(|| shoal_swarm::clock::unix_now().saturating_sub(last))
    }

    /// The cluster's figures for the status page and the API (`null` when off).
    pub fn cluster_json(&self) -> serde_json::Value {
        use std::sync::atomic::Ordering::Relaxed;
        match &self.cluster {
            None => serde_json::Value::Null,
            Some(c) => serde_json::json!({
                "nodes_seen": c.nodes_seen.load(Relaxed),
                "lag_seconds": self.cluster_lag(),
                "remote_peers": c.remote_peers.load(Relaxed),
                "errors": c.errors.load(Relaxed),
            }),
        }
    }

    /// Request counters of the UDP front end, summed over workers.
    pub fn udp_totals(&self) -> LocalCounters {
        counters::total(&self.udp_counters)
    }

    /// Whether this process still waits for a predecessor's final snapshot.
    pub fn handover_waiting(&self) -> bool {
        self.snapshots
            .as_ref()
            .is_some_and(|s| s.handover_waiting())
    }

    /// Age of the last snapshot this process wrote (`None`: none yet, or snapshots off).
    pub fn snapshot_age(&self) -> Option<u64> {
        let last = self.snapshots.as_ref()?.last_written_unix();
        (last > 0).then(|| shoal_swarm::clock::unix_now().saturating_sub(last))
    }
}
