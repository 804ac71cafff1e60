//! The JSON text of the three messages a tracker writes for every announce (its answer
//! and the offers and answers it relays), written straight into one `String`.
//!
//! serde_json writes the same text through its generic serializer: a map of entries, each
//! binary field a `Display` fed through `collect_str` one `char` at a time (escape check,
//! UTF-8 encoding and a formatter call per byte), into a buffer that starts small and
//! grows. Under `aquatic_ws_load_test` that serialization was about 5% of the WebTorrent
//! front end's CPU. Here each message is sized first and written with a byte table; the
//! output is the same text byte for byte (a property test checks it against serde_json
//! for every byte value), so clients see no difference.

use super::{AnnounceResponse, Relayed};

/// How serde_json writes a byte of a binary string: as itself (the byte is printable
/// ASCII or at least 0x80, which becomes a two-byte UTF-8 sequence), as a two-character
/// escape, or as `\u00XX`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Short(u8),
    Unicode,
}

const fn escape_of(b: u8) -> Escape {
    match b {
        b'"' => Escape::Short(b'"'),
        b'\\' => Escape::Short(b'\\'),
        0x08 => Escape::Short(b'b'),
        0x0c => Escape::Short(b'f'),
        b'\n' => Escape::Short(b'n'),
        b'\r' => Escape::Short(b'r'),
        b'\t' => Escape::Short(b't'),
        0..0x20 => Escape::Unicode,
        _ => Escape::None,
    }
}

const ESCAPES: [Escape; 256] = {
    let mut t = [Escape::None; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = escape_of(b as u8);
        b += 1;
    }
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` as a binary string, quotes included.
fn push_binary(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match ESCAPES[usize::from(b)] {
            Escape::None => out.push(char::from(b)),
            Escape::Short(c) => {
                out.push('\\');
                out.push(char::from(c));
            }
            Escape::Unicode => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
    }
    out.push('"');
}

/// The most bytes a binary string of `n` bytes takes, quotes included.
const fn binary_max(n: usize) -> usize {
    n * 6 + 2
}

fn push_u32(out: &mut String, n: u32) {
    let mut buf = itoa::Buffer::new();
    out.push_str(buf.format(n));
}

impl AnnounceResponse {
    /// The message as JSON text (what `serde_json::to_string` of it gives).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(80 + binary_max(20));
        out.push_str(r#"{"action":"announce","info_hash":"#);
        push_binary(&mut out, &self.info_hash.0);
        out.push_str(r#","complete":"#);
        push_u32(&mut out, self.complete);
        out.push_str(r#","incomplete":"#);
        push_u32(&mut out, self.incomplete);
        out.push_str(r#","interval":"#);
        push_u32(&mut out, self.interval);
        out.push('}');
        out
    }
}

impl Relayed<'_> {
    /// The message as JSON text (what `serde_json::to_string` of it gives).
    pub fn to_json(&self) -> String {
        let (info_hash, peer_id, offer_id) = (&self.info_hash, &self.peer_id, &self.offer_id);
        let (key, sdp) = self.sdp.entry();
        let sdp = sdp.get();
        let ids = binary_max(20) * 2 + binary_max(offer_id.as_bytes().len());
        let mut out = String::with_capacity(64 + ids + sdp.len());
        out.push_str(r#"{"action":"announce","info_hash":"#);
        push_binary(&mut out, &info_hash.0);
        out.push_str(r#","peer_id":"#);
        push_binary(&mut out, &peer_id.0);
        out.push_str(r#","offer_id":"#);
        push_binary(&mut out, offer_id.as_bytes());
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        out.push_str(sdp);
        out.push('}');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::{InfoHash, PeerId};
    use crate::ws::{OfferId, Sdp};
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    fn bytes20() -> impl Strategy<Value = [u8; 20]> {
        proptest::array::uniform20(any::<u8>())
    }

    #[test]
    fn every_byte_is_written_as_serde_json_writes_it() {
        let all: Vec<u8> = (0..=255).collect();
        for chunk in all.chunks(20) {
            let mut h = [0u8; 20];
            h[..chunk.len()].copy_from_slice(chunk);
            let r = AnnounceResponse {
                info_hash: InfoHash(h),
                complete: u32::MAX,
                incomplete: 0,
                interval: 120,
            };
            assert_eq!(r.to_json(), serde_json::to_string(&r).unwrap());
        }
    }

    proptest! {
        #[test]
        fn announce_responses_match_serde_json(h in bytes20(), c: u32, i: u32, n: u32) {
            let r = AnnounceResponse { info_hash: InfoHash(h), complete: c, incomplete: i, interval: n };
            prop_assert_eq!(r.to_json(), serde_json::to_string(&r).unwrap());
        }

        #[test]
        fn relayed_messages_match_serde_json(h in bytes20(), p in bytes20(),
                                             o in proptest::collection::vec(any::<u8>(), 1..=32),
                                             sdp in "[ -~]{0,40}") {
            let raw = serde_json::to_string(&serde_json::json!({"type": "offer", "sdp": sdp})).unwrap();
            let raw = RawValue::from_string(raw).unwrap();
            let offer_id = OfferId::new(&o).unwrap();
            for sdp in [Sdp::Offer(&raw), Sdp::Answer(&raw)] {
                let relayed = Relayed { info_hash: InfoHash(h), peer_id: PeerId(p), offer_id, sdp };
                prop_assert_eq!(relayed.to_json(), serde_json::to_string(&relayed).unwrap());
            }
        }
    }
}
