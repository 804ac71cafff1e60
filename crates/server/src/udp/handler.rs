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
//!
//! Abuse controls: a connect asks [`Policy::unproven_source`] (the block list, and whether
//! its source has rate-limit tokens left, spending none: its address is not proven yet)
//! before it is answered, and announces and scrapes ask the whole policy; a source over its limit or
//! blocked gets no reply at all, so the tracker is never a reflection amplifier. IPv4-mapped
//! IPv6 sources (a dual-stack socket) are IPv4 clients from the first line on: their
//! connection ids, limits, peer lists and counters are those of the IPv4 address. An IPv6
//! reply never carries more than [`V6_MAX_PEERS`] peers, so that it fits the 1,232 bytes
//! of payload an IPv6 datagram can carry without fragmentation on any path.
//!
//! A flood is one source sending thousands of datagrams a second, so a batch from
//! `recvmmsg` is mostly the same source. Once the source rules have refused a source in a
//! batch (over its limit, or blocked), its other datagrams in that batch are dropped on
//! their address alone: no parse, no connection-id MAC, no clock read, no bucket (see
//! [`Handler::start_batch`]). A batch lasts microseconds, far less than the interval in
//! which a bucket gains a token, so the answer could not have changed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use shoal_proto::udp::{
    url_data_path, AnnounceHeader, AnnounceRequest, ConnectionId, Request, RequestParseError,
    Response, ScrapeRequest, ScrapeStats, TransactionId, ANNOUNCE_REQUEST_LEN, URL_PATH_BUFFER,
};
use shoal_proto::{CompactPeerV4, CompactPeerV6};
use shoal_swarm::{Family, PeerSink};
use shoal_tracker::{Action, Answer, Core, PeerAnnounce, Protocol, ScrapeOf, Stop, Verdict};

use super::connection_id::{ConnectionIds, IdCheck};
use super::counters::LocalCounters;

/// Most peers in an IPv6 announce reply: 1,232 bytes of payload (the IPv6 minimum MTU of
/// 1,280 less the IPv6 and UDP headers) less the 20-byte header, 18 bytes a peer.
pub const V6_MAX_PEERS: usize = (1232 - 20) / 18;

/// Settings a handler needs, copied out of the config.
#[derive(Clone, Debug, Default)]
pub struct HandlerConfig {
    pub interval: u32,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
}

/// One worker's request handler.
pub struct Handler {
    core: Arc<Core>,
    ids: ConnectionIds,
    config: HandlerConfig,
    peers_v4: Vec<CompactPeerV4>,
    peers_v6: Vec<CompactPeerV6>,
    scrape: Vec<ScrapeStats>,
    /// The source the source rules last refused in this batch, and their verdict
    /// (`Limited` or `Blocked`).
    refused_source: Option<(IpAddr, Verdict)>,
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
    pub fn new(core: Arc<Core>, ids: ConnectionIds, config: HandlerConfig) -> Self {
        let max = core.swarms().config().max_numwant;
        let scrape = config.max_scrape_hashes;
        Self {
            core,
            ids,
            config,
            peers_v4: Vec::with_capacity(max),
            peers_v6: Vec::with_capacity(max),
            scrape: Vec::with_capacity(scrape),
            refused_source: None,
            counters: LocalCounters::default(),
        }
    }

    /// Begins a batch of datagrams received together: the source refused in the last
    /// batch is asked about again.
    #[inline]
    pub fn start_batch(&mut self) {
        self.refused_source = None;
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
        if ip.is_ipv4() {
            self.counters.ipv4 += 1;
        } else {
            self.counters.ipv6 += 1;
        }
        if let Some((refused, verdict)) = self.refused_source {
            if refused == ip {
                self.refused(ip, verdict);
                return None;
            }
        }
        let mut action = None;
        let len = match Request::parse(packet) {
            Ok(Request::Connect(r)) => {
                if self.refused(ip, self.core.policy().unproven_source(ip)) {
                    return None;
                }
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
                action = Some(Action::Announce);
                // `parse` checked the announce's length; its BEP 41 options follow it.
                let options = packet.get(ANNOUNCE_REQUEST_LEN..).unwrap_or_default();
                self.announce(&r, options, ip, now, out)
            }
            Ok(Request::Scrape(r)) => {
                if !self.proven(r.connection_id, ip, now) {
                    return None;
                }
                self.counters.scrape += 1;
                action = Some(Action::Scrape);
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
                    Some(Action::Announce) => self.counters.announce_errors += 1,
                    Some(Action::Scrape) => self.counters.scrape_errors += 1,
                    None => {}
                }
            }
        }
        len
    }

    /// Whether `id` is one we issued to `ip` and still valid (counting those that are not,
    /// and of them those that were only too old).
    #[inline]
    fn proven(&mut self, id: ConnectionId, ip: IpAddr, now: Now) -> bool {
        match self.ids.judge(id, ip, now.unix) {
            IdCheck::Valid => true,
            IdCheck::Expired => {
                self.counters.bad_connection_id += 1;
                self.counters.expired_connection_id += 1;
                false
            }
            IdCheck::Forged => {
                self.counters.bad_connection_id += 1;
                false
            }
        }
    }

    /// Whether `verdict` on `source` is one of the source rules' (over the limit,
    /// blocked): counted, remembered for the rest of the batch, and never answered.
    #[inline]
    fn refused(&mut self, source: IpAddr, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Limited => self.counters.rate_limited += 1,
            Verdict::Blocked => self.counters.blocked += 1,
            _ => return false,
        }
        self.refused_source = Some((source, verdict));
        true
    }

    /// The reply for a request the core did not serve: an error datagram, or none.
    #[inline]
    fn stopped(
        &mut self,
        stop: Stop,
        source: IpAddr,
        tid: TransactionId,
        out: &mut [u8],
    ) -> Option<usize> {
        match stop {
            Stop::Refuse(reason) => error(tid, reason, out),
            Stop::Drop | Stop::Limited | Stop::Blocked => {
                self.refused(source, stop.verdict());
                None
            }
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
        let numwant = self.core.swarms().numwant(Some(i64::from(r.numwant)));
        let claimed = Ipv4Addr::from(r.ip);
        let peer_ip = if self.config.allow_ip_field && !claimed.is_unspecified() {
            IpAddr::V4(claimed)
        } else {
            ip
        };
        let a = announce_of(r, ip, credential, numwant, now);
        let (stats, is_v4) = match peer_ip {
            IpAddr::V4(v4) => {
                let a = a.at(CompactPeerV4::new(v4, r.port));
                (announce_in(&self.core, &a, &mut self.peers_v4), true)
            }
            IpAddr::V6(v6) => {
                let numwant = a.numwant.min(V6_MAX_PEERS);
                let a = PeerAnnounce { numwant, ..a }.at(CompactPeerV6::new(v6, r.port));
                (announce_in(&self.core, &a, &mut self.peers_v6), false)
            }
        };
        let answer = match stats {
            Ok(answer) => answer,
            Err(stop) => return self.stopped(stop, ip, r.transaction_id, out),
        };
        // BEP 15 has no room for a warning: a UDP client gets the figures and the peers.
        let header = AnnounceHeader {
            transaction_id: r.transaction_id,
            interval: answer.interval.unwrap_or(self.config.interval),
            leechers: answer.stats.leechers,
            seeders: answer.stats.seeders,
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
            let scraped = self.core.scrape(&ScrapeOf {
                protocol: Protocol::Udp,
                source: ip,
                // Scrape datagrams carry no BEP 41 URL data (see the module docs).
                credential: None,
                info_hash,
            });
            let st = match scraped {
                Ok(st) => st,
                Err(stop) => return self.stopped(stop, ip, r.transaction_id, out),
            };
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

/// The core's announce for `r` from `source` (listed at an address of either family with
/// [`PeerAnnounce::at`]).
fn announce_of<'a>(
    r: &AnnounceRequest,
    source: IpAddr,
    credential: Option<&'a str>,
    numwant: usize,
    now: Now,
) -> PeerAnnounce<'a, ()> {
    PeerAnnounce {
        protocol: Protocol::Udp,
        source,
        credential,
        // BEP 15 carries no user agent.
        agent: None,
        info_hash: r.info_hash,
        peer_id: r.peer_id,
        addr: (),
        uploaded: r.uploaded,
        downloaded: r.downloaded,
        left: Some(r.left),
        event: r.event,
        numwant,
        now: now.store,
    }
}

/// Runs announce `a` through the core, the chosen peers into `peers`.
#[inline]
fn announce_in<A: Family>(
    core: &Core,
    a: &PeerAnnounce<'_, A>,
    peers: &mut Vec<A>,
) -> Result<Answer, Stop>
where
    Vec<A>: PeerSink<A>,
{
    peers.clear();
    core.announce(a, peers)
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
    use shoal_proto::udp::{
        write_url_data_option, ACTION_ANNOUNCE, ACTION_CONNECT, ACTION_SCRAPE, PROTOCOL_ID,
    };
    use shoal_tracker::policy::seen::{self, Seen};
    use shoal_tracker::policy::{self, Policy};

    fn handler() -> Handler {
        handler_with(Policy::default())
    }

    fn handler_with(policy: Policy) -> Handler {
        let core = crate::open_core(&crate::Config::default(), policy);
        let config = HandlerConfig {
            max_scrape_hashes: 10,
            ..HandlerConfig::default()
        };
        let ids = ConnectionIds::new([7; 16], 120);
        Handler::new(core, ids, config)
    }

    const SRC: &str = "127.0.0.1:6881";
    const NOW: Now = Now {
        store: 1,
        unix: 1000,
    };

    /// Sends `packet` from `src` and returns the reply (`None`: no reply).
    fn reply_to(h: &mut Handler, src: &str, packet: &[u8]) -> Option<Vec<u8>> {
        let mut out = [0u8; 4096];
        let n = h.handle(packet, src.parse().unwrap(), NOW, &mut out)?;
        Some(out[..n].to_vec())
    }

    /// Sends `packet` and returns the reply's action (`None`: no reply).
    fn send(h: &mut Handler, packet: &[u8]) -> Option<u32> {
        let out = reply_to(h, SRC, packet)?;
        Some(u32::from_be_bytes(out[..4].try_into().unwrap()))
    }

    /// A connection id for `src`, as a client gets it.
    fn connect_from(h: &mut Handler, src: &str) -> ConnectionId {
        let p = datagram(ConnectionId(PROTOCOL_ID), ACTION_CONNECT, 16, &[]);
        let out = reply_to(h, src, &p).expect("a connect reply");
        assert_eq!(out.len(), 16);
        ConnectionId(u64::from_be_bytes(out[8..16].try_into().unwrap()))
    }

    /// A connection id for `SRC`.
    fn connect(h: &mut Handler) -> ConnectionId {
        connect_from(h, SRC)
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
    fn sources_over_the_limit_or_blocked_get_no_reply_and_are_counted() {
        let policy = Policy::default().guarded(1, 3);
        let mut h = handler_with(policy);
        // Three announces use the burst of three; the connect cost nothing.
        let cid = connect(&mut h);
        for _ in 0..3 {
            assert_eq!(send(&mut h, &announce(cid, 1, None)), Some(ACTION_ANNOUNCE));
        }
        assert_eq!(send(&mut h, &announce(cid, 1, None)), None);
        let p = datagram(ConnectionId(PROTOCOL_ID), ACTION_CONNECT, 16, &[]);
        assert_eq!(send(&mut h, &p), None, "no connect answered without tokens");
        assert_eq!(reply_to(&mut h, "10.0.0.1:1", &p), None, "blocked");
        assert_eq!(reply_to(&mut h, "[::ffff:10.0.0.1]:1", &p), None, "blocked");
        let c = h.counters;
        assert_eq!(
            (c.rate_limited, c.blocked, c.connect, c.announce),
            (2, 2, 1, 4)
        );
        assert_eq!((c.ipv4, c.ipv6), (8, 0), "mapped addresses are IPv4");
    }

    #[test]
    fn a_refused_source_is_dropped_unread_for_the_rest_of_its_batch() {
        let mut h = handler_with(Policy::default().guarded(1, 1));
        let cid = connect(&mut h);
        h.start_batch();
        assert_eq!(send(&mut h, &announce(cid, 1, None)), Some(ACTION_ANNOUNCE));
        assert_eq!(
            send(&mut h, &announce(cid, 1, None)),
            None,
            "over the limit"
        );
        // The rest of the batch from that source is not read: a datagram that would parse
        // as nothing counts as over the limit, not as malformed, and the policy is not
        // asked again.
        seen::take();
        assert_eq!(send(&mut h, b"garbage"), None);
        assert_eq!(send(&mut h, &announce(cid, 1, None)), None);
        assert!(seen::take().is_empty(), "the policy was not asked");
        let c = h.counters;
        assert_eq!((c.rate_limited, c.dropped, c.announce), (3, 0, 2));
        // Another source in the same batch is asked as usual.
        let other = "127.0.0.2:1";
        let cid2 = h.ids.issue("127.0.0.2".parse().unwrap(), NOW.unix);
        reply_to(&mut h, other, &announce(cid2, 1, None));
        assert_eq!(seen::take().len(), 1, "the policy was asked");
        // The next batch reads it again.
        h.start_batch();
        assert_eq!(send(&mut h, b"garbage"), None);
        assert_eq!((h.counters.rate_limited, h.counters.dropped), (3, 1));
    }

    #[test]
    fn ids_refused_only_for_age_are_counted_apart() {
        let mut h = handler();
        let cid = connect(&mut h);
        let late = Now {
            store: 1,
            unix: 1000 + 121,
        };
        let mut out = [0u8; 256];
        let src = SRC.parse().unwrap();
        assert_eq!(h.handle(&announce(cid, 1, None), src, late, &mut out), None);
        assert_eq!(send(&mut h, &announce(ConnectionId(5), 1, None)), None);
        let c = h.counters;
        assert_eq!((c.bad_connection_id, c.expired_connection_id), (2, 1));
    }

    /// An announce of `numwant` peers for torrent 9, from port `port` (and a peer id made
    /// of it).
    fn announce_for(cid: ConnectionId, port: u16, numwant: i32) -> Vec<u8> {
        let fields: [(usize, &[u8]); 4] = [
            (16, &[9u8; 20]),
            (36, &[port.to_be_bytes(); 10].concat()),
            (92, &numwant.to_be_bytes()),
            (96, &port.to_be_bytes()),
        ];
        let mut p = datagram(cid, ACTION_ANNOUNCE, ANNOUNCE_REQUEST_LEN, &fields);
        p[64..72].copy_from_slice(&1u64.to_be_bytes());
        p
    }

    #[test]
    fn ipv6_replies_fit_1232_bytes_and_mapped_sources_join_ipv4_swarms() {
        let mut h = handler();
        for i in 0..150u16 {
            let src = format!("[2001:db8::{:x}]:6881", i + 1);
            let cid = connect_from(&mut h, &src);
            reply_to(&mut h, &src, &announce_for(cid, 10_000 + i, 0)).unwrap();
        }
        let src = "[2001:db8::ffff]:6881";
        let cid = connect_from(&mut h, src);
        for (numwant, peers) in [(-1, 50), (60, 60), (200, V6_MAX_PEERS), (i32::MAX, 67)] {
            let out = reply_to(&mut h, src, &announce_for(cid, 6881, numwant)).unwrap();
            assert_eq!(out.len(), 20 + peers * 18, "numwant {numwant}");
            assert!(out.len() <= 1232);
        }
        // A mapped source is an IPv4 peer: an IPv4 client gets it in its compact peers.
        let mapped = "[::ffff:127.0.0.9]:7000";
        let cid = connect_from(&mut h, mapped);
        reply_to(&mut h, mapped, &announce_for(cid, 7000, 0)).unwrap();
        let cid = connect(&mut h);
        let out = reply_to(&mut h, SRC, &announce_for(cid, 6881, 50)).unwrap();
        assert_eq!(&out[20..], &[127, 0, 0, 9, 0x1b, 0x58], "one IPv4 peer");
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
