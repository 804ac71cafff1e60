//! The HTTP and HTTPS tracker over real loopback sockets, started in-process on port 0.
//!
//! Clients here are plain blocking sockets writing HTTP by hand, so that every byte the
//! tracker gets is under the test's control (slow clients, oversized heads, pipelining,
//! garbage). Responses are decoded with shoal-proto's strict bencode reader and must be
//! canonical (tests/common/bencode.rs).

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::bencode::{bdecode, Fields};
use common::store::add_peer;
use common::temp_dir;
use shoal_proto::bencode::Value;
use shoal_proto::http::percent_encode_all;
use shoal_proto::udp::{
    AnnounceRequest as UdpAnnounce, ConnectRequest, ConnectionId, Request as UdpRequest,
    Response as UdpResponse, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::{Config, Tracker};

// ---------------------------------------------------------------------------------------
// Helpers

fn config() -> Config {
    let mut c = Config::ephemeral();
    c.udp.listen.clear();
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 2;
    c
}

fn start(f: impl FnOnce(&mut Config)) -> Tracker {
    let mut c = config();
    f(&mut c);
    Tracker::start(c).unwrap()
}

fn http(t: &Tracker) -> SocketAddr {
    t.http_addrs()[0]
}

/// A parsed HTTP response.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn bencode(&self) -> Value<'_> {
        assert_eq!(self.status, 200, "{self:?}");
        bdecode(&self.body)
    }
}

/// One client connection, reading responses by `Content-Length`.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Self { s, buf: Vec::new() }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    fn get(&mut self, target: &str, extra_headers: &str) -> Resp {
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n{extra_headers}\r\n");
        self.send(req.as_bytes());
        self.read_response().expect("a response")
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The next response, or `None` if the connection closed first.
    fn read_response(&mut self) -> Option<Resp> {
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_owned(), v.trim().to_owned())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        while self.buf.len() < head_end + len {
            if !self.fill() {
                return None;
            }
        }
        let body = self.buf[head_end..head_end + len].to_vec();
        self.buf.drain(..head_end + len);
        Some(Resp {
            status,
            headers,
            body,
        })
    }

    /// Whether the server closed the connection (EOF or reset) within `wait`.
    fn closed_within(&mut self, wait: Duration) -> bool {
        self.s.set_read_timeout(Some(wait)).unwrap();
        let mut b = [0u8; 1024];
        let r = loop {
            match self.s.read(&mut b) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) => {
                    break !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    )
                }
            }
        };
        self.s
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        r
    }
}

/// One request on a fresh connection.
fn get(addr: SocketAddr, target: &str) -> Resp {
    Conn::new(addr).get(target, "")
}

fn enc(b: &[u8]) -> String {
    let mut v = Vec::new();
    percent_encode_all(b, &mut v);
    String::from_utf8(v).unwrap()
}

fn ih(n: u8) -> InfoHash {
    InfoHash([n; 20])
}

fn pid(n: u8) -> PeerId {
    let mut p = *b"-SH0001-000000000000";
    p[19] = n;
    PeerId(p)
}

/// An announce target; `extra` is appended verbatim (`&compact=0`, ...).
fn announce_target(info: u8, peer: u8, port: u16, left: u64, extra: &str) -> String {
    format!(
        "/announce?info_hash={}&peer_id={}&port={port}&uploaded=0&downloaded=0&left={left}{extra}",
        enc(&ih(info).0),
        enc(&pid(peer).0)
    )
}

fn compact_v4(b: &[u8]) -> Vec<SocketAddr> {
    assert_eq!(b.len() % 6, 0);
    b.chunks(6)
        .map(|c| {
            SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(c[0], c[1], c[2], c[3])),
                u16::from_be_bytes([c[4], c[5]]),
            )
        })
        .collect()
}

fn failure_of(addr: SocketAddr, target: &str) -> String {
    let r = get(addr, target);
    let v = r.bencode();
    v.failure()
        .unwrap_or_else(|| panic!("no failure for {target}: {v:?}"))
}

// ---------------------------------------------------------------------------------------
// Announce

#[test]
fn announces_list_other_peers_in_compact_form() {
    let t = start(|_| {});
    let a = http(&t);
    let r = get(a, &announce_target(1, 1, 5001, 100, "&event=started"));
    let v = r.bencode();
    assert_eq!(v.failure(), None);
    assert_eq!((v.int("complete"), v.int("incomplete")), (0, 1));
    assert_eq!(v.int("interval"), 1800);
    assert_eq!(v.int("min interval"), 900);
    assert!(v.bytes("peers").is_empty(), "the announcer got itself back");
    let r = get(a, &announce_target(1, 2, 5002, 0, "&event=started"));
    let v = r.bencode();
    assert_eq!((v.int("complete"), v.int("incomplete")), (1, 1));
    assert_eq!(
        compact_v4(v.bytes("peers")),
        vec!["127.0.0.1:5001".parse().unwrap()]
    );
    // Completed is counted.
    get(a, &announce_target(1, 1, 5001, 0, "&event=completed"));
    let r = get(a, &announce_target(1, 2, 5002, 0, ""));
    let v = r.bencode();
    assert_eq!(
        (v.int("complete"), v.int("incomplete"), v.int("downloaded")),
        (2, 0, 1)
    );
    // Stopped removes the peer.
    get(a, &announce_target(1, 1, 5001, 0, "&event=stopped"));
    let r = get(a, &announce_target(1, 3, 5003, 10, ""));
    let v = r.bencode();
    assert_eq!(
        compact_v4(v.bytes("peers")),
        vec!["127.0.0.1:5002".parse().unwrap()]
    );
}

#[test]
fn numwant_limits_the_peers_returned() {
    let t = start(|_| {});
    let a = http(&t);
    for p in 1..=5 {
        get(a, &announce_target(2, p, 6000 + u16::from(p), 1, ""));
    }
    let r = get(a, &announce_target(2, 9, 6009, 1, "&numwant=2"));
    let v = r.bencode();
    assert_eq!(compact_v4(v.bytes("peers")).len(), 2);
    let r = get(a, &announce_target(2, 9, 6009, 1, "&numwant=0"));
    let v = r.bencode();
    assert_eq!(compact_v4(v.bytes("peers")).len(), 0);
    let r = get(a, &announce_target(2, 9, 6009, 1, "&numwant=-1"));
    let v = r.bencode();
    assert_eq!(compact_v4(v.bytes("peers")).len(), 5);
}

#[test]
fn compact_zero_gives_dictionaries_with_peer_ids_unless_no_peer_id() {
    let t = start(|_| {});
    let a = http(&t);
    get(a, &announce_target(3, 1, 7001, 0, ""));
    let r = get(a, &announce_target(3, 2, 7002, 5, "&compact=0"));
    let v = r.bencode();
    let peers = v.list("peers");
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].bytes("ip"), b"127.0.0.1");
    assert_eq!(peers[0].int("port"), 7001);
    assert_eq!(peers[0].bytes("peer id"), &pid(1).0);
    let r = get(
        a,
        &announce_target(3, 2, 7002, 5, "&compact=0&no_peer_id=1"),
    );
    let v = r.bencode();
    let peers = v.list("peers");
    assert_eq!(peers[0].get(b"peer id"), None);
    assert_eq!(peers[0].int("port"), 7001);
}

#[test]
fn a_store_without_peer_ids_answers_every_form_without_them() {
    let t = start(|c| c.store.peer_ids = false);
    let a = http(&t);
    get(a, &announce_target(5, 1, 7101, 0, ""));
    // The same address with another peer id is the same peer: still one seeder.
    get(a, &announce_target(5, 9, 7101, 0, ""));
    let r = get(a, &announce_target(5, 2, 7102, 5, "&compact=0"));
    let v = r.bencode();
    assert_eq!(v.int("complete"), 1);
    let peers = v.list("peers");
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].bytes("ip"), b"127.0.0.1");
    assert_eq!(peers[0].int("port"), 7101);
    assert_eq!(
        peers[0].get(b"peer id"),
        None,
        "no id is kept, none is made up"
    );
    let r = get(a, &announce_target(5, 3, 7103, 5, ""));
    let listed = compact_v4(r.bencode().bytes("peers"));
    assert_eq!(
        listed.len(),
        2,
        "the seeder and the first leecher: {listed:?}"
    );
}

#[test]
fn peer_ids_off_is_refused_with_private_mode_or_a_cluster() {
    let mut c = config();
    c.store.peer_ids = false;
    assert!(c.validate().is_ok());
    c.cluster.enabled = true;
    c.cluster.redis = vec!["redis://127.0.0.1:7000".into()];
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("store.peer_ids"), "{err}");
}

#[test]
fn ipv6_clients_get_peers6() {
    let t = start(|c| c.http.listen = vec!["[::1]:0".parse().unwrap()]);
    let a = http(&t);
    assert!(a.is_ipv6());
    get(a, &announce_target(4, 1, 8001, 0, ""));
    let r = get(a, &announce_target(4, 2, 8002, 10, ""));
    let v = r.bencode();
    assert!(v.bytes("peers").is_empty());
    let p6 = v.bytes("peers6");
    assert_eq!(p6.len(), 18);
    assert_eq!(&p6[..16], &std::net::Ipv6Addr::LOCALHOST.octets());
    assert_eq!(u16::from_be_bytes([p6[16], p6[17]]), 8001);
    // The dictionary form carries the textual IPv6 address.
    let r = get(a, &announce_target(4, 2, 8002, 10, "&compact=0"));
    let v = r.bencode();
    let peers = v.list("peers");
    assert_eq!(peers[0].bytes("ip"), b"::1");
}

#[test]
fn the_key_path_segment_is_accepted() {
    let t = start(|_| {});
    let target = announce_target(5, 1, 9001, 0, "").replace("/announce?", "/announce/abc123?");
    let r = get(http(&t), &target);
    let v = r.bencode();
    assert_eq!(v.failure(), None, "{v:?}");
    assert_eq!(v.int("complete"), 1);
}

/// Every form of passkey path sites hand out is served (the policy sees the passkey:
/// `http/handler.rs`'s unit tests), and a passkey outside the charset is told why.
#[test]
fn passkeys_before_or_after_the_action_are_served_and_malformed_ones_told_why() {
    let t = start(|_| {});
    let a = http(&t);
    for (n, path) in [
        "/announce/0123456789abcdef0123456789abcdef",
        "/0123456789abcdef0123456789abcdef/announce",
        "/0123456789abcdef0123456789abcdef/announce/",
        "/A-b.C_d~9/announce",
    ]
    .into_iter()
    .enumerate()
    {
        let n = n as u8 + 1;
        let target = announce_target(6, n, 9000 + u16::from(n), 1, "");
        let r = get(a, &target.replace("/announce?", &format!("{path}?")));
        let v = r.bencode();
        assert_eq!(v.failure(), None, "{path}: {v:?}");
        assert_eq!(v.int("incomplete"), i64::from(n), "{path}");
    }
    let scrape = format!("/0123abcd/scrape?info_hash={}", enc(&ih(6).0));
    let r = get(a, &scrape);
    assert_eq!(r.bencode().failure(), None, "{r:?}");
    for bad in [
        "/announce/pass%20key",
        "/pass!key/announce",
        "/pass!key/scrape",
    ] {
        let target = announce_target(6, 9, 9009, 1, "").replace("/announce?", &format!("{bad}?"));
        assert!(
            failure_of(a, &target).starts_with("malformed passkey"),
            "{bad}"
        );
    }
    assert_eq!(get(a, "/pass/key/announce").status, 404);
}

#[test]
fn the_ip_parameter_is_honoured_only_when_allowed() {
    for allowed in [false, true] {
        let t = start(|c| c.http.allow_ip_field = allowed);
        let a = http(&t);
        get(a, &announce_target(6, 1, 9101, 0, "&ip=10.9.8.7"));
        let r = get(a, &announce_target(6, 2, 9102, 1, ""));
        let v = r.bencode();
        let expect: IpAddr = if allowed {
            "10.9.8.7".parse().unwrap()
        } else {
            "127.0.0.1".parse().unwrap()
        };
        assert_eq!(compact_v4(v.bytes("peers"))[0].ip(), expect);
    }
}

// ---------------------------------------------------------------------------------------
// Errors

#[test]
fn every_parameter_error_is_a_failure_reason_with_status_200() {
    let t = start(|_| {});
    let a = http(&t);
    let good = announce_target(7, 1, 1000, 0, "");
    let without = |name: &str| -> String {
        let (path, q) = good.split_once('?').unwrap();
        let q: Vec<&str> = q
            .split('&')
            .filter(|p| !p.starts_with(&format!("{name}=")))
            .collect();
        format!("{path}?{}", q.join("&"))
    };
    for name in ["info_hash", "peer_id", "port", "left"] {
        assert_eq!(
            failure_of(a, &without(name)),
            format!("missing parameter: {name}")
        );
    }
    // (parameter, bad value, the reason when it is not "malformed parameter: NAME")
    let cases = [
        ("port", "x", None),
        ("port", "70000", None),
        ("port", "0", Some("invalid port 0")),
        ("left", "-1", None),
        ("uploaded", "z", None),
        ("downloaded", "", None),
        ("event", "bogus", None),
        ("numwant", "lots", None),
        ("compact", "2", None),
        ("no_peer_id", "x", None),
        (
            "info_hash",
            "%01%02",
            Some("info_hash must be exactly 20 bytes"),
        ),
        ("peer_id", "%zz", None),
    ];
    for (name, value, reason) in cases {
        let target = format!("{}&{name}={value}", without(name));
        let message = reason.map_or_else(|| format!("malformed parameter: {name}"), str::to_owned);
        assert_eq!(failure_of(a, &target), message, "{target}");
    }
    assert_eq!(
        failure_of(a, &format!("{good}&port=5")),
        "parameter given more than once: port"
    );
    assert_eq!(
        failure_of(
            a,
            &format!("/scrape?{}", "info_hash=aaaaaaaaaaaaaaaaaaaa&".repeat(101))
        ),
        "too many info hashes in scrape (at most 100)"
    );
    assert_eq!(
        failure_of(a, "/scrape?info_hash=short"),
        "info_hash must be exactly 20 bytes"
    );
}

#[test]
fn torrents_off_the_access_list_are_refused() {
    let dir = temp_dir("access");
    let list = dir.join("allow.txt");
    std::fs::write(&list, format!("{}\n", ih(8).to_hex())).unwrap();
    let t = start(|c| {
        c.access_list.mode = shoal_server::config::AccessModeConfig::Allow;
        c.access_list.path = list.clone();
    });
    let a = http(&t);
    assert_eq!(
        get(a, &announce_target(8, 1, 1000, 0, ""))
            .bencode()
            .failure(),
        None
    );
    for refused in [
        announce_target(9, 1, 1000, 0, ""),
        format!("/scrape?info_hash={}", enc(&ih(9).0)),
    ] {
        assert_eq!(failure_of(a, &refused), "torrent not allowed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn non_tracker_requests_get_http_statuses() {
    let t = start(|_| {});
    let a = http(&t);
    assert_eq!(get(a, "/").status, 404);
    assert_eq!(get(a, "/favicon.ico").status, 404);
    let mut c = Conn::new(a);
    c.send(b"POST /announce HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 405);
    assert!(c.closed_within(Duration::from_secs(2)));
    let mut c = Conn::new(a);
    c.send(b"GET /announce HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(c.read_response().unwrap().status, 400);
    assert!(c.closed_within(Duration::from_secs(2)));
}

#[test]
fn garbage_gets_400_and_a_close() {
    let t = start(|_| {});
    let a = http(&t);
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
        b"hello there\r\n\r\n",
        b"GET /announce HTTP/9.9\r\n\r\n",
        b"GET  HTTP/1.1\r\n\r\n",
    ] {
        let mut c = Conn::new(a);
        c.send(garbage);
        let r = c.read_response().expect("a response to garbage");
        assert_eq!(r.status, 400, "{garbage:?}");
        assert!(c.closed_within(Duration::from_secs(2)));
    }
}

#[test]
fn oversized_heads_and_too_many_headers_get_400_and_a_close() {
    let t = start(|c| {
        c.http.max_request_bytes = 1024;
        c.http.max_headers = 8;
    });
    let a = http(&t);
    let mut c = Conn::new(a);
    let long = format!("GET /announce?{} HTTP/1.1\r\n\r\n", "x".repeat(2000));
    // The server answers as soon as its buffer is full; it may close before reading the
    // rest, so ignore write errors.
    let _ = c.s.write_all(long.as_bytes());
    let r = c.read_response().expect("a response");
    assert_eq!(r.status, 400);
    assert_eq!(r.body, b"request head too long");
    assert!(c.closed_within(Duration::from_secs(2)));

    let mut c = Conn::new(a);
    let headers: String = (0..9).map(|i| format!("X-H{i}: v\r\n")).collect();
    c.send(format!("GET /scrape HTTP/1.1\r\n{headers}\r\n").as_bytes());
    let r = c.read_response().unwrap();
    assert_eq!((r.status, &r.body[..]), (400, &b"too many headers"[..]));
    assert!(c.closed_within(Duration::from_secs(2)));

    // Just under both limits is fine.
    let mut c = Conn::new(a);
    let headers: String = (0..7).map(|i| format!("X-H{i}: v\r\n")).collect();
    let r = c.get("/scrape", &headers);
    assert_eq!(r.status, 200);
}

// ---------------------------------------------------------------------------------------
// Scrape

#[test]
fn scrape_reports_several_hashes() {
    let t = start(|_| {});
    let a = http(&t);
    get(a, &announce_target(10, 1, 1001, 0, ""));
    get(a, &announce_target(10, 2, 1002, 9, ""));
    get(a, &announce_target(11, 1, 1001, 9, ""));
    let target = format!(
        "/scrape?info_hash={}&info_hash={}&info_hash={}",
        enc(&ih(11).0),
        enc(&ih(10).0),
        enc(&ih(12).0)
    );
    let r = get(a, &target);
    let v = r.bencode();
    let files = v.get(b"files").unwrap();
    let f10 = files.get(&ih(10).0).unwrap();
    assert_eq!(
        (
            f10.int("complete"),
            f10.int("incomplete"),
            f10.int("downloaded")
        ),
        (1, 1, 0)
    );
    let f11 = files.get(&ih(11).0).unwrap();
    assert_eq!((f11.int("complete"), f11.int("incomplete")), (0, 1));
    let f12 = files.get(&ih(12).0).unwrap();
    assert_eq!((f12.int("complete"), f12.int("incomplete")), (0, 0));
}

/// How many torrents a scrape answer lists.
fn files_listed(v: &Value) -> Option<usize> {
    v.get(b"files").and_then(Value::as_dict).map(<[_]>::len)
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The document is rebuilt only while clients ask for it: the first request after a quiet
/// spell gets the last build (here the one made at start, of an empty store) and wakes a
/// rebuild; the rebuilt document is served plain or gzip.
#[test]
fn full_scrape_is_rebuilt_while_asked_for_and_served_plain_or_gzip() {
    let t = start(|c| c.http.full_scrape_interval = 1);
    let a = http(&t);
    for n in 20..25 {
        get(a, &announce_target(n, 1, 1000, 0, ""));
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(files_listed(&get(a, "/scrape").bencode()), Some(0));
    // Wait for the asked-for rebuild, which sees all five.
    let deadline = Instant::now() + Duration::from_secs(5);
    let full = loop {
        let r = get(a, "/scrape");
        match files_listed(&r.bencode()) {
            Some(5) => break r,
            _ if Instant::now() > deadline => {
                panic!("full scrape never saw 5 torrents: {:?}", r.bencode())
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let v = full.bencode();
    let f = v.get(b"files").unwrap().get(&ih(22).0).unwrap();
    assert_eq!(f.int("complete"), 1);

    let r = Conn::new(a).get("/scrape", "Accept-Encoding: gzip, deflate\r\n");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(bdecode(&gunzip(&r.body)), v);
    let r = Conn::new(a).get("/scrape", "Accept-Encoding: gzip;q=0\r\n");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(bdecode(&r.body), v);
}

#[test]
fn full_scrape_and_gzip_can_be_switched_off() {
    let t = start(|c| c.http.full_scrape = false);
    assert_eq!(
        failure_of(http(&t), "/scrape"),
        "full scrape is disabled: name an info_hash"
    );
    let t = start(|c| c.http.gzip = false);
    let r = Conn::new(http(&t)).get("/scrape", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(bdecode(&r.body).get(b"files"), Some(&Value::Dict(vec![])));
}

// ---------------------------------------------------------------------------------------
// Connections

#[test]
fn keep_alive_serves_many_requests_and_pipelines() {
    let t = start(|_| {});
    let mut c = Conn::new(http(&t));
    for i in 0..20u16 {
        let r = c.get(&announce_target(30, 1, 2000 + i, 0, ""), "");
        assert_eq!(r.header("connection"), Some("keep-alive"));
        assert_eq!(r.bencode().failure(), None);
    }
    // Three requests in one write get three responses, in order.
    let mut batch = Vec::new();
    for n in 31..34 {
        batch.extend_from_slice(
            format!(
                "GET {} HTTP/1.1\r\nHost: t\r\n\r\n",
                announce_target(n, 1, 2100, 0, "")
            )
            .as_bytes(),
        );
    }
    c.send(&batch);
    for _ in 0..3 {
        let r = c.read_response().unwrap();
        assert_eq!(r.bencode().int("complete"), 1);
    }
    assert_eq!(t.store().scrape(&ih(33)).seeders, 1);
    // The client may ask to close.
    let r = c.get("/scrape", "Connection: close\r\n");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(2)));
}

#[test]
fn keep_alive_off_closes_after_each_response() {
    let t = start(|c| c.http.keep_alive = false);
    let mut c = Conn::new(http(&t));
    let r = c.get(&announce_target(35, 1, 2000, 0, ""), "");
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.bencode().int("complete"), 1);
    assert!(c.closed_within(Duration::from_secs(2)));
}

#[test]
fn http_1_0_closes_unless_asked_to_keep_alive() {
    let t = start(|_| {});
    let mut c = Conn::new(http(&t));
    c.send(b"GET /scrape HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    assert!(c.closed_within(Duration::from_secs(2)));
    let mut c = Conn::new(http(&t));
    c.send(b"GET /scrape HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    c.send(b"GET /scrape HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
}

#[test]
fn slowloris_clients_are_cut_off_at_the_request_timeout() {
    let t = start(|c| c.http.request_timeout_ms = 600);
    let mut c = Conn::new(http(&t));
    let started = Instant::now();
    // One byte every 100 ms: never a complete head.
    let mut sent = 0;
    let head = b"GET /scrape HTTP/1.1\r\nHost: slow\r\nX-Slow: ";
    c.s.set_nonblocking(false).unwrap();
    while started.elapsed() < Duration::from_secs(3) {
        if c.s.write_all(&head[sent % head.len()..][..1]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
        c.s.set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        if c.fill() {
            break;
        }
    }
    c.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let r = c.read_response().expect("a 408");
    let elapsed = started.elapsed();
    assert_eq!(r.status, 408);
    assert!(c.closed_within(Duration::from_secs(2)));
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(2000),
        "cut off after {elapsed:?}"
    );
}

#[test]
fn idle_connections_are_closed_at_the_idle_timeout() {
    let t = start(|c| c.http.idle_timeout_ms = 400);
    let mut c = Conn::new(http(&t));
    assert_eq!(c.get("/scrape", "").status, 200);
    let started = Instant::now();
    assert!(c.closed_within(Duration::from_secs(3)));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );
}

#[test]
fn connections_past_the_cap_are_closed() {
    let t = start(|c| {
        c.http.max_connections = 2;
        c.workers = 1;
    });
    let a = http(&t);
    let mut c1 = Conn::new(a);
    let mut c2 = Conn::new(a);
    assert_eq!(c1.get("/scrape", "").status, 200);
    assert_eq!(c2.get("/scrape", "").status, 200);
    let mut c3 = Conn::new(a);
    assert!(c3.closed_within(Duration::from_secs(2)));
    drop(c1);
    // Once one closes, a new one is served.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut c4 = Conn::new(a);
        let _ = c4.s.write_all(b"GET /scrape HTTP/1.1\r\n\r\n");
        if let Some(r) = c4.read_response() {
            assert_eq!(r.status, 200);
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never reused");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c2);
}

// ---------------------------------------------------------------------------------------
// Reverse proxy

/// A tracker behind a proxy at `trusted` that names clients in `X-Forwarded-For`.
fn behind_proxy(trusted: &str) -> Tracker {
    start(|c| {
        c.http.proxy_header = "X-Forwarded-For".into();
        c.http.proxy_trusted = vec![trusted.into()];
    })
}

#[test]
fn a_trusted_proxy_sets_the_client_address() {
    let t = behind_proxy("127.0.0.0/8");
    let a = http(&t);
    let r = Conn::new(a).get(
        &announce_target(40, 1, 3001, 0, ""),
        "X-Forwarded-For: 203.0.113.9, 198.51.100.7\r\n",
    );
    assert_eq!(r.bencode().failure(), None);
    let r = Conn::new(a).get(
        &announce_target(40, 2, 3002, 5, ""),
        "X-Forwarded-For: 192.0.2.1\r\n",
    );
    let v = r.bencode();
    assert_eq!(
        compact_v4(v.bytes("peers")),
        vec!["198.51.100.7:3001".parse().unwrap()]
    );
    let missing = Conn::new(a).get(&announce_target(40, 3, 3003, 5, ""), "");
    assert_eq!(
        missing.bencode().failure().as_deref(),
        Some("missing X-Forwarded-For header from the proxy")
    );
    for bad in ["", "not-an-ip", "1.2.3.4.5", "1.1.1.1,", "[::1"] {
        let r = Conn::new(a).get(
            &announce_target(40, 3, 3003, 5, ""),
            &format!("X-Forwarded-For: {bad}\r\n"),
        );
        assert_eq!(
            r.bencode().failure().as_deref(),
            Some("malformed X-Forwarded-For header from the proxy"),
            "{bad:?}"
        );
    }
    // Scrapes do not need the address.
    assert_eq!(get(a, "/scrape").status, 200);
}

#[test]
fn the_second_hop_and_x_real_ip() {
    let t = start(|c| {
        c.http.proxy_header = "X-Forwarded-For".into();
        c.http.proxy_hop = 2;
    });
    let a = http(&t);
    Conn::new(a).get(
        &announce_target(41, 1, 3001, 0, ""),
        "X-Forwarded-For: 10.0.0.1, 203.0.113.9, 10.0.0.2\r\n",
    );
    let t2 = start(|c| c.http.proxy_header = "X-Real-IP".into());
    Conn::new(http(&t2)).get(
        &announce_target(41, 1, 3001, 0, ""),
        "X-Real-IP: 2001:db8::5\r\n",
    );
    let listed = |t: &Tracker| -> Vec<IpAddr> {
        let tor = t.store().torrent_peers(&ih(41)).unwrap();
        let mut v: Vec<IpAddr> = tor.v4.iter().map(|p| IpAddr::V4(p.addr.ip())).collect();
        v.extend(tor.v6.iter().map(|p| IpAddr::V6(p.addr.ip())));
        v
    };
    assert_eq!(listed(&t), vec!["203.0.113.9".parse::<IpAddr>().unwrap()]);
    assert_eq!(listed(&t2), vec!["2001:db8::5".parse::<IpAddr>().unwrap()]);
}

#[test]
fn untrusted_peers_cannot_choose_their_address() {
    let t = behind_proxy("10.0.0.0/8");
    let a = http(&t);
    Conn::new(a).get(
        &announce_target(42, 1, 3001, 0, ""),
        "X-Forwarded-For: 203.0.113.9\r\n",
    );
    // No header at all is fine too: the connection's address is used.
    let r = get(a, &announce_target(42, 2, 3002, 5, ""));
    let v = r.bencode();
    assert_eq!(
        compact_v4(v.bytes("peers")),
        vec!["127.0.0.1:3001".parse().unwrap()]
    );
}

// ---------------------------------------------------------------------------------------
// UDP and HTTP share the store

struct Udp {
    s: UdpSocket,
    cid: ConnectionId,
}

impl Udp {
    fn new(tracker: SocketAddr) -> Self {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(tracker).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut out = Vec::new();
        UdpRequest::Connect(ConnectRequest {
            transaction_id: TransactionId(1),
        })
        .write(&mut out);
        s.send(&out).unwrap();
        let mut buf = [0u8; 2048];
        let n = s.recv(&mut buf).unwrap();
        let cid = match UdpResponse::parse(&buf[..n], false).unwrap() {
            UdpResponse::Connect { connection_id, .. } => connection_id,
            other => panic!("{other:?}"),
        };
        Self { s, cid }
    }

    fn announce(&self, info: u8, peer: u8, port: u16, left: u64) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        UdpRequest::Announce(UdpAnnounce {
            connection_id: self.cid,
            transaction_id: TransactionId(2),
            info_hash: ih(info),
            peer_id: pid(peer),
            downloaded: 0,
            left,
            uploaded: 0,
            event: AnnounceEvent::Started,
            ip: [0; 4],
            key: 0,
            numwant: -1,
            port,
        })
        .write(&mut out);
        self.s.send(&out).unwrap();
        let mut buf = [0u8; 2048];
        let n = self.s.recv(&mut buf).unwrap();
        match UdpResponse::parse(&buf[..n], false).unwrap() {
            UdpResponse::AnnounceV4 { peers, .. } => {
                peers.iter().map(|p| SocketAddr::V4(p.addr())).collect()
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn peers_cross_between_udp_and_http() {
    let t = start(|c| c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()]);
    let udp = Udp::new(t.udp_addrs()[0]);
    assert!(udp.announce(50, 1, 4001, 0).is_empty());
    let r = get(http(&t), &announce_target(50, 2, 4002, 10, ""));
    let v = r.bencode();
    assert_eq!(
        compact_v4(v.bytes("peers")),
        vec!["127.0.0.1:4001".parse().unwrap()]
    );
    get(http(&t), &announce_target(51, 2, 4002, 0, ""));
    assert_eq!(
        udp.announce(51, 1, 4001, 10),
        vec!["127.0.0.1:4002".parse::<SocketAddr>().unwrap()]
    );
}

// ---------------------------------------------------------------------------------------
// HTTPS

fn write_self_signed(dir: &std::path::Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = dir.join(format!("{name}.cert.pem"));
    let key = dir.join(format!("{name}.key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    (cert, key, ck.cert.der().to_vec())
}

/// One HTTPS request trusting only `cert_der`; returns the response and the certificate
/// the server presented.
fn https_get(addr: SocketAddr, cert_der: &[u8], target: &str) -> (Resp, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(cert_der.to_vec()))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw);
    let presented = tls.conn.peer_certificates().unwrap()[0].to_vec();
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let status = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    (
        Resp {
            status,
            headers: vec![],
            body: raw[head_end..].to_vec(),
        },
        presented,
    )
}

#[test]
fn https_serves_with_a_self_signed_certificate_and_reloads_it() {
    let dir = temp_dir("tls");
    let (cert, key, der1) = write_self_signed(&dir, "one");
    let t = start(|c| {
        c.https.listen = vec!["127.0.0.1:0".parse().unwrap()];
        c.https.cert = cert.clone();
        c.https.key = key.clone();
    });
    let a = t.https_addrs()[0];
    assert!(t
        .describe_listeners()
        .iter()
        .any(|l| l == &format!("HTTPS tracker listening on https://{a}/announce")));
    let (r, presented) = https_get(a, &der1, &announce_target(60, 1, 5001, 0, ""));
    assert_eq!(presented, der1);
    assert_eq!(r.bencode().int("complete"), 1);
    // HTTPS and HTTP share the store.
    let r = get(http(&t), &announce_target(60, 2, 5002, 1, ""));
    let v = r.bencode();
    assert_eq!(compact_v4(v.bytes("peers")).len(), 1);

    // A new certificate in place of the old one is served after a reload.
    let (cert2, key2, der2) = write_self_signed(&dir, "two");
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    t.reload().unwrap();
    let (r, presented) = https_get(a, &der2, "/scrape");
    assert_eq!(presented, der2);
    assert_eq!(r.status, 200);

    // A broken file is refused and the current certificate stays.
    std::fs::write(&key, "not a key").unwrap();
    assert!(t.reload().is_err());
    let (_, presented) = https_get(a, &der2, "/scrape");
    assert_eq!(presented, der2);
    drop(t);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_tls_files_fail_at_start_with_the_path() {
    let dir = temp_dir("badtls");
    let missing = dir.join("missing.pem");
    let mut c = config();
    c.https.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.https.cert = missing.clone();
    c.https.key = missing.clone();
    let err = Tracker::start(c).err().expect("start must fail");
    assert!(format!("{err:#}").contains("missing.pem"), "{err:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A response bigger than the socket takes at once (a full scrape of 100,000 torrents, ~7
/// MB) to a client that starts reading late: the accept loop's fast path writes what fits
/// and the rest follows in the background, whole, then the connection closes.
#[test]
fn a_response_larger_than_the_socket_buffer_arrives_whole() {
    let t = start(|c| c.http.full_scrape_interval = 1);
    let a = http(&t);
    for n in 0..100_000u32 {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(&n.to_be_bytes());
        let addr = shoal_proto::CompactPeerV4::new([10, 0, 0, 1].into(), 1000);
        add_peer(t.store(), InfoHash(h), PeerId([1; 20]), addr, 0);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = Conn::new(a);
        c.send(b"GET /scrape HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        // Let the server fill the socket before anything is read.
        std::thread::sleep(Duration::from_millis(300));
        let mut all = Vec::new();
        c.s.read_to_end(&mut all).unwrap();
        let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&all[..split]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(all.len() - split, len, "body cut short");
        if files_listed(&bdecode(&all[split..])) == Some(100_000) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the full scrape never listed every torrent"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
