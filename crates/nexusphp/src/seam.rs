//! A NexusPHP site on the site seam ([`shoal_site::Site`]): opened from `[nexusphp]` and
//! the site's database (checked, read into memory, nothing created), the clients its
//! `peers` table lists (the swarms resume, the ledger counts from their last reports), the
//! poll that brings the site's changes in (a task of its own on the accounts runtime,
//! every `poll_interval` seconds, stopped at shutdown), the site's Redis for the cleanup's
//! records, and the sweep of silent clients before each write.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shoal_site::{
    connect_check_load, log_loaded, site_members, LastReport, ListedPeer, Opening, Parts,
};
use shoal_tracker::private::ledger::SavedPeer;

use crate::cleanup::Cleanup;
use crate::config::NexusphpConfig;
use crate::db::NexusDb;
use crate::schema::NexusSchema;
use crate::site::Site;

/// Seconds between two sweeps of silent clients ([`Site::sweep`]).
const SWEEP_EVERY: i64 = 60;

/// A NexusPHP site in force.
pub struct Nexusphp {
    site: Arc<Site>,
    parts: Parts,
    poller: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// When the last sweep ran (Unix seconds; 0: none yet).
    swept_at: AtomicI64,
}

/// Opens the site: connect, check that its tables are NexusPHP's (the start stops with
/// what is missing), read it into memory, start the poll. Nothing is created in its
/// database.
pub fn open(config: &NexusphpConfig, o: &Opening<'_>) -> anyhow::Result<Arc<dyn shoal_site::Site>> {
    let (db, data) = o.runtime.block_on(connect_check_load(
        ("NexusPHP", "settings, users, torrents, peers and snatches"),
        NexusDb::connect(o.database_url, &config.time_zone),
        async |db| db.check().await,
        async |db| db.load(true).await,
    ))?;
    log_loaded(
        "NexusPHP",
        db.url(),
        &[
            (data.users.len(), "users"),
            (data.torrents.len(), "torrents"),
            (data.peers.len(), "peers"),
            (data.snatches.len(), "snatches"),
            (data.families.len(), "client families"),
        ],
    );
    let cleanup = cleanup_redis(config, o)?;
    let members = site_members();
    let site = Arc::new(Site::new(data));
    site.register(&members);
    let schema = Arc::new(NexusSchema::new(db, site.clone(), members.clone(), cleanup));
    let every = Duration::from_secs(config.poll_interval);
    let polled = schema.clone();
    let poller = o.runtime.handle().spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            match polled.poll().await {
                Ok(a) if a != crate::sync::Applied::default() => {
                    tracing::info!(?a, "NexusPHP site's changes put in force")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("reading the NexusPHP site's changes: {e}"),
            }
        }
    });
    Ok(Arc::new(Nexusphp {
        parts: Parts {
            name: "nexusphp",
            members,
            rules: site.clone(),
            schema,
            control: None,
        },
        site,
        poller: Mutex::new(Some(poller)),
        swept_at: AtomicI64::new(0),
    }))
}

/// The site's Redis for the cleanup's records (`[nexusphp] redis_url`), asked for a `PING`
/// at start: one that does not answer is logged, not fatal (the records wait for it).
/// Unset: a warning that the cleanup will not compute what it computes from them.
fn cleanup_redis(config: &NexusphpConfig, o: &Opening<'_>) -> anyhow::Result<Option<Cleanup>> {
    if config.redis_url.is_empty() {
        tracing::warn!(
            "[nexusphp] redis_url is not set: the site's cleanup will compute no seeding \
             bonus and no members' seed and leech time for the announces shoal serves \
             (set it to the site's Redis, docs/nexusphp.md)"
        );
        return Ok(None);
    }
    let cleanup = Cleanup::new(&config.redis_url, &config.time_zone)
        .map_err(|e| anyhow::anyhow!("nexusphp.redis_url: {e}"))?;
    match o.runtime.block_on(cleanup.ping()) {
        Ok(()) => tracing::info!("NexusPHP cleanup records go to Redis at {}", cleanup.url()),
        Err(e) => tracing::error!(
            "the NexusPHP site's Redis ({}) does not answer: {e}; the cleanup's records wait \
             in memory until it does",
            cleanup.url()
        ),
    }
    Ok(Some(cleanup))
}

impl shoal_site::Site for Nexusphp {
    fn parts(&self) -> &Parts {
        &self.parts
    }

    /// The site's clients as the ledger's records, from their `peers` rows: the first
    /// announce of each after the start is counted from what it last reported there, as
    /// NexusPHP counts it (`uploaded - peers.uploaded`).
    fn saved_peers(&self, now: u32, unix: u64) -> Vec<SavedPeer> {
        let mut out = Vec::new();
        for t in self.site.torrents.iter() {
            for p in t.clients.values() {
                let last = LastReport {
                    user_id: p.user_id,
                    torrent_id: t.torrent.id,
                    peer_id: p.peer_id,
                    uploaded: p.uploaded,
                    downloaded: p.downloaded,
                    seeder: p.seeder,
                    at: p.last_action,
                };
                out.push(last.saved(now, unix));
            }
        }
        out
    }

    fn listed_peers(&self) -> Vec<ListedPeer> {
        let mut out = Vec::new();
        for t in self.site.torrents.iter() {
            for p in t.clients.values().filter(|p| p.port != 0) {
                out.push(ListedPeer {
                    info_hash: t.torrent.info_hash,
                    peer_id: p.peer_id,
                    addr: SocketAddr::new(p.ip, p.port),
                    seeder: p.seeder,
                });
            }
        }
        out
    }

    /// The sweep of clients silent for longer than NexusPHP's cleanup keeps them, at most
    /// once every [`SWEEP_EVERY`] seconds: it reads every client and (member, torrent)
    /// shoal holds, and a client is silent for more than an hour before it is due.
    fn before_flush(&self, unix_now: i64) {
        let last = self.swept_at.load(Ordering::Relaxed);
        if unix_now >= last && unix_now - last < SWEEP_EVERY {
            return;
        }
        self.swept_at.store(unix_now, Ordering::Relaxed);
        let swept = self.site.sweep(unix_now);
        if swept > 0 {
            tracing::debug!(swept, "silent NexusPHP clients dropped");
        }
    }

    /// Stops the poll.
    fn shutdown(&self) {
        if let Some(poller) = self.poller.lock().take() {
            poller.abort();
        }
    }
}
