//! The status page: one HTML page and one script, both compiled into the binary (no CDN,
//! nothing fetched from elsewhere), and the JSON they poll (`/status.json`): an hour of
//! samples for the charts, the top torrents, and the configuration in force (with the
//! admin token blanked out).

use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::json;

use super::api::top_json;
use super::reply::{json, Body};
use super::view::TrackerView;

const HTML: &str = include_str!("status.html");
const SCRIPT: &str = include_str!("status.js");

fn with_type(body: &'static str, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::new(body.into()));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

pub fn html() -> Response<Body> {
    with_type(HTML, "text/html; charset=utf-8")
}

pub fn script() -> Response<Body> {
    with_type(SCRIPT, "text/javascript; charset=utf-8")
}

/// The configuration in force as TOML, secrets blanked.
pub fn config_text(view: &TrackerView) -> String {
    let mut c = view.config.clone();
    if !c.admin.token.is_empty() {
        c.admin.token = "(hidden)".into();
    }
    toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot show the config: {e}"))
}

pub fn data(view: &TrackerView) -> Response<Body> {
    let samples = view.samples.all();
    let points: Vec<_> = samples
        .iter()
        .map(|s| {
            json!({
                "t": s.unix,
                "udp": s.udp_rps,
                "http": s.http_rps,
                "ws": s.ws_rps,
                "seeders": s.seeders,
                "leechers": s.leechers,
                "peers_v6": s.peers_v6,
                "torrents": s.torrents,
            })
        })
        .collect();
    let latest = samples.last().cloned().unwrap_or_default();
    let mut r = json(
        StatusCode::OK,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "interval": view.config.admin.sample_interval,
            "uptime_seconds": view.started.elapsed().as_secs(),
            "samples": points,
            "top": top_json(&latest.top),
            "totals": {
                "torrents": latest.torrents,
                "seeders": latest.seeders,
                "leechers": latest.leechers,
                "peers_v4": latest.peers_v4,
                "peers_v6": latest.peers_v6,
                "ws_torrents": latest.ws_torrents,
                "ws_seeders": latest.ws_seeders,
                "ws_leechers": latest.ws_leechers,
                "ws_connections": view.ws.open_connections(),
            },
            "snapshot_age_seconds": view.snapshot_age(),
            "cluster": view.cluster_json(),
            "handover_waiting": view.handover_waiting(),
            "config": config_text(view),
        }),
    );
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
