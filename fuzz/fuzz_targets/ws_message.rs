//! Fuzzes the WebTorrent message parser with arbitrary bytes, as a client could send.
//!
//! Beyond "never panics": whatever parses is relayed the way the tracker would relay it,
//! and the relayed JSON must parse back to the same binary fields (the binary-string
//! encoding is lossless for every byte). A message that is valid UTF-8 (a text frame) also
//! goes through the text parser, which must read it exactly as the bytes parser does.

#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::ws::{self, decode_binary, Relayed, Request, Sdp};

/// The bytes of the binary-string field `key` of a relayed message.
fn binary_field(v: &serde_json::Value, key: &str) -> Vec<u8> {
    decode_binary(v[key].as_str().expect(key)).expect(key)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(
            format!("{:?}", ws::parse_text(text)),
            format!("{:?}", ws::parse_request(data)),
            "text and bytes parsers disagree"
        );
    }
    let full = ws::parse_request(data);
    // Parsed with a bound on the offers kept: the same request, its offers a prefix of
    // the full parse's, counted in full; a message refused in full may pass only for an
    // offer not read.
    let bound = usize::from(data.first().copied().unwrap_or(0) % 4);
    match (&full, ws::parse_request_within(data, || bound)) {
        (Ok(Request::Announce(a)), Ok(Request::Announce(b))) => {
            assert_eq!(b.offers.len(), a.offers.len().min(bound));
            assert_eq!(b.offers_sent, a.offers_sent);
            assert_eq!(a.offers.len(), a.offers_sent);
            for (x, y) in a.offers.iter().zip(&b.offers) {
                let (x, y) = (x.read().expect("read in full"), y.read().expect("kept"));
                assert_eq!((x.offer_id, x.offer.get()), (y.offer_id, y.offer.get()));
            }
        }
        (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (Ok(_), Err(e)) => panic!("refused only when read with a bound: {e:?}"),
        (Err(_), _) => {}
    }
    match full {
        Ok(Request::Announce(a)) => {
            for o in &a.offers {
                let o = o.read().expect("a full parse has read every offer");
                let text = ws::to_json(&Relayed {
                    info_hash: a.info_hash,
                    peer_id: a.peer_id,
                    offer_id: o.offer_id,
                    sdp: Sdp::Offer(o.offer),
                });
                let v: serde_json::Value = serde_json::from_str(&text).expect("relayed JSON");
                assert_eq!(binary_field(&v, "info_hash"), a.info_hash.0);
                assert_eq!(binary_field(&v, "peer_id"), a.peer_id.0);
                assert_eq!(binary_field(&v, "offer_id"), o.offer_id.as_bytes());
            }
        }
        Ok(Request::Answer(a)) => {
            let text = ws::to_json(&Relayed {
                info_hash: a.info_hash,
                peer_id: a.peer_id,
                offer_id: a.offer_id,
                sdp: Sdp::Answer(a.answer),
            });
            let v: serde_json::Value = serde_json::from_str(&text).expect("relayed JSON");
            assert_eq!(binary_field(&v, "peer_id"), a.peer_id.0);
        }
        Ok(Request::Scrape(s)) => {
            assert!(s.info_hashes.len() <= ws::MAX_SCRAPE_HASHES);
        }
        Err((e, ctx)) => {
            let text = ws::to_json(&ws::Notice {
                failure: true,
                text: &e.to_string(),
                context: ctx,
            });
            let _: serde_json::Value = serde_json::from_str(&text).expect("failure JSON");
        }
    }
});
