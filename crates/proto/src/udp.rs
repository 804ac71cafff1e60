//! BEP 15, the UDP tracker protocol, with BEP 41 options.
//!
//! Both directions are here: the tracker parses [`Request`]s and writes [`Response`]s, the
//! load generator and the tests write requests and parse responses. Parsing borrows from
//! the packet (info hashes and peers are cast in place, never copied), and writing goes into
//! a caller's buffer, so neither allocates: a UDP worker answers a request without touching
//! the heap.
//!
//! A request that is too short to carry a connection id and a transaction id cannot be
//! answered at all; anything longer that is still malformed parses to a
//! [`RequestParseError::Answerable`] carrying both ids, so the server can check the
//! connection id and only then send a BEP 15 error (never to a spoofed address).

use bytemuck::{Pod, Zeroable};
use thiserror::Error;

use crate::common::{AnnounceEvent, CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use crate::path::{
    parse_path_with_query, parse_target_path, split_target, PathError, TrackerPath, MAX_PATH_LEN,
};

/// The magic constant a connect request starts with.
pub const PROTOCOL_ID: u64 = 0x0417_2710_1980;

pub const ACTION_CONNECT: u32 = 0;
pub const ACTION_ANNOUNCE: u32 = 1;
pub const ACTION_SCRAPE: u32 = 2;
pub const ACTION_ERROR: u32 = 3;

/// Bytes of a connect request.
pub const CONNECT_REQUEST_LEN: usize = 16;
/// Bytes of an announce request before any BEP 41 options.
pub const ANNOUNCE_REQUEST_LEN: usize = 98;
/// Bytes of a scrape request header (before the info hashes).
pub const SCRAPE_REQUEST_HEADER_LEN: usize = 16;
/// Bytes of an announce response header (before the peers).
pub const ANNOUNCE_RESPONSE_HEADER_LEN: usize = 20;

/// The id a tracker hands out on connect and checks on every later request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ConnectionId(pub u64);

/// The client's id of one request, echoed in its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TransactionId(pub u32);

/// A request from a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    Connect(ConnectRequest),
    Announce(AnnounceRequest),
    Scrape(ScrapeRequest<'a>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    pub transaction_id: TransactionId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnounceRequest {
    pub connection_id: ConnectionId,
    pub transaction_id: TransactionId,
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub downloaded: u64,
    pub left: u64,
    pub uploaded: u64,
    pub event: AnnounceEvent,
    /// The address the client claims (0 = use the packet's source). Only honoured when the
    /// operator allows it.
    pub ip: [u8; 4],
    pub key: u32,
    /// Number of peers wanted; negative means "tracker's default".
    pub numwant: i32,
    pub port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrapeRequest<'a> {
    pub connection_id: ConnectionId,
    pub transaction_id: TransactionId,
    /// At least one; cast in place from the packet.
    pub info_hashes: &'a [InfoHash],
}

/// Why a request could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RequestParseError {
    /// Too short to carry the ids, or a connect request with the wrong magic: drop it.
    #[error("unanswerable packet")]
    Unanswerable,
    /// Malformed past the header: answer with an error once the connection id checks out.
    #[error("{message}")]
    Answerable {
        connection_id: ConnectionId,
        transaction_id: TransactionId,
        message: &'static str,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl<'a> Request<'a> {
    /// Parses one request datagram. Trailing bytes after a complete request are ignored
    /// (clients pad, and BEP 41 options follow an announce).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RequestParseError> {
        if bytes.len() < 16 {
            return Err(RequestParseError::Unanswerable);
        }
        let connection_id = ConnectionId(u64_at(bytes, 0));
        let action = u32_at(bytes, 8);
        let transaction_id = TransactionId(u32_at(bytes, 12));
        let fail = |message| RequestParseError::Answerable {
            connection_id,
            transaction_id,
            message,
        };
        match action {
            ACTION_CONNECT => {
                if connection_id.0 != PROTOCOL_ID {
                    return Err(RequestParseError::Unanswerable);
                }
                Ok(Request::Connect(ConnectRequest { transaction_id }))
            }
            ACTION_ANNOUNCE => {
                if bytes.len() < ANNOUNCE_REQUEST_LEN {
                    return Err(fail("announce request too short"));
                }
                let event = match u32_at(bytes, 80) {
                    0 => AnnounceEvent::None,
                    1 => AnnounceEvent::Completed,
                    2 => AnnounceEvent::Started,
                    3 => AnnounceEvent::Stopped,
                    _ => return Err(fail("invalid event")),
                };
                let mut info_hash = [0u8; 20];
                info_hash.copy_from_slice(&bytes[16..36]);
                let mut peer_id = [0u8; 20];
                peer_id.copy_from_slice(&bytes[36..56]);
                let mut ip = [0u8; 4];
                ip.copy_from_slice(&bytes[84..88]);
                Ok(Request::Announce(AnnounceRequest {
                    connection_id,
                    transaction_id,
                    info_hash: InfoHash(info_hash),
                    peer_id: PeerId(peer_id),
                    downloaded: u64_at(bytes, 56),
                    left: u64_at(bytes, 64),
                    uploaded: u64_at(bytes, 72),
                    event,
                    ip,
                    key: u32_at(bytes, 88),
                    numwant: u32_at(bytes, 92) as i32,
                    port: u16::from_be_bytes([bytes[96], bytes[97]]),
                }))
            }
            ACTION_SCRAPE => {
                let body = &bytes[SCRAPE_REQUEST_HEADER_LEN..];
                let n = body.len() / 20;
                if n == 0 {
                    return Err(fail("scrape request without info hash"));
                }
                // A partial trailing hash is ignored, like any other trailing bytes.
                let info_hashes: &[InfoHash] = bytemuck::cast_slice(&body[..n * 20]);
                Ok(Request::Scrape(ScrapeRequest {
                    connection_id,
                    transaction_id,
                    info_hashes,
                }))
            }
            _ => Err(fail("unknown action")),
        }
    }

    /// Appends this request's wire form to `out` (for clients and tests).
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Request::Connect(r) => {
                out.extend_from_slice(&PROTOCOL_ID.to_be_bytes());
                out.extend_from_slice(&ACTION_CONNECT.to_be_bytes());
                out.extend_from_slice(&r.transaction_id.0.to_be_bytes());
            }
            Request::Announce(r) => {
                out.extend_from_slice(&r.connection_id.0.to_be_bytes());
                out.extend_from_slice(&ACTION_ANNOUNCE.to_be_bytes());
                out.extend_from_slice(&r.transaction_id.0.to_be_bytes());
                out.extend_from_slice(&r.info_hash.0);
                out.extend_from_slice(&r.peer_id.0);
                out.extend_from_slice(&r.downloaded.to_be_bytes());
                out.extend_from_slice(&r.left.to_be_bytes());
                out.extend_from_slice(&r.uploaded.to_be_bytes());
                let event: u32 = match r.event {
                    AnnounceEvent::None => 0,
                    AnnounceEvent::Completed => 1,
                    AnnounceEvent::Started => 2,
                    AnnounceEvent::Stopped => 3,
                };
                out.extend_from_slice(&event.to_be_bytes());
                out.extend_from_slice(&r.ip);
                out.extend_from_slice(&r.key.to_be_bytes());
                out.extend_from_slice(&r.numwant.to_be_bytes());
                out.extend_from_slice(&r.port.to_be_bytes());
            }
            Request::Scrape(r) => {
                out.extend_from_slice(&r.connection_id.0.to_be_bytes());
                out.extend_from_slice(&ACTION_SCRAPE.to_be_bytes());
                out.extend_from_slice(&r.transaction_id.0.to_be_bytes());
                out.extend_from_slice(bytemuck::cast_slice(r.info_hashes));
            }
        }
    }
}

/// Appends BEP 41 URL-data options carrying `path_and_query` (split into 255-byte
/// chunks). Like libtorrent, no end-of-options byte: the packet's end ends the options.
pub fn write_url_data_option(path_and_query: &[u8], out: &mut Vec<u8>) {
    for chunk in path_and_query.chunks(255) {
        out.push(0x2);
        out.push(chunk.len() as u8);
        out.extend_from_slice(chunk);
    }
}

/// Collects the BEP 41 URL data after an announce (`tail` is what follows the 98 bytes)
/// into `out`, returning how many bytes were written. Malformed or truncated options end
/// the scan: options are advisory, so a bad one never fails the announce. URL data longer
/// than `out` is cut at its length.
pub fn url_data(tail: &[u8], out: &mut [u8]) -> usize {
    collect_url_data(tail, out).0
}

/// [`url_data`], also saying whether the URL data was cut short by `out`.
fn collect_url_data(tail: &[u8], out: &mut [u8]) -> (usize, bool) {
    let mut i = 0;
    let mut n = 0;
    let mut cut = false;
    while i < tail.len() {
        match tail[i] {
            0x0 => break,
            0x1 => i += 1,
            0x2 => {
                let Some(&len) = tail.get(i + 1) else { break };
                let Some(data) = tail.get(i + 2..i + 2 + len as usize) else {
                    break;
                };
                let take = data.len().min(out.len() - n);
                cut |= take < data.len();
                out[n..n + take].copy_from_slice(&data[..take]);
                n += take;
                i += 2 + len as usize;
            }
            _ => break,
        }
    }
    (n, cut)
}

/// Bytes of the buffer [`url_data_path`] collects BEP 41 URL data into. Longer than any
/// path that parses ([`MAX_PATH_LEN`]), so URL data cut short by it held no valid path
/// before its query.
pub const URL_PATH_BUFFER: usize = 128;
const _: () = assert!(URL_PATH_BUFFER > MAX_PATH_LEN);

/// The tracker path in an announce's BEP 41 URL data (`tail` is what follows the 98
/// bytes), read by the parser every protocol uses ([`crate::path::parse_target_path`]):
/// `udp://host:port/<passkey>/announce` arrives as URL data `/<passkey>/announce`,
/// `udp://host:port/announce.php?passkey=<key>` as `/announce.php?passkey=<key>` (the
/// query's `passkey` is the key; its other parameters are ignored). `None` when there is
/// no URL data at all (a plain BEP 15 announce, padding). `buf` is the caller's, so that nothing is allocated; the passkey
/// borrows from it.
pub fn url_data_path<'b>(
    tail: &[u8],
    buf: &'b mut [u8; URL_PATH_BUFFER],
) -> Option<Result<TrackerPath<'b>, PathError>> {
    if tail.is_empty() {
        return None;
    }
    let (n, cut) = collect_url_data(tail, buf);
    if n == 0 {
        return None;
    }
    let data: &'b [u8] = &buf[..n];
    if !cut {
        return Some(parse_target_path(data));
    }
    Some(cut_target_path(data))
}

/// Reads URL data cut short by the buffer. A path that parses is shorter than the buffer,
/// so a cut can only fall in the query, and the query's last pair may be cut inside its
/// value: `passkey=abcd` there may be the first letters of a longer key. So the last
/// pair is left out, and the query's `passkey` is taken only where it stands whole before
/// it; where none does, the whole query might still have one further on, and the URL data
/// is no path this tracker can read (an error: a private tracker asks for a passkey, a
/// public one serves the announce as it would without URL data).
fn cut_target_path(data: &[u8]) -> Result<TrackerPath<'_>, PathError> {
    let (path, query) = split_target(data);
    if query.len() + path.len() + 1 < data.len() {
        // A `#` ended the query before the cut: what follows it is never read.
        return parse_target_path(data);
    }
    let whole = match query.iter().rposition(|&b| b == b'&') {
        Some(last) => &query[..last],
        None => &query[..0],
    };
    let parsed = parse_path_with_query(path, whole)?;
    let has_key = whole
        .split(|&b| b == b'&')
        .any(|pair| pair.starts_with(b"passkey=") && pair.len() > b"passkey=".len());
    if has_key {
        Ok(parsed)
    } else {
        Err(PathError::UnknownPath)
    }
}

/// Per-torrent figures in a scrape response, in wire order, big-endian, cast in place.
#[derive(Clone, Copy, PartialEq, Eq, Default, Pod, Zeroable)]
#[repr(transparent)]
pub struct ScrapeStats(pub [u8; 12]);

impl ScrapeStats {
    pub fn new(seeders: u32, completed: u32, leechers: u32) -> Self {
        let mut b = [0u8; 12];
        b[..4].copy_from_slice(&seeders.to_be_bytes());
        b[4..8].copy_from_slice(&completed.to_be_bytes());
        b[8..].copy_from_slice(&leechers.to_be_bytes());
        Self(b)
    }
    pub fn seeders(&self) -> u32 {
        u32_at(&self.0, 0)
    }
    pub fn completed(&self) -> u32 {
        u32_at(&self.0, 4)
    }
    pub fn leechers(&self) -> u32 {
        u32_at(&self.0, 8)
    }
}

impl std::fmt::Debug for ScrapeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScrapeStats")
            .field("seeders", &self.seeders())
            .field("completed", &self.completed())
            .field("leechers", &self.leechers())
            .finish()
    }
}

/// Swarm figures at the head of an announce response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AnnounceHeader {
    pub transaction_id: TransactionId,
    pub interval: u32,
    pub leechers: u32,
    pub seeders: u32,
}

/// A response from the tracker. Peer lists and scrape figures borrow their wire form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response<'a> {
    Connect {
        transaction_id: TransactionId,
        connection_id: ConnectionId,
    },
    AnnounceV4 {
        header: AnnounceHeader,
        peers: &'a [CompactPeerV4],
    },
    AnnounceV6 {
        header: AnnounceHeader,
        peers: &'a [CompactPeerV6],
    },
    Scrape {
        transaction_id: TransactionId,
        stats: &'a [ScrapeStats],
    },
    Error {
        transaction_id: TransactionId,
        message: &'a [u8],
    },
}

/// Why a response could not be parsed (client side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ResponseParseError {
    #[error("response too short")]
    TooShort,
    #[error("unknown action {0}")]
    UnknownAction(u32),
    #[error("peer list is not a whole number of peers")]
    RaggedPeers,
    #[error("scrape figures are not a whole number of torrents")]
    RaggedScrape,
}

impl<'a> Response<'a> {
    /// Bytes this response takes on the wire.
    pub fn len(&self) -> usize {
        match self {
            Response::Connect { .. } => 16,
            Response::AnnounceV4 { peers, .. } => ANNOUNCE_RESPONSE_HEADER_LEN + peers.len() * 6,
            Response::AnnounceV6 { peers, .. } => ANNOUNCE_RESPONSE_HEADER_LEN + peers.len() * 18,
            Response::Scrape { stats, .. } => 8 + stats.len() * 12,
            Response::Error { message, .. } => 8 + message.len(),
        }
    }

    /// Always false: every response has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the response into `out` and returns the number of bytes written, or `None`
    /// if `out` is too small (the caller sizes its buffers for the largest response it
    /// allows, so this is a configuration bug, not a client's fault).
    pub fn write(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.len();
        let out = out.get_mut(..len)?;
        let (action, tid) = match self {
            Response::Connect { transaction_id, .. } => (ACTION_CONNECT, transaction_id),
            Response::AnnounceV4 { header, .. } | Response::AnnounceV6 { header, .. } => {
                (ACTION_ANNOUNCE, &header.transaction_id)
            }
            Response::Scrape { transaction_id, .. } => (ACTION_SCRAPE, transaction_id),
            Response::Error { transaction_id, .. } => (ACTION_ERROR, transaction_id),
        };
        out[..4].copy_from_slice(&action.to_be_bytes());
        out[4..8].copy_from_slice(&tid.0.to_be_bytes());
        let body = &mut out[8..];
        match self {
            Response::Connect { connection_id, .. } => {
                body.copy_from_slice(&connection_id.0.to_be_bytes());
            }
            Response::AnnounceV4 { header, peers } => {
                write_announce_header(header, body);
                body[12..].copy_from_slice(bytemuck::cast_slice(peers));
            }
            Response::AnnounceV6 { header, peers } => {
                write_announce_header(header, body);
                body[12..].copy_from_slice(bytemuck::cast_slice(peers));
            }
            Response::Scrape { stats, .. } => body.copy_from_slice(bytemuck::cast_slice(stats)),
            Response::Error { message, .. } => body.copy_from_slice(message),
        }
        Some(len)
    }

    /// Parses a response. `ipv6` says which peer size to expect in an announce response:
    /// BEP 15 leaves it implied by the address family the request was sent over.
    pub fn parse(bytes: &'a [u8], ipv6: bool) -> Result<Self, ResponseParseError> {
        if bytes.len() < 8 {
            return Err(ResponseParseError::TooShort);
        }
        let action = u32_at(bytes, 0);
        let transaction_id = TransactionId(u32_at(bytes, 4));
        let body = &bytes[8..];
        match action {
            ACTION_CONNECT => {
                if body.len() < 8 {
                    return Err(ResponseParseError::TooShort);
                }
                Ok(Response::Connect {
                    transaction_id,
                    connection_id: ConnectionId(u64_at(body, 0)),
                })
            }
            ACTION_ANNOUNCE => {
                if body.len() < 12 {
                    return Err(ResponseParseError::TooShort);
                }
                let header = AnnounceHeader {
                    transaction_id,
                    interval: u32_at(body, 0),
                    leechers: u32_at(body, 4),
                    seeders: u32_at(body, 8),
                };
                let peers = &body[12..];
                if ipv6 {
                    if !peers.len().is_multiple_of(18) {
                        return Err(ResponseParseError::RaggedPeers);
                    }
                    Ok(Response::AnnounceV6 {
                        header,
                        peers: bytemuck::cast_slice(peers),
                    })
                } else {
                    if !peers.len().is_multiple_of(6) {
                        return Err(ResponseParseError::RaggedPeers);
                    }
                    Ok(Response::AnnounceV4 {
                        header,
                        peers: bytemuck::cast_slice(peers),
                    })
                }
            }
            ACTION_SCRAPE => {
                if !body.len().is_multiple_of(12) {
                    return Err(ResponseParseError::RaggedScrape);
                }
                Ok(Response::Scrape {
                    transaction_id,
                    stats: bytemuck::cast_slice(body),
                })
            }
            ACTION_ERROR => Ok(Response::Error {
                transaction_id,
                message: body,
            }),
            other => Err(ResponseParseError::UnknownAction(other)),
        }
    }
}

fn write_announce_header(h: &AnnounceHeader, body: &mut [u8]) {
    body[..4].copy_from_slice(&h.interval.to_be_bytes());
    body[4..8].copy_from_slice(&h.leechers.to_be_bytes());
    body[8..12].copy_from_slice(&h.seeders.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::arb_event;
    use proptest::prelude::*;

    /// A connect request as BEP 15 lays it out.
    #[test]
    fn connect_request_known_bytes() {
        let bytes = [
            0x00, 0x00, 0x04, 0x17, 0x27, 0x10, 0x19, 0x80, // protocol id
            0, 0, 0, 0, // action: connect
            0xde, 0xad, 0xbe, 0xef, // transaction id
        ];
        let req = Request::parse(&bytes).unwrap();
        assert_eq!(
            req,
            Request::Connect(ConnectRequest {
                transaction_id: TransactionId(0xdeadbeef)
            })
        );
        let mut out = Vec::new();
        req.write(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn connect_with_wrong_magic_is_dropped() {
        let mut bytes = [0u8; 16];
        bytes[7] = 1;
        assert_eq!(Request::parse(&bytes), Err(RequestParseError::Unanswerable));
    }

    #[test]
    fn short_packets_are_unanswerable() {
        for len in 0..16 {
            assert_eq!(
                Request::parse(&vec![0u8; len]),
                Err(RequestParseError::Unanswerable)
            );
        }
    }

    fn announce_bytes() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1122334455667788u64.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(&7u32.to_be_bytes());
        b.extend_from_slice(&[0xaa; 20]);
        b.extend_from_slice(&[0xbb; 20]);
        b.extend_from_slice(&100u64.to_be_bytes()); // downloaded
        b.extend_from_slice(&200u64.to_be_bytes()); // left
        b.extend_from_slice(&300u64.to_be_bytes()); // uploaded
        b.extend_from_slice(&2u32.to_be_bytes()); // started
        b.extend_from_slice(&[0, 0, 0, 0]); // ip
        b.extend_from_slice(&0x99u32.to_be_bytes()); // key
        b.extend_from_slice(&(-1i32).to_be_bytes()); // numwant
        b.extend_from_slice(&6881u16.to_be_bytes());
        b
    }

    #[test]
    fn announce_known_bytes() {
        let b = announce_bytes();
        assert_eq!(b.len(), ANNOUNCE_REQUEST_LEN);
        let Request::Announce(a) = Request::parse(&b).unwrap() else {
            panic!("not an announce")
        };
        assert_eq!(a.connection_id, ConnectionId(0x1122334455667788));
        assert_eq!(a.transaction_id, TransactionId(7));
        assert_eq!(a.info_hash, InfoHash([0xaa; 20]));
        assert_eq!(a.peer_id, PeerId([0xbb; 20]));
        assert_eq!((a.downloaded, a.left, a.uploaded), (100, 200, 300));
        assert_eq!(a.event, AnnounceEvent::Started);
        assert_eq!(a.key, 0x99);
        assert_eq!(a.numwant, -1);
        assert_eq!(a.port, 6881);
    }

    #[test]
    fn announce_accepts_bep41_options_and_padding() {
        let mut b = announce_bytes();
        write_url_data_option(b"/announce?key=abc", &mut b);
        let Request::Announce(a) = Request::parse(&b).unwrap() else {
            panic!()
        };
        assert_eq!(a.port, 6881);
        let mut url = [0u8; 64];
        let n = url_data(&b[ANNOUNCE_REQUEST_LEN..], &mut url);
        assert_eq!(&url[..n], b"/announce?key=abc");
        // With an explicit end-of-options and padding after it.
        b.extend_from_slice(&[0x0, 0xff, 0xff]);
        assert!(matches!(Request::parse(&b), Ok(Request::Announce(_))));
        assert_eq!(url_data(&b[ANNOUNCE_REQUEST_LEN..], &mut url), n);

        let mut padded = announce_bytes();
        padded.extend_from_slice(&[0, 0]); // aria2's 100-byte announce
        assert!(matches!(Request::parse(&padded), Ok(Request::Announce(_))));
    }

    #[test]
    fn url_data_survives_truncated_options() {
        let mut out = [0u8; 8];
        assert_eq!(url_data(&[0x2, 200, b'a'], &mut out), 0);
        assert_eq!(url_data(&[0x1, 0x2], &mut out), 0);
        assert_eq!(
            url_data(&[0x2, 3, b'a', b'b', b'c', 0x2, 9, b'z'], &mut out),
            3
        );
        // Longer than the caller's buffer: truncated, not a panic.
        assert_eq!(
            url_data(&[0x2, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], &mut out),
            8
        );
    }

    #[test]
    fn url_data_paths_carry_the_passkey_however_the_options_are_cut() {
        use crate::path::Action;
        let mut buf = [0u8; URL_PATH_BUFFER];
        let passkey = |tail: &[u8], buf: &mut [u8; URL_PATH_BUFFER]| {
            url_data_path(tail, buf).map(|r| r.map(|p| (p.action, p.passkey.map(String::from))))
        };
        let announce = |k: &str| Some(Ok((Action::Announce, Some(k.to_owned()))));
        let mut one = Vec::new();
        write_url_data_option(b"/0123abcd/announce?key=1", &mut one);
        assert_eq!(passkey(&one, &mut buf), announce("0123abcd"));
        // The same URL data in small options, as BEP 41 allows, then an end of options.
        let mut cut = Vec::new();
        for chunk in [&b"/announce"[..], b"/0123", b"abcd"] {
            write_url_data_option(chunk, &mut cut);
        }
        cut.extend_from_slice(&[0x0, 0x2, 3, b'x', b'y', b'z']);
        assert_eq!(passkey(&cut, &mut buf), announce("0123abcd"));
        // NexusPHP's: the passkey in the query.
        let mut php = Vec::new();
        write_url_data_option(
            format!("/announce.php?passkey={}", "k".repeat(64)).as_bytes(),
            &mut php,
        );
        assert_eq!(passkey(&php, &mut buf), announce(&"k".repeat(64)));
        // No URL data: no path at all.
        assert_eq!(passkey(&[], &mut buf), None);
        assert_eq!(passkey(&[0, 0], &mut buf), None);
        assert_eq!(passkey(&[0x1, 0x1], &mut buf), None);
        // URL data that is no tracker path, or longer than the buffer.
        let mut odd = Vec::new();
        write_url_data_option(b"/dir?passkey=1", &mut odd);
        assert_eq!(passkey(&odd, &mut buf), Some(Err(PathError::UnknownPath)));
        let mut long = Vec::new();
        let path = format!("/announce/{}", "k".repeat(300));
        write_url_data_option(path.as_bytes(), &mut long);
        assert_eq!(
            passkey(&long, &mut buf),
            Some(Err(PathError::MalformedPasskey(Action::Announce)))
        );
        // A query cut by the buffer: its last pair may be the first letters of a longer
        // key, so it is never read as one (found by the passkey_path fuzz target).
        let key = "k".repeat(32);
        let pad = "p".repeat(URL_PATH_BUFFER - "/announce.php?x=&passkey=".len() - 4);
        let mut cut_key = Vec::new();
        let url = format!("/announce.php?x={pad}&passkey={key}");
        write_url_data_option(url.as_bytes(), &mut cut_key);
        assert_eq!(
            passkey(&cut_key, &mut buf),
            Some(Err(PathError::UnknownPath))
        );
        // A key that stands whole before the cut is the whole query's key.
        let mut whole_key = Vec::new();
        let url = format!("/announce.php?passkey={key}&x={}", "p".repeat(200));
        write_url_data_option(url.as_bytes(), &mut whole_key);
        assert_eq!(passkey(&whole_key, &mut buf), announce(&key));
    }

    #[test]
    fn truncated_announce_is_answerable_error() {
        let b = announce_bytes();
        match Request::parse(&b[..97]) {
            Err(RequestParseError::Answerable {
                connection_id,
                transaction_id,
                message,
            }) => {
                assert_eq!(connection_id, ConnectionId(0x1122334455667788));
                assert_eq!(transaction_id, TransactionId(7));
                assert!(message.contains("short"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_event_and_unknown_action_are_answerable() {
        let mut b = announce_bytes();
        b[83] = 9;
        assert!(matches!(
            Request::parse(&b),
            Err(RequestParseError::Answerable {
                message: "invalid event",
                ..
            })
        ));
        let mut b = announce_bytes();
        b[11] = 7;
        assert!(matches!(
            Request::parse(&b),
            Err(RequestParseError::Answerable {
                message: "unknown action",
                ..
            })
        ));
    }

    #[test]
    fn scrape_known_bytes() {
        let mut b = Vec::new();
        b.extend_from_slice(&5u64.to_be_bytes());
        b.extend_from_slice(&2u32.to_be_bytes());
        b.extend_from_slice(&9u32.to_be_bytes());
        b.extend_from_slice(&[1; 20]);
        b.extend_from_slice(&[2; 20]);
        b.extend_from_slice(&[3; 5]); // partial trailing hash: ignored
        let Request::Scrape(s) = Request::parse(&b).unwrap() else {
            panic!()
        };
        assert_eq!(s.info_hashes, &[InfoHash([1; 20]), InfoHash([2; 20])]);
        let empty = &b[..16];
        assert!(matches!(
            Request::parse(empty),
            Err(RequestParseError::Answerable { .. })
        ));
    }

    #[test]
    fn announce_response_known_bytes() {
        let peers = [CompactPeerV4([127, 0, 0, 1, 0x1a, 0xe1])];
        let r = Response::AnnounceV4 {
            header: AnnounceHeader {
                transaction_id: TransactionId(0x01020304),
                interval: 1800,
                leechers: 3,
                seeders: 4,
            },
            peers: &peers,
        };
        let mut out = [0u8; 64];
        let n = r.write(&mut out).unwrap();
        assert_eq!(
            &out[..n],
            &[
                0, 0, 0, 1, 1, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 3, 0, 0, 0, 4, 127, 0, 0, 1, 0x1a,
                0xe1
            ]
        );
        assert_eq!(Response::parse(&out[..n], false).unwrap(), r);
        assert_eq!(
            Response::parse(&out[..n], true),
            Err(ResponseParseError::RaggedPeers)
        );
    }

    #[test]
    fn error_response_and_small_buffer() {
        let r = Response::Error {
            transaction_id: TransactionId(5),
            message: b"bad",
        };
        let mut out = [0u8; 11];
        assert_eq!(r.write(&mut out), Some(11));
        assert_eq!(&out, &[0, 0, 0, 3, 0, 0, 0, 5, b'b', b'a', b'd']);
        assert_eq!(r.write(&mut [0u8; 10]), None);
    }

    proptest! {
        #[test]
        fn announce_request_round_trip(
            cid: u64, tid: u32, ih: [u8; 20], pid: [u8; 20], d: u64, l: u64, u: u64,
            event in arb_event(), ip: [u8; 4], key: u32, numwant: i32, port: u16,
            tail in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let req = Request::Announce(AnnounceRequest {
                connection_id: ConnectionId(cid), transaction_id: TransactionId(tid),
                info_hash: InfoHash(ih), peer_id: PeerId(pid), downloaded: d, left: l,
                uploaded: u, event, ip, key, numwant, port,
            });
            let mut out = Vec::new();
            req.write(&mut out);
            prop_assert_eq!(out.len(), ANNOUNCE_REQUEST_LEN);
            out.extend_from_slice(&tail);
            prop_assert_eq!(Request::parse(&out).unwrap(), req);
        }

        #[test]
        fn scrape_request_round_trip(cid: u64, tid: u32,
            hashes in proptest::collection::vec(any::<[u8; 20]>(), 1..80)) {
            let hashes: Vec<InfoHash> = hashes.into_iter().map(InfoHash).collect();
            let req = Request::Scrape(ScrapeRequest {
                connection_id: ConnectionId(cid), transaction_id: TransactionId(tid),
                info_hashes: &hashes,
            });
            let mut out = Vec::new();
            req.write(&mut out);
            prop_assert_eq!(Request::parse(&out).unwrap(), req);
        }

        #[test]
        fn connect_request_round_trip(tid: u32) {
            let req = Request::Connect(ConnectRequest { transaction_id: TransactionId(tid) });
            let mut out = Vec::new();
            req.write(&mut out);
            prop_assert_eq!(Request::parse(&out).unwrap(), req);
        }

        #[test]
        fn responses_round_trip(tid: u32, cid: u64, interval: u32, l: u32, s: u32,
            p4 in proptest::collection::vec(any::<[u8; 6]>(), 0..50),
            p6 in proptest::collection::vec(any::<[u8; 18]>(), 0..50),
            st in proptest::collection::vec(any::<(u32, u32, u32)>(), 0..74),
            msg in proptest::collection::vec(any::<u8>(), 0..100)) {
            let header = AnnounceHeader { transaction_id: TransactionId(tid), interval, leechers: l, seeders: s };
            let p4: Vec<CompactPeerV4> = p4.into_iter().map(CompactPeerV4).collect();
            let p6: Vec<CompactPeerV6> = p6.into_iter().map(CompactPeerV6).collect();
            let st: Vec<ScrapeStats> = st.into_iter().map(|(a, b, c)| ScrapeStats::new(a, b, c)).collect();
            let cases = [
                (Response::Connect { transaction_id: TransactionId(tid), connection_id: ConnectionId(cid) }, false),
                (Response::AnnounceV4 { header, peers: &p4 }, false),
                (Response::AnnounceV6 { header, peers: &p6 }, true),
                (Response::Scrape { transaction_id: TransactionId(tid), stats: &st }, false),
                (Response::Error { transaction_id: TransactionId(tid), message: &msg }, false),
            ];
            let mut buf = vec![0u8; 4096];
            for (r, v6) in cases {
                let n = r.write(&mut buf).unwrap();
                prop_assert_eq!(n, r.len());
                prop_assert_eq!(Response::parse(&buf[..n], v6).unwrap(), r);
            }
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Request::parse(&bytes);
            let _ = Response::parse(&bytes, false);
            let _ = Response::parse(&bytes, true);
            let mut buf = [0u8; URL_PATH_BUFFER];
            let _ = url_data_path(&bytes, &mut buf);
        }
    }
}
