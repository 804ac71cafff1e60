//! What every HTTP connection of every worker shares: [`HttpContext`] (the store, the
//! policy, the settings, the proxy rules, the full-scrape document, the WebTorrent state
//! for upgrades, the open-connection count, the control calls of the site in force), and
//! the [`HttpSettings`] taken from the config. Its own file so that the connection loop, the handler and the accept loop all
//! import it from a sibling, not from the module above them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::full_scrape::FullScrape;
use super::proxy_protocol::ProxyProtocol;
use super::site_call::SiteApi;
use crate::config::Config;
use crate::ws::WsContext;
use shoal_proto::forwarded::ProxyRules;
use shoal_tracker::Core;

/// Settings the connections need, copied out of the config.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    pub keep_alive: bool,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_request_bytes: usize,
    pub max_headers: usize,
    pub max_connections: usize,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
    pub interval: u32,
    pub min_interval: u32,
}

impl HttpSettings {
    pub fn from_config(c: &Config) -> Self {
        Self {
            keep_alive: c.http.keep_alive,
            idle_timeout: Duration::from_millis(c.http.idle_timeout_ms),
            request_timeout: Duration::from_millis(c.http.request_timeout_ms),
            max_request_bytes: c.http.max_request_bytes,
            max_headers: c.http.max_headers,
            max_connections: c.http.max_connections,
            allow_ip_field: c.http.allow_ip_field,
            max_scrape_hashes: c.http.max_scrape_hashes,
            interval: c.announce.interval,
            min_interval: c.announce.min_interval,
        }
    }
}

/// What every connection of every worker shares.
pub struct HttpContext {
    /// What every announce and scrape goes through.
    pub core: Arc<Core>,
    pub settings: HttpSettings,
    pub proxy: ProxyRules,
    /// Which connections begin with a PROXY header; `None` when `http.proxy_protocol` is off.
    pub proxy_protocol: Option<ProxyProtocol>,
    /// `None` when the full scrape is switched off.
    pub full_scrape: Option<FullScrape>,
    pub ws: Arc<WsContext>,
    /// Open connections, HTTP and HTTPS together.
    pub open: AtomicUsize,
    /// The control calls of the site in force, if it has any.
    pub site_api: Option<Arc<SiteApi>>,
    /// opentracker's `/stats` and `GET /` redirect (`None` in handler tests).
    pub opentracker: Option<super::stats::Surface>,
}

/// Counts one open connection until dropped.
pub struct OpenConnection(Arc<HttpContext>);

impl OpenConnection {
    /// Counts a new connection in, unless `max_connections` are open (then it is counted
    /// as refused, and the caller closes it).
    pub fn admit(ctx: &Arc<HttpContext>) -> Option<OpenConnection> {
        if ctx.open.fetch_add(1, Ordering::Relaxed) >= ctx.settings.max_connections {
            ctx.open.fetch_sub(1, Ordering::Relaxed);
            refused("max_connections");
            return None;
        }
        Some(OpenConnection(ctx.clone()))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts one connection turned away at accept, by why: `max_connections` (that many were
/// open) or `descriptors` (the process had no file descriptor left for it).
pub fn refused(reason: &'static str) {
    metrics::counter!("shoal_http_connections_refused_total", "reason" => reason).increment(1);
}
