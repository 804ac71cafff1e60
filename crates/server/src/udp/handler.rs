//! Answers one BEP 15 datagram: parse, check the connection id, ask the store, write the
//! reply into the caller's buffer.
//!
//! It holds no socket, so tests drive it with bytes. Each worker owns one handler and its
//! scratch buffers (peers chosen, scrape figures), reused for every request: answering
//! allocates nothing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use shoal_proto::udp::{
    AnnounceHeader, AnnounceRequest, Request, RequestParseError, Response, ScrapeRequest,
    ScrapeStats, TransactionId,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6};
use shoal_swarm::{Announce, Refusal, Store};

use super::connection_id::ConnectionIds;
use super::counters::LocalCounters;

/// Settings a handler needs, copied out of the config.
#[derive(Clone, Debug)]
pub struct HandlerConfig {
    pub interval: u32,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
}

/// Which kind of request an error reply answered (for the counters).
#[derive(Clone, Copy)]
enum Action {
    Announce,
    Scrape,
}

/// One worker's request handler.
pub struct Handler {
    store: Arc<Store>,
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
            unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as u32),
        }
    }
}

impl Handler {
    pub fn new(store: Arc<Store>, ids: ConnectionIds, config: HandlerConfig) -> Self {
        let max = store.config().max_numwant;
        let scrape = config.max_scrape_hashes;
        Self {
            store,
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
                if !self.ids.check(r.connection_id, ip, now.unix) {
                    self.counters.bad_connection_id += 1;
                    return None;
                }
                self.counters.announce += 1;
                action = Some(Action::Announce);
                self.announce(&r, ip, src.port(), now, out)
            }
            Ok(Request::Scrape(r)) => {
                if !self.ids.check(r.connection_id, ip, now.unix) {
                    self.counters.bad_connection_id += 1;
                    return None;
                }
                self.counters.scrape += 1;
                action = Some(Action::Scrape);
                self.scrape(&r, out)
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
                if !self.ids.check(connection_id, ip, now.unix) {
                    self.counters.bad_connection_id += 1;
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
                    Some(Action::Announce) => self.counters.announce_errors += 1,
                    Some(Action::Scrape) => self.counters.scrape_errors += 1,
                    None => {}
                }
            }
        }
        len
    }

    fn announce(
        &mut self,
        r: &AnnounceRequest,
        ip: IpAddr,
        _src_port: u16,
        now: Now,
        out: &mut [u8],
    ) -> Option<usize> {
        if r.port == 0 {
            return error(r.transaction_id, "invalid port 0", out);
        }
        let numwant = self.store.numwant(Some(i64::from(r.numwant)));
        let claimed = Ipv4Addr::from(r.ip);
        let ip = if self.config.allow_ip_field && !claimed.is_unspecified() {
            IpAddr::V4(claimed)
        } else {
            ip
        };
        let result = match ip {
            IpAddr::V4(v4) => {
                self.peers_v4.clear();
                let req = Announce {
                    info_hash: r.info_hash,
                    peer_id: r.peer_id,
                    addr: CompactPeerV4::new(v4, r.port),
                    event: r.event,
                    left: r.left,
                    numwant,
                    credential: None,
                };
                self.store
                    .announce_v4(&req, now.store, &mut self.peers_v4)
                    .map(|st| (st, true))
            }
            IpAddr::V6(v6) => {
                self.peers_v6.clear();
                let req = Announce {
                    info_hash: r.info_hash,
                    peer_id: r.peer_id,
                    addr: CompactPeerV6::new(v6, r.port),
                    event: r.event,
                    left: r.left,
                    numwant,
                    credential: None,
                };
                self.store
                    .announce_v6(&req, now.store, &mut self.peers_v6)
                    .map(|st| (st, false))
            }
        };
        match result {
            Ok((stats, is_v4)) => {
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
            Err(refusal) => refused(r.transaction_id, refusal, out),
        }
    }

    fn scrape(&mut self, r: &ScrapeRequest, out: &mut [u8]) -> Option<usize> {
        if r.info_hashes.len() > self.config.max_scrape_hashes {
            return error(r.transaction_id, "too many info hashes in scrape", out);
        }
        self.scrape.clear();
        for info_hash in r.info_hashes {
            match self.store.scrape(info_hash) {
                Ok(st) => self
                    .scrape
                    .push(ScrapeStats::new(st.seeders, st.completed, st.leechers)),
                Err(refusal) => return refused(r.transaction_id, refusal, out),
            }
        }
        Response::Scrape {
            transaction_id: r.transaction_id,
            stats: &self.scrape,
        }
        .write(out)
    }
}

fn error(transaction_id: TransactionId, message: &str, out: &mut [u8]) -> Option<usize> {
    Response::Error {
        transaction_id,
        message: message.as_bytes(),
    }
    .write(out)
}

fn refused(transaction_id: TransactionId, refusal: Refusal, out: &mut [u8]) -> Option<usize> {
    match refusal {
        Refusal::NotAllowed => error(transaction_id, "torrent not allowed", out),
    }
}
