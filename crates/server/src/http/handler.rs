//! Answers one parsed HTTP request head: announce, scrape, full scrape, WebSocket upgrade,
//! or an HTTP-level error.
//!
//! It does no I/O: the connection loop gives it the head `httparse` produced and gets back
//! the response bytes in a buffer plus what to do next (keep the connection, close it,
//! send the shared full-scrape document after the head, or hand the connection to the
//! WebSocket front end). That keeps every tracker rule testable without sockets and keeps
//! the connection loop about bytes and timeouts only.
//!
//! Every announce and scrape (each of its info hashes) asks the policy before the store,
//! with the passkey of its path (`/announce/<passkey>` or `/<passkey>/announce`, read by
//! the path parser every protocol shares) as the credential. A path whose passkey segment
//! is no passkey gets a bencoded `failure reason` saying what a passkey may be.
//! Tracker errors (bad parameters, torrents the policy refuses, proxy header problems) are
//! a bencoded `failure reason` with status 200, which is what clients read; only requests
//! that are not tracker requests at all get HTTP error statuses. A request the policy
//! drops gets no response: the connection is closed.
//!
//! Abuse controls: a source over its rate limit gets `429 Too Many Requests` with a
//! bencoded `failure reason` (clients show it), and after [`LIMITED_BEFORE_CLOSE`] of them
//! on one connection the 429 closes it. A blocked source gets no response at all: the
//! connection is closed, with no status that would confirm a tracker is there.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use shoal_proto::bencode::{write_failure, write_scrape, AnnounceResponse, Peers, ScrapeFile};
use shoal_proto::common::Action;
use shoal_proto::http::{parse_scrape, parse_target, AnnounceRequest, RequestError, Target};
use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use shoal_swarm::{Family, PeerSink};
use shoal_tracker::fixed_counter::FixedCounter;
use shoal_tracker::{policy, Answer, Core, PeerAnnounce, Protocol, ScrapeOf, Stop, Verdict};

use super::context::HttpContext;
use super::full_scrape::Document;
use super::head::write_head;
use super::site_call::SiteCall;
use crate::ws::UpgradeRequest;
use shoal_opentracker::tally::HTTP as OT;

/// What the connection does after writing the response.
#[derive(Debug)]
pub enum Next {
    /// Read the next request.
    KeepAlive,
    /// Close the connection.
    Close,
    /// Write `doc` (gzip if `gzip`, else plain) after the head, then keep alive or close.
    SendDocument {
        doc: Arc<Document>,
        gzip: bool,
        close: bool,
    },
    /// Hand the connection to the WebSocket front end (nothing was written).
    Upgrade(UpgradeRequest),
    /// A site's control call: read its body, answer it (nothing was written).
    SiteCall(SiteCall),
}

/// 429s answered on one connection before the next one closes it: a client that keeps
/// asking after being told to slow down costs us a connection no longer.
pub const LIMITED_BEFORE_CLOSE: u32 = 3;

/// One connection's request handler and its reusable scratch space.
pub struct Handler {
    ctx: Arc<HttpContext>,
    /// Requests over the rate limit on this connection so far.
    limited: u32,
    body: Vec<u8>,
    v4: PeerLists<CompactPeerV4>,
    v6: PeerLists<CompactPeerV6>,
    hashes: Vec<InfoHash>,
    files: Vec<(InfoHash, ScrapeFile)>,
}

/// The headers the handler looks at, found in one pass.
#[derive(Default)]
struct HeaderFacts<'a> {
    close: bool,
    keep_alive: bool,
    upgrade_websocket: bool,
    ws_key: Option<&'a [u8]>,
    accepts_gzip: bool,
    has_body: bool,
    user_agent: Option<&'a str>,
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Whether an `Accept-Encoding` value allows gzip (`gzip` or `*`, without `q=0`).
fn accepts_gzip(value: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|item| {
        let mut parts = item.split(|&b| b == b';');
        let coding = parts.next().unwrap_or_default().trim_ascii();
        if !(coding.eq_ignore_ascii_case(b"gzip") || coding == b"*") {
            return false;
        }
        for p in parts {
            let p = p.trim_ascii();
            if let Some(q) = p.strip_prefix(b"q=").or_else(|| p.strip_prefix(b"Q=")) {
                let q: f32 = std::str::from_utf8(q)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0);
                return q > 0.0;
            }
        }
        true
    })
}

fn facts<'a>(headers: &'a [httparse::Header<'a>]) -> HeaderFacts<'a> {
    let mut f = HeaderFacts::default();
    for h in headers {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"connection") {
            f.close |= has_token(h.value, "close");
            f.keep_alive |= has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            f.upgrade_websocket |= has_token(h.value, "websocket");
        } else if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            f.ws_key = Some(h.value);
        } else if name.eq_ignore_ascii_case(b"accept-encoding") {
            f.accepts_gzip |= accepts_gzip(h.value);
        } else if name.eq_ignore_ascii_case(b"user-agent") {
            f.user_agent = std::str::from_utf8(h.value).ok();
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            f.has_body = true;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            f.has_body |= h.value.trim_ascii() != b"0";
        }
    }
    f
}

/// Appends a complete HTTP error response that closes the connection.
pub fn write_http_error(out: &mut Vec<u8>, status: &str, message: &str) {
    write_head(out, status, message.len(), true, "");
    out.extend_from_slice(message.as_bytes());
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    /// Answered with what was asked for.
    Served,
    /// Answered with a failure reason.
    Failed,
    /// Not answered: the policy dropped it (the connection is closed).
    Dropped,
    /// Over the source's rate limit: 429 with a failure reason.
    Limited,
}

/// The core's announce for `req` from `source` (listed at an address of either family with
/// [`PeerAnnounce::at`]).
fn announce_of<'a>(
    req: &AnnounceRequest<'a>,
    agent: Option<&'a str>,
    source: IpAddr,
    numwant: usize,
    now: u32,
) -> PeerAnnounce<'a, ()> {
    PeerAnnounce {
        protocol: Protocol::Http,
        source,
        credential: req.path_key,
        agent,
        info_hash: req.info_hash,
        peer_id: req.peer_id,
        addr: (),
        uploaded: req.uploaded,
        downloaded: req.downloaded,
        left: Some(req.left),
        event: req.event,
        numwant,
        now,
    }
}

/// One address family's reusable peer lists: compact, or with peer ids for the
/// dictionary form (`compact=0`).
struct PeerLists<A> {
    compact: Vec<A>,
    dict: Vec<(A, PeerId)>,
}

impl<A> Default for PeerLists<A> {
    fn default() -> Self {
        Self {
            compact: Vec::new(),
            dict: Vec::new(),
        }
    }
}

/// An address family as an HTTP response lists its peers.
trait Listed: Family + Sized {
    fn compact(peers: &[Self]) -> Peers<'_>;
    fn dict(peers: &[(Self, PeerId)], with_ids: bool) -> Peers<'_>;
}

macro_rules! listed {
    ($a:ty, $compact:ident, $dict:ident) => {
        impl Listed for $a {
            fn compact(peers: &[Self]) -> Peers<'_> {
                Peers::$compact(peers)
            }
            fn dict(peers: &[(Self, PeerId)], with_ids: bool) -> Peers<'_> {
                Peers::$dict { peers, with_ids }
            }
        }
    };
}
listed!(CompactPeerV4, CompactV4, DictV4);
listed!(CompactPeerV6, CompactV6, DictV6);

/// Runs `a` (either family) through the core and lists the peers chosen for it, compact
/// or as dictionaries.
#[inline]
fn announce_in<'b, A: Listed>(
    core: &Core,
    a: &PeerAnnounce<'_, A>,
    lists: &'b mut PeerLists<A>,
    (compact, with_ids): (bool, bool),
) -> Result<(Answer, Peers<'b>), Stop>
where
    Vec<A>: PeerSink<A>,
    Vec<(A, PeerId)>: PeerSink<A>,
{
    if compact {
        lists.compact.clear();
        let st = core.announce(a, &mut lists.compact)?;
        Ok((st, A::compact(&lists.compact)))
    } else {
        lists.dict.clear();
        let st = core.announce(a, &mut lists.dict)?;
        Ok((st, A::dict(&lists.dict, with_ids)))
    }
}

/// `shoal_requests_total` of HTTP requests, through registered handles (see
/// `FixedCounter`): by action (announce, scrape) and result (ok, error).
static REQUESTS: [[FixedCounter; 2]; 2] = {
    const NAME: &str = "shoal_requests_total";
    [
        [
            FixedCounter::new(
                NAME,
                &[
                    ("protocol", "http"),
                    ("action", "announce"),
                    ("result", "ok"),
                ],
            ),
            FixedCounter::new(
                NAME,
                &[
                    ("protocol", "http"),
                    ("action", "announce"),
                    ("result", "error"),
                ],
            ),
        ],
        [
            FixedCounter::new(
                NAME,
                &[("protocol", "http"), ("action", "scrape"), ("result", "ok")],
            ),
            FixedCounter::new(
                NAME,
                &[
                    ("protocol", "http"),
                    ("action", "scrape"),
                    ("result", "error"),
                ],
            ),
        ],
    ]
};

fn count(action: Action, ok: bool) {
    let row = match action {
        Action::Announce => 0,
        Action::Scrape => 1,
    };
    REQUESTS[row][usize::from(!ok)].increment(1);
}

impl Handler {
    pub fn new(ctx: Arc<HttpContext>) -> Self {
        Self {
            ctx,
            limited: 0,
            body: Vec::new(),
            v4: PeerLists::default(),
            v6: PeerLists::default(),
            hashes: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Starts over for a new connection (the accept loop's fast path reuses one handler).
    pub fn new_connection(&mut self) {
        self.limited = 0;
    }

    /// Answers one request head from `remote`, appending the response to `out`.
    /// `leftover` is what the client sent past the head (handed on with an upgrade).
    pub fn handle(
        &mut self,
        req: &httparse::Request<'_, '_>,
        remote: SocketAddr,
        leftover: &[u8],
        out: &mut Vec<u8>,
    ) -> Next {
        let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
            write_http_error(out, "400 Bad Request", "incomplete request line");
            return Next::Close;
        };
        let f = facts(req.headers);
        if let Some(api) = &self.ctx.site_api {
            let close = !self.ctx.settings.keep_alive || f.close || (version == 0 && !f.keep_alive);
            if let Some(call) = SiteCall::of(api, method, path, req.headers, close) {
                return Next::SiteCall(call);
            }
        }
        if method != "GET" {
            write_http_error(out, "405 Method Not Allowed", "only GET is served here");
            return Next::Close;
        }
        if f.has_body {
            write_http_error(out, "400 Bad Request", "request bodies are not accepted");
            return Next::Close;
        }
        let client_ip = self.ctx.proxy.client_ip(remote.ip(), req.headers);
        Protocol::Http.count_family(*client_ip.as_ref().unwrap_or(&remote.ip()));
        if f.upgrade_websocket {
            let (Some(key), Ok(ip)) = (f.ws_key, &client_ip) else {
                write_http_error(
                    out,
                    "400 Bad Request",
                    "bad WebSocket upgrade (no Sec-WebSocket-Key, or bad proxy header)",
                );
                return Next::Close;
            };
            return Next::Upgrade(UpgradeRequest {
                path: path.to_owned(),
                sec_websocket_key: String::from_utf8_lossy(key).into_owned(),
                remote: SocketAddr::new(*ip, remote.port()),
                leftover: leftover.to_vec(),
            });
        }
        let close = !self.ctx.settings.keep_alive || f.close || (version == 0 && !f.keep_alive);
        if let Some(ot) = &self.ctx.opentracker {
            let ip = *client_ip.as_ref().unwrap_or(&remote.ip());
            if ot.answer(&self.ctx.core, path, ip, close, out) {
                return if close { Next::Close } else { Next::KeepAlive };
            }
        }

        self.body.clear();
        let (action, reply) = match parse_target(path.as_bytes()) {
            Ok(Target::Announce { key, query }) => {
                let reply = match &client_ip {
                    Ok(ip) => self.announce(query, key, f.user_agent, *ip),
                    Err(e) => {
                        write_failure(&mut self.body, e.to_string().as_bytes());
                        Reply::Failed
                    }
                };
                (Action::Announce, reply)
            }
            Ok(Target::Scrape { key, query }) => {
                match parse_scrape(query, self.ctx.settings.max_scrape_hashes, &mut self.hashes) {
                    Ok(()) if self.hashes.is_empty() => {
                        // A document for no client in particular: only the source rules.
                        let ip = client_ip.unwrap_or(remote.ip());
                        match self.ctx.core.policy().source(ip) {
                            Verdict::Admit => return self.full_scrape(f.accepts_gzip, close, out),
                            verdict => (Action::Scrape, self.stopped(verdict)),
                        }
                    }
                    // A bad proxy header does not stop a scrape (it never did): the policy
                    // then sees the connection's own address.
                    Ok(()) => (
                        Action::Scrape,
                        self.scrape(key, client_ip.unwrap_or(remote.ip())),
                    ),
                    Err(e) => {
                        self.failure(e);
                        (Action::Scrape, Reply::Failed)
                    }
                }
            }
            // A tracker path with a key that is no passkey: the client hears why.
            Err(e @ RequestError::MalformedPasskey(action)) => {
                self.failure(e);
                (action, Reply::Failed)
            }
            Err(_) => {
                OT.error(shoal_opentracker::stats::http_error::NOT_FOUND);
                write_head(out, "404 Not Found", 10, close, "");
                out.extend_from_slice(b"not found\n");
                return if close { Next::Close } else { Next::KeepAlive };
            }
        };
        count(action, reply == Reply::Served);
        if reply == Reply::Served {
            OT.answered(action == Action::Announce);
        }
        let (status, close) = match reply {
            Reply::Dropped => return Next::Close,
            Reply::Limited => {
                self.limited += 1;
                let close = close || self.limited > LIMITED_BEFORE_CLOSE;
                ("429 Too Many Requests", close)
            }
            Reply::Served | Reply::Failed => ("200 OK", close),
        };
        write_head(out, status, self.body.len(), close, "");
        out.extend_from_slice(&self.body);
        if close {
            Next::Close
        } else {
            Next::KeepAlive
        }
    }

    fn failure(&mut self, e: RequestError) {
        self.body.clear();
        let mut msg = [0u8; 128];
        let mut cursor = std::io::Cursor::new(&mut msg[..]);
        let _ = write!(cursor, "{e}");
        let n = cursor.position() as usize;
        write_failure(&mut self.body, &msg[..n]);
    }

    /// How a request the core did not serve ends: a refusal's reason is written into the
    /// body as a bencoded failure; the rest as [`Handler::stopped`] says.
    #[inline]
    fn not_served(&mut self, stop: Stop) -> Reply {
        match stop {
            Stop::Refuse(reason) => {
                self.body.clear();
                write_failure(&mut self.body, reason.as_bytes());
                Reply::Failed
            }
            stop => self.stopped(stop.verdict()),
        }
    }

    /// How a request the policy did not serve or refuse ends: dropped, blocked (both
    /// closed without a response) or over the rate limit (429, its reason in the body).
    fn stopped(&mut self, verdict: Verdict) -> Reply {
        Protocol::Http.count_stopped(verdict);
        if verdict == Verdict::Limited {
            self.body.clear();
            write_failure(&mut self.body, policy::RATE_LIMITED.as_bytes());
            Reply::Limited
        } else {
            Reply::Dropped
        }
    }

    /// Writes an announce response (or failure) into `self.body`.
    fn announce(
        &mut self,
        query: &[u8],
        path_key: Option<&str>,
        agent: Option<&str>,
        client_ip: IpAddr,
    ) -> Reply {
        let req = match AnnounceRequest::parse(query, path_key) {
            Ok(r) => r,
            Err(e) => {
                self.failure(e);
                return Reply::Failed;
            }
        };
        let now = shoal_swarm::clock::now();
        let s = &self.ctx;
        let ip = match req.ip {
            Some(claimed) if s.settings.allow_ip_field => claimed,
            _ => client_ip,
        }
        .to_canonical();
        let numwant = s.core.swarms().numwant(req.numwant);
        // A store that keeps no peer id answers as if asked `no_peer_id=1`.
        let with_ids = !req.no_peer_id && s.core.swarms().keeps_peer_ids();
        let (core, form) = (&*s.core, (req.compact, with_ids));
        let a = announce_of(&req, agent, client_ip, numwant, now);
        let served = match ip {
            IpAddr::V4(v4) => {
                let a = a.at(CompactPeerV4::new(v4, req.port));
                announce_in(core, &a, &mut self.v4, form)
            }
            IpAddr::V6(v6) => {
                let a = a.at(CompactPeerV6::new(v6, req.port));
                announce_in(core, &a, &mut self.v6, form)
            }
        };
        let (answer, peers) = match served {
            Ok(served) => served,
            Err(stop) => return self.not_served(stop),
        };
        let st = answer.stats;
        self.body.clear();
        AnnounceResponse {
            interval: answer.interval.unwrap_or(s.settings.interval),
            min_interval: s.settings.min_interval,
            complete: st.seeders,
            incomplete: st.leechers,
            downloaded: st.completed,
            peers,
            warning: answer.warning,
        }
        .write(&mut self.body);
        Reply::Served
    }

    /// Writes a scrape response (or failure) for `self.hashes` into `self.body`.
    fn scrape(&mut self, credential: Option<&str>, client_ip: IpAddr) -> Reply {
        self.files.clear();
        for i in 0..self.hashes.len() {
            let h = self.hashes[i];
            let scraped = self.ctx.core.scrape(&ScrapeOf {
                protocol: Protocol::Http,
                source: client_ip,
                credential,
                info_hash: &h,
            });
            let st = match scraped {
                Ok(st) => st,
                Err(stop) => return self.not_served(stop),
            };
            self.files.push((
                h,
                ScrapeFile {
                    complete: st.seeders,
                    downloaded: st.completed,
                    incomplete: st.leechers,
                },
            ));
        }
        write_scrape(&mut self.body, &mut self.files);
        Reply::Served
    }

    fn full_scrape(&mut self, accepts_gzip: bool, close: bool, out: &mut Vec<u8>) -> Next {
        let Some(fs) = &self.ctx.full_scrape else {
            write_failure(
                &mut self.body,
                b"full scrape is disabled: name an info_hash",
            );
            count(Action::Scrape, false);
            write_head(out, "200 OK", self.body.len(), close, "");
            out.extend_from_slice(&self.body);
            return if close { Next::Close } else { Next::KeepAlive };
        };
        let doc = fs.current();
        let gzip = accepts_gzip && doc.gzip;
        let len = doc.sent_len(gzip);
        let extra = if gzip {
            "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
        } else {
            "Vary: Accept-Encoding\r\n"
        };
        write_head(out, "200 OK", len, close, extra);
        count(Action::Scrape, true);
        OT.full_scrape(len);
        Next::SendDocument { doc, gzip, close }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_tracker::policy::seen::{self, Seen};
    use shoal_tracker::policy::RATE_LIMITED;

    #[test]
    fn the_request_counters_are_where_count_looks() {
        for (row, action) in ["announce", "scrape"].into_iter().enumerate() {
            for (col, result) in ["ok", "error"].into_iter().enumerate() {
                let want = [("protocol", "http"), ("action", action), ("result", result)];
                assert_eq!(REQUESTS[row][col].labels(), want);
            }
        }
    }

    #[test]
    fn gzip_acceptance_follows_q_values() {
        assert!(accepts_gzip(b"gzip"));
        assert!(accepts_gzip(b"deflate, GZIP;q=0.5"));
        assert!(accepts_gzip(b"*"));
        assert!(!accepts_gzip(b"gzip;q=0"));
        assert!(!accepts_gzip(b"deflate, br"));
        assert!(!accepts_gzip(b"gzipx"));
    }

    fn ctx() -> Arc<HttpContext> {
        ctx_with(shoal_tracker::policy::Policy::default())
    }

    fn ctx_with(policy: shoal_tracker::policy::Policy) -> Arc<HttpContext> {
        let config = crate::Config::default();
        let core = crate::open_core(&config, policy);
        Arc::new(HttpContext {
            core: core.clone(),
            settings: super::super::HttpSettings::from_config(&config),
            proxy: shoal_proto::forwarded::ProxyRules::new("", 1, Vec::new()),
            proxy_protocol: None,
            full_scrape: None,
            ws: Arc::new(crate::ws::WsContext::new(&config, core)),
            open: Default::default(),
            opentracker: None,
            site_api: None,
        })
    }

    fn handle(raw: &[u8], leftover: &[u8]) -> (Next, Vec<u8>) {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(raw).unwrap().is_complete());
        let mut out = Vec::new();
        let remote: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        let next = Handler::new(ctx()).handle(&req, remote, leftover, &mut out);
        (next, out)
    }

    #[test]
    fn websocket_upgrades_on_any_path_are_handed_over_with_the_leftover() {
        let (next, out) = handle(
            b"GET /any/path?x=1 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            b"\x81\x05hello",
        );
        assert!(out.is_empty(), "nothing may be written before the handover");
        let Next::Upgrade(u) = next else {
            panic!("{next:?}")
        };
        assert_eq!(u.path, "/any/path?x=1");
        assert_eq!(u.sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(u.remote, "127.0.0.1:5555".parse().unwrap());
        assert_eq!(u.leftover, b"\x81\x05hello");
        let (next, out) = handle(b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", b"");
        assert!(matches!(next, Next::Close));
        assert!(out.starts_with(b"HTTP/1.1 400"));
    }

    const IH: &str = "%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01%01";

    /// Answers `GET <target>` and returns the response.
    fn get(target: &str) -> String {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        String::from_utf8_lossy(&handle(raw.as_bytes(), b"").1).into_owned()
    }

    fn seen(action: policy::Action, credential: Option<&str>, left: Option<u64>) -> Seen {
        Seen {
            protocol: Protocol::Http,
            action,
            credential: credential.map(String::from),
            left,
        }
    }

    #[test]
    fn passkeys_of_every_path_form_reach_the_policy() {
        let query = format!("info_hash={IH}&peer_id=-qB4520-abcdefghijkl&port=1&left=77");
        let announce = policy::Action::Announce;
        seen::take();
        for (path, credential) in [
            ("/announce", None),
            ("/announce/", None),
            ("/announce/0123abcd", Some("0123abcd")),
            ("/0123abcd/announce", Some("0123abcd")),
            ("/0123abcd/announce/", Some("0123abcd")),
        ] {
            let reply = get(&format!("{path}?{query}"));
            assert!(reply.contains("8:intervali"), "{path}: {reply}");
            assert_eq!(
                seen::take(),
                vec![seen(announce, credential, Some(77))],
                "{path}"
            );
        }
        let scrape = policy::Action::Scrape;
        for (path, credential) in [("/scrape", None), ("/k/scrape", Some("k"))] {
            let reply = get(&format!(
                "{path}?info_hash={IH}&info_hash={}",
                "b".repeat(20)
            ));
            assert!(reply.contains("5:files"), "{path}: {reply}");
            let once = seen(scrape, credential, None);
            assert_eq!(seen::take(), vec![once.clone(), once], "{path}");
        }
    }

    #[test]
    fn malformed_passkeys_get_a_failure_reason_and_unknown_paths_a_404() {
        let reply = get(&format!("/announce/a!b?info_hash={IH}"));
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("failure reason") && reply.contains("malformed passkey"));
        let reply = get(&format!("/{}/scrape", "k".repeat(65)));
        assert!(reply.contains("malformed passkey"), "{reply}");
        assert!(get("/a/b/announce").starts_with("HTTP/1.1 404"));
        assert!(seen::take().is_empty(), "nothing reached the policy");
    }

    #[test]
    fn over_the_limit_is_429_then_a_close_and_blocked_is_a_silent_close() {
        let policy = shoal_tracker::policy::Policy::default().guarded(1, 1);
        let mut h = Handler::new(ctx_with(policy));
        let raw = format!(
            "GET /announce?info_hash={IH}&peer_id=-qB4520-abcdefghijkl&port=1&left=7 \
             HTTP/1.1\r\n\r\n"
        );
        let ask = |h: &mut Handler, from: &str| {
            let mut headers = [httparse::EMPTY_HEADER; 4];
            let mut req = httparse::Request::new(&mut headers);
            req.parse(raw.as_bytes()).unwrap();
            let mut out = Vec::new();
            let next = h.handle(&req, from.parse().unwrap(), b"", &mut out);
            (next, String::from_utf8_lossy(&out).into_owned())
        };
        let (next, out) = ask(&mut h, "127.0.0.1:1");
        assert!(out.starts_with("HTTP/1.1 200") && matches!(next, Next::KeepAlive));
        for _ in 0..LIMITED_BEFORE_CLOSE {
            let (next, out) = ask(&mut h, "127.0.0.1:1");
            assert!(out.starts_with("HTTP/1.1 429 Too Many Requests"), "{out}");
            assert!(
                out.contains("14:failure reason") && out.contains(RATE_LIMITED),
                "{out}"
            );
            assert!(matches!(next, Next::KeepAlive), "{next:?}");
        }
        let (next, out) = ask(&mut h, "127.0.0.1:1");
        assert!(out.starts_with("HTTP/1.1 429") && out.contains("Connection: close"));
        assert!(matches!(next, Next::Close));
        let (next, out) = ask(&mut h, "10.1.1.1:1");
        assert!(
            out.is_empty() && matches!(next, Next::Close),
            "blocked: {out}"
        );
        h.new_connection();
        let (next, _) = ask(&mut h, "127.0.0.1:1");
        assert!(
            matches!(next, Next::KeepAlive),
            "a new connection starts over"
        );
    }

    #[test]
    fn a_mapped_ipv4_client_is_an_ipv4_peer() {
        let ctx = ctx();
        let raw = format!(
            "GET /announce?info_hash={IH}&peer_id=-qB4520-abcdefghijkl&port=7&left=1 \
             HTTP/1.1\r\n\r\n"
        );
        let mut headers = [httparse::EMPTY_HEADER; 4];
        let mut req = httparse::Request::new(&mut headers);
        req.parse(raw.as_bytes()).unwrap();
        let remote = "[::ffff:127.0.0.9]:5555".parse().unwrap();
        Handler::new(ctx.clone()).handle(&req, remote, b"", &mut Vec::new());
        let peers = ctx
            .core
            .swarms()
            .torrent_peers(&InfoHash([1; 20]))
            .map(|t| {
                let v4: Vec<_> = t.v4.iter().map(|p| p.addr.addr()).collect();
                (v4, t.v6.len())
            });
        assert_eq!(peers, Some((vec!["127.0.0.9:7".parse().unwrap()], 0)));
    }

    #[test]
    fn connection_tokens_are_found_in_lists() {
        assert!(has_token(b"keep-alive, Upgrade", "upgrade"));
        assert!(!has_token(b"closed", "close"));
    }
}
