//! What an operator moving from opentracker finds again in shoal: opentracker's `/stats`
//! answers (the XML of `mode=everything`, the MRTG blocks of the other modes, the `tpbs`
//! full scrape), the lines its access-list pipes take, and its `opentracker.conf`, read and
//! turned into shoal's TOML.
//!
//! Everything here is formats over plain values, so that each can be checked against the
//! facts of opentracker's source (`ot_stats.c`, `ot_fullscrape.c`, `ot_http.c`,
//! `opentracker.c`) without a socket: the server gathers the numbers ([`stats::Stats`], a
//! list of [`torrents::Torrent`]), reads the pipes and answers the requests.
//!
//! The modules: [`page`] (a `/stats` query in, a status and body out), [`query`] (what a
//! query asks for), [`stats`] (the per-mode
//! bodies), [`torrents`] (the bodies that list torrents: `tpbs`, `top10`, `top100`),
//! [`tally`] (the HTTP events opentracker counts that shoal's metrics do not keep in a
//! readable form), [`fifo`] (one line of an access-list pipe), [`conf`] (an
//! `opentracker.conf`), [`convert`] (that file as shoal's TOML) and [`config`] (shoal's
//! `[stats]` section).

#![forbid(unsafe_code)]

pub mod conf;
pub mod config;
pub mod convert;
pub mod fifo;
pub mod page;
pub mod query;
pub mod stats;
pub mod tally;
pub mod torrents;

pub use query::{Format, Mode, QueryError, Request};
pub use stats::Stats;
pub use torrents::Torrent;

/// The byte two hex digits (either case) spell, as opentracker reads a percent escape or
/// an info hash.
pub(crate) fn hex_byte(digits: &[u8]) -> Option<u8> {
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    match digits {
        [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
        _ => None,
    }
}

/// Whether a trimmed line of a config file or an access-list pipe is blank or a `#`
/// comment, which opentracker skips.
pub(crate) fn says_nothing(line: &[u8]) -> bool {
    matches!(line.first(), None | Some(b'#'))
}
