//! The admin API, every call, against an in-process tracker: the token, the figures it
//! reports, and access-list edits that take effect on the next announce and persist.

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use common::{http, temp_dir, Ann, Client};
use serde_json::Value;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};

const TOKEN: &str = "s3cret-token-for-tests";

fn start(name: &str, mode: &str, list: &str) -> (Tracker, PathBuf) {
    let dir = temp_dir(name);
    let list_path = dir.join("access.list");
    std::fs::write(&list_path, list).unwrap();
    let token_path = dir.join("token");
    std::fs::write(&token_path, format!("{TOKEN}\n")).unwrap();
    let mut c = Config::ephemeral();
    c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 1;
    c.state.file = dir.join("shoal.state");
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.token_file = token_path;
    c.admin.sample_interval = 1;
    c.access_list.mode = serde_json::from_value(Value::String(mode.into())).unwrap();
    c.access_list.path = list_path;
    (Tracker::start(c).unwrap(), dir)
}

fn admin(t: &Tracker) -> SocketAddr {
    t.admin_addrs()[0]
}

fn call(t: &Tracker, method: &str, path: &str) -> (u16, Value) {
    let (status, body) = http(admin(t), method, path, Some(TOKEN));
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, v)
}

fn ann(info: u8, peer: u8, left: u64, port: u16) -> Ann {
    Ann {
        info_hash: InfoHash([info; 20]),
        peer_id: PeerId([peer; 20]),
        port,
        left,
        event: if left == 0 {
            AnnounceEvent::Completed
        } else {
            AnnounceEvent::Started
        },
        numwant: 50,
    }
}

#[test]
fn every_api_call_needs_the_bearer_token() {
    let (t, dir) = start("auth", "off", "");
    let hash = "01".repeat(20);
    let calls = [
        ("GET", "/api/stats".to_string()),
        ("GET", "/api/torrents?n=5".to_string()),
        ("GET", format!("/api/torrents/{hash}")),
        ("GET", "/api/access-list".to_string()),
        ("PUT", format!("/api/access-list/{hash}")),
        ("DELETE", format!("/api/access-list/{hash}")),
        ("POST", "/api/reload".to_string()),
        ("POST", "/api/snapshot".to_string()),
    ];
    for (method, path) in &calls {
        for token in [None, Some("wrong"), Some(""), Some("s3cret-token-for-test")] {
            let (status, body) = http(admin(&t), method, path, token);
            assert_eq!(status, 401, "{method} {path} with {token:?}: {body}");
            assert!(body.contains("bearer token"), "{body}");
        }
        let (status, _) = http(admin(&t), method, path, Some(TOKEN));
        assert_ne!(status, 401, "{method} {path} with the token");
    }
    // Metrics and the status page are open.
    assert_eq!(http(admin(&t), "GET", "/metrics", None).0, 200);
    assert_eq!(http(admin(&t), "GET", "/", None).0, 200);
    assert_eq!(http(admin(&t), "GET", "/status.js", None).0, 200);
    assert_eq!(http(admin(&t), "GET", "/status.json", None).0, 200);
    assert_eq!(http(admin(&t), "GET", "/nope", None).0, 404);
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn stats_torrent_and_top_report_what_was_announced() {
    let (t, dir) = start("stats", "off", "");
    let mut c = Client::new(t.udp_addrs()[0]);
    c.connect();
    // Torrent k has k peers; peer 1 of each is a seeder that completed.
    let mut anns = Vec::new();
    for k in 1..=12u8 {
        for p in 1..=k {
            anns.push(ann(k, p, if p == 1 { 0 } else { 7 }, 4000 + u16::from(p)));
        }
    }
    assert!(c.announce_all(&anns, 8).iter().all(|a| *a));

    let (status, stats) = call(&t, "GET", "/api/stats");
    assert_eq!(status, 200);
    assert_eq!(stats["torrents"], 12);
    assert_eq!(stats["peers"], 78);
    assert_eq!(stats["seeders"], 12);
    assert_eq!(stats["leechers"], 66);
    assert_eq!(stats["peers_ipv4"], 78);
    assert_eq!(stats["peers_ipv6"], 0);
    assert_eq!(stats["requests"]["udp"]["announce"], 78);
    assert_eq!(stats["requests"]["udp"]["connect"], 1);

    let (status, one) = call(&t, "GET", &format!("/api/torrents/{}", "05".repeat(20)));
    assert_eq!(status, 200);
    assert_eq!(one["info_hash"], "05".repeat(20));
    assert_eq!(
        (
            one["seeders"].clone(),
            one["leechers"].clone(),
            one["completed"].clone()
        ),
        (1.into(), 4.into(), 1.into())
    );
    let peers = one["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 5);
    let mut addrs: Vec<&str> = peers.iter().map(|p| p["addr"].as_str().unwrap()).collect();
    addrs.sort();
    assert_eq!(
        addrs,
        [
            "127.0.0.1:4001",
            "127.0.0.1:4002",
            "127.0.0.1:4003",
            "127.0.0.1:4004",
            "127.0.0.1:4005"
        ]
    );
    let seeder = peers.iter().find(|p| p["seeder"] == true).unwrap();
    assert_eq!(seeder["peer_id"], "01".repeat(20));
    assert!(seeder["expires_in"].as_u64().unwrap() > 3000);

    assert_eq!(
        call(&t, "GET", &format!("/api/torrents/{}", "ee".repeat(20))).0,
        404
    );
    assert_eq!(call(&t, "GET", "/api/torrents/xyz").0, 400);

    let (status, top) = call(&t, "GET", "/api/torrents?n=3");
    assert_eq!(status, 200);
    let ranked: Vec<(String, u64)> = top["torrents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["info_hash"].as_str().unwrap().to_string(),
                t["peers"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ranked,
        vec![
            ("0c".repeat(20), 12),
            ("0b".repeat(20), 11),
            ("0a".repeat(20), 10)
        ]
    );
    assert_eq!(call(&t, "GET", "/api/torrents?n=0").0, 400);
    assert_eq!(call(&t, "GET", "/api/torrents?n=abc").0, 400);
    assert_eq!(call(&t, "GET", "/api/torrents?x=1").0, 400);
    assert_eq!(call(&t, "DELETE", "/api/stats").0, 405);
    assert_eq!(call(&t, "GET", "/api/nothing").0, 404);

    // A snapshot on demand holds what was announced.
    let (status, snap) = call(&t, "POST", "/api/snapshot");
    assert_eq!(status, 200, "{snap}");
    assert_eq!(snap["peers"], 78);
    assert!(dir.join("shoal.state").exists());
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn access_list_edits_apply_to_the_next_announce_and_are_persisted() {
    let allowed = "aa".repeat(20);
    let (t, dir) = start(
        "access",
        "allow",
        &format!("# allowed torrents\n{allowed}\n"),
    );
    let list_path = dir.join("access.list");
    let mut c = Client::new(t.udp_addrs()[0]);
    c.connect();
    let b = 0xbb;
    assert!(
        c.announce(&ann(0xaa, 1, 5, 5000)).is_some(),
        "listed: served"
    );
    assert!(
        c.announce(&ann(b, 1, 5, 5000)).is_none(),
        "not listed: error reply"
    );

    let (status, v) = call(&t, "PUT", &format!("/api/access-list/{}", "bb".repeat(20)));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["changed"], true);
    assert_eq!(v["count"], 2);
    assert!(
        c.announce(&ann(b, 1, 5, 5000)).is_some(),
        "added: served at once"
    );
    let file = std::fs::read_to_string(&list_path).unwrap();
    assert!(
        file.starts_with("# allowed torrents\n"),
        "comments kept: {file}"
    );
    assert!(file.contains(&"bb".repeat(20)));
    // Adding again changes nothing.
    assert_eq!(
        call(&t, "PUT", &format!("/api/access-list/{}", "BB".repeat(20))).1["changed"],
        false
    );

    let (status, list) = call(&t, "GET", "/api/access-list");
    assert_eq!(status, 200);
    assert_eq!(list["mode"], "allow");
    assert_eq!(
        list["hashes"],
        serde_json::json!(["aa".repeat(20), "bb".repeat(20)])
    );

    let (status, v) = call(&t, "DELETE", &format!("/api/access-list/{allowed}"));
    assert_eq!(status, 200);
    assert_eq!(v["changed"], true);
    assert!(
        c.announce(&ann(0xaa, 1, 5, 5000)).is_none(),
        "removed: refused at once"
    );
    assert!(!std::fs::read_to_string(&list_path)
        .unwrap()
        .contains(&allowed));
    assert_eq!(call(&t, "PUT", "/api/access-list/123").0, 400);

    // Reload reads the file as edited by hand.
    std::fs::write(&list_path, format!("{allowed}\n")).unwrap();
    let (status, v) = call(&t, "POST", "/api/reload");
    assert_eq!(status, 200, "{v}");
    assert!(
        v["reloaded"][0].as_str().unwrap().contains("1 info hashes"),
        "{v}"
    );
    assert!(c.announce(&ann(0xaa, 1, 5, 5000)).is_some());
    assert!(c.announce(&ann(b, 2, 5, 5000)).is_none());
    // A broken file is refused and the list in force stays.
    std::fs::write(&list_path, "not a hash\n").unwrap();
    let (status, v) = call(&t, "POST", "/api/reload");
    assert_eq!(status, 500);
    assert!(v["error"].as_str().unwrap().contains("line 1"), "{v}");
    assert!(c.announce(&ann(0xaa, 1, 5, 5000)).is_some());

    // The token file is re-read on reload.
    std::fs::write(&list_path, format!("{allowed}\n")).unwrap();
    std::fs::write(dir.join("token"), "next-token\n").unwrap();
    assert_eq!(call(&t, "POST", "/api/reload").0, 200);
    assert_eq!(http(admin(&t), "GET", "/api/stats", Some(TOKEN)).0, 401);
    assert_eq!(
        http(admin(&t), "GET", "/api/stats", Some("next-token")).0,
        200
    );
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn access_list_edits_are_refused_when_the_list_is_off() {
    let (t, dir) = start("off", "off", "");
    let (status, v) = call(&t, "PUT", &format!("/api/access-list/{}", "aa".repeat(20)));
    assert_eq!(status, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("off"));
    std::thread::sleep(Duration::from_millis(10));
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}
