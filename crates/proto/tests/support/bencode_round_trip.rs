//! The bencode writer's round trip, written once for its two drivers: the property tests
//! (`tests/bencode_round_trip.rs`) and the `bencode_roundtrip` fuzz target, which includes
//! this file by path. Each check writes a response, decodes it with the strict reader,
//! insists on sorted unique dictionary keys, and panics unless every field came back as
//! it went in (proptest and libFuzzer both report a panic as a failure).

use std::collections::BTreeMap;
use std::net::IpAddr;

use shoal_proto::bencode::{
    decode, write_failure, write_scrape, AnnounceResponse, Peers, ScrapeFile, Value,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};

/// Decodes `bytes` with the strict reader and checks that every dictionary's keys are
/// sorted and unique.
pub fn decode_canonical(bytes: &[u8]) -> Value<'_> {
    let v = decode(bytes).expect("one valid bencoded value, nothing after");
    assert!(v.is_canonical(), "dictionary keys unsorted or repeated");
    v
}

/// The value under `key` of a dictionary (panics when missing).
pub fn get<'v, 'a>(v: &'v Value<'a>, key: &[u8]) -> &'v Value<'a> {
    v.get(key)
        .unwrap_or_else(|| panic!("no key {:?} in {v:?}", String::from_utf8_lossy(key)))
}

/// Generated peers (wire bytes and peer ids) in the forms an announce response takes.
pub struct PeerLists {
    v4: Vec<(CompactPeerV4, PeerId)>,
    v6: Vec<(CompactPeerV6, PeerId)>,
    c4: Vec<CompactPeerV4>,
    c6: Vec<CompactPeerV6>,
}

impl PeerLists {
    pub fn new(v4: &[([u8; 6], [u8; 20])], v6: &[([u8; 18], [u8; 20])]) -> Self {
        let v4: Vec<_> = v4
            .iter()
            .map(|(a, i)| (CompactPeerV4(*a), PeerId(*i)))
            .collect();
        let v6: Vec<_> = v6
            .iter()
            .map(|(a, i)| (CompactPeerV6(*a), PeerId(*i)))
            .collect();
        Self {
            c4: v4.iter().map(|p| p.0).collect(),
            c6: v6.iter().map(|p| p.0).collect(),
            v4,
            v6,
        }
    }

    /// The peers in form `form` (modulo 4): compact IPv4, compact IPv6, dictionaries of
    /// IPv4 peers, dictionaries of IPv6 peers.
    pub fn peers(&self, form: u8, with_ids: bool) -> Peers<'_> {
        match form % 4 {
            0 => Peers::CompactV4(&self.c4),
            1 => Peers::CompactV6(&self.c6),
            2 => Peers::DictV4 {
                peers: &self.v4,
                with_ids,
            },
            _ => Peers::DictV6 {
                peers: &self.v6,
                with_ids,
            },
        }
    }
}

/// Writes `r` and checks every figure and every peer of the decoded response.
pub fn announce(r: &AnnounceResponse<'_>) {
    let mut out = Vec::new();
    r.write(&mut out);
    let v = decode_canonical(&out);
    let int = |n: u32| Value::Int(n.into());
    assert_eq!(get(&v, b"interval"), &int(r.interval));
    assert_eq!(get(&v, b"min interval"), &int(r.min_interval));
    assert_eq!(get(&v, b"complete"), &int(r.complete));
    assert_eq!(get(&v, b"incomplete"), &int(r.incomplete));
    assert_eq!(get(&v, b"downloaded"), &int(r.downloaded));
    let (expect, with_ids): (Vec<(IpAddr, u16, PeerId)>, bool) = match r.peers {
        Peers::CompactV4(c4) => {
            let c4: &[u8] = bytemuck::cast_slice(c4);
            assert_eq!(get(&v, b"peers"), &Value::Bytes(c4));
            return;
        }
        Peers::CompactV6(c6) => {
            let c6: &[u8] = bytemuck::cast_slice(c6);
            assert_eq!(get(&v, b"peers"), &Value::Bytes(b""));
            assert_eq!(get(&v, b"peers6"), &Value::Bytes(c6));
            return;
        }
        Peers::DictV4 { peers, with_ids } => {
            let ips = peers
                .iter()
                .map(|(p, i)| (IpAddr::V4(p.ip()), p.port(), *i));
            (ips.collect(), with_ids)
        }
        Peers::DictV6 { peers, with_ids } => {
            let ips = peers
                .iter()
                .map(|(p, i)| (IpAddr::V6(p.ip()), p.port(), *i));
            (ips.collect(), with_ids)
        }
    };
    let Value::List(list) = get(&v, b"peers") else {
        panic!("peers not a list")
    };
    assert_eq!(list.len(), expect.len());
    for (d, (ip, port, id)) in list.iter().zip(expect) {
        let Value::Bytes(text) = get(d, b"ip") else {
            panic!("ip not a string")
        };
        let parsed: IpAddr = std::str::from_utf8(text).unwrap().parse().unwrap();
        assert_eq!(parsed, ip);
        assert_eq!(get(d, b"port"), &int(port.into()));
        let want = with_ids.then_some(Value::Bytes(&id.0));
        assert_eq!(d.get(b"peer id"), want.as_ref());
    }
}

/// Writes a scrape of `files` (info hash, complete, downloaded, incomplete; repeats and
/// any order allowed) and checks that each info hash is listed once, with its first
/// figures.
pub fn scrape(files: &[([u8; 20], u32, u32, u32)]) {
    let mut files: Vec<(InfoHash, ScrapeFile)> = files
        .iter()
        .map(|&(h, complete, downloaded, incomplete)| {
            let f = ScrapeFile {
                complete,
                downloaded,
                incomplete,
            };
            (InfoHash(h), f)
        })
        .collect();
    let mut expect: BTreeMap<[u8; 20], ScrapeFile> = BTreeMap::new();
    for (h, f) in &files {
        expect.entry(h.0).or_insert(*f);
    }
    let mut out = Vec::new();
    write_scrape(&mut out, &mut files);
    let v = decode_canonical(&out);
    let files = get(&v, b"files");
    let Value::Dict(got) = files else {
        panic!("files not a dict")
    };
    assert_eq!(got.len(), expect.len());
    for (h, f) in expect {
        let d = get(files, &h);
        assert_eq!(get(d, b"complete"), &Value::Int(f.complete.into()));
        assert_eq!(get(d, b"downloaded"), &Value::Int(f.downloaded.into()));
        assert_eq!(get(d, b"incomplete"), &Value::Int(f.incomplete.into()));
    }
}

/// Writes a failure response and checks its reason.
pub fn failure(reason: &[u8]) {
    let mut out = Vec::new();
    write_failure(&mut out, reason);
    let v = decode_canonical(&out);
    assert_eq!(get(&v, b"failure reason"), &Value::Bytes(reason));
}
