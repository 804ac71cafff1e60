//! Fuzzes the HTTP tracker's request parsing: any bytes as a request target must give a
//! value or an error, never a panic; and whatever parses as an announce must survive being
//! written back out and parsed again unchanged.
#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::http::{
    parse_scrape, parse_target, write_announce_target, AnnounceRequest, Target,
};

fuzz_target!(|data: &[u8]| {
    let mut hashes = Vec::new();
    // The whole input as a query string, and as a target.
    let _ = parse_scrape(data, 16, &mut hashes);
    assert!(hashes.len() <= 16);
    let _ = AnnounceRequest::parse(data, None);
    match parse_target(data) {
        Ok(Target::Announce { key, query }) => {
            if let Ok(req) = AnnounceRequest::parse(query, key) {
                // A client's `key` is carried still encoded; the writer puts it back as
                // is, so only a key without `&` round-trips (it cannot contain one).
                let mut out = Vec::new();
                write_announce_target(&req, &mut out);
                let (key2, query2) = match parse_target(&out) {
                    Ok(Target::Announce { key, query }) => (key, query),
                    other => panic!("rewritten target does not route: {other:?}"),
                };
                let again = AnnounceRequest::parse(query2, key2).expect("rewritten parses");
                assert_eq!(again, req);
            }
        }
        Ok(Target::Scrape { query, .. }) => {
            let _ = parse_scrape(query, 100, &mut hashes);
        }
        Err(_) => {}
    }
});
