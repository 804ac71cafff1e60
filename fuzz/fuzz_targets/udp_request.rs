//! Fuzzes the BEP 15 request parser (and the BEP 41 option scanner) with arbitrary
//! datagrams: no input may panic, and every request that parses must re-encode to the
//! bytes it came from (up to the trailing bytes the parser ignores).
#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::udp::{url_data, Request, ANNOUNCE_REQUEST_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = Request::parse(data) {
        let mut out = Vec::new();
        req.write(&mut out);
        assert!(out.len() <= data.len());
        assert_eq!(&data[..out.len()], &out[..]);
        if let Request::Announce(_) = req {
            let mut url = [0u8; 512];
            let n = url_data(&data[ANNOUNCE_REQUEST_LEN..], &mut url);
            assert!(n <= url.len());
        }
    }
    let _ = shoal_proto::udp::Response::parse(data, false);
    let _ = shoal_proto::udp::Response::parse(data, true);
});
