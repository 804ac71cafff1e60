//! Reading a control call's path and query: which call it is ([`route`]) and what it asks
//! ([`Action`], [`ReportQuery`]). Pure and total: any bytes give a value or a plain
//! refusal, never a panic (the fuzz target `control_call` feeds it).
//!
//! The site builds its queries without encoding (`&passkey=...&peer_id=-qB4`) except the
//! info hashes, which are percent-encoded bytes (PHP's `rawurlencode`). As Ocelot, the
//! last of two equal keys wins and an action shoal does not know answers "success".

use std::collections::HashMap;

use crate::model::{InfoHash, LeechType};

/// Which control call a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `/<site password>/update?...`
    Update,
    /// `/<report password>/report?...`
    Report,
}

/// Splits `/<password>/update?<query>` or `/<password>/report?<query>` into the password,
/// the kind and the query; `None` for any other path (announces and scrapes among them).
pub fn route(path: &str) -> Option<(&str, Kind, &str)> {
    let rest = path.strip_prefix('/')?;
    let (password, rest) = rest.split_once('/')?;
    let (call, query) = match rest.split_once('?') {
        Some((call, query)) => (call, query),
        None => (rest, ""),
    };
    let kind = match call {
        "update" => Kind::Update,
        "report" => Kind::Report,
        _ => return None,
    };
    Some((password, kind, query))
}

/// A query's parameters: the last value of each key.
pub fn params(query: &str) -> HashMap<&str, &str> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect()
}

/// Percent-decodes `text` (a `%` not followed by two hex digits stays as it is).
pub fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A decoded info hash, if it is 20 bytes.
fn hash(value: &str) -> Option<InfoHash> {
    unescape(value).try_into().ok()
}

/// A number as Ocelot reads one: its leading digits, 0 without any.
fn number(value: &str) -> i64 {
    let (negative, digits) = match value.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    let n = digits[..end].parse::<i64>().unwrap_or(0);
    if negative {
        -n
    } else {
        n
    }
}

/// A site id: 0 for anything that is not one.
fn id(value: &str) -> u32 {
    u32::try_from(number(value)).unwrap_or(0)
}

/// One `update?action=...` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    ChangePasskey {
        old: String,
        new: String,
    },
    /// `hash` is `None` where the parameter is not 20 bytes (nothing is found then).
    AddTorrent {
        hash: Option<InfoHash>,
        id: u32,
        leech: LeechType,
    },
    UpdateTorrent {
        hash: Option<InfoHash>,
        leech: LeechType,
    },
    UpdateTorrents {
        hashes: Vec<InfoHash>,
        leech: LeechType,
    },
    AddToken {
        hash: Option<InfoHash>,
        user: u32,
    },
    RemoveToken {
        hash: Option<InfoHash>,
        user: u32,
    },
    DeleteTorrent {
        hash: Option<InfoHash>,
        reason: Option<i32>,
    },
    AddUser {
        passkey: String,
        id: u32,
        protected: bool,
    },
    UpdateUser {
        passkey: String,
        can_leech: bool,
        protected: bool,
    },
    TraceUser {
        passkey: String,
        traced: bool,
    },
    RemoveUser {
        passkey: String,
    },
    RemoveUsers {
        passkeys: Vec<String>,
    },
    AddWhitelist {
        prefix: Vec<u8>,
    },
    EditWhitelist {
        old: Vec<u8>,
        new: Vec<u8>,
    },
    RemoveWhitelist {
        prefix: Vec<u8>,
    },
    /// `None`: the value is not a number of seconds.
    AnnounceInterval(Option<u32>),
    AnnounceJitter(Option<u32>),
    /// The hash as the site sent it (echoed) and decoded.
    InfoTorrent {
        text: String,
        hash: Option<InfoHash>,
    },
    /// An action shoal does not know: answered "success" and changes nothing, as Ocelot.
    Other(String),
}

/// The length of a Gazelle passkey: `remove_users` sends them back to back.
pub const PASSKEY_LEN: usize = 32;

impl Action {
    /// The call a query of `update` asks for.
    pub fn parse(query: &str) -> Action {
        let p = params(query);
        let get = |k: &str| p.get(k).copied().unwrap_or("");
        let text = |k: &str| get(k).to_owned();
        let leech = LeechType::from_call(get("freetorrent"));
        let seconds = |k: &str| {
            u32::try_from(number(get(k)))
                .ok()
                .filter(|_| !get(k).is_empty())
        };
        match get("action") {
            "change_passkey" => Action::ChangePasskey {
                old: text("oldpasskey"),
                new: text("newpasskey"),
            },
            "add_torrent" => Action::AddTorrent {
                hash: hash(get("info_hash")),
                id: id(get("id")),
                leech,
            },
            "update_torrent" => Action::UpdateTorrent {
                hash: hash(get("info_hash")),
                leech,
            },
            "update_torrents" => Action::UpdateTorrents {
                hashes: unescape(get("info_hashes"))
                    .chunks_exact(20)
                    .filter_map(|c| c.try_into().ok())
                    .collect(),
                leech,
            },
            "add_token" => Action::AddToken {
                hash: hash(get("info_hash")),
                user: id(get("userid")),
            },
            "remove_token" => Action::RemoveToken {
                hash: hash(get("info_hash")),
                user: id(get("userid")),
            },
            "delete_torrent" => Action::DeleteTorrent {
                hash: hash(get("info_hash")),
                reason: p
                    .get("reason")
                    .map(|r| i32::try_from(number(r)).unwrap_or(-1)),
            },
            "add_user" => Action::AddUser {
                passkey: text("passkey"),
                id: id(get("id")),
                protected: get("visible") == "0",
            },
            "update_user" => Action::UpdateUser {
                passkey: text("passkey"),
                can_leech: get("can_leech") != "0",
                protected: get("visible") == "0",
            },
            "trace_user" => Action::TraceUser {
                passkey: text("passkey"),
                traced: get("trace") == "1",
            },
            "remove_user" => Action::RemoveUser {
                passkey: text("passkey"),
            },
            "remove_users" => Action::RemoveUsers {
                passkeys: get("passkeys")
                    .as_bytes()
                    .chunks(PASSKEY_LEN)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect(),
            },
            "add_whitelist" => Action::AddWhitelist {
                prefix: get("peer_id").as_bytes().to_vec(),
            },
            "edit_whitelist" => Action::EditWhitelist {
                old: get("old_peer_id").as_bytes().to_vec(),
                new: get("new_peer_id").as_bytes().to_vec(),
            },
            "remove_whitelist" => Action::RemoveWhitelist {
                prefix: get("peer_id").as_bytes().to_vec(),
            },
            "update_announce_interval" => {
                Action::AnnounceInterval(seconds("new_announce_interval").filter(|s| *s > 0))
            }
            "update_announce_jitter" => Action::AnnounceJitter(seconds("new_announce_jitter")),
            "info_torrent" => Action::InfoTorrent {
                text: text("info_hash"),
                hash: hash(get("info_hash")),
            },
            other => Action::Other(other.to_owned()),
        }
    }
}

/// One `report?get=...` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportQuery {
    Stats,
    PromStats,
    Jemalloc,
    /// `key`: the user's passkey (empty where the call gave none).
    User {
        key: String,
    },
    Torrent {
        hash: Option<InfoHash>,
    },
    Other(String),
}

impl ReportQuery {
    pub fn parse(query: &str) -> ReportQuery {
        let p = params(query);
        let get = |k: &str| p.get(k).copied().unwrap_or("");
        match get("get") {
            "stats" => ReportQuery::Stats,
            "prom_stats" => ReportQuery::PromStats,
            "jemalloc" => ReportQuery::Jemalloc,
            "user" => ReportQuery::User {
                key: get("key").to_owned(),
            },
            "torrent" => ReportQuery::Torrent {
                hash: hash(get("info_hash")),
            },
            other => ReportQuery::Other(other.to_owned()),
        }
    }
}
