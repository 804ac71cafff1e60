//! The HTTP and WebTorrent generators against tiny in-test trackers that count what they
//! answer: the bench's counts must agree with the tracker's, and relayed offers must be
//! answered. They also record the paths asked for (HTTP request lines, WebSocket upgrade
//! paths), where the load of a private tracker carries its passkeys.

#![forbid(unsafe_code)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use common::{PasskeysFile, KEYS};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use shoal_bench::stats::Summary;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser)]
struct HttpCli {
    #[command(flatten)]
    args: shoal_bench::http::HttpArgs,
}

#[derive(Parser)]
struct WsCli {
    #[command(flatten)]
    args: shoal_bench::ws::WsArgs,
}

/// How a fake HTTP tracker frames its answers.
#[derive(Clone, Copy, PartialEq)]
enum Framing {
    /// `Content-Length`, connection kept open.
    KeepAlive,
    /// `Content-Length` and no `Connection: close`, yet the connection is closed after
    /// each answer, like opentracker.
    CloseAfterEach,
    /// `Transfer-Encoding: chunked`: several chunks, one with an extension, a trailer.
    Chunked,
    /// `Transfer-Encoding: chunked` with a chunk size that is not hex (connection kept).
    BadChunkSize,
}

/// The whole answer to a request whose head is `head`.
fn answer(head: &str, framing: Framing) -> Vec<u8> {
    let path = request_path(head);
    // `/<passkey>/scrape`, `/scrape`, UNIT3D's form `/scrape/<passkey>`, or NexusPHP's
    // `/scrape.php` (the key in the query).
    let scrape = path.ends_with("/scrape") || path.starts_with("/scrape/");
    let body: &[u8] = if scrape || path == "/scrape.php" {
        b"d5:filesdee"
    } else {
        b"d8:intervali1800e5:peers6:\x7f\0\0\x01\x1a\xe1e"
    };
    match framing {
        Framing::KeepAlive | Framing::CloseAfterEach => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            [head.as_bytes(), body].concat()
        }
        Framing::Chunked => {
            let mut resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for (i, chunk) in body.chunks(4).enumerate() {
                let ext = if i == 1 { ";name=value" } else { "" };
                resp.extend_from_slice(format!("{:X}{ext}\r\n", chunk.len()).as_bytes());
                resp.extend_from_slice(chunk);
                resp.extend_from_slice(b"\r\n");
            }
            resp.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
            resp
        }
        Framing::BadChunkSize => {
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
                .to_vec()
        }
    }
}

/// The path of a request head's target, without its query.
fn request_path(head: &str) -> &str {
    let target = head.split(' ').nth(1).unwrap_or("");
    target.split('?').next().unwrap_or("")
}

/// What a fake HTTP tracker did: answers sent, and the request heads it read.
#[derive(Default)]
struct Served {
    answers: AtomicU64,
    heads: Mutex<Vec<String>>,
}

/// An HTTP tracker on 127.0.0.1:0 answering every request with one peer, framed as
/// `framing` says, counting its answers.
fn http_tracker(
    rt: &tokio::runtime::Runtime,
    framing: Framing,
) -> (std::net::SocketAddr, Arc<Served>) {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(Served::default());
    let c = count.clone();
    rt.spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let c = c.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        if s.write_all(&answer(&head, framing)).await.is_err() {
                            return;
                        }
                        c.answers.fetch_add(1, Ordering::Relaxed);
                        c.heads.lock().unwrap().push(head);
                        if framing == Framing::CloseAfterEach {
                            return;
                        }
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, count)
}

/// Flags for a 1 s run (no warm-up) of `connections` connections to `target`, then `extra`.
fn load_flags<'a>(target: &'a str, connections: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "t",
        "--quiet",
        "--target",
        target,
        "--warmup",
        "0s",
        "--duration",
        "1s",
        "--connections",
        connections,
    ];
    flags.extend_from_slice(extra);
    flags
}

/// Runs `shoal-bench http` for 1 s with 4 connections, announces and scrapes, against a
/// tracker framing its answers as `framing` says; the run's figures and the answers the
/// tracker sent.
fn http_run(framing: Framing) -> (Summary, u64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, count) = http_tracker(&rt, framing);
    let target = format!("http://{addr}/announce");
    let args = HttpCli::parse_from(load_flags(&target, "4", &["--weight-scrape", "1"])).args;
    let r = shoal_bench::http::run(&args).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    (r.summary, count.answers.load(Ordering::Relaxed))
}

#[test]
fn http_counts_match_the_tracker() {
    let (s, served) = http_run(Framing::KeepAlive);
    let counted = s.ops["announce"].responses + s.ops["scrape"].responses;
    assert!(counted > 100, "{s:?}");
    // Only requests in flight at the end (one per connection) may differ.
    assert!(
        served.abs_diff(counted) <= 4,
        "served {served}, counted {counted}"
    );
    assert_eq!(s.total_errors(), 0, "{:?}", s.errors);
    assert_eq!(s.peers_received, s.ops["announce"].responses);
    // Four connections, kept alive: four TCP connects, none closed by the tracker.
    assert_eq!(s.ops["connect"].responses, 4);
    assert_eq!(s.reconnects, 0);
}

#[test]
fn http_retries_on_a_new_connection_when_the_tracker_closed_the_idle_one() {
    let (s, served) = http_run(Framing::CloseAfterEach);
    assert_eq!(s.total_errors(), 0, "{:?}", s.errors);
    assert!(s.responses > 20, "{s:?}");
    // Every request after a connection's first found it closed and was sent again.
    assert!(s.reconnects > 0, "{s:?}");
    assert!(s.responses.abs_diff(s.reconnects) <= 4, "{s:?}");
    assert!(s.ops["connect"].responses >= s.reconnects);
    assert!(served.abs_diff(s.responses) <= 4, "served {served}, {s:?}");
}

#[test]
fn http_reads_chunked_answers() {
    let (s, served) = http_run(Framing::Chunked);
    assert_eq!(s.total_errors(), 0, "{:?}", s.errors);
    assert!(s.responses > 100, "{s:?}");
    assert!(served.abs_diff(s.responses) <= 4, "served {served}, {s:?}");
    // The de-chunked body was checked: one compact peer per announce.
    assert_eq!(s.peers_received, s.ops["announce"].responses);
    assert_eq!(
        s.ops["connect"].responses, 4,
        "chunked answers keep the connection"
    );
}

#[test]
fn http_counts_a_malformed_chunk_size_as_an_invalid_response() {
    let (s, served) = http_run(Framing::BadChunkSize);
    assert_eq!(s.responses, 0, "{s:?}");
    let invalid = s.errors["invalid_response"];
    assert!(invalid > 20, "{:?}", s.errors);
    // Not waited on (no timeouts), not taken for a broken connection.
    assert_eq!(s.total_errors(), invalid, "{:?}", s.errors);
    assert!(served.abs_diff(invalid) <= 4, "served {served}, {s:?}");
}

#[test]
fn http_without_keep_alive_reconnects_every_time() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, _count) = http_tracker(&rt, Framing::KeepAlive);
    let target = format!("http://{addr}/announce");
    let flags = load_flags(&target, "2", &["--no-keep-alive", "--source-ips", "4"]);
    let args = HttpCli::parse_from(flags).args;
    let r = shoal_bench::http::run(&args).unwrap();
    let s = &r.summary;
    let requests = s.ops["announce"].responses + s.ops["scrape"].responses;
    assert!(requests > 20);
    assert_eq!(
        s.responses, requests,
        "TCP connects are not tracker responses"
    );
    assert!(s.ops["connect"].responses.abs_diff(requests) <= 2, "{s:?}");
}

/// A WebTorrent tracker that answers each announce and relays one offer back to the
/// announcing connection, counting answers to those offers.
/// The upgrade path of each connection is recorded in the returned list.
#[allow(clippy::type_complexity)]
fn ws_tracker(
    rt: &tokio::runtime::Runtime,
) -> (
    std::net::SocketAddr,
    Arc<[AtomicU64; 3]>,
    Arc<Mutex<Vec<String>>>,
) {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let c = counts.clone();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let p = paths.clone();
    rt.spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else { return };
            let (c, p) = (c.clone(), p.clone());
            tokio::spawn(async move {
                // The callback's type is tungstenite's, large error and all.
                #[allow(clippy::result_large_err)]
                let record = |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                    let target = req.uri().path_and_query().map_or("", |t| t.as_str());
                    p.lock().unwrap().push(target.to_string());
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(s, record).await else { return };
                while let Some(Ok(Message::Text(t))) = ws.next().await {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v.get("answer").is_some() {
                        c[2].fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if v["action"] == "scrape" {
                        let _ = ws.send(Message::Text(json!({"action": "scrape", "files": {}}).to_string().into())).await;
                        continue;
                    }
                    let ih = v["info_hash"].clone();
                    if v.get("offers").is_some_and(|o| !o.as_array().unwrap().is_empty()) {
                        let offer = json!({"action": "announce", "info_hash": ih, "peer_id": "x".repeat(20),
                            "offer_id": "o".repeat(20), "offer": {"type": "offer", "sdp": "v=0"}});
                        let _ = ws.send(Message::Text(offer.to_string().into())).await;
                        c[1].fetch_add(1, Ordering::Relaxed);
                    }
                    let resp = json!({"action": "announce", "info_hash": ih, "complete": 1, "incomplete": 1, "interval": 120});
                    let _ = ws.send(Message::Text(resp.to_string().into())).await;
                    c[0].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    (addr, counts, paths)
}

#[test]
fn ws_answers_relayed_offers_and_counts_match() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, counts, _) = ws_tracker(&rt);
    let target = format!("ws://{addr}/");
    let args = WsCli::parse_from(load_flags(&target, "4", &["--weight-scrape", "0"])).args;
    let r = shoal_bench::ws::run(&args).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let s = &r.summary;
    let announces = counts[0].load(Ordering::Relaxed);
    let offers = counts[1].load(Ordering::Relaxed);
    let answers = counts[2].load(Ordering::Relaxed);
    let counted = s.ops["announce"].responses;
    assert!(counted > 50, "{s:?}");
    assert!(
        announces.abs_diff(counted) <= 4,
        "tracker {announces}, bench {counted}"
    );
    assert!(offers.abs_diff(s.extra["offers_received"]) <= 4);
    assert!(
        answers.abs_diff(s.extra["answers_sent"]) <= 4,
        "{answers} {:?}",
        s.extra
    );
    assert_eq!(s.total_errors(), 0, "{:?}", s.errors);
}

/// The passkeys file of these tests: [`KEYS`], with a comment, a blank line and blanks
/// around a key.
const KEYS_TEXT: &str = "# three users\nkey-zero\n\nkey.one\n  key_two\n";

/// Runs `shoal-bench http` for 1 s with 4 connections to `path` on a fresh tracker, with a
/// passkeys file of [`KEYS`], then `extra`; the run's figures, once it counted no error,
/// and the request heads the tracker read.
fn http_heads_with_keys(name: &str, path: &str, extra: &[&str]) -> (Summary, Vec<String>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, served) = http_tracker(&rt, Framing::KeepAlive);
    let keys = PasskeysFile::new(name, KEYS_TEXT);
    let target = format!("http://{addr}{path}");
    let mut flags = vec!["--passkeys", keys.path()];
    flags.extend_from_slice(extra);
    let args = HttpCli::parse_from(load_flags(&target, "4", &flags)).args;
    let r = shoal_bench::http::run(&args).unwrap();
    assert_eq!(r.summary.total_errors(), 0, "{:?}", r.summary.errors);
    let heads = served.heads.lock().unwrap().clone();
    (r.summary, heads)
}

#[test]
fn http_requests_carry_their_peers_passkeys_in_the_path() {
    let extra = ["--weight-scrape", "1", "--peers", "30"];
    let (summary, heads) = http_heads_with_keys("http-keys", "/ignored/announce", &extra);
    assert!(summary.ops["scrape"].responses > 0);
    let mut peers = std::collections::BTreeSet::new();
    for head in &heads {
        let path = request_path(head);
        let (key, action) = path[1..].split_once('/').expect("/<passkey>/<action>");
        assert!(KEYS.contains(&key), "{head}");
        if action == "scrape" {
            continue;
        }
        assert_eq!(action, "announce", "{head}");
        // Simulated peer i (the last six digits of its id, percent-encoded digits are
        // themselves) always uses key i mod 3.
        let at = head.find("&peer_id=").unwrap() + "&peer_id=".len();
        let i: usize = head[at + 14..at + 20].parse().unwrap();
        assert_eq!(key, KEYS[i % 3], "{head}");
        peers.insert(i);
    }
    assert_eq!(peers.len(), 30, "every peer announced");
}

#[test]
fn http_passkey_path_and_user_agent_go_where_the_flags_say() {
    let extra = [
        "--weight-scrape",
        "1",
        "--passkey-path",
        "/announce/{passkey}",
        "--user-agent",
        "qBittorrent/4.6.5",
    ];
    let (_, heads) = http_heads_with_keys("http-unit3d", "/announce", &extra);
    let (mut announces, mut scrapes) = (0, 0);
    for head in &heads {
        let (action, key) = request_path(head)[1..]
            .split_once('/')
            .expect("/<action>/<passkey>");
        assert!(KEYS.contains(&key), "{head}");
        match action {
            "announce" => announces += 1,
            "scrape" => scrapes += 1,
            _ => panic!("{head}"),
        }
        let agents: Vec<&str> = head
            .lines()
            .filter_map(|l| l.strip_prefix("User-Agent: "))
            .collect();
        assert_eq!(agents, ["qBittorrent/4.6.5"], "{head}");
    }
    assert!(announces > 0 && scrapes > 0, "{announces} {scrapes}");
    // Without the flag, the bench names itself.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, served) = http_tracker(&rt, Framing::KeepAlive);
    let target = format!("http://{addr}/announce");
    let args = HttpCli::parse_from(load_flags(&target, "1", &[])).args;
    shoal_bench::http::run(&args).unwrap();
    let heads = served.heads.lock().unwrap().clone();
    assert!(!heads.is_empty());
    assert!(heads
        .iter()
        .all(|h| h.contains("\r\nUser-Agent: shoal-bench\r\n")));
}

#[test]
fn http_passkey_in_the_query_is_followed_by_the_parameters() {
    let extra = [
        "--weight-scrape",
        "1",
        "--passkey-path",
        "/announce.php?passkey={passkey}",
    ];
    let (summary, heads) = http_heads_with_keys("http-query", "/announce", &extra);
    assert!(summary.ops["scrape"].responses > 0 && summary.ops["announce"].responses > 0);
    for head in &heads {
        let target = head.split(' ').nth(1).unwrap_or("");
        let (path, query) = target.split_once('?').expect("a query");
        assert!(matches!(path, "/announce.php" | "/scrape.php"), "{head}");
        let (key, rest) = query
            .strip_prefix("passkey=")
            .and_then(|q| q.split_once('&'))
            .expect("passkey=<key>&...");
        assert!(KEYS.contains(&key), "{head}");
        assert!(rest.starts_with("info_hash="), "{head}");
        assert!(!rest.contains('?'), "{head}");
    }
}

#[test]
fn a_bad_user_agent_or_passkey_path_stops_before_the_run() {
    let flags = load_flags("http://127.0.0.1:1/", "1", &["--user-agent", ""]);
    let Err(e) = HttpCli::try_parse_from(flags) else {
        panic!("an empty agent is refused")
    };
    let e = e.to_string();
    assert!(e.contains("user agent"), "{e}");
    let keys = PasskeysFile::new("http-bad-path", KEYS_TEXT);
    let extra = ["--passkeys", keys.path(), "--passkey-path", "/announce"];
    let args = HttpCli::parse_from(load_flags("http://127.0.0.1:1/", "1", &extra)).args;
    let Err(e) = shoal_bench::http::run(&args) else {
        panic!("a passkey path without {{passkey}} is refused")
    };
    let e = format!("{e:#}");
    assert!(
        e.contains("--passkey-path") && e.contains("{passkey}"),
        "{e}"
    );
}

/// Runs `shoal-bench ws` for 1 s with `connections` connections on a fresh tracker, with a
/// passkeys file of [`KEYS`], then `extra`; once the run counted no error, the announces
/// the tracker answered and the upgrade paths it saw, sorted.
fn ws_paths_with_keys(name: &str, connections: &str, extra: &[&str]) -> (u64, Vec<String>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, counts, paths) = ws_tracker(&rt);
    let keys = PasskeysFile::new(name, KEYS_TEXT);
    let target = format!("ws://{addr}/");
    let mut flags = vec!["--passkeys", keys.path()];
    flags.extend_from_slice(extra);
    let args = WsCli::parse_from(load_flags(&target, connections, &flags)).args;
    let r = shoal_bench::ws::run(&args).unwrap();
    let announces = counts[0].load(Ordering::Relaxed);
    assert_eq!(r.summary.total_errors(), 0, "{:?}", r.summary.errors);
    let mut paths = paths.lock().unwrap().clone();
    paths.sort();
    (announces, paths)
}

#[test]
fn ws_connections_carry_one_passkey_each_in_the_url() {
    let (announces, paths) = ws_paths_with_keys("ws-keys", "4", &["--weight-scrape", "1"]);
    assert!(announces > 0);
    // Connection k uses key k mod 3: four connections, the first key twice.
    let want = [
        "/key-zero/announce",
        "/key-zero/announce",
        "/key.one/announce",
        "/key_two/announce",
    ];
    assert_eq!(paths, want);
}

#[test]
fn ws_urls_follow_the_passkey_path() {
    // UNIT3D's form, and NexusPHP's: the key in the query.
    for (name, template, before) in [
        ("ws-unit3d", "/announce/{passkey}", "/announce/"),
        (
            "ws-query",
            "/announce.php?passkey={passkey}",
            "/announce.php?passkey=",
        ),
    ] {
        let (_, paths) = ws_paths_with_keys(name, "3", &["--passkey-path", template]);
        let want: Vec<String> = ["key-zero", "key.one", "key_two"]
            .iter()
            .map(|k| format!("{before}{k}"))
            .collect();
        assert_eq!(paths, want);
    }
}
