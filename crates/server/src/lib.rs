//! shoal's server: configuration, the protocol front ends, and start-up and shutdown.
//!
//! Everything the `shoal` binary does is here, as a library, so that tests (and the bench
//! tool) can start a whole tracker in-process on port 0 with [`Tracker::start`] and stop it
//! with [`Tracker::shutdown`]. `main.rs` only parses arguments and handles signals.
//!
//! The front ends share one [`shoal_swarm::Store`]; a peer that announced over one protocol
//! is visible to the others (within its address family).

pub mod admin;
pub mod cli;
pub mod config;
pub mod http;
pub mod privileges;
pub mod shared;
pub mod state;
pub mod udp;
pub mod ws;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use admin::AdminServer;
use anyhow::Context;
use shared::Shared;
use shoal_swarm::{AccessList, Store};
use state::{Restored, StateFile};

pub use config::Config;
use udp::connection_id::ConnectionIds;
use udp::handler::HandlerConfig;
use udp::{UdpFrontEnd, UdpSettings};

/// A running tracker.
pub struct Tracker {
    config: Config,
    store: Arc<Store>,
    ws: Arc<ws::WsContext>,
    shutdown: Arc<AtomicBool>,
    udp: Option<UdpFrontEnd>,
    http: Option<http::HttpFrontEnd>,
    cleaner: Option<JoinHandle<()>>,
    state: Option<Arc<StateFile>>,
    state_thread: Option<JoinHandle<()>>,
    /// Set while a new process waits for its predecessor's final snapshot.
    handover_waiting: Arc<AtomicBool>,
    restored: Restored,
    shared: Arc<Shared>,
    admin: Option<AdminServer>,
    sampler: Option<JoinHandle<()>>,
}

impl Tracker {
    /// Starts every configured front end. Returns once all sockets are bound, so the
    /// caller can read the addresses (port 0 resolved) right away.
    pub fn start(config: Config) -> anyhow::Result<Self> {
        config.validate()?;
        privileges::enter_jail_dir(&config.privileges)?;
        // Before any front end starts, so their facade metrics are recorded.
        admin::metrics::install();
        let access_list = load_access_list(&config)?;
        let (store, restored) = if config.state.file.as_os_str().is_empty() {
            (Store::new(config.store_config()), Restored::Missing)
        } else {
            state::restore(&config.state.file, config.store_config())
        };
        let store = Arc::new(store);
        store.set_access_list(access_list);
        let shutdown = Arc::new(AtomicBool::new(false));

        // The key file wins; else the snapshot's key (so that clients' ids survive a
        // restart or a hand-over); else a new one.
        let snapshot_key = match &restored {
            Restored::Loaded(s) => <[u8; 16]>::try_from(s.header.key.as_slice()).ok(),
            _ => None,
        };
        let key = if !config.udp.connection_id_key_file.as_os_str().is_empty() {
            ConnectionIds::load_or_create_key(&config.udp.connection_id_key_file)?
        } else if let Some(k) = snapshot_key {
            k
        } else {
            ConnectionIds::random_key()
        };
        let ids = ConnectionIds::new(
            key,
            config.udp.connection_id_max_age + config.udp.connection_id_grace,
        );
        let udp = if config.udp.listen.is_empty() {
            None
        } else {
            let settings = UdpSettings {
                listen: config.udp.listen.clone(),
                workers: config.worker_count(),
                batch_size: config.udp.batch_size,
                recv_buffer_bytes: config.udp.recv_buffer_bytes,
                handler: HandlerConfig {
                    interval: config.announce.interval,
                    allow_ip_field: config.udp.allow_ip_field,
                    max_scrape_hashes: config.udp.max_scrape_hashes,
                },
                max_numwant: config.announce.max_numwant,
            };
            Some(UdpFrontEnd::start(
                &settings,
                store.clone(),
                ids,
                shutdown.clone(),
            )?)
        };

        let ws = Arc::new(ws::WsContext::new(&config, store.clone()));
        let http = if config.http.listen.is_empty() && config.https.listen.is_empty() {
            None
        } else {
            Some(http::HttpFrontEnd::start(
                &config,
                store.clone(),
                ws.clone(),
                shutdown.clone(),
            )?)
        };

        let handover_waiting = Arc::new(AtomicBool::new(false));
        let state = (!config.state.file.as_os_str().is_empty())
            .then(|| Arc::new(StateFile::new(config.state.file.clone(), key)));
        let shared = Arc::new(Shared::new(
            config.clone(),
            store.clone(),
            udp.as_ref().map(|u| u.counters.clone()).unwrap_or_default(),
            ws.clone(),
            state.clone(),
            handover_waiting.clone(),
        )?);
        if let Some(certs) = http.as_ref().and_then(|h| h.tls_certs()) {
            shared.add_reload_hook(Box::new(move || {
                certs.reload().context("reloading the TLS certificate")?;
                Ok("TLS certificate reloaded".to_string())
            }));
        }
        let admin = if config.admin.listen.is_empty() {
            None
        } else {
            Some(AdminServer::start(&config.admin.listen, shared.clone())?)
        };

        // Every socket is bound: give up root before reading or writing anything else.
        if let Some(line) = privileges::drop_privileges(&config.privileges)? {
            tracing::info!("{line}");
        }

        let cleaner = {
            let store = store.clone();
            let ws = ws.clone();
            let shutdown = shutdown.clone();
            let every = Duration::from_secs(config.store.clean_interval);
            std::thread::Builder::new()
                .name("cleaner".into())
                .spawn(move || run_cleaner(&store, &ws, &shutdown, every))
                .context("spawning the cleaner")?
        };
        let sampler = {
            let (shared, shutdown) = (shared.clone(), shutdown.clone());
            std::thread::Builder::new()
                .name("sampler".into())
                .spawn(move || shared::run_sampler(&shared, &shutdown))
                .context("spawning the sampler")?
        };

        let state_thread = if let Some(state_file) = &state {
            let schedule = state::Schedule::after(
                &restored,
                config.state.snapshot_interval,
                config.state.handover_timeout,
            );
            let thread = {
                let (state_file, store) = (state_file.clone(), store.clone());
                let (shutdown, waiting) = (shutdown.clone(), handover_waiting.clone());
                std::thread::Builder::new()
                    .name("snapshots".into())
                    .spawn(move || state::run(&state_file, &store, schedule, &shutdown, &waiting))
                    .context("spawning the snapshot thread")?
            };
            Some(thread)
        } else {
            None
        };

        Ok(Self {
            config,
            store,
            ws,
            shutdown,
            udp,
            http,
            cleaner: Some(cleaner),
            state,
            state_thread,
            handover_waiting,
            restored,
            shared,
            admin,
            sampler: Some(sampler),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
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
        for line in self.shared.reload()? {
            tracing::info!("{line}");
        }
        Ok(())
    }

    /// Adds a step to [`Tracker::reload`] (and to the admin API's reload).
    pub fn add_reload_hook(&self, hook: shared::ReloadHook) {
        self.shared.add_reload_hook(hook);
    }

    /// What the admin listener and the status page read.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
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
        self.state.as_ref()
    }

    /// Whether this process still waits for a predecessor's final snapshot.
    pub fn handover_waiting(&self) -> bool {
        self.handover_waiting.load(Ordering::Relaxed)
    }

    /// Writes a snapshot now (not marked final).
    pub fn snapshot(&self) -> anyhow::Result<shoal_swarm::SnapshotSummary> {
        let state = self
            .state
            .as_ref()
            .context("snapshots are off (state.file is empty)")?;
        state.write(&self.store, false)
    }

    /// Lines saying where the tracker listens, for the operator.
    pub fn describe_listeners(&self) -> Vec<String> {
        let udp = self
            .udp_addrs()
            .iter()
            .map(|a| format!("UDP tracker listening on udp://{a}/announce"));
        let http = self
            .http_addrs()
            .iter()
            .map(|a| format!("HTTP tracker listening on http://{a}/announce"));
        let https = self
            .https_addrs()
            .iter()
            .map(|a| format!("HTTPS tracker listening on https://{a}/announce"));
        let admin = self
            .admin_addrs()
            .iter()
            .map(|a| format!("admin (metrics, status page, API) listening on http://{a}/"));
        udp.chain(http).chain(https).chain(admin).collect()
    }

    /// Stops every front end (each answers what it already received), waits for its
    /// threads, then writes the final snapshot.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(mut admin) = self.admin.take() {
            admin.stop();
        }
        if let Some(s) = self.sampler.take() {
            let _ = s.join();
        }
        if let Some(udp) = self.udp.take() {
            udp.join();
        }
        if let Some(http) = self.http.take() {
            http.join();
        }
        if let Some(c) = self.cleaner.take() {
            let _ = c.join();
        }
        if let Some(t) = self.state_thread.take() {
            let _ = t.join();
        }
        if let Some(state) = self.state.take() {
            let started = Instant::now();
            match state.write(&self.store, true) {
                Ok(s) => tracing::info!(
                    "final snapshot written to {} in {:?}: {} torrents, {} peers",
                    state.path().display(),
                    started.elapsed(),
                    s.torrents,
                    s.peers
                ),
                Err(e) => tracing::error!("final snapshot failed: {e:#}"),
            }
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn load_access_list(config: &Config) -> anyhow::Result<AccessList> {
    Ok(AccessList::load(
        config.access_mode(),
        &config.access_list.path,
    )?)
}

fn run_cleaner(store: &Store, ws: &ws::WsContext, shutdown: &AtomicBool, every: Duration) {
    let mut next = Instant::now() + every;
    while !shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(every));
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + every;
        let started = Instant::now();
        let now = shoal_swarm::clock::now();
        let r = store.clean(now);
        let w = ws.clean(now);
        tracing::debug!(
            "WebTorrent: {} peers expired, {} torrents removed, {} torrents, {} peers",
            w.peers_expired,
            w.torrents_removed,
            w.torrents,
            w.peers
        );
        tracing::debug!(
            "cleaned in {:?}: {} peers expired, {} torrents removed, {} torrents, {} peers",
            started.elapsed(),
            r.peers_expired,
            r.torrents_removed,
            r.torrents,
            r.peers
        );
    }
}
