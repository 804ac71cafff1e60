//! The admin JSON API (after the bearer token was checked by the router).
//!
//! | call                              | answer                                          |
//! |-----------------------------------|-------------------------------------------------|
//! | `GET /api/stats`                  | totals, request counters, snapshot, uptime      |
//! | `GET /api/torrents?n=N`           | the N torrents with the most peers (max 1000)   |
//! | `GET /api/torrents/<info hash>`   | one torrent: figures and every peer             |
//! | `GET /api/access-list`            | mode and info hashes in force                   |
//! | `PUT /api/access-list/<hash>`     | adds a hash (to the file, then in force)        |
//! | `DELETE /api/access-list/<hash>`  | removes a hash (from the file, then in force)   |
//! | `GET /api/block-list`             | the networks blocked in force, and the file     |
//! | `PUT /api/block-list/<net>`       | blocks a network (to the file, then in force)   |
//! | `DELETE /api/block-list/<net>`    | unblocks it (from the file, then in force)      |
//! | `POST /api/reload`                | lists, token file, front ends' hooks            |
//! | `POST /api/snapshot`              | writes a snapshot now                           |
//!
//! A network in a path is written with `_` or `%2F` for its slash (`10.0.0.0_8`,
//! `10.0.0.0%2F8`), or as one address (`192.0.2.7`, `2001:db8::1`).
//!
//! Private mode's calls (users, torrents, clients, reload, flush) are in `private_api.rs`.
//!
//! Errors are JSON too: `{"error": "..."}` with a 4xx or 5xx status.

use std::net::SocketAddr;

use hyper::{Method, Response, StatusCode};
use serde_json::{json, Value};
use shoal_proto::InfoHash;

use super::private_api;
use super::reply::{json, Body, Call};
use super::samples::{survey, TopTorrent};
use super::tallies::TALLIES;
use super::view::TrackerView;
use shoal_tracker::policy::AccessMode;

/// Most torrents one top-list call returns.
const MAX_TOP: usize = 1000;

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response<Body> {
    json(status, &json!({ "error": message.to_string() }))
}

pub fn route(call: &Call, rest: &str, view: &TrackerView) -> Response<Body> {
    let m = &call.method;
    let parts: Vec<&str> = rest.split('/').collect();
    if let Some(r) = private_api::route(call, &parts, view.accounts.as_deref()) {
        return r;
    }
    match (parts.as_slice(), m) {
        (["stats"], &Method::GET) => json(StatusCode::OK, &stats(view)),
        (["torrents"], &Method::GET) => top(call, view),
        (["torrents", hash], &Method::GET) => torrent(hash, view),
        (["access-list"], &Method::GET) => access_list(view),
        (["access-list", hash], &Method::PUT) => edit(hash, true, view),
        (["access-list", hash], &Method::DELETE) => edit(hash, false, view),
        (["block-list"], &Method::GET) => block_list(view),
        (["block-list", net], &Method::PUT) => edit_block_list(net, true, view),
        (["block-list", net], &Method::DELETE) => edit_block_list(net, false, view),
        (["reload"], &Method::POST) => match view.reload.run() {
            Ok(done) => {
                for line in &done {
                    tracing::info!("{line} (admin API)");
                }
                json(StatusCode::OK, &json!({ "reloaded": done }))
            }
            Err(e) => {
                tracing::error!("reload from the admin API failed: {e:#}");
                error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"))
            }
        },
        (["snapshot"], &Method::POST) => match &view.snapshots {
            None => error(
                StatusCode::CONFLICT,
                "snapshots are off (state.file is empty)",
            ),
            Some(state) => match state.write(view.core.swarms(), false) {
                Ok(s) => json(
                    StatusCode::OK,
                    &json!({ "file": state.path(), "torrents": s.torrents, "peers": s.peers,
                             "seconds": state.last_duration().as_secs_f64() }),
                ),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")),
            },
        },
        (["stats" | "torrents" | "access-list" | "block-list" | "reload" | "snapshot", ..], _) => {
            error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here")
        }
        _ => error(StatusCode::NOT_FOUND, "no such API call"),
    }
}

fn stats(view: &TrackerView) -> Value {
    let (s, _) = survey(view.core.swarms(), 0);
    let c = view.udp_totals();
    let snapshot = view.snapshots.as_ref().map(|st| {
        let last = st.last_written_unix();
        json!({
            "file": st.path(),
            "last_written_unix": (last > 0).then_some(last),
            "age_seconds": view.snapshot_age(),
            "handover_waiting": view.handover_waiting(),
        })
    });
    json!({
        "cluster": view.cluster_json(),
        "torrents": s.torrents,
        "peers": s.seeders + s.leechers,
        "seeders": s.seeders,
        "leechers": s.leechers,
        "peers_ipv4": s.peers_v4,
        "peers_ipv6": s.peers_v6,
        "requests": {
            "udp": {
                "connect": c.connect,
                "announce": c.announce,
                "scrape": c.scrape,
                "error_replies": c.errors,
                "bad_connection_id": c.bad_connection_id,
                "expired_connection_id": c.expired_connection_id,
                "rate_limited": c.rate_limited,
                "blocked": c.blocked,
                "ipv4": c.ipv4,
                "ipv6": c.ipv6,
                "malformed": c.dropped,
                "bytes_in": c.bytes_in,
                "bytes_out": c.bytes_out,
            },
            "http": TALLIES.http.load(std::sync::atomic::Ordering::Relaxed),
            "ws": TALLIES.ws.load(std::sync::atomic::Ordering::Relaxed),
        },
        "snapshot": snapshot,
        "uptime_seconds": view.started.elapsed().as_secs(),
        "started_unix": view.started_unix,
    })
}

pub fn top_json(top: &[TopTorrent]) -> Value {
    Value::Array(
        top.iter()
            .map(|t| {
                json!({
                    "info_hash": t.info_hash.to_hex(),
                    "seeders": t.stats.seeders,
                    "leechers": t.stats.leechers,
                    "completed": t.stats.completed,
                    "peers": t.peers(),
                })
            })
            .collect(),
    )
}

fn top(call: &Call, view: &TrackerView) -> Response<Body> {
    let mut n = 10;
    for pair in call.query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("n", v)) => match v.parse::<usize>() {
                Ok(v) if (1..=MAX_TOP).contains(&v) => n = v,
                _ => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        format!("n must be a number from 1 to {MAX_TOP}"),
                    )
                }
            },
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("unknown parameter {pair:?}"),
                )
            }
        }
    }
    let (_, top) = survey(view.core.swarms(), n);
    json(StatusCode::OK, &json!({ "torrents": top_json(&top) }))
}

fn bad_hash() -> Response<Body> {
    error(
        StatusCode::BAD_REQUEST,
        "an info hash is 40 hexadecimal digits",
    )
}

fn torrent(hex: &str, view: &TrackerView) -> Response<Body> {
    let Some(info_hash) = InfoHash::from_hex(hex) else {
        return bad_hash();
    };
    let now = shoal_swarm::clock::now();
    let found = view.core.swarms().torrent_peers(&info_hash).map(|t| {
        let st = t.stats;
        let v4 = t.v4.iter().map(|p| {
            (
                p.peer_id,
                SocketAddr::V4(p.addr.addr()),
                p.seeder,
                p.expires,
            )
        });
        let v6 = t.v6.iter().map(|p| {
            (
                p.peer_id,
                SocketAddr::V6(p.addr.addr()),
                p.seeder,
                p.expires,
            )
        });
        let peers: Vec<_> = v4
            .chain(v6)
            .map(|(id, addr, seeder, expires)| peer_json(&id, addr, seeder, expires, now))
            .collect();
        json!({
            "info_hash": info_hash.to_hex(),
            "seeders": st.seeders,
            "leechers": st.leechers,
            "completed": st.completed,
            "allowed": view.core.policy().lists(&info_hash),
            "peers": peers,
        })
    });
    match found {
        Some(v) => json(StatusCode::OK, &v),
        None => error(StatusCode::NOT_FOUND, "no such torrent"),
    }
}

fn peer_json(
    peer_id: &shoal_proto::PeerId,
    addr: SocketAddr,
    seeder: bool,
    expires: u32,
    now: u32,
) -> Value {
    json!({
        "peer_id": peer_id.to_hex(),
        "addr": addr.to_string(),
        "seeder": seeder,
        "expires_in": expires.saturating_sub(now),
    })
}

fn access_list(view: &TrackerView) -> Response<Body> {
    let list = view.core.policy().access_list();
    let mut hashes: Vec<String> = list.hashes().map(|h| h.to_hex()).collect();
    hashes.sort();
    json(
        StatusCode::OK,
        &json!({
            "mode": format!("{:?}", list.mode()).to_lowercase(),
            "file": view.core.policy().access_file(),
            "hashes": hashes,
        }),
    )
}

fn edit(hex: &str, add: bool, view: &TrackerView) -> Response<Body> {
    let Some(info_hash) = InfoHash::from_hex(hex) else {
        return bad_hash();
    };
    match view.core.policy().edit_access_list(info_hash, add) {
        Ok(changed) => {
            tracing::info!(
                "access list: {} {} (admin API){}",
                if add { "added" } else { "removed" },
                info_hash,
                if changed { "" } else { ", no change" }
            );
            json(
                StatusCode::OK,
                &json!({ "info_hash": info_hash.to_hex(), "listed": add, "changed": changed,
                         "count": view.core.policy().access_list().len() }),
            )
        }
        Err(e) if view.core.policy().access_mode() == AccessMode::Off => {
            error(StatusCode::CONFLICT, format!("{e:#}"))
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")),
    }
}

fn block_list(view: &TrackerView) -> Response<Body> {
    let Some((list, file)) = view.core.policy().block_list() else {
        return no_block_list();
    };
    let nets: Vec<String> = list.nets().iter().map(ToString::to_string).collect();
    json(StatusCode::OK, &json!({ "file": file, "networks": nets }))
}

fn no_block_list() -> Response<Body> {
    error(
        StatusCode::CONFLICT,
        "there is no block list (block_list.path is empty)",
    )
}

fn edit_block_list(text: &str, add: bool, view: &TrackerView) -> Response<Body> {
    if view.core.policy().block_list().is_none() {
        return no_block_list();
    }
    let net = match shoal_tracker::policy::block_list::parse_entry(text) {
        Ok(net) => net,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("not a network (10.0.0.0_8, 10.0.0.0%2F8 or one address): {e:#}"),
            )
        }
    };
    match view.core.policy().edit_block_list(net, add) {
        Ok(changed) => {
            tracing::info!(
                "block list: {} {net} (admin API){}",
                if add { "added" } else { "removed" },
                if changed { "" } else { ", no change" }
            );
            let count = view.core.policy().block_list().map_or(0, |(l, _)| l.len());
            json(
                StatusCode::OK,
                &json!({ "network": net.to_string(), "blocked": add, "changed": changed,
                         "count": count }),
            )
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")),
    }
}
