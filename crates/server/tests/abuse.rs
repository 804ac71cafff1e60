//! The abuse controls against an in-process tracker over real sockets: the block list from
//! its file, the admin API and a reload, on UDP and HTTP; per-source rate limits (UDP
//! silence, HTTP 429 then a close) with their metrics; connection ids refused for age; and
//! dual stack (IPv4 clients of a dual-stack UDP socket are IPv4 peers, IPv6 replies stay
//! within 1,232 bytes, requests counted per family).

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::Duration;

use common::store::add_peer;
use common::{http, temp_dir, Ann, Client};
use serde_json::Value;
use shoal_proto::udp::PROTOCOL_ID;
use shoal_proto::{AnnounceEvent, CompactPeerV6, InfoHash, PeerId};
use shoal_server::config::RateLimitConfig;
use shoal_server::{Config, Tracker};

const TOKEN: &str = "abuse-token";

/// A tracker on loopback (UDP, HTTP, admin) with `edit` applied to its config, its files
/// in the test directory `name`.
fn start(name: &str, edit: impl FnOnce(&mut Config, &Path)) -> Tracker {
    let dir = temp_dir(name);
    let mut c = Config::ephemeral();
    c.workers = 1;
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.token = TOKEN.into();
    c.state.file = dir.join("shoal.state");
    edit(&mut c, &dir);
    Tracker::start(c).unwrap()
}

fn call(t: &Tracker, method: &str, path: &str) -> (u16, Value) {
    let (status, body) = http(t.admin_addrs()[0], method, path, Some(TOKEN));
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// An announce of torrent `info` by peer `peer` (port 1000 + peer) with `left` to go.
fn ann(info: u8, peer: u8, left: u64) -> Ann {
    Ann {
        info_hash: InfoHash([info; 20]),
        peer_id: PeerId([peer; 20]),
        port: 1000 + u16::from(peer),
        left,
        event: AnnounceEvent::Started,
        numwant: 50,
    }
}

/// A UDP socket on loopback address `from` with a short read timeout.
fn udp_from(from: &str) -> UdpSocket {
    let s = UdpSocket::bind(format!("{from}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

/// Whether a connect sent from `socket` to `tracker` is answered.
fn connect_answered(socket: &UdpSocket, tracker: SocketAddr) -> bool {
    // BEP 15: the protocol id, action 0 (connect), transaction id 0.
    let connect = [PROTOCOL_ID.to_be_bytes(), [0; 8]].concat();
    socket.send_to(&connect, tracker).unwrap();
    socket.recv_from(&mut [0u8; 64]).is_ok()
}

/// One HTTP announce from loopback address `from` on a fresh connection (asking for it to
/// stay open); returns what came back before the tracker closed or went quiet.
fn http_announce(tracker: SocketAddr, from: &str, requests: usize) -> String {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    socket.connect(&tracker.into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let ih = "%01".repeat(20);
    let one = format!(
        "GET /announce?info_hash={ih}&peer_id=-qB4520-abcdefghijkl&port=1&left=7 HTTP/1.1\r\n\
         Host: t\r\n\r\n"
    );
    let _ = s.write_all(one.repeat(requests).as_bytes());
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

/// Checks that each metric (its name and labels) at `/metrics` is at least its figure.
fn assert_metrics(t: &Tracker, at_least: &[(&str, f64)]) {
    let (_, text) = http(t.admin_addrs()[0], "GET", "/metrics", None);
    for (name, least) in at_least {
        let value: f64 = text
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(value >= *least, "{name} is {value}, not {least} or more");
    }
}

/// [`assert_metrics`] for `name` by protocol: UDP at least `udp`, HTTP at least `http`.
fn assert_by_protocol(t: &Tracker, name: &str, [udp, http]: [f64; 2]) {
    let udp_name = format!("{name}{{protocol=\"udp\"}}");
    let http_name = format!("{name}{{protocol=\"http\"}}");
    assert_metrics(t, &[(&udp_name, udp), (&http_name, http)]);
}

#[test]
fn block_list_from_its_file_the_admin_api_and_a_reload() {
    let mut list = Default::default();
    let t = start("abuse-block", |c, dir| {
        list = dir.join("blocked");
        std::fs::write(&list, "# nobody yet\n192.0.2.0/24\n").unwrap();
        c.block_list.path = list.clone();
    });
    let udp = t.udp_addrs()[0];
    let web = t.http_addrs()[0];
    let s = udp_from("127.0.0.7");
    assert!(connect_answered(&s, udp));
    assert!(http_announce(web, "127.0.0.7", 1).starts_with("HTTP/1.1 200"));

    let (status, v) = call(&t, "PUT", "/api/block-list/127.0.0.0_24");
    assert_eq!((status, v["changed"].as_bool()), (200, Some(true)), "{v}");
    let (_, v) = call(&t, "GET", "/api/block-list");
    assert_eq!(
        v["networks"],
        serde_json::json!(["127.0.0.0/24", "192.0.2.0/24"])
    );
    assert!(!connect_answered(&s, udp), "blocked: no UDP reply");
    assert_eq!(
        http_announce(web, "127.0.0.7", 1),
        "",
        "blocked: closed, no answer"
    );
    assert!(
        connect_answered(&udp_from("127.0.1.7"), udp),
        "outside the /24"
    );

    let (status, v) = call(&t, "DELETE", "/api/block-list/127.0.0.0%2F24");
    assert_eq!((status, v["changed"].as_bool()), (200, Some(true)), "{v}");
    assert!(connect_answered(&s, udp));
    let text = std::fs::read_to_string(&list).unwrap();
    assert_eq!(
        text, "# nobody yet\n192.0.2.0/24\n",
        "the file keeps its comments"
    );
    let (status, _) = call(&t, "PUT", "/api/block-list/not-a-network");
    assert_eq!(status, 400);

    // SIGHUP's path, then the admin API's reload.
    std::fs::write(&list, "127.0.0.7\n").unwrap();
    t.reload().unwrap();
    assert!(!connect_answered(&s, udp));
    std::fs::write(&list, "").unwrap();
    let (status, v) = call(&t, "POST", "/api/reload");
    assert_eq!(status, 200, "{v}");
    assert!(
        v.to_string().contains("block list reloaded: 0 networks"),
        "{v}"
    );
    assert!(connect_answered(&s, udp));
    assert!(t.udp_counters().blocked >= 2);
    assert_by_protocol(&t, "shoal_blocked_total", [2.0, 1.0]);
    t.shutdown();
}

#[test]
fn over_the_limit_udp_is_silent_and_http_gets_429_then_a_close() {
    let t = start("abuse-limit", |c, _| {
        c.rate_limit = RateLimitConfig::on(1, 5)
    });
    let udp = t.udp_addrs()[0];
    let mut flood = Client::new(udp);
    flood.socket = udp_from("127.0.0.2");
    flood.connect();
    let anns: Vec<Ann> = (0..20).map(|i| ann(5, i, 1)).collect();
    let answered = flood.announce_all(&anns, 20).iter().filter(|&&a| a).count();
    // The burst, and at most a token or two that came back meanwhile.
    assert!((5..=7).contains(&answered), "{answered} answered");
    assert!(
        !connect_answered(&flood.socket, udp),
        "no connect without tokens"
    );
    assert!(
        connect_answered(&udp_from("127.0.0.3"), udp),
        "others keep theirs"
    );
    assert!(t.udp_counters().rate_limited >= 14);

    // Five in the burst, then three 429s on the open connection, then a 429 that closes.
    let got = http_announce(t.http_addrs()[0], "127.0.0.4", 12);
    assert_eq!(got.matches("HTTP/1.1 200").count(), 5, "{got}");
    assert_eq!(
        got.matches("HTTP/1.1 429 Too Many Requests").count(),
        4,
        "{got}"
    );
    assert!(
        got.contains("14:failure reason") && got.contains("slow down"),
        "{got}"
    );
    assert!(got.matches("Connection: close").count() == 1, "{got}");
    assert_by_protocol(&t, "shoal_rate_limited_total", [14.0, 4.0]);
    t.shutdown();
}

#[test]
fn ids_refused_only_for_age_are_counted() {
    let t = start("abuse-age", |c, _| {
        c.udp.connection_id_max_age = 1;
        c.udp.connection_id_grace = 0;
    });
    let mut c = Client::new(t.udp_addrs()[0]);
    c.connect();
    let ann = ann(3, 3, 0);
    assert!(c.announce(&ann).is_some());
    std::thread::sleep(Duration::from_millis(2100));
    assert!(c.announce(&ann).is_none(), "too old");
    assert_eq!(t.udp_counters().expired_connection_id, 1);
    assert_metrics(&t, &[("shoal_udp_connection_id_expired_total", 1.0)]);
    t.shutdown();
}

#[test]
fn a_dual_stack_socket_serves_ipv4_clients_as_ipv4_and_ipv6_replies_fit_1232_bytes() {
    let t = start("abuse-dual", |c, _| {
        c.udp.listen = vec!["[::]:0".parse().unwrap()]
    });
    let port = t.udp_addrs()[0].port();
    // Two IPv4 clients of the IPv6 socket (they arrive as ::ffff:127.0.0.1).
    let v4: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut a = Client::new(v4);
    a.connect();
    a.announce(&ann(4, 1, 1)).unwrap();
    let mut b = Client::new(v4);
    b.connect();
    let (_, _, ports) = b.announce(&ann(4, 2, 1)).expect("an IPv4 reply");
    assert_eq!(
        ports,
        vec![1001],
        "the mapped client is in IPv4 compact peers"
    );

    // 100 IPv6 peers, then an IPv6 client asking for as many as it may.
    for i in 0..100u16 {
        let ip = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i + 1);
        let addr = CompactPeerV6::new(ip, 1000 + i);
        add_peer(
            t.store(),
            InfoHash([4; 20]),
            PeerId([100 + i as u8; 20]),
            addr,
            1,
        );
    }
    let v6: SocketAddr = format!("[::1]:{port}").parse().unwrap();
    let mut c = Client::new(v6);
    c.socket = UdpSocket::bind("[::1]:0").unwrap();
    c.socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    c.connect();
    let mut want_all = ann(4, 9, 1);
    (want_all.port, want_all.numwant) = (9, i32::MAX);
    let mut req = Vec::new();
    c.write_announce(&want_all, 77, &mut req);
    c.socket.send_to(&req, v6).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = c.socket.recv_from(&mut buf).unwrap();
    assert!(n <= 1232, "{n} bytes");
    assert_eq!(n, 20 + 67 * 18, "as many peers as fit");
    let counters = t.udp_counters();
    assert_eq!((counters.ipv4, counters.ipv6), (4, 2), "{counters:?}");
    assert!(http_announce(t.http_addrs()[0], "127.0.0.1", 1).starts_with("HTTP/1.1 200"));
    let by_family = "shoal_requests_by_family_total{protocol=\"http\",family=\"ipv4\"}";
    assert_metrics(&t, &[(by_family, 1.0)]);
    t.shutdown();
}
