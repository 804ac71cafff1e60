//! Private mode end to end, against an in-process tracker with its SQLite database: passkeys
//! on UDP (BEP 41), HTTP and WebTorrent; every refusal by its reason on every protocol; the
//! accounting of announces through the ledger into the database (factors, the v2 alias, a
//! snatch once); admin API edits taking effect on the next announce; and a restart that
//! loses and doubles nothing. Real clients over the same paths: tests/real_clients.

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::bencode::Fields;
use common::{http, http_with_body, http_with_headers, temp_dir, ws as wsc, Ann, Client};
use serde_json::{json, Value};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};

const TOKEN: &str = "private-mode-test-token";

fn config(dir: &Path) -> Config {
    common::private_config(dir, TOKEN)
}

struct Site {
    tracker: Tracker,
    dir: PathBuf,
}

impl Site {
    fn start(name: &str, f: impl FnOnce(&mut Config)) -> Self {
        let dir = temp_dir(name);
        Self::start_in(dir, f)
    }

    fn start_in(dir: PathBuf, f: impl FnOnce(&mut Config)) -> Self {
        let mut c = config(&dir);
        f(&mut c);
        Self {
            tracker: Tracker::start(c).unwrap(),
            dir,
        }
    }

    fn api(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let admin = self.tracker.admin_addrs()[0];
        let (status, text) = http_with_body(admin, method, path, Some(TOKEN), &body);
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (status, v)
    }

    fn ok(&self, method: &str, path: &str, body: Value) -> Value {
        let (status, v) = self.api(method, path, body);
        assert_eq!(status, 200, "{method} {path}: {v}");
        v
    }

    fn http(&self) -> SocketAddr {
        self.tracker.http_addrs()[0]
    }

    fn udp(&self) -> Client {
        let mut c = Client::new(self.tracker.udp_addrs()[0]);
        c.connect();
        c
    }

    fn metrics(&self) -> String {
        http(self.tracker.admin_addrs()[0], "GET", "/metrics", None).1
    }

    /// The user's database figures after a flush.
    fn user(&self, id: i64) -> Value {
        self.ok("POST", "/api/private/flush", Value::Null);
        self.ok("GET", &format!("/api/users/{id}"), Value::Null)
    }
}

fn ih(n: u8) -> InfoHash {
    InfoHash([n; 20])
}

fn pid(prefix: &str, n: u8) -> PeerId {
    let mut p = [n; 20];
    p[..prefix.len()].copy_from_slice(prefix.as_bytes());
    PeerId(p)
}

fn enc(b: &[u8]) -> String {
    b.iter().map(|x| format!("%{x:02x}")).collect()
}

/// One announce over HTTP to `path`, port 6881, as (info hash, peer), (uploaded,
/// downloaded, left), event; the bencoded body's failure reason, or the body.
fn http_announce(
    addr: SocketAddr,
    path: &str,
    who: (InfoHash, PeerId),
    report: (u64, u64, u64),
    event: &str,
) -> Result<Vec<u8>, String> {
    let (info_hash, peer_id) = who;
    let (uploaded, downloaded, left) = report;
    let target = format!(
        "{path}?info_hash={}&peer_id={}&port=6881&uploaded={uploaded}&downloaded={downloaded}&left={left}&event={event}&compact=1",
        enc(&info_hash.0),
        enc(&peer_id.0),
    );
    let (_, body) = http_with_headers(addr, "GET", &target, "", b"");
    let failure = common::bencode::bdecode(&body).failure();
    match failure {
        Some(reason) => Err(reason),
        None => Ok(body),
    }
}

fn users_and_torrent(site: &Site) {
    site.ok("PUT", "/api/users/1", json!({"passkey": "seederKey1"}));
    site.ok("PUT", "/api/users/2", json!({"passkey": "leecherKey2"}));
    site.ok(
        "PUT",
        "/api/users/3",
        json!({"passkey": "offKey3", "enabled": false}),
    );
    site.ok(
        "PUT",
        "/api/users/4",
        json!({"passkey": "noDl4", "can_download": false}),
    );
    site.ok(
        "PUT",
        &format!("/api/torrents/{}", ih(1).to_hex()),
        json!({}),
    );
}

#[test]
fn every_protocol_refuses_by_reason_and_counts_without_the_passkey() {
    let site = Site::start("private-refusals", |_| {});
    users_and_torrent(&site);
    site.ok("PUT", "/api/clients/-qB", Value::Null);
    let cases: [(Option<&str>, InfoHash, u64, Option<&str>); 6] = [
        (None, ih(1), 10, Some("passkey required")),
        (Some("nobodysKey"), ih(1), 10, Some("unknown passkey")),
        (Some("offKey3"), ih(1), 10, Some("account disabled")),
        (
            Some("seederKey1"),
            ih(9),
            10,
            Some("torrent not registered"),
        ),
        (Some("noDl4"), ih(1), 10, Some("downloading not allowed")),
        // Seeding stays allowed to a user who may not download.
        (Some("noDl4"), ih(1), 0, None),
    ];
    let mut udp = site.udp();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (i, (key, hash, left, want)) in cases.into_iter().enumerate() {
        let path = key.map_or("/announce".to_string(), |k| format!("/{k}/announce"));
        let peer = pid("-XX", i as u8);
        let got = http_announce(site.http(), &path, (hash, peer), (0, 0, left), "started");
        assert_eq!(got.err().as_deref(), want, "HTTP {path}");
        let ann = Ann {
            info_hash: hash,
            peer_id: peer,
            port: 6881,
            left,
            event: AnnounceEvent::Started,
            numwant: 10,
        };
        let url = key.map(|k| format!("/announce/{k}"));
        let got = udp.announce_reporting(&ann, 0, 0, url.as_deref());
        assert_eq!(got.err().as_deref(), want, "UDP {url:?}");
        let reply = rt.block_on(async {
            let mut c = wsc::connect_to(site.http(), &path).await;
            wsc::request(&mut c, wsc::announce(hash.0, peer.0, Some(left), "started")).await
        });
        assert_eq!(
            reply["failure reason"].as_str(),
            want,
            "WebTorrent {path}: {reply}"
        );
    }
    // UDP scrapes carry no passkey: refused in private mode.
    assert!(udp.scrape(&[ih(1)]).is_none());
    let metrics = site.metrics();
    for (protocol, reason) in [
        ("http", "unknown_passkey"),
        ("udp", "disabled"),
        ("ws", "no_passkey"),
    ] {
        // Other tests of this binary count into the same recorder: at least this one.
        let line =
            format!("shoal_private_refused_total{{protocol=\"{protocol}\",reason=\"{reason}\"}} ");
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    }
    for key in ["seederKey1", "nobodysKey", "offKey3", "noDl4"] {
        assert!(!metrics.contains(key), "a passkey in /metrics");
    }
}

#[test]
fn the_client_allow_list_admits_listed_prefixes_only() {
    let site = Site::start("private-clients", |c| c.private.client_allow_list = true);
    users_and_torrent(&site);
    let announce = |peer: PeerId| {
        let path = "/announce/seederKey1";
        http_announce(site.http(), path, (ih(1), peer), (0, 0, 0), "started")
    };
    assert_eq!(
        announce(pid("-qB4650-", 1)).err().as_deref(),
        Some("client not allowed")
    );
    site.ok("PUT", "/api/clients/-qB", Value::Null);
    assert!(announce(pid("-qB4650-", 1)).is_ok());
    assert_eq!(
        announce(pid("-TR300-", 2)).err().as_deref(),
        Some("client not allowed")
    );
    site.ok("DELETE", "/api/clients/-qB", Value::Null);
    assert_eq!(
        announce(pid("-qB4650-", 3)).err().as_deref(),
        Some("client not allowed")
    );
}

/// An announce over HTTP that must be admitted: (info hash, peer), (uploaded, downloaded,
/// left), event.
fn counted(site: &Site, key: &str, who: (InfoHash, PeerId), report: (u64, u64, u64), event: &str) {
    http_announce(site.http(), &format!("/{key}/announce"), who, report, event)
        .unwrap_or_else(|e| panic!("{key} {event}: refused: {e}"));
}

#[test]
fn announces_are_accounted_in_the_database_with_factors_and_the_v2_alias() {
    let site = Site::start("private-accounting", |_| {});
    users_and_torrent(&site);
    // Torrent 1 counts as is; torrent 2 is freeleech with double upload and has a v2 hash.
    site.ok(
        "PUT",
        &format!("/api/torrents/{}", ih(2).to_hex()),
        json!({"download_factor": 0.0, "upload_factor": 2.0, "v2": ih(22).to_hex()}),
    );
    let seeder = ("seederKey1", pid("-qB", 1));
    let leecher = ("leecherKey2", pid("-TR", 2));
    // Torrent 1: the leecher reports 1000, then less (500: counts nothing, and is no
    // restart without `started`), then 3500: 3500 in all; the seeder sends 4500.
    for ((key, peer), report, event) in [
        (seeder, (0, 0, 0), "started"),
        (leecher, (0, 0, 5000), "started"),
        (leecher, (0, 1000, 4000), ""),
        (leecher, (0, 500, 3500), ""),
        (leecher, (0, 3500, 0), "completed"),
        (leecher, (0, 3500, 0), "completed"),
        (seeder, (4500, 0, 0), "stopped"),
    ] {
        counted(&site, key, (ih(1), peer), report, event);
    }
    // Torrent 2 announced under its v2 hash over UDP: the same swarm as its v1 hash.
    let mut udp = site.udp();
    let mut over_udp = |(key, peer): (&str, PeerId), hash, report: (u64, u64, u64), event| {
        let (uploaded, downloaded, left) = report;
        let ann = Ann {
            info_hash: hash,
            peer_id: peer,
            port: 7000 + u16::from(peer.0[19]),
            left,
            event,
            numwant: 10,
        };
        let url = format!("/{key}/announce");
        udp.announce_reporting(&ann, uploaded, downloaded, Some(&url))
            .unwrap()
    };
    over_udp(seeder, ih(2), (0, 0, 0), AnnounceEvent::Started);
    let (leechers, seeders, ports) = over_udp(leecher, ih(22), (0, 0, 800), AnnounceEvent::Started);
    assert_eq!(
        (seeders, leechers, ports),
        (1, 1, vec![7001]),
        "v2 joins the v1 swarm"
    );
    over_udp(leecher, ih(22), (0, 800, 0), AnnounceEvent::Completed);
    over_udp(seeder, ih(2), (800, 0, 0), AnnounceEvent::None);

    let l = site.user(2);
    assert_eq!(l["downloaded"], 3500, "{l}");
    assert_eq!(l["completed"], 2, "{l}");
    let rows = l["torrents"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "one row per torrent, v2 counted on v1: {l}");
    let row2 = rows
        .iter()
        .find(|r| r["info_hash"] == ih(2).to_hex())
        .unwrap();
    assert_eq!(row2["downloaded"], 0, "freeleech: {l}");
    assert!(row2["completed_at"].is_number(), "{l}");
    let s = site.user(1);
    assert_eq!(s["uploaded"], 4500 + 2 * 800, "{s}");
    assert_eq!(s["downloaded"], 0, "{s}");
    // A second flush writes nothing again.
    assert_eq!(site.user(1), s);
    let (status, _) = site.api("GET", "/api/users/99", Value::Null);
    assert_eq!(status, 404);
}

#[test]
fn admin_edits_take_effect_on_the_next_announce_and_reload_reads_the_database() {
    let site = Site::start("private-edits", |_| {});
    users_and_torrent(&site);
    let go = |key: &str, n: u8| {
        let path = format!("/announce/{key}");
        http_announce(
            site.http(),
            &path,
            (ih(1), pid("-qB", n)),
            (0, 0, 0),
            "started",
        )
        .err()
    };
    assert_eq!(go("seederKey1", 1), None);
    site.ok("PUT", "/api/users/1", json!({"enabled": false}));
    assert_eq!(go("seederKey1", 1).as_deref(), Some("account disabled"));
    // A new passkey replaces the old one; the other settings stay.
    site.ok(
        "PUT",
        "/api/users/1",
        json!({"passkey": "newKey1", "enabled": true}),
    );
    assert_eq!(go("seederKey1", 1).as_deref(), Some("unknown passkey"));
    assert_eq!(go("newKey1", 1), None);
    site.ok(
        "DELETE",
        &format!("/api/torrents/{}", ih(1).to_hex()),
        Value::Null,
    );
    assert_eq!(go("newKey1", 1).as_deref(), Some("torrent not registered"));
    site.ok("DELETE", "/api/users/1", Value::Null);
    assert_eq!(go("newKey1", 1).as_deref(), Some("unknown passkey"));
    let (status, v) = site.api("PUT", "/api/users/5", json!({"enabled": true}));
    assert_eq!(status, 400, "a new user needs a passkey: {v}");
    let (status, _) = site.api("PUT", "/api/users/5", json!({"passkey": "has space"}));
    assert_eq!(status, 400);
    let (status, v) = site.api("PUT", "/api/users/6", json!({"passkey": "leecherKey2"}));
    assert_eq!(status, 409, "a passkey another user holds: {v}");

    // A site that writes the tables itself, then asks for a reload.
    let url = format!("sqlite://{}", site.dir.join("shoal.db").display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = shoal_accounts::Database::connect(&url).await.unwrap();
        db.put_user(&shoal_accounts::User {
            id: 7,
            passkey: "writtenBySite7".into(),
            enabled: true,
            can_download: true,
            download_factor: 1.0,
            upload_factor: 1.0,
        })
        .await
        .unwrap();
        db.put_torrent(&shoal_accounts::Torrent {
            id: None,
            info_hash: ih(1).0,
            info_hash_v2: None,
            download_factor: 1.0,
            upload_factor: 1.0,
        })
        .await
        .unwrap();
        db.close().await;
    });
    assert_eq!(go("writtenBySite7", 2).as_deref(), Some("unknown passkey"));
    let v = site.ok("POST", "/api/private/reload", Value::Null);
    assert_eq!(v["users"], 4, "users 2, 3, 4 and 7: {v}");
    assert_eq!(go("writtenBySite7", 2), None);
}

#[test]
fn a_restart_loses_nothing_and_counts_nothing_twice() {
    let site = Site::start("private-restart", |_| {});
    users_and_torrent(&site);
    let leech = |site: &Site, report, event| {
        counted(site, "leecherKey2", (ih(1), pid("-TR", 2)), report, event);
    };
    leech(&site, (0, 0, 9000), "started");
    leech(&site, (0, 2000, 7000), "");
    let dir = site.dir.clone();
    // Stopping writes the pending sums and keeps the client's counters in the ledger file.
    site.tracker.shutdown();
    assert!(dir.join("shoal.state.ledger").exists());
    let site = Site::start_in(dir.clone(), |_| {});
    // Not a `started`: without the saved counters this would only set a baseline and the
    // 3000 bytes moved across the restart would be lost.
    leech(&site, (0, 5000, 4000), "");
    let l = site.user(2);
    assert_eq!(l["downloaded"], 5000, "{l}");
    assert!(
        !dir.join("shoal.state.ledger").exists(),
        "deleted once what it restored is written"
    );
    // Counted once: a flush after another restart adds nothing.
    site.tracker.shutdown();
    let site = Site::start_in(dir, |_| {});
    assert_eq!(site.user(2)["downloaded"], 5000);
}

#[test]
fn open_mode_keeps_the_private_api_off() {
    let site = Site::start("private-off", |c| c.private.enabled = false);
    let (status, v) = site.api("PUT", "/api/users/1", json!({"passkey": "k"}));
    assert_eq!(status, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("private mode is off"));
    // Open mode serves any passkey path, as before.
    let path = "/whatever/announce";
    assert!(http_announce(
        site.http(),
        path,
        (ih(1), pid("-qB", 1)),
        (0, 0, 0),
        "started"
    )
    .is_ok());
}
