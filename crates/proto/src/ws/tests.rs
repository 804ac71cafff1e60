//! Unit and property tests of the WebTorrent message codec.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn bin(b: &[u8]) -> String {
    encode_binary(b)
}

fn announce_json(ih: &[u8], pid: &[u8]) -> Value {
    json!({"action": "announce", "info_hash": bin(ih), "peer_id": bin(pid),
           "numwant": 50, "uploaded": 0, "downloaded": 1048576, "left": 0, "event": "completed"})
}

/// Parses `v`'s JSON text both ways (as a binary frame's bytes and as a text frame's
/// `str`), checks that they agree, and returns the first.
fn parse(v: &Value) -> Result<Request<'static>, (RequestError, FailureContext)> {
    let s: &'static str = Box::leak(serde_json::to_string(v).unwrap().into_boxed_str());
    let bytes = parse_request(s.as_bytes());
    assert_eq!(format!("{bytes:?}"), format!("{:?}", parse_text(s)), "{s}");
    bytes
}

#[test]
fn parses_a_seeders_first_completed_announce() {
    let ih = [0xffu8; 20];
    let mut pid = *b"-WW0208-abcdefghijkl";
    pid[19] = 0;
    let Request::Announce(a) = parse(&announce_json(&ih, &pid)).unwrap() else {
        panic!("not an announce")
    };
    assert_eq!(a.info_hash, InfoHash(ih));
    assert_eq!(a.peer_id, PeerId(pid));
    assert_eq!(a.event, AnnounceEvent::Completed);
    assert_eq!(a.left, Some(0));
    assert_eq!((a.uploaded, a.downloaded), (0, 1048576));
    assert_eq!(a.numwant, Some(50));
    assert!(a.is_seeder());
    assert!(a.offers.is_empty());
}

#[test]
fn parses_offers_and_null_left() {
    let v = json!({"numwant": 5, "uploaded": 0, "downloaded": 0, "left": null, "event": "started",
        "action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]),
        "offers": [{"offer": {"type": "offer", "sdp": "v=0\r\n"}, "offer_id": bin(&[3; 20])},
                   {"offer": {"type": "offer", "sdp": "x"}, "offer_id": bin(&[4; 20])}]});
    let Request::Announce(a) = parse(&v).unwrap() else {
        panic!()
    };
    assert_eq!(a.left, None);
    assert!(!a.is_seeder());
    assert_eq!(a.event, AnnounceEvent::Started);
    assert_eq!(a.offers.len(), 2);
    let offer = a.offers[0].read().unwrap();
    assert_eq!(offer.offer_id.as_bytes(), &[3; 20]);
    let sdp: Value = serde_json::from_str(offer.offer.get()).unwrap();
    assert_eq!(sdp, json!({"type": "offer", "sdp": "v=0\r\n"}));
}

#[test]
fn parses_answers() {
    let v = json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]),
        "to_peer_id": bin(&[5; 20]), "answer": {"type": "answer", "sdp": "y"}, "offer_id": bin(&[9; 20])});
    let Request::Answer(a) = parse(&v).unwrap() else {
        panic!()
    };
    assert_eq!(a.to_peer_id, PeerId([5; 20]));
    assert_eq!(a.offer_id.as_bytes(), &[9; 20]);
    let sdp: Value = serde_json::from_str(a.answer.get()).unwrap();
    assert_eq!(sdp, json!({"type": "answer", "sdp": "y"}));
    let mut missing = v.clone();
    missing.as_object_mut().unwrap().remove("to_peer_id");
    assert!(matches!(
        parse(&missing),
        Err((RequestError::Missing("to_peer_id"), _))
    ));
}

#[test]
fn parses_scrapes_of_one_many_and_none() {
    let one = json!({"action": "scrape", "info_hash": bin(&[7; 20])});
    assert_eq!(parse(&one).unwrap_scrape(), vec![InfoHash([7; 20])]);
    let many = json!({"action": "scrape", "info_hash": [bin(&[7; 20]), bin(&[8; 20])]});
    assert_eq!(
        parse(&many).unwrap_scrape(),
        vec![InfoHash([7; 20]), InfoHash([8; 20])]
    );
    let none = json!({"action": "scrape"});
    assert!(parse(&none).unwrap_scrape().is_empty());
}

trait UnwrapScrape {
    fn unwrap_scrape(self) -> Vec<InfoHash>;
}
impl UnwrapScrape for Result<Request<'static>, (RequestError, FailureContext)> {
    fn unwrap_scrape(self) -> Vec<InfoHash> {
        match self {
            Ok(Request::Scrape(s)) => s.info_hashes,
            other => panic!("not a scrape: {other:?}"),
        }
    }
}

#[test]
fn refuses_bad_input_with_a_reason_and_context() {
    let cases: Vec<(&[u8], &str)> = vec![
        (b"not json", "invalid message"),
        (b"", "invalid message"),
        (b"[1,2]", "invalid message"),
        (b"{}", "missing field action"),
        (br#"{"action":"dance"}"#, "unknown action \"dance\""),
        (br#"{"action":5}"#, "invalid message"),
        (br#"{"action":"announce"}"#, "missing field info_hash"),
    ];
    for (input, want) in cases {
        let err = parse_request(input).unwrap_err().0;
        assert!(err.to_string().contains(want), "{input:?}: {err}");
    }
    let ih = bin(&[1; 20]);
    let ctx_cases = vec![
        (
            json!({"action": "announce", "info_hash": ih}),
            "missing field peer_id",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": "short"}),
            "peer_id must be 20 bytes, got 5",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": "\u{100}".repeat(20)}),
            "peer_id has a character above U+00FF",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": "a".repeat(21)}),
            "peer_id must be 20 bytes, got more",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": 12}),
            "invalid type: integer",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "event": "dance"}),
            "unknown event",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "numwant": "5"}),
            "invalid type: string",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "offers": {}}),
            "invalid type: map",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "offers": [{"offer_id": "", "offer": {}}]}),
            "offer_id is empty",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "offers": [{"offer_id": "a".repeat(33), "offer": {}}]}),
            "offer_id is longer than 32 bytes",
        ),
        (
            json!({"action": "announce", "info_hash": ih, "peer_id": bin(&[2; 20]), "offers": [{"offer": {}}]}),
            "missing field `offer_id`",
        ),
        (
            json!({"action": "announce", "info_hash": [ih], "peer_id": bin(&[2; 20])}),
            "not an array",
        ),
    ];
    for (v, want) in ctx_cases {
        let (err, ctx) = parse(&v).unwrap_err();
        assert!(err.to_string().contains(want), "{v}: {err}");
        assert_eq!(ctx.action, Some(Action::Announce), "{v}");
        if v["info_hash"].is_string() {
            assert_eq!(ctx.info_hash, Some(InfoHash([1; 20])), "{v}");
        }
    }
    let (err, ctx) =
        parse(&json!({"action": "scrape", "info_hash": [bin(&[1; 20]), "x"]})).unwrap_err();
    assert!(
        err.to_string().contains("info_hash must be 20 bytes"),
        "{err}"
    );
    assert_eq!(ctx.action, Some(Action::Scrape));
    let too_many: Vec<String> = (0..MAX_SCRAPE_HASHES + 1).map(|_| bin(&[1; 20])).collect();
    let err = parse(&json!({"action": "scrape", "info_hash": too_many}))
        .unwrap_err()
        .0;
    assert!(err.to_string().contains("more than"), "{err}");
}

#[test]
fn escaped_strings_are_read() {
    let v = br#"{"action":"\u0061nnounce","info_hash":"\u0000\u0001aaaaaaaaaaaaaaaaaa","peer_id":"\u00ffbbbbbbbbbbbbbbbbbbb","event":"\u0073tarted"}"#;
    let Ok(Request::Announce(a)) = parse_request(v) else {
        panic!()
    };
    assert_eq!(a.info_hash.0[..2], [0, 1]);
    assert_eq!(a.peer_id.0[0], 0xff);
    assert_eq!(a.event, AnnounceEvent::Started);
}

#[test]
fn responses_have_the_shapes_clients_read() {
    let r = AnnounceResponse {
        info_hash: InfoHash([0x80; 20]),
        complete: 2,
        incomplete: 1,
        interval: 120,
    };
    let v: Value = serde_json::from_str(&to_json(&r)).unwrap();
    assert_eq!(
        v,
        json!({"action": "announce", "info_hash": bin(&[0x80; 20]), "complete": 2, "incomplete": 1, "interval": 120})
    );

    let raw = RawValue::from_string(r#"{"type":"offer","sdp":"s"}"#.into()).unwrap();
    let o = Relayed {
        info_hash: InfoHash([1; 20]),
        peer_id: PeerId([2; 20]),
        offer_id: OfferId::new(&[3; 20]).unwrap(),
        sdp: Sdp::Offer(&raw),
    };
    let v: Value = serde_json::from_str(&to_json(&o)).unwrap();
    assert_eq!(
        v,
        json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]), "offer_id": bin(&[3; 20]), "offer": {"type": "offer", "sdp": "s"}})
    );

    let a = Relayed {
        info_hash: InfoHash([1; 20]),
        peer_id: PeerId([2; 20]),
        offer_id: OfferId::new(b"x").unwrap(),
        sdp: Sdp::Answer(&raw),
    };
    let v: Value = serde_json::from_str(&to_json(&a)).unwrap();
    assert_eq!(v["answer"], json!({"type": "offer", "sdp": "s"}));
    assert_eq!(v["offer_id"], "x");

    let s = ScrapeResponse {
        files: vec![(
            InfoHash([9; 20]),
            ScrapeStats {
                complete: 2,
                incomplete: 0,
                downloaded: 2,
            },
        )],
        min_request_interval: Some(600),
    };
    let v: Value = serde_json::from_str(&to_json(&s)).unwrap();
    assert_eq!(
        v,
        json!({"action": "scrape", "files": {bin(&[9; 20]): {"complete": 2, "incomplete": 0, "downloaded": 2}}, "flags": {"min_request_interval": 600}})
    );

    let n = Notice {
        failure: true,
        text: "nope",
        context: FailureContext {
            action: Some(Action::Announce),
            info_hash: Some(InfoHash([1; 20])),
        },
    };
    let v: Value = serde_json::from_str(&to_json(&n)).unwrap();
    assert_eq!(
        v,
        json!({"action": "announce", "info_hash": bin(&[1; 20]), "failure reason": "nope"})
    );
    let w = Notice {
        failure: false,
        text: "careful",
        context: FailureContext::default(),
    };
    assert_eq!(to_json(&w), r#"{"warning message":"careful"}"#);
}

proptest! {
    /// Any bytes survive the binary-string encoding, in requests and responses alike.
    #[test]
    fn announce_round_trips(ih in any::<[u8; 20]>(), pid in any::<[u8; 20]>(),
                            oid in proptest::collection::vec(any::<u8>(), 1..=MAX_OFFER_ID_LEN),
                            left in proptest::option::of(0u64..1 << 40)) {
        let v = json!({"action": "announce", "info_hash": bin(&ih), "peer_id": bin(&pid), "left": left,
                       "offers": [{"offer_id": bin(&oid), "offer": {"sdp": "s"}}]});
        let text = serde_json::to_string(&v).unwrap();
        let Ok(Request::Announce(a)) = parse_request(text.as_bytes()) else { panic!("{text}") };
        prop_assert_eq!(a.info_hash, InfoHash(ih));
        prop_assert_eq!(a.peer_id, PeerId(pid));
        prop_assert_eq!(a.left, left);
        let offer = a.offers[0].read().unwrap();
        prop_assert_eq!(offer.offer_id.as_bytes(), &oid[..]);
        let relayed = to_json(&Relayed { info_hash: a.info_hash, peer_id: a.peer_id, offer_id: offer.offer_id, sdp: Sdp::Offer(offer.offer) });
        let back: Value = serde_json::from_str(&relayed).unwrap();
        prop_assert_eq!(decode_binary(back["info_hash"].as_str().unwrap()).unwrap(), ih.to_vec());
        prop_assert_eq!(decode_binary(back["peer_id"].as_str().unwrap()).unwrap(), pid.to_vec());
        prop_assert_eq!(decode_binary(back["offer_id"].as_str().unwrap()).unwrap(), oid.clone());
    }

    /// Arbitrary bytes never panic the parser.
    #[test]
    fn arbitrary_bytes_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let parsed = parse_request(&bytes);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            prop_assert_eq!(format!("{parsed:?}"), format!("{:?}", parse_text(text)));
        }
    }

    /// Non-ASCII text (offer ids and SDP the way aquatic_ws_load_test writes them) reads
    /// the same through both parsers.
    #[test]
    fn text_and_bytes_parsers_agree(oid in proptest::collection::vec(any::<u8>(), 1..=MAX_OFFER_ID_LEN),
                                    sdp in "\\PC{0,40}") {
        let v = json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]),
                       "offers": [{"offer_id": bin(&oid), "offer": {"sdp": sdp}}]});
        let text = serde_json::to_string(&v).unwrap();
        prop_assert_eq!(format!("{:?}", parse_request(text.as_bytes())), format!("{:?}", parse_text(&text)));
    }
}

#[test]
fn offers_past_the_bound_are_counted_not_read() {
    let offer = |b: u8| json!({"offer_id": bin(&[b; 20]), "offer": {"type": "offer", "sdp": "s"}});
    let v = json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]),
        "offers": [offer(3), offer(4), {"offer_id": 7, "no offer": true}]});
    let text = serde_json::to_string(&v).unwrap();
    let Ok(Request::Announce(a)) = parse_text_within(&text, || 1) else {
        panic!("{text}")
    };
    assert_eq!((a.offers.len(), a.offers_sent), (1, 3));
    assert_eq!(a.offers[0].read().unwrap().offer_id.as_bytes(), &[3; 20]);
    // Kept, the third offer is refused (it has no `offer`); skipped, it still has to be
    // JSON.
    let err = parse_text(&text).unwrap_err().0.to_string();
    assert!(err.contains("missing field `offer`"), "{err}");
    // Kept and well formed but for its offer id, it is refused only when read.
    let bad_id = text.replace("\"no offer\":true", "\"offer\":{}");
    let Ok(Request::Announce(a)) = parse_text_within(&bad_id, || 3) else {
        panic!("{bad_id}")
    };
    let err = a.offers[2].read().unwrap_err().to_string();
    assert!(err.contains("invalid type: integer `7`"), "{err}");
    assert!(parse_text(&bad_id).is_err());
    let broken = text.replace("\"no offer\":true", "\"no offer\":tru");
    assert!(parse_text_within(&broken, || 0).is_err());
    // Asked only of a message with offers; `null` is none.
    for v in [
        json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20])}),
        json!({"action": "announce", "info_hash": bin(&[1; 20]), "peer_id": bin(&[2; 20]), "offers": null}),
    ] {
        let text = serde_json::to_string(&v).unwrap();
        let asked = std::cell::Cell::new(false);
        let Ok(Request::Announce(a)) = parse_text_within(&text, || {
            asked.set(true);
            5
        }) else {
            panic!("{text}")
        };
        assert_eq!((a.offers.len(), a.offers_sent), (0, 0));
        assert_eq!(
            asked.get(),
            v["offers"].is_null() && v.get("offers").is_some()
        );
    }
    let twice = format!("{}, \"offers\": []}}", text.trim_end_matches('}'));
    let err = parse_text_within(&twice, || 1).unwrap_err().0.to_string();
    assert!(err.contains("duplicate field `offers`"), "{err}");
}

proptest! {
    /// An offer id read from its JSON text, whatever the escapes, is what unescaping it
    /// first and decoding that gives: the same bytes, or the same error.
    #[test]
    fn offer_ids_read_from_their_json_text_as_from_the_string(
        chars in proptest::collection::vec((any::<u16>(), 0u8..4), 0..40),
    ) {
        let mut literal = String::from("\"");
        let mut s = String::new();
        for (c, how) in chars {
            // Mostly bytes, some characters above U+00FF.
            let c = char::from_u32(u32::from(if c % 8 == 0 { c } else { c % 256 })).unwrap_or('x');
            s.push(c);
            let short = match c {
                '"' => Some('"'), '\\' => Some('\\'), '/' => Some('/'), '\u{8}' => Some('b'),
                '\u{c}' => Some('f'), '\n' => Some('n'), '\r' => Some('r'), '\t' => Some('t'),
                _ => None,
            };
            match (how, short) {
                (0, Some(e)) => { literal.push('\\'); literal.push(e); }
                (1, _) if u32::from(c) < 0x10000 => literal.push_str(&format!("\\u{:04X}", u32::from(c))),
                _ if c == '"' || c == '\\' || u32::from(c) < 0x20 => literal.push_str(&format!("\\u{:04x}", u32::from(c))),
                _ => literal.push(c),
            }
        }
        literal.push('"');
        prop_assert_eq!(serde_json::from_str::<String>(&literal).unwrap(), s.clone(), "{}", literal);
        // serde_json adds where in the text; an offer read alone has no place to name.
        let by_serde = serde_json::from_str::<fields::OfferIdField>(&literal)
            .map(|f| f.0)
            .map_err(|e| e.to_string().split(" at line").next().unwrap_or_default().to_owned());
        prop_assert_eq!(fields::offer_id_of_literal(&literal), by_serde);
    }
}
