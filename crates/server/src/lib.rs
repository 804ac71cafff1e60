//! shoal's server: the glue around the tracker core (`shoal_tracker::Core`): configuration,
//! the protocol front ends, the admin listener, snapshots, the cluster's wiring, private
//! mode's database side, and start-up and shutdown.
//!
//! Everything the `shoal` binary does is here, as a library, so that tests (and the bench
//! tool) can start a whole tracker in-process on port 0 with [`Tracker::start`] and stop it
//! with [`Tracker::shutdown`]. `main.rs` only parses arguments and handles signals.
//!
//! Each part is built by its owner from the [`Config`] and owns its state: the front ends
//! ([`udp`], [`http`], [`ws`]) their sockets, workers and settings, turning bytes into the
//! core's requests and its outcomes back into bytes; the core (one, shared) the policy and
//! the swarm stores; [`private`] the accounts database and its writer; `shoal-state` the
//! snapshot file and its writer; [`cluster`] the wiring of the Redis exchange
//! (`shoal-cluster`); [`admin`] its listener, token and status-page samples, reading the
//! rest through one narrow [`admin::TrackerView`]; [`reload`] the steps SIGHUP and the
//! admin API run.
//! [`Tracker::start`] only wires them together. A peer that announced over UDP or HTTP is
//! visible to both (within its address family).

#![forbid(unsafe_code)]

mod access_pipes;
pub mod admin;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod config_check;
pub mod http;
pub mod listen;
pub mod private;
pub mod privileges;
pub mod reload;
pub mod sites;
pub mod udp;
pub mod ws;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use admin::{AdminServer, AdminToken, Sampler, TrackerView};
use anyhow::Context;
use reload::Reload;
use shoal_proto::{CompactPeerV4, CompactPeerV6};
use shoal_state::{Restored, Snapshots, StateFile};
use shoal_swarm::webtorrent::WebTorrentStore;
use shoal_swarm::{PeerExt, Store};
use shoal_tracker::policy::{Policy, PrivateRule};
use shoal_tracker::{Core, Swarms};

pub use config::Config;
pub use reload::ReloadHook;
use udp::connection_id::ConnectionIds;
use udp::UdpFrontEnd;

/// A running tracker.
pub struct Tracker {
    config: Config,
    core: Arc<Core>,
    ws: Arc<ws::WsContext>,
    shutdown: Arc<AtomicBool>,
    udp: Option<UdpFrontEnd>,
    http: Option<http::HttpFrontEnd>,
    cleaner: Option<JoinHandle<()>>,
    snapshots: Option<Snapshots>,
    restored: Restored,
    reload: Arc<Reload>,
    admin: Option<AdminServer>,
    sampler: Option<Sampler>,
    /// Private mode's accounting writer.
    writer: Option<private::writer::Writer>,
    /// The cluster exchange, when on.
    cluster: Option<cluster::ClusterNode>,
    /// Private mode's database side (the site's reload on SIGUSR1).
    accounts: Option<Arc<private::Accounts>>,
}

/// The settings the site's rules put in force over `[announce]` and `[private]`: its
/// numwant (within what a UDP answer holds), its intervals and its flush interval.
fn site_settings(config: &mut Config) {
    let Some(site) = config.private.site() else {
        return;
    };
    if let Some(s) = config.sites.settings(site) {
        config.announce.default_numwant = s.default_numwant.min(config::UDP_MAX_NUMWANT);
        config.announce.max_numwant = s.max_numwant.min(config::UDP_MAX_NUMWANT);
        config.announce.min_interval = s.min_interval;
        config.announce.interval = s.interval;
        config.private.flush_interval = s.flush_interval;
    }
}

/// Lists the site's active, visible peers (read from its tables) in the swarm store, so
/// that a switch-over or a restart resumes the swarms.
fn list_site_peers(core: &Core, site: &dyn shoal_site::Site) {
    let expires = shoal_swarm::clock::now().saturating_add(core.swarms().config().peer_ttl);
    let peers = site.listed_peers();
    for p in &peers {
        let at = (shoal_proto::InfoHash(p.info_hash), p.seeder, expires);
        let peer_id = shoal_proto::PeerId(p.peer_id);
        match p.addr {
            SocketAddr::V4(a) => list(core, at, peer_id, CompactPeerV4::new(*a.ip(), a.port())),
            SocketAddr::V6(a) => list(core, at, peer_id, CompactPeerV6::new(*a.ip(), a.port())),
        }
    }
    if !peers.is_empty() {
        tracing::info!(
            "{} site: {} peers listed from its tables",
            site.name(),
            peers.len()
        );
    }
}

/// One of the site's peers, listed in the store as a peer another node knows.
fn list<A: shoal_swarm::Family>(
    core: &Core,
    (info_hash, seeder, expires): (shoal_proto::InfoHash, bool, u32),
    peer_id: shoal_proto::PeerId,
    addr: A,
) {
    let peer = shoal_swarm::Peer {
        peer_id,
        addr,
        expires,
        seeder,
    };
    core.swarms().upsert_remote(&info_hash, peer);
}

impl Tracker {
    /// Starts every configured front end. Returns once all sockets are bound, so the
    /// caller can read the addresses (port 0 resolved) right away.
    pub fn start(config: Config) -> anyhow::Result<Self> {
        config.validate()?;
        privileges::enter_jail_dir(&config.privileges)?;
        // Before any front end starts, so their facade metrics are recorded.
        admin::metrics::install();
        let mut config = config;
        site_settings(&mut config);
        let accounts = if config.private.enabled {
            // A document of every torrent for every client is no private tracker's.
            config.http.full_scrape = false;
            config.ws.full_scrape = false;
            let accounts = Arc::new(private::Accounts::open(&config)?);
            let (users, torrents, clients) = accounts.members.counts();
            tracing::info!(
                "private mode: {users} users, {torrents} torrents, {clients} client prefixes \
                 from {}",
                accounts.database_url()
            );
            Some(accounts)
        } else {
            None
        };
        let mut policy = config.policy()?;
        if let Some(a) = &accounts {
            policy = policy.with_private(PrivateRule {
                members: a.members.clone(),
            });
        }
        let clustered = config.cluster.enabled;
        // The journal holds one round's changes; a million is minutes of a busy node.
        let journal = clustered.then_some(1 << 20);
        let (store, restored) = match &accounts {
            Some(a) => {
                let (store, restored) = open_store(&config, journal);
                (Swarms::private(store, a.ledger.clone()), restored)
            }
            None if config.store.peer_ids => {
                let (store, restored) = open_store(&config, journal);
                (Swarms::Open(store), restored)
            }
            None => {
                let (store, restored) = open_store(&config, journal);
                (Swarms::Anonymous(store), restored)
            }
        };
        let webtorrent = WebTorrentStore::new(config.ws_store_config());
        let mut core = Core::new(policy, store, webtorrent);
        if let Some(log) = accounts.as_ref().and_then(|a| a.peer_log()) {
            core = core.with_peer_log(log.clone());
        }
        if let Some(site) = accounts.as_ref().and_then(|a| a.site()) {
            list_site_peers(&core, site.as_ref());
            core = core.with_site(site.rules(), site.members());
        }
        let core = Arc::new(core);
        let shutdown = Arc::new(AtomicBool::new(false));
        let key = if clustered {
            let own = restored.key().unwrap_or_else(ConnectionIds::random_key);
            Some(cluster::ClusterNode::connection_id_key(
                &cluster::settings(&config),
                own,
            ))
        } else {
            restored.key()
        };
        let ids = udp::connection_id::from_config(&config, key)?;
        let state_file = config
            .state_file()
            .map(|path| Arc::new(StateFile::new(path.to_path_buf(), ids.key())));

        let udp = if config.udp.listen.is_empty() {
            None
        } else {
            Some(UdpFrontEnd::start(
                &config,
                core.clone(),
                ids,
                shutdown.clone(),
            )?)
        };
        let ws = Arc::new(ws::WsContext::new(&config, core.clone()));
        let http = if config.http.listen.is_empty()
            && config.https.listen.is_empty()
            && config.http.unix_socket.as_os_str().is_empty()
        {
            None
        } else {
            let site_api = accounts
                .as_ref()
                .and_then(|a| a.site())
                .and_then(|site| site.control());
            Some(http::HttpFrontEnd::start(
                &config,
                core.clone(),
                ws.clone(),
                shutdown.clone(),
                site_api,
                udp.as_ref().map(|u| u.counters.clone()).unwrap_or_default(),
            )?)
        };

        let reload = Arc::new(Reload::default());
        let token = Arc::new(AdminToken::from_config(&config)?);
        {
            let core = core.clone();
            reload.add(Box::new(move || core.policy().reload()));
        }
        if token.has_file() {
            let token = token.clone();
            reload.add(Box::new(move || token.reload()));
        }
        if let Some(certs) = http.as_ref().and_then(|h| h.tls_certs()) {
            reload.add(Box::new(move || {
                certs.reload().context("reloading the TLS certificate")?;
                Ok("TLS certificate reloaded".to_string())
            }));
        }
        let cluster_view = clustered.then(|| Arc::new(cluster::ClusterView::default()));
        let view = Arc::new(TrackerView {
            config: config.clone(),
            core: core.clone(),
            udp_counters: udp.as_ref().map(|u| u.counters.clone()).unwrap_or_default(),
            ws: ws.clone(),
            accounts: accounts.clone(),
            cluster: cluster_view.clone(),
            snapshots: state_file.clone(),
            reload: reload.clone(),
            token,
            samples: admin::samples::Samples::new(config.admin.sample_interval),
            started: Instant::now(),
            started_unix: shoal_swarm::clock::unix_now(),
        });
        let admin = if config.admin.listen.is_empty() {
            None
        } else {
            Some(AdminServer::start(&config.admin.listen, view.clone())?)
        };

        // Every socket is bound: give up root before reading or writing anything else.
        if let Some(line) = privileges::drop_privileges(&config.privileges)? {
            tracing::info!("{line}");
        }
        access_pipes::start(&config, &core, &shutdown)?;

        let cleaner = {
            let core = core.clone();
            let shutdown = shutdown.clone();
            let every = Duration::from_secs(config.store.clean_interval);
            std::thread::Builder::new()
                .name("cleaner".into())
                .spawn(move || run_cleaner(&core, &shutdown, every))
                .context("spawning the cleaner")?
        };
        let sampler = Sampler::start(view)?;
        let cluster = match cluster::webtorrent(&ws) {
            Some(front) => Some(cluster::ClusterNode::start(
                cluster::settings(&config),
                core.clone(),
                front,
                cluster_view.clone().unwrap_or_default(),
                accounts.as_ref().map(|a| a.ledger.clone()),
            )?),
            None => None,
        };
        let writer = match accounts.clone() {
            Some(a) => Some(private::writer::Writer::start(
                a,
                Duration::from_secs(config.private.flush_interval),
            )?),
            None => None,
        };
        let snapshots = match state_file {
            Some(file) => Some(Snapshots::start(
                file,
                core.clone(),
                &restored,
                (
                    config.state.snapshot_interval,
                    config.state.changes_interval,
                    config.state.handover_timeout,
                ),
            )?),
            None => None,
        };

        Ok(Self {
            config,
            core,
            ws,
            shutdown,
            udp,
            http,
            cleaner: Some(cleaner),
            snapshots,
            restored,
            reload,
            admin,
            sampler: Some(sampler),
            writer,
            cluster,
            accounts,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The core every front end calls.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The UDP and HTTP peers' store.
    pub fn store(&self) -> &Swarms {
        self.core.swarms()
    }

    /// The rules asked before the store.
    pub fn policy(&self) -> &Policy {
        self.core.policy()
    }

    /// The WebTorrent state shared by every WebSocket connection (what the HTTP and
    /// HTTPS listeners pass to [`ws::serve_upgrade`]).
    pub fn ws_context(&self) -> &Arc<ws::WsContext> {
        &self.ws
    }

    /// The UDP addresses actually bound (port 0 resolved).
    pub fn udp_addrs(&self) -> &[SocketAddr] {
        self.udp.as_ref().map_or(&[], |u| &u.local_addrs)
    }

    /// The plain-HTTP addresses actually bound (port 0 resolved).
    pub fn http_addrs(&self) -> &[SocketAddr] {
        self.http.as_ref().map_or(&[], |h| &h.http_addrs)
    }

    /// The HTTPS addresses actually bound (port 0 resolved).
    pub fn https_addrs(&self) -> &[SocketAddr] {
        self.http.as_ref().map_or(&[], |h| &h.https_addrs)
    }

    /// Open HTTP and HTTPS connections right now.
    pub fn http_open_connections(&self) -> usize {
        self.http.as_ref().map_or(0, |h| h.open_connections())
    }

    /// Request counters of the UDP front end, summed over workers.
    pub fn udp_counters(&self) -> udp::counters::LocalCounters {
        self.udp.as_ref().map(|u| u.totals()).unwrap_or_default()
    }

    /// Re-reads what can change without a restart (the access list, the admin token, and
    /// through hooks the TLS certificate). On error the old state stays in force.
    ///
    /// Front ends with more to reload add a hook with [`Tracker::add_reload_hook`], so
    /// that SIGHUP and the admin API's reload both run it.
    pub fn reload(&self) -> anyhow::Result<()> {
        for line in self.reload.run()? {
            tracing::info!("{line}");
        }
        Ok(())
    }

    /// Reads the site's users, torrents, tokens and whitelist again and puts them in force
    /// (SIGUSR1, as Ocelot; the admin API's `POST /api/private/reload` does the same).
    pub fn reload_site(&self) -> anyhow::Result<()> {
        let accounts = self.accounts.as_ref().context("private mode is off")?;
        let (users, torrents, clients) = accounts.reload()?;
        tracing::info!("reloaded: {users} users, {torrents} torrents, {clients} client prefixes");
        Ok(())
    }

    /// Adds a step to [`Tracker::reload`] (and to the admin API's reload).
    pub fn add_reload_hook(&self, hook: ReloadHook) {
        self.reload.add(hook);
    }

    /// The admin listener's addresses (port 0 resolved).
    pub fn admin_addrs(&self) -> &[SocketAddr] {
        self.admin.as_ref().map_or(&[], |a| &a.local_addrs)
    }

    /// What became of the snapshot file at start.
    pub fn restored(&self) -> &Restored {
        &self.restored
    }

    /// The snapshot file, when snapshots are on.
    pub fn state_file(&self) -> Option<&Arc<StateFile>> {
        self.snapshots.as_ref().map(Snapshots::file)
    }

    /// Whether this process still waits for a predecessor's final snapshot.
    pub fn handover_waiting(&self) -> bool {
        self.state_file().is_some_and(|f| f.handover_waiting())
    }

    /// Writes a snapshot now (not marked final).
    pub fn snapshot(&self) -> anyhow::Result<shoal_swarm::SnapshotSummary> {
        let state = self
            .state_file()
            .context("snapshots are off (state.file is empty)")?;
        state.write(self.core.swarms(), false)
    }

    /// Lines saying where the tracker listens, for the operator.
    pub fn describe_listeners(&self) -> Vec<String> {
        let listeners = [
            (self.udp_addrs(), "UDP tracker", "udp", "announce"),
            (self.http_addrs(), "HTTP tracker", "http", "announce"),
            (self.https_addrs(), "HTTPS tracker", "https", "announce"),
            (
                self.admin_addrs(),
                "admin (metrics, status page, API)",
                "http",
                "",
            ),
        ];
        listeners
            .into_iter()
            .flat_map(|(addrs, what, scheme, path)| {
                addrs
                    .iter()
                    .map(move |a| format!("{what} listening on {scheme}://{a}/{path}"))
            })
            .collect()
    }

    /// Stops every front end (each answers what it already received), waits for its
    /// threads, then writes the final snapshot.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// [`shutdown`](Self::shutdown) for a process about to exit: the same stop and final
    /// snapshot, then the tracker is left for the operating system to take back whole
    /// instead of being freed allocation by allocation (at 30 million peers, millions of
    /// swarm arrays: seconds of an exit for nothing). Everything that writes or holds a
    /// connection has stopped by then.
    pub fn shutdown_for_exit(mut self) {
        self.stop();
        std::mem::forget(self);
    }

    fn stop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        stop_part(&mut self.admin, |mut admin| admin.stop());
        stop_part(&mut self.sampler, Sampler::stop);
        stop_part(&mut self.udp, UdpFrontEnd::join);
        stop_part(&mut self.http, http::HttpFrontEnd::join);
        stop_part(&mut self.cleaner, |c| {
            c.thread().unpark();
            drop(c.join())
        });
        // After the front ends: the last round publishes their last changes.
        stop_part(&mut self.cluster, cluster::ClusterNode::stop);
        // After the front ends: nothing is recorded once the final write begins.
        stop_part(&mut self.writer, private::writer::Writer::stop);
        stop_part(&mut self.snapshots, Snapshots::stop);
    }
}

/// Stops a part of the tracker with `stop`, once: the part is gone after (a second
/// `stop`, from `Drop` after `shutdown`, finds nothing).
fn stop_part<T>(part: &mut Option<T>, stop: impl FnOnce(T)) {
    if let Some(part) = part.take() {
        stop(part);
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An empty store, with a journal of `journal` changes for the cluster exchange (if
/// clustered), and what the state file's header says (if there is one). The store starts
/// empty so the front ends bind and serve at once: [`Snapshots::start`] loads the
/// snapshot's body into it in the background (peers heard from meanwhile win over their
/// saved entries), and writes no snapshot until that load is done.
fn open_store<X: PeerExt>(config: &Config, journal: Option<usize>) -> (Store<X>, Restored) {
    let store = Store::with_extension(config.store_config());
    let restored = config
        .state_file()
        .map_or(Restored::Missing, shoal_state::open);
    match journal {
        Some(capacity) => (store.with_journal(capacity), restored),
        None => (store, restored),
    }
}

fn run_cleaner(core: &Core, shutdown: &AtomicBool, every: Duration) {
    let mut next = Instant::now() + every;
    while !shutdown.load(Ordering::Relaxed) {
        // Woken at once by `Tracker::stop`.
        std::thread::park_timeout(Duration::from_millis(100).min(every));
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + every;
        let started = Instant::now();
        let now = shoal_swarm::clock::now();
        let r = core.swarms().clean_until(now, shutdown);
        let w = core.webtorrent().clean(now);
        tracing::debug!(
            "cleaned in {:?}: {} peers expired, {} torrents removed, {} torrents, {} peers; \
             WebTorrent: {} peers expired, {} torrents removed, {} torrents, {} peers",
            started.elapsed(),
            r.peers_expired,
            r.torrents_removed,
            r.torrents,
            r.peers,
            w.peers_expired,
            w.torrents_removed,
            w.torrents,
            w.peers
        );
    }
}

/// An open-mode core for `config` under `policy`, with empty stores: the front ends' unit
/// tests build their handlers on it.
#[cfg(test)]
pub(crate) fn open_core(config: &Config, policy: Policy) -> Arc<Core> {
    Arc::new(Core::new(
        policy,
        Swarms::Open(Store::new(config.store_config())),
        WebTorrentStore::new(config.ws_store_config()),
    ))
}
