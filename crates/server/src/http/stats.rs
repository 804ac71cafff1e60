//! opentracker's operator surface on the HTTP listeners: its `/stats` page (`[stats]`) and
//! the redirect of `GET /` (`http.redirect_url`).
//!
//! The formats are `shoal-opentracker`'s; this file only gathers the numbers (the UDP
//! workers' counters, the HTTP tallies, the store's torrents) and answers. A client not in
//! `stats.allow` gets 403: the counts say how busy the tracker is and which torrents are
//! largest, which an operator may not want public. Whether a client is allowed is decided
//! on its address as the proxy rules resolve it, so a trusted reverse proxy does not make
//! every client an allowed one.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use shoal_opentracker::query::{self, Format, Mode};
use shoal_opentracker::stats::{http_error, Udp};
use shoal_opentracker::tally::HTTP;
use shoal_opentracker::{torrents, Stats, Torrent};
use shoal_tracker::Core;

use super::handler::write_head;
use crate::config::{parse_net, Config};
use crate::udp::counters::{self, WorkerCounters};

/// What answers `/stats` and `GET /`.
pub struct Surface {
    allow: Vec<ipnet::IpNet>,
    path: String,
    redirect: Option<String>,
    udp: Vec<Arc<WorkerCounters>>,
    started: Instant,
    tracker_id: u32,
}

impl Surface {
    /// From the config (already validated) and the UDP workers' counters.
    pub fn new(config: &Config, udp: Vec<Arc<WorkerCounters>>) -> Self {
        Self {
            allow: config
                .stats
                .allow
                .iter()
                .filter_map(|n| parse_net(n).ok())
                .collect(),
            path: config.stats.path.clone(),
            redirect: Some(config.http.redirect_url.clone()).filter(|u| !u.is_empty()),
            udp,
            started: Instant::now(),
            // opentracker's is random at start too: it tells restarts apart.
            tracker_id: fastrand::u32(..),
        }
    }

    /// Answers `target` from `client` into `out` when it is `/stats` or `GET /` with a
    /// redirect; `false` when it is neither (the handler goes on).
    pub fn answer(
        &self,
        core: &Core,
        target: &str,
        client: IpAddr,
        close: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path == "/" {
            let Some(url) = &self.redirect else {
                return false;
            };
            HTTP.error(http_error::REDIRECT);
            write_head(out, "302 Found", 0, close, &format!("Location: {url}\r\n"));
            return true;
        }
        if path != self.path || self.allow.is_empty() {
            return false;
        }
        let client = client.to_canonical();
        let (status, body) = if !self.allow.iter().any(|n| n.contains(&client)) {
            HTTP.error(http_error::ACCESS_DENIED);
            ("403 Forbidden", b"access denied\n".to_vec())
        } else {
            match query::parse(query.as_bytes()) {
                Ok(req) => match self.body(core, req.mode, req.format) {
                    Ok(body) => ("200 OK", body),
                    Err(why) => ("501 Not Implemented", format!("{why}\n").into_bytes()),
                },
                Err(e) => {
                    HTTP.error(http_error::PARAM);
                    ("400 Bad Request", format!("{e}\n").into_bytes())
                }
            }
        };
        write_head(out, status, body.len(), close, "");
        out.extend_from_slice(&body);
        true
    }

    fn body(&self, core: &Core, mode: Mode, format: Option<Format>) -> Result<Vec<u8>, String> {
        let not_served = || format!("stats mode {:?} is not served by shoal", mode.keyword());
        let text = match mode {
            Mode::Tpbs => {
                let mut list = listed_torrents(core);
                // opentracker writes the entries without their dictionary when no format
                // is named; shoal sends the whole bencoded document then.
                return match format.unwrap_or(Format::Ben) {
                    Format::Txt => Ok(torrents::tpbs_txt(&mut list)),
                    Format::Txtp => Ok(torrents::tpbs_txtp(&mut list)),
                    Format::Ben => Ok(torrents::tpbs_ben(&mut list)),
                    Format::Bin => Ok(torrents::tpbs_bin(&mut list)),
                    Format::Url => Err("format \"url\" is not served by shoal".into()),
                };
            }
            Mode::Top10 => torrents::top(&listed_torrents(core), 10),
            Mode::Top100 => torrents::top(&listed_torrents(core), 100),
            Mode::Busy | Mode::S24s | Mode::Statedump | Mode::Fulllog | Mode::Woodpeckers => {
                return Err(not_served())
            }
            mode => {
                let s = self.stats(
                    core,
                    matches!(
                        mode,
                        Mode::Peer | Mode::Torr | Mode::Completed | Mode::Everything
                    ),
                );
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

    /// The counts; the store's figures only when `store` (they take a walk over it).
    fn stats(&self, core: &Core, store: bool) -> Stats {
        let mut s = Stats {
            tracker_id: self.tracker_id,
            uptime: self.started.elapsed().as_secs(),
            version: format!(
                "$Source: shoal $: $Revision: {} $\n",
                env!("CARGO_PKG_VERSION")
            ),
            ..Stats::default()
        };
        HTTP.fill(&mut s);
        let u = counters::total(&self.udp);
        s.udp = Udp {
            overall: u.ipv4 + u.ipv6,
            connect: u.connect,
            announce: u.announce.saturating_sub(u.announce_errors),
            scrape: u.scrape.saturating_sub(u.scrape_errors),
            missmatch: u.bad_connection_id,
        };
        if store {
            core.swarms().for_each_torrent(|_, t| {
                let st = t.stats;
                s.torrents += 1;
                s.seeds += u64::from(st.seeders);
                s.peers += u64::from(st.seeders) + u64::from(st.leechers);
                s.completed += u64::from(st.completed);
            });
        }
        s
    }
}

/// Every torrent a document for every client may show (as the full scrape lists them).
fn listed_torrents(core: &Core) -> Vec<Torrent> {
    let policy = core.policy();
    let mut list = Vec::new();
    core.swarms().for_each_torrent(|h, t| {
        if policy.lists(h) {
            let st = t.stats;
            list.push(Torrent {
                info_hash: h.0,
                seeds: u64::from(st.seeders),
                peers: u64::from(st.seeders) + u64::from(st.leechers),
                downloaded: u64::from(st.completed),
            });
        }
    });
    list
}
