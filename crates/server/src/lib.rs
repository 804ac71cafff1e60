//! shoal's server: configuration, the protocol front ends, and start-up and shutdown.
//!
//! Everything the `shoal` binary does is here, as a library, so that tests (and the bench
//! tool) can start a whole tracker in-process on port 0 with [`Tracker::start`] and stop it
//! with [`Tracker::shutdown`]. `main.rs` only parses arguments and handles signals.
//!
//! The front ends share one [`shoal_swarm::Store`]; a peer that announced over one protocol
//! is visible to the others (within its address family).

pub mod cli;
pub mod config;
pub mod http;
pub mod sys;
pub mod udp;
pub mod ws;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use shoal_swarm::{AccessList, Store};

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
}

impl Tracker {
    /// Starts every configured front end. Returns once all sockets are bound, so the
    /// caller can read the addresses (port 0 resolved) right away.
    pub fn start(config: Config) -> anyhow::Result<Self> {
        config.validate()?;
        let store = Arc::new(Store::new(config.store_config()));
        store.set_access_list(load_access_list(&config)?);
        let shutdown = Arc::new(AtomicBool::new(false));

        let key = if config.udp.connection_id_key_file.as_os_str().is_empty() {
            ConnectionIds::random_key()
        } else {
            ConnectionIds::load_or_create_key(&config.udp.connection_id_key_file)?
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

        Ok(Self {
            config,
            store,
            ws,
            shutdown,
            udp,
            http,
            cleaner: Some(cleaner),
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

    /// Re-reads what can change without a restart (the access list, the TLS certificate).
    /// On error the old state stays in force (each part on its own: a bad certificate
    /// does not keep a good access list from loading).
    pub fn reload(&self) -> anyhow::Result<()> {
        let tls = match &self.http {
            Some(h) => h.reload_tls(),
            None => Ok(()),
        };
        if tls.is_ok() && !self.https_addrs().is_empty() {
            tracing::info!("TLS certificate reloaded");
        }
        self.reload_access_list()?;
        tls.context("reloading the TLS certificate")
    }

    fn reload_access_list(&self) -> anyhow::Result<()> {
        let list = load_access_list(&self.config)?;
        tracing::info!(
            "access list reloaded: mode {:?}, {} info hashes",
            list.mode(),
            list.len()
        );
        self.store.set_access_list(list);
        Ok(())
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
        udp.chain(http).chain(https).collect()
    }

    /// Stops every front end and waits for its threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(udp) = self.udp.take() {
            udp.join();
        }
        if let Some(http) = self.http.take() {
            http.join();
        }
        if let Some(c) = self.cleaner.take() {
            let _ = c.join();
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
