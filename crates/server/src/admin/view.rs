//! What the admin listener sees of the tracker: one narrow handle naming every part it
//! reads or acts on, built by `Tracker::start`. The admin side owns none of the tracker's
//! parts except its own (the token, the samples); everything else it reaches through here.

use std::sync::Arc;
use std::time::Instant;

use shoal_swarm::Store;

use super::samples::Samples;
use super::token::AdminToken;
use crate::config::Config;
use crate::policy::Policy;
use crate::private::Accounts;
use crate::reload::Reload;
use crate::state::StateFile;
use crate::udp::counters::{self, LocalCounters, WorkerCounters};
use crate::ws::WsContext;

/// The admin listener's view of a running tracker.
pub struct TrackerView {
    /// The configuration in force (shown on the status page, secrets blanked).
    pub config: Config,
    pub store: Arc<Store>,
    /// The UDP workers' counters.
    pub udp_counters: Vec<Arc<WorkerCounters>>,
    /// The WebTorrent front end's state (its store and open connections).
    pub ws: Arc<WsContext>,
    /// The access list (queried and edited by the API).
    pub policy: Arc<Policy>,
    /// Private mode's database, tables and ledger (`None` when open).
    pub accounts: Option<Arc<Accounts>>,
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
