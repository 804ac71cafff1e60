//! What the front ends hand the policy ([`Request`]) and what it answers ([`Verdict`]): the
//! types of the seam, in a file of their own so that the rules beside it and the policy
//! that runs them both use them without one importing the other.

use std::net::IpAddr;

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

use crate::fixed_counter::FixedCounter;

/// The protocol a request came in by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Udp,
    Http,
    Ws,
}

impl Protocol {
    /// The name used in metrics labels.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Http => "http",
            Protocol::Ws => "ws",
        }
    }

    /// Counts a request by its source's address family (IPv4-mapped IPv6 is IPv4), in
    /// `shoal_requests_by_family_total` (HTTP and WebTorrent; UDP counts per worker).
    pub fn count_family(self, source: IpAddr) {
        let family = usize::from(!source.to_canonical().is_ipv4());
        BY_FAMILY[self as usize][family].increment(1);
    }

    /// Counts a request the source rules stopped (`shoal_rate_limited_total`,
    /// `shoal_blocked_total`); other verdicts count nothing here.
    pub fn count_stopped(self, verdict: Verdict) {
        match verdict {
            Verdict::Limited => {
                metrics::counter!("shoal_rate_limited_total", "protocol" => self.label())
                    .increment(1)
            }
            Verdict::Blocked => {
                metrics::counter!("shoal_blocked_total", "protocol" => self.label()).increment(1)
            }
            _ => {}
        }
    }
}

/// `shoal_requests_by_family_total`'s counters, by [`Protocol`] (in declaration order) and
/// family (IPv4, IPv6).
static BY_FAMILY: [[FixedCounter; 2]; 3] = {
    const NAME: &str = "shoal_requests_by_family_total";
    [
        [
            FixedCounter::new(NAME, &[("protocol", "udp"), ("family", "ipv4")]),
            FixedCounter::new(NAME, &[("protocol", "udp"), ("family", "ipv6")]),
        ],
        [
            FixedCounter::new(NAME, &[("protocol", "http"), ("family", "ipv4")]),
            FixedCounter::new(NAME, &[("protocol", "http"), ("family", "ipv6")]),
        ],
        [
            FixedCounter::new(NAME, &[("protocol", "ws"), ("family", "ipv4")]),
            FixedCounter::new(NAME, &[("protocol", "ws"), ("family", "ipv6")]),
        ],
    ]
};

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Announce,
    Scrape,
}

/// What an announce reports about the client's transfer (BEP 3's `uploaded`, `downloaded`,
/// `left` and `event`), for the rules that account for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    /// Bytes uploaded since the client started the torrent.
    pub uploaded: u64,
    /// Bytes downloaded since the client started the torrent.
    pub downloaded: u64,
    /// Bytes left to download (a leecher has some). `None` for WebTorrent announces that do
    /// not say (no metadata yet).
    pub left: Option<u64>,
    pub event: AnnounceEvent,
    /// The store's coarse clock when the front end took the request (`shoal_swarm::clock`):
    /// each front end reads it once per batch or message already, and a rule that needs it
    /// (the private ledger) would otherwise read the clock again per announce (34 ns of a
    /// private UDP announce in the profile).
    pub now: u32,
}

/// What a rule sees of a request, as the front end parsed it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub protocol: Protocol,
    pub action: Action,
    /// The client's address (after the HTTP proxy rules; never one the client claims).
    pub source: IpAddr,
    pub info_hash: &'a InfoHash,
    /// Announces only.
    pub peer_id: Option<&'a PeerId>,
    /// The passkey the client presented, if any, from the one path parser every protocol
    /// uses (`shoal_proto::path`): HTTP's `/announce/<passkey>` or `/<passkey>/announce`
    /// (and the same for `/scrape`); UDP announces' BEP 41 URL data with those paths (UDP
    /// scrapes carry none); the WebSocket upgrade path of a WebTorrent connection, for
    /// every announce and scrape on it.
    pub credential: Option<&'a str>,
    /// Announces only: what the client reports.
    pub counters: Option<Counters>,
}

impl Request<'_> {
    /// The bytes the client has left (announces that say so only).
    pub fn left(&self) -> Option<u64> {
        self.counters.and_then(|c| c.left)
    }
}

/// What becomes of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Served: on to the store.
    Admit,
    /// Served, from the swarm of this info hash rather than the one announced: a hybrid
    /// torrent's v2 hash joins its v1 swarm (private mode; answers still name the hash the
    /// client asked about).
    AdmitAs(InfoHash),
    /// Answered with this reason (sent to the client) instead of being served.
    Refuse(&'static str),
    /// Not answered at all.
    Drop,
    /// The source is over its rate limit (`policy/rate_limit.rs`): no UDP reply (never a
    /// reflection amplifier), an HTTP 429 with a bencoded failure reason (the connection
    /// closed after repeats), a closed WebSocket.
    Limited,
    /// The source is in the block list (`policy/block_list.rs`): no UDP reply, the HTTP
    /// connection or WebSocket closed without an answer.
    Blocked,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_counters_are_where_count_family_looks() {
        for p in [Protocol::Udp, Protocol::Http, Protocol::Ws] {
            for (i, family) in ["ipv4", "ipv6"].into_iter().enumerate() {
                let want = [("protocol", p.label()), ("family", family)];
                assert_eq!(BY_FAMILY[p as usize][i].labels(), want);
            }
        }
    }
}
