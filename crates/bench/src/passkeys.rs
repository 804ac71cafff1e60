//! What a load of a private tracker carries: the passkey file (`--passkeys`), which
//! simulated peer uses which key, where the key goes in the path (`--passkey-path`), and
//! the paths and BEP 41 bytes that carry a key.
//!
//! A private tracker refuses every request without a registered passkey, so its load must
//! spread real users' keys over its requests the way a site's members would: each
//! simulated peer is one member with one key, used on every request it makes (peer i has
//! key i mod n), which is also what makes the tracker's per-user accounting work as it
//! would in service. The key goes where sites put it: in the path, `/<passkey>/announce`
//! by default (Gazelle's form, read by shoal as well), or wherever `--passkey-path` puts it
//! (`/announce/{passkey}` for UNIT3D's sites), the query included
//! (`/announce.php?passkey={passkey}` for NexusPHP's: the request's own parameters then
//! follow with `&`). A scrape's path is the announce path with the last `announce` of its
//! path turned into `scrape` (BEP 48). UDP carries the announce path, query and all, as
//! BEP 41 URL data after the announce; WebTorrent as the WebSocket URL's path and query.
//!
//! The file and the path are read once per run, before any worker starts, and shared; a
//! missing, empty or malformed file, or a path without its `{passkey}`, is an error that
//! names the file and the line or the flag, not a run that is refused request by request.

use std::path::Path;

use anyhow::{bail, Context, Result};
use shoal_proto::path::{is_passkey, Action};
use shoal_proto::udp::write_url_data_option;

use crate::workload::WorkloadArgs;

/// Where the passkey goes when `--passkey-path` is not given: `/<passkey>/announce`.
pub const DEFAULT_PASSKEY_PATH: &str = "/{passkey}/announce";

/// What `--passkey-path` replaces with each peer's key.
const PLACEHOLDER: &str = "{passkey}";

/// The longest `--passkey-path` accepted, in bytes (before the key is put in).
pub const MAX_PASSKEY_PATH_LEN: usize = 240;

/// Where the passkey goes in a request's path (`--passkey-path`): the announce path and
/// the scrape path, each split around the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasskeyPath {
    template: String,
    announce: (String, String),
    scrape: (String, String),
}

impl Default for PasskeyPath {
    fn default() -> Self {
        Self::parse(DEFAULT_PASSKEY_PATH).expect("the default passkey path is valid")
    }
}

impl PasskeyPath {
    /// Reads a path with `{passkey}` in it once (`/announce/{passkey}`), or a path and a
    /// query with the key in either (`/announce.php?passkey={passkey}`, NexusPHP's): it
    /// starts with `/`, its path (before the `?`) has an `announce` outside the key (turned
    /// into `scrape` for scrapes), and it is made of the characters a URL takes unescaped
    /// (`A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * + , ; = : @ /`) and at most one `?`.
    pub fn parse(template: &str) -> Result<Self> {
        let Some((before, after)) = template.split_once(PLACEHOLDER) else {
            bail!("{template:?} has no {PLACEHOLDER} (e.g. /announce/{PLACEHOLDER})");
        };
        if after.contains(PLACEHOLDER) {
            bail!("{template:?} has {PLACEHOLDER} more than once");
        }
        if !template.starts_with('/') {
            bail!("{template:?} does not start with '/'");
        }
        if template.len() > MAX_PASSKEY_PATH_LEN {
            bail!("{template:?} is longer than {MAX_PASSKEY_PATH_LEN} bytes");
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/?".contains(c);
        if let Some(c) = before.chars().chain(after.chars()).find(|&c| !allowed(c)) {
            bail!(
                "{template:?} has {c:?}: a passkey path is made of A-Z, a-z, 0-9 and \
                 -._~!$&'()*+,;=:@/ around one {PLACEHOLDER}, and at most one '?' before \
                 a query"
            );
        }
        if template.matches('?').count() > 1 {
            bail!("{template:?} has more than one '?'");
        }
        // BEP 48: the scrape URL is the announce URL with the last `announce` of its path
        // turned into `scrape`; the key itself and the query are never rewritten.
        let (before_path, after_path) = match (before.find('?'), after.find('?')) {
            (Some(q), _) => (&before[..q], ""),
            (None, q) => (before, &after[..q.unwrap_or(after.len())]),
        };
        let scrape = match (after_path.rfind("announce"), before_path.rfind("announce")) {
            (Some(i), _) => (before.to_string(), replace_at(after, i)),
            (None, Some(i)) => (replace_at(before, i), after.to_string()),
            (None, None) => bail!(
                "{template:?} has no 'announce' outside {PLACEHOLDER} in its path (before \
                 any '?') to turn into 'scrape' for scrapes"
            ),
        };
        Ok(Self {
            template: template.to_string(),
            announce: (before.to_string(), after.to_string()),
            scrape,
        })
    }

    /// The path as given (`/announce/{passkey}`).
    pub fn template(&self) -> &str {
        &self.template
    }

    /// What joins a request's own parameters to this path: `&` where it has a query of its
    /// own (`/announce.php?passkey=<key>&info_hash=...`), else `?`.
    pub fn separator(&self) -> char {
        if self.template.contains('?') {
            '&'
        } else {
            '?'
        }
    }

    fn parts(&self, action: Action) -> &(String, String) {
        match action {
            Action::Announce => &self.announce,
            Action::Scrape => &self.scrape,
        }
    }

    /// Appends the path of `action` with `passkey` in its place.
    pub fn write(&self, passkey: &str, action: Action, out: &mut Vec<u8>) {
        let (before, after) = self.parts(action);
        out.extend_from_slice(before.as_bytes());
        out.extend_from_slice(passkey.as_bytes());
        out.extend_from_slice(after.as_bytes());
    }

    /// The path of `action` with `passkey` in its place, as a string.
    pub fn path(&self, passkey: &str, action: Action) -> String {
        let (before, after) = self.parts(action);
        format!("{before}{passkey}{after}")
    }

    /// The length of the announce path with a key of `passkey_len` bytes.
    fn announce_len(&self, passkey_len: usize) -> usize {
        self.announce.0.len() + passkey_len + self.announce.1.len()
    }
}

/// `s` with the `announce` at byte `i` turned into `scrape`.
fn replace_at(s: &str, i: usize) -> String {
    format!("{}scrape{}", &s[..i], &s[i + "announce".len()..])
}

/// The passkeys of a run, in the file's order, and where they go in the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passkeys {
    keys: Vec<String>,
    path: PasskeyPath,
}

impl Passkeys {
    /// Reads `--passkeys FILE`: an unreadable, empty or malformed file is an error.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the passkeys file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in the passkeys file {}", path.display()))
    }

    /// The keys of `--passkeys` and their place of `--passkey-path`, when `--passkeys`
    /// was given; `--passkey-path` without `--passkeys` is an error.
    pub fn from_args(args: &WorkloadArgs) -> Result<Option<Self>> {
        let path = args
            .passkey_path
            .as_deref()
            .map(|t| PasskeyPath::parse(t).context("in --passkey-path"))
            .transpose()?;
        match (&args.passkeys, path) {
            (None, None) => Ok(None),
            (None, Some(_)) => bail!("--passkey-path needs --passkeys FILE"),
            (Some(file), path) => Ok(Some(Self::load(file)?.with_path(path.unwrap_or_default()))),
        }
    }

    /// The same keys, put at `path` in every request.
    pub fn with_path(self, path: PasskeyPath) -> Self {
        Self { path, ..self }
    }

    /// One passkey a line; blank lines and lines starting with `#` are skipped, and the
    /// spaces around a key are not part of it. Each key must be one the tracker can accept
    /// (1 to 64 characters of `A-Z a-z 0-9 - . _ ~`). The keys go at the default place.
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
        Ok(Self {
            keys,
            path: PasskeyPath::default(),
        })
    }

    /// `count` passkeys for a test site: 32 hexadecimal characters each, as sites hand
    /// out, fixed by `seed` (the same list every time).
    pub fn generate(count: usize, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let keys = (0..count)
            .map(|_| format!("{:016x}{:016x}", rng.u64(..), rng.u64(..)))
            .collect();
        Self {
            keys,
            path: PasskeyPath::default(),
        }
    }

    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Where the keys go in the path.
    pub fn path(&self) -> &PasskeyPath {
        &self.path
    }

    /// The key of simulated peer `peer` (or of connection `peer`, for WebTorrent).
    pub fn of(&self, peer: u32) -> &str {
        of_peer(&self.keys, peer)
    }

    /// Each key's path for `action` (`/<passkey>/announce` by default), in the keys'
    /// order: a generator writes them once, and [`of_peer`] picks a peer's as
    /// [`Passkeys::of`] picks its key.
    pub fn paths(&self, action: Action) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| self.path.path(k, action))
            .collect()
    }

    /// The length of the longest key, in bytes.
    pub fn longest(&self) -> usize {
        self.keys.iter().map(String::len).max().unwrap_or(0)
    }

    /// Appends the BEP 41 options that carry `udp://host:port<announce path>` of simulated
    /// peer `peer` after a UDP announce: URL data (option 2, its length, up to 255 bytes of
    /// the path, as often as needed), then an end of options (option 0).
    pub fn write_udp_url_data(&self, peer: u32, out: &mut Vec<u8>) {
        let mut path = Vec::with_capacity(self.path.announce_len(self.longest()));
        self.path.write(self.of(peer), Action::Announce, &mut path);
        write_url_data_option(&path, out);
        out.push(0x0);
    }

    /// The most bytes of BEP 41 options [`Passkeys::write_udp_url_data`] writes.
    pub fn udp_url_data_len(&self) -> usize {
        let path = self.path.announce_len(self.longest());
        // Option type and length per 255-byte chunk, the path, the end of options.
        2 * path.div_ceil(255).max(1) + path + 1
    }
}

/// What simulated peer `peer` uses of one entry per key (its key, or that key's path):
/// entry `peer mod n`. `per_key` is never empty (a passkeys file has a key).
pub fn of_peer(per_key: &[String], peer: u32) -> &str {
    &per_key[peer as usize % per_key.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::path::{parse_path, parse_target_path, MAX_PASSKEY_LEN};

    const HEX32: &str = "0123456789abcdef0123456789abcdef";
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
    fn paths_carry_the_key_before_the_action_by_default() {
        let keys = Passkeys::parse("a\nb\n").unwrap();
        assert_eq!(keys.path().template(), DEFAULT_PASSKEY_PATH);
        let p = keys.paths(Action::Announce);
        assert_eq!(
            [of_peer(&p, 0), of_peer(&p, 1), of_peer(&p, 2)],
            ["/a/announce", "/b/announce", "/a/announce"]
        );
        assert_eq!(keys.paths(Action::Scrape), ["/a/scrape", "/b/scrape"]);
        // The tracker's own parser reads the default form back.
        let path = keys.path().path("0123abcd", Action::Scrape);
        let parsed = parse_path(path.as_bytes()).unwrap();
        assert_eq!(
            (parsed.action, parsed.passkey),
            (Action::Scrape, Some("0123abcd"))
        );
    }

    #[test]
    fn a_passkey_path_puts_the_key_where_it_says_and_scrapes_follow_bep48() {
        let unit3d = PasskeyPath::parse("/announce/{passkey}").unwrap();
        assert_eq!(unit3d.path("k1", Action::Announce), "/announce/k1");
        assert_eq!(unit3d.path("k1", Action::Scrape), "/scrape/k1");
        for (action, key) in [(Action::Announce, HEX32), (Action::Scrape, HEX32)] {
            let path = unit3d.path(key, action);
            let parsed = parse_path(path.as_bytes()).unwrap();
            assert_eq!((parsed.action, parsed.passkey), (action, Some(key)));
        }
        // The last `announce` outside the key is the one turned into `scrape`; a key that
        // happens to read `announce` is left alone.
        let php = PasskeyPath::parse("/announce/tracker/{passkey}/announce.php").unwrap();
        assert_eq!(
            php.path("announce", Action::Scrape),
            "/announce/tracker/announce/scrape.php"
        );
        let mut out = b"GET ".to_vec();
        php.write("k", Action::Announce, &mut out);
        assert_eq!(out, b"GET /announce/tracker/k/announce.php");
        let keys = Passkeys::parse("x\ny\n").unwrap().with_path(unit3d);
        assert_eq!(keys.paths(Action::Announce), ["/announce/x", "/announce/y"]);
    }

    #[test]
    fn a_passkey_in_the_query_is_nexusphps_form_and_scrapes_follow_bep48() {
        let php = PasskeyPath::parse("/announce.php?passkey={passkey}").unwrap();
        assert_eq!(php.separator(), '&');
        assert_eq!(
            php.path(HEX32, Action::Announce),
            format!("/announce.php?passkey={HEX32}")
        );
        assert_eq!(
            php.path(HEX32, Action::Scrape),
            format!("/scrape.php?passkey={HEX32}")
        );
        // The tracker's own parser reads the key back from the query, for both actions.
        for action in [Action::Announce, Action::Scrape] {
            let target = format!("{}&info_hash=x", php.path(HEX32, action));
            let parsed = parse_target_path(target.as_bytes()).unwrap();
            assert_eq!((parsed.action, parsed.passkey), (action, Some(HEX32)));
        }
        // A key in the path with a query after it: only the path's `announce` turns.
        let both = PasskeyPath::parse("/announce/{passkey}?site=announce").unwrap();
        assert_eq!(both.path("k", Action::Scrape), "/scrape/k?site=announce");
        assert_eq!(both.separator(), '&');
        let before = PasskeyPath::parse("/{passkey}/announce?x=1").unwrap();
        assert_eq!(before.path("k", Action::Scrape), "/k/scrape?x=1");
        assert_eq!(PasskeyPath::default().separator(), '?');
    }

    #[test]
    fn a_bad_passkey_path_is_a_clear_error() {
        for (path, says) in [
            ("/announce", "has no {passkey}"),
            ("/{passkey}/{passkey}/announce", "more than once"),
            ("announce/{passkey}", "does not start with '/'"),
            ("/announce.php?x=1?passkey={passkey}", "more than one '?'"),
            ("/announce.php?passkey={passkey}#", "'#'"),
            (
                "/tracker.php?announce=1&passkey={passkey}",
                "no 'announce' outside {passkey} in its path",
            ),
            (
                "/tracker/{passkey}?announce",
                "no 'announce' outside {passkey} in its path",
            ),
            ("/announce/{passkey} ", "' '"),
            ("/announce/{passkey}%20", "'%'"),
            ("/tracker/{passkey}", "no 'announce' outside {passkey}"),
        ] {
            let e = format!("{:#}", PasskeyPath::parse(path).unwrap_err());
            assert!(e.contains(says), "{path}: {e}");
        }
        let long = format!("/announce/{{passkey}}/{}", "a".repeat(MAX_PASSKEY_PATH_LEN));
        assert!(PasskeyPath::parse(&long).is_err());
    }

    #[test]
    fn the_flags_give_keys_and_path_together() {
        let dir = crate::temp_dir("pkp");
        let file = dir.join("keys");
        std::fs::write(&file, "k1\nk2\n").unwrap();
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            w: WorkloadArgs,
        }
        let args = |extra: &[&str]| {
            let mut argv = vec!["t"];
            argv.extend_from_slice(extra);
            <Cli as clap::Parser>::parse_from(argv).w
        };
        let f = file.to_str().unwrap();
        assert!(Passkeys::from_args(&args(&[])).unwrap().is_none());
        let plain = Passkeys::from_args(&args(&["--passkeys", f]))
            .unwrap()
            .unwrap();
        assert_eq!(
            plain.paths(Action::Announce),
            ["/k1/announce", "/k2/announce"]
        );
        let unit3d = ["--passkeys", f, "--passkey-path", "/announce/{passkey}"];
        let keyed = Passkeys::from_args(&args(&unit3d)).unwrap().unwrap();
        assert_eq!(
            keyed.paths(Action::Announce),
            ["/announce/k1", "/announce/k2"]
        );
        let e = format!(
            "{:#}",
            Passkeys::from_args(&args(&["--passkey-path", "/announce/{passkey}"])).unwrap_err()
        );
        assert!(e.contains("--passkey-path needs --passkeys"), "{e}");
        let bad = ["--passkeys", f, "--passkey-path", "/announce"];
        let e = format!("{:#}", Passkeys::from_args(&args(&bad)).unwrap_err());
        assert!(
            e.contains("in --passkey-path") && e.contains("no {passkey}"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn udp_url_data_is_bep41_options_then_the_end() {
        let keys = Passkeys::parse("abc\n").unwrap();
        let mut out = b"announce".to_vec();
        keys.write_udp_url_data(0, &mut out);
        let mut want = b"announce".to_vec();
        want.extend_from_slice(&[0x2, 13]);
        want.extend_from_slice(b"/abc/announce");
        want.push(0x0);
        assert_eq!(out, want);
        assert_eq!(out.len() - 8, keys.udp_url_data_len());
        // The tracker's own reader finds the key, for every length it accepts, in both
        // places.
        for template in [
            DEFAULT_PASSKEY_PATH,
            "/announce/{passkey}",
            "/announce.php?passkey={passkey}",
        ] {
            for len in [1, 32, MAX_PASSKEY_LEN] {
                let key = "k".repeat(len);
                let keys = Passkeys::parse(&key)
                    .unwrap()
                    .with_path(PasskeyPath::parse(template).unwrap());
                let mut tail = Vec::new();
                keys.write_udp_url_data(0, &mut tail);
                assert_eq!(tail.len(), keys.udp_url_data_len());
                let mut buf = [0u8; URL_PATH_BUFFER];
                let path = url_data_path(&tail, &mut buf).unwrap().unwrap();
                assert_eq!(
                    (path.action, path.passkey),
                    (Action::Announce, Some(key.as_str()))
                );
            }
        }
        // A path over 255 bytes takes two options; the length counts both.
        let long = format!("/announce/{}/{{passkey}}", "d".repeat(200));
        let keys = Passkeys::parse(&"k".repeat(64))
            .unwrap()
            .with_path(PasskeyPath::parse(&long).unwrap());
        let mut tail = Vec::new();
        keys.write_udp_url_data(0, &mut tail);
        assert_eq!(tail.len(), keys.udp_url_data_len());
        assert_eq!(tail[..2], [0x2, 255]);
    }
}
