//! A BEP 15 client on one socket, for tests that load the tracker or look at it through
//! UDP: connect, pipelined announces with a window in flight, single announces and
//! scrapes decoded with shoal-proto.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, ScrapeRequest, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

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

    /// Writes the announce `a` under transaction id `tid` into `out` (cleared first).
    pub fn write_announce(&mut self, a: &Ann, tid: u32, out: &mut Vec<u8>) {
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

    /// Announces once with what the client reports and BEP 41 URL data (`url`, e.g.
    /// `/<passkey>/announce`); returns the reply's (leechers, seeders, peer ports), or the
    /// error datagram's text.
    pub fn announce_reporting(
        &mut self,
        a: &Ann,
        uploaded: u64,
        downloaded: u64,
        url: Option<&str>,
    ) -> Result<(u32, u32, Vec<u16>), String> {
        let tid = self.next_tid();
        let mut out = Vec::new();
        Request::Announce(AnnounceRequest {
            connection_id: self.cid,
            transaction_id: TransactionId(tid),
            info_hash: a.info_hash,
            peer_id: a.peer_id,
            downloaded,
            left: a.left,
            uploaded,
            event: a.event,
            ip: [0; 4],
            key: 0,
            numwant: a.numwant,
            port: a.port,
        })
        .write(&mut out);
        if let Some(url) = url {
            // BEP 41: option 2 (URL data) in chunks of at most 255 bytes, then end of options.
            for chunk in url.as_bytes().chunks(255) {
                out.extend_from_slice(&[2, chunk.len() as u8]);
                out.extend_from_slice(chunk);
            }
            out.push(0);
        }
        self.socket.send_to(&out, self.tracker).unwrap();
        let mut buf = [0u8; 8192];
        let (n, _) = self.socket.recv_from(&mut buf).map_err(|e| e.to_string())?;
        match Response::parse(&buf[..n], false).map_err(|e| format!("{e:?}"))? {
            Response::AnnounceV4 { header, peers } => {
                assert_eq!(header.transaction_id.0, tid);
                let ports = peers.iter().map(|p| p.port()).collect();
                Ok((header.leechers, header.seeders, ports))
            }
            Response::Error { message, .. } => Err(String::from_utf8_lossy(message).into_owned()),
            other => Err(format!("unexpected {other:?}")),
        }
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
