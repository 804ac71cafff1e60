//! Bencoded responses of the HTTP tracker: announce (BEP 3 with BEP 23 compact peers and
//! BEP 7 `peers6`), scrape (BEP 48 `files`), and `failure reason`.
//!
//! Responses are written by hand into the caller's `Vec<u8>`, which the connection reuses
//! from one request to the next: after the first few requests a response costs no
//! allocation. A general bencode serializer would need a tree or serde; tracker responses
//! are a handful of fixed shapes, so each shape is written directly, with its dictionary
//! keys already in the sorted order bencode requires (property tests decode every shape
//! with the strict [`read`]er and check its keys with [`Value::is_canonical`]).
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
    use std::collections::BTreeMap;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Decodes with the strict reader (no trailing bytes, canonical integers) and checks
    /// that every dictionary's keys are sorted and unique, as bencode requires.
    fn decode_canonical(bytes: &[u8]) -> Value<'_> {
        let v = decode(bytes).expect("one valid bencoded value, nothing after");
        assert!(v.is_canonical(), "dictionary keys unsorted or repeated");
        v
    }

    fn get<'v, 'a>(v: &'v Value<'a>, key: &[u8]) -> &'v Value<'a> {
        v.get(key)
            .unwrap_or_else(|| panic!("no key {:?} in {v:?}", String::from_utf8_lossy(key)))
    }

    /// The checks below lean on the decoder's strictness about key order.
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
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"d8:completei1e10:downloadedi3e10:incompletei2e8:intervali1800e\
              12:min intervali900e5:peers6:\x01\x02\x03\x04\x1a\x1be"
        );
    }

    #[test]
    fn dict_peers_carry_ids_unless_told_not_to() {
        let id = PeerId(*b"-TR3000-abcdefghijkl");
        let peers = [(CompactPeerV6::new(Ipv6Addr::LOCALHOST, 6881), id)];
        for with_ids in [true, false] {
            let mut out = Vec::new();
            AnnounceResponse {
                interval: 1,
                min_interval: 1,
                complete: 0,
                incomplete: 1,
                downloaded: 0,
                peers: Peers::DictV6 {
                    peers: &peers,
                    with_ids,
                },
            }
            .write(&mut out);
            let v = decode_canonical(&out);
            let Value::List(list) = get(&v, b"peers") else {
                panic!()
            };
            assert_eq!(get(&list[0], b"ip"), &Value::Bytes(b"::1"));
            assert_eq!(get(&list[0], b"port"), &Value::Int(6881));
            let has_id = list[0].get(b"peer id").is_some();
            assert_eq!(has_id, with_ids);
        }
    }

    fn arb_v4() -> impl Strategy<Value = CompactPeerV4> {
        any::<[u8; 6]>().prop_map(CompactPeerV4)
    }
    fn arb_v6() -> impl Strategy<Value = CompactPeerV6> {
        any::<[u8; 18]>().prop_map(CompactPeerV6)
    }

    proptest! {
        #[test]
        fn announce_round_trips_through_the_strict_reader(
            interval in any::<u32>(), min_interval in any::<u32>(),
            complete in any::<u32>(), incomplete in any::<u32>(), downloaded in any::<u32>(),
            v4 in proptest::collection::vec((arb_v4(), any::<[u8; 20]>()), 0..20),
            v6 in proptest::collection::vec((arb_v6(), any::<[u8; 20]>()), 0..20),
            form in 0u8..4, with_ids in any::<bool>(),
        ) {
            let v4: Vec<(CompactPeerV4, PeerId)> = v4.into_iter().map(|(p, i)| (p, PeerId(i))).collect();
            let v6: Vec<(CompactPeerV6, PeerId)> = v6.into_iter().map(|(p, i)| (p, PeerId(i))).collect();
            let c4: Vec<CompactPeerV4> = v4.iter().map(|p| p.0).collect();
            let c6: Vec<CompactPeerV6> = v6.iter().map(|p| p.0).collect();
            let peers = match form {
                0 => Peers::CompactV4(&c4),
                1 => Peers::CompactV6(&c6),
                2 => Peers::DictV4 { peers: &v4, with_ids },
                _ => Peers::DictV6 { peers: &v6, with_ids },
            };
            let mut out = vec![b'x'];
            out.clear();
            AnnounceResponse { interval, min_interval, complete, incomplete, downloaded, peers }
                .write(&mut out);
            let v = decode_canonical(&out);
            prop_assert_eq!(get(&v, b"interval"), &Value::Int(interval.into()));
            prop_assert_eq!(get(&v, b"min interval"), &Value::Int(min_interval.into()));
            prop_assert_eq!(get(&v, b"complete"), &Value::Int(complete.into()));
            prop_assert_eq!(get(&v, b"incomplete"), &Value::Int(incomplete.into()));
            prop_assert_eq!(get(&v, b"downloaded"), &Value::Int(downloaded.into()));
            match form {
                0 => prop_assert_eq!(get(&v, b"peers"), &Value::Bytes(bytemuck::cast_slice(&c4))),
                1 => {
                    prop_assert_eq!(get(&v, b"peers"), &Value::Bytes(b""));
                    prop_assert_eq!(get(&v, b"peers6"), &Value::Bytes(bytemuck::cast_slice(&c6)));
                }
                _ => {
                    let Value::List(list) = get(&v, b"peers") else { panic!("peers not a list") };
                    let expect: Vec<(IpAddr, u16, PeerId)> = if form == 2 {
                        v4.iter().map(|(p, i)| (IpAddr::V4(p.ip()), p.port(), *i)).collect()
                    } else {
                        v6.iter().map(|(p, i)| (IpAddr::V6(p.ip()), p.port(), *i)).collect()
                    };
                    prop_assert_eq!(list.len(), expect.len());
                    for (d, (ip, port, id)) in list.iter().zip(expect) {
                        let Value::Bytes(text) = get(d, b"ip") else { panic!() };
                        let parsed: IpAddr = std::str::from_utf8(text).unwrap().parse().unwrap();
                        prop_assert_eq!(parsed, ip);
                        prop_assert_eq!(get(d, b"port"), &Value::Int(port.into()));
                        match d.get(b"peer id") {
                            Some(Value::Bytes(b)) => { prop_assert!(with_ids); prop_assert_eq!(&b[..], &id.0[..]); }
                            None => prop_assert!(!with_ids),
                            Some(other) => panic!("{other:?}"),
                        }
                    }
                }
            }
        }

        #[test]
        fn scrape_round_trips_through_the_strict_reader(
            files in proptest::collection::vec((any::<[u8; 20]>(), any::<(u32, u32, u32)>()), 0..30),
            dup in any::<bool>(),
        ) {
            let mut files: Vec<(InfoHash, ScrapeFile)> = files.into_iter().map(|(h, (c, d, i))| {
                (InfoHash(h), ScrapeFile { complete: c, downloaded: d, incomplete: i })
            }).collect();
            if dup && !files.is_empty() {
                files.push(files[0]);
            }
            let mut expect: BTreeMap<Vec<u8>, ScrapeFile> = BTreeMap::new();
            for (h, f) in &files {
                expect.entry(h.0.to_vec()).or_insert(*f);
            }
            let mut out = Vec::new();
            write_scrape(&mut out, &mut files);
            let v = decode_canonical(&out);
            let files = get(&v, b"files");
            let Value::Dict(got) = files else { panic!("files not a dict") };
            prop_assert_eq!(got.len(), expect.len());
            for (h, f) in expect {
                let d = get(files, &h);
                prop_assert_eq!(get(d, b"complete"), &Value::Int(f.complete.into()));
                prop_assert_eq!(get(d, b"downloaded"), &Value::Int(f.downloaded.into()));
                prop_assert_eq!(get(d, b"incomplete"), &Value::Int(f.incomplete.into()));
            }
        }

        #[test]
        fn failure_round_trips_through_the_strict_reader(reason in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            write_failure(&mut out, &reason);
            let v = decode_canonical(&out);
            prop_assert_eq!(get(&v, b"failure reason"), &Value::Bytes(&reason));
        }

        #[test]
        fn integers_match_std_formatting(n in any::<i64>()) {
            let mut out = Vec::new();
            write_int(&mut out, n);
            prop_assert_eq!(out, format!("i{n}e").into_bytes());
        }
    }
}
