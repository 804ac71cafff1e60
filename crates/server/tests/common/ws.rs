//! WebTorrent clients for the tests: tokio-tungstenite connections speaking the JSON the
//! reference client speaks, builders of its messages, and waiting without blocking the
//! test's runtime.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use shoal_proto::ws::encode_binary;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub const WAIT: Duration = Duration::from_secs(5);

pub async fn connect(addr: SocketAddr) -> Client {
    connect_to(addr, "/announce").await
}

/// A connection whose upgrade request asks for `path` (a passkey path, any path).
pub async fn connect_to(addr: SocketAddr, path: &str) -> Client {
    let (c, resp) = tokio_tungstenite::connect_async(format!("ws://{addr}{path}"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 101);
    c
}

pub async fn send(c: &mut Client, v: Value) {
    c.send(Message::text(v.to_string())).await.unwrap();
}

/// The next text message, as JSON (fails the test after 5 s).
pub async fn recv(c: &mut Client) -> Value {
    loop {
        let m = tokio::time::timeout(WAIT, c.next())
            .await
            .expect("no message within 5 s");
        match m.expect("connection closed").expect("read error") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Sends `v` and returns the next message (the reply, unless a relay comes first).
pub async fn request(c: &mut Client, v: Value) -> Value {
    send(c, v).await;
    recv(c).await
}

/// Asserts that `reply` is a refusal whose reason contains `text`.
pub fn assert_refused(reply: &Value, text: &str) {
    let reason = reply["failure reason"]
        .as_str()
        .unwrap_or_else(|| panic!("not a refusal: {reply}"));
    assert!(reason.contains(text), "{reply}");
}

/// Waits (every 50 ms, at most 5 s) until `f` holds, without blocking the runtime.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within 5 s");
}

/// Asserts that nothing arrives for a while.
pub async fn silent(c: &mut Client) {
    match tokio::time::timeout(Duration::from_millis(300), c.next()).await {
        Err(_) => {}
        Ok(m) => panic!("unexpected message {m:?}"),
    }
}

pub fn bin(b: &[u8]) -> String {
    encode_binary(b)
}

pub fn announce(info_hash: [u8; 20], peer: [u8; 20], left: Option<u64>, event: &str) -> Value {
    json!({"action": "announce", "info_hash": bin(&info_hash), "peer_id": bin(&peer),
           "numwant": 5, "uploaded": 0, "downloaded": 0, "left": left, "event": event})
}

pub fn with_offers(mut v: Value, ids: &[u8]) -> Value {
    let offers: Vec<Value> = ids
        .iter()
        .map(|&i| json!({"offer_id": bin(&[i; 20]), "offer": {"type": "offer", "sdp": format!("sdp-{i}")}}))
        .collect();
    v["offers"] = json!(offers);
    v
}

pub fn answer(info_hash: [u8; 20], from: [u8; 20], to: [u8; 20], offer_id: &str) -> Value {
    json!({"action": "announce", "info_hash": bin(&info_hash), "peer_id": bin(&from),
           "to_peer_id": bin(&to), "offer_id": offer_id, "answer": {"type": "answer", "sdp": "ans"}})
}
