//! Fuzzes the bencode writer: arbitrary announce, scrape and failure responses are
//! written, decoded by `bendy` (a strict decoder: sorted unique keys, no trailing bytes),
//! and every field must come back as it went in.
#![no_main]

use std::collections::BTreeMap;
use std::net::IpAddr;

use arbitrary::Arbitrary;
use bendy::decoding::{Decoder, Object};
use libfuzzer_sys::fuzz_target;
use shoal_proto::bencode::{write_failure, write_scrape, AnnounceResponse, Peers, ScrapeFile};
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

#[derive(Debug, PartialEq, Eq)]
enum V {
    I(i64),
    B(Vec<u8>),
    L(Vec<V>),
    D(BTreeMap<Vec<u8>, V>),
}

fn convert(o: Object) -> V {
    match o {
        Object::Integer(s) => V::I(s.parse().expect("integer")),
        Object::Bytes(b) => V::B(b.to_vec()),
        Object::List(mut l) => {
            let mut v = Vec::new();
            while let Some(o) = l.next_object().expect("list item") {
                v.push(convert(o));
            }
            V::L(v)
        }
        Object::Dict(mut d) => {
            let mut m = BTreeMap::new();
            while let Some((k, o)) = d.next_pair().expect("sorted, unique dict pair") {
                m.insert(k.to_vec(), convert(o));
            }
            V::D(m)
        }
    }
}

fn decode(bytes: &[u8]) -> V {
    let mut d = Decoder::new(bytes).with_max_depth(8);
    let v = convert(d.next_object().expect("valid bencode").expect("a value"));
    assert!(d.next_object().expect("nothing after").is_none());
    v
}

fn get<'a>(v: &'a V, k: &str) -> Option<&'a V> {
    match v {
        V::D(m) => m.get(k.as_bytes()),
        _ => None,
    }
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
            let v = decode(&out);
            assert_eq!(get(&v, "interval"), Some(&V::I(interval.into())));
            assert_eq!(get(&v, "min interval"), Some(&V::I(min_interval.into())));
            assert_eq!(get(&v, "complete"), Some(&V::I(complete.into())));
            assert_eq!(get(&v, "incomplete"), Some(&V::I(incomplete.into())));
            assert_eq!(get(&v, "downloaded"), Some(&V::I(downloaded.into())));
            match form % 4 {
                0 => assert_eq!(get(&v, "peers"), Some(&V::B(bytemuck::cast_slice(&c4).to_vec()))),
                1 => assert_eq!(get(&v, "peers6"), Some(&V::B(bytemuck::cast_slice(&c6).to_vec()))),
                f => {
                    let Some(V::L(list)) = get(&v, "peers") else { panic!("peers not a list") };
                    let expect: Vec<(IpAddr, u16, PeerId)> = if f == 2 {
                        v4.iter().map(|(p, i)| (IpAddr::V4(p.ip()), p.port(), *i)).collect()
                    } else {
                        v6.iter().map(|(p, i)| (IpAddr::V6(p.ip()), p.port(), *i)).collect()
                    };
                    assert_eq!(list.len(), expect.len());
                    for (d, (ip, port, id)) in list.iter().zip(expect) {
                        let Some(V::B(text)) = get(d, "ip") else { panic!("ip") };
                        let parsed: IpAddr = std::str::from_utf8(text).unwrap().parse().unwrap();
                        assert_eq!(parsed, ip);
                        assert_eq!(get(d, "port"), Some(&V::I(port.into())));
                        let want = with_ids.then(|| V::B(id.0.to_vec()));
                        assert_eq!(get(d, "peer id"), want.as_ref());
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
            let v = decode(&out);
            let Some(V::D(got)) = get(&v, "files") else { panic!("files") };
            assert_eq!(got.len(), expect.len());
            for (h, f) in expect {
                let d = &got[&h];
                assert_eq!(get(d, "complete"), Some(&V::I(f.complete.into())));
                assert_eq!(get(d, "downloaded"), Some(&V::I(f.downloaded.into())));
                assert_eq!(get(d, "incomplete"), Some(&V::I(f.incomplete.into())));
            }
        }
        Input::Failure(reason) => {
            write_failure(&mut out, &reason);
            assert_eq!(get(&decode(&out), "failure reason"), Some(&V::B(reason)));
        }
    }
});
