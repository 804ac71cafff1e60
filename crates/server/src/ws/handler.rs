//! What one WebTorrent message does: the protocol's logic, with no I/O of its own.
//!
//! The connection task passes each text message here with its own state; replies for the
//! sender come back as JSON text, and offers and answers for other peers go straight to
//! their connections through the registry. Keeping this synchronous (no `.await`) means a
//! message is handled start to finish under at most one shard lock at a time, and the
//! logic can be read without the connection's timing concerns.
//!
//! Announces and scrapes ask the policy first, with the connection's client address as
//! the source and the passkey of its upgrade path as the credential (both fixed for the
//! connection's life): a refused announce gets a `failure reason`, a refused hash is left
//! out of a scrape, and a dropped request gets no reply. A source over its rate limit, or
//! blocked, has its connection closed ([`Verdict::Limited`], [`Verdict::Blocked`]).

use shoal_proto::ws::{
    self, AnnounceResponse, FailureContext, Notice, OfferId, Relayed, Request, RequestError,
    ScrapeResponse, ScrapeStats, Sdp,
};
use std::net::IpAddr;

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::webtorrent::{is_remote, AnswerRefusal, ConnectionId, OfferIds, OfferTarget};
use shoal_swarm::TorrentStats;

use super::connection_peers::{ConnectionPeers, Pair};
use super::context::WsContext;
use super::failures;
use super::registry::Delivery;
use super::Text;
use shoal_cluster::ws_link::{Forwarded, Outgoing};
use shoal_cluster::WsLink;
use shoal_tracker::{policy, PeerAnnounce, Protocol, ScrapeOf, Stop};

/// A connection's own state, as the handler sees it.
pub struct ConnState {
    pub id: ConnectionId,
    /// The client's address (what the policy sees as the source).
    pub source: IpAddr,
    /// The passkey of the upgrade request's path, presented with every announce and
    /// scrape of the connection.
    pub credential: Option<Box<str>>,
    /// The (torrent, peer id) pairs this connection has announced, to be removed from
    /// the store when it closes (bounded: see [`ConnectionPeers`]).
    pub peers: ConnectionPeers,
    /// Bad messages so far.
    pub strikes: u32,
    /// A reused buffer: where the swarm puts an announce's offer targets.
    targets: Vec<OfferTarget>,
}

impl ConnState {
    pub fn new(id: ConnectionId, source: IpAddr, credential: Option<Box<str>>) -> Self {
        Self {
            id,
            source,
            credential,
            peers: ConnectionPeers::default(),
            strikes: 0,
            targets: Vec::new(),
        }
    }
}

/// What the connection should do after a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    /// Too many bad messages: send the replies, then close.
    Close,
    /// The source is over its rate limit: close.
    Limited,
    /// The source is in the block list: close.
    Blocked,
}

/// What the connection does after a policy verdict that stops the source, if it is one.
fn stopped(verdict: policy::Verdict) -> Option<Verdict> {
    Protocol::Ws.count_stopped(verdict);
    match verdict {
        policy::Verdict::Limited => Some(Verdict::Limited),
        policy::Verdict::Blocked => Some(Verdict::Blocked),
        _ => None,
    }
}

/// Counts a request whose action and result are literals (see [`FixedCounter`]).
///
/// [`FixedCounter`]: shoal_tracker::fixed_counter::FixedCounter
macro_rules! count {
    ($action:literal, $result:literal) => {
        shoal_tracker::fixed_counter!("shoal_requests_total",
            "protocol" => "ws", "action" => $action, "result" => $result)
        .increment(1)
    };
}

/// Counts a relayed offer or answer by what became of it.
macro_rules! relay {
    ($what:literal, $delivery:expr) => {{

        match $delivery {
            Delivery::Queued => {
                shoal_tracker::fixed_counter!("shoal_ws_relayed_total", "message" => $what, "result" => "ok")
            }
            Delivery::Gone => {
                shoal_tracker::fixed_counter!("shoal_ws_relayed_total", "message" => $what, "result" => "gone")
            }
            Delivery::Dropped => {
                shoal_tracker::fixed_counter!("shoal_ws_relayed_total", "message" => $what, "result" => "dropped")
            }
        }
        .increment(1)
    }};
}

/// Counts a request whose result is only known at run time.
fn count(action: &'static str, result: &'static str) {
    metrics::counter!("shoal_requests_total", "protocol" => "ws", "action" => action, "result" => result)
        .increment(1);
}

/// The failure context of an announce (or an answer, which belongs to one) of `info_hash`.
fn announcing(info_hash: InfoHash) -> FailureContext {
    FailureContext {
        action: Some(ws::Action::Announce),
        info_hash: Some(info_hash),
    }
}

/// One info hash of a scrape by `conn`'s client, through the core.
#[inline]
fn scraped(ctx: &WsContext, conn: &ConnState, info_hash: &InfoHash) -> Result<TorrentStats, Stop> {
    ctx.core.scrape_webrtc(&ScrapeOf {
        protocol: Protocol::Ws,
        source: conn.source,
        credential: conn.credential.as_deref(),
        info_hash,
    })
}

/// A `failure reason` of `text`, counted under `reason` (see [`failures`]).
fn failure(reason: &'static str, text: &str, context: FailureContext) -> Text {
    failures::count(reason);
    ws::to_json(&Notice {
        failure: true,
        text,
        context,
    })
    .into()
}

/// Handles one message from connection `conn` (a binary frame's bytes), pushing replies
/// for it onto `replies`.
pub fn handle(
    ctx: &WsContext,
    conn: &mut ConnState,
    message: &[u8],
    now: u32,
    replies: &mut Vec<Text>,
) -> Verdict {
    let parsed = ws::parse_request_within(message, || offers_to_read(ctx, conn, now));
    dispatch(ctx, conn, parsed, now, replies)
}

/// [`handle`] for a text frame, whose UTF-8 the WebSocket layer already checked (see
/// [`ws::parse_text`]).
pub fn handle_text(
    ctx: &WsContext,
    conn: &mut ConnState,
    message: &str,
    now: u32,
    replies: &mut Vec<Text>,
) -> Verdict {
    let parsed = ws::parse_text_within(message, || offers_to_read(ctx, conn, now));
    dispatch(ctx, conn, parsed, now, replies)
}

/// How many of an announce's offers are worth keeping: no more than the server relays
/// from one announce (`ws.max_offers`), nor than the connection has places for their
/// answers (`outbox`). Those past it are shed, skipped by the parser; those kept are read
/// only when the swarm finds them a target (see [`OffersRead`]).
fn offers_to_read(ctx: &WsContext, conn: &ConnState, now: u32) -> usize {
    ctx.registry
        .answer_room(conn.id, now)
        .min(ctx.settings.limits.max_offers)
}

/// What [`handle`] and [`handle_text`] share once the frame is parsed: the message counted
/// (by the connection's address family), then answered.
fn dispatch(
    ctx: &WsContext,
    conn: &mut ConnState,
    parsed: Result<Request<'_>, (RequestError, FailureContext)>,
    now: u32,
    replies: &mut Vec<Text>,
) -> Verdict {
    Protocol::Ws.count_family(conn.source);
    match parsed {
        Ok(Request::Announce(a)) => announce(ctx, conn, &a, now, replies),
        Ok(Request::Answer(a)) => {
            answer(ctx, conn, &a, now, replies);
            Verdict::Continue
        }
        Ok(Request::Scrape(s)) => scrape(ctx, conn, &s.info_hashes, replies),
        Err((err, context)) => misbehaved(ctx, conn, &err, context, replies),
    }
}

/// A bad message: a `failure reason`, and a strike.
pub fn misbehaved(
    ctx: &WsContext,
    conn: &mut ConnState,
    err: &RequestError,
    context: FailureContext,
    replies: &mut Vec<Text>,
) -> Verdict {
    count("invalid", err.kind());
    replies.push(failure(
        failures::of_request(err),
        &err.to_string(),
        context,
    ));
    conn.strikes += 1;
    if conn.strikes >= ctx.settings.limits.max_strikes.max(1) {
        Verdict::Close
    } else {
        Verdict::Continue
    }
}

fn announce(
    ctx: &WsContext,
    conn: &mut ConnState,
    a: &ws::Announce<'_>,
    now: u32,
    replies: &mut Vec<Text>,
) -> Verdict {
    let context = announcing(a.info_hash);
    let key = (a.info_hash, a.peer_id);
    // As many offers as the client sent, asked for, and the server allows; of those, the
    // ones read are all the connection has room for the answers of (the others are shed:
    // see `outbox` and `offers_to_read`).
    let wanted = a.offers_sent.min(ctx.settings.limits.max_offers).min(
        a.numwant
            .map_or(usize::MAX, |n| n.min(usize::MAX as u64) as usize),
    );
    let n = wanted.min(a.offers.len());
    if wanted > n {
        shoal_tracker::fixed_counter!("shoal_ws_relayed_total", "message" => "offer", "result" => "shed")
            .increment((wanted - n) as u64);
    }
    // Each offer is read when the swarm has a target for it (see `OffersRead`).
    let mut offers = OffersRead {
        unread: &a.offers[..n],
        read: Vec::new(),
        failed: None,
    };
    let announce = PeerAnnounce {
        protocol: Protocol::Ws,
        source: conn.source,
        credential: conn.credential.as_deref(),
        agent: None,
        info_hash: a.info_hash,
        peer_id: a.peer_id,
        addr: (),
        uploaded: a.uploaded,
        downloaded: a.downloaded,
        left: a.left,
        event: a.event,
        numwant: 0,
        now,
    };
    // Offers go only to peers that can take them now (a remote peer's node decides there).
    let passed_over = std::cell::Cell::new(false);
    let announced =
        ctx.core
            .announce_webrtc(&announce, conn.id, &mut offers, &mut conn.targets, |to| {
                let takes = is_remote(to) || ctx.registry.takes_offers(to);
                passed_over.set(passed_over.get() || !takes);
                takes
            });
    let (outcome, answer) = match announced {
        Ok(served) => served,
        Err(Stop::Refuse(reason)) => {
            count!("announce", "refused");
            replies.push(failure(failures::of_policy(reason), reason, context));
            return Verdict::Continue;
        }
        Err(stop) => {
            count!("announce", "dropped");
            return stopped(stop.verdict()).unwrap_or(Verdict::Continue);
        }
    };
    if outcome.left {
        conn.peers.remove(&key);
    } else if outcome.joined || conn.peers.contains(&key) {
        conn.peers.touch(key);
    }
    if conn.peers.len() > ctx.settings.limits.max_torrents_per_connection {
        // Room for the new torrent: the connection's least recently announced one leaves
        // its swarm (no error: see `connection_peers`).
        if let Some(oldest) = conn.peers.pop_oldest() {
            leave(ctx, conn.id, [oldest]);
            count!("announce", "evicted");
        }
    }
    if let Some(link) = &ctx.cluster {
        link.send(Outgoing::Peer {
            info_hash: a.info_hash,
            peer_id: a.peer_id,
            seeder: a.is_seeder(),
            stopped: a.event == AnnounceEvent::Stopped,
        });
    }
    // Each offer takes its answer's place before it goes (an answer can come back before
    // this loop ends); those not queued give it back.
    ctx.registry
        .offers_relayed(conn.id, conn.targets.len(), now);
    let mut not_queued = 0;
    for t in &conn.targets {
        let o = &offers.read[t.offer];
        let relayed = Relayed {
            info_hash: a.info_hash,
            peer_id: a.peer_id,
            offer_id: o.offer_id,
            sdp: Sdp::Offer(o.offer),
        }
        .to_json();
        let delivery = match &ctx.cluster {
            Some(link) if is_remote(t.conn) => {
                let ids = (&t.peer_id, &a.peer_id);
                forward(
                    link,
                    t.conn,
                    true,
                    &a.info_hash,
                    ids,
                    o.offer_id.as_bytes(),
                    relayed,
                )
            }
            _ => ctx.registry.deliver_offer(t.conn, relayed.into()),
        };
        relay!("offer", delivery);
        not_queued += usize::from(delivery != Delivery::Queued);
    }
    if not_queued > 0 {
        ctx.registry.offers_not_relayed(conn.id, not_queued, now);
    }
    count!("announce", "ok");
    if let Some(err) = offers.failed {
        // An offer that found a target but is not one: the announce was served, and the
        // offers before it went; the client is told, as for any bad message.
        return misbehaved(ctx, conn, &err, context, replies);
    }
    if conn.targets.is_empty() && (wanted > n || passed_over.get()) {
        // Overload: none of the announce's offers could go, for want of places for their
        // answers or of a peer with room in its queue. The reply is shed (see `outbox`).
        shoal_tracker::fixed_counter!("shoal_ws_replies_shed_total").increment(1);
        return Verdict::Continue;
    }
    replies.push(
        AnnounceResponse {
            info_hash: a.info_hash,
            complete: outcome.stats.seeders,
            incomplete: outcome.stats.leechers,
            interval: answer.interval.unwrap_or(ctx.settings.limits.interval),
        }
        .to_json()
        .into(),
    );
    Verdict::Continue
}

/// An announce's offers as the swarm asks for their ids, in order, as it finds targets:
/// each is read then, and kept for its relay. Under load most of an announce's offers
/// find no target; decoding all ten offer ids of a load-tester announce was about 1 µs of
/// its 3.73 µs parse (`cargo bench -p shoal-proto --bench ws_text`).
struct OffersRead<'a, 'b> {
    unread: &'b [ws::UnreadOffer<'a>],
    read: Vec<ws::Offer<'a>>,
    /// Why the offer asked for last is not one.
    failed: Option<RequestError>,
}

impl OfferIds for OffersRead<'_, '_> {
    fn count(&self) -> usize {
        self.unread.len()
    }

    fn id(&mut self, i: usize) -> Option<OfferId> {
        debug_assert_eq!(i, self.read.len(), "offers are asked for in order");
        match self.unread.get(i)?.read() {
            Ok(o) => {
                let id = o.offer_id;
                self.read.push(o);
                Some(id)
            }
            Err(e) => {
                self.failed = Some(e);
                None
            }
        }
    }
}

/// Takes `pairs` of connection `conn` out of their swarms, here and on the other nodes
/// (one evicted pair, or all of a closing connection's); how many were here.
/// Sends a relayed offer (`offer`) or answer to the node that holds connection `to`; the
/// cluster link queues it for that node.
fn forward(
    link: &WsLink,
    to: ConnectionId,
    offer: bool,
    info_hash: &InfoHash,
    ids: (&PeerId, &PeerId),
    offer_id: &[u8],
    relayed: String,
) -> Delivery {
    let message = Forwarded::new(offer, info_hash, ids, offer_id, link.node(), relayed);
    link.send(Outgoing::Forward { node: to, message });
    Delivery::Queued
}

pub fn leave(ctx: &WsContext, conn: ConnectionId, pairs: impl IntoIterator<Item = Pair>) -> usize {
    let mut removed = 0;
    for pair in pairs {
        if let Some(link) = &ctx.cluster {
            link.send(Outgoing::Peer {
                info_hash: pair.0,
                peer_id: pair.1,
                seeder: false,
                stopped: true,
            });
        }
        removed += ctx
            .core
            .webtorrent()
            .remove_connection(conn, std::iter::once(pair));
    }
    removed
}

fn answer(
    ctx: &WsContext,
    conn: &ConnState,
    a: &ws::Answer<'_>,
    now: u32,
    replies: &mut Vec<Text>,
) {
    let context = announcing(a.info_hash);
    match ctx.core.webtorrent().answer(
        &a.info_hash,
        &a.peer_id,
        conn.id,
        &a.to_peer_id,
        &a.offer_id,
        now,
    ) {
        Ok(to) => {
            let relayed = Relayed {
                info_hash: a.info_hash,
                peer_id: a.peer_id,
                offer_id: a.offer_id,
                sdp: Sdp::Answer(a.answer),
            }
            .to_json();
            let delivery = match &ctx.cluster {
                Some(link) if is_remote(to) => {
                    let ids = (&a.to_peer_id, &a.peer_id);
                    let offer_id = a.offer_id.as_bytes();
                    forward(link, to, false, &a.info_hash, ids, offer_id, relayed)
                }
                _ => ctx.registry.deliver(to, relayed.into(), now),
            };
            relay!("answer", delivery);
            match delivery {
                Delivery::Queued => count!("answer", "ok"),
                // The offerer is there but its queue is full: like a lost packet, the
                // answerer is not told (the offerer will offer again).
                Delivery::Dropped => count!("answer", "dropped"),
                Delivery::Gone => {
                    count!("answer", "refused");
                    let gone = AnswerRefusal::OffererGone;
                    replies.push(failure(
                        failures::of_answer(gone),
                        &gone.to_string(),
                        context,
                    ));
                }
            }
        }
        Err(refusal) => {
            count("answer", refusal.kind());
            replies.push(failure(
                failures::of_answer(refusal),
                &refusal.to_string(),
                context,
            ));
        }
    }
}

fn scrape(
    ctx: &WsContext,
    conn: &ConnState,
    info_hashes: &[InfoHash],
    replies: &mut Vec<Text>,
) -> Verdict {
    let context = FailureContext {
        action: Some(ws::Action::Scrape),
        info_hash: None,
    };
    let limit = ctx.settings.limits.max_scrape_hashes;
    if info_hashes.len() > limit {
        count!("scrape", "refused");
        replies.push(failure(
            "too_many_hashes",
            &format!("too many info hashes (at most {limit})"),
            context,
        ));
        return Verdict::Continue;
    }
    let mut files = Vec::with_capacity(info_hashes.len());
    if info_hashes.is_empty() {
        if !ctx.settings.limits.full_scrape {
            count!("scrape", "refused");
            replies.push(failure(
                "full_scrape_disabled",
                "full scrape is disabled",
                context,
            ));
            return Verdict::Continue;
        }
        // A document for no client in particular (private mode turns it off): the source
        // rules once, for one token, then the rules about each torrent alone.
        let policy = ctx.core.policy();
        if let Some(stop) = stopped(policy.source(conn.source)) {
            count!("scrape", "dropped");
            return stop;
        }
        ctx.core.webtorrent().scrape_all(limit, |ih, st| {
            if policy.lists(&ih) {
                files.push((ih, stats(st)));
            }
        });
    } else {
        for ih in info_hashes {
            // Torrents the policy refuses are left out, like unknown ones would not be:
            // the client learns nothing about them. A drop drops the whole message.
            match scraped(ctx, conn, ih) {
                Ok(st) => files.push((*ih, stats(st))),
                Err(Stop::Refuse(_)) => {}
                Err(stop) => {
                    count!("scrape", "dropped");
                    return stopped(stop.verdict()).unwrap_or(Verdict::Continue);
                }
            }
        }
    }
    count!("scrape", "ok");
    replies.push(
        ws::to_json(&ScrapeResponse {
            files,
            min_request_interval: Some(ctx.settings.limits.interval),
        })
        .into(),
    );
    Verdict::Continue
}

fn stats(st: shoal_swarm::TorrentStats) -> ScrapeStats {
    ScrapeStats {
        complete: st.seeders,
        incomplete: st.leechers,
        downloaded: st.completed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_tracker::policy::seen::{self, Seen};

    fn ctx() -> WsContext {
        let config = crate::Config::default();
        WsContext::new(
            &config,
            crate::open_core(&config, policy::Policy::default()),
        )
    }

    fn seen(action: policy::Action, credential: Option<&str>, left: Option<u64>) -> Seen {
        Seen {
            protocol: Protocol::Ws,
            action,
            credential: credential.map(String::from),
            left,
        }
    }

    /// Handles `message` on `conn` and returns the replies.
    fn send(ctx: &WsContext, conn: &mut ConnState, message: &str) -> Vec<String> {
        let mut replies = Vec::new();
        assert_eq!(
            handle_text(ctx, conn, message, 1, &mut replies),
            Verdict::Continue
        );
        replies
            .iter()
            .map(|r| std::str::from_utf8(r).unwrap().to_owned())
            .collect()
    }

    /// An announce of peer `peer` (20 times that letter), without its closing brace.
    fn announce_of(peer: char) -> String {
        let peer_id = peer.to_string().repeat(20);
        format!(
            r#"{{"action":"announce","info_hash":"aaaaaaaaaaaaaaaaaaaa","peer_id":"{peer_id}","numwant":0"#
        )
    }

    #[test]
    fn a_source_over_its_limit_or_blocked_is_closed() {
        let policy = policy::Policy::default().guarded(1, 1);
        let config = crate::Config::default();
        let ctx = WsContext::new(&config, crate::open_core(&config, policy));
        let mut conn = ConnState::new(1, "127.0.0.1".parse().unwrap(), None);
        let message = format!("{}}}", announce_of('d'));
        let mut replies = Vec::new();
        let mut ask = |conn: &mut ConnState| handle_text(&ctx, conn, &message, 1, &mut replies);
        assert_eq!(ask(&mut conn), Verdict::Continue);
        assert_eq!(ask(&mut conn), Verdict::Limited);
        let mut far = ConnState::new(2, "10.0.0.1".parse().unwrap(), None);
        assert_eq!(ask(&mut far), Verdict::Blocked);
        assert_eq!(replies.len(), 1, "only the admitted announce is answered");
    }

    #[test]
    fn the_connections_passkey_goes_with_every_announce_and_scrape() {
        let ctx = ctx();
        let ip = "127.0.0.1".parse().unwrap();
        let mut keyed = ConnState::new(1, ip, Some("0123abcd".into()));
        let mut open = ConnState::new(2, ip, None);
        seen::take();
        let action = policy::Action::Announce;
        for (conn, peer, credential) in
            [(&mut keyed, 'b', Some("0123abcd")), (&mut open, 'c', None)]
        {
            let message = announce_of(peer);
            let replies = send(&ctx, conn, &format!(r#"{message},"left":42}}"#));
            assert!(replies[0].contains("\"interval\""), "{replies:?}");
            // A client without metadata sends no `left`.
            send(&ctx, conn, &format!("{message}}}"));
            assert_eq!(
                seen::take(),
                vec![
                    seen(action, credential, Some(42)),
                    seen(action, credential, None)
                ]
            );
            let replies = send(
                &ctx,
                conn,
                r#"{"action":"scrape","info_hash":["aaaaaaaaaaaaaaaaaaaa","cccccccccccccccccccc"]}"#,
            );
            assert!(replies[0].contains("\"files\""), "{replies:?}");
            let scrape = seen(policy::Action::Scrape, credential, None);
            assert_eq!(seen::take(), vec![scrape.clone(), scrape]);
        }
    }
}
