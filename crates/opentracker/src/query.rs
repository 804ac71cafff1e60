//! What a `/stats` query asks for: `mode` (default `peer`) and, for `tpbs`, `format`.
//!
//! The keywords are opentracker's (`ot_http.c`): the query is split at `&`, each name and
//! value is percent-decoded, a name other than `mode` and `format` is skipped, and a value
//! that is no keyword, or a bad percent escape, makes the whole query a 400. A later
//! `mode` or `format` replaces an earlier one, as there.

use std::fmt;

/// An enum of keywords, its table of every variant with its keyword (`ALL`), and the
/// look-ups both ways.
macro_rules! keywords {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $variant,)+
        }

        impl $name {
            /// Every variant with its keyword.
            pub const ALL: [(&'static str, $name); [$($word),+].len()] =
                [$(($word, $name::$variant)),+];

            pub fn keyword(self) -> &'static str {
                Self::ALL
                    .iter()
                    .find(|(_, v)| *v == self)
                    .map_or("", |(k, _)| k)
            }

            fn from_keyword(word: &[u8]) -> Option<Self> {
                Self::ALL
                    .iter()
                    .find(|(k, _)| k.as_bytes() == word)
                    .map(|&(_, v)| v)
            }
        }
    };
}

keywords! {
    /// A `/stats` mode, by opentracker's keyword.
    Mode {
        Peer = "peer",
        Conn = "conn",
        Scrp = "scrp",
        Udp4 = "udp4",
        Tcp4 = "tcp4",
        Busy = "busy",
        Torr = "torr",
        Fscr = "fscr",
        S24s = "s24s",
        Tpbs = "tpbs",
        Herr = "herr",
        Completed = "completed",
        Top100 = "top100",
        Top10 = "top10",
        Renew = "renew",
        Syncs = "syncs",
        Version = "version",
        Everything = "everything",
        Statedump = "statedump",
        Fulllog = "fulllog",
        Woodpeckers = "woodpeckers",
    }
}

keywords! {
    /// A `format` of the `tpbs` full scrape.
    Format {
        /// Info hash, seeders and leechers as 28 bytes a torrent.
        Bin = "bin",
        /// The bencoded full scrape (`d5:filesd...ee`).
        Ben = "ben",
        /// The info hash percent-encoded, then `:seeders:leechers`.
        Url = "url",
        /// Upper-case hex info hash, then `:seeders:leechers`.
        Txt = "txt",
        /// As `txt`, then `:downloaded`.
        Txtp = "txtp",
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
            let byte = s.get(i + 1..i + 3).and_then(crate::hex_byte);
            out.push(byte.ok_or(QueryError::BadEscape)?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(())
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
