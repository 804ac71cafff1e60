//! `/metrics` is valid Prometheus text and reports what the tracker did. Its own test
//! binary: the recorder is process-wide, so one tracker here means exact figures.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{http, temp_dir, Ann, Client};
use prometheus_parse::{Scrape, Value};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};

fn scrape(t: &Tracker) -> Scrape {
    let (status, body) = http(t.admin_addrs()[0], "GET", "/metrics", None);
    assert_eq!(status, 200);
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text")
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
    let dir = temp_dir("metrics");
    let mut c = Config::ephemeral();
    c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 1;
    c.state.file = dir.join("shoal.state");
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.sample_interval = 1;
    let t = Tracker::start(c).unwrap();
    let tracker = t.udp_addrs()[0];

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
    let families: HashMap<_, _> = s.docs.iter().collect();
    for name in [
        "shoal_requests_total",
        "shoal_torrents",
        "shoal_peers",
        "shoal_announce_duration_seconds",
    ] {
        assert!(
            families.contains_key(&name.to_string()),
            "no HELP for {name}"
        );
    }

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
