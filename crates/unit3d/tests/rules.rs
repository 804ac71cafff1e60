//! UNIT3D's announce rules, each on its own, through the core's seam (`SiteRules::admit`)
//! on a site built in memory: no database, no socket.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use shoal_accounts::Delta;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_tracker::private::members::{Members, Roster};
use shoal_tracker::site::{Admission, Asked, Refusal, SiteRules};
use shoal_tracker::Protocol;
use shoal_unit3d::model::{Group, Peer, SiteData, Status, Torrent, User};
use shoal_unit3d::rules::*;
use shoal_unit3d::{Site, Unit3dConfig};

const AGENT: &str = "qBittorrent/4.6.5";

fn group(id: u32, slug: &str, slots: Option<u32>) -> Group {
    Group {
        id,
        slug: slug.into(),
        download_slots: slots,
        is_immune: false,
        is_freeleech: false,
        is_double_upload: false,
    }
}

fn user(id: u32, group_id: u32) -> User {
    User {
        id,
        group_id,
        passkey: format!("{id:032x}"),
        can_download: true,
        is_donor: false,
        is_lifetime: false,
        num_seeding: 0,
        num_leeching: 0,
    }
}

fn torrent(id: u32, status: Status) -> Torrent {
    Torrent {
        id,
        info_hash: [id as u8; 20],
        status,
        is_deleted: false,
        seeders: 0,
        leechers: 0,
        times_completed: 0,
        download_factor: 100,
        upload_factor: 100,
    }
}

/// Groups: 1 user (1 download slot), 2 banned, 3 validating, 4 disabled, 5 vip (freeleech,
/// double upload). Users 1..=4 in group 1, 5 in vip, 6 banned, 7 may not download, 8
/// donor, 9 lifetime donor. Torrents 10 approved, 11 pending, 12 rejected, 13 postponed,
/// 14 unknown status, 15 25% free, 16 double upload, 17 approved.
fn site_with(config: Unit3dConfig) -> Site {
    let mut vip = group(5, "vip", None);
    vip.is_freeleech = true;
    vip.is_double_upload = true;
    let mut users: Vec<User> = (1..=4).map(|id| user(id, 1)).collect();
    users.push(user(5, 5));
    users.push(user(6, 2));
    let mut no_dl = user(7, 1);
    no_dl.can_download = false;
    users.push(no_dl);
    let mut donor = user(8, 1);
    donor.is_donor = true;
    users.push(donor);
    let mut lifetime = user(9, 1);
    lifetime.is_lifetime = true;
    users.push(lifetime);
    let mut free25 = torrent(15, Status::Approved);
    free25.download_factor = 75;
    let mut double = torrent(16, Status::Approved);
    double.upload_factor = 200;
    let data = SiteData {
        groups: vec![
            group(1, "user", Some(1)),
            group(2, "banned", None),
            group(3, "validating", None),
            group(4, "disabled", None),
            vip,
        ],
        users,
        torrents: vec![
            torrent(10, Status::Approved),
            torrent(11, Status::Pending),
            torrent(12, Status::Rejected),
            torrent(13, Status::Postponed),
            torrent(14, Status::Unknown),
            free25,
            double,
            torrent(17, Status::Approved),
        ],
        ..SiteData::default()
    };
    let members = Arc::new(Members::new(&Roster::default(), false));
    Site::new(config, members, data)
}

fn site() -> Site {
    site_with(Unit3dConfig {
        announce_min: 0,
        ..Unit3dConfig::default()
    })
}

/// An HTTP announce of `user` on `torrent` from client `peer` at port 50000 + peer.
fn asked(user: u32, torrent: u32, peer: u8, left: u64, event: AnnounceEvent) -> Asked<'static> {
    let hash: &'static InfoHash = Box::leak(Box::new(InfoHash([torrent as u8; 20])));
    let addr: SocketAddr = format!("192.0.2.{peer}:{}", 50000 + u16::from(peer))
        .parse()
        .unwrap();
    Asked {
        protocol: Protocol::Http,
        source: addr.ip(),
        user_id: user.into(),
        torrent_id: torrent.into(),
        info_hash: hash,
        peer_id: PeerId([peer; 20]),
        addr: Some(addr),
        agent: Some(AGENT),
        uploaded: 0,
        downloaded: 0,
        left: Some(left),
        event,
        now: 1,
    }
}

fn admit(site: &Site, a: Asked<'_>) -> Result<Admission, Refusal> {
    site.admit(&a)
}

fn refused(site: &Site, a: Asked<'_>) -> &'static str {
    admit(site, a).unwrap_err().reason
}

const STARTED: AnnounceEvent = AnnounceEvent::Started;
const NONE: AnnounceEvent = AnnounceEvent::None;

#[test]
fn http_needs_a_clients_user_agent_and_udp_carries_none() {
    let s = site();
    let mut a = asked(1, 10, 1, 10, STARTED);
    a.agent = None;
    assert_eq!(refused(&s, a), INVALID_USER_AGENT.reason);
    let long = "x".repeat(65);
    let long: &'static str = Box::leak(long.into_boxed_str());
    assert_eq!(
        refused(
            &s,
            Asked {
                agent: Some(long),
                ..a
            }
        ),
        USER_AGENT_TOO_LONG.reason
    );
    for browser in [
        "Mozilla/5.0 (X11)",
        "Googlebot/2.1",
        "Opera/9.80",
        "unknown",
    ] {
        assert_eq!(
            refused(
                &s,
                Asked {
                    agent: Some(browser),
                    ..a
                }
            ),
            NOT_A_CLIENT.reason,
            "{browser}"
        );
    }
    let udp = Asked {
        protocol: Protocol::Udp,
        agent: None,
        ..a
    };
    assert!(admit(&s, udp).is_ok());
}

#[test]
fn blacklisted_prefixes_and_ports_are_refused() {
    let s = site();
    assert!(s.edit_blacklist(&[7, 7, 7], true));
    assert_eq!(
        refused(&s, asked(1, 10, 7, 10, STARTED)),
        BLACKLISTED_CLIENT.reason
    );
    assert!(s.edit_blacklist(&[7, 7, 7], false));
    assert!(admit(&s, asked(1, 10, 7, 10, STARTED)).is_ok());
    for port in [22u16, 80, 1023, 6346, 8080] {
        let mut a = asked(2, 10, 2, 10, STARTED);
        a.addr = Some(SocketAddr::new(a.source, port));
        assert_eq!(refused(&s, a), BLACKLISTED_PORT.reason, "{port}");
    }
}

#[test]
fn groups_and_download_rights() {
    let s = site();
    // User 6 is banned; then moved to each other refused group, then to none.
    for (group, refusal) in [
        (2, GROUP_BANNED),
        (3, GROUP_VALIDATING),
        (4, GROUP_DISABLED),
        (99, GROUP_NOT_FOUND),
    ] {
        s.put_user(user(6, group));
        assert_eq!(refused(&s, asked(6, 10, 1, 10, STARTED)), refusal.reason);
    }
    // A user who may not download keeps seeding.
    assert_eq!(
        refused(&s, asked(7, 10, 1, 10, STARTED)),
        DOWNLOAD_REVOKED.reason
    );
    assert!(admit(&s, asked(7, 10, 1, 0, STARTED)).is_ok());
}

#[test]
fn moderation_statuses_warn_without_peers_and_deleted_torrents_are_unregistered() {
    let s = site();
    for (id, text) in [(11, PENDING), (12, REJECTED), (13, POSTPONED)] {
        let adm = admit(&s, asked(1, id, 1, 0, STARTED)).unwrap();
        assert_eq!(adm.warning, Some(text));
        assert!(!adm.gets_peers);
    }
    assert_eq!(
        refused(&s, asked(1, 14, 1, 0, STARTED)),
        TORRENT_NOT_APPROVED.reason
    );
    assert!(s.remove_torrent(10));
    assert_eq!(
        refused(&s, asked(1, 10, 1, 0, STARTED)),
        TORRENT_DELETED.reason
    );
    let batch = s.take_batch(&[]);
    assert_eq!(batch.unregistered.len(), 1);
    assert_eq!(
        (
            batch.unregistered[0].user_id,
            batch.unregistered[0].info_hash
        ),
        (1, [10; 20])
    );
}

#[test]
fn a_stopped_client_must_be_known() {
    let s = site();
    assert_eq!(
        refused(&s, asked(1, 10, 1, 10, AnnounceEvent::Stopped)),
        STOPPED_UNKNOWN.reason
    );
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    let adm = admit(&s, asked(1, 10, 1, 10, AnnounceEvent::Stopped)).unwrap();
    assert!(
        adm.listed,
        "a stopped peer leaves the swarm through the store"
    );
    assert!(!adm.gets_peers);
    assert_eq!(s.torrent(10).unwrap().torrent.leechers, 0);
}

#[test]
fn at_most_three_clients_per_user_per_torrent() {
    let s = site();
    for peer in 1..=3 {
        admit(&s, asked(5, 10, peer, 0, STARTED)).unwrap();
    }
    let reason = refused(&s, asked(5, 10, 4, 0, STARTED));
    assert_eq!(
        reason,
        "You already have 3 peers on this torrent. Ignoring."
    );
    // One stops: room for another.
    admit(&s, asked(5, 10, 1, 0, AnnounceEvent::Stopped)).unwrap();
    admit(&s, asked(5, 10, 4, 0, STARTED)).unwrap();
}

#[test]
fn download_slots_keep_a_leecher_out_of_the_swarm_with_a_warning() {
    let s = site();
    // Group 1 has one slot: user 1 leeches torrent 10, then asks for torrent 17.
    assert!(admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap().listed);
    assert_eq!(s.user(1).unwrap().user.num_leeching, 1);
    let over = admit(&s, asked(1, 17, 1, 10, STARTED)).unwrap();
    assert!(!over.listed);
    assert!(!over.gets_peers);
    assert_eq!(over.warning, Some(SLOTS_FULL));
    // v0.3.1 `src/warning.rs` line 9: no full stop.
    assert_eq!(SLOTS_FULL, "Download slot limit reached");
    assert_eq!(s.torrent(17).unwrap().torrent.leechers, 0);
    // Seeding is never limited; the first leecher stays visible.
    assert!(admit(&s, asked(1, 16, 1, 0, STARTED)).unwrap().listed);
    assert!(admit(&s, asked(1, 10, 1, 5, NONE)).unwrap().listed);
    // VIPs have no slot limit.
    for t in [10, 17, 15] {
        assert!(admit(&s, asked(5, t, 1, 10, STARTED)).unwrap().listed);
    }
}

/// Sooner than the minimum: counted, no peers, and no warning since UNIT3D-Announce v0.3
/// silenced `Rate limit exceeded. Please wait.` (v0.3.1 `src/warning.rs` lines 18-22,
/// `AnnounceWarning::is_silent`).
#[test]
fn announcing_again_within_the_minimum_is_counted_without_peers_or_warning() {
    let s = site_with(Unit3dConfig::default());
    let first = admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    assert!(first.gets_peers);
    let again = admit(&s, asked(1, 10, 1, 5, NONE)).unwrap();
    assert_eq!(again.warning, None);
    assert!(!again.gets_peers);
    assert_eq!(s.torrent(10).unwrap().clients.len(), 1);
    let interval = again.interval.unwrap();
    assert!((1800..=3600).contains(&interval), "{interval}");
}

/// A client's first `completed` is exempt from the minimum interval, so that the new seeder
/// is sent leechers; a second one is not; a `stopped` makes the next one a first again
/// (UNIT3D-Announce v0.3.1 `src/announce.rs` lines 564-574, `has_sent_completed`, and lines
/// 462-469: a stopped client is dropped).
#[test]
fn the_first_completed_within_the_minimum_is_sent_leechers() {
    let s = site_with(Unit3dConfig::default());
    const COMPLETED: AnnounceEvent = AnnounceEvent::Completed;
    admit(&s, asked(2, 10, 2, 10, STARTED)).unwrap();
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    let done = admit(&s, asked(1, 10, 1, 0, COMPLETED)).unwrap();
    assert!(done.gets_peers, "the first completed is sent leechers");
    assert_eq!(done.warning, None);
    assert_eq!(s.torrent(10).unwrap().torrent.times_completed, 1);
    let again = admit(&s, asked(1, 10, 1, 0, COMPLETED)).unwrap();
    assert!(!again.gets_peers, "a second completed within the minimum");
    admit(&s, asked(1, 10, 1, 0, AnnounceEvent::Stopped)).unwrap();
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    assert!(
        admit(&s, asked(1, 10, 1, 0, COMPLETED)).unwrap().gets_peers,
        "after a stop the next completed is a first again"
    );
}

/// Pending, rejected and postponed torrents: a warning, no peers and an interval of 30
/// seconds (UNIT3D-Announce v0.3.1 `src/error.rs` lines 94-103).
#[test]
fn moderation_warnings_come_with_an_interval_of_30_seconds() {
    let s = site_with(Unit3dConfig::default());
    for id in [11, 12, 13] {
        let adm = admit(&s, asked(1, id, 1, 0, STARTED)).unwrap();
        assert_eq!(adm.interval, Some(MODERATION_INTERVAL));
        assert_eq!(MODERATION_INTERVAL, 30);
        assert!(!adm.gets_peers);
    }
    let approved = admit(&s, asked(1, 10, 1, 0, STARTED)).unwrap();
    assert!((1800..=3600).contains(&approved.interval.unwrap()));
}

#[test]
fn peer_lists_are_rate_limited_per_user() {
    let s = site_with(Unit3dConfig {
        announce_min: 0,
        seed_list_rate_limits: vec![(3600, 2)],
        ..Unit3dConfig::default()
    });
    let gets = |t| admit(&s, asked(5, t, 1, 10, STARTED)).unwrap().gets_peers;
    assert!(gets(10));
    assert!(gets(15));
    assert!(!gets(16), "a third list of seeders within the hour");
    // Lists of leechers (for seeders) are counted apart.
    assert!(admit(&s, asked(5, 17, 1, 0, STARTED)).unwrap().gets_peers);
}

#[test]
fn factors_are_the_best_upload_and_the_lowest_download() {
    let s = site();
    let f = |user, t| {
        let adm = admit(&s, asked(user, t, user as u8, 0, STARTED)).unwrap();
        (adm.upload_factor, adm.download_factor)
    };
    assert_eq!(f(1, 10), (1.0, 1.0));
    assert_eq!(f(1, 15), (1.0, 0.75), "25% free");
    assert_eq!(f(1, 16), (2.0, 1.0), "double upload");
    assert_eq!(
        f(5, 15),
        (2.0, 0.0),
        "the VIP group: free and double upload"
    );
    assert!(s.edit_featured(17, true));
    assert_eq!(f(2, 17), (2.0, 0.0), "featured: free and double upload");
    assert!(s.edit_token(3, 10, true));
    assert_eq!(f(3, 10), (1.0, 0.0), "a freeleech token on the torrent");
    assert_eq!(f(3, 15), (1.0, 0.75), "the token is for torrent 10 only");
    assert!(s.edit_personal_freeleech(4, true));
    assert_eq!(f(4, 16), (2.0, 0.0), "personal freeleech");
    let s = site_with(Unit3dConfig {
        announce_min: 0,
        download_factor: 50,
        donor_download_factor: 20,
        lifetime_upload_factor: 150,
        lifetime_download_factor: 0,
        ..Unit3dConfig::default()
    });
    let f = |user, t| {
        let adm = admit(&s, asked(user, t, user as u8, 0, STARTED)).unwrap();
        (adm.upload_factor, adm.download_factor)
    };
    assert_eq!(f(1, 10), (1.0, 0.5), "global half leech");
    assert_eq!(f(8, 10), (1.0, 0.2), "donor");
    assert_eq!(f(9, 10), (1.5, 0.0), "lifetime donor");
}

#[test]
fn a_users_own_clients_are_hidden_and_completion_is_counted_once() {
    let s = site();
    admit(&s, asked(5, 10, 1, 10, STARTED)).unwrap();
    let second = admit(&s, asked(5, 10, 2, 10, STARTED)).unwrap();
    assert_eq!(second.hide, vec!["192.0.2.1:50001".parse().unwrap()]);
    let other = admit(&s, asked(2, 10, 3, 10, STARTED)).unwrap();
    assert!(other.hide.is_empty());
    let t = s.torrent(10).unwrap().torrent;
    assert_eq!((t.seeders, t.leechers, t.times_completed), (0, 3, 0));
    admit(&s, asked(5, 10, 1, 0, AnnounceEvent::Completed)).unwrap();
    admit(&s, asked(5, 10, 1, 0, NONE)).unwrap();
    let t = s.torrent(10).unwrap().torrent;
    assert_eq!((t.seeders, t.leechers, t.times_completed), (1, 2, 1));
    let u = s.user(5).unwrap().user;
    assert_eq!((u.num_seeding, u.num_leeching), (1, 1));
}

#[test]
fn a_batch_joins_the_ledgers_sums_with_the_clients_and_goes_back_when_a_write_fails() {
    let s = site();
    let mut a = asked(1, 15, 1, 10, STARTED);
    a.uploaded = 70;
    a.downloaded = 30;
    admit(&s, a).unwrap();
    let sums = [Delta {
        user_id: 1,
        torrent_id: 15,
        uploaded: 70,
        downloaded: 22,
        uploaded_raw: 70,
        downloaded_raw: 30,
        seed_seconds: 0,
        leech_seconds: 40,
        completed: false,
        completed_at: None,
    }];
    let batch = s.take_batch(&sums);
    assert_eq!(batch.peers.len(), 1);
    let h = &batch.history[0];
    assert_eq!(
        (
            h.credited_downloaded,
            h.actual_downloaded,
            h.client_downloaded
        ),
        (22, 30, 30)
    );
    assert_eq!((h.seeder, h.active, h.agent.as_str()), (false, true, AGENT));
    assert_eq!(
        (batch.users[0].uploaded, batch.users[0].downloaded),
        (70, 22)
    );
    assert_eq!(batch.torrents[0].balance, 40);
    assert!(s.take_batch(&[]).is_empty(), "taken");
    s.put_back(&batch);
    let again = s.take_batch(&[]);
    assert_eq!((again.peers.len(), again.torrents.len()), (1, 1));
}

#[test]
fn sums_written_after_their_clients_keep_the_rows_client_state() {
    let s = site();
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    let sums = |uploaded| {
        [Delta {
            uploaded,
            uploaded_raw: uploaded,
            user_id: 1,
            torrent_id: 10,
            ..Delta::default()
        }]
    };
    // A write fails: the clients go back, the ledger's sums are written again first.
    let failed = s.take_batch(&sums(50));
    s.put_back(&failed);
    let mut a = asked(1, 10, 1, 0, NONE);
    a.uploaded = 80;
    admit(&s, a).unwrap();
    let retried = s.take_batch(&sums(50));
    assert_eq!(retried.peers.len(), 1, "the retry takes the clients");
    // The sums of the announce made meanwhile come next, without their client.
    let next = s.take_batch(&sums(30));
    assert!(next.peers.is_empty());
    let h = &next.history[0];
    assert_eq!(
        (
            h.agent.as_str(),
            h.client_uploaded,
            h.seeder,
            h.active,
            h.actual_uploaded
        ),
        (AGENT, 80, true, true, 30)
    );
}

/// A row of the `peers` table as the last announce server left it.
fn row(user: u32, torrent: u32, peer: u8, seeder: bool, active: bool) -> Peer {
    Peer {
        user_id: user,
        torrent_id: torrent,
        peer_id: [peer; 20],
        ip: "192.0.2.1".parse().unwrap(),
        port: 50000 + u16::from(peer),
        agent: AGENT.into(),
        uploaded: 1000 * u64::from(peer),
        downloaded: 500,
        left: if seeder { 0 } else { 10 },
        seeder,
        active,
        visible: true,
        connectable: false,
        created_at: 1_700_000_000,
        updated_at: 1_700_000_100,
    }
}

#[test]
fn at_start_stale_columns_are_written_again_and_the_active_clients_kept_for_the_ledger() {
    // Torrent 10's columns agree with its clients; 17's count clients long gone.
    let mut listed = torrent(10, Status::Approved);
    (listed.seeders, listed.leechers) = (1, 1);
    let mut stale = torrent(17, Status::Approved);
    stale.seeders = 4;
    let data = SiteData {
        groups: vec![group(1, "user", None)],
        users: vec![user(1, 1), user(2, 1)],
        torrents: vec![listed, stale],
        peers: vec![
            row(1, 10, 1, true, true),
            row(2, 10, 2, false, true),
            row(2, 10, 3, false, false),
        ],
        ..SiteData::default()
    };
    let members = Arc::new(Members::new(&Roster::default(), false));
    let s = Site::new(Unit3dConfig::default(), members, data);
    let figures: Vec<(u32, u32)> = s
        .take_batch(&[])
        .torrents
        .iter()
        .map(|t| (t.torrent_id, t.seeders))
        .collect();
    assert_eq!(figures, vec![(17, 0)]);
    // The active clients, with their last reports, for the ledger.
    let mut active: Vec<(u32, u64, u64)> = s
        .active_clients()
        .iter()
        .map(|p| (p.user_id, p.uploaded, p.downloaded))
        .collect();
    active.sort();
    assert_eq!(active, vec![(1, 1000, 500), (2, 2000, 500)]);
}

#[test]
fn silent_clients_become_inactive_then_are_forgotten() {
    let s = site();
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    let _ = s.take_batch(&[]);
    let now = shoal_unit3d::site::unix_now();
    s.expire(now + 7200);
    assert_eq!(s.torrent(10).unwrap().torrent.leechers, 0);
    assert_eq!(s.user(1).unwrap().user.num_leeching, 0);
    let b = s.take_batch(&[]);
    assert!(!b.peers[0].active);
    s.expire(now + 1_814_400);
    assert!(s.torrent(10).unwrap().clients.is_empty());
    assert_eq!(s.take_batch(&[]).peer_deletions, vec![(10, 1, [1; 20])]);
}

#[test]
fn the_peers_table_is_the_truth_for_the_figures_at_start() {
    let mut data = SiteData {
        groups: vec![group(1, "user", None)],
        users: vec![user(1, 1), user(2, 1)],
        torrents: vec![Torrent {
            seeders: 5,
            leechers: 7,
            times_completed: 9,
            ..torrent(10, Status::Approved)
        }],
        ..SiteData::default()
    };
    data.peers = vec![
        row(1, 10, 1, true, true),
        row(2, 10, 2, false, true),
        row(2, 10, 3, false, false),
    ];
    let members = Arc::new(Members::new(&Roster::default(), false));
    let s = Site::new(Unit3dConfig::default(), members, data);
    let t = s.torrent(10).unwrap();
    assert_eq!(
        (
            t.torrent.seeders,
            t.torrent.leechers,
            t.torrent.times_completed
        ),
        (1, 1, 9)
    );
    assert_eq!(t.clients.len(), 3);
    assert_eq!(s.user(2).unwrap().user.num_leeching, 1);
    assert_eq!(
        s.listed_peers().len(),
        2,
        "the inactive client is not listed"
    );
}

/// A user seeding a torrent from two clients stops one: the `history` row stays active; when
/// the last stops it goes inactive (UNIT3D-Announce v0.3 `src/announce.rs` lines 478-484,
/// `is_active_after_stop`, and line 910).
#[test]
fn history_stays_active_on_a_stop_while_the_user_has_another_client() {
    let s = site();
    admit(&s, asked(5, 10, 1, 0, STARTED)).unwrap();
    admit(&s, asked(5, 10, 2, 0, STARTED)).unwrap();
    let _ = s.take_batch(&[]);
    admit(&s, asked(5, 10, 1, 0, AnnounceEvent::Stopped)).unwrap();
    let b = s.take_batch(&[]);
    assert!(!b.peers[0].active, "the stopped client's row");
    assert!(b.history[0].active, "the user still seeds from client 2");
    admit(&s, asked(5, 10, 2, 0, AnnounceEvent::Stopped)).unwrap();
    let b = s.take_batch(&[]);
    assert!(!b.history[0].active, "the last client stopped");
}

/// A torrent the site deleted before the start is loaded (UNIT3D-Announce v0.3.1
/// `src/store/torrent.rs` lines 27-52): its announces are refused as deleted and recorded
/// as unregistered (`src/announce.rs` lines 397-411), and its clients are not listed.
#[test]
fn a_torrent_deleted_before_the_start_is_refused_by_name() {
    let data = SiteData {
        groups: vec![group(1, "user", None)],
        users: vec![user(1, 1), user(2, 1)],
        torrents: vec![Torrent {
            is_deleted: true,
            ..torrent(16, Status::Approved)
        }],
        peers: vec![row(2, 16, 2, true, true)],
        ..SiteData::default()
    };
    let members = Arc::new(Members::new(&Roster::default(), false));
    let s = Site::new(Unit3dConfig::default(), members, data);
    assert_eq!(
        refused(&s, asked(1, 16, 1, 0, STARTED)),
        TORRENT_DELETED.reason
    );
    let batch = s.take_batch(&[]);
    assert_eq!(batch.unregistered.len(), 1);
    assert_eq!(batch.unregistered[0].info_hash, [16; 20]);
    assert!(s.listed_peers().is_empty());
}

/// A seeder that turns leecher while its user is over their download slots is kept out of
/// the swarm, as a new leecher is. UNIT3D-Announce v0.3.1 keeps it in (`src/announce.rs`
/// lines 508-511 judge the old visibility with the new seeder flag); shoal does not, so that
/// announcing once as a seeder does not open a way past the slots (docs/unit3d.md).
#[test]
fn a_seeder_turning_leecher_over_its_slots_is_kept_out() {
    let s = site();
    // Group 1 has one slot: user 1 leeches torrent 10 and seeds 17.
    admit(&s, asked(1, 10, 1, 10, STARTED)).unwrap();
    assert!(admit(&s, asked(1, 17, 1, 0, STARTED)).unwrap().listed);
    let turned = admit(&s, asked(1, 17, 1, 10, NONE)).unwrap();
    assert!(!turned.listed);
    assert_eq!(turned.warning, Some(SLOTS_FULL));
}
