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
        let end = rest.rfind(close).ok_or_else(|| bad("no closing delimiter"))?;
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
        let last = groups.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
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
        .fold(0i128, |v, d| v.saturating_mul(16).saturating_add(i128::from(d)))
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
        let Some(target) = pattern.captures(value) else {
            return Ok(Side::NotAllowed);
        };
        let number = |s: &[u8]| if hex { php_hexdec(s) } else { php_intval(s) };
        for i in 0..match_num {
            let (Some(b), Some(t)) = (bench.get(i), target.get(i)) else {
                break;
            };
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
