//! Bencoded responses of the HTTP tracker: announce (BEP 3 with BEP 23 compact peers and
//! BEP 7 `peers6`), scrape (BEP 48 `files`), and `failure reason`.
//!
//! Responses are written by hand into the caller's `Vec<u8>`, which the connection reuses
//! from one request to the next: after the first few requests a response costs no
//! allocation. A general bencode serializer would need a tree or serde; tracker responses
//! are a handful of fixed shapes, so each shape is written directly, with its dictionary
//! keys already in the sorted order bencode requires (property tests in
//! `tests/bencode_round_trip.rs` decode every shape with the strict [`read`]er and check
//! its keys with [`Value::is_canonical`]).
//!
//! [`read`] is the other direction: a strict reader for whole bencoded values, used by
//! shoal-bench to check trackers' answers and by the tests.

pub mod read;

pub use read::{parse as decode, Value};

use std::io::Write;
use std::net::IpAddr;

use crate::common::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};

/// Appends `i<n>e`.
#[inline]
pub fn write_int(out: &mut Vec<u8>, n: i64) {
    out.push(b'i');
    if n < 0 {
        out.push(b'-');
    }
    write_digits(out, n.unsigned_abs());
    out.push(b'e');
}

/// Appends `<len>:<bytes>`.
#[inline]
pub fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_digits(out, bytes.len() as u64);
    out.push(b':');
    out.extend_from_slice(bytes);
}

#[inline]
fn write_digits(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// The peers of an announce response, in the form the client asked for.
#[derive(Clone, Copy, Debug)]
pub enum Peers<'a> {
    /// BEP 23: `peers` as one string of 6-byte entries.
    CompactV4(&'a [CompactPeerV4]),
    /// BEP 7: `peers6` as one string of 18-byte entries (and an empty `peers`, which some
    /// clients expect to find).
    CompactV6(&'a [CompactPeerV6]),
    /// BEP 3's original form (`compact=0`): `peers` as a list of dictionaries with `ip`,
    /// `port` and, unless `with_ids` is false (`no_peer_id=1`), `peer id`.
    DictV4 {
        peers: &'a [(CompactPeerV4, PeerId)],
        with_ids: bool,
    },
    /// The dictionary form for IPv6 peers (the `ip` is the textual IPv6 address).
    DictV6 {
        peers: &'a [(CompactPeerV6, PeerId)],
        with_ids: bool,
    },
}

/// A successful announce response.
#[derive(Clone, Copy, Debug)]
pub struct AnnounceResponse<'a> {
    pub interval: u32,
    pub min_interval: u32,
    /// Seeders.
    pub complete: u32,
    /// Leechers.
    pub incomplete: u32,
    /// Times the torrent was completely downloaded.
    pub downloaded: u32,
    pub peers: Peers<'a>,
    /// A `warning message` (BEP 3's optional notice: the announce was served).
    pub warning: Option<&'a str>,
}

impl AnnounceResponse<'_> {
    /// Appends the bencoded response to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(b'd');
        write_figures(out, self.complete, self.downloaded, self.incomplete);
        out.extend_from_slice(b"8:interval");
        write_int(out, self.interval.into());
        out.extend_from_slice(b"12:min interval");
        write_int(out, self.min_interval.into());
        out.extend_from_slice(b"5:peers");
        match self.peers {
            Peers::CompactV4(peers) => {
                write_bytes(out, bytemuck::cast_slice(peers));
            }
            Peers::CompactV6(peers) => {
                out.extend_from_slice(b"0:6:peers6");
                write_bytes(out, bytemuck::cast_slice(peers));
            }
            Peers::DictV4 { peers, with_ids } => {
                let peers = peers
                    .iter()
                    .map(|(p, id)| (IpAddr::V4(p.ip()), p.port(), id));
                write_dict_peers(out, peers, with_ids);
            }
            Peers::DictV6 { peers, with_ids } => {
                let peers = peers
                    .iter()
                    .map(|(p, id)| (IpAddr::V6(p.ip()), p.port(), id));
                write_dict_peers(out, peers, with_ids);
            }
        }
        if let Some(warning) = self.warning {
            out.extend_from_slice(b"15:warning message");
            write_bytes(out, warning.as_bytes());
        }
        out.push(b'e');
    }
}

/// Appends the three figures announce and scrape responses share, under their keys (which
/// sort before every other key of either dictionary).
#[inline]
fn write_figures(out: &mut Vec<u8>, complete: u32, downloaded: u32, incomplete: u32) {
    out.extend_from_slice(b"8:complete");
    write_int(out, complete.into());
    out.extend_from_slice(b"10:downloaded");
    write_int(out, downloaded.into());
    out.extend_from_slice(b"10:incomplete");
    write_int(out, incomplete.into());
}

/// Appends BEP 3's list of peer dictionaries.
fn write_dict_peers<'p>(
    out: &mut Vec<u8>,
    peers: impl Iterator<Item = (IpAddr, u16, &'p PeerId)>,
    with_ids: bool,
) {
    out.push(b'l');
    for (ip, port, id) in peers {
        write_dict_peer(out, ip, port, with_ids.then_some(id));
    }
    out.push(b'e');
}

fn write_dict_peer(out: &mut Vec<u8>, ip: IpAddr, port: u16, id: Option<&PeerId>) {
    // The longest IPv6 text form is 39 bytes (45 with an embedded IPv4 tail).
    let mut text = [0u8; 48];
    let mut cursor = std::io::Cursor::new(&mut text[..]);
    let _ = write!(cursor, "{ip}");
    let len = cursor.position() as usize;
    out.extend_from_slice(b"d2:ip");
    write_bytes(out, &text[..len]);
    if let Some(id) = id {
        out.extend_from_slice(b"7:peer id");
        write_bytes(out, &id.0);
    }
    out.extend_from_slice(b"4:port");
    write_int(out, port.into());
    out.push(b'e');
}

/// Appends `d14:failure reason<len>:<reason>e`.
pub fn write_failure(out: &mut Vec<u8>, reason: &[u8]) {
    out.extend_from_slice(b"d14:failure reason");
    write_bytes(out, reason);
    out.push(b'e');
}

/// One torrent's figures in a scrape response (BEP 48).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrapeFile {
    /// Seeders.
    pub complete: u32,
    /// Times the torrent was completely downloaded.
    pub downloaded: u32,
    /// Leechers.
    pub incomplete: u32,
}

/// Writes a scrape response piece by piece, so that a full scrape of a million torrents
/// streams into one buffer without an intermediate tree.
///
/// Bencode wants dictionary keys sorted and unique: add files in strictly increasing info
/// hash order ([`write_scrape`] sorts for you).
pub struct ScrapeWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> ScrapeWriter<'a> {
    pub fn begin(out: &'a mut Vec<u8>) -> Self {
        out.extend_from_slice(b"d5:filesd");
        Self { out }
    }

    pub fn file(&mut self, info_hash: &InfoHash, f: ScrapeFile) {
        let out = &mut *self.out;
        write_bytes(out, &info_hash.0);
        out.push(b'd');
        write_figures(out, f.complete, f.downloaded, f.incomplete);
        out.push(b'e');
    }

    pub fn end(self) {
        self.out.extend_from_slice(b"ee");
    }

    /// Bytes written and not yet drained.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing is written since the last drain.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Hands what was written so far to `sink` and empties the buffer: a document too big
    /// to hold whole is written a piece at a time (the full scrape, into its compressor).
    pub fn drain_into(&mut self, sink: &mut impl Write) -> std::io::Result<()> {
        sink.write_all(self.out)?;
        self.out.clear();
        Ok(())
    }
}

/// Sorts `files` by info hash, drops repeated hashes (keeping the first), and appends the
/// scrape response.
pub fn write_scrape(out: &mut Vec<u8>, files: &mut [(InfoHash, ScrapeFile)]) {
    files.sort_by_key(|f| f.0);
    let mut w = ScrapeWriter::begin(out);
    let mut last: Option<InfoHash> = None;
    for (h, f) in files.iter() {
        if last == Some(*h) {
            continue;
        }
        last = Some(*h);
        w.file(h, *f);
    }
    w.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// The round-trip checks (`tests/bencode_round_trip.rs`) lean on the reader's
    /// strictness about key order.
    #[test]
    fn the_decoder_refuses_unsorted_keys() {
        assert!(!decode(b"d1:bi1e1:ai1ee").unwrap().is_canonical());
    }

    #[test]
    fn failure_reason_is_a_one_key_dict() {
        let mut out = Vec::new();
        write_failure(&mut out, b"missing parameter: port");
        assert_eq!(out, b"d14:failure reason23:missing parameter: porte");
    }

    #[test]
    fn compact_v4_announce_has_the_exact_bytes() {
        let mut out = Vec::new();
        let peers = [CompactPeerV4::new(Ipv4Addr::new(1, 2, 3, 4), 0x1a1b)];
        AnnounceResponse {
            interval: 1800,
            min_interval: 900,
            complete: 1,
            incomplete: 2,
            downloaded: 3,
            peers: Peers::CompactV4(&peers),
            warning: None,
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"d8:completei1e10:downloadedi3e10:incompletei2e8:intervali1800e\
              12:min intervali900e5:peers6:\x01\x02\x03\x04\x1a\x1be"
        );
        out.clear();
        AnnounceResponse {
            interval: 60,
            min_interval: 30,
            complete: 0,
            incomplete: 0,
            downloaded: 0,
            peers: Peers::CompactV4(&[]),
            warning: Some("Download slot limit reached"),
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"d8:completei0e10:downloadedi0e10:incompletei0e8:intervali60e\
              12:min intervali30e5:peers0:15:warning message27:Download slot limit reachede"
        );
    }

    proptest! {
        #[test]
        fn integers_match_std_formatting(n in any::<i64>()) {
            let mut out = Vec::new();
            write_int(&mut out, n);
            prop_assert_eq!(out, format!("i{n}e").into_bytes());
        }
    }
}
