//! The WebTorrent front end: JSON over WebSocket on the HTTP and HTTPS listeners.
//!
//! The HTTP connection loop owns the TCP (or TLS) stream and parses the request head; on
//! an `Upgrade: websocket` request (any path) it hands the stream over with
//! [`serve_upgrade`], which answers `101 Switching Protocols` and runs the WebTorrent
//! connection until it closes. Everything WebTorrent connections share lives in one
//! [`WsContext`]: the settings, the [`WebTorrentStore`] of connection-keyed swarms, and
//! the [`registry::Registry`] through which one connection's task hands a relayed offer
//! or answer to another's bounded outgoing queue.
//!
//! - [`connection`]: one connection's task (reads, writes, pings, limits).
//! - [`handler`]: what a message does (announce, offers, answer, scrape, failures).
//! - [`registry`]: connection ids to outgoing queues; slow readers are kicked.

pub mod connection;
pub mod handler;
pub mod registry;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shoal_swarm::webtorrent::{WebTorrentStore, WsCleanReport, WsStoreConfig};
use shoal_swarm::Store;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::config::Config;
use registry::Registry;

/// An `Upgrade: websocket` request, as read by the HTTP connection loop.
#[derive(Clone, Debug)]
pub struct UpgradeRequest {
    /// The request path (any path is accepted; kept for logs).
    pub path: String,
    /// The `Sec-WebSocket-Key` header, from which `Sec-WebSocket-Accept` is derived.
    pub sec_websocket_key: String,
    /// The client's address.
    pub remote: SocketAddr,
    /// Bytes already read past the request head (the start of the first frames).
    pub leftover: Vec<u8>,
}

/// Settings of the WebTorrent front end, resolved from the config.
#[derive(Clone, Debug)]
pub struct WsSettings {
    pub interval: u32,
    pub max_offers: usize,
    pub max_message_size: usize,
    pub max_frame_size: usize,
    pub max_connections: usize,
    pub max_torrents_per_connection: usize,
    pub outgoing_queue: usize,
    pub send_timeout: Duration,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    pub max_strikes: u32,
    pub max_scrape_hashes: usize,
    pub full_scrape: bool,
}

impl WsSettings {
    pub fn from_config(config: &Config) -> Self {
        let ws = &config.ws;
        Self {
            interval: ws.interval,
            max_offers: ws.max_offers,
            max_message_size: ws.max_message_size,
            max_frame_size: ws.max_frame_size,
            max_connections: ws.max_connections,
            max_torrents_per_connection: ws.max_torrents_per_connection,
            outgoing_queue: ws.outgoing_queue.max(1),
            send_timeout: Duration::from_secs(ws.send_timeout),
            ping_interval: Duration::from_secs(ws.ping_interval.max(1)),
            idle_timeout: Duration::from_secs(ws.idle_timeout),
            max_strikes: ws.max_strikes.max(1),
            max_scrape_hashes: ws.max_scrape_hashes,
            full_scrape: ws.full_scrape,
        }
    }
}

/// What every WebTorrent connection shares. Build one per tracker with [`WsContext::new`]
/// and pass it (in an `Arc`) to every [`serve_upgrade`].
pub struct WsContext {
    pub settings: WsSettings,
    /// The main store, consulted for its access list only (so a reload applies to
    /// WebTorrent too); WebTorrent peers live in `torrents`.
    access: Arc<Store>,
    pub torrents: WebTorrentStore,
    pub registry: Registry,
    next_id: AtomicU64,
    open: AtomicUsize,
}

impl WsContext {
    /// The WebTorrent state for a tracker configured by `config`, sharing the access list
    /// of `store` (the tracker's main store).
    pub fn new(config: &Config, store: Arc<Store>) -> Self {
        Self {
            settings: WsSettings::from_config(config),
            access: store,
            torrents: WebTorrentStore::new(WsStoreConfig {
                shards: config.store.shards,
                peer_ttl: config.store.peer_ttl,
                torrent_ttl: config.store.torrent_ttl,
                offer_max_age: config.ws.offer_max_age,
                max_pending_offers: config.ws.max_pending_offers,
            }),
            registry: Registry::new(),
            next_id: AtomicU64::new(1),
            open: AtomicUsize::new(0),
        }
    }

    /// Whether the access list lets this torrent be announced or scraped.
    pub fn allows(&self, info_hash: &shoal_proto::InfoHash) -> bool {
        self.access.allows(info_hash)
    }

    /// WebSocket connections open right now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Expires WebTorrent peers and offers; the tracker's cleaner calls it.
    pub fn clean(&self, now: u32) -> WsCleanReport {
        self.torrents.clean(now)
    }

    /// Takes a connection slot, if one is free.
    fn admit(self: &Arc<Self>) -> Option<Admission> {
        let max = self.settings.max_connections;
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
struct Admission {
    ctx: Arc<WsContext>,
    id: u64,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.ctx.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("shoal_ws_connections").decrement(1.0);
    }
}

/// Answers a WebSocket upgrade request and runs the WebTorrent connection on `stream`
/// until it closes. Never panics on what the client sends; errors end the connection.
pub async fn serve_upgrade<S>(mut stream: S, upgrade: UpgradeRequest, ctx: Arc<WsContext>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if upgrade.sec_websocket_key.trim().is_empty() {
        let _ = stream
            .write_all(&refusal(400, "missing Sec-WebSocket-Key"))
            .await;
        return;
    }
    let Some(admission) = ctx.admit() else {
        metrics::counter!("shoal_ws_refused_total", "reason" => "max_connections").increment(1);
        let _ = stream
            .write_all(&refusal(503, "too many connections"))
            .await;
        return;
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
        upgrade.sec_websocket_key.trim().as_bytes(),
    );
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    connection::run(stream, upgrade, &ctx, admission.id).await;
    drop(admission);
}

fn refusal(status: u16, text: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}
