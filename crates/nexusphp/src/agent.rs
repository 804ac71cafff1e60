//! The client allow list as NexusPHP judges it (`AgentAllowRepository::checkClient`,
//! `app/Repositories/AgentAllowRepository.php:74-267` at 1.10.3): the families of
//! `agent_allowed_family` in their order, each with a peer-id side and an agent side, and
//! the banned builds of `agent_allowed_exception`.
//!
//! The patterns are PHP's (PCRE with delimiters and modifiers, `/^-qB4([0-9])([0-9])/`);
//! [`Pattern`] turns one into a byte regex of the `regex` crate, so that a peer id is matched
//! as the raw bytes PHP matches. A pattern the crate cannot compile (look-around, back
//! references) is judged as PHP judges a pattern that fails: the family's "regular
//! expression err" when the family is reached.

use std::cmp::Ordering;

use regex::bytes::Regex;

use crate::error::NexusError;

/// A family row of `agent_allowed_family`, as loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilyRow {
    pub id: u32,
    pub family: String,
    pub start_name: String,
    pub peer_id_pattern: String,
    pub peer_id_match_num: u8,
    /// `dec` or `hex`.
    pub peer_id_matchtype: String,
    pub peer_id_start: String,
    pub agent_pattern: String,
    pub agent_match_num: u8,
    pub agent_matchtype: String,
    pub agent_start: String,
    /// `exception = 'yes'`: the family's banned builds are checked.
    pub exception: bool,
    /// `allowhttps = 'yes'`.
    pub allow_https: bool,
}

/// A row of `agent_allowed_exception`: a banned build of a family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExceptionRow {
    pub id: u32,
    pub family_id: u32,
    pub name: String,
    /// A regex fragment, anchored at the peer id's start.
    pub peer_id: String,
    /// Compared with the whole `User-Agent`.
    pub agent: String,
    pub comment: String,
}

/// A PHP (PCRE) pattern compiled for bytes.
#[derive(Clone, Debug)]
pub struct Pattern(Regex);

impl Pattern {
    /// Compiles a delimited PHP pattern: `/body/flags`, or a bracket pair (`(body)i`).
    pub fn php(pattern: &str) -> Result<Pattern, NexusError> {
        let bad = |why: &str| NexusError::Pattern {
            pattern: pattern.to_owned(),
            why: why.to_owned(),
        };
        let trimmed = pattern.trim_start();
        let open = trimmed.chars().next().ok_or_else(|| bad("empty"))?;
        if open.is_ascii_alphanumeric() || open == '\\' {
            return Err(bad("no delimiter"));
        }
        let close = match open {
            '(' => ')',
            '[' => ']',
            '{' => '}',
            '<' => '>',
            c => c,
        };
        let rest = &trimmed[open.len_utf8()..];
        let end = rest
            .rfind(close)
            .ok_or_else(|| bad("no closing delimiter"))?;
        let (body, flags) = (&rest[..end], &rest[end + close.len_utf8()..]);
        let (mut inline, mut unicode, mut anchored) = (String::new(), false, false);
        for f in flags.trim_end().chars() {
            match f {
                'i' | 'm' | 's' | 'x' => inline.push(f),
                'u' => unicode = true,
                'A' => anchored = true,
                // Dollar-end-only changes nothing the allow list's patterns rely on.
                'D' => {}
                _ => return Err(bad("unsupported modifier")),
            }
        }
        // PHP without `u` matches bytes: `.` is any byte and classes are ASCII.
        let mut source = String::from(if unicode { "(?u)" } else { "(?-u)" });
        if !inline.is_empty() {
            source.push_str(&format!("(?{inline})"));
        }
        if anchored {
            source.push_str(r"\A");
        }
        source.push_str(&unescape_delimiter(body, close));
        Regex::new(&source)
            .map(Pattern)
            .map_err(|e| bad(&e.to_string()))
    }

    /// PHP's `preg_match` captures of `text`: `None` without a match; else groups 1.., where
    /// trailing groups that took no part are left out and inner ones are empty (as PHP
    /// fills its match array).
    fn captures(&self, text: &[u8]) -> Option<Vec<Vec<u8>>> {
        let caps = self.0.captures(text)?;
        let groups: Vec<Option<&[u8]>> = (1..caps.len())
            .map(|i| caps.get(i).map(|m| m.as_bytes()))
            .collect();
        let last = groups
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        Some(
            groups[..last]
                .iter()
                .map(|g| g.map(<[u8]>::to_vec).unwrap_or_default())
                .collect(),
        )
    }

    fn is_match(&self, text: &[u8]) -> bool {
        self.0.is_match(text)
    }
}

/// The delimiter escaped in a PHP pattern (`\/`) is a plain character to the `regex` crate.
fn unescape_delimiter(body: &str, delimiter: char) -> String {
    if delimiter.is_ascii_alphanumeric() {
        return body.to_owned();
    }
    let escaped = format!("\\{delimiter}");
    let plain = regex::escape(&delimiter.to_string());
    body.replace(&escaped, &plain)
}

/// PHP's `intval` of a captured string: optional blanks and sign, then the leading digits.
fn php_intval(s: &[u8]) -> i128 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i128, |v, b| {
            v.saturating_mul(10).saturating_add(i128::from(b - b'0'))
        });
    if neg {
        -v
    } else {
        v
    }
}

/// PHP's `hexdec`: the hex digits of the string, any other character skipped.
fn php_hexdec(s: &[u8]) -> i128 {
    s.iter()
        .filter_map(|b| (*b as char).to_digit(16))
        .fold(0i128, |v, d| {
            v.saturating_mul(16).saturating_add(i128::from(d))
        })
}

/// How one side of a family judges a client (`isAllowed`'s 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    NotAllowed,
    Allowed,
    TooLow,
}

/// One side (peer id or agent) of a family, compiled.
#[derive(Clone, Debug)]
enum Rule {
    /// An empty pattern: everything passes.
    Any,
    /// The pattern fails, or does not match its own start string: NexusPHP's "regular
    /// expression err" once the family is reached.
    Broken,
    Match {
        pattern: Pattern,
        /// The start string's groups (the lowest version allowed).
        bench: Vec<Vec<u8>>,
        match_num: usize,
        hex: bool,
    },
}

impl Rule {
    fn new(pattern: &str, start: &str, match_num: u8, matchtype: &str) -> Rule {
        if pattern.is_empty() {
            return Rule::Any;
        }
        let hex = match matchtype {
            "dec" => false,
            "hex" => true,
            // An unknown match type is refused when compared (`AR:253-255`), which the
            // column's enum keeps from happening; treated as a broken family.
            _ => return Rule::Broken,
        };
        let Ok(pattern) = Pattern::php(pattern) else {
            return Rule::Broken;
        };
        match pattern.captures(start.as_bytes()) {
            Some(bench) => Rule::Match {
                pattern,
                bench,
                match_num: usize::from(match_num),
                hex,
            },
            None => Rule::Broken,
        }
    }

    /// `isAllowed` (`AR:224-267`); `Err` for a broken rule.
    fn judge(&self, value: &[u8]) -> Result<Side, ()> {
        let (pattern, bench, match_num, hex) = match self {
            Rule::Any => return Ok(Side::Allowed),
            Rule::Broken => return Err(()),
            Rule::Match {
                pattern,
                bench,
                match_num,
                hex,
            } => (pattern, bench, *match_num, *hex),
        };
        if match_num == 0 || bench.is_empty() {
            return Ok(if pattern.is_match(value) {
                Side::Allowed
            } else {
                Side::NotAllowed
            });
        }
        // The groups read in place, as `Pattern::captures` gives them (this runs for every
        // family on every announce: no copy of each group).
        let Some(target) = pattern.0.captures(value) else {
            return Ok(Side::NotAllowed);
        };
        let last = (1..target.len())
            .rev()
            .find(|&i| target.get(i).is_some())
            .unwrap_or(0);
        let number = |s: &[u8]| if hex { php_hexdec(s) } else { php_intval(s) };
        for i in 0..match_num {
            let Some(b) = bench.get(i) else {
                break;
            };
            if i + 1 > last {
                break;
            }
            let t = target.get(i + 1).map_or(&[][..], |m| m.as_bytes());
            match number(t).cmp(&number(b)) {
                Ordering::Greater => return Ok(Side::Allowed),
                Ordering::Less => return Ok(Side::TooLow),
                Ordering::Equal => {}
            }
        }
        Ok(Side::Allowed)
    }
}

/// A family compiled, with its banned builds.
#[derive(Clone, Debug)]
struct Family {
    row: FamilyRow,
    peer_id: Rule,
    agent: Rule,
    /// (exception row, its anchored peer-id regex; `None` when the fragment does not
    /// compile: PHP's `preg_match` fails and the row never matches).
    banned: Vec<(ExceptionRow, Option<Pattern>)>,
}

/// Why a client is refused: the text NexusPHP sends, without the site's address where it
/// has one (the caller completes it with [`ClientRefusal::text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRefusal {
    /// `regular expression err for peer_id: <start>, please ask sysop to fix this`.
    BrokenPeerIdRule(String),
    /// `regular expression err for agent: <start>, please ask sysop to fix this`.
    BrokenAgentRule(String),
    /// `Your <family> 's version is too low, please update it after <start_name>`.
    TooLow { family: String, start_name: String },
    /// `Banned Client, Please goto <site>/faq.php#id29 for a list of acceptable clients`.
    Banned,
    /// `[<family>-<exception>]Client: <name> is banned due to: <comment>`.
    Excepted {
        family: u32,
        exception: u32,
        name: String,
        comment: String,
    },
    /// `[<family>]This client does not support https well, Please goto <site>/faq.php#id29
    /// for a list of proper clients`.
    NoHttps { family: u32 },
}

impl ClientRefusal {
    /// NexusPHP's text, `site` being `scheme://host`.
    pub fn text(&self, site: &str) -> String {
        match self {
            ClientRefusal::BrokenPeerIdRule(start) => {
                format!("regular expression err for peer_id: {start}, please ask sysop to fix this")
            }
            ClientRefusal::BrokenAgentRule(start) => {
                format!("regular expression err for agent: {start}, please ask sysop to fix this")
            }
            ClientRefusal::TooLow { family, start_name } => {
                format!("Your {family} 's version is too low, please update it after {start_name}")
            }
            ClientRefusal::Banned => format!(
                "Banned Client, Please goto {site}/faq.php#id29 for a list of acceptable clients"
            ),
            ClientRefusal::Excepted {
                family,
                exception,
                name,
                comment,
            } => format!("[{family}-{exception}]Client: {name} is banned due to: {comment}"),
            ClientRefusal::NoHttps { family } => format!(
                "[{family}]This client does not support https well, Please goto {site}/faq.php#id29 for a list of proper clients"
            ),
        }
    }
}

/// The allow list, compiled and in NexusPHP's order.
#[derive(Clone, Debug, Default)]
pub struct AllowList {
    families: Vec<Family>,
}

impl AllowList {
    /// Compiles the rows. The families are taken as NexusPHP queries them:
    /// `peer_id_start` then `agent_start`, both descending (`AR:78-83`); the columns'
    /// collation folds case, which the lower-case comparison stands for; equal rows keep
    /// their id order.
    pub fn new(families: Vec<FamilyRow>, exceptions: Vec<ExceptionRow>) -> AllowList {
        let mut families: Vec<Family> = families
            .into_iter()
            .map(|row| {
                let banned = exceptions
                    .iter()
                    .filter(|e| e.family_id == row.id)
                    .map(|e| {
                        let p = Pattern::php(&format!("/^{}/", e.peer_id)).ok();
                        (e.clone(), p)
                    })
                    .collect();
                Family {
                    peer_id: Rule::new(
                        &row.peer_id_pattern,
                        &row.peer_id_start,
                        row.peer_id_match_num,
                        &row.peer_id_matchtype,
                    ),
                    agent: Rule::new(
                        &row.agent_pattern,
                        &row.agent_start,
                        row.agent_match_num,
                        &row.agent_matchtype,
                    ),
                    row,
                    banned,
                }
            })
            .collect();
        families.sort_by(|a, b| {
            let key = |f: &Family| {
                (
                    f.row.peer_id_start.to_lowercase(),
                    f.row.agent_start.to_lowercase(),
                )
            };
            key(b).cmp(&key(a)).then(a.row.id.cmp(&b.row.id))
        });
        AllowList { families }
    }

    /// Whether the list has no family (NexusPHP then refuses every client).
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }

    /// Judges a client: the id of its family, or why it is refused. `agent` is `None` for
    /// a protocol without a `User-Agent` (UDP, WebTorrent): the agent side is then not
    /// judged (NexusPHP has no such client). `https`: the announce came over https.
    pub fn check(
        &self,
        peer_id: &[u8],
        agent: Option<&str>,
        https: bool,
    ) -> Result<u32, ClientRefusal> {
        let mut too_low = None;
        let mut passed = None;
        for f in &self.families {
            let peer = f
                .peer_id
                .judge(peer_id)
                .map_err(|()| ClientRefusal::BrokenPeerIdRule(f.row.peer_id_start.clone()))?;
            let agent_side = match agent {
                Some(agent) => f
                    .agent
                    .judge(agent.as_bytes())
                    .map_err(|()| ClientRefusal::BrokenAgentRule(f.row.agent_start.clone()))?,
                None => Side::Allowed,
            };
            if peer == Side::Allowed && agent_side == Side::Allowed {
                passed = Some(f);
                break;
            }
            if peer == Side::TooLow && agent_side == Side::TooLow {
                too_low = Some(ClientRefusal::TooLow {
                    family: f.row.family.clone(),
                    start_name: f.row.start_name.clone(),
                });
            }
        }
        // A family judged too low earlier wins over one that allowed the client later
        // (`AR:156-158`).
        if let Some(refusal) = too_low {
            return Err(refusal);
        }
        let f = passed.ok_or(ClientRefusal::Banned)?;
        if f.row.exception {
            for (e, pattern) in &f.banned {
                let same_agent = agent.is_some_and(|a| a == e.agent);
                if same_agent && pattern.as_ref().is_some_and(|p| p.is_match(peer_id)) {
                    return Err(ClientRefusal::Excepted {
                        family: f.row.id,
                        exception: e.id,
                        name: e.name.clone(),
                        comment: e.comment.clone(),
                    });
                }
            }
        }
        if https && !f.row.allow_https {
            return Err(ClientRefusal::NoHttps { family: f.row.id });
        }
        Ok(f.row.id)
    }
}

/// `block_browser` (`include/functions_announce.php:27-31`): a `User-Agent` that starts
/// like a browser's.
pub fn is_browser(agent: &str) -> bool {
    ["Mozilla", "Opera", "Links", "Lynx"]
        .iter()
        .any(|p| agent.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row as `database/seeders/AgentAllowedFamilyTableSeeder.php` ships it.
    fn family(
        id: u32,
        name: &str,
        peer: (&str, u8, &str, &str),
        agent: (&str, u8, &str, &str),
    ) -> FamilyRow {
        FamilyRow {
            id,
            family: name.to_owned(),
            start_name: format!("{name} start"),
            peer_id_pattern: peer.0.to_owned(),
            peer_id_match_num: peer.1,
            peer_id_matchtype: peer.2.to_owned(),
            peer_id_start: peer.3.to_owned(),
            agent_pattern: agent.0.to_owned(),
            agent_match_num: agent.1,
            agent_matchtype: agent.2.to_owned(),
            agent_start: agent.3.to_owned(),
            exception: false,
            allow_https: false,
        }
    }

    fn qbittorrent() -> FamilyRow {
        family(
            23,
            "qBittorrent 4.x",
            (r"/^-qB4([0-9])([0-9])/", 2, "dec", "-qB400"),
            (
                r"/^qBittorrent\/4\.([0-9])\.([0-9])/",
                2,
                "dec",
                "qBittorrent/4.0.0",
            ),
        )
    }

    fn peer(prefix: &str) -> [u8; 20] {
        let mut id = [b'x'; 20];
        id[..prefix.len()].copy_from_slice(prefix.as_bytes());
        id
    }

    /// `AR:146-150`: both sides allow, the family's id.
    #[test]
    fn a_client_of_a_family_is_allowed() {
        let list = AllowList::new(vec![qbittorrent()], vec![]);
        assert_eq!(
            list.check(&peer("-qB4650-"), Some("qBittorrent/4.6.5"), false),
            Ok(23)
        );
        assert_eq!(
            list.check(&peer("-qB4650-"), Some("Transmission/4.0.0"), false),
            Err(ClientRefusal::Banned),
            "the agent side does not match"
        );
        assert_eq!(
            ClientRefusal::Banned.text("https://pt.example"),
            "Banned Client, Please goto https://pt.example/faq.php#id29 for a list of acceptable clients"
        );
    }

    /// `AR:151-158`: a family judged too low on both sides refuses the client even when a
    /// later family allows it (the seeder's "Deluge 1.x" rows 15 and 24).
    #[test]
    fn too_low_in_an_earlier_family_wins() {
        let strict = family(
            15,
            "Deluge 1.x",
            (r"/^-DE1([0-9])([0-9])([0-9])-/", 3, "dec", "-DE1160-"),
            (r"/^Deluge 1\.([0-9])\.([0-9])/", 2, "dec", "Deluge 1.1.6"),
        );
        let loose = family(
            24,
            "Deluge 1.x",
            (r"/^-DE1([0-9])/", 1, "dec", "-DE10"),
            (r"/^Deluge 1\.([0-9])\.([0-9])/", 2, "dec", "Deluge 1.0.0"),
        );
        let list = AllowList::new(vec![loose.clone(), strict.clone()], vec![]);
        let refused = list.check(&peer("-DE1150-"), Some("Deluge 1.1.5"), false);
        assert_eq!(
            refused.map_err(|r| r.text("")),
            Err(
                "Your Deluge 1.x 's version is too low, please update it after Deluge 1.x start"
                    .to_owned()
            )
        );
        assert_eq!(
            list.check(&peer("-DE1170-"), Some("Deluge 1.1.7"), false),
            Ok(15)
        );
        // Only the loose family: 1.1.5 passes it.
        let list = AllowList::new(vec![loose], vec![]);
        assert_eq!(
            list.check(&peer("-DE1150-"), Some("Deluge 1.1.5"), false),
            Ok(24)
        );
    }

    /// `AR:247-262`: hex groups, and a family where only one side is too low refuses with
    /// the plain "Banned Client".
    #[test]
    fn hex_versions_and_one_side_too_low() {
        let rtorrent = family(
            6,
            "RTorrent 0.x(with libtorrent 0.x)",
            (
                r"/^-lt([0-9A-E])([0-9A-E])([0-9A-E])([0-9A-E])-/",
                4,
                "hex",
                "-lt0C00-",
            ),
            (
                r"/^rtorrent\/0\.([0-9])\.([0-9])\/0\.([1-9][0-9]*)\.(0|[1-9][0-9]*)/",
                4,
                "dec",
                "rtorrent/0.8.0/0.12.0",
            ),
        );
        let list = AllowList::new(vec![rtorrent], vec![]);
        assert_eq!(
            list.check(&peer("-lt0D00-"), Some("rtorrent/0.8.0/0.12.0"), false),
            Ok(6)
        );
        assert_eq!(
            list.check(&peer("-lt0B00-"), Some("rtorrent/0.8.0/0.12.0"), false),
            Err(ClientRefusal::Banned)
        );
        assert_eq!(php_hexdec(b"0C"), 12);
        assert_eq!(php_hexdec(b"1g2"), 0x12, "hexdec skips what is not hex");
        assert_eq!(php_intval(b" 12abc"), 12);
        assert_eq!(php_intval(b"abc"), 0);
    }

    /// `AR:54-65`, `AR:98-109`: a pattern that does not match its own start string.
    #[test]
    fn a_broken_family_refuses_when_reached() {
        let broken = family(
            9,
            "Broken",
            (r"/^-XX([0-9])-/", 1, "dec", "-YY1-"),
            ("", 0, "dec", ""),
        );
        let list = AllowList::new(vec![broken], vec![]);
        let r = list.check(&peer("-XX1-"), Some("x"), false).unwrap_err();
        assert_eq!(
            r.text(""),
            "regular expression err for peer_id: -YY1-, please ask sysop to fix this"
        );
        // A family before it that allows the client is taken first (`-ZZ` sorts before `-YY`).
        let ok = family(10, "Ok", ("/^-ZZ/", 0, "dec", "-ZZ"), ("", 0, "dec", ""));
        let list = AllowList::new(
            vec![
                family(
                    9,
                    "Broken",
                    (r"/^-XX([0-9])-/", 1, "dec", "-YY1-"),
                    ("", 0, "dec", ""),
                ),
                ok,
            ],
            vec![],
        );
        assert_eq!(list.check(&peer("-ZZ1-"), Some("x"), false), Ok(10));
    }

    /// `AR:168-186`, `AR:192-205`: banned builds and https.
    #[test]
    fn banned_builds_and_https() {
        let mut f = qbittorrent();
        f.exception = true;
        let e = ExceptionRow {
            id: 3,
            family_id: 23,
            name: "qBittorrent 4.6.0".to_owned(),
            peer_id: "-qB4600-".to_owned(),
            agent: "qBittorrent/4.6.0".to_owned(),
            comment: "bug".to_owned(),
        };
        let list = AllowList::new(vec![f], vec![e]);
        for (prefix, agent, https, base_url, text) in [
            (
                "-qB4600-",
                "qBittorrent/4.6.0",
                false,
                "",
                "[23-3]Client: qBittorrent 4.6.0 is banned due to: bug",
            ),
            (
                "-qB4610-",
                "qBittorrent/4.6.1",
                true,
                "https://pt.example",
                "[23]This client does not support https well, Please goto https://pt.example/faq.php#id29 for a list of proper clients",
            ),
        ] {
            let r = list.check(&peer(prefix), Some(agent), https).unwrap_err();
            assert_eq!(r.text(base_url), text, "{prefix} https: {https}");
        }
        assert_eq!(
            list.check(&peer("-qB4610-"), Some("qBittorrent/4.6.1"), false),
            Ok(23)
        );
    }

    /// The families' order (`AR:78-83`), an escaped delimiter, a modifier, and a client
    /// without a `User-Agent` (UDP: only the peer id is judged).
    #[test]
    fn patterns_order_and_no_agent() {
        let p = Pattern::php(r"/^uTorrent\/18([0-9])B\(([1-9][0-9]*)\)/").unwrap();
        assert_eq!(
            p.captures(b"uTorrent/180B(9137)"),
            Some(vec![b"0".to_vec(), b"9137".to_vec()])
        );
        assert!(Pattern::php("/^azureus/i")
            .unwrap()
            .is_match(b"Azureus 3.0"));
        assert!(Pattern::php("^-qB/").is_err(), "no delimiter");
        assert!(Pattern::php("/a/e").is_err(), "a modifier PHP removed");
        // Trailing groups that took no part are left out, inner ones are empty.
        let p = Pattern::php("/^a(b)?(c)?(d)?/").unwrap();
        assert_eq!(p.captures(b"ac"), Some(vec![vec![], b"c".to_vec()]));
        let list = AllowList::new(vec![qbittorrent()], vec![]);
        assert_eq!(list.check(&peer("-qB4650-"), None, false), Ok(23));
        assert_eq!(
            AllowList::default().check(&peer("-qB4650-"), None, false),
            Err(ClientRefusal::Banned)
        );
        assert!(is_browser("Mozilla/5.0") && !is_browser("qBittorrent/4.6.5 Mozilla"));
    }
}
