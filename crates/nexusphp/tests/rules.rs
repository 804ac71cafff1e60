//! NexusPHP's announce rules through the core's seam: each test names the lines of
//! NexusPHP 1.10.3 (commit `dd27164`) it comes from (`A` = `public/announce.php`, `GF` =
//! `include/globalfunctions.php`, `FA` = `include/functions_announce.php`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};

use shoal_nexusphp::agent::FamilyRow;
use shoal_nexusphp::model::{HrMode, Settings, SiteData, SnatchState, Torrent, User};
use shoal_nexusphp::rules;
use shoal_nexusphp::Site;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_tracker::policy::private_rule;
use shoal_tracker::site::{Admission, Asked, Refusal, SiteRules};
use shoal_tracker::Protocol;

const T0: i64 = 1_800_000_000;
const GIB: u64 = 1 << 30;

// Each test runs on its own thread: its sites' clock reads that thread's cell, so tests
// that move time on do not disturb each other.
thread_local! {
    static NOW: AtomicI64 = const { AtomicI64::new(T0) };
}

fn now() -> i64 {
    NOW.with(|n| n.load(Ordering::Relaxed))
}

fn advance(secs: i64) {
    NOW.with(|n| n.fetch_add(secs, Ordering::Relaxed));
}

fn qbittorrent() -> FamilyRow {
    FamilyRow {
        id: 23,
        family: "qBittorrent 4.x".to_owned(),
        start_name: "qBittorrent 4.0.0".to_owned(),
        peer_id_pattern: "/^-qB4([0-9])([0-9])/".to_owned(),
        peer_id_match_num: 2,
        peer_id_matchtype: "dec".to_owned(),
        peer_id_start: "-qB400".to_owned(),
        agent_pattern: r"/^qBittorrent\/4\.([0-9])\.([0-9])/".to_owned(),
        agent_match_num: 2,
        agent_matchtype: "dec".to_owned(),
        agent_start: "qBittorrent/4.0.0".to_owned(),
        exception: false,
        allow_https: false,
    }
}

fn member(id: u32) -> User {
    User {
        id,
        passkey: format!("{id:032}"),
        class: 1,
        enabled: true,
        can_download: true,
        ..User::default()
    }
}

fn torrent(id: u32, sp_state: u8) -> Torrent {
    Torrent {
        id,
        info_hash: [id as u8; 20],
        size: 1000,
        owner: 99,
        sp_state,
        promotion_time_type: 1,
        added: T0 - 86_400,
        approval_status: 1,
        mode: Some(4),
        ..Torrent::default()
    }
}

/// Members 1 (a member) and 2 (VIP); torrents 10 (normal) and 11 (free).
fn site_with(settings: Settings) -> Site {
    NOW.with(|n| n.store(T0, Ordering::Relaxed));
    let mut vip = member(2);
    vip.class = 10;
    Site::new(SiteData {
        settings,
        users: vec![member(1), vip],
        torrents: vec![torrent(10, 1), torrent(11, 2)],
        families: vec![qbittorrent()],
        ..SiteData::default()
    })
    .with_clock(now)
}

fn site() -> Site {
    site_with(Settings {
        base_url: "https://pt.example".to_owned(),
        ..Settings::default()
    })
}

/// An announce's request, each field declared once with its default and a setter, for asks
/// written as `Ask::default().torrent(11).left(0)`.
macro_rules! ask_fields {
    ($($field:ident: $ty:ty = $default:expr),+ $(,)?) => {
        struct Ask {
            $($field: $ty,)+
        }

        impl Default for Ask {
            fn default() -> Self {
                Ask {
                    $($field: $default,)+
                }
            }
        }

        impl Ask {
            $(
                fn $field(self, $field: $ty) -> Self {
                    Ask { $field, ..self }
                }
            )+
        }
    };
}

ask_fields!(
    user: u64 = 1,
    torrent: u64 = 10,
    peer: &'static str = "-qB4650-",
    ip: [u8; 4] = [10, 0, 0, 1],
    port: u16 = 51413,
    agent: &'static str = "qBittorrent/4.6.5",
    uploaded: u64 = 0,
    downloaded: u64 = 0,
    left: u64 = 1000,
    event: AnnounceEvent = AnnounceEvent::Started,
);

fn ask(site: &Site, q: Ask) -> Result<Admission, Refusal> {
    let mut id = [b'x'; 20];
    id[..q.peer.len()].copy_from_slice(q.peer.as_bytes());
    let ip = IpAddr::V4(Ipv4Addr::from(q.ip));
    let hash = InfoHash([q.torrent as u8; 20]);
    site.admit(&Asked {
        protocol: Protocol::Http,
        source: ip,
        user_id: q.user,
        torrent_id: q.torrent,
        info_hash: &hash,
        peer_id: PeerId(id),
        addr: Some(SocketAddr::new(ip, q.port)),
        agent: Some(q.agent),
        uploaded: q.uploaded,
        downloaded: q.downloaded,
        left: Some(q.left),
        event: q.event,
        now: 0,
    })
}

/// The default site, member 1's client having started on torrent 10 `secs` ago.
fn started(secs: i64) -> Site {
    let site = site();
    ask(&site, Ask::default()).unwrap();
    advance(secs);
    site
}

/// Member 1's client, the torrent downloaded (`left` 0), announces `event` having
/// uploaded `uploaded`.
fn seeding(site: &Site, event: AnnounceEvent, uploaded: u64) -> Result<Admission, Refusal> {
    ask(
        site,
        Ask::default()
            .event(event)
            .uploaded(uploaded)
            .downloaded(1000)
            .left(0),
    )
}

/// The factors credited: (upload, download).
fn factors(a: &Admission) -> (f64, f64) {
    (a.upload_factor, a.download_factor)
}

/// The default announce again, without an event.
fn reannounce(site: &Site) -> Result<Admission, Refusal> {
    ask(site, Ask::default().event(AnnounceEvent::None))
}

/// `GF:1082-1091`: a client's first announce credits nothing; `GF:1045-1060`,
/// `app/Models/Torrent.php:85-125`: then the torrent's state.
#[test]
fn the_first_announce_credits_nothing_then_the_promotion() {
    let site = site();
    let first = ask(&site, Ask::default().torrent(11)).unwrap();
    assert_eq!(factors(&first), (0.0, 0.0));
    assert!(first.listed && first.gets_peers && first.hide.is_empty());
    advance(1000);
    let next = ask(
        &site,
        Ask::default()
            .torrent(11)
            .event(AnnounceEvent::None)
            .downloaded(500)
            .left(500),
    )
    .unwrap();
    assert_eq!(factors(&next), (1.0, 0.0), "free");
    advance(1000);
    let vip = ask(&site, Ask::default().user(2).peer("-qB4651-")).unwrap();
    assert_eq!(vip.download_factor, 0.0);
    advance(1000);
    let vip = ask(
        &site,
        Ask::default()
            .user(2)
            .peer("-qB4651-")
            .event(AnnounceEvent::None),
    )
    .unwrap();
    assert_eq!(
        factors(&vip),
        (1.0, 0.0),
        "`GF:1075-1081`: VIPs pay no download"
    );
}

/// `A:243-252`: the interval is drawn from the torrent's band (a day old: 900-2250 s).
#[test]
fn the_interval_is_drawn_from_the_band() {
    let site = site();
    let a = ask(&site, Ask::default()).unwrap();
    assert!(
        (900..=2250).contains(&a.interval.unwrap()),
        "{:?}",
        a.interval
    );
}

/// `A:122-129`, `FA:27-31`, `A:95-96`: the member's and the request's refusals, and the
/// texts of the private rule's (`A:120-123`, `A:185-194`).
#[test]
fn refusals_before_the_torrent() {
    let site = site();
    let r = ask(&site, Ask::default().agent("Mozilla/5.0")).unwrap_err();
    assert_eq!(r.reason, "Browser access blocked!");
    let r = ask(&site, Ask::default().port(6881).torrent(11)).unwrap_err();
    assert_eq!(r.reason, "Port 6881 is blacklisted.");
    let mut parked = member(1);
    parked.parked = true;
    site.put_user(parked);
    let r = ask(
        &site,
        Ask::default()
            .user(1)
            .torrent(11)
            .peer("-qB4652-")
            .event(AnnounceEvent::Completed),
    )
    .unwrap_err();
    assert_eq!(r.reason, "Your account is parked! (Read the FAQ)");
    assert_eq!(
        site.reason(private_rule::UNKNOWN_PASSKEY),
        "Invalid passkey! Re-download the .torrent from https://pt.example"
    );
    assert_eq!(
        site.reason(private_rule::NOT_REGISTERED),
        "torrent not registered with this tracker"
    );
}

/// `A:152-172`, `A:610-612`: a refused client sets `showclienterror`; an allowed one
/// writes its family to `clientselect` and clears it.
#[test]
fn the_client_check_and_its_columns() {
    let site = site();
    let r = ask(
        &site,
        Ask::default().peer("-TR3000-").agent("Transmission/3.00"),
    )
    .unwrap_err();
    assert_eq!(
        r.reason,
        "Banned Client, Please goto https://pt.example/faq.php#id29 for a list of acceptable clients"
    );
    let batch = site.take_batch();
    assert_eq!(batch.users[0].show_client_error, Some(true));
    advance(60);
    ask(&site, Ask::default()).unwrap();
    let batch = site.take_batch();
    let u = &batch.users[0];
    assert_eq!(
        (u.client_select, u.show_client_error, u.last_announce_at),
        (Some(23), Some(false), Some(T0 + 60))
    );
}

/// `A:197-213`: banned and unapproved torrents, and a `left` above the size.
#[test]
fn torrent_refusals_and_the_fake_announce() {
    let site = site_with(Settings {
        approval_status_none_visible: false,
        ..Settings::default()
    });
    let mut banned = torrent(10, 1);
    banned.banned = true;
    site.put_torrent(banned);
    assert_eq!(ask(&site, Ask::default()).unwrap_err(), rules::BANNED);
    let mut staff = member(3);
    staff.class = 12;
    site.put_user(staff);
    assert!(
        ask(&site, Ask::default().user(3)).is_ok(),
        "`authority.seebanned` and above"
    );
    let mut pending = torrent(11, 1);
    pending.approval_status = 0;
    site.put_torrent(pending);
    assert_eq!(
        ask(&site, Ask::default().torrent(11)).unwrap_err(),
        rules::NOT_APPROVED
    );
    let mut ok = torrent(11, 1);
    ok.size = 100;
    site.put_torrent(ok);
    assert_eq!(
        ask(&site, Ask::default().torrent(11).left(101)).unwrap_err(),
        rules::FAKE
    );
    assert!(site
        .take_batch()
        .users
        .iter()
        .any(|u| u.user_id == 1 && u.revoke_download));
    assert!(!site.user(1).unwrap().can_download);
}

/// `A:42-66`, `A:266-270`: a repeat within 5 s is answered without peers; another within
/// 30 s is too frequent, unless it is `completed` or `stopped`.
#[test]
fn the_rate_windows() {
    let site = started(3);
    let repeat = reannounce(&site).unwrap();
    assert!(!repeat.gets_peers);
    advance(7);
    assert_eq!(reannounce(&site).unwrap_err(), rules::TOO_FREQUENT);
    advance(1);
    let done = seeding(&site, AnnounceEvent::Completed, 0);
    assert!(done.is_ok(), "{done:?}");
}

/// `A:317-324`: three announces without an event within 300 s (by `prev_action`).
#[test]
fn the_minimum_announce_time() {
    let site = started(100);
    reannounce(&site).unwrap();
    advance(100);
    let r = reannounce(&site).unwrap_err();
    assert_eq!(r.reason, "There is a minimum announce time of 300 seconds");
    advance(101);
    assert!(reannounce(&site).is_ok());
}

/// `A:383-391`: locations.
#[test]
fn one_leeching_location_three_seeding_ones() {
    let site = started(60);
    let r = ask(&site, Ask::default().peer("-qB4651-").ip([10, 0, 0, 2])).unwrap_err();
    assert_eq!(r, rules::ONE_LEECH);
    advance(60);
    let r = ask(&site, Ask::default().peer("-qB4651-").left(0)).unwrap_err();
    assert_eq!(
        r,
        rules::SAME_LOCATION,
        "a second seeder from the same address"
    );
    for (i, peer) in ["-qB4652-", "-qB4653-"].into_iter().enumerate() {
        advance(60);
        ask(
            &site,
            Ask::default().peer(peer).ip([10, 0, 1, i as u8]).left(0),
        )
        .unwrap();
    }
    advance(60);
    let r = ask(
        &site,
        Ask::default().peer("-qB4654-").ip([10, 0, 2, 0]).left(0),
    )
    .unwrap_err();
    assert_eq!(r, rules::THREE_SEEDS);
}

/// `A:412-426`: the download slots by ratio, over all of the member's torrents.
#[test]
fn the_download_slots() {
    let site = site_with(Settings {
        maxdlsystem: true,
        base_url: "https://pt.example/".to_owned(),
        ..Settings::default()
    });
    let mut low = member(1);
    (low.uploaded, low.downloaded) = (3 * GIB, 11 * GIB);
    site.put_user(low);
    ask(&site, Ask::default()).unwrap();
    let r = ask(&site, Ask::default().torrent(11)).unwrap_err();
    assert_eq!(
        r.reason,
        "Your slot limit is reached! You may at most download 1 torrents at the same time, please read https://pt.example/faq.php#id66 for details"
    );
    advance(60);
    let mut vip = member(1);
    (vip.class, vip.uploaded, vip.downloaded) = (10, 3 * GIB, 11 * GIB);
    site.put_user(vip);
    assert!(
        ask(&site, Ask::default().torrent(11)).is_ok(),
        "VIPs have no slots"
    );
}

/// `A:474-508`, `A:509-531`: the rows an announce leaves to write.
#[test]
fn the_rows_written() {
    let site = site();
    ask(&site, Ask::default()).unwrap();
    let b = site.take_batch();
    assert_eq!(b.peers.len(), 1);
    let s = &b.snatches[0];
    assert!(
        s.insert.is_some(),
        "`A:528-529`: a snatched row for a new pair"
    );
    assert_eq!((s.to_go, s.last_action), (1000, T0));
    assert_eq!(b.torrents[0].leechers, 1);
    assert_eq!(
        b.recorded,
        vec![(1, 10, T0)],
        "`A:631-635`: the cleanup's batches"
    );
    advance(600);
    seeding(&site, AnnounceEvent::Completed, 10).unwrap();
    let b = site.take_batch();
    let t = &b.torrents[0];
    assert_eq!(
        (t.seeders, t.leechers, t.completed),
        (1, 0, 1),
        "`A:487-501`"
    );
    assert!(
        b.recorded.is_empty(),
        "once per `main.autoclean_interval_one`"
    );
    let p = &b.peers[0].1;
    assert_eq!(
        (p.prev_action, p.last_action, p.finished_at),
        (Some(T0), T0 + 600, T0 + 600)
    );
    let s = &b.snatches[0];
    assert_eq!(
        (s.downloaded, s.leechtime, s.completed_at),
        (1000, 600, Some(T0 + 600)),
        "`A:504`"
    );
    advance(900);
    seeding(&site, AnnounceEvent::Stopped, 500).unwrap();
    let b = site.take_batch();
    assert_eq!(b.peer_deletions.len(), 1, "`A:476`");
    let s = &b.snatches[0];
    assert_eq!(
        (s.uploaded, s.seedtime, s.leechtime),
        (490, 900, 0),
        "`A:481`"
    );
    assert_eq!(b.torrents[0].seeders, 0);
}

/// `A:474-483`: a known client's `stopped` deletes its `peers` row, so no other client is
/// sent it again: the stop is given to the core's store (`listed`), which removes the client
/// from shoal's swarm; unlisted, it stayed there and was handed out until it expired.
#[test]
fn a_stopped_client_leaves_the_swarm() {
    let site = started(600);
    let stop = seeding(&site, AnnounceEvent::Stopped, 10).unwrap();
    assert!(stop.listed, "the store must see the stop");
    assert!(!stop.gets_peers, "`A:215`: a stop gets no peers");
}

/// `A:546-593`: a hit-and-run row once the snatch downloaded the torrent's size.
#[test]
fn hit_and_run_rows() {
    NOW.with(|n| n.store(T0, Ordering::Relaxed));
    let site = Site::new(SiteData {
        settings: Settings {
            hr_mode: HrMode::Global,
            ..Settings::default()
        },
        users: vec![member(1)],
        torrents: vec![torrent(10, 1)],
        families: vec![qbittorrent()],
        snatches: vec![(
            (1, 10),
            SnatchState {
                exists: true,
                downloaded: 1000,
                ..SnatchState::default()
            },
        )],
        ..SiteData::default()
    })
    .with_clock(now);
    ask(&site, Ask::default()).unwrap();
    assert_eq!(site.take_batch().hit_and_runs, vec![(1, 10)]);
    advance(600);
    reannounce(&site).unwrap();
    assert!(site.take_batch().hit_and_runs.is_empty(), "once");
}

/// `FA:112-133`: a disabling cheater check refuses and disables.
#[test]
fn a_cheater_is_disabled() {
    let site = started(40);
    let r = ask(
        &site,
        Ask::default().event(AnnounceEvent::None).uploaded(41 * GIB),
    )
    .unwrap_err();
    assert_eq!(r, rules::CHEATER);
    let b = site.take_batch();
    assert!(b.cheaters[0].disabling);
    assert!(b.users.iter().any(|u| u.disable));
}

/// `A:341-378`: a paid torrent not bought.
#[test]
fn a_paid_torrent_not_bought() {
    let site = site();
    let mut paid = torrent(10, 1);
    paid.price = 100;
    site.put_torrent(paid);
    assert_eq!(ask(&site, Ask::default()).unwrap_err(), rules::PURCHASE);
    site.add_bought([(1, 10)]);
    advance(60);
    assert!(ask(&site, Ask::default().peer("-qB4651-")).is_ok());
}
