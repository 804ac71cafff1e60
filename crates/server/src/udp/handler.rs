//! Answers one BEP 15 datagram: parse, check the connection id, ask the policy, ask the
//! store, write the reply into the caller's buffer.
//!
//! It holds no socket, so tests drive it with bytes. Each worker owns one handler and its
//! scratch buffers (peers chosen, scrape figures), reused for every request: answering
//! allocates nothing.
//!
//! Passkeys (BEP 41): an announce's URL data (`udp://host:port/<passkey>/announce` sends
//! `/<passkey>/announce`) is read by the path parser every protocol shares
//! (`shoal_proto::udp::url_data_path`), into a small buffer on the stack, and its passkey
//! goes to the policy as the credential. URL data that is no tracker path gives no
//! credential and the announce is served as before: BEP 41 options are advisory, and in
//! open mode nothing depends on them. Scrape datagrams carry no options in practice (BEP 41
//! defines them after an announce only), so a UDP scrape has no credential.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use shoal_proto::udp::{
    url_data_path, AnnounceHeader, AnnounceRequest, ConnectionId, Request, RequestParseError,
    Response, ScrapeRequest, ScrapeStats, TransactionId, ANNOUNCE_REQUEST_LEN, URL_PATH_BUFFER,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash};
use shoal_swarm::{Announce, Family, PeerSink, Store, TorrentStats};

use super::connection_id::ConnectionIds;
use super::counters::LocalCounters;
use crate::policy::{self, Policy, Protocol, Verdict};

/// Settings a handler needs, copied out of the config.
#[derive(Clone, Debug, Default)]
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
                // `parse` checked the announce's length; its BEP 41 options follow it.
                let options = packet.get(ANNOUNCE_REQUEST_LEN..).unwrap_or_default();
                self.announce(&r, options, ip, now, out)
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

    /// The policy's verdict on `req`: `Ok` to serve it, or the reply to give instead (an
    /// error datagram, or none).
    #[inline]
    fn admitted(
        &self,
        req: &policy::Request<'_>,
        transaction_id: TransactionId,
        out: &mut [u8],
    ) -> Result<InfoHash, Option<usize>> {
        match self.policy.check(req) {
            Verdict::Admit => Ok(*req.info_hash),
            Verdict::AdmitAs(swarm) => Ok(swarm),
            Verdict::Refuse(reason) => Err(error(transaction_id, reason, out)),
            Verdict::Drop => Err(None),
        }
    }

    /// Answers announce `r`, whose BEP 41 options are `options`.
    fn announce(
        &mut self,
        r: &AnnounceRequest,
        options: &[u8],
        ip: IpAddr,
        now: Now,
        out: &mut [u8],
    ) -> Option<usize> {
        if r.port == 0 {
            return error(r.transaction_id, "invalid port 0", out);
        }
        let mut url = [0u8; URL_PATH_BUFFER];
        let credential = match url_data_path(options, &mut url) {
            Some(Ok(path)) => path.passkey,
            // No URL data, or URL data that is no tracker path: advisory, so served.
            None | Some(Err(_)) => None,
        };
        let req = policy::Request {
            protocol: Protocol::Udp,
            action: policy::Action::Announce,
            source: ip,
            info_hash: &r.info_hash,
            peer_id: Some(&r.peer_id),
            credential,
            counters: Some(policy::Counters {
                uploaded: r.uploaded,
                downloaded: r.downloaded,
                left: Some(r.left),
                event: r.event,
            }),
        };
        let swarm = match self.admitted(&req, r.transaction_id, out) {
            Ok(swarm) => swarm,
            Err(reply) => return reply,
        };
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
                let a = announce_of(r, swarm, CompactPeerV4::new(v4, r.port), numwant);
                (announce_in(store, &a, now, &mut self.peers_v4), true)
            }
            IpAddr::V6(v6) => {
                let a = announce_of(r, swarm, CompactPeerV6::new(v6, r.port), numwant);
                (announce_in(store, &a, now, &mut self.peers_v6), false)
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
            let req = policy::Request {
                protocol: Protocol::Udp,
                action: policy::Action::Scrape,
                source: ip,
                info_hash,
                peer_id: None,
                // Scrape datagrams carry no BEP 41 URL data (see the module docs).
                credential: None,
                counters: None,
            };
            let swarm = match self.admitted(&req, r.transaction_id, out) {
                Ok(swarm) => swarm,
                Err(reply) => return reply,
            };
            let st = self.store.scrape(&swarm);
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

/// The store's announce for `r` into `swarm`, from `addr` (either family).
fn announce_of<A>(r: &AnnounceRequest, swarm: InfoHash, addr: A, numwant: usize) -> Announce<A> {
    Announce {
        info_hash: swarm,
        peer_id: r.peer_id,
        addr,
        event: r.event,
        left: r.left,
        numwant,
    }
}

/// Records announce `a`, the chosen peers into `peers`.
#[inline]
fn announce_in<A: Family>(
    store: &Store,
    a: &Announce<A>,
    now: u32,
    peers: &mut Vec<A>,
) -> TorrentStats
where
    Vec<A>: PeerSink<A>,
{
    peers.clear();
    store.announce(a, now, peers)
}

fn error(transaction_id: TransactionId, message: &str, out: &mut [u8]) -> Option<usize> {
    Response::Error {
        transaction_id,
        message: message.as_bytes(),
    }
    .write(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::seen::{self, Seen};
    use shoal_proto::udp::{
        write_url_data_option, ACTION_ANNOUNCE, ACTION_CONNECT, ACTION_SCRAPE, PROTOCOL_ID,
    };

    fn handler() -> Handler {
        let store = Arc::new(Store::new(crate::Config::default().store_config()));
        let config = HandlerConfig {
            max_scrape_hashes: 10,
            ..HandlerConfig::default()
        };
        let ids = ConnectionIds::new([7; 16], 120);
        Handler::new(store, Arc::new(Policy::default()), ids, config)
    }

    const SRC: &str = "127.0.0.1:6881";

    /// Sends `packet` and returns the reply's action (`None`: no reply).
    fn send(h: &mut Handler, packet: &[u8]) -> Option<u32> {
        let mut out = [0u8; 2048];
        h.handle(
            packet,
            SRC.parse().unwrap(),
            Now {
                store: 1,
                unix: 1000,
            },
            &mut out,
        )?;
        Some(u32::from_be_bytes(out[..4].try_into().unwrap()))
    }

    /// A connection id for `SRC`, as a client gets it.
    fn connect(h: &mut Handler) -> ConnectionId {
        let p = datagram(ConnectionId(PROTOCOL_ID), ACTION_CONNECT, 16, &[]);
        let mut out = [0u8; 64];
        let n = h.handle(
            &p,
            SRC.parse().unwrap(),
            Now {
                store: 1,
                unix: 1000,
            },
            &mut out,
        );
        assert_eq!(n, Some(16));
        ConnectionId(u64::from_be_bytes(out[8..16].try_into().unwrap()))
    }

    /// A request datagram at BEP 15's offsets: `len` bytes, the connection id and the
    /// action, then `fields` (offset, bytes) over zeros.
    fn datagram(cid: ConnectionId, action: u32, len: usize, fields: &[(usize, &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[..8].copy_from_slice(&cid.0.to_be_bytes());
        p[8..12].copy_from_slice(&action.to_be_bytes());
        for (at, bytes) in fields {
            p[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        p
    }

    /// An announce (port 6881) of `left` bytes to go, with `url_data` as BEP 41 options.
    fn announce(cid: ConnectionId, left: u64, url_data: Option<&[u8]>) -> Vec<u8> {
        let (left, port) = (left.to_be_bytes(), 6881u16.to_be_bytes());
        let fields: [(usize, &[u8]); 2] = [(64, &left), (96, &port)];
        let mut p = datagram(cid, ACTION_ANNOUNCE, ANNOUNCE_REQUEST_LEN, &fields);
        if let Some(data) = url_data {
            write_url_data_option(data, &mut p);
        }
        p
    }

    fn seen_announce(credential: Option<&str>, left: u64) -> Vec<Seen> {
        vec![Seen {
            protocol: Protocol::Udp,
            action: policy::Action::Announce,
            credential: credential.map(String::from),
            left: Some(left),
        }]
    }

    #[test]
    fn bep41_passkeys_reach_the_policy_and_other_url_data_is_still_served() {
        let mut h = handler();
        let cid = connect(&mut h);
        seen::take();
        let served = Some(ACTION_ANNOUNCE);
        for (url_data, credential) in [
            (Some(&b"/0123abcd/announce"[..]), Some("0123abcd")),
            (Some(&b"/announce/0123abcd?key=9"[..]), Some("0123abcd")),
            (Some(&b"/announce"[..]), None),
            (None, None),
            // Not a tracker path, or a malformed passkey: no credential, still served.
            (Some(&b"/dir/x/y"[..]), None),
            (Some(&b"/announce/bad!key"[..]), None),
        ] {
            assert_eq!(send(&mut h, &announce(cid, 500, url_data)), served);
            assert_eq!(seen::take(), seen_announce(credential, 500), "{url_data:?}");
        }
        // A seeder's left reaches the policy as it is.
        send(&mut h, &announce(cid, 0, Some(&b"/k/announce"[..])));
        assert_eq!(seen::take(), seen_announce(Some("k"), 0));
    }

    #[test]
    fn udp_scrapes_have_no_credential_and_unproven_clients_reach_no_policy() {
        let mut h = handler();
        let cid = connect(&mut h);
        // Two info hashes.
        let p = datagram(cid, ACTION_SCRAPE, 16 + 40, &[(16, &[1u8; 40][..])]);
        seen::take();
        assert_eq!(send(&mut h, &p), Some(ACTION_SCRAPE));
        let scrape = Seen {
            protocol: Protocol::Udp,
            action: policy::Action::Scrape,
            credential: None,
            left: None,
        };
        assert_eq!(seen::take(), vec![scrape.clone(), scrape]);
        // A wrong connection id never gets as far as the policy.
        assert_eq!(
            send(
                &mut h,
                &announce(ConnectionId(1), 5, Some(&b"/k/announce"[..]))
            ),
            None
        );
        assert!(seen::take().is_empty());
    }
}
