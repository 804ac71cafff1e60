//! BEP 3 / BEP 48 HTTP tracker requests: the request target and its query string.
//!
//! The HTTP front end hands this module the request target (`/announce?info_hash=...`) and
//! gets back a typed [`AnnounceRequest`] or the info hashes of a scrape, or a
//! [`RequestError`] whose message goes to the client as a bencoded `failure reason`. Binary
//! parameters (`info_hash`, `peer_id`) are percent-decoded straight into fixed 20-byte arrays
//! and everything else borrows from the target, so parsing an announce does not allocate; a
//! scrape's hashes go into the caller's reusable `Vec`. The route and its passkey
//! (`/announce/<passkey>`, `/<passkey>/announce`) are read by [`crate::path`], the one path
//! parser of every protocol.
//!
//! Parameters a tracker does not need (`supportcrypto`, `corrupt`, `redundant`, ...) are
//! ignored, as every client sends some. A parameter we do use that is present but malformed
//! is an error, never silently replaced by a default: a client with a bug should hear about
//! it.

use std::net::IpAddr;

use thiserror::Error;

use crate::common::{hex_digit, AnnounceEvent, InfoHash, PeerId};
use crate::path::{
    parse_path_with_query, split_target, write_path, Action, PasskeyPlace, PathError, TrackerPath,
    MALFORMED_PASSKEY,
};

/// Why a request could not be served. The `Display` text is what the client reads in its
/// `failure reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RequestError {
    #[error("unknown path: use /announce or /scrape")]
    UnknownPath,
    /// The path names this action, but its passkey is not one ([`crate::path`] says what
    /// a passkey may be).
    #[error("{}", MALFORMED_PASSKEY)]
    MalformedPasskey(Action),
    #[error("missing parameter: {0}")]
    Missing(&'static str),
    #[error("malformed parameter: {0}")]
    Malformed(&'static str),
    #[error("{0} must be exactly 20 bytes")]
    WrongLength(&'static str),
    #[error("parameter given more than once: {0}")]
    Repeated(&'static str),
    #[error("invalid port 0")]
    PortZero,
    #[error("too many info hashes in scrape (at most {0})")]
    TooManyInfoHashes(usize),
}

impl From<PathError> for RequestError {
    fn from(e: PathError) -> Self {
        match e {
            PathError::UnknownPath => RequestError::UnknownPath,
            PathError::MalformedPasskey(action) => RequestError::MalformedPasskey(action),
        }
    }
}

/// What a request target asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// `/announce`, `/announce/<key>` or `/<key>/announce`, with the query string (without
    /// `?`). The key is a passkey as [`crate::path`] defines it.
    Announce {
        key: Option<&'a str>,
        query: &'a [u8],
    },
    /// `/scrape`, `/scrape/<key>` or `/<key>/scrape` (the usual rewrites of an announce
    /// URL), with its query.
    Scrape {
        key: Option<&'a str>,
        query: &'a [u8],
    },
}

/// Splits a request target into its route and query. The route is read by the one path
/// parser every protocol uses ([`crate::path::parse_path_with_query`]): `/announce`,
/// `/scrape`, and either with a passkey, `/announce/<passkey>` or `/<passkey>/announce`,
/// or with `passkey=<key>` in the query (`/announce.php?passkey=<key>`).
pub fn parse_target(target: &[u8]) -> Result<Target<'_>, RequestError> {
    let (path, query) = split_target(target);
    let TrackerPath { action, passkey } = parse_path_with_query(path, query)?;
    Ok(match action {
        Action::Announce => Target::Announce {
            key: passkey,
            query,
        },
        Action::Scrape => Target::Scrape {
            key: passkey,
            query,
        },
    })
}

/// An announce as the client sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnounceRequest<'a> {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub port: u16,
    pub uploaded: u64,
    pub downloaded: u64,
    pub left: u64,
    pub event: AnnounceEvent,
    /// Peers wanted; `None` when absent (the tracker's default applies).
    pub numwant: Option<i64>,
    /// Compact peer lists (BEP 23); true unless the client sent `compact=0`.
    pub compact: bool,
    /// Leave `peer id` out of dictionary-form peers.
    pub no_peer_id: bool,
    /// The client's `key`, still percent-encoded (clients send hex or raw bytes).
    pub key: Option<&'a [u8]>,
    /// The address the client claims. A value that is not an IP address (BEP 3 allows a
    /// DNS name) is ignored rather than refused: it is only a hint.
    pub ip: Option<IpAddr>,
    /// The passkey of `/announce/<key>` or `/<key>/announce`, carried for private trackers.
    pub path_key: Option<&'a str>,
}

/// Iterates over `name=value` pairs of a query string (raw, still percent-encoded).
fn pairs(query: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    query.split(|&b| b == b'&').filter_map(|pair| {
        if pair.is_empty() {
            return None;
        }
        Some(match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &pair[pair.len()..]),
        })
    })
}

/// Percent-decodes `raw` into `out`, returning the decoded length, or `None` if an escape
/// is broken or the value does not fit. `+` stands for a space (form encoding), as some
/// clients encode that way.
pub fn percent_decode(raw: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let hi = hex_digit(*raw.get(i + 1)?)?;
                let lo = hex_digit(*raw.get(i + 2)?)?;
                i += 3;
                (hi << 4) | lo
            }
            b'+' => {
                i += 1;
                b' '
            }
            b => {
                i += 1;
                b
            }
        };
        *out.get_mut(n)? = b;
        n += 1;
    }
    Some(n)
}

/// Decodes a binary parameter that must be exactly 20 bytes.
fn decode20(raw: &[u8], name: &'static str) -> Result<[u8; 20], RequestError> {
    let mut buf = [0u8; 21];
    match percent_decode(raw, &mut buf) {
        Some(20) => {
            let mut out = [0u8; 20];
            out.copy_from_slice(&buf[..20]);
            Ok(out)
        }
        Some(_) => Err(RequestError::WrongLength(name)),
        // Too long to fit 21 bytes is a wrong length too; a broken escape is malformed.
        None if valid_escapes(raw) => Err(RequestError::WrongLength(name)),
        None => Err(RequestError::Malformed(name)),
    }
}

fn valid_escapes(raw: &[u8]) -> bool {
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            match (raw.get(i + 1), raw.get(i + 2)) {
                (Some(&a), Some(&b)) if hex_digit(a).is_some() && hex_digit(b).is_some() => i += 3,
                _ => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

fn parse_u64(raw: &[u8], name: &'static str) -> Result<u64, RequestError> {
    if raw.is_empty() || raw.len() > 20 || !raw.iter().all(u8::is_ascii_digit) {
        return Err(RequestError::Malformed(name));
    }
    let mut v: u64 = 0;
    for &d in raw {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or(RequestError::Malformed(name))?;
    }
    Ok(v)
}

fn parse_i64(raw: &[u8], name: &'static str) -> Result<i64, RequestError> {
    match raw {
        [b'-', digits @ ..] => {
            let v = parse_u64(digits, name)?;
            0i64.checked_sub_unsigned(v)
                .ok_or(RequestError::Malformed(name))
        }
        _ => i64::try_from(parse_u64(raw, name)?).map_err(|_| RequestError::Malformed(name)),
    }
}

fn parse_bool(raw: &[u8], name: &'static str) -> Result<bool, RequestError> {
    match raw {
        b"0" => Ok(false),
        b"1" => Ok(true),
        _ => Err(RequestError::Malformed(name)),
    }
}

fn set_once<T>(slot: &mut Option<T>, v: T, name: &'static str) -> Result<(), RequestError> {
    if slot.is_some() {
        return Err(RequestError::Repeated(name));
    }
    *slot = Some(v);
    Ok(())
}

impl<'a> AnnounceRequest<'a> {
    /// Parses an announce's query string. Required: `info_hash`, `peer_id`, `port`, `left`
    /// (BEP 3); `uploaded` and `downloaded` default to 0 when absent.
    pub fn parse(query: &'a [u8], path_key: Option<&'a str>) -> Result<Self, RequestError> {
        let mut info_hash = None;
        let mut peer_id = None;
        let mut port = None;
        let mut uploaded = None;
        let mut downloaded = None;
        let mut left = None;
        let mut event = None;
        let mut numwant = None;
        let mut compact = None;
        let mut no_peer_id = None;
        let mut key = None;
        let mut ip = None;
        for (name, value) in pairs(query) {
            match name {
                b"info_hash" => set_once(
                    &mut info_hash,
                    InfoHash(decode20(value, "info_hash")?),
                    "info_hash",
                )?,
                b"peer_id" => {
                    set_once(&mut peer_id, PeerId(decode20(value, "peer_id")?), "peer_id")?
                }
                b"port" => {
                    let p = parse_u64(value, "port")?;
                    let p = u16::try_from(p).map_err(|_| RequestError::Malformed("port"))?;
                    set_once(&mut port, p, "port")?
                }
                b"uploaded" => set_once(&mut uploaded, parse_u64(value, "uploaded")?, "uploaded")?,
                b"downloaded" => set_once(
                    &mut downloaded,
                    parse_u64(value, "downloaded")?,
                    "downloaded",
                )?,
                b"left" => set_once(&mut left, parse_u64(value, "left")?, "left")?,
                b"event" => {
                    let e = match value {
                        b"started" => AnnounceEvent::Started,
                        b"completed" => AnnounceEvent::Completed,
                        b"stopped" => AnnounceEvent::Stopped,
                        // BEP 21's `paused` is a regular announce for a tracker.
                        b"" | b"empty" | b"paused" => AnnounceEvent::None,
                        _ => return Err(RequestError::Malformed("event")),
                    };
                    set_once(&mut event, e, "event")?
                }
                b"numwant" => set_once(&mut numwant, parse_i64(value, "numwant")?, "numwant")?,
                b"compact" => set_once(&mut compact, parse_bool(value, "compact")?, "compact")?,
                b"no_peer_id" => set_once(
                    &mut no_peer_id,
                    parse_bool(value, "no_peer_id")?,
                    "no_peer_id",
                )?,
                b"key" => set_once(&mut key, value, "key")?,
                b"ip" => {
                    let mut buf = [0u8; 64];
                    let parsed = percent_decode(value, &mut buf)
                        .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
                        .and_then(|s| s.parse::<IpAddr>().ok());
                    // Checked for repetition, but a non-IP value is only ignored.
                    set_once(&mut ip, parsed, "ip")?
                }
                _ => {}
            }
        }
        let port = port.ok_or(RequestError::Missing("port"))?;
        let req = Self {
            info_hash: info_hash.ok_or(RequestError::Missing("info_hash"))?,
            peer_id: peer_id.ok_or(RequestError::Missing("peer_id"))?,
            port,
            uploaded: uploaded.unwrap_or(0),
            downloaded: downloaded.unwrap_or(0),
            left: left.ok_or(RequestError::Missing("left"))?,
            event: event.unwrap_or_default(),
            numwant,
            compact: compact.unwrap_or(true),
            no_peer_id: no_peer_id.unwrap_or(false),
            key,
            ip: ip.flatten(),
            path_key,
        };
        if port == 0 {
            return Err(RequestError::PortZero);
        }
        Ok(req)
    }
}

/// Parses a scrape's query string: every `info_hash` goes into `out` (cleared first), in
/// the order given. No `info_hash` at all leaves `out` empty: a full scrape. More than
/// `max` hashes is an error.
pub fn parse_scrape(query: &[u8], max: usize, out: &mut Vec<InfoHash>) -> Result<(), RequestError> {
    out.clear();
    for (name, value) in pairs(query) {
        if name == b"info_hash" {
            if out.len() >= max {
                return Err(RequestError::TooManyInfoHashes(max));
            }
            out.push(InfoHash(decode20(value, "info_hash")?));
        }
    }
    Ok(())
}

/// Percent-encodes every byte (the form clients use for binary parameters). For tests,
/// the load generator and the fuzz targets.
pub fn percent_encode_all(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
}

/// Writes an announce's request target (`/announce?...`): the inverse of [`parse_target`]
/// and [`AnnounceRequest::parse`], for tests, the load generator and the fuzz targets.
pub fn write_announce_target(req: &AnnounceRequest<'_>, out: &mut Vec<u8>) {
    use std::io::Write;
    let path = TrackerPath {
        action: Action::Announce,
        passkey: req.path_key,
    };
    write_path(&path, PasskeyPlace::AfterAction, out);
    out.extend_from_slice(b"?info_hash=");
    percent_encode_all(&req.info_hash.0, out);
    out.extend_from_slice(b"&peer_id=");
    percent_encode_all(&req.peer_id.0, out);
    let _ = write!(
        out,
        "&port={}&uploaded={}&downloaded={}&left={}",
        req.port, req.uploaded, req.downloaded, req.left
    );
    match req.event {
        AnnounceEvent::None => {}
        AnnounceEvent::Started => out.extend_from_slice(b"&event=started"),
        AnnounceEvent::Completed => out.extend_from_slice(b"&event=completed"),
        AnnounceEvent::Stopped => out.extend_from_slice(b"&event=stopped"),
    }
    if let Some(n) = req.numwant {
        let _ = write!(out, "&numwant={n}");
    }
    let _ = write!(
        out,
        "&compact={}&no_peer_id={}",
        u8::from(req.compact),
        u8::from(req.no_peer_id)
    );
    if let Some(k) = req.key {
        out.extend_from_slice(b"&key=");
        out.extend_from_slice(k);
    }
    if let Some(ip) = req.ip {
        let _ = write!(out, "&ip={ip}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::arb_event;
    use proptest::prelude::*;

    const IH: &str = "%01%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14";

    /// Parses a test query (leaked, so that results may borrow from it freely).
    fn announce(q: &str) -> Result<AnnounceRequest<'static>, RequestError> {
        let q: &'static str = Box::leak(q.to_owned().into_boxed_str());
        AnnounceRequest::parse(q.as_bytes(), None)
    }

    fn base() -> String {
        format!("info_hash={IH}&peer_id=-qB4520-abcdefghijkl&port=6881&left=0")
    }

    #[test]
    fn targets_route_and_carry_the_key() {
        let announce = |key, query| Ok(Target::Announce { key, query });
        let scrape = |key, query| Ok(Target::Scrape { key, query });
        let unknown = Err(RequestError::UnknownPath);
        for (target, expected) in [
            (&b"/announce?a=1"[..], announce(None, &b"a=1"[..])),
            (b"/announce/s3cret?x", announce(Some("s3cret"), b"x")),
            (b"/scrape", scrape(None, b"")),
            (b"/scrape/k/?info_hash=1", scrape(Some("k"), b"info_hash=1")),
            (b"/", unknown),
            (b"/announcex", unknown),
            (b"/ann", unknown),
            (b"/announce//", unknown),
            (b"/announce/a/b", unknown),
            (b"", unknown),
            (b"/s3cret/announce?x", announce(Some("s3cret"), b"x")),
            (
                b"/k/scrape/?info_hash=1#f",
                scrape(Some("k"), b"info_hash=1"),
            ),
            (b"/a/b?x", unknown),
            (
                b"/announce/a!b?x",
                Err(RequestError::MalformedPasskey(Action::Announce)),
            ),
            (
                b"/a%20b/scrape",
                Err(RequestError::MalformedPasskey(Action::Scrape)),
            ),
        ] {
            assert_eq!(parse_target(target), expected, "{target:?}");
        }
        assert_eq!(
            RequestError::MalformedPasskey(Action::Scrape).to_string(),
            PathError::MalformedPasskey(Action::Scrape).to_string(),
            "one failure reason on every protocol"
        );
    }

    #[test]
    fn a_real_qbittorrent_announce_parses() {
        let q = format!("info_hash={IH}&peer_id=-qB4520-abcdefghijkl&port=37569&uploaded=1&downloaded=2&left=3&corrupt=0&key=5E4B208C&event=started&numwant=200&compact=1&no_peer_id=1&supportcrypto=1&redundant=0");
        let r = announce(&q).unwrap();
        assert_eq!(r.info_hash.0[0], 1);
        assert_eq!(r.info_hash.0[19], 20);
        assert_eq!(&r.peer_id.0, b"-qB4520-abcdefghijkl");
        assert_eq!((r.port, r.uploaded, r.downloaded, r.left), (37569, 1, 2, 3));
        assert_eq!(r.event, AnnounceEvent::Started);
        assert_eq!(r.numwant, Some(200));
        assert!(r.compact && r.no_peer_id);
        assert_eq!(r.key, Some(&b"5E4B208C"[..]));
    }

    #[test]
    fn defaults_apply_to_optional_parameters() {
        let r = announce(&base()).unwrap();
        assert_eq!((r.uploaded, r.downloaded), (0, 0));
        assert_eq!(r.event, AnnounceEvent::None);
        assert_eq!(r.numwant, None);
        assert!(r.compact);
        assert!(!r.no_peer_id);
        assert_eq!(r.key, None);
        assert_eq!(r.ip, None);
    }

    /// The base query with parameter `name` removed, and `extra` appended if not empty.
    fn with(name: &str, extra: &str) -> String {
        let mut parts: Vec<String> = base()
            .split('&')
            .filter(|p| !p.starts_with(&format!("{name}=")))
            .map(String::from)
            .collect();
        if !extra.is_empty() {
            parts.push(extra.into());
        }
        parts.join("&")
    }

    #[test]
    fn every_required_parameter_is_named_when_missing() {
        for name in ["info_hash", "peer_id", "port", "left"] {
            assert_eq!(
                announce(&with(name, "")),
                Err(RequestError::Missing(name)),
                "{name}"
            );
        }
    }

    #[test]
    fn malformed_values_are_named() {
        let cases = [
            ("port=", "port"),
            ("port=65536", "port"),
            ("port=-1", "port"),
            ("port=12a", "port"),
            ("left=x", "left"),
            ("left=-5", "left"),
            ("uploaded=1.5", "uploaded"),
            ("downloaded=99999999999999999999999", "downloaded"),
            ("event=finished", "event"),
            ("numwant=ten", "numwant"),
            ("numwant=99999999999999999999", "numwant"),
            ("compact=yes", "compact"),
            ("no_peer_id=2", "no_peer_id"),
        ];
        for (param, name) in cases {
            let q = with(name, param);
            assert_eq!(announce(&q), Err(RequestError::Malformed(name)), "{q}");
        }
    }

    #[test]
    fn binary_parameters_must_be_20_bytes() {
        let short = base().replace(IH, "%01%02");
        assert_eq!(
            announce(&short),
            Err(RequestError::WrongLength("info_hash"))
        );
        let long = base().replace(IH, &format!("{IH}%15"));
        assert_eq!(announce(&long), Err(RequestError::WrongLength("info_hash")));
        let very_long = base().replace(IH, &"a".repeat(500));
        assert_eq!(
            announce(&very_long),
            Err(RequestError::WrongLength("info_hash"))
        );
        let broken = base().replace(
            IH,
            "%0G%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14",
        );
        assert_eq!(announce(&broken), Err(RequestError::Malformed("info_hash")));
        let bad_peer = base().replace("-qB4520-abcdefghijkl", "short");
        assert_eq!(
            announce(&bad_peer),
            Err(RequestError::WrongLength("peer_id"))
        );
    }

    #[test]
    fn repeated_parameters_and_port_zero_are_refused() {
        assert_eq!(
            announce(&format!("{}&port=7", base())),
            Err(RequestError::Repeated("port"))
        );
        assert_eq!(
            announce(&format!("{}&info_hash={IH}", base())),
            Err(RequestError::Repeated("info_hash"))
        );
        assert_eq!(
            announce(&base().replace("port=6881", "port=0")),
            Err(RequestError::PortZero)
        );
    }

    #[test]
    fn events_numwant_ip_and_compact_zero() {
        for (v, e) in [
            ("started", AnnounceEvent::Started),
            ("completed", AnnounceEvent::Completed),
            ("stopped", AnnounceEvent::Stopped),
            ("", AnnounceEvent::None),
            ("empty", AnnounceEvent::None),
            ("paused", AnnounceEvent::None),
        ] {
            assert_eq!(announce(&format!("{}&event={v}", base())).unwrap().event, e);
        }
        let r = announce(&format!("{}&numwant=-1&compact=0&ip=10.0.0.7", base())).unwrap();
        assert_eq!(r.numwant, Some(-1));
        assert!(!r.compact);
        assert_eq!(r.ip, Some("10.0.0.7".parse().unwrap()));
        let r = announce(&format!("{}&ip=%3A%3A1", base())).unwrap();
        assert_eq!(r.ip, Some("::1".parse().unwrap()));
        let r = announce(&format!("{}&ip=example.org", base())).unwrap();
        assert_eq!(r.ip, None);
    }

    #[test]
    fn scrape_collects_hashes_and_caps_them() {
        let mut out = Vec::new();
        let q = format!("info_hash={IH}&info_hash={}&x=1", "a".repeat(20));
        parse_scrape(q.as_bytes(), 10, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].0, [b'a'; 20]);
        parse_scrape(b"", 10, &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(
            parse_scrape(q.as_bytes(), 1, &mut out),
            Err(RequestError::TooManyInfoHashes(1))
        );
        assert_eq!(
            parse_scrape(b"info_hash=abc", 10, &mut out),
            Err(RequestError::WrongLength("info_hash"))
        );
    }

    #[test]
    fn plus_is_a_space_and_plain_bytes_pass_through() {
        let mut out = [0u8; 8];
        assert_eq!(percent_decode(b"a+b%20c", &mut out), Some(5));
        assert_eq!(&out[..5], b"a b c");
        assert_eq!(percent_decode(b"%2", &mut out), None);
        assert_eq!(percent_decode(b"123456789", &mut out), None);
    }

    proptest! {
        #[test]
        fn announce_round_trips(
            ih in any::<[u8; 20]>(), pid in any::<[u8; 20]>(), port in 1u16..,
            up in any::<u64>(), down in any::<u64>(), left in any::<u64>(),
            event in arb_event(), numwant in proptest::option::of(any::<i64>()),
            compact in any::<bool>(), no_peer_id in any::<bool>(),
            key in proptest::option::of("[0-9A-F]{1,16}"),
            ip in proptest::option::of(any::<std::net::IpAddr>()),
            path_key in proptest::option::of("[a-zA-Z0-9]{1,32}"),
        ) {
            let req = AnnounceRequest {
                info_hash: InfoHash(ih), peer_id: PeerId(pid), port,
                uploaded: up, downloaded: down, left, event, numwant, compact, no_peer_id,
                key: key.as_deref().map(str::as_bytes), ip,
                path_key: path_key.as_deref(),
            };
            let mut target = Vec::new();
            write_announce_target(&req, &mut target);
            let (key, query) = match parse_target(&target).unwrap() {
                Target::Announce { key, query } => (key, query),
                other => panic!("{other:?}"),
            };
            let back = AnnounceRequest::parse(query, key).unwrap();
            prop_assert_eq!(back, req);
        }

        #[test]
        fn arbitrary_queries_never_panic(q in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = AnnounceRequest::parse(&q, None);
            let _ = parse_target(&q);
            let mut out = Vec::new();
            let _ = parse_scrape(&q, 5, &mut out);
            prop_assert!(out.len() <= 5);
        }
    }
}
