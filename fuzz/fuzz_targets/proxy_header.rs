//! Fuzzes the PROXY protocol header parser (v1 and v2) that reads the first bytes of a
//! connection from a load balancer: any bytes must give a header, "incomplete" or an
//! error, never a panic. A header never claims more bytes than it was given, every prefix
//! of a header is incomplete (so a header split across reads is waited for, not refused),
//! and the addresses it names survive being written back in both versions.
#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::proxy_header::{
    looks_like_header, parse, write_v1, write_v2, ProxyHeaderError, MAX_V2_LEN,
};

fuzz_target!(|data: &[u8]| {
    let parsed = parse(data);
    if !data.is_empty() && (parsed.is_ok() || parsed == Err(ProxyHeaderError::Incomplete)) {
        assert!(looks_like_header(data), "accepted without a signature");
    }
    let Ok(header) = parsed else { return };
    assert!(header.len <= data.len() && header.len <= MAX_V2_LEN);
    for n in 0..header.len {
        assert_eq!(
            parse(&data[..n]),
            Err(ProxyHeaderError::Incomplete),
            "prefix {n}"
        );
    }
    assert_eq!(
        parse(&data[..header.len]),
        Ok(header),
        "bytes after it change nothing"
    );
    let (Some(src), Some(dst)) = (header.source, header.destination) else {
        return;
    };
    let mut v2 = Vec::new();
    write_v2(Some((src, dst)), &[], &mut v2);
    let back = parse(&v2).expect("a written v2 header parses");
    assert_eq!((back.source, back.destination), (Some(src), Some(dst)));
    let mut v1 = Vec::new();
    write_v1(Some((src, dst)), &mut v1);
    let back = parse(&v1).expect("a written v1 header parses");
    assert_eq!((back.source, back.destination), (Some(src), Some(dst)));
});
