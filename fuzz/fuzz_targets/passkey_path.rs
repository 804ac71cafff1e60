//! Fuzzes the tracker path parser that reads passkeys on every protocol: any bytes as an
//! HTTP path or target (and a WebSocket upgrade path), and as the BEP 41 options that follow
//! a UDP announce, must give a path or an error, never a panic. What parses must carry a
//! valid passkey and survive being written back in both forms; the same bytes wrapped in
//! BEP 41 URL-data options must read as they do as a target (or, cut short by the
//! buffer, as an error).
#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::path::{
    is_passkey, parse_path, parse_target_path, write_path, PasskeyPlace, PathError, TrackerPath,
};
use shoal_proto::udp::{url_data_path, write_url_data_option, URL_PATH_BUFFER};

fuzz_target!(|data: &[u8]| {
    check(parse_path(data));
    let as_target = parse_target_path(data);
    check(as_target);

    // The input as the raw options after an announce.
    let mut buf = [0u8; URL_PATH_BUFFER];
    if let Some(r) = url_data_path(data, &mut buf) {
        check(r);
    }

    // The input as URL data, wrapped in options the way libtorrent sends it.
    let mut options = Vec::new();
    write_url_data_option(data, &mut options);
    let mut buf = [0u8; URL_PATH_BUFFER];
    match url_data_path(&options, &mut buf) {
        None => assert!(data.is_empty(), "URL data lost"),
        // It fits the buffer: read exactly as the target.
        Some(r) if data.len() <= URL_PATH_BUFFER => assert_eq!(r, as_target),
        // Cut short by the buffer: what still reads is what the whole reads (a cut may
        // only turn an answer into an error, never into another passkey).
        Some(r) => {
            if let Ok(path) = r {
                assert_eq!(Ok(path), as_target);
            }
        }
    }
});

fn check(parsed: Result<TrackerPath<'_>, PathError>) {
    let Ok(path) = parsed else { return };
    let Some(key) = path.passkey else { return };
    assert!(is_passkey(key.as_bytes()), "{key:?}");
    // A passkey spelled like an action is read action-first (see `shoal_proto::path`).
    // (`announce`, `scrape.php`...: whatever reads as an action on its own).
    let ambiguous = parse_path(format!("/{key}").as_bytes()).is_ok();
    for place in [PasskeyPlace::AfterAction, PasskeyPlace::BeforeAction] {
        let mut out = Vec::new();
        write_path(&path, place, &mut out);
        let back = parse_path(&out).expect("a written path parses");
        if !ambiguous {
            assert_eq!(back, path, "{place:?}");
        }
    }
}
