//! [`Core`]: one call per request kind, the same for every protocol. The front ends turn
//! bytes into a [`PeerAnnounce`] or a [`ScrapeOf`] and an outcome back into bytes; between
//! the two, [`Core::announce`] (UDP, HTTP), [`Core::announce_webrtc`] (WebTorrent) and
//! [`Core::scrape`] run the whole request, in one direction:
//!
//! 1. the policy decides ([`Policy`]: block list, rate limit, access list, the private
//!    rule), and in private mode hands back the announce's accounting ticket;
//! 2. the store changes (the swarm store for UDP and HTTP peers, the WebTorrent store for
//!    WebRTC peers);
//! 3. the accounting is recorded: for UDP and HTTP in the announcer's own slot, under the
//!    torrent's lock the store already holds ([`Swarms::announce_accounted`]); for
//!    WebTorrent in the ledger's map ([`crate::private::Ledger::record`]).
//!
//! Nothing is left to the caller but writing the answer: a refusal comes back as a [`Stop`]
//! that says how to answer it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use shoal_proto::ws::{seeds, OfferId};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::webtorrent::{
    ConnectionId, OfferIds, OfferTarget, WebTorrentStore, WsAnnounce, WsAnnounceOutcome,
};
use shoal_swarm::{Announce, Family, PeerSink, TorrentStats};

use crate::policy::private_rule::NOT_REGISTERED;
use crate::policy::Policy;
use crate::private::{AccountedAnnounce, Members, PeerLog};
use crate::request::{Action, Counters, Protocol, Request, Verdict};
use crate::site::{Admission, Asked, SiteRules};
use crate::swarms::Swarms;

/// An announce as every front end parsed it. `A` is where the peer is reached: its
/// address for UDP and HTTP ([`shoal_proto::CompactPeerV4`], [`shoal_proto::CompactPeerV6`]),
/// unused for WebTorrent (`()`: a WebRTC peer is reached through its connection).
#[derive(Clone, Copy, Debug)]
pub struct PeerAnnounce<'a, A> {
    pub protocol: Protocol,
    /// The client's address (after the HTTP proxy rules; never one the client claims).
    pub source: IpAddr,
    /// The passkey presented (HTTP's path, UDP's BEP 41 URL data, the WebSocket path).
    pub credential: Option<&'a str>,
    /// The client's `User-Agent`, where the protocol carries one (HTTP).
    pub agent: Option<&'a str>,
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    /// The address the peer is listed under (may differ from `source` where the
    /// front end honours a claimed address).
    pub addr: A,
    pub uploaded: u64,
    pub downloaded: u64,
    /// Bytes left; `None` only for a WebTorrent announce that does not say.
    pub left: Option<u64>,
    pub event: AnnounceEvent,
    /// Peers wanted in the answer, already within the store's limits
    /// ([`Swarms::numwant`]); unused for WebTorrent (offers are counted instead).
    pub numwant: usize,
    /// The store's coarse clock when the front end took the request.
    pub now: u32,
}

impl<'a> PeerAnnounce<'a, ()> {
    /// This announce, listed at `addr` (a front end builds the announce once, then picks
    /// the address family).
    #[inline]
    pub fn at<A>(self, addr: A) -> PeerAnnounce<'a, A> {
        PeerAnnounce {
            protocol: self.protocol,
            source: self.source,
            credential: self.credential,
            agent: self.agent,
            info_hash: self.info_hash,
            peer_id: self.peer_id,
            addr,
            uploaded: self.uploaded,
            downloaded: self.downloaded,
            left: self.left,
            event: self.event,
            numwant: self.numwant,
            now: self.now,
        }
    }
}

/// A scrape of one info hash.
#[derive(Clone, Copy, Debug)]
pub struct ScrapeOf<'a> {
    pub protocol: Protocol,
    pub source: IpAddr,
    pub credential: Option<&'a str>,
    pub info_hash: &'a InfoHash,
}

/// Why a request was not served, and so how its front end answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Answered with this reason (a BEP 15 error, a bencoded or JSON failure reason).
    Refuse(&'static str),
    /// Not answered at all.
    Drop,
    /// The source is over its rate limit (`policy/rate_limit.rs`).
    Limited,
    /// The source is in the block list.
    Blocked,
}

/// What a served announce is answered with: the swarm's figures, and where a site's rules
/// say so a warning and the interval to send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub stats: TorrentStats,
    pub warning: Option<&'static str>,
    pub interval: Option<u32>,
}

impl Answer {
    fn of(stats: TorrentStats, admission: Option<&Admission>) -> Self {
        Self {
            stats,
            warning: admission.and_then(|a| a.warning),
            interval: admission.and_then(|a| a.interval),
        }
    }
}

/// A site's rules and the members they are asked about.
struct Site {
    rules: Arc<dyn SiteRules>,
    members: Arc<Members>,
}

/// The swarm the policy's `verdict` serves a request for `asked` from, or why it is not
/// served.
#[inline]
fn served(verdict: Verdict, asked: &InfoHash) -> Result<InfoHash, Stop> {
    match verdict {
        Verdict::Admit => Ok(*asked),
        Verdict::AdmitAs(swarm) => Ok(swarm),
        Verdict::Refuse(reason) => Err(Stop::Refuse(reason)),
        Verdict::Drop => Err(Stop::Drop),
        Verdict::Limited => Err(Stop::Limited),
        Verdict::Blocked => Err(Stop::Blocked),
    }
}

impl Stop {
    /// The verdict this stop came from (the front ends' counters are kept per verdict).
    pub fn verdict(self) -> Verdict {
        match self {
            Stop::Refuse(reason) => Verdict::Refuse(reason),
            Stop::Drop => Verdict::Drop,
            Stop::Limited => Verdict::Limited,
            Stop::Blocked => Verdict::Blocked,
        }
    }
}

/// The tracker's core: the rules in force and the swarm stores they guard. One per
/// tracker, shared by every front end.
pub struct Core {
    policy: Policy,
    swarms: Swarms,
    webtorrent: WebTorrentStore,
    /// Each client's latest state, for a site schema that keeps a row per client.
    peers: Option<Arc<PeerLog>>,
    /// A site schema's own rules, asked after the private rule.
    site: Option<Site>,
}

impl Core {
    pub fn new(policy: Policy, swarms: Swarms, webtorrent: WebTorrentStore) -> Self {
        Self {
            policy,
            swarms,
            webtorrent,
            peers: None,
            site: None,
        }
    }

    /// This core, also asking a site's own `rules` about every announce the private rule
    /// admits (`members`: the tables the private rule reads, to name the user of an
    /// announce of an unknown torrent).
    pub fn with_site(self, rules: Arc<dyn SiteRules>, members: Arc<Members>) -> Self {
        Self {
            site: Some(Site { rules, members }),
            ..self
        }
    }

    /// This core, also noting each private client's latest state into `log`, for a site
    /// schema that writes a row per client (the database side drains it).
    pub fn with_peer_log(self, log: Arc<PeerLog>) -> Self {
        Self {
            peers: Some(log),
            ..self
        }
    }

    /// The rules (reloads and the admin API's edits go here).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The UDP and HTTP peers' store (snapshots, the cluster exchange, the admin views).
    pub fn swarms(&self) -> &Swarms {
        &self.swarms
    }

    /// The WebTorrent peers' store (the relay of answers, cleaning, the cluster link).
    pub fn webtorrent(&self) -> &WebTorrentStore {
        &self.webtorrent
    }

    /// The policy's request for `a`.
    #[inline]
    fn request<'r, A>(a: &'r PeerAnnounce<'r, A>) -> Request<'r> {
        Request {
            protocol: a.protocol,
            action: Action::Announce,
            source: a.source,
            info_hash: &a.info_hash,
            peer_id: Some(&a.peer_id),
            credential: a.credential,
            counters: Some(Counters {
                uploaded: a.uploaded,
                downloaded: a.downloaded,
                left: a.left,
                event: a.event,
                now: a.now,
            }),
        }
    }

    /// A UDP or HTTP announce: decided, stored, accounted. The peers chosen for the answer
    /// go into `out`; the swarm's figures come back, with what a site's rules add.
    #[inline]
    pub fn announce<A: Family>(
        &self,
        a: &PeerAnnounce<'_, A>,
        out: &mut impl PeerSink<A>,
    ) -> Result<Answer, Stop> {
        let mut ticket = None;
        let swarm = self.served(a, &mut ticket)?;
        let addr = socket(a.addr.any());
        let admission = self.admit(a, Some(addr), ticket.as_mut())?;
        let mut announce = Announce {
            info_hash: swarm,
            peer_id: a.peer_id,
            addr: a.addr,
            event: a.event,
            left: a.left.unwrap_or(u64::MAX),
            numwant: a.numwant,
        };
        if let Some(adm) = &admission {
            if !adm.gets_peers {
                announce.numwant = 0;
            }
            if !adm.listed {
                // Kept out of the swarm: accounted beside it, as a WebRTC peer is.
                if let Some(t) = &ticket {
                    self.swarms.record_elsewhere(t);
                }
                return Ok(Answer::of(self.swarms.scrape(&swarm), admission.as_ref()));
            }
        }
        // Where the peer log (when kept) says the client is, read before the store changes
        // so that the call goes down only: policy, store, accounting.
        let noted = self.peers.as_deref();
        let stats = match admission.as_ref().filter(|adm| !adm.hide.is_empty()) {
            Some(adm) => self.swarms.announce_accounted(
                &announce,
                a.now,
                &mut Hiding {
                    out,
                    hide: &adm.hide,
                },
                ticket.as_ref(),
            ),
            None => self
                .swarms
                .announce_accounted(&announce, a.now, out, ticket.as_ref()),
        };
        if let (Some(log), Some(t)) = (noted, &ticket) {
            log.note(t, a.protocol, Some(addr), a.agent, a.left);
        }
        Ok(Answer::of(stats, admission.as_ref()))
    }

    /// The policy's verdict on announce `a` as the swarm it is served from; an announce
    /// of an unknown torrent is told to the site's rules.
    #[inline]
    fn served<A>(
        &self,
        a: &PeerAnnounce<'_, A>,
        ticket: &mut Option<AccountedAnnounce>,
    ) -> Result<InfoHash, Stop> {
        let served = served(self.policy.decide(&Self::request(a), ticket), &a.info_hash);
        match (served, &self.site) {
            (Err(Stop::Refuse(reason)), Some(site)) => {
                if reason == NOT_REGISTERED {
                    let user = a.credential.and_then(|key| site.members.user(key));
                    if let Some(user) = user {
                        site.rules.unregistered(user.id as u64, &a.info_hash, a.now);
                    }
                }
                Err(Stop::Refuse(site.rules.reason(reason)))
            }
            (served, _) => served,
        }
    }

    /// What the site's rules (if any) grant the announce the policy admitted with
    /// `ticket`; the ticket takes the factors they credit.
    #[inline]
    fn admit<A>(
        &self,
        a: &PeerAnnounce<'_, A>,
        addr: Option<SocketAddr>,
        ticket: Option<&mut AccountedAnnounce>,
    ) -> Result<Option<Admission>, Stop> {
        let (Some(site), Some(t)) = (&self.site, ticket) else {
            return Ok(None);
        };
        let asked = Asked {
            protocol: a.protocol,
            source: a.source,
            user_id: t.user_id,
            torrent_id: t.torrent_id,
            info_hash: &a.info_hash,
            peer_id: a.peer_id,
            addr,
            agent: a.agent,
            uploaded: a.uploaded,
            downloaded: a.downloaded,
            left: a.left,
            event: a.event,
            now: a.now,
        };
        match site.rules.admit(&asked) {
            Ok(adm) => {
                t.download_factor = adm.download_factor;
                t.upload_factor = adm.upload_factor;
                Ok(Some(adm))
            }
            Err(refusal) => {
                metrics::counter!("shoal_private_refused_total",
                    "protocol" => a.protocol.label(), "reason" => refusal.label)
                .increment(1);
                Err(Stop::Refuse(refusal.reason))
            }
        }
    }

    /// A WebTorrent announce from connection `conn`: decided, stored (offers go to at most
    /// one receiver each among the peers `takes_offers` accepts, their targets into `out`),
    /// accounted. A v2 hash stays its own swarm here: relayed offers name the hash their
    /// receivers announced, and WebTorrent clients announce one hash per torrent.
    #[inline]
    pub fn announce_webrtc(
        &self,
        a: &PeerAnnounce<'_, ()>,
        conn: ConnectionId,
        offers: &mut dyn OfferIds,
        out: &mut Vec<OfferTarget>,
        takes_offers: impl Fn(ConnectionId) -> bool,
    ) -> Result<(WsAnnounceOutcome, Answer), Stop> {
        let mut ticket = None;
        self.served(a, &mut ticket)?;
        let admission = self.admit(a, None, ticket.as_mut())?;
        // A peer the site's rules send no peers relays no offers.
        let mut none: &[OfferId] = &[];
        let offers = match &admission {
            Some(adm) if !adm.gets_peers => &mut none,
            _ => offers,
        };
        let outcome = self.webtorrent.announce_to(
            &WsAnnounce {
                info_hash: a.info_hash,
                peer_id: a.peer_id,
                conn,
                event: a.event,
                seeder: seeds(a.left, a.event),
            },
            offers,
            a.now,
            out,
            takes_offers,
        );
        if let Some(t) = &ticket {
            self.swarms.record_elsewhere(t);
            if let Some(log) = &self.peers {
                log.note(t, a.protocol, None, a.agent, a.left);
            }
        }
        let answer = Answer::of(outcome.stats, admission.as_ref());
        Ok((outcome, answer))
    }

    /// One info hash of a scrape, of either store: the figures of the swarm it is served
    /// from.
    #[inline]
    pub fn scrape(&self, s: &ScrapeOf<'_>) -> Result<TorrentStats, Stop> {
        let swarm = served(self.scrape_verdict(s), s.info_hash)?;
        Ok(self.swarms.scrape(&swarm))
    }

    /// One info hash of a WebTorrent scrape: the WebTorrent swarm's figures.
    #[inline]
    pub fn scrape_webrtc(&self, s: &ScrapeOf<'_>) -> Result<TorrentStats, Stop> {
        served(self.scrape_verdict(s), s.info_hash)?;
        Ok(self.webtorrent.scrape(s.info_hash))
    }

    #[inline]
    fn scrape_verdict(&self, s: &ScrapeOf<'_>) -> Verdict {
        self.policy.decide(
            &Request {
                protocol: s.protocol,
                action: Action::Scrape,
                source: s.source,
                info_hash: s.info_hash,
                peer_id: None,
                credential: s.credential,
                counters: None,
            },
            &mut None::<AccountedAnnounce>,
        )
    }
}

/// A store address as a socket address.
fn socket(addr: AnyAddr) -> SocketAddr {
    match addr {
        AnyAddr::V4(a) => a.addr().into(),
        AnyAddr::V6(a) => a.addr().into(),
    }
}

/// A sink that passes on every peer but those at the addresses in `hide` (a user's own
/// other clients, which a site's rules never send them).
struct Hiding<'a, S> {
    out: &'a mut S,
    hide: &'a [SocketAddr],
}

impl<A: Family, S: PeerSink<A>> PeerSink<A> for Hiding<'_, S> {
    fn push_run<X: shoal_swarm::PeerExt>(
        &mut self,
        addrs: &[A],
        meta: &[shoal_swarm::PeerMeta<X>],
    ) {
        for (i, addr) in addrs.iter().enumerate() {
            if !self.hide.contains(&socket(addr.any())) {
                self.out.push_run(
                    std::slice::from_ref(addr),
                    meta.get(i..i + 1).unwrap_or(&[]),
                );
            }
        }
    }
}
