//! What a load of a private tracker carries: the passkey file (`--passkeys`), which
//! simulated peer uses which key, and the paths and BEP 41 bytes that carry a key.
//!
//! A private tracker refuses every request without a registered passkey, so its load must
//! spread real users' keys over its requests the way a site's members would: each
//! simulated peer is one member with one key, used on every request it makes (peer i has
//! key i mod n), which is also what makes the tracker's per-user accounting work as it
//! would in service. The key goes where sites put it: in the path, `/<passkey>/announce`,
//! written by `shoal_proto::path::write_path`, the inverse of the parser the tracker
//! uses on every protocol. UDP carries that path as BEP 41 URL data after the announce.
//!
//! The file is read once per run, before any worker starts, and shared; a missing, empty
//! or malformed file is an error that names the file and the line, not a run that is
//! refused request by request.

use std::path::Path;

use anyhow::{bail, Context, Result};
use shoal_proto::path::{is_passkey, write_path, Action, PasskeyPlace, TrackerPath};
use shoal_proto::udp::write_url_data_option;

/// The passkeys of a run, in the file's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passkeys {
    keys: Vec<String>,
}

impl Passkeys {
    /// Reads `--passkeys FILE`: an unreadable, empty or malformed file is an error.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the passkeys file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in the passkeys file {}", path.display()))
    }

    /// The keys of `--passkeys`, when it was given.
    pub fn from_flag(path: Option<&Path>) -> Result<Option<Self>> {
        path.map(Self::load).transpose()
    }

    /// One passkey a line; blank lines and lines starting with `#` are skipped, and the
    /// spaces around a key are not part of it. Each key must be one the tracker can accept
    /// (1 to 64 characters of `A-Z a-z 0-9 - . _ ~`).
    pub fn parse(text: &str) -> Result<Self> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let key = line.trim();
            if key.is_empty() || key.starts_with('#') {
                continue;
            }
            if !is_passkey(key.as_bytes()) {
                bail!(
                    "line {}: {key:?} is not a passkey (1 to 64 characters of A-Z, a-z, \
                     0-9, '-', '.', '_' and '~')",
                    n + 1
                );
            }
            keys.push(key.to_string());
        }
        if keys.is_empty() {
            bail!("no passkeys (one a line; blank lines and # comments are skipped)");
        }
        Ok(Self { keys })
    }

    /// `count` passkeys for a test site: 32 hexadecimal characters each, as sites hand
    /// out, fixed by `seed` (the same list every time).
    pub fn generate(count: usize, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let keys = (0..count)
            .map(|_| format!("{:016x}{:016x}", rng.u64(..), rng.u64(..)))
            .collect();
        Self { keys }
    }

    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The key of simulated peer `peer` (or of connection `peer`, for WebTorrent).
    pub fn of(&self, peer: u32) -> &str {
        of_peer(&self.keys, peer)
    }

    /// Each key's path for `action` (`/<passkey>/announce`), in the keys' order: a
    /// generator writes them once, and [`of_peer`] picks a peer's as [`Passkeys::of`]
    /// picks its key.
    pub fn paths(&self, action: Action) -> Vec<String> {
        self.keys.iter().map(|k| passkey_path(k, action)).collect()
    }

    /// The length of the longest key, in bytes.
    pub fn longest(&self) -> usize {
        self.keys.iter().map(String::len).max().unwrap_or(0)
    }
}

/// What simulated peer `peer` uses of one entry per key (its key, or that key's path):
/// entry `peer mod n`. `per_key` is never empty (a passkeys file has a key).
pub fn of_peer(per_key: &[String], peer: u32) -> &str {
    &per_key[peer as usize % per_key.len()]
}

/// Appends `/<passkey>/announce` or `/<passkey>/scrape`: the path sites hand out.
pub fn write_passkey_path(passkey: &str, action: Action, out: &mut Vec<u8>) {
    let path = TrackerPath {
        action,
        passkey: Some(passkey),
    };
    write_path(&path, PasskeyPlace::BeforeAction, out);
}

/// `/<passkey>/announce` or `/<passkey>/scrape` as a string.
pub fn passkey_path(passkey: &str, action: Action) -> String {
    let mut out = Vec::with_capacity(passkey.len() + 10);
    write_passkey_path(passkey, action, &mut out);
    // A passkey is ASCII (checked when read), and so is the rest.
    String::from_utf8(out).expect("passkey paths are ASCII")
}

/// Appends the BEP 41 options that carry `udp://host:port/<passkey>/announce` after a UDP
/// announce: URL data (option 2, its length, the path's bytes), then an end of options
/// (option 0).
pub fn write_udp_url_data(passkey: &str, out: &mut Vec<u8>) {
    let mut path = Vec::with_capacity(passkey.len() + 10);
    write_passkey_path(passkey, Action::Announce, &mut path);
    write_url_data_option(&path, out);
    out.push(0x0);
}

/// Bytes of the BEP 41 options [`write_udp_url_data`] writes for a key of `passkey_len`.
pub fn udp_url_data_len(passkey_len: usize) -> usize {
    // Option type and length, `/`, the key, `/announce`, end of options.
    2 + 1 + passkey_len + "/announce".len() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::path::{parse_path, MAX_PASSKEY_LEN};
    use shoal_proto::udp::{url_data_path, URL_PATH_BUFFER};

    #[test]
    fn the_file_is_one_key_a_line_with_comments_and_blanks_skipped() {
        let p = Passkeys::parse("# site export\n\nabc123\n  0123abcd-._~  \r\n#x\nZ\n").unwrap();
        assert_eq!(p.keys(), ["abc123", "0123abcd-._~", "Z"]);
        assert_eq!(p.longest(), 12);
        // Peer i has key i mod n.
        assert_eq!(
            [p.of(0), p.of(1), p.of(2), p.of(3)],
            ["abc123", "0123abcd-._~", "Z", "abc123"]
        );
    }

    #[test]
    fn an_empty_malformed_or_unreadable_file_is_a_clear_error() {
        for (text, says) in [
            ("", "no passkeys"),
            ("# only a comment\n\n", "no passkeys"),
            ("good\nnot/good\n", "line 2: \"not/good\" is not a passkey"),
            ("with space\n", "line 1"),
            (&"k".repeat(MAX_PASSKEY_LEN + 1), "line 1"),
        ] {
            let e = Passkeys::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        assert!(Passkeys::parse(&"k".repeat(MAX_PASSKEY_LEN)).is_ok());
        let missing = Path::new("/nonexistent/shoal-bench/passkeys.txt");
        let e = format!("{:#}", Passkeys::load(missing).unwrap_err());
        assert!(e.contains("/nonexistent/shoal-bench/passkeys.txt"), "{e}");
        assert!(Passkeys::from_flag(None).unwrap().is_none());
    }

    #[test]
    fn generated_keys_are_fixed_distinct_and_valid() {
        let a = Passkeys::generate(1000, 7);
        assert_eq!(a, Passkeys::generate(1000, 7));
        let distinct: std::collections::HashSet<_> = a.keys().iter().collect();
        assert_eq!(distinct.len(), 1000);
        assert!(a
            .keys()
            .iter()
            .all(|k| k.len() == 32 && is_passkey(k.as_bytes())));
        let text: String = a.keys().iter().map(|k| format!("{k}\n")).collect();
        assert_eq!(Passkeys::parse(&text).unwrap(), a);
    }

    #[test]
    fn paths_carry_the_key_before_the_action() {
        assert_eq!(passkey_path("abc", Action::Announce), "/abc/announce");
        assert_eq!(passkey_path("abc", Action::Scrape), "/abc/scrape");
        let path = passkey_path("0123abcd", Action::Scrape);
        let parsed = parse_path(path.as_bytes()).unwrap();
        assert_eq!(
            (parsed.action, parsed.passkey),
            (Action::Scrape, Some("0123abcd"))
        );
        let p = Passkeys::parse("a\nb\n").unwrap().paths(Action::Announce);
        assert_eq!(
            [of_peer(&p, 0), of_peer(&p, 1), of_peer(&p, 2)],
            ["/a/announce", "/b/announce", "/a/announce"]
        );
    }

    #[test]
    fn udp_url_data_is_one_bep41_option_then_the_end() {
        let mut out = b"announce".to_vec();
        write_udp_url_data("abc", &mut out);
        let mut want = b"announce".to_vec();
        want.extend_from_slice(&[0x2, 13]);
        want.extend_from_slice(b"/abc/announce");
        want.push(0x0);
        assert_eq!(out, want);
        assert_eq!(out.len() - 8, udp_url_data_len(3));
        // The tracker's own reader finds the key, for every length it accepts.
        for len in [1, 32, MAX_PASSKEY_LEN] {
            let key = "k".repeat(len);
            let mut tail = Vec::new();
            write_udp_url_data(&key, &mut tail);
            assert_eq!(tail.len(), udp_url_data_len(len));
            let mut buf = [0u8; URL_PATH_BUFFER];
            let path = url_data_path(&tail, &mut buf).unwrap().unwrap();
            assert_eq!(
                (path.action, path.passkey),
                (Action::Announce, Some(key.as_str()))
            );
        }
    }
}
