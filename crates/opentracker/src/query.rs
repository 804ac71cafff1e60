//! What a `/stats` query asks for: `mode` (default `peer`) and, for `tpbs`, `format`.
//!
//! The keywords are opentracker's (`ot_http.c`): the query is split at `&`, each name and
//! value is percent-decoded, a name other than `mode` and `format` is skipped, and a value
//! that is no keyword, or a bad percent escape, makes the whole query a 400. A later
//! `mode` or `format` replaces an earlier one, as there.

use std::fmt;

/// A `/stats` mode, by opentracker's keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Peer,
    Conn,
    Scrp,
    Udp4,
    Tcp4,
    Busy,
    Torr,
    Fscr,
    S24s,
    Tpbs,
    Herr,
    Completed,
    Top100,
    Top10,
    Renew,
    Syncs,
    Version,
    Everything,
    Statedump,
    Fulllog,
    Woodpeckers,
}

impl Mode {
    /// Every mode with its keyword.
    pub const ALL: [(&'static str, Mode); 21] = [
        ("peer", Mode::Peer),
        ("conn", Mode::Conn),
        ("scrp", Mode::Scrp),
        ("udp4", Mode::Udp4),
        ("tcp4", Mode::Tcp4),
        ("busy", Mode::Busy),
        ("torr", Mode::Torr),
        ("fscr", Mode::Fscr),
        ("s24s", Mode::S24s),
        ("tpbs", Mode::Tpbs),
        ("herr", Mode::Herr),
        ("completed", Mode::Completed),
        ("top100", Mode::Top100),
        ("top10", Mode::Top10),
        ("renew", Mode::Renew),
        ("syncs", Mode::Syncs),
        ("version", Mode::Version),
        ("everything", Mode::Everything),
        ("statedump", Mode::Statedump),
        ("fulllog", Mode::Fulllog),
        ("woodpeckers", Mode::Woodpeckers),
    ];

    pub fn keyword(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("", |(k, _)| k)
    }

    fn from_keyword(word: &[u8]) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(k, _)| k.as_bytes() == word)
            .map(|&(_, m)| m)
    }
}

/// A `format` of the `tpbs` full scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Info hash, seeders and leechers as 28 bytes a torrent.
    Bin,
    /// The bencoded full scrape (`d5:filesd...ee`).
    Ben,
    /// The info hash percent-encoded, then `:seeders:leechers`.
    Url,
    /// Upper-case hex info hash, then `:seeders:leechers`.
    Txt,
    /// As `txt`, then `:downloaded`.
    Txtp,
}

impl Format {
    pub const ALL: [(&'static str, Format); 5] = [
        ("bin", Format::Bin),
        ("ben", Format::Ben),
        ("url", Format::Url),
        ("txt", Format::Txt),
        ("txtp", Format::Txtp),
    ];

    fn from_keyword(word: &[u8]) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(k, _)| k.as_bytes() == word)
            .map(|&(_, f)| f)
    }
}

/// What a `/stats` query asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub mode: Mode,
    /// `None` when the query names none.
    pub format: Option<Format>,
}

/// Why a query is refused (opentracker answers each with `400 Invalid Request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// `mode=` with no known keyword.
    UnknownMode(String),
    /// `format=` with no known keyword.
    UnknownFormat(String),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadEscape => f.write_str("bad percent escape in the query"),
            Self::UnknownMode(m) => write!(f, "unknown stats mode {m:?}"),
            Self::UnknownFormat(m) => write!(f, "unknown stats format {m:?}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// Parses the query string (what follows `?`, without it; empty for none).
pub fn parse(query: &[u8]) -> Result<Request, QueryError> {
    let mut req = Request {
        mode: Mode::Peer,
        format: None,
    };
    // Decoded values are short keywords; anything longer is no keyword either way.
    let mut name = Vec::with_capacity(16);
    let mut value = Vec::with_capacity(16);
    for pair in query.split(|&b| b == b'&') {
        if pair.is_empty() {
            continue;
        }
        let (n, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        decode(n, &mut name)?;
        decode(v, &mut value)?;
        match name.as_slice() {
            b"mode" => {
                req.mode = Mode::from_keyword(&value).ok_or_else(|| {
                    QueryError::UnknownMode(String::from_utf8_lossy(&value).into_owned())
                })?;
            }
            b"format" => {
                req.format = Some(Format::from_keyword(&value).ok_or_else(|| {
                    QueryError::UnknownFormat(String::from_utf8_lossy(&value).into_owned())
                })?);
            }
            _ => {}
        }
    }
    Ok(req)
}

/// Percent-decodes `s` into `out` (`+` stays `+`, as in opentracker).
fn decode(s: &[u8], out: &mut Vec<u8>) -> Result<(), QueryError> {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hi = s.get(i + 1).and_then(|&b| hex(b));
            let lo = s.get(i + 2).and_then(|&b| hex(b));
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(QueryError::BadEscape),
            }
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(())
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_mode_is_peer() {
        assert_eq!(parse(b"").unwrap().mode, Mode::Peer);
        assert_eq!(parse(b"x=1&&y").unwrap().mode, Mode::Peer);
    }

    #[test]
    fn modes_and_formats_are_read_by_keyword() {
        let r = parse(b"mode=tpbs&format=txt").unwrap();
        assert_eq!((r.mode, r.format), (Mode::Tpbs, Some(Format::Txt)));
        assert_eq!(parse(b"mode=top10").unwrap().mode, Mode::Top10);
        assert_eq!(parse(b"mode=top100").unwrap().mode, Mode::Top100);
        assert_eq!(parse(b"mode=%65verything").unwrap().mode, Mode::Everything);
        assert_eq!(parse(b"mode=conn&mode=udp4").unwrap().mode, Mode::Udp4);
        for (k, m) in Mode::ALL {
            assert_eq!(m.keyword(), k);
            assert_eq!(parse(format!("mode={k}").as_bytes()).unwrap().mode, m);
        }
    }

    #[test]
    fn unknown_keywords_and_bad_escapes_are_refused() {
        assert_eq!(
            parse(b"mode=top1"),
            Err(QueryError::UnknownMode("top1".into()))
        );
        assert_eq!(
            parse(b"mode=tpbs&format=xml"),
            Err(QueryError::UnknownFormat("xml".into()))
        );
        assert_eq!(parse(b"mode=%6"), Err(QueryError::BadEscape));
        assert_eq!(parse(b"mode"), Err(QueryError::UnknownMode(String::new())));
    }
}
