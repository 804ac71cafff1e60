//! The tracker paths that sites hand out, with or without a passkey: one parser for the
//! three protocols.
//!
//! A private tracker gives each user announce URLs that carry their passkey in the path,
//! and the same URL shape reaches us three ways: as an HTTP request target, as BEP 41 URL
//! data after a UDP announce (`udp://host:port/<passkey>/announce`), and as the path of a
//! WebSocket upgrade (`wss://host/<passkey>/announce`). Parsing it once, here, means the
//! three protocols cannot disagree on what a passkey is.
//!
//! # Accepted paths
//!
//! | path | action | passkey |
//! |---|---|---|
//! | `/announce`, `/scrape` | announce, scrape | none |
//! | `/announce/<passkey>`, `/scrape/<passkey>` | announce, scrape | `<passkey>` |
//! | `/<passkey>/announce`, `/<passkey>/scrape` | announce, scrape | `<passkey>` |
//! | any of these with `?passkey=<key>` in the query | the path's | `<key>` |
//!
//! `announce.php` and `scrape.php` name the actions as `announce` and `scrape` do: the
//! paths of the PHP trackers (NexusPHP, TBDev and their kin), whose clients carry the
//! passkey in the query string (`/announce.php?passkey=<key>`). A `passkey` parameter of
//! the query (read by [`parse_target_path`] and [`parse_path_with_query`]) stands for the
//! path's key, so that `/api/announce?passkey=<key>` (NexusPHP 1.7's path, whose first
//! segment would otherwise read as a key) carries `<key>`; an empty one is no key.
//!
//! One trailing slash is allowed (`/announce/`, `/<passkey>/announce/`); anything else (an
//! empty segment, a third segment, a path naming neither action) is
//! [`PathError::UnknownPath`]. The action names are matched exactly (lower case). When both
//! segments name an action (`/scrape/announce`), the first one is the action and the second
//! the passkey, as HTTP has always read it; no site hands out such a key.
//!
//! # The passkey
//!
//! 1 to [`MAX_PASSKEY_LEN`] (64) characters of `A-Z a-z 0-9 - . _ ~`: the URL-safe
//! ("unreserved", RFC 3986) characters, so a passkey never needs percent-encoding and is
//! compared byte for byte as the site wrote it. Sites use 32 hex or alphanumeric
//! characters, well inside this. A path that names an action but whose passkey segment is
//! outside this set or too long is [`PathError::MalformedPasskey`], with a message that says
//! what a passkey may be. Percent-escapes are not decoded: `%41` is not `A` but a malformed
//! passkey.
//!
//! Nothing here allocates: the passkey borrows from the path.

use thiserror::Error;

/// The longest passkey accepted, in bytes (characters: a passkey is ASCII).
pub const MAX_PASSKEY_LEN: usize = 64;

/// The longest path that can parse: `/<64-character passkey>/announce/`. That no longer
/// path parses is what lets the UDP front end collect BEP 41 URL data into a small fixed
/// buffer (see [`crate::udp::url_data_path`]): a path cut short by it was too long anyway.
pub const MAX_PATH_LEN: usize = 1 + MAX_PASSKEY_LEN + 1 + "announce".len() + 1;

/// What `failure reason` a malformed passkey gets (shared by every error type that carries
/// one, so that the text is the same on every protocol).
pub const MALFORMED_PASSKEY: &str =
    "malformed passkey: use 1 to 64 characters of A-Z, a-z, 0-9, '-', '.', '_' and '~'";

/// What a tracker path asks for (the segment that names it is [`Action::as_str`]).
pub use crate::common::Action;

/// The action a path segment names, if any (exactly, lower case).
fn action_of(segment: &[u8]) -> Option<Action> {
    match segment {
        b"announce" | b"announce.php" => Some(Action::Announce),
        b"scrape" | b"scrape.php" => Some(Action::Scrape),
        _ => None,
    }
}

/// A parsed tracker path: the action and the passkey, if the path carried one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackerPath<'a> {
    pub action: Action,
    pub passkey: Option<&'a str>,
}

/// Where [`write_path`] puts the passkey: both forms are in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PasskeyPlace {
    /// `/announce/<passkey>` (UNIT3D's form, and the only one shoal read before).
    AfterAction,
    /// `/<passkey>/announce` (Gazelle's Ocelot form).
    BeforeAction,
}

/// Why a path does not parse. The `Display` text is fit for a client's `failure reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PathError {
    /// The path names neither `announce` nor `scrape` in an accepted form.
    #[error("unknown path: use /announce or /scrape")]
    UnknownPath,
    /// The path names this action, but its passkey segment is not a passkey.
    #[error("{}", MALFORMED_PASSKEY)]
    MalformedPasskey(Action),
}

/// Which byte values a passkey may hold (`A-Z a-z 0-9 - . _ ~`), indexed by the byte.
///
/// [`is_passkey`] looks every byte up here and folds the answers without a branch. The
/// character-class test it replaced (`is_ascii_alphanumeric() || ...`, stopping at the first
/// miss) branched on every byte, and a hex passkey switches between digits and letters at
/// random: the mispredictions made `parse_path` 4.7% of a private tracker's UDP worker
/// under shoal-bench (`perf annotate`: the class test's compares took the samples).
const PASSKEY_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
        b += 1;
    }
    table
};

/// Whether `key` is a passkey: 1 to [`MAX_PASSKEY_LEN`] characters of
/// `A-Z a-z 0-9 - . _ ~`.
pub fn is_passkey(key: &[u8]) -> bool {
    (1..=MAX_PASSKEY_LEN).contains(&key.len())
        && key
            .iter()
            .fold(true, |ok, &b| ok & PASSKEY_BYTES[usize::from(b)])
}

/// Splits a request target (`/path?query#fragment`) into its path and its query (without
/// the `?`; a fragment, which a broken client might send, is cut off).
pub fn split_target(target: &[u8]) -> (&[u8], &[u8]) {
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, &target[target.len()..]),
    };
    let query = match query.iter().position(|&b| b == b'#') {
        Some(i) => &query[..i],
        None => query,
    };
    (path, query)
}

/// Parses a path (no query string: see [`split_target`]) in one of the accepted forms.
pub fn parse_path(path: &[u8]) -> Result<TrackerPath<'_>, PathError> {
    let rest = path.strip_prefix(b"/").ok_or(PathError::UnknownPath)?;
    let rest = rest.strip_suffix(b"/").unwrap_or(rest);
    let Some(slash) = rest.iter().position(|&b| b == b'/') else {
        let action = action_of(rest).ok_or(PathError::UnknownPath)?;
        return Ok(TrackerPath {
            action,
            passkey: None,
        });
    };
    let (first, second) = (&rest[..slash], &rest[slash + 1..]);
    let (action, key) = match (action_of(first), action_of(second)) {
        (Some(action), _) => (action, second),
        (None, Some(action)) => (action, first),
        (None, None) => return Err(PathError::UnknownPath),
    };
    if key.is_empty() || key.contains(&b'/') {
        return Err(PathError::UnknownPath);
    }
    if !is_passkey(key) {
        return Err(PathError::MalformedPasskey(action));
    }
    // Checked ASCII just above, so this never fails.
    let passkey = std::str::from_utf8(key).map_err(|_| PathError::MalformedPasskey(action))?;
    Ok(TrackerPath {
        action,
        passkey: Some(passkey),
    })
}

/// Parses a path and its query (without the `?`): the path's action and key, the key of a
/// `passkey=` parameter of the query standing for the path's where there is one.
pub fn parse_path_with_query<'a>(
    path: &'a [u8],
    query: &'a [u8],
) -> Result<TrackerPath<'a>, PathError> {
    let mut parsed = parse_path(path)?;
    let key = query
        .split(|&b| b == b'&')
        .find_map(|pair| pair.strip_prefix(b"passkey="));
    match key {
        None | Some(b"") => {}
        Some(key) if is_passkey(key) => {
            // Checked ASCII just above, so this never fails.
            parsed.passkey = std::str::from_utf8(key).ok();
        }
        Some(_) => return Err(PathError::MalformedPasskey(parsed.action)),
    }
    Ok(parsed)
}

/// Parses a whole request target (`/<passkey>/announce?x=1`, `/announce.php?passkey=<key>`):
/// what the WebSocket front end does with its upgrade request's path, and the UDP front
/// end with BEP 41 URL data.
pub fn parse_target_path(target: &[u8]) -> Result<TrackerPath<'_>, PathError> {
    let (path, query) = split_target(target);
    parse_path_with_query(path, query)
}

/// Appends `path` in the form `place` names (`/announce` alone when there is no passkey):
/// the inverse of [`parse_path`], for the load generator, the tests and the fuzz targets.
pub fn write_path(path: &TrackerPath<'_>, place: PasskeyPlace, out: &mut Vec<u8>) {
    let action = path.action.as_str().as_bytes();
    out.push(b'/');
    match (path.passkey, place) {
        (None, _) => out.extend_from_slice(action),
        (Some(key), PasskeyPlace::AfterAction) => {
            out.extend_from_slice(action);
            out.push(b'/');
            out.extend_from_slice(key.as_bytes());
        }
        (Some(key), PasskeyPlace::BeforeAction) => {
            out.extend_from_slice(key.as_bytes());
            out.push(b'/');
            out.extend_from_slice(action);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ANNOUNCE: Action = Action::Announce;
    const SCRAPE: Action = Action::Scrape;
    const HEX32: &str = "0123456789abcdef0123456789abcdef";

    fn ok(action: Action, passkey: Option<&str>) -> Result<TrackerPath<'_>, PathError> {
        Ok(TrackerPath { action, passkey })
    }

    #[test]
    fn the_php_trackers_paths_carry_the_query_passkey() {
        for (target, expected) in [
            (
                "/announce.php?passkey=abc&info_hash=x",
                ok(ANNOUNCE, Some("abc")),
            ),
            (
                "/announce.php?info_hash=x&passkey=abc",
                ok(ANNOUNCE, Some("abc")),
            ),
            ("/api/announce?passkey=abc", ok(ANNOUNCE, Some("abc"))),
            ("/scrape.php?passkey=abc", ok(SCRAPE, Some("abc"))),
            ("/announce/path?passkey=abc", ok(ANNOUNCE, Some("abc"))),
            ("/announce.php?passkey=", ok(ANNOUNCE, None)),
            ("/announce.php", ok(ANNOUNCE, None)),
            ("/announce.php?xpasskey=abc", ok(ANNOUNCE, None)),
            (
                "/announce.php?passkey=a%41",
                Err(PathError::MalformedPasskey(ANNOUNCE)),
            ),
            ("/index.php?passkey=abc", Err(PathError::UnknownPath)),
        ] {
            assert_eq!(parse_target_path(target.as_bytes()), expected, "{target}");
        }
    }

    #[test]
    fn every_form_sites_hand_out_parses() {
        let long = format!("/announce/{}", "k".repeat(MAX_PASSKEY_LEN));
        let longest = format!("/{}/announce/", "k".repeat(MAX_PASSKEY_LEN));
        assert_eq!(longest.len(), MAX_PATH_LEN);
        for (path, expected) in [
            ("/announce", ok(ANNOUNCE, None)),
            ("/announce/", ok(ANNOUNCE, None)),
            ("/scrape", ok(SCRAPE, None)),
            ("/scrape/", ok(SCRAPE, None)),
            ("/announce/s3cret", ok(ANNOUNCE, Some("s3cret"))),
            ("/announce/s3cret/", ok(ANNOUNCE, Some("s3cret"))),
            ("/s3cret/announce", ok(ANNOUNCE, Some("s3cret"))),
            ("/s3cret/announce/", ok(ANNOUNCE, Some("s3cret"))),
            ("/scrape/k", ok(SCRAPE, Some("k"))),
            ("/k/scrape", ok(SCRAPE, Some("k"))),
            (&format!("/{HEX32}/announce"), ok(ANNOUNCE, Some(HEX32))),
            ("/a-b.c_d~E9/announce", ok(ANNOUNCE, Some("a-b.c_d~E9"))),
            // Both segments name an action: the first is the action, as HTTP read it.
            ("/scrape/announce", ok(SCRAPE, Some("announce"))),
            ("/announce/scrape", ok(ANNOUNCE, Some("scrape"))),
            (&long, ok(ANNOUNCE, Some(&long[10..]))),
            (&longest, ok(ANNOUNCE, Some(&longest[1..65]))),
        ] {
            assert_eq!(parse_path(path.as_bytes()), expected, "{path}");
        }
    }

    #[test]
    fn paths_naming_no_action_are_unknown() {
        for path in [
            "",
            "/",
            "//",
            "announce",
            "/announcex",
            "/ann",
            "/Announce",
            "/announce//",
            "//announce",
            "/announce/a/b",
            "/a/b/announce",
            "/a/announce/b",
            "/k/k",
            "/announce.phpx",
            "/announce?x=1",
        ] {
            assert_eq!(
                parse_path(path.as_bytes()),
                Err(PathError::UnknownPath),
                "{path}"
            );
        }
        let long = format!("/{}", "x".repeat(MAX_PATH_LEN));
        assert_eq!(parse_path(long.as_bytes()), Err(PathError::UnknownPath));
    }

    #[test]
    fn the_byte_table_is_the_unreserved_set() {
        for b in 0..=255u8 {
            let unreserved = b.is_ascii_alphanumeric() || b"-._~".contains(&b);
            assert_eq!(is_passkey(&[b]), unreserved, "byte {b:#04x}");
            assert_eq!(
                is_passkey(&[b'k', b, b'k']),
                unreserved,
                "byte {b:#04x} inside"
            );
        }
    }

    #[test]
    fn passkeys_outside_the_charset_or_too_long_are_refused_clearly() {
        let too_long = "k".repeat(MAX_PASSKEY_LEN + 1);
        let far_too_long = "k".repeat(1000);
        for (path, action) in [
            ("/announce/a%41".to_owned(), ANNOUNCE),
            ("/announce/a+b".to_owned(), ANNOUNCE),
            ("/scrape/a!b".to_owned(), SCRAPE),
            ("/pass key/announce".to_owned(), ANNOUNCE),
            ("/p\u{e9}/scrape".to_owned(), SCRAPE),
            (format!("/announce/{too_long}"), ANNOUNCE),
            (format!("/{too_long}/scrape"), SCRAPE),
            (format!("/announce/{far_too_long}"), ANNOUNCE),
            (format!("/scrape/{far_too_long}"), SCRAPE),
        ] {
            assert_eq!(
                parse_path(path.as_bytes()),
                Err(PathError::MalformedPasskey(action)),
                "{path}"
            );
        }
        let text = PathError::MalformedPasskey(ANNOUNCE).to_string();
        assert!(text.contains("1 to 64") && text.contains("A-Z"), "{text}");
        assert!(!is_passkey(b"") && !is_passkey(b"\x00") && is_passkey(b"~"));
    }

    #[test]
    fn targets_split_at_the_query_and_drop_a_fragment() {
        assert_eq!(split_target(b"/a?b=1#c"), (&b"/a"[..], &b"b=1"[..]));
        assert_eq!(split_target(b"/a"), (&b"/a"[..], &b""[..]));
        assert_eq!(split_target(b"?"), (&b""[..], &b""[..]));
        assert_eq!(
            parse_target_path(b"/k/announce?info_hash=x"),
            ok(ANNOUNCE, Some("k"))
        );
        assert_eq!(
            parse_target_path(b"/any/path?x=1"),
            Err(PathError::UnknownPath)
        );
    }

    fn arb_action() -> impl Strategy<Value = Action> {
        prop_oneof![Just(ANNOUNCE), Just(SCRAPE)]
    }

    fn arb_place() -> impl Strategy<Value = PasskeyPlace> {
        prop_oneof![
            Just(PasskeyPlace::AfterAction),
            Just(PasskeyPlace::BeforeAction)
        ]
    }

    proptest! {
        #[test]
        fn paths_round_trip(
            action in arb_action(),
            place in arb_place(),
            passkey in proptest::option::of("[A-Za-z0-9_.~-]{1,64}"),
            trailing_slash in any::<bool>(),
        ) {
            // A passkey spelled like an action is read as described in the module docs.
            prop_assume!(passkey.as_deref().and_then(|k| action_of(k.as_bytes())).is_none());
            let path = TrackerPath { action, passkey: passkey.as_deref() };
            let mut out = Vec::new();
            write_path(&path, place, &mut out);
            if trailing_slash {
                out.push(b'/');
            }
            prop_assert!(out.len() <= MAX_PATH_LEN);
            prop_assert_eq!(parse_path(&out), Ok(path));
            out.extend_from_slice(b"?info_hash=x");
            prop_assert_eq!(parse_target_path(&out), Ok(path));
        }

        #[test]
        fn arbitrary_paths_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(TrackerPath { passkey: Some(k), .. }) = parse_path(&bytes) {
                prop_assert!(is_passkey(k.as_bytes()));
            }
        }
    }
}
