//! Answers one BEP 15 datagram: parse, check the connection id, ask the policy, ask the
//! store, write the reply into the caller's buffer.
//!
//! It holds no socket, so tests drive it with bytes. Each worker owns one handler and its
//! scratch buffers (peers chosen, scrape figures), reused for every request: answering
//! allocates nothing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use shoal_proto::udp::{
    AnnounceHeader, AnnounceRequest, ConnectionId, Request, RequestParseError, Response,
    ScrapeRequest, ScrapeStats, TransactionId,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use shoal_swarm::{Announce, Family, PeerSink, Store, TorrentStats};

use super::connection_id::ConnectionIds;
use super::counters::LocalCounters;
use crate::policy::{self, Policy, Protocol, Verdict};

/// Settings a handler needs, copied out of the config.
#[derive(Clone, Debug)]
pub struct HandlerConfig {
    pub interval: u32,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
}

/// One worker's request handler.
pub struct Handler {
    store: Arc<Store>,
    policy: Arc<Policy>,
    ids: ConnectionIds,
    config: HandlerConfig,
    peers_v4: Vec<CompactPeerV4>,
    peers_v6: Vec<CompactPeerV6>,
    scrape: Vec<ScrapeStats>,
    pub counters: LocalCounters,
}

/// The current time as the handler needs it.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// Store clock (seconds since start), for expiry.
    pub store: u32,
    /// Unix seconds, for connection ids (which must survive a restart).
    pub unix: u32,
}

impl Now {
    pub fn read() -> Self {
        Self {
            store: shoal_swarm::clock::now(),
            unix: shoal_swarm::clock::unix_now() as u32,
        }
    }
}

impl Handler {
    pub fn new(
        store: Arc<Store>,
        policy: Arc<Policy>,
        ids: ConnectionIds,
        config: HandlerConfig,
    ) -> Self {
        let max = store.config().max_numwant;
        let scrape = config.max_scrape_hashes;
        Self {
            store,
            policy,
            ids,
            config,
            peers_v4: Vec::with_capacity(max),
            peers_v6: Vec::with_capacity(max),
            scrape: Vec::with_capacity(scrape),
            counters: LocalCounters::default(),
        }
    }

    /// Handles one datagram from `src`; returns the length of the reply written into
    /// `out`, or `None` when the datagram gets no reply.
    pub fn handle(
        &mut self,
        packet: &[u8],
        src: SocketAddr,
        now: Now,
        out: &mut [u8],
    ) -> Option<usize> {
        self.counters.bytes_in += packet.len() as u64;
        let ip = src.ip().to_canonical();
        let mut action = None;
        let len = match Request::parse(packet) {
            Ok(Request::Connect(r)) => {
                self.counters.connect += 1;
                Response::Connect {
                    transaction_id: r.transaction_id,
                    connection_id: self.ids.issue(ip, now.unix),
                }
                .write(out)
            }
            Ok(Request::Announce(r)) => {
                if !self.proven(r.connection_id, ip, now) {
                    return None;
                }
                self.counters.announce += 1;
                action = Some(policy::Action::Announce);
                self.announce(&r, ip, now, out)
            }
            Ok(Request::Scrape(r)) => {
                if !self.proven(r.connection_id, ip, now) {
                    return None;
                }
                self.counters.scrape += 1;
                action = Some(policy::Action::Scrape);
                self.scrape(&r, ip, out)
            }
            Err(RequestParseError::Unanswerable) => {
                self.counters.dropped += 1;
                return None;
            }
            Err(RequestParseError::Answerable {
                connection_id,
                transaction_id,
                message,
            }) => {
                // Only a client that proved its address gets an answer: no reflection.
                if !self.proven(connection_id, ip, now) {
                    return None;
                }
                error(transaction_id, message, out)
            }
        };
        if let Some(n) = len {
            self.counters.bytes_out += n as u64;
            if out[..4] == shoal_proto::udp::ACTION_ERROR.to_be_bytes() {
                self.counters.errors += 1;
                match action {
                    Some(policy::Action::Announce) => self.counters.announce_errors += 1,
                    Some(policy::Action::Scrape) => self.counters.scrape_errors += 1,
                    None => {}
                }
            }
        }
        len
    }

    /// Whether `id` is one we issued to `ip` and still valid (counting those that are not).
    #[inline]
    fn proven(&mut self, id: ConnectionId, ip: IpAddr, now: Now) -> bool {
        let ok = self.ids.check(id, ip, now.unix);
        if !ok {
            self.counters.bad_connection_id += 1;
        }
        ok
    }

    /// The policy's verdict on one request from `source`: `Ok` to serve it, or the reply
    /// to give instead (an error datagram, or none).
    #[inline]
    fn admitted(
        &self,
        action: policy::Action,
        source: IpAddr,
        info_hash: &InfoHash,
        peer_id: Option<&PeerId>,
        transaction_id: TransactionId,
        out: &mut [u8],
    ) -> Result<(), Option<usize>> {
        match self.policy.check(&policy::Request {
            protocol: Protocol::Udp,
            action,
            source,
            info_hash,
            peer_id,
            credential: None,
        }) {
            Verdict::Admit => Ok(()),
            Verdict::Refuse(reason) => Err(error(transaction_id, reason, out)),
            Verdict::Drop => Err(None),
        }
    }

    fn announce(
        &mut self,
        r: &AnnounceRequest,
        ip: IpAddr,
        now: Now,
        out: &mut [u8],
    ) -> Option<usize> {
        if r.port == 0 {
            return error(r.transaction_id, "invalid port 0", out);
        }
        let action = policy::Action::Announce;
        let peer_id = Some(&r.peer_id);
        if let Err(reply) = self.admitted(action, ip, &r.info_hash, peer_id, r.transaction_id, out)
        {
            return reply;
        }
        let numwant = self.store.numwant(Some(i64::from(r.numwant)));
        let claimed = Ipv4Addr::from(r.ip);
        let ip = if self.config.allow_ip_field && !claimed.is_unspecified() {
            IpAddr::V4(claimed)
        } else {
            ip
        };
        let (store, now) = (&*self.store, now.store);
        let (stats, is_v4) = match ip {
            IpAddr::V4(v4) => {
                let addr = CompactPeerV4::new(v4, r.port);
                (
                    announce_in(store, r, addr, numwant, now, &mut self.peers_v4),
                    true,
                )
            }
            IpAddr::V6(v6) => {
                let addr = CompactPeerV6::new(v6, r.port);
                (
                    announce_in(store, r, addr, numwant, now, &mut self.peers_v6),
                    false,
                )
            }
        };
        let header = AnnounceHeader {
            transaction_id: r.transaction_id,
            interval: self.config.interval,
            leechers: stats.leechers,
            seeders: stats.seeders,
        };
        if is_v4 {
            Response::AnnounceV4 {
                header,
                peers: &self.peers_v4,
            }
            .write(out)
        } else {
            Response::AnnounceV6 {
                header,
                peers: &self.peers_v6,
            }
            .write(out)
        }
    }

    fn scrape(&mut self, r: &ScrapeRequest, ip: IpAddr, out: &mut [u8]) -> Option<usize> {
        if r.info_hashes.len() > self.config.max_scrape_hashes {
            return error(r.transaction_id, "too many info hashes in scrape", out);
        }
        self.scrape.clear();
        for info_hash in r.info_hashes {
            let action = policy::Action::Scrape;
            if let Err(reply) = self.admitted(action, ip, info_hash, None, r.transaction_id, out) {
                return reply;
            }
            let st = self.store.scrape(info_hash);
            self.scrape
                .push(ScrapeStats::new(st.seeders, st.completed, st.leechers));
        }
        Response::Scrape {
            transaction_id: r.transaction_id,
            stats: &self.scrape,
        }
        .write(out)
    }
}

/// Records an announce of `r` from `addr` (either family), the chosen peers into `peers`.
#[inline]
fn announce_in<A: Family>(
    store: &Store,
    r: &AnnounceRequest,
    addr: A,
    numwant: usize,
    now: u32,
    peers: &mut Vec<A>,
) -> TorrentStats
where
    Vec<A>: PeerSink<A>,
{
    peers.clear();
    let req = Announce {
        info_hash: r.info_hash,
        peer_id: r.peer_id,
        addr,
        event: r.event,
        left: r.left,
        numwant,
        credential: None,
    };
    store.announce(&req, now, peers)
}

fn error(transaction_id: TransactionId, message: &str, out: &mut [u8]) -> Option<usize> {
    Response::Error {
        transaction_id,
        message: message.as_bytes(),
    }
    .write(out)
}
