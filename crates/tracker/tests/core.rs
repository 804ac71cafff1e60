//! The core's entry points as every front end calls them, with no socket: each refusal and
//! each accounting rule, table driven, for each protocol's request shape (a UDP announce
//! from IPv4, an HTTP announce from IPv6, a WebTorrent announce that may not say what it
//! has left).

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;

use shoal_proto::{AnnounceEvent, CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use shoal_swarm::webtorrent::{OfferTarget, WebTorrentStore, WsStoreConfig};
use shoal_swarm::{Family, PeerSink, StoreConfig, TorrentStats};
use shoal_tracker::policy::private_rule::{
    ACCOUNT_DISABLED, CANNOT_DOWNLOAD, CLIENT_NOT_ALLOWED, NOT_REGISTERED, PASSKEY_REQUIRED,
    UNKNOWN_PASSKEY,
};
use shoal_tracker::policy::{
    AccessList, AccessMode, BlockList, Limits, Policy, PrivateRule, RateLimit, NOT_ALLOWED,
};
use shoal_tracker::private::{
    Delta, Ledger, LedgerConfig, Member, Members, Registered, Roster, SlotStore,
};
use shoal_tracker::{Core, PeerAnnounce, Protocol, ScrapeOf, Stop, Swarms};

use AnnounceEvent::{Completed, None as Regular, Started, Stopped};

const KEY: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DISABLED: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const NO_DOWNLOAD: &str = "cccccccccccccccccccccccccccccccc";
/// Registered, v1 and its v2 alias.
const TORRENT: InfoHash = InfoHash([1; 20]);
const TORRENT_V2: InfoHash = InfoHash([2; 20]);
/// Registered, but on the access list's deny list.
const DENIED: InfoHash = InfoHash([9; 20]);
const UNKNOWN: InfoHash = InfoHash([7; 20]);
/// A client the allow-list knows.
const CLIENT: PeerId = PeerId(*b"-qB4650-aaaaaaaaaaaa");

fn member(id: i64, enabled: bool, can_download: bool) -> Member {
    Member {
        id,
        enabled,
        can_download,
        download_factor: 1.0,
        upload_factor: 1.0,
    }
}

fn registered(id: i64, swarm: InfoHash, v2: Option<InfoHash>, download_factor: f64) -> Registered {
    Registered {
        id,
        swarm,
        v2,
        download_factor,
        upload_factor: 2.0,
    }
}

/// A private core: three users, a hybrid torrent (freeleech halved, double upload), one
/// denied torrent, one allowed client prefix; 10.0.0.0/8 blocked; `burst` requests per
/// source before the rate limit.
fn private_core(burst: u32) -> (Core, Arc<Ledger>) {
    let members = Arc::new(Members::new(
        &Roster {
            users: vec![
                (KEY.into(), member(1, true, true)),
                (DISABLED.into(), member(2, false, true)),
                (NO_DOWNLOAD.into(), member(3, true, false)),
            ],
            torrents: vec![
                registered(10, TORRENT, Some(TORRENT_V2), 0.5),
                registered(11, DENIED, None, 1.0),
            ],
            clients: vec![b"-qB".to_vec().into_boxed_slice()],
        },
        true,
    ));
    let policy = Policy::new(AccessList::new(AccessMode::Deny, [DENIED]), PathBuf::new())
        .with_block_list(
            BlockList::new(["10.0.0.0/8".parse().unwrap()]),
            PathBuf::new(),
        )
        .with_rate_limit(RateLimit::new(&Limits::new(1, burst)))
        .with_private(PrivateRule { members });
    let ledger = Arc::new(Ledger::new(LedgerConfig::default()));
    let store = SlotStore::with_extension(StoreConfig::default());
    let swarms = Swarms::private(store, ledger.clone());
    let webtorrent = WebTorrentStore::new(WsStoreConfig::default());
    (Core::new(policy, swarms, webtorrent), ledger)
}

/// What an announce reports: uploaded, downloaded, left, event.
type Counters = (u64, u64, u64, AnnounceEvent);
/// What an account gained: credited up and down, raw up and down; seeding and leeching
/// seconds, the snatch.
type Gained = ([u64; 4], (u64, u64, bool));

/// One protocol's request shape.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// UDP from IPv4, `left` always said.
    Udp,
    /// HTTP from IPv6, `left` always said.
    Http,
    /// WebTorrent, `left` said.
    Ws,
    /// WebTorrent, `left` not said (a client without the metadata yet).
    WsNoLeft,
}

const SHAPES: [Shape; 4] = [Shape::Udp, Shape::Http, Shape::Ws, Shape::WsNoLeft];

/// What a client sends: which torrent, with which passkey and peer id, from where.
#[derive(Clone, Copy, Debug)]
struct Ask {
    info_hash: InfoHash,
    credential: Option<&'static str>,
    peer_id: PeerId,
    source: IpAddr,
}

impl Ask {
    fn key(self, credential: Option<&'static str>) -> Self {
        Self { credential, ..self }
    }
    fn hash(self, info_hash: InfoHash) -> Self {
        Self { info_hash, ..self }
    }
    fn client(self, peer_id: [u8; 20]) -> Self {
        Self {
            peer_id: PeerId(peer_id),
            ..self
        }
    }
    fn from(self, source: IpAddr) -> Self {
        Self { source, ..self }
    }
}

impl Default for Ask {
    fn default() -> Self {
        Self {
            info_hash: TORRENT,
            credential: Some(KEY),
            peer_id: CLIENT,
            source: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        }
    }
}

fn announce_of<A>(
    shape: Shape,
    ask: &Ask,
    addr: A,
    (uploaded, downloaded, left, event): (u64, u64, u64, AnnounceEvent),
    now: u32,
) -> PeerAnnounce<'static, A> {
    let protocol = match shape {
        Shape::Udp => Protocol::Udp,
        Shape::Http => Protocol::Http,
        Shape::Ws | Shape::WsNoLeft => Protocol::Ws,
    };
    PeerAnnounce {
        protocol,
        source: ask.source,
        credential: ask.credential,
        agent: None,
        info_hash: ask.info_hash,
        peer_id: ask.peer_id,
        addr,
        uploaded,
        downloaded,
        left: match shape {
            Shape::WsNoLeft => None,
            _ => Some(left),
        },
        event,
        numwant: 50,
        now,
    }
}

fn stored<A: Family>(core: &Core, a: &PeerAnnounce<'_, A>) -> Result<TorrentStats, Stop>
where
    Vec<A>: PeerSink<A>,
{
    core.announce(a, &mut Vec::new()).map(|answer| answer.stats)
}

/// `ask` announces over `shape` with these counters at `now`.
fn announce(
    core: &Core,
    shape: Shape,
    ask: &Ask,
    counters: (u64, u64, u64, AnnounceEvent),
    now: u32,
) -> Result<TorrentStats, Stop> {
    match (shape, ask.source) {
        (Shape::Udp, IpAddr::V4(v4)) => stored(
            core,
            &announce_of(shape, ask, CompactPeerV4::new(v4, 6881), counters, now),
        ),
        (Shape::Http, _) | (Shape::Udp, IpAddr::V6(_)) => {
            let v6 = match ask.source {
                IpAddr::V6(v6) => v6,
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            };
            stored(
                core,
                &announce_of(shape, ask, CompactPeerV6::new(v6, 6881), counters, now),
            )
        }
        (Shape::Ws | Shape::WsNoLeft, _) => {
            let a = announce_of(shape, ask, (), counters, now);
            let mut targets: Vec<OfferTarget> = Vec::new();
            core.announce_webrtc(&a, 1, &mut &[][..], &mut targets, |_| true)
                .map(|(o, _)| o.stats)
        }
    }
}

/// Every refusal of the policy, for every protocol's shape: the stop each one gets.
#[test]
fn every_refusal_for_every_shape() {
    let leeching = (0, 0, 1000, Started);
    let seeding = (0, 0, 0, Started);
    let ask = Ask::default();
    let blocked = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
    let blocked_mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
    let rows: [(&str, Ask, Counters, Stop); 9] = [
        (
            "no passkey",
            ask.key(None),
            leeching,
            Stop::Refuse(PASSKEY_REQUIRED),
        ),
        (
            "unknown passkey",
            ask.key(Some(&KEY[1..])),
            leeching,
            Stop::Refuse(UNKNOWN_PASSKEY),
        ),
        (
            "disabled account",
            ask.key(Some(DISABLED)),
            leeching,
            Stop::Refuse(ACCOUNT_DISABLED),
        ),
        (
            "unregistered torrent",
            ask.hash(UNKNOWN),
            leeching,
            Stop::Refuse(NOT_REGISTERED),
        ),
        (
            "client not allowed",
            ask.client(*b"-XX0001-aaaaaaaaaaaa"),
            leeching,
            Stop::Refuse(CLIENT_NOT_ALLOWED),
        ),
        (
            "leecher who may not download",
            ask.key(Some(NO_DOWNLOAD)),
            leeching,
            Stop::Refuse(CANNOT_DOWNLOAD),
        ),
        (
            "torrent the access list denies",
            ask.hash(DENIED),
            leeching,
            Stop::Refuse(NOT_ALLOWED),
        ),
        // Before any passkey check.
        (
            "blocked source",
            ask.from(blocked).key(None),
            leeching,
            Stop::Blocked,
        ),
        (
            "blocked source, IPv4-mapped",
            ask.from(blocked_mapped),
            seeding,
            Stop::Blocked,
        ),
    ];
    for shape in SHAPES {
        let (core, ledger) = private_core(1000);
        for (what, ask, counters, stop) in rows {
            // A WebTorrent client that does not say what it has left counts as a leecher:
            // the user who may not download is refused even when seeding.
            assert_eq!(
                announce(&core, shape, &ask, counters, 10),
                Err(stop),
                "{what} over {shape:?}"
            );
        }
        // The user who may not download still seeds (unless WebTorrent does not say).
        let seeder = ask.key(Some(NO_DOWNLOAD));
        let seeded = announce(&core, shape, &seeder, seeding, 10);
        match shape {
            Shape::WsNoLeft => assert_eq!(seeded, Err(Stop::Refuse(CANNOT_DOWNLOAD))),
            _ => assert!(seeded.is_ok(), "{shape:?}: {seeded:?}"),
        }
        // Nothing refused was accounted.
        assert!(ledger.drain().iter().all(|d| d.user_id == 3), "{shape:?}");
    }
}

/// A source over its rate limit is stopped on every protocol, announces and scrapes alike.
#[test]
fn the_rate_limit_stops_every_shape() {
    for shape in SHAPES {
        let (core, _) = private_core(2);
        let ask = Ask::default();
        assert!(announce(&core, shape, &ask, (0, 0, 10, Started), 1).is_ok());
        let scrape = ScrapeOf {
            protocol: Protocol::Http,
            source: ask.source,
            credential: Some(KEY),
            info_hash: &TORRENT,
        };
        assert!(core.scrape(&scrape).is_ok());
        assert_eq!(
            announce(&core, shape, &ask, (0, 0, 10, Regular), 2),
            Err(Stop::Limited),
            "{shape:?}"
        );
        assert_eq!(core.scrape(&scrape), Err(Stop::Limited));
        assert_eq!(core.scrape_webrtc(&scrape), Err(Stop::Limited));
    }
}

/// The accounting rules through the core, for every shape: what one client's announces
/// add to its account (the torrent's factors: download 0.5, upload 2).
#[test]
fn every_accounting_rule_for_every_shape() {
    type Step = (u64, u64, u64, AnnounceEvent, u32);
    // (what, the client's announces, what its account gains: credited up, credited down,
    // raw up, raw down, seeding seconds, leeching seconds, snatched)
    let rows: [(&str, &[Step], Gained); 6] = [
        (
            "a session counts each difference once, with the factors",
            &[
                (0, 0, 1000, Started, 0),
                (100, 400, 600, Regular, 60),
                (300, 1000, 0, Completed, 90),
            ],
            ([600, 500, 300, 1000], (0, 90, true)),
        ),
        (
            "a first announce without started is only a baseline",
            &[(5000, 7000, 10, Regular, 0), (5100, 7010, 0, Regular, 30)],
            ([200, 5, 100, 10], (0, 30, false)),
        ),
        (
            "a lower counter without started counts nothing",
            &[
                (0, 0, 10, Started, 0),
                (1000, 0, 10, Regular, 10),
                (900, 0, 10, Regular, 20),
                (1100, 0, 10, Regular, 30),
            ],
            ([2200, 0, 1100, 0], (0, 30, false)),
        ),
        (
            "a new started opens a new session, counted from zero",
            &[
                (0, 0, 0, Started, 0),
                (500, 0, 0, Stopped, 20),
                (0, 0, 0, Started, 100),
                (50, 0, 0, Regular, 130),
            ],
            ([1100, 0, 550, 0], (50, 0, false)),
        ),
        (
            "a repeated started is a retry",
            &[
                (0, 0, 0, Started, 0),
                (10, 0, 0, Started, 5),
                (30, 0, 0, Regular, 10),
            ],
            ([60, 0, 30, 0], (10, 0, false)),
        ),
        (
            "completed twice is one snatch",
            &[
                (0, 0, 10, Started, 0),
                (0, 10, 0, Completed, 10),
                (0, 10, 0, Completed, 20),
            ],
            ([0, 5, 0, 10], (10, 10, true)),
        ),
    ];
    for shape in [Shape::Udp, Shape::Http, Shape::Ws] {
        for (what, steps, want) in rows {
            let (core, ledger) = private_core(1000);
            let ask = Ask {
                source: match shape {
                    Shape::Http => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
                    _ => Ask::default().source,
                },
                ..Ask::default()
            };
            for &(up, down, left, event, now) in steps {
                let served = announce(&core, shape, &ask, (up, down, left, event), now);
                assert!(served.is_ok(), "{what} over {shape:?}: {served:?}");
            }
            let sums: Vec<Delta> = ledger.drain();
            assert_eq!(sums.len(), 1, "{what} over {shape:?}: {sums:?}");
            let d = sums[0];
            assert_eq!((d.user_id, d.torrent_id), (1, 10));
            let bytes = [d.uploaded, d.downloaded, d.uploaded_raw, d.downloaded_raw];
            let time = (d.seed_seconds, d.leech_seconds, d.completed);
            assert_eq!((bytes, time), want, "{what} over {shape:?}");
        }
    }
}

/// A hybrid torrent's v2 hash joins its v1 swarm over UDP and HTTP (answers still name the
/// hash asked about), and is one account with it; scrapes of either hash see one swarm.
#[test]
fn a_v2_hash_is_its_v1_swarm_and_account() {
    let (core, ledger) = private_core(1000);
    let v1 = Ask::default();
    let v2 = Ask {
        info_hash: TORRENT_V2,
        peer_id: PeerId(*b"-qB4650-bbbbbbbbbbbb"),
        source: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        ..Ask::default()
    };
    announce(&core, Shape::Udp, &v1, (0, 0, 0, Started), 0).unwrap();
    let stats = announce(&core, Shape::Udp, &v2, (0, 0, 10, Started), 0).unwrap();
    assert_eq!((stats.seeders, stats.leechers), (1, 1));
    for h in [TORRENT, TORRENT_V2] {
        let scraped = core.scrape(&ScrapeOf {
            protocol: Protocol::Udp,
            source: v1.source,
            credential: Some(KEY),
            info_hash: &h,
        });
        assert_eq!(scraped.map(|s| (s.seeders, s.leechers)), Ok((1, 1)));
    }
    announce(&core, Shape::Udp, &v2, (0, 8, 2, Regular), 10).unwrap();
    let sums = ledger.drain();
    assert_eq!(sums.len(), 1, "{sums:?}");
    assert_eq!((sums[0].torrent_id, sums[0].downloaded_raw), (10, 8));
}

/// Open mode: the same entry points, nothing accounted, no passkey needed.
#[test]
fn open_mode_serves_every_shape_without_accounts() {
    let core = Core::new(
        Policy::default(),
        Swarms::Open(shoal_swarm::Store::new(StoreConfig::default())),
        WebTorrentStore::new(WsStoreConfig::default()),
    );
    let ask = Ask {
        credential: None,
        info_hash: UNKNOWN,
        ..Ask::default()
    };
    for shape in SHAPES {
        let served = announce(&core, shape, &ask, (0, 0, 10, Started), 0);
        assert!(served.is_ok(), "{shape:?}: {served:?}");
    }
    assert!(core.swarms().ledger().is_none());
}

/// With a peer log (a schema that keeps a row per client), every private announce notes
/// its client's latest state, with what each protocol carries: UDP and HTTP an address, HTTP
/// a user agent, WebTorrent neither; refused announces note nothing.
#[test]
fn the_peer_log_keeps_each_clients_latest_state_per_shape() {
    let (core, _) = private_core(1000);
    let log = Arc::new(shoal_tracker::private::PeerLog::default());
    let core = core.with_peer_log(log.clone());
    let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let http = Ask::default().from(v6).client(*b"-qB4650-httphttphttp");
    let ws = Ask::default().client(*b"-qB4650-wswswswswsws");
    announce(&core, Shape::Udp, &Ask::default(), (0, 0, 10, Started), 1).unwrap();
    announce(&core, Shape::Udp, &Ask::default(), (5, 6, 4, Regular), 2).unwrap();
    let at = CompactPeerV6::new(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 6881);
    let mut a = announce_of(Shape::Http, &http, at, (1, 2, 0, Started), 3);
    a.agent = Some("qBittorrent/4.6.5");
    core.announce(&a, &mut Vec::<CompactPeerV6>::new()).unwrap();
    announce(&core, Shape::Ws, &ws, (0, 0, 3, Stopped), 4).unwrap();
    let refused = Ask::default().key(None).client(*b"-qB4650-refusedrefus");
    assert!(announce(&core, Shape::Udp, &refused, (0, 0, 1, Started), 5).is_err());
    let mut states = log.drain();
    states.sort_by_key(|s| s.announced);
    assert_eq!(states.len(), 3, "{states:?}");
    let (udp, http, ws) = (&states[0], &states[1], &states[2]);
    assert_eq!(
        (
            udp.protocol,
            udp.announces,
            udp.uploaded,
            udp.downloaded,
            udp.left
        ),
        (Protocol::Udp, 2, 5, 6, Some(4))
    );
    assert_eq!(udp.addr, Some("192.0.2.1:6881".parse().unwrap()));
    assert_eq!(
        (udp.seeder, udp.active, udp.agent.as_deref()),
        (false, true, None)
    );
    assert_eq!(
        (http.addr, http.agent.as_deref(), http.seeder),
        (
            Some("[2001:db8::1]:6881".parse().unwrap()),
            Some("qBittorrent/4.6.5"),
            true
        )
    );
    assert_eq!(
        (ws.protocol, ws.addr, ws.active, ws.left),
        (Protocol::Ws, None, false, Some(3))
    );
}
