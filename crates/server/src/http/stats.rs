//! opentracker's operator surface on the HTTP listeners: its `/stats` page (`[stats]`) and
//! the redirect of `GET /` (`http.redirect_url`).
//!
//! What each query gets is `shoal-opentracker`'s ([`page::answer`]); this file routes the
//! request, decides whether the client may read the page and gathers the numbers (the UDP
//! workers' counters, the HTTP tallies, the store's torrents). The client is judged by its
//! address as the proxy rules resolve it, so a trusted reverse proxy does not make every
//! client an allowed one.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use shoal_opentracker::page::{self, Numbers};
use shoal_opentracker::stats::{http_error, Udp};
use shoal_opentracker::tally::HTTP;
use shoal_opentracker::{Stats, Torrent};
use shoal_tracker::Core;

use super::head::write_head;
use crate::config::Config;
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
            allow: config.stats.networks(),
            path: config.stats.path.clone(),
            redirect: Some(config.http.redirect_url.clone()).filter(|u| !u.is_empty()),
            udp,
            started: Instant::now(),
            // opentracker's is random at start too: it tells restarts apart.
            tracker_id: fastrand::u32(..),
        }
    }

    /// Answers `target` from `client` into `out` when it is the stats page or `/` with a
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
        let ip = client.to_canonical();
        let allowed = self.allow.iter().any(|n| n.contains(&ip));
        let a = page::answer(
            query.as_bytes(),
            allowed,
            &Gather {
                surface: self,
                core,
            },
        );
        write_head(out, a.status, a.body.len(), close, "");
        out.extend_from_slice(&a.body);
        true
    }
}

/// The numbers of one request.
struct Gather<'a> {
    surface: &'a Surface,
    core: &'a Core,
}

impl Numbers for Gather<'_> {
    fn stats(&self, store: bool) -> Stats {
        let mut s = Stats {
            tracker_id: self.surface.tracker_id,
            uptime: self.surface.started.elapsed().as_secs(),
            version: format!(
                "$Source: shoal $: $Revision: {} $\n",
                env!("CARGO_PKG_VERSION")
            ),
            ..Stats::default()
        };
        HTTP.fill(&mut s);
        let u = counters::total(&self.surface.udp);
        s.udp = Udp {
            overall: u.ipv4 + u.ipv6,
            connect: u.connect,
            announce: u.announce.saturating_sub(u.announce_errors),
            scrape: u.scrape.saturating_sub(u.scrape_errors),
            missmatch: u.bad_connection_id,
        };
        if store {
            self.core.swarms().for_each_torrent(|_, t| {
                let st = t.stats;
                s.torrents += 1;
                s.seeds += u64::from(st.seeders);
                s.peers += u64::from(st.seeders) + u64::from(st.leechers);
                s.completed += u64::from(st.completed);
            });
        }
        s
    }

    /// As the full scrape lists them: those the policy lets every client see.
    fn torrents(&self) -> Vec<Torrent> {
        let (policy, mut list) = (self.core.policy(), Vec::new());
        self.core.swarms().for_each_torrent(|h, t| {
            let st = t.stats;
            if policy.lists(h) {
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
}
