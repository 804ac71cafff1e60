//! Helpers for tests that run the real `shoal` binary: start it with a config file, read
//! its output, stop it with a signal, and talk BEP 15 to it with pipelined announces; and
//! WebTorrent clients (module `ws`) for the tests that speak WebSocket.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, ScrapeRequest, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shoal-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A UDP port free right now on 127.0.0.1.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `shoal` process, its output collected line by line.
pub struct Shoal {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Shoal {
    /// Starts `shoal --config <dir>/<name>.toml` with `config` as the file's text and
    /// waits (at most 20 s) until it says it listens.
    pub fn start(dir: &Path, name: &str, config: &str) -> Self {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .arg("--config")
            .arg(&path)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting shoal");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let shoal = Self { child, lines };
        shoal.wait_for("listening on", Duration::from_secs(20));
        shoal
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits until a line containing `text` appears; returns it. Panics with the output so
    /// far after `timeout`.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| l.contains(text)) {
                return l.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no line with {text:?} in {timeout:?}; output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Sends SIGTERM and waits (at most 30 s) for a clean exit.
    pub fn stop(mut self) -> String {
        self.terminate();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                assert!(
                    status.success(),
                    "exit {status}; output:\n{}",
                    self.output()
                );
                return self.output();
            }
            assert!(
                Instant::now() < deadline,
                "did not exit:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Shoal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One announce to send.
#[derive(Clone, Copy, Debug)]
pub struct Ann {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub port: u16,
    pub left: u64,
    pub event: AnnounceEvent,
    pub numwant: i32,
}

/// A BEP 15 client on one socket.
pub struct Client {
    pub socket: UdpSocket,
    pub tracker: SocketAddr,
    pub cid: ConnectionId,
    tid: u32,
}

impl Client {
    pub fn new(tracker: SocketAddr) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        Self {
            socket,
            tracker,
            cid: ConnectionId(0),
            tid: 0,
        }
    }

    fn next_tid(&mut self) -> u32 {
        self.tid = self.tid.wrapping_add(1);
        self.tid
    }

    /// Gets a connection id (a few tries: the tracker may just be starting).
    pub fn connect(&mut self) {
        for _ in 0..20 {
            let tid = self.next_tid();
            let mut out = Vec::new();
            Request::Connect(ConnectRequest {
                transaction_id: TransactionId(tid),
            })
            .write(&mut out);
            self.socket.send_to(&out, self.tracker).unwrap();
            let mut buf = [0u8; 64];
            if let Ok((n, _)) = self.socket.recv_from(&mut buf) {
                if let Ok(Response::Connect {
                    transaction_id,
                    connection_id,
                }) = Response::parse(&buf[..n], false)
                {
                    if transaction_id.0 == tid {
                        self.cid = connection_id;
                        return;
                    }
                }
            }
        }
        panic!("no connect reply from {}", self.tracker);
    }

    fn write_announce(&mut self, a: &Ann, tid: u32, out: &mut Vec<u8>) {
        out.clear();
        Request::Announce(AnnounceRequest {
            connection_id: self.cid,
            transaction_id: TransactionId(tid),
            info_hash: a.info_hash,
            peer_id: a.peer_id,
            downloaded: 0,
            left: a.left,
            uploaded: 0,
            event: a.event,
            ip: [0; 4],
            key: 0,
            numwant: a.numwant,
            port: a.port,
        })
        .write(out);
    }

    /// Sends `anns` with up to `window` in flight. Returns, per announce, whether a reply
    /// came (no retries: a missing reply is counted, not hidden).
    pub fn announce_all(&mut self, anns: &[Ann], window: usize) -> Vec<bool> {
        let mut answered = vec![false; anns.len()];
        let mut pending: HashMap<u32, usize> = HashMap::new();
        let mut next = 0;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while next < anns.len() || !pending.is_empty() {
            while next < anns.len() && pending.len() < window {
                let tid = self.next_tid();
                self.write_announce(&anns[next], tid, &mut out);
                self.socket.send_to(&out, self.tracker).unwrap();
                pending.insert(tid, next);
                next += 1;
            }
            match self.socket.recv_from(&mut buf) {
                Ok((n, _)) if n >= 8 => {
                    let tid = u32::from_be_bytes(buf[4..8].try_into().unwrap());
                    let action = u32::from_be_bytes(buf[..4].try_into().unwrap());
                    if let Some(i) = pending.remove(&tid) {
                        answered[i] = action == 1;
                    }
                }
                Ok(_) => {}
                // Timed out: whatever is pending is lost.
                Err(_) => pending.clear(),
            }
        }
        answered
    }

    /// Announces once and returns the reply's (leechers, seeders, peer ports).
    pub fn announce(&mut self, a: &Ann) -> Option<(u32, u32, Vec<u16>)> {
        let tid = self.next_tid();
        let mut out = Vec::new();
        self.write_announce(a, tid, &mut out);
        self.socket.send_to(&out, self.tracker).unwrap();
        let mut buf = [0u8; 8192];
        let (n, _) = self.socket.recv_from(&mut buf).ok()?;
        match Response::parse(&buf[..n], false).ok()? {
            Response::AnnounceV4 { header, peers } => {
                assert_eq!(header.transaction_id.0, tid);
                let ports = peers.iter().map(|p| p.port()).collect();
                Some((header.leechers, header.seeders, ports))
            }
            _ => None,
        }
    }

    /// Scrapes and returns (seeders, completed, leechers) per hash.
    pub fn scrape(&mut self, hashes: &[InfoHash]) -> Option<Vec<(u32, u32, u32)>> {
        let tid = self.next_tid();
        let mut out = Vec::new();
        Request::Scrape(ScrapeRequest {
            connection_id: self.cid,
            transaction_id: TransactionId(tid),
            info_hashes: hashes,
        })
        .write(&mut out);
        self.socket.send_to(&out, self.tracker).unwrap();
        let mut buf = [0u8; 8192];
        let (n, _) = self.socket.recv_from(&mut buf).ok()?;
        match Response::parse(&buf[..n], false).ok()? {
            Response::Scrape { stats, .. } => Some(
                stats
                    .iter()
                    .map(|s| (s.seeders(), s.completed(), s.leechers()))
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// One HTTP/1.1 request over a fresh connection; returns (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    // The admin listener answers with Content-Length, never chunked.
    (status, body.to_string())
}

/// WebTorrent clients for the tests: tokio-tungstenite connections speaking the JSON the
/// reference client speaks, and builders of its messages.
pub mod ws {
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
        let (c, resp) = tokio_tungstenite::connect_async(format!("ws://{addr}/announce"))
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
}
