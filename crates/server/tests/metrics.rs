//! `/metrics` is valid Prometheus text and reports what the tracker did. Its own test
//! binary: the recorder is process-wide, so one tracker at a time here (the tests take
//! [`ONE_AT_A_TIME`]) means exact figures.

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{http, temp_dir, ws, Ann, Client};
use futures_util::SinkExt;
use prometheus_parse::{Scrape, Value};
use serde_json::json;
use shoal_proto::ws::encode_binary;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};
use tokio_tungstenite::tungstenite::Message;

/// The recorder (and so every gauge a scrape sets) is shared by the process: a test runs
/// its tracker only while it holds this.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn scrape(t: &Tracker) -> Scrape {
    scrape_until(t.admin_addrs()[0], "a scrape", |_| true)
}

/// Asserts that every family in `names` has its HELP text.
fn assert_documented(s: &Scrape, names: &[&str]) {
    for name in names {
        assert!(s.docs.contains_key(*name), "no HELP for {name}");
    }
}

/// The value of the sample of `name` whose labels include `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .and_then(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(*v),
            Value::Histogram(h) => h
                .iter()
                .find(|b| b.less_than == f64::INFINITY)
                .map(|b| b.count),
            _ => None,
        })
}

#[test]
fn metrics_parse_and_count_requests_peers_and_latency() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("metrics");
    let mut c = Config::ephemeral();
    c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 1;
    c.state.file = dir.join("shoal.state");
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.sample_interval = 1;
    let t = Tracker::start(c).unwrap();
    let tracker = t.udp_addrs()[0];
    // The sampler's first sample is the baseline its rates are taken against: on a loaded
    // machine its thread can start after the traffic below, and then no later sample shows
    // a UDP rate. Wait for it (bounded) before sending anything.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = http(t.admin_addrs()[0], "GET", "/status.json", None);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if !v["samples"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "no first sample in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut client = Client::new(tracker);
    client.connect();
    let anns: Vec<Ann> = (0..30u8)
        .map(|i| Ann {
            info_hash: InfoHash([i % 3; 20]),
            peer_id: PeerId([i; 20]),
            port: 6000 + u16::from(i),
            left: if i < 3 { 0 } else { 1 },
            event: AnnounceEvent::Started,
            numwant: 10,
        })
        .collect();
    assert!(client.announce_all(&anns, 4).iter().all(|a| *a));
    for _ in 0..2 {
        client.scrape(&[InfoHash([0; 20])]).unwrap();
    }
    // One announce with a forged connection id, one datagram too short to parse.
    let good = client.cid;
    client.cid = shoal_proto::udp::ConnectionId(good.0 ^ 1);
    assert!(client.announce_all(&anns[..1], 1) == vec![false]);
    client.cid = good;
    client.socket.send_to(&[1, 2, 3], tracker).unwrap();
    // An HTTP front end counts through the facade; this stands in for it.
    metrics::counter!("shoal_requests_total", "protocol" => "http", "action" => "announce", "result" => "ok")
        .increment(5);
    // Let the sampler see the store.
    std::thread::sleep(Duration::from_millis(2500));

    let s = scrape(&t);
    let req = |action, result| {
        value(
            &s,
            "shoal_requests_total",
            &[("protocol", "udp"), ("action", action), ("result", result)],
        )
    };
    assert_eq!(req("connect", "ok"), Some(1.0));
    assert_eq!(req("announce", "ok"), Some(30.0));
    assert_eq!(req("announce", "error"), Some(0.0));
    assert_eq!(req("scrape", "ok"), Some(2.0));
    assert_eq!(
        value(
            &s,
            "shoal_requests_total",
            &[("protocol", "http"), ("action", "announce")]
        ),
        Some(5.0)
    );
    let err = |kind| {
        value(
            &s,
            "shoal_errors_total",
            &[("protocol", "udp"), ("kind", kind)],
        )
    };
    assert_eq!(err("bad_connection_id"), Some(1.0));
    assert_eq!(err("malformed"), Some(1.0));
    assert!(value(&s, "shoal_bytes_total", &[("direction", "in")]).unwrap() > 30.0 * 98.0);
    assert!(value(&s, "shoal_bytes_total", &[("direction", "out")]).unwrap() > 30.0 * 20.0);
    assert_eq!(value(&s, "shoal_torrents", &[]), Some(3.0));
    assert_eq!(value(&s, "shoal_peers", &[("kind", "seeder")]), Some(3.0));
    assert_eq!(value(&s, "shoal_peers", &[("kind", "leecher")]), Some(27.0));
    assert_eq!(
        value(&s, "shoal_peers_by_family", &[("family", "ipv4")]),
        Some(30.0)
    );
    assert_eq!(
        value(&s, "shoal_peers_by_family", &[("family", "ipv6")]),
        Some(0.0)
    );
    let batches = value(
        &s,
        "shoal_announce_duration_seconds",
        &[("protocol", "udp")],
    )
    .unwrap();
    assert!(
        (1.0..=30.0).contains(&batches),
        "{batches} batches with announces"
    );
    let age = value(&s, "shoal_snapshot_age_seconds", &[]).unwrap();
    assert!((0.0..10.0).contains(&age), "{age}");
    assert_eq!(value(&s, "shoal_handover_waiting", &[]), Some(0.0));
    // Every family has its HELP text.
    assert_documented(
        &s,
        &[
            "shoal_requests_total",
            "shoal_torrents",
            "shoal_peers",
            "shoal_announce_duration_seconds",
        ],
    );

    // The status page's data shows the same store and an HTTP rate.
    let (status, body) = http(t.admin_addrs()[0], "GET", "/status.json", None);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["totals"]["torrents"], 3);
    assert_eq!(v["top"].as_array().unwrap().len(), 3);
    let samples = v["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "{samples:?}");
    assert!(samples.iter().any(|x| x["http"].as_f64().unwrap() > 0.0));
    assert!(samples.iter().any(|x| x["udp"].as_f64().unwrap() > 0.0));
    assert!(v["config"].as_str().unwrap().contains("[state]"));
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}

/// A WebTorrent announce for torrent [1; 20] from peer [peer; 20], with these offers.
fn ws_announce(peer: u8, left: u64, offer_ids: &[u8]) -> serde_json::Value {
    ws::with_offers(
        ws::announce([1; 20], [peer; 20], Some(left), "started"),
        offer_ids,
    )
}

fn ws_answer(from: u8, to: u8, offer_id: &str) -> serde_json::Value {
    ws::answer([1; 20], [from; 20], [to; 20], offer_id)
}

/// Scrapes `/metrics` until `ok` holds (every 100 ms, for at most 2 s: the sampler takes
/// the store's figures every second), and returns that scrape.
fn scrape_until(admin: SocketAddr, what: &str, ok: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let (status, body) = http(admin, "GET", "/metrics", None);
        assert_eq!(status, 200);
        let s =
            Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text");
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: not within 2 s\n{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ws_peers(s: &Scrape) -> f64 {
    value(s, "shoal_ws_peers", &[("kind", "seeder")]).unwrap_or(0.0)
        + value(s, "shoal_ws_peers", &[("kind", "leecher")]).unwrap_or(0.0)
}

/// A counter that has not counted anything yet is absent: zero.
fn count(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    value(s, name, labels).unwrap_or(0.0)
}

fn ws_requests(s: &Scrape, action: &str, result: &str) -> f64 {
    count(
        s,
        "shoal_requests_total",
        &[("protocol", "ws"), ("action", action), ("result", result)],
    )
}

fn relayed(s: &Scrape, message: &str) -> f64 {
    count(
        s,
        "shoal_ws_relayed_total",
        &[("message", message), ("result", "ok")],
    )
}

/// Two WebTorrent clients: one offers, the other answers; a forged answer and a malformed
/// message are refused; one client leaves. `/metrics` and `/status.json` follow along.
#[test]
fn metrics_report_webtorrent_peers_connections_and_relays() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Config::ephemeral();
    c.udp.listen.clear();
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.sample_interval = 1;
    let t = Tracker::start(c).unwrap();
    let (front, admin) = (t.http_addrs()[0], t.admin_addrs()[0]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let before = scrape_until(admin, "first scrape", |_| true);
        // Every failure reason is listed before any was sent.
        for reason in shoal_server::ws::failures::REASONS {
            let series = [("reason", reason)];
            assert!(
                value(&before, "shoal_ws_failures_total", &series).is_some(),
                "{reason} not listed"
            );
        }
        let (mut a, mut b) = (ws::connect(front).await, ws::connect(front).await);
        // B is in the swarm; A announces with an offer, which goes to B; B answers.
        assert_eq!(
            ws::request(&mut b, ws_announce(2, 10, &[])).await["incomplete"],
            1
        );
        assert_eq!(
            ws::request(&mut a, ws_announce(1, 0, &[7])).await["complete"],
            1
        );
        let offer = ws::recv(&mut b).await;
        let offer_id = offer["offer_id"].as_str().unwrap().to_owned();
        assert_eq!(offer_id, encode_binary(&[7; 20]));
        ws::send(&mut b, ws_answer(2, 1, &offer_id)).await;
        assert_eq!(ws::recv(&mut a).await["answer"]["sdp"], "ans");

        let s = scrape_until(admin, "two WebTorrent peers", |s| ws_peers(s) == 2.0);
        assert_eq!(value(&s, "shoal_ws_connections", &[]), Some(2.0));
        assert_eq!(
            value(&s, "shoal_ws_peers", &[("kind", "seeder")]),
            Some(1.0)
        );
        assert_eq!(value(&s, "shoal_ws_torrents", &[]), Some(1.0));
        assert!(relayed(&s, "offer") - relayed(&before, "offer") >= 1.0);
        assert_eq!(relayed(&s, "answer") - relayed(&before, "answer"), 1.0);
        assert_eq!(ws_requests(&s, "answer", "ok"), 1.0);
        // The UDP/HTTP store's figures do not include WebTorrent peers.
        assert_eq!(value(&s, "shoal_torrents", &[]), Some(0.0));
        assert_documented(
            &s,
            &[
                "shoal_ws_peers",
                "shoal_ws_torrents",
                "shoal_ws_connections",
                "shoal_ws_relayed_total",
                "shoal_ws_failures_total",
            ],
        );
        let (status, body) = http(admin, "GET", "/status.json", None);
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let totals = &v["totals"];
        assert_eq!(
            [
                &totals["ws_torrents"],
                &totals["ws_seeders"],
                &totals["ws_leechers"],
                &totals["ws_connections"]
            ],
            [&json!(1), &json!(1), &json!(1), &json!(2)],
            "{totals}"
        );

        // An answer to an offer nobody made is refused, not relayed; so is a message
        // that is not JSON.
        let refused = ws_requests(&s, "answer", "no_such_offer");
        let malformed = ws_requests(&s, "invalid", "malformed");
        let r = ws::request(&mut b, ws_answer(2, 1, &encode_binary(&[9; 20]))).await;
        ws::assert_refused(&r, "not relayed");
        b.send(Message::text("{not json")).await.unwrap();
        assert!(ws::recv(&mut b).await["failure reason"].is_string());
        let s = scrape_until(admin, "refusals counted", |s| {
            ws_requests(s, "invalid", "malformed") > malformed
        });
        assert_eq!(ws_requests(&s, "answer", "no_such_offer"), refused + 1.0);
        assert_eq!(ws_requests(&s, "invalid", "malformed"), malformed + 1.0);
        // The two failure reasons sent, each under its reason, and no other.
        let failures =
            |s: &Scrape, reason: &str| count(s, "shoal_ws_failures_total", &[("reason", reason)]);
        for reason in shoal_server::ws::failures::REASONS {
            let sent = f64::from(u8::from(["no_such_offer", "malformed"].contains(&reason)));
            assert_eq!(
                failures(&s, reason),
                failures(&before, reason) + sent,
                "{reason}"
            );
        }
        assert_eq!(relayed(&s, "answer") - relayed(&before, "answer"), 1.0);

        // A leaves: one connection open, and its peer is gone.
        a.close(None).await.unwrap();
        drop(a);
        let s = scrape_until(admin, "A's connection and peer gone", |s| {
            value(s, "shoal_ws_connections", &[]) == Some(1.0) && ws_peers(s) == 1.0
        });
        assert_eq!(
            value(&s, "shoal_ws_peers", &[("kind", "seeder")]),
            Some(0.0)
        );
        assert!(
            count(&s, "shoal_ws_disconnects_total", &[("reason", "closed")])
                > count(
                    &before,
                    "shoal_ws_disconnects_total",
                    &[("reason", "closed")]
                )
        );
        // A counter has its HELP once it has counted.
        assert!(s.docs.contains_key("shoal_ws_disconnects_total"));
        drop(b);
    });
    drop(rt);
    t.shutdown();
}

/// Opens `n` connections to `addr`, each sending the first line of a request and no more
/// (so the tracker, once it accepted one, holds it open waiting for the rest), and sorts
/// them by what became of them: kept open, or closed as soon as accepted. The tracker sees
/// them one after another; a connection still waiting in the kernel's queue is waited for
/// (until nothing changed for a second, at most 10 s).
fn open_and_sort(addr: SocketAddr, n: usize) -> (Vec<std::net::TcpStream>, usize) {
    use std::io::{ErrorKind, Read, Write};
    let mut open: Vec<std::net::TcpStream> = (0..n)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /scrape HTTP/1.1\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            s
        })
        .collect();
    let (mut closed, mut quiet_since, started) = (0, Instant::now(), Instant::now());
    while quiet_since.elapsed() < Duration::from_secs(1) {
        assert!(started.elapsed() < Duration::from_secs(10), "never settled");
        let before = open.len();
        open.retain_mut(|s| match s.read(&mut [0u8; 64]) {
            Ok(0) => false,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => true,
            other => panic!("a held connection answered: {other:?}"),
        });
        if open.len() != before {
            closed += before - open.len();
            quiet_since = Instant::now();
        }
    }
    (open, closed)
}

/// The address after "`what` listening on http://" in `shoal`'s output.
fn listening(shoal: &common::Shoal, what: &str) -> SocketAddr {
    let line = shoal.wait_for(&format!("{what} listening on"), Duration::from_secs(5));
    let at = line.find("http://").unwrap() + "http://".len();
    line[at..].split('/').next().unwrap().parse().unwrap()
}

/// `shoal_http_connections_refused_total{reason}` in `s`.
fn refused(s: &Scrape, reason: &str) -> f64 {
    let name = "shoal_http_connections_refused_total";
    count(s, name, &[("reason", reason)])
}

/// The HTTP tracker's and the admin listener's addresses of a `shoal` process.
fn addrs(shoal: &common::Shoal) -> (SocketAddr, SocketAddr) {
    (
        listening(shoal, "HTTP tracker"),
        listening(shoal, "admin (metrics, status page, API)"),
    )
}

/// Every HTTP connection the tracker turns away is counted, by why: past
/// `http.max_connections`, and when the process has no file descriptor left for it (its
/// open-file limit below the connection cap), where it was once left waiting in the
/// kernel's queue, unserved and uncounted. Each counted exactly once: the counter equals
/// what the clients saw closed. A `shoal` process of its own for each, so that its limits
/// and its counters are its own.
#[test]
fn every_http_connection_turned_away_is_counted() {
    let dir = temp_dir("metrics-refused");
    let config = |max: usize| {
        format!(
            "workers = 1\n[udp]\nlisten = []\n\
             [http]\nlisten = [\"127.0.0.1:0\"]\nmax_connections = {max}\n\
             request_timeout_ms = 60000\nidle_timeout_ms = 60000\n\
             [state]\nfile = \"\"\n[admin]\nlisten = [\"127.0.0.1:0\"]\n"
        )
    };
    // Past the cap: 5 held, the other 7 closed at once.
    let shoal = common::Shoal::start(&dir, "capped", &config(5));
    let (http_addr, admin) = addrs(&shoal);
    let (held, closed) = open_and_sort(http_addr, 12);
    assert_eq!((held.len(), closed), (5, 7));
    drop(held);
    let s = scrape_until(admin, "a scrape", |_| true);
    assert_eq!(refused(&s, "max_connections"), 7.0);
    assert_eq!(refused(&s, "descriptors"), 0.0);
    assert_documented(&s, &["shoal_http_connections_refused_total"]);
    shoal.stop();

    // Out of descriptors long before the cap (50,000): 64 open files, 100 connections.
    let shoal = common::Shoal::start_with_open_files(&dir, "no-fds", &config(50_000), 64);
    let (http_addr, admin) = addrs(&shoal);
    let (held, closed) = open_and_sort(http_addr, 100);
    let kept = held.len();
    assert!(kept > 0 && closed > 0, "{kept} held, {closed} closed");
    drop(held);
    // The held connections' descriptors come back as the tracker reads their ends.
    let s = scrape_until(admin, "refusals counted", |s| {
        refused(s, "descriptors") > 0.0
    });
    assert_eq!(refused(&s, "descriptors"), closed as f64);
    assert_eq!(refused(&s, "max_connections"), 0.0);
    // The spare descriptor was taken back: the next connection is served.
    let (status, _) = http(http_addr, "GET", "/scrape", None);
    assert_eq!(status, 200);
    assert!(shoal.output().contains("connections are turned away"));
    shoal.stop();
    std::fs::remove_dir_all(dir).unwrap();
}

/// An HTTP announce of `peer` (from `port`) on torrent [1; 20] with passkey `key`, which
/// must be served (no peers asked for, so the body is text).
fn private_announce(at: SocketAddr, key: &str, peer: u8, port: u16, up: u64, event: &str) {
    let target = format!(
        "/{key}/announce?info_hash={}&peer_id={}&port={port}&uploaded={up}&downloaded=0\
         &left=100&event={event}&numwant=0",
        "%01".repeat(20),
        format!("%{peer:02x}").repeat(20),
    );
    let (status, body) = http(at, "GET", &target, None);
    assert!(
        status == 200 && !body.contains("failure reason"),
        "{status} {body}"
    );
}

/// `shoal_private_pending_accounts` counts every sum waiting for the database, wherever it
/// waits: user 1's client, announcing from one address, keeps its sums in its swarm slot
/// (which the gauge once left out, reading less than was pending); user 2's, seen at two
/// ports, keeps them in the ledger's map. The gauge is taken at the scrape; a flush empties both.
#[test]
fn pending_accounts_count_the_sums_in_swarm_slots_and_in_the_map() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const TOKEN: &str = "metrics-pending-token";
    let dir = temp_dir("metrics-pending");
    let t = Tracker::start(common::private_config(&dir, TOKEN)).unwrap();
    let (front, admin) = (t.http_addrs()[0], t.admin_addrs()[0]);
    let api = |method, path: &str, body: &str| {
        let (status, text) = common::http_with_body(admin, method, path, Some(TOKEN), body);
        assert_eq!(status, 200, "{method} {path}: {text}");
    };
    api("PUT", "/api/users/1", r#"{"passkey": "pendingKey1"}"#);
    api("PUT", "/api/users/2", r#"{"passkey": "pendingKey2"}"#);
    api("PUT", &format!("/api/torrents/{}", "01".repeat(20)), "{}");
    let pending = || {
        let s = scrape_until(admin, "a scrape", |_| true);
        value(&s, "shoal_private_pending_accounts", &[])
    };
    assert_eq!(pending(), Some(0.0));
    // Client 1 from one port: its record, and its sums, in its slot.
    private_announce(front, "pendingKey1", 1, 7001, 0, "started");
    assert_eq!(pending(), Some(0.0), "a baseline is no sum");
    private_announce(front, "pendingKey1", 1, 7001, 1000, "");
    assert_eq!(pending(), Some(1.0));
    // User 2's client from two ports: its record goes to the map, with its sums.
    private_announce(front, "pendingKey2", 2, 7002, 0, "started");
    private_announce(front, "pendingKey2", 2, 7003, 500, "");
    assert_eq!(pending(), Some(2.0));
    let s = scrape_until(admin, "a scrape", |_| true);
    assert_documented(&s, &["shoal_private_pending_accounts"]);
    api("POST", "/api/private/flush", "");
    assert_eq!(pending(), Some(0.0));
    // New sums in the slot after the write.
    private_announce(front, "pendingKey1", 1, 7001, 1500, "");
    assert_eq!(pending(), Some(1.0));
    t.shutdown();
    std::fs::remove_dir_all(dir).unwrap();
}
