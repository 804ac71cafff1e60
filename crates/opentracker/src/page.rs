//! The `/stats` page as a whole: a query and whether its client may read it in, a status
//! and a body out. The server supplies the numbers through [`Numbers`] and writes the
//! answer; what each query gets, and which of opentracker's HTTP error counters it bumps,
//! is decided here.

use crate::query::{self, Format, Mode};
use crate::stats::{http_error, Stats};
use crate::tally::HTTP;
use crate::torrents::{self, Torrent};

/// Where the page's numbers come from.
pub trait Numbers {
    /// The counts; the store's figures (torrents, peers, seeds, completed) only when
    /// `store`, as they take a walk over every torrent.
    fn stats(&self, store: bool) -> Stats;
    /// Every torrent a page for every client may show.
    fn torrents(&self) -> Vec<Torrent>;
}

/// What to send back.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// Status code and reason, as in a status line (`200 OK`).
    pub status: &'static str,
    pub body: Vec<u8>,
}

/// The answer to `query` (what follows `?`) from a client `allowed` or not.
pub fn answer(query: &[u8], allowed: bool, numbers: &dyn Numbers) -> Answer {
    if !allowed {
        HTTP.error(http_error::ACCESS_DENIED);
        return reply("403 Forbidden", b"access denied\n".to_vec());
    }
    let req = match query::parse(query) {
        Ok(req) => req,
        Err(e) => {
            HTTP.error(http_error::PARAM);
            return reply("400 Bad Request", format!("{e}\n").into_bytes());
        }
    };
    match body(req.mode, req.format, numbers) {
        Ok(body) => reply("200 OK", body),
        Err(why) => reply("501 Not Implemented", format!("{why}\n").into_bytes()),
    }
}

fn reply(status: &'static str, body: Vec<u8>) -> Answer {
    Answer { status, body }
}

fn body(mode: Mode, format: Option<Format>, numbers: &dyn Numbers) -> Result<Vec<u8>, String> {
    let text = match mode {
        Mode::Tpbs => {
            let mut list = numbers.torrents();
            // opentracker writes the entries without their dictionary when no format is
            // named; a well-formed document serves whoever relies on that better.
            return match format.unwrap_or(Format::Ben) {
                Format::Txt => Ok(torrents::tpbs_txt(&mut list)),
                Format::Txtp => Ok(torrents::tpbs_txtp(&mut list)),
                Format::Ben => Ok(torrents::tpbs_ben(&mut list)),
                Format::Bin => Ok(torrents::tpbs_bin(&mut list)),
                Format::Url => Err("format \"url\" is not served by shoal".into()),
            };
        }
        Mode::Top10 => torrents::top(&numbers.torrents(), 10),
        Mode::Top100 => torrents::top(&numbers.torrents(), 100),
        // Per-network and per-request logs shoal does not keep, and opentracker's own
        // state dump, which only opentracker reads back.
        Mode::Busy | Mode::S24s | Mode::Statedump | Mode::Fulllog | Mode::Woodpeckers => {
            return Err(format!(
                "stats mode {:?} is not served by shoal",
                mode.keyword()
            ));
        }
        mode => {
            let store = matches!(
                mode,
                Mode::Peer | Mode::Torr | Mode::Completed | Mode::Everything
            );
            let s = numbers.stats(store);
            match mode {
                Mode::Peer => s.peer(),
                Mode::Conn => s.conn(),
                Mode::Scrp => s.scrp(),
                Mode::Udp4 => s.udp4(),
                Mode::Tcp4 => s.tcp4(),
                Mode::Torr => s.torr(),
                Mode::Fscr => s.fscr(),
                Mode::Herr => s.herr(),
                Mode::Completed => s.completed(),
                Mode::Renew => s.renew(),
                Mode::Syncs => s.syncs(),
                Mode::Version => s.version(),
                _ => s.everything(),
            }
        }
    };
    Ok(text.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Fixed {
        walked: Cell<bool>,
    }

    impl Numbers for Fixed {
        fn stats(&self, store: bool) -> Stats {
            self.walked.set(store);
            Stats {
                torrents: u64::from(store),
                ..Stats::default()
            }
        }
        fn torrents(&self) -> Vec<Torrent> {
            vec![Torrent {
                info_hash: [0xab; 20],
                seeds: 1,
                peers: 2,
                downloaded: 3,
            }]
        }
    }

    fn ask(query: &str, allowed: bool) -> (Answer, bool) {
        let n = Fixed {
            walked: Cell::new(false),
        };
        (answer(query.as_bytes(), allowed, &n), n.walked.get())
    }

    #[test]
    fn each_mode_gets_its_body_and_only_store_modes_walk_the_store() {
        let (a, walked) = ask("mode=torr", true);
        assert_eq!(a.status, "200 OK");
        assert!(a.body.starts_with(b"1\n0\n") && walked);
        let (a, walked) = ask("mode=conn", true);
        assert!(a.body.ends_with(b"success/s.") && !walked);
        let (a, _) = ask("mode=tpbs&format=txt", true);
        assert_eq!(a.body, format!("{}:1:1\n", "AB".repeat(20)).into_bytes());
        let (a, _) = ask("mode=tpbs", true);
        assert!(a.body.starts_with(b"d5:filesd20:"));
        let (a, _) = ask("mode=top10", true);
        assert!(a.body.starts_with(b"Top 10 torrents by peers:\n\t2\t"));
        let (a, walked) = ask("", true);
        assert!(
            a.body.ends_with(b"\nopentracker") && walked,
            "peer by default"
        );
    }

    #[test]
    fn refusals_and_modes_not_served() {
        assert_eq!(ask("mode=everything", false).0.status, "403 Forbidden");
        assert_eq!(ask("mode=nope", true).0.status, "400 Bad Request");
        assert_eq!(ask("mode=s24s", true).0.status, "501 Not Implemented");
        assert_eq!(
            ask("mode=tpbs&format=url", true).0.status,
            "501 Not Implemented"
        );
    }
}
