//! Fuzzes the bencode writer: arbitrary announce, scrape and failure responses are
//! written, decoded by shoal-proto's strict reader (canonical integers, no trailing bytes)
//! and checked for sorted unique keys, and every field must come back as it went in.
#![no_main]

use std::collections::BTreeMap;
use std::net::IpAddr;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use shoal_proto::bencode::{
    decode, write_failure, write_scrape, AnnounceResponse, Peers, ScrapeFile, Value,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};

#[derive(Debug, Arbitrary)]
enum Input {
    Announce {
        interval: u32,
        min_interval: u32,
        complete: u32,
        incomplete: u32,
        downloaded: u32,
        form: u8,
        with_ids: bool,
        v4: Vec<([u8; 6], [u8; 20])>,
        v6: Vec<([u8; 18], [u8; 20])>,
    },
    Scrape(Vec<([u8; 20], u32, u32, u32)>),
    Failure(Vec<u8>),
}

fn decode_canonical(bytes: &[u8]) -> Value<'_> {
    let v = decode(bytes).expect("one valid bencoded value, nothing after");
    assert!(v.is_canonical(), "dictionary keys unsorted or repeated");
    v
}

fuzz_target!(|input: Input| {
    let mut out = Vec::new();
    match input {
        Input::Announce {
            interval,
            min_interval,
            complete,
            incomplete,
            downloaded,
            form,
            with_ids,
            v4,
            v6,
        } => {
            let v4: Vec<(CompactPeerV4, PeerId)> =
                v4.into_iter().map(|(a, i)| (CompactPeerV4(a), PeerId(i))).collect();
            let v6: Vec<(CompactPeerV6, PeerId)> =
                v6.into_iter().map(|(a, i)| (CompactPeerV6(a), PeerId(i))).collect();
            let c4: Vec<CompactPeerV4> = v4.iter().map(|p| p.0).collect();
            let c6: Vec<CompactPeerV6> = v6.iter().map(|p| p.0).collect();
            let peers = match form % 4 {
                0 => Peers::CompactV4(&c4),
                1 => Peers::CompactV6(&c6),
                2 => Peers::DictV4 { peers: &v4, with_ids },
                _ => Peers::DictV6 { peers: &v6, with_ids },
            };
            AnnounceResponse { interval, min_interval, complete, incomplete, downloaded, peers }
                .write(&mut out);
            let v = decode_canonical(&out);
            assert_eq!(v.get(b"interval"), Some(&Value::Int(interval.into())));
            assert_eq!(v.get(b"min interval"), Some(&Value::Int(min_interval.into())));
            assert_eq!(v.get(b"complete"), Some(&Value::Int(complete.into())));
            assert_eq!(v.get(b"incomplete"), Some(&Value::Int(incomplete.into())));
            assert_eq!(v.get(b"downloaded"), Some(&Value::Int(downloaded.into())));
            match form % 4 {
                0 => assert_eq!(v.get(b"peers"), Some(&Value::Bytes(bytemuck::cast_slice(&c4)))),
                1 => assert_eq!(v.get(b"peers6"), Some(&Value::Bytes(bytemuck::cast_slice(&c6)))),
                f => {
                    let Some(Value::List(list)) = v.get(b"peers") else { panic!("peers not a list") };
                    let expect: Vec<(IpAddr, u16, PeerId)> = if f == 2 {
                        v4.iter().map(|(p, i)| (IpAddr::V4(p.ip()), p.port(), *i)).collect()
                    } else {
                        v6.iter().map(|(p, i)| (IpAddr::V6(p.ip()), p.port(), *i)).collect()
                    };
                    assert_eq!(list.len(), expect.len());
                    for (d, (ip, port, id)) in list.iter().zip(expect) {
                        let Some(Value::Bytes(text)) = d.get(b"ip") else { panic!("ip") };
                        let parsed: IpAddr = std::str::from_utf8(text).unwrap().parse().unwrap();
                        assert_eq!(parsed, ip);
                        assert_eq!(d.get(b"port"), Some(&Value::Int(port.into())));
                        let want = with_ids.then_some(Value::Bytes(&id.0));
                        assert_eq!(d.get(b"peer id"), want.as_ref());
                    }
                }
            }
        }
        Input::Scrape(files) => {
            let mut files: Vec<(InfoHash, ScrapeFile)> = files
                .into_iter()
                .map(|(h, c, d, i)| {
                    (InfoHash(h), ScrapeFile { complete: c, downloaded: d, incomplete: i })
                })
                .collect();
            let mut expect: BTreeMap<Vec<u8>, ScrapeFile> = BTreeMap::new();
            for (h, f) in &files {
                expect.entry(h.0.to_vec()).or_insert(*f);
            }
            write_scrape(&mut out, &mut files);
            let v = decode_canonical(&out);
            let Some(files @ Value::Dict(got)) = v.get(b"files") else { panic!("files") };
            assert_eq!(got.len(), expect.len());
            for (h, f) in expect {
                let d = files.get(&h).expect("every file listed");
                assert_eq!(d.get(b"complete"), Some(&Value::Int(f.complete.into())));
                assert_eq!(d.get(b"downloaded"), Some(&Value::Int(f.downloaded.into())));
                assert_eq!(d.get(b"incomplete"), Some(&Value::Int(f.incomplete.into())));
            }
        }
        Input::Failure(reason) => {
            write_failure(&mut out, &reason);
            let v = decode_canonical(&out);
            assert_eq!(v.get(b"failure reason"), Some(&Value::Bytes(&reason)));
        }
    }
});
