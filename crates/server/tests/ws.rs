//! Integration tests of the WebTorrent front end over real WebSocket connections: a whole
//! tracker runs in-process with an HTTP listener on 127.0.0.1:0 (WebSocket upgrades
//! arrive on it, as in production), and the clients are tokio-tungstenite connections
//! speaking the JSON the reference client speaks (tests/common/ws.rs).

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::ws::{
    announce, answer, assert_refused, bin, connect, connect_to, eventually, recv, request, send,
    silent, with_offers, Client, WAIT,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use shoal_proto::{InfoHash, PeerId};
use shoal_server::config::WsConfig;
use shoal_server::ws::WsContext;
use shoal_server::{Config, Tracker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::MaybeTlsStream;

struct Harness {
    addr: SocketAddr,
    ctx: Arc<WsContext>,
    /// Stopped when the test ends.
    _tracker: Tracker,
}

/// A tracker with only an HTTP listener, its WebTorrent settings changed by `f`.
fn start(f: impl FnOnce(&mut WsConfig)) -> Harness {
    let mut c = Config::ephemeral();
    c.udp.listen.clear();
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 2;
    f(&mut c.ws);
    let tracker = Tracker::start(c).unwrap();
    Harness {
        addr: tracker.http_addrs()[0],
        ctx: tracker.ws_context().clone(),
        _tracker: tracker,
    }
}

fn start_default() -> Harness {
    start(|_| {})
}

impl Harness {
    /// A new connection whose peer `peer` joined torrent `info` with `left` bytes to go.
    async fn joined(&self, info: u8, peer: u8, left: u64) -> Client {
        let mut c = connect(self.addr).await;
        request(&mut c, announce(ih(info), pid(peer), Some(left), "started")).await;
        c
    }

    /// Whether peer `peer` of torrent `info` is in the swarm.
    fn has_peer(&self, info: u8, peer: u8) -> bool {
        self.ctx
            .core
            .webtorrent()
            .peer_connection(&InfoHash(ih(info)), &PeerId(pid(peer)))
            .is_some()
    }
}

fn ih(n: u8) -> [u8; 20] {
    [n; 20]
}

fn pid(n: u8) -> [u8; 20] {
    let mut p = *b"-WW0208-000000000000";
    p[19] = n;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announce_replies_with_counts_and_interval() {
    let h = start_default();
    let mut a = connect(h.addr).await;
    // A seeder's first announce may be `completed`.
    let r = request(&mut a, announce(ih(1), pid(1), Some(0), "completed")).await;
    assert_eq!(
        r,
        json!({"action": "announce", "info_hash": bin(&ih(1)), "complete": 1, "incomplete": 0, "interval": 120})
    );
    let mut b = connect(h.addr).await;
    // A leecher without metadata: `left: null`.
    let r = request(&mut b, announce(ih(1), pid(2), None, "started")).await;
    assert_eq!(
        (r["complete"].as_u64(), r["incomplete"].as_u64()),
        (Some(1), Some(1))
    );
    let st = h.ctx.core.webtorrent().scrape(&InfoHash(ih(1)));
    assert_eq!((st.seeders, st.leechers, st.completed), (1, 1, 1));
}

/// A passkey in the WebSocket URL (`ws://host/<passkey>/announce`, `/announce/<passkey>`)
/// is served like any path, as are paths with none or a malformed one. That the passkey
/// goes with every announce and scrape is `ws/handler.rs`'s and `ws/upgrade_request.rs`'s
/// unit tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passkey_urls_are_served_like_any_path() {
    let h = start_default();
    let paths = [
        "/0123456789abcdef0123456789abcdef/announce",
        "/announce/0123456789abcdef0123456789abcdef",
        "/announce/bad!key",
        "/",
    ];
    let mut clients = Vec::new();
    for (n, path) in paths.into_iter().enumerate() {
        let mut c = connect_to(h.addr, path).await;
        let r = request(&mut c, announce(ih(9), pid(n as u8), Some(5), "started")).await;
        assert_eq!(r["incomplete"].as_u64(), Some(n as u64 + 1), "{path}: {r}");
        let r = request(
            &mut c,
            json!({"action": "scrape", "info_hash": bin(&ih(9))}),
        )
        .await;
        assert!(r["files"].is_object(), "{path}: {r}");
        clients.push(c);
    }
}

/// Two peers in the swarm, a third announces with offers: each offer reaches a different
/// peer, and the answer goes back to the offerer only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_are_relayed_and_answers_go_back_to_the_offerer_only() {
    let h = start_default();
    let mut a = h.joined(1, 1, 0).await;
    let mut b = h.joined(1, 2, 10).await;
    let mut c = connect(h.addr).await;
    let offers = with_offers(announce(ih(1), pid(3), Some(10), "started"), &[7, 8, 9]);
    let r = request(&mut c, offers).await;
    assert_eq!(r["incomplete"], 2);
    let oa = recv(&mut a).await;
    let ob = recv(&mut b).await;
    for o in [&oa, &ob] {
        assert_eq!(o["action"], "announce");
        assert_eq!(o["info_hash"], bin(&ih(1)));
        assert_eq!(o["peer_id"], bin(&pid(3)));
        assert_eq!(o["offer"]["type"], "offer");
    }
    // Two peers, three offers: two relayed, to different peers, with different offers.
    assert_ne!(oa["offer_id"], ob["offer_id"]);
    let n: u8 = oa["offer"]["sdp"].as_str().unwrap()[4..].parse().unwrap();
    assert_eq!(
        oa["offer_id"],
        bin(&[n; 20]),
        "the offer id travels with its own offer"
    );
    silent(&mut a).await;

    // A answers its offer: C gets it, from A, with the offer id; B gets nothing.
    let a_answers = answer(ih(1), pid(1), pid(3), oa["offer_id"].as_str().unwrap());
    send(&mut a, a_answers.clone()).await;
    let ans = recv(&mut c).await;
    assert_eq!(
        ans,
        json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&pid(1)),
                           "offer_id": oa["offer_id"], "answer": {"type": "answer", "sdp": "ans"}})
    );
    silent(&mut b).await;
    silent(&mut a).await;
    // The same answer twice is refused: one answer per offer.
    assert_refused(&request(&mut a, a_answers).await, "not relayed");
    silent(&mut c).await;
}

/// A new connection, peer 3, announces torrent 1 with one offer, which goes to `a` (peer
/// 1, its only peer); returns the offerer's connection and the offer id.
async fn offer_to(h: &Harness, a: &mut Client) -> (Client, String) {
    let mut c = connect(h.addr).await;
    request(
        &mut c,
        with_offers(announce(ih(1), pid(3), Some(10), "started"), &[7]),
    )
    .await;
    let offer = recv(a).await;
    (c, offer["offer_id"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_answers_are_refused() {
    let h = start_default();
    let mut a = h.joined(1, 1, 0).await;
    let (mut c, offer_id) = offer_to(&h, &mut a).await;
    // M joins, then answers the offer that went to A, pretending to be A.
    let mut m = h.joined(1, 9, 10).await;
    let r = request(&mut m, answer(ih(1), pid(1), pid(3), &offer_id)).await;
    assert_eq!(r["action"], "announce");
    assert_eq!(r["info_hash"], bin(&ih(1)));
    assert_refused(&r, "not in the swarm on this connection");
    // ... or as itself.
    let r = request(&mut m, answer(ih(1), pid(9), pid(3), &offer_id)).await;
    assert_refused(&r, "not relayed");
    silent(&mut c).await;
    // The real answer still goes through.
    send(&mut a, answer(ih(1), pid(1), pid(3), &offer_id)).await;
    assert_eq!(recv(&mut c).await["peer_id"], bin(&pid(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_nobody_are_refused() {
    let h = start_default();
    let mut a = h.joined(1, 1, 0).await;
    // An offer id nobody sent, in a torrent, then in no torrent at all.
    for info in [1, 2] {
        let r = request(&mut a, answer(ih(info), pid(1), pid(3), &bin(&[5; 20]))).await;
        assert!(r["failure reason"].is_string());
    }
    // A real offer whose offerer has left before the answer.
    let (mut c, offer_id) = offer_to(&h, &mut a).await;
    request(&mut c, announce(ih(1), pid(3), Some(10), "stopped")).await;
    let r = request(&mut a, answer(ih(1), pid(1), pid(3), &offer_id)).await;
    assert_refused(&r, "left");
    silent(&mut c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_one_many_and_none() {
    let h = start(|ws| ws.full_scrape = true);
    let mut a = connect(h.addr).await;
    request(&mut a, announce(ih(1), pid(1), Some(0), "completed")).await;
    request(&mut a, announce(ih(2), pid(1), Some(5), "started")).await;
    let r = request(
        &mut a,
        json!({"action": "scrape", "info_hash": bin(&ih(1))}),
    )
    .await;
    assert_eq!(
        r,
        json!({"action": "scrape", "files": {bin(&ih(1)): {"complete": 1, "incomplete": 0, "downloaded": 1}},
                         "flags": {"min_request_interval": 120}})
    );
    let r = request(
        &mut a,
        json!({"action": "scrape", "info_hash": [bin(&ih(1)), bin(&ih(2)), bin(&ih(3))]}),
    )
    .await;
    assert_eq!(
        r["files"][bin(&ih(2))],
        json!({"complete": 0, "incomplete": 1, "downloaded": 0})
    );
    assert_eq!(
        r["files"][bin(&ih(3))],
        json!({"complete": 0, "incomplete": 0, "downloaded": 0})
    );
    let r = request(&mut a, json!({"action": "scrape"})).await;
    assert_eq!(r["files"].as_object().unwrap().len(), 2, "{r}");

    // Without full scrape, no info hash is refused.
    let h = start_default();
    let mut b = connect(h.addr).await;
    let r = request(&mut b, json!({"action": "scrape"})).await;
    assert_eq!(r["action"], "scrape");
    assert_refused(&r, "full scrape");
    let many: Vec<String> = (0..65).map(|i| bin(&ih(i))).collect();
    let r = request(&mut b, json!({"action": "scrape", "info_hash": many})).await;
    assert_refused(&r, "too many");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_removes_only_the_senders_own_peer() {
    let h = start_default();
    let _a = h.joined(1, 1, 5).await;
    let mut b = h.joined(1, 2, 5).await;
    // B claims A's peer id is stopping: A stays.
    let r = request(&mut b, announce(ih(1), pid(1), Some(5), "stopped")).await;
    assert_eq!(r["incomplete"], 2);
    let r = request(&mut b, announce(ih(1), pid(2), Some(5), "stopped")).await;
    assert_eq!(r["incomplete"], 1);
    assert!(h.has_peer(1, 1));
    assert!(!h.has_peer(1, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_removes_its_peers() {
    let h = start_default();
    let mut a = connect(h.addr).await;
    // One connection, several torrents (as Node clients do).
    for t in 1..=3 {
        request(&mut a, announce(ih(t), pid(1), Some(0), "started")).await;
    }
    let _b = h.joined(1, 2, 5).await;
    assert_eq!(h.ctx.core.webtorrent().scrape(&InfoHash(ih(1))).seeders, 1);
    // Dropped without a close frame.
    drop(a);
    eventually("peers of the dropped connection removed", || {
        (1..=3).all(|t| h.ctx.core.webtorrent().scrape(&InfoHash(ih(t))).seeders == 0)
    })
    .await;
    assert_eq!(h.ctx.core.webtorrent().scrape(&InfoHash(ih(1))).leechers, 1);
    eventually("registry emptied", || h.ctx.open_connections() == 1).await;
}

/// A client whose socket receive buffer (and with `small_send` its send buffer) is 4 KiB,
/// so that what the tracker writes to it backs up at once.
async fn small_buffer_client(addr: SocketAddr, small_send: bool) -> Client {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    if small_send {
        socket.set_send_buffer_size(4096).unwrap();
    }
    let stream = socket.connect(addr).await.unwrap();
    let url = format!("ws://{addr}/");
    let (c, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
        .await
        .unwrap();
    c
}

/// Peer 2 of torrent 1 announces `rounds` times with one 30 kB offer, which goes to peer 1
/// (the torrent's seeder, its only other peer) while peer 1's queue has room; each
/// announce is followed by a scrape, whose reply paces the next. Returns the offerer and
/// how many of its announces were answered: not those whose offer found no room (see
/// `an_announce_whose_offers_find_no_room_is_not_answered`).
async fn offers_to_peer_1(addr: SocketAddr, rounds: u32) -> (Client, u32) {
    let mut offerer = connect(addr).await;
    // Two messages a round: without this the second waits for the delayed ACK of the
    // first, and 300 rounds outlast the slow reader's `send_timeout`.
    if let MaybeTlsStream::Plain(tcp) = offerer.get_ref() {
        tcp.set_nodelay(true).unwrap();
    }
    let big_sdp = "x".repeat(30_000);
    let mut answered = 0;
    for round in 0..rounds {
        let mut v = announce(ih(1), pid(2), Some(5), "update");
        v["offers"] = json!([{"offer_id": bin(&[(round % 250) as u8 + 1; 20]), "offer": {"type": "offer", "sdp": big_sdp}}]);
        send(&mut offerer, v).await;
        send(
            &mut offerer,
            json!({"action": "scrape", "info_hash": bin(&ih(1))}),
        )
        .await;
        loop {
            let r = recv(&mut offerer).await;
            if r["action"] == "scrape" {
                break;
            }
            assert_eq!(r["complete"], 1, "{r}");
            answered += 1;
        }
    }
    (offerer, answered)
}

/// Under overload the tracker sheds the reply to an announce none of whose offers could
/// go: here the only peer that could take one has a full queue (it stopped reading). The
/// announce is still recorded, and once a peer with room is there the offerer's announces
/// are answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_whose_offers_find_no_room_is_not_answered() {
    let h = start(|ws| ws.outgoing_queue = 4);
    let mut stuck = small_buffer_client(h.addr, false).await;
    request(&mut stuck, announce(ih(1), pid(1), Some(0), "started")).await;
    let (mut offerer, answered) = offers_to_peer_1(h.addr, 300).await;
    // The first offers went (the buffers and the queue took them), the rest had no room.
    assert!((1..300).contains(&answered), "{answered} of 300 answered");
    assert!(h.has_peer(1, 2));
    // A seeder that reads joins: the offerer's next offer goes to it, and is answered.
    let mut reader = h.joined(1, 3, 0).await;
    let r = request(
        &mut offerer,
        with_offers(announce(ih(1), pid(2), Some(5), "update"), &[7]),
    )
    .await;
    assert_eq!(r["complete"], 2, "{r}");
    let offer = recv(&mut reader).await;
    assert_eq!(offer["peer_id"], bin(&pid(2)), "{offer}");
    // An announce without offers is always answered.
    let r = request(&mut offerer, announce(ih(1), pid(2), Some(5), "update")).await;
    assert_eq!(r["complete"], 2, "{r}");
}

/// An announce's offers go only into the places its connection has for their answers
/// (`ws.answer_queue`): those past them are shed, unread, so that one of them that is not
/// even an offer goes unnoticed; the offers that went are answered as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_past_the_answer_places_are_shed_unread() {
    let h = start(|ws| ws.answer_queue = 2);
    let mut readers = Vec::new();
    for peer in 1..=4 {
        readers.push((peer, h.joined(1, peer, 5).await));
    }
    let mut offerer = connect(h.addr).await;
    let mut a = with_offers(announce(ih(1), pid(9), Some(5), "started"), &[1, 2, 3, 4]);
    a["offers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"offer_id": 7}));
    let r = request(&mut offerer, a).await;
    assert!(r.get("failure reason").is_none(), "{r}");
    assert_eq!(r["incomplete"], 5, "{r}");
    // Two offers went, each to a different reader, which answers it.
    let mut offered = 0;
    for (peer, reader) in &mut readers {
        let Ok(m) = tokio::time::timeout(Duration::from_millis(500), reader.next()).await else {
            continue;
        };
        let m = m.expect("the reader's connection is open").unwrap();
        let v: serde_json::Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        assert_eq!(v["peer_id"], bin(&pid(9)), "{v}");
        let offer_id = v["offer_id"].as_str().unwrap();
        send(reader, answer(ih(1), pid(*peer), pid(9), offer_id)).await;
        offered += 1;
    }
    assert_eq!(offered, 2, "offers relayed to {offered} readers");
    for _ in 0..2 {
        let v = recv(&mut offerer).await;
        assert_eq!(v["answer"]["sdp"], "ans", "{v}");
    }
    // An offer whose id is not one is refused when it is read: here a place is free
    // again and peers take offers, so it is.
    let mut bad = announce(ih(1), pid(9), Some(5), "update");
    bad["offers"] = json!([{"offer_id": 7, "offer": {}}]);
    let r = request(&mut offerer, bad).await;
    assert_refused(&r, "invalid type: integer `7`");
}

/// A slow reader whose queue fills up while offers keep coming (a desktop client busy
/// with hundreds of torrents, a load tester) keeps its connection and its peers: the relays
/// that do not fit are dropped. Only a reader that stops reading for `send_timeout` goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_loses_relays_not_its_connection_and_a_stopped_one_times_out() {
    for send_timeout in [60, 1] {
        let h = start(|ws| {
            ws.outgoing_queue = 4;
            ws.send_timeout = send_timeout;
        });
        // The slow reader: small receive buffer, does not read after its announce.
        let mut slow = small_buffer_client(h.addr, false).await;
        request(&mut slow, announce(ih(1), pid(1), Some(0), "started")).await;
        let _offerer = offers_to_peer_1(h.addr, 300).await.0;
        if send_timeout == 1 {
            eventually("the reader that stopped reading closed", || {
                !h.has_peer(1, 1)
            })
            .await;
            continue;
        }
        // 300 offers of 30 kB cannot all have fit: the rest were dropped, and the reader is
        // still in the swarm and still served once it reads again.
        assert!(h.has_peer(1, 1), "the slow reader was disconnected");
        // It reads what was queued for it (until nothing comes for a second).
        let mut offers = 0;
        while let Ok(m) = tokio::time::timeout(Duration::from_secs(1), slow.next()).await {
            let m = m.expect("the slow reader's connection is alive").unwrap();
            let v: serde_json::Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
            assert!(v.get("offer").is_some(), "{v}");
            offers += 1;
        }
        assert!(
            (1..300).contains(&offers),
            "{offers} offers reached the slow reader"
        );
        let r = request(&mut slow, announce(ih(1), pid(1), Some(0), "update")).await;
        assert_eq!(r["complete"], 1, "{r}");
        assert!(h.has_peer(1, 1));
    }
}

/// An answer to a busy offerer reaches it, and before what was waiting for it: its offer
/// queue is full and a reply to its own announce was queued first, yet the answer (what
/// completes the WebRTC connection it started) is written next (`outbox`'s order: answers
/// and offers in turn, a reply after `ws.offers_per_reply` of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_a_busy_offerer_goes_before_its_replies_and_offers() {
    let h = start(|ws| ws.outgoing_queue = 4);
    // The offerer: small receive buffer, reads nothing from now on.
    let mut busy = small_buffer_client(h.addr, false).await;
    request(&mut busy, announce(ih(1), pid(1), Some(0), "started")).await;
    // The answerer, alone in torrent 2.
    let mut answerer = h.joined(2, 3, 5).await;
    // Another peer's big offers back up the offerer's socket and fill its offer queue.
    let _offers = offers_to_peer_1(h.addr, 300).await.0;
    // It offers in torrent 2 without reading the reply; the answerer answers.
    send(
        &mut busy,
        with_offers(announce(ih(2), pid(1), Some(0), "update"), &[9]),
    )
    .await;
    let offer = recv(&mut answerer).await;
    let offer_id = offer["offer_id"].as_str().unwrap().to_owned();
    send(&mut answerer, answer(ih(2), pid(3), pid(1), &offer_id)).await;
    // The answerer's next reply says the tracker has handled its answer.
    request(&mut answerer, announce(ih(2), pid(3), Some(5), "update")).await;
    // The offerer reads everything.
    let mut got = Vec::new();
    while let Ok(m) = tokio::time::timeout(Duration::from_secs(1), busy.next()).await {
        let m = m.expect("the offerer's connection is alive").unwrap();
        got.push(serde_json::from_str::<serde_json::Value>(m.to_text().unwrap()).unwrap());
    }
    let position = |what: &str, f: &dyn Fn(&serde_json::Value) -> bool| {
        got.iter()
            .position(f)
            .unwrap_or_else(|| panic!("no {what} among {} messages", got.len()))
    };
    let answered = position("answer", &|v| v["answer"]["sdp"] == "ans");
    let replied = position("reply in torrent 2", &|v| {
        v.get("complete").is_some() && v["info_hash"] == bin(&ih(2))
    });
    assert!(answered < replied, "answer {answered}, reply {replied}");
    // The offers that waited in its queue come after the answer.
    let offers_after = got[answered..]
        .iter()
        .filter(|v| v.get("offer").is_some())
        .count();
    assert_eq!(offers_after, 4, "{got:?}");
}

/// A client that reads one message for each it sends (aquatic_ws_load_test's clients do)
/// keeps its connection when the tracker has more for it than the TCP buffers hold: the
/// tracker goes on reading it while a write to it waits. When one task did both, the
/// client's write waited on the tracker's reading, which waited on the tracker's write,
/// which waited on the client's reading, until `send_timeout` closed the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reading_one_message_per_message_it_sends_keeps_its_connection() {
    let h = start(|ws| ws.send_timeout = 1);
    let mut lockstep = small_buffer_client(h.addr, true).await;
    request(&mut lockstep, announce(ih(1), pid(1), Some(0), "started")).await;
    // Another peer's offers pile up for it: more than the tracker's send buffer can take
    // (4 MiB at most on Linux).
    let _offerer = offers_to_peer_1(h.addr, 200).await.0;
    // Now it sends large messages (an unknown field pads them), reading one after each.
    let pad = "y".repeat(50_000);
    for _ in 0..100 {
        let mut v = announce(ih(1), pid(1), Some(0), "update");
        v["pad"] = json!(pad);
        tokio::time::timeout(WAIT, lockstep.send(Message::text(v.to_string())))
            .await
            .expect("the tracker took the message")
            .expect("the connection is open");
        let m = tokio::time::timeout(WAIT, lockstep.next())
            .await
            .expect("a message came")
            .expect("the connection is open");
        assert!(m.is_ok(), "{m:?}");
    }
    assert!(h.has_peer(1, 1), "the client was disconnected");
    // It reads the rest, and is still served.
    let mut replies = 0;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(1), lockstep.next()).await {
        let v: serde_json::Value = serde_json::from_str(m.unwrap().to_text().unwrap()).unwrap();
        replies += usize::from(v.get("complete").is_some());
    }
    assert!(replies > 0, "its own replies were sent too");
    let r = request(&mut lockstep, announce(ih(1), pid(1), Some(0), "update")).await;
    assert_eq!(r["complete"], 1, "{r}");
}

/// A connection announcing more torrents than `ws.max_torrents_per_connection` gets no
/// error: its least recently announced torrent leaves its swarm to make room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_torrent_bound_the_oldest_torrent_of_a_connection_leaves() {
    let h = start(|ws| ws.max_torrents_per_connection = 3);
    let mut a = connect(h.addr).await;
    for t in 1..=3 {
        let r = request(&mut a, announce(ih(t), pid(1), Some(5), "started")).await;
        assert!(r.get("failure reason").is_none(), "{r}");
    }
    // Torrent 1 announced again: 2 is now the oldest.
    request(&mut a, announce(ih(1), pid(1), Some(5), "update")).await;
    let r = request(&mut a, announce(ih(4), pid(1), Some(5), "started")).await;
    assert!(r.get("failure reason").is_none(), "{r}");
    assert_eq!(r["incomplete"], 1, "{r}");
    let present: Vec<bool> = (1..=4).map(|t| h.has_peer(t, 1)).collect();
    assert_eq!(present, [true, false, true, true]);
    // The evicted torrent can come back (evicting the next oldest, 3).
    request(&mut a, announce(ih(2), pid(1), Some(5), "started")).await;
    let present: Vec<bool> = (1..=4).map(|t| h.has_peer(t, 1)).collect();
    assert_eq!(present, [true, true, false, true]);
    // Closing removes exactly what is left.
    drop(a);
    eventually("the connection's peers left", || {
        (1..=4).all(|t| !h.has_peer(t, 1))
    })
    .await;
}

/// Every kind of bad input gets a `failure reason`; after `max_strikes` of them the
/// connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_gets_a_failure_reason_then_a_close() {
    let h = start(|ws| ws.max_strikes = 100);
    let mut a = connect(h.addr).await;
    // A peer for offers to go to: an offer is read only when it finds one.
    let _peer = h.joined(1, 2, 5).await;
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "invalid message"),
        ("[1,2,3]".into(), "invalid message"),
        ("{}".into(), "missing field action"),
        (r#"{"action":"dance"}"#.into(), "unknown action"),
        (r#"{"action":7}"#.into(), "invalid type"),
        (json!({"action": "announce", "peer_id": bin(&pid(1))}).to_string(), "missing field info_hash"),
        (json!({"action": "announce", "info_hash": bin(&ih(1))}).to_string(), "missing field peer_id"),
        (json!({"action": "announce", "info_hash": "short", "peer_id": bin(&pid(1))}).to_string(), "info_hash must be 20 bytes"),
        (json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&[1; 21])}).to_string(), "peer_id must be 20 bytes"),
        (json!({"action": "announce", "info_hash": "\u{263a}".repeat(20), "peer_id": bin(&pid(1))}).to_string(), "above U+00FF"),
        (json!({"action": "announce", "info_hash": 5, "peer_id": bin(&pid(1))}).to_string(), "invalid type"),
        (json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&pid(1)), "left": "lots"}).to_string(), "invalid type"),
        (json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&pid(1)), "event": "dance"}).to_string(), "unknown event"),
        (json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&pid(1)), "offers": [{"offer_id": 3, "offer": {}}]}).to_string(), "invalid type"),
        (json!({"action": "announce", "info_hash": bin(&ih(1)), "peer_id": bin(&pid(1)), "answer": {}}).to_string(), "missing field to_peer_id"),
        (json!({"action": "scrape", "info_hash": [bin(&ih(1)), 4]}).to_string(), "invalid type"),
    ];
    for (text, want) in &cases {
        a.send(Message::text(text.clone())).await.unwrap();
        let r = recv(&mut a).await;
        let reason = r["failure reason"]
            .as_str()
            .unwrap_or_else(|| panic!("{text}: {r}"));
        assert!(reason.contains(want), "{text}: {reason}");
    }
    // The failure is addressed to the torrent when the info hash could be read.
    let r = request(
        &mut a,
        json!({"action": "announce", "info_hash": bin(&ih(4)), "peer_id": 1}),
    )
    .await;
    assert_eq!(
        (r["action"].as_str(), r["info_hash"].as_str()),
        (Some("announce"), Some(bin(&ih(4)).as_str()))
    );
    // Binary frames are read as JSON text too (and refused when they are not).
    a.send(Message::binary(vec![0xff, 0, 1])).await.unwrap();
    assert!(recv(&mut a).await["failure reason"].is_string());
    // The connection still works.
    let r = request(&mut a, announce(ih(1), pid(1), Some(0), "started")).await;
    assert_eq!(r["complete"], 1);

    // With the default of 5 strikes: 5 bad messages, 5 failures, then a close.
    let h = start_default();
    let mut b = connect(h.addr).await;
    for _ in 0..5 {
        b.send(Message::text("{")).await.unwrap();
        assert!(recv(&mut b).await["failure reason"].is_string());
    }
    assert_closed_with(&mut b, 1008).await;
}

/// Asserts that the next frame is a close with `code`.
async fn assert_closed_with(c: &mut Client, code: u16) {
    let m = tokio::time::timeout(WAIT, c.next()).await.unwrap();
    assert!(
        matches!(m, Some(Ok(Message::Close(Some(ref f)))) if u16::from(f.code) == code),
        "{m:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_messages_are_refused_and_closed() {
    let h = start(|ws| {
        ws.max_message_size = 4096;
        ws.max_frame_size = 4096;
    });
    let mut a = connect(h.addr).await;
    a.send(Message::text("x".repeat(5000))).await.unwrap();
    assert_refused(&recv(&mut a).await, "too large");
    assert_closed_with(&mut a, 1009).await;
    eventually("connection slot released", || h.ctx.open_connections() == 0).await;
    // Past twice the limit the message is not even read: closed at once, also 1009.
    let mut b = connect(h.addr).await;
    b.send(Message::text("x".repeat(9000))).await.unwrap();
    assert_closed_with(&mut b, 1009).await;
    eventually("connection slot released", || h.ctx.open_connections() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_maximum_get_503() {
    let h = start(|ws| ws.max_connections = 2);
    let _a = connect(h.addr).await;
    let _b = connect(h.addr).await;
    let err = tokio_tungstenite::connect_async(format!("ws://{}/", h.addr))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("503"), "{err}");
    drop(_a);
    eventually("slot freed", || h.ctx.open_connections() == 1).await;
    let _c = connect(h.addr).await;
}

/// A silent client is pinged; one that answers pings stays, one that never reads nor
/// answers is closed after the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_pinged_then_closed() {
    let h = start(|ws| {
        ws.ping_interval = 1;
        ws.idle_timeout = 2;
    });
    // A raw client: handshake by hand, then silence.
    let mut raw = TcpStream::connect(h.addr).await.unwrap();
    raw.write_all(b"GET /announce HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(8), async {
        loop {
            let n = raw.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(closed.is_ok(), "idle connection not closed");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{text}"
    );
    assert!(
        text.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
        "{text}"
    );
    let head_end = text.find("\r\n\r\n").unwrap() + 4;
    assert_eq!(got[head_end], 0x89, "a ping frame follows the handshake");

    // A client that keeps reading answers the pings and stays past the idle timeout.
    let mut a = connect(h.addr).await;
    let stayed = tokio::time::timeout(Duration::from_secs(4), a.next()).await;
    assert!(
        stayed.is_err() || matches!(stayed, Ok(Some(Ok(Message::Ping(_))))),
        "{stayed:?}"
    );
    let r = request(&mut a, announce(ih(1), pid(1), Some(0), "started")).await;
    assert_eq!(r["complete"], 1);
}
