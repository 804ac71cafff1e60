//! The UDP tracker over real loopback sockets, started in-process on port 0.

#![forbid(unsafe_code)]

mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use common::store::add_peer;
use common::temp_dir;

use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, ScrapeRequest, TransactionId,
};
use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_server::config::AccessModeConfig;
use shoal_server::{Config, Tracker};

fn config(listen: &str) -> Config {
    // In-process trackers share the working directory and loopback: no snapshot file, no
    // admin listener.
    let mut c = Config::ephemeral();
    c.udp.listen = vec![listen.parse().unwrap()];
    c.http.listen.clear();
    c.workers = 2;
    c
}

/// A tracker from `config("127.0.0.1:0")` and a client connected to it.
fn started() -> (Tracker, Client) {
    let tracker = Tracker::start(config("127.0.0.1:0")).unwrap();
    let c = Client::new(tracker.udp_addrs()[0]);
    (tracker, c)
}

struct Client {
    socket: UdpSocket,
    tracker: SocketAddr,
    cid: ConnectionId,
    tid: u32,
}

impl Client {
    fn new(tracker: SocketAddr) -> Self {
        let bind = if tracker.is_ipv6() {
            "[::1]:0"
        } else {
            "127.0.0.1:0"
        };
        let socket = UdpSocket::bind(bind).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut c = Self {
            socket,
            tracker,
            cid: ConnectionId(0),
            tid: 0,
        };
        c.connect();
        c
    }

    fn port(&self) -> u16 {
        self.socket.local_addr().unwrap().port()
    }

    fn send(&self, bytes: &[u8]) {
        self.socket.send_to(bytes, self.tracker).unwrap();
    }

    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = [0u8; 8192];
        match self.socket.recv_from(&mut buf) {
            Ok((n, _)) => Some(buf[..n].to_vec()),
            Err(_) => None,
        }
    }

    fn recv_quiet(&self, wait: Duration) -> Option<Vec<u8>> {
        self.socket.set_read_timeout(Some(wait)).unwrap();
        let r = self.recv();
        self.socket
            .set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        r
    }

    fn next_tid(&mut self) -> TransactionId {
        self.tid += 1;
        TransactionId(self.tid)
    }

    fn connect(&mut self) {
        let tid = self.next_tid();
        let mut out = Vec::new();
        Request::Connect(ConnectRequest {
            transaction_id: tid,
        })
        .write(&mut out);
        self.send(&out);
        let reply = self.recv().expect("connect reply");
        match Response::parse(&reply, false).unwrap() {
            Response::Connect {
                transaction_id,
                connection_id,
            } => {
                assert_eq!(transaction_id, tid);
                self.cid = connection_id;
            }
            other => panic!("{other:?}"),
        }
    }

    fn announce_req(
        &mut self,
        info: u8,
        peer: u8,
        left: u64,
        event: AnnounceEvent,
    ) -> AnnounceRequest {
        AnnounceRequest {
            connection_id: self.cid,
            transaction_id: self.next_tid(),
            info_hash: InfoHash([info; 20]),
            peer_id: PeerId([peer; 20]),
            downloaded: 0,
            left,
            uploaded: 0,
            event,
            ip: [0; 4],
            key: 0,
            numwant: -1,
            port: self.port(),
        }
    }

    /// Peer 1 starting in torrent 1, as the request and its bytes (not sent).
    fn first_announce(&mut self) -> (AnnounceRequest, Vec<u8>) {
        let req = self.announce_req(1, 1, 1, AnnounceEvent::Started);
        (req, datagram(req))
    }

    fn send_announce(&mut self, req: AnnounceRequest) -> Vec<u8> {
        self.send(&datagram(req));
        self.recv().expect("announce reply")
    }

    /// Announces and returns (leechers, seeders, peers).
    fn announce(
        &mut self,
        info: u8,
        peer: u8,
        left: u64,
        event: AnnounceEvent,
    ) -> (u32, u32, Vec<SocketAddr>) {
        let req = self.announce_req(info, peer, left, event);
        let reply = self.send_announce(req);
        parse_announce(&reply, self.tracker.is_ipv6(), req.transaction_id)
    }

    fn scrape_nowait(&mut self, hashes: &[InfoHash]) {
        let tid = self.next_tid();
        let mut out = Vec::new();
        Request::Scrape(ScrapeRequest {
            connection_id: self.cid,
            transaction_id: tid,
            info_hashes: hashes,
        })
        .write(&mut out);
        self.send(&out);
    }

    fn scrape(&mut self, hashes: &[InfoHash]) -> Vec<u8> {
        self.scrape_nowait(hashes);
        self.recv().expect("scrape reply")
    }

    /// Announces peer 1 in torrent `info` and returns the error message it gets.
    fn refusal(&mut self, info: u8, event: AnnounceEvent) -> String {
        let req = self.announce_req(info, 1, 1, event);
        error_message(&self.send_announce(req))
    }

    /// (seeders, completed, leechers) per hash.
    fn scrape_stats(&mut self, hashes: &[InfoHash]) -> Vec<(u32, u32, u32)> {
        let reply = self.scrape(hashes);
        match Response::parse(&reply, false).unwrap() {
            Response::Scrape { stats, .. } => stats
                .iter()
                .map(|s| (s.seeders(), s.completed(), s.leechers()))
                .collect(),
            other => panic!("{other:?}"),
        }
    }
}

fn datagram(req: AnnounceRequest) -> Vec<u8> {
    let mut out = Vec::new();
    Request::Announce(req).write(&mut out);
    out
}

fn parse_announce(reply: &[u8], v6: bool, tid: TransactionId) -> (u32, u32, Vec<SocketAddr>) {
    match Response::parse(reply, v6).unwrap() {
        Response::AnnounceV4 { header, peers } => {
            assert_eq!(header.transaction_id, tid);
            (
                header.leechers,
                header.seeders,
                peers.iter().map(|p| SocketAddr::V4(p.addr())).collect(),
            )
        }
        Response::AnnounceV6 { header, peers } => {
            assert_eq!(header.transaction_id, tid);
            (
                header.leechers,
                header.seeders,
                peers.iter().map(|p| SocketAddr::V6(p.addr())).collect(),
            )
        }
        other => panic!("not an announce response: {other:?}"),
    }
}

fn error_message(reply: &[u8]) -> String {
    match Response::parse(reply, false).unwrap() {
        Response::Error { message, .. } => String::from_utf8_lossy(message).into_owned(),
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn connect_announce_scrape_flow() {
    let tracker = Tracker::start(config("127.0.0.1:0")).unwrap();
    let addr = tracker.udp_addrs()[0];
    assert_ne!(addr.port(), 0);
    let mut a = Client::new(addr);
    let mut b = Client::new(addr);
    let (l, s, peers) = a.announce(1, 1, 100, AnnounceEvent::Started);
    assert_eq!((l, s), (1, 0));
    assert!(peers.is_empty(), "the announcer got itself back: {peers:?}");
    let (l, s, peers) = b.announce(1, 2, 0, AnnounceEvent::Started);
    assert_eq!((l, s), (1, 1));
    assert_eq!(peers, vec![a.socket.local_addr().unwrap()]);
    let stats = a.scrape_stats(&[InfoHash([1; 20]), InfoHash([9; 20])]);
    assert_eq!(stats, vec![(1, 0, 1), (0, 0, 0)]);
    let counters = tracker.udp_counters();
    assert_eq!(
        (counters.connect, counters.announce, counters.scrape),
        (2, 2, 1)
    );
}

#[test]
fn ipv6_announces_get_18_byte_peers_and_only_ipv6_ones() {
    let mut c = config("[::1]:0");
    c.udp.listen.push("127.0.0.1:0".parse().unwrap());
    let tracker = Tracker::start(c).unwrap();
    let (v6, v4) = (tracker.udp_addrs()[0], tracker.udp_addrs()[1]);
    let mut a = Client::new(v6);
    let mut b = Client::new(v6);
    let mut c4 = Client::new(v4);
    c4.announce(3, 9, 10, AnnounceEvent::Started);
    a.announce(3, 1, 10, AnnounceEvent::Started);
    let req = b.announce_req(3, 2, 10, AnnounceEvent::Started);
    let reply = b.send_announce(req);
    assert_eq!(reply.len(), 20 + 18, "one IPv6 peer of 18 bytes");
    let (l, _, peers) = parse_announce(&reply, true, req.transaction_id);
    assert_eq!(l, 3, "counts cover both families");
    assert_eq!(peers, vec![a.socket.local_addr().unwrap()]);
    let (_, _, peers) = c4.announce(3, 9, 10, AnnounceEvent::None);
    assert!(peers.is_empty(), "IPv4 client got IPv6 peers: {peers:?}");
}

#[test]
fn bad_connection_ids_are_dropped_silently() {
    let (tracker, mut c) = started();
    c.cid = ConnectionId(c.cid.0 ^ 1);
    let (_, out) = c.first_announce();
    c.send(&out);
    c.scrape_nowait(&[InfoHash([1; 20])]);
    // A malformed request under a bad id gets no error reply either (no reflection).
    let mut bad = out.clone();
    bad.truncate(50);
    c.send(&bad);
    assert!(c.recv_quiet(Duration::from_millis(400)).is_none());
    assert_eq!(tracker.udp_counters().bad_connection_id, 3);
    assert_eq!(tracker.store().scrape(&InfoHash([1; 20])).leechers, 0);
}

#[test]
fn malformed_requests_with_a_valid_id_get_clear_errors() {
    let (tracker, mut c) = started();
    let (req, out) = c.first_announce();

    c.send(&out[..60]);
    assert!(error_message(&c.recv().unwrap()).contains("too short"));

    let mut bad_event = out.clone();
    bad_event[83] = 7;
    c.send(&bad_event);
    assert_eq!(error_message(&c.recv().unwrap()), "invalid event");

    let mut unknown = out.clone();
    unknown[11] = 9;
    c.send(&unknown);
    assert_eq!(error_message(&c.recv().unwrap()), "unknown action");

    let mut port0 = req;
    port0.port = 0;
    let reply = c.send_announce(port0);
    assert!(error_message(&reply).contains("port"));

    // Too short to answer at all: dropped, and the tracker still works afterwards.
    c.send(&[1, 2, 3]);
    c.send(&[]);
    assert!(c.recv_quiet(Duration::from_millis(300)).is_none());
    let (l, _, _) = c.announce(1, 1, 1, AnnounceEvent::Started);
    assert_eq!(l, 1);
    assert!(tracker.udp_counters().errors >= 4);
}

#[test]
fn trailing_bytes_and_bep41_options_are_accepted() {
    let (_tracker, mut c) = started();
    let (req, mut out) = c.first_announce();
    shoal_proto::udp::write_url_data_option(b"/announce", &mut out);
    assert_eq!(out.len(), 109, "libtorrent's announce size");
    c.send(&out);
    let (l, _, _) = parse_announce(&c.recv().unwrap(), false, req.transaction_id);
    assert_eq!(l, 1);
}

/// `udp://host:port/<passkey>/announce` (and the other forms) arrive as BEP 41 URL data
/// and are served; so is URL data that is no tracker path, as options are advisory. That
/// the policy sees the passkey is `udp/handler.rs`'s unit tests.
#[test]
fn passkey_paths_in_bep41_url_data_are_served() {
    let (_tracker, mut c) = started();
    for (n, url_data) in [
        &b"/0123456789abcdef0123456789abcdef/announce"[..],
        b"/announce/0123456789abcdef0123456789abcdef?key=1",
        b"/announce/bad!key",
        b"/some/other/path",
    ]
    .into_iter()
    .enumerate()
    {
        // A torrent of its own each: the client announces alone in it.
        let req = c.announce_req(10 + n as u8, 1, 1, AnnounceEvent::Started);
        let mut out = datagram(req);
        shoal_proto::udp::write_url_data_option(url_data, &mut out);
        c.send(&out);
        let (leechers, _, _) = parse_announce(&c.recv().unwrap(), false, req.transaction_id);
        assert_eq!(leechers, 1, "{}", String::from_utf8_lossy(url_data));
    }
}

#[test]
fn stopped_and_completed_events() {
    let tracker = Tracker::start(config("127.0.0.1:0")).unwrap();
    let addr = tracker.udp_addrs()[0];
    let mut a = Client::new(addr);
    let mut b = Client::new(addr);
    a.announce(5, 1, 100, AnnounceEvent::Started);
    b.announce(5, 2, 100, AnnounceEvent::Started);
    let (l, s, _) = a.announce(5, 1, 0, AnnounceEvent::Completed);
    assert_eq!((l, s), (1, 1));
    assert_eq!(a.scrape_stats(&[InfoHash([5; 20])]), vec![(1, 1, 1)]);
    let (l, s, peers) = b.announce(5, 2, 100, AnnounceEvent::Stopped);
    assert_eq!((l, s), (0, 1));
    assert!(peers.is_empty());
    let (_, _, peers) = a.announce(5, 1, 0, AnnounceEvent::None);
    assert!(peers.is_empty(), "stopped peer still handed out");
    assert_eq!(a.scrape_stats(&[InfoHash([5; 20])]), vec![(1, 1, 0)]);
}

#[test]
fn silent_peers_expire() {
    let mut c = config("127.0.0.1:0");
    c.store.peer_ttl = 1;
    c.store.torrent_ttl = 1;
    c.store.clean_interval = 1;
    let tracker = Tracker::start(c).unwrap();
    let mut a = Client::new(tracker.udp_addrs()[0]);
    a.announce(6, 1, 100, AnnounceEvent::Started);
    assert_eq!(a.scrape_stats(&[InfoHash([6; 20])]), vec![(0, 0, 1)]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        std::thread::sleep(Duration::from_millis(250));
        if a.scrape_stats(&[InfoHash([6; 20])]) == vec![(0, 0, 0)] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "peer never expired");
    }
}

/// A tracker whose access list, in `mode`, names torrent 1; a client; the list's directory
/// and path.
fn with_access_list(name: &str, mode: AccessModeConfig) -> (Tracker, Client, PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let list = dir.join("list");
    std::fs::write(&list, format!("{}\n", InfoHash([1; 20]).to_hex())).unwrap();
    let mut c = config("127.0.0.1:0");
    c.access_list.mode = mode;
    c.access_list.path = list.clone();
    let tracker = Tracker::start(c).unwrap();
    let cl = Client::new(tracker.udp_addrs()[0]);
    (tracker, cl, dir, list)
}

#[test]
fn access_list_allow_deny_and_reload() {
    let (tracker, mut cl, dir, list) = with_access_list("acl", AccessModeConfig::Allow);
    let (l, _, _) = cl.announce(1, 1, 1, AnnounceEvent::Started);
    assert_eq!(l, 1);
    assert_eq!(cl.refusal(2, AnnounceEvent::Started), "torrent not allowed");
    assert_eq!(
        error_message(&cl.scrape(&[InfoHash([2; 20])])),
        "torrent not allowed"
    );

    // Allow the second hash; a broken file on reload keeps the old list.
    std::fs::write(&list, "not a hash\n").unwrap();
    assert!(tracker.reload().is_err());
    assert_eq!(cl.refusal(2, AnnounceEvent::Started), "torrent not allowed");
    std::fs::write(&list, format!("{}\n", InfoHash([2; 20]).to_hex())).unwrap();
    tracker.reload().unwrap();
    let (l, _, _) = cl.announce(2, 1, 1, AnnounceEvent::Started);
    assert_eq!(l, 1);
    assert_eq!(cl.refusal(1, AnnounceEvent::None), "torrent not allowed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn deny_mode_refuses_listed_hashes() {
    let (_tracker, mut cl, dir, _) = with_access_list("deny", AccessModeConfig::Deny);
    assert_eq!(cl.refusal(1, AnnounceEvent::Started), "torrent not allowed");
    let (l, _, _) = cl.announce(2, 1, 1, AnnounceEvent::Started);
    assert_eq!(l, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn numwant_is_capped_and_defaulted() {
    let mut c = config("127.0.0.1:0");
    c.announce.default_numwant = 3;
    c.announce.max_numwant = 5;
    let tracker = Tracker::start(c).unwrap();
    let addr = tracker.udp_addrs()[0];
    let mut cl = Client::new(addr);
    // Ten other peers, announced through the store under distinct addresses.
    for n in 0..10u8 {
        let addr = CompactPeerV4::new([10, 0, 0, n].into(), 1000);
        add_peer(
            tracker.store(),
            InfoHash([7; 20]),
            PeerId([100 + n; 20]),
            addr,
            1,
        );
    }
    let (_, _, peers) = cl.announce(7, 1, 1, AnnounceEvent::Started);
    assert_eq!(peers.len(), 3, "default numwant");
    let mut req = cl.announce_req(7, 1, 1, AnnounceEvent::None);
    req.numwant = 1000;
    let (_, _, peers) = parse_announce(&cl.send_announce(req), false, req.transaction_id);
    assert_eq!(peers.len(), 5, "max numwant");
    let mut req = cl.announce_req(7, 1, 1, AnnounceEvent::None);
    req.numwant = 2;
    let (_, _, peers) = parse_announce(&cl.send_announce(req), false, req.transaction_id);
    assert_eq!(peers.len(), 2);
    let me = cl.socket.local_addr().unwrap();
    assert!(!peers.contains(&me));
}

#[test]
fn scrape_is_limited_and_ip_field_ignored_unless_allowed() {
    let mut c = config("127.0.0.1:0");
    c.udp.max_scrape_hashes = 3;
    let tracker = Tracker::start(c).unwrap();
    let mut cl = Client::new(tracker.udp_addrs()[0]);
    let hashes: Vec<InfoHash> = (0..4).map(|n| InfoHash([n; 20])).collect();
    assert!(error_message(&cl.scrape(&hashes)).contains("too many"));
    assert_eq!(cl.scrape_stats(&hashes[..3]).len(), 3);

    assert_eq!(
        listed_after_ip_field(&tracker, &mut cl),
        Ipv4Addr::LOCALHOST,
        "ip field must be ignored"
    );

    let mut c = config("127.0.0.1:0");
    c.udp.allow_ip_field = true;
    let tracker = Tracker::start(c).unwrap();
    let mut cl = Client::new(tracker.udp_addrs()[0]);
    assert_eq!(
        listed_after_ip_field(&tracker, &mut cl),
        Ipv4Addr::new(10, 9, 8, 7)
    );
}

/// Announces torrent 8 with 10.9.8.7 in the `ip` field; returns the address the store
/// lists for the peer.
fn listed_after_ip_field(tracker: &Tracker, cl: &mut Client) -> Ipv4Addr {
    let mut req = cl.announce_req(8, 1, 1, AnnounceEvent::Started);
    req.ip = [10, 9, 8, 7];
    cl.send_announce(req);
    tracker
        .store()
        .torrent_peers(&InfoHash([8; 20]))
        .map(|t| t.v4[0].addr)
        .unwrap()
        .ip()
}

#[test]
fn connection_ids_survive_a_restart_with_a_key_file() {
    let dir = temp_dir("cid");
    let mut c = config("127.0.0.1:0");
    c.udp.connection_id_key_file = dir.join("key");
    let tracker = Tracker::start(c.clone()).unwrap();
    let mut cl = Client::new(tracker.udp_addrs()[0]);
    let port = tracker.udp_addrs()[0].port();
    tracker.shutdown();
    c.udp.listen = vec![format!("127.0.0.1:{port}").parse().unwrap()];
    let tracker = Tracker::start(c).unwrap();
    // The id from the first process is still good.
    let (l, _, _) = cl.announce(1, 1, 1, AnnounceEvent::Started);
    assert_eq!(l, 1);
    drop(tracker);
    std::fs::remove_dir_all(&dir).unwrap();
}
