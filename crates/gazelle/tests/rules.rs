//! Ocelot's rules as shoal's Gazelle schema applies them, one test per rule: the site in
//! memory asked directly through the core's `SiteRules` seam, and the control calls that
//! change it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use shoal_accounts::Delta;
use shoal_gazelle::control::Control;
use shoal_gazelle::model::{LeechType, SiteData, Torrent, User};
use shoal_gazelle::rules::{LEECHING_FORBIDDEN, NOT_WHITELISTED, UNREGISTERED};
use shoal_gazelle::{GazelleConfig, Site};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_tracker::private::{Members, Roster};
use shoal_tracker::site::{Asked, SiteRules};
use shoal_tracker::Protocol;

const SITE_PW: &str = "ssssssssssssssssssssssssssssssss";
const REPORT_PW: &str = "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr";

fn passkey(user: u32) -> String {
    format!("{user:032}")
}

fn hash(t: u32) -> [u8; 20] {
    [t as u8; 20]
}

/// Users 1 (may leech), 2 (may not), 3 (protected); torrents 10 (normal), 11 (free),
/// 12 (neutral); a token of user 1 on torrent 10.
fn site() -> (Arc<Site>, Arc<Members>) {
    let members = Arc::new(Members::new(&Roster::default(), false));
    let user = |id, can_leech, protected| User {
        id,
        passkey: passkey(id),
        can_leech,
        protected,
    };
    let torrent = |id, leech_type| Torrent {
        id,
        info_hash: hash(id),
        leech_type,
        snatched: 0,
    };
    let data = SiteData {
        users: vec![
            user(1, true, false),
            user(2, false, false),
            user(3, true, true),
        ],
        torrents: vec![
            torrent(10, LeechType::Normal),
            torrent(11, LeechType::Free),
            torrent(12, LeechType::Neutral),
        ],
        tokens: vec![],
        whitelist: vec![],
    };
    let site = Arc::new(Site::new(GazelleConfig::default(), members.clone(), data));
    (site, members)
}

fn control(site: &Arc<Site>) -> Control {
    Control::new(site.clone(), SITE_PW.into(), REPORT_PW.into())
}

fn update(site: &Arc<Site>, query: &str) -> String {
    let reply = control(site)
        .answer(&format!("/{SITE_PW}/update?{query}"))
        .expect("a control call");
    String::from_utf8(reply.body).unwrap()
}

fn pct(h: &[u8]) -> String {
    h.iter().map(|b| format!("%{b:02X}")).collect()
}

struct Ann {
    user: u32,
    torrent: u32,
    peer: u8,
    port: u16,
    up: u64,
    down: u64,
    left: u64,
    event: AnnounceEvent,
}

fn ann(user: u32, torrent: u32, peer: u8) -> Ann {
    Ann {
        user,
        torrent,
        peer,
        port: 6881,
        up: 0,
        down: 0,
        left: 100,
        event: AnnounceEvent::Started,
    }
}

/// The site, and an announce it has served once (user, torrent, peer).
fn announced(user: u32, torrent: u32, peer: u8) -> (Arc<Site>, Ann) {
    let (site, _) = site();
    let a = ann(user, torrent, peer);
    ask(&site, &a).unwrap();
    (site, a)
}

fn ask(
    site: &Site,
    a: &Ann,
) -> Result<shoal_tracker::site::Admission, shoal_tracker::site::Refusal> {
    let ih = InfoHash(hash(a.torrent));
    let ip: IpAddr = format!("10.0.0.{}", a.peer).parse().unwrap();
    let asked = Asked {
        protocol: Protocol::Http,
        source: ip,
        user_id: u64::from(a.user),
        torrent_id: u64::from(a.torrent),
        info_hash: &ih,
        peer_id: PeerId([a.peer; 20]),
        addr: Some(SocketAddr::new(ip, a.port)),
        agent: Some("qBittorrent/4.6.2"),
        uploaded: a.up,
        downloaded: a.down,
        left: Some(a.left),
        event: a.event,
        now: 0,
    };
    site.admit(&asked)
}

#[test]
fn normal_torrent_counts_both_ways_and_interval_carries_jitter() {
    let (site, _) = site();
    let adm = ask(&site, &ann(1, 10, 1)).unwrap();
    assert_eq!((adm.download_factor, adm.upload_factor), (1.0, 1.0));
    assert!(adm.listed && adm.gets_peers && adm.warning.is_none());
    let i = adm.interval.unwrap();
    assert!((1800..=1800 + 240).contains(&i), "{i}");
    let t = site.torrent(&hash(10)).unwrap();
    assert_eq!((t.seeders, t.leechers), (0, 1));
}

#[test]
fn freeleech_counts_no_download_and_neutral_neither() {
    let (site, _) = site();
    let free = ask(&site, &ann(1, 11, 1)).unwrap();
    assert_eq!((free.download_factor, free.upload_factor), (0.0, 1.0));
    let neutral = ask(&site, &ann(1, 12, 1)).unwrap();
    assert_eq!((neutral.download_factor, neutral.upload_factor), (0.0, 0.0));
    // The site changes a torrent's type: from the next announce on.
    assert_eq!(
        update(
            &site,
            &format!(
                "action=update_torrent&info_hash={}&freetorrent=1",
                pct(&hash(10))
            )
        ),
        "success"
    );
    let now_free = ask(&site, &ann(1, 10, 1)).unwrap();
    assert_eq!(now_free.download_factor, 0.0);
    let hashes = pct(&[hash(10), hash(11)].concat());
    update(
        &site,
        &format!("action=update_torrents&info_hashes={hashes}&freetorrent=2"),
    );
    assert_eq!(
        site.torrent(&hash(11)).unwrap().torrent.leech_type,
        LeechType::Neutral
    );
    assert_eq!(
        site.torrent(&hash(10)).unwrap().torrent.leech_type,
        LeechType::Neutral
    );
}

#[test]
fn a_token_frees_the_download_records_what_it_saved_and_is_used_up_by_the_snatch() {
    let (site, _) = site();
    update(
        &site,
        &format!("action=add_token&info_hash={}&userid=1", pct(&hash(10))),
    );
    let mut a = ann(1, 10, 1);
    assert_eq!(ask(&site, &a).unwrap().download_factor, 0.0);
    a.event = AnnounceEvent::None;
    a.down = 700;
    a.left = 30;
    ask(&site, &a).unwrap();
    a.event = AnnounceEvent::Completed;
    a.down = 1000;
    a.left = 0;
    ask(&site, &a).unwrap();
    let batch = site.take_batch(&[]);
    assert_eq!(batch.tokens.len(), 1);
    assert_eq!(batch.tokens[0].downloaded, 1000, "700 then 300");
    assert_eq!(batch.snatches.len(), 1);
    assert_eq!(site.take_expired_tokens(), vec![(1, 10)]);
    // Used up: the next download counts.
    let mut b = ann(1, 10, 2);
    b.left = 5;
    assert_eq!(ask(&site, &b).unwrap().download_factor, 1.0);
}

#[test]
fn a_snatch_is_counted_once_per_completion_of_a_leecher() {
    let (site, mut a) = announced(1, 10, 1);
    a.event = AnnounceEvent::Completed;
    a.left = 0;
    ask(&site, &a).unwrap();
    // Completed again from a seeder: no second snatch.
    ask(&site, &a).unwrap();
    let t = site.torrent(&hash(10)).unwrap();
    assert_eq!((t.seeders, t.leechers, t.torrent.snatched), (1, 0, 1));
    let batch = site.take_batch(&[]);
    assert_eq!(batch.snatches.len(), 1);
    let figures = batch.torrents.iter().find(|f| f.torrent_id == 10).unwrap();
    assert_eq!((figures.seeders, figures.snatched), (1, 1));
}

#[test]
fn a_user_who_may_not_leech_is_recorded_but_unlisted_and_sent_no_peers() {
    let (site, _) = site();
    let adm = ask(&site, &ann(2, 10, 1)).unwrap();
    assert!(!adm.listed && !adm.gets_peers);
    assert_eq!(adm.warning, Some(LEECHING_FORBIDDEN));
    assert_eq!(site.torrent(&hash(10)).unwrap().leechers, 1, "recorded");
    // Seeding is allowed.
    let mut s = ann(2, 10, 2);
    s.left = 0;
    let adm = ask(&site, &s).unwrap();
    assert!(adm.listed && adm.gets_peers && adm.warning.is_none());
    // The site gives the right back.
    update(
        &site,
        &format!(
            "action=update_user&passkey={}&can_leech=1&visible=1",
            passkey(2)
        ),
    );
    assert!(ask(&site, &ann(2, 10, 1)).unwrap().gets_peers);
}

#[test]
fn the_whitelist_refuses_other_clients_and_empty_means_everyone() {
    let (site, _) = site();
    assert!(ask(&site, &ann(1, 10, 1)).is_ok());
    update(&site, "action=add_whitelist&peer_id=-qB");
    assert_eq!(ask(&site, &ann(1, 10, 1)).unwrap_err(), NOT_WHITELISTED);
    update(
        &site,
        "action=edit_whitelist&old_peer_id=-qB&new_peer_id=%01",
    );
    // The prefix is taken as sent (Ocelot does not decode it): "%01", no client's.
    assert!(ask(&site, &ann(1, 10, 1)).is_err());
    update(&site, "action=remove_whitelist&peer_id=%01");
    assert!(ask(&site, &ann(1, 10, 1)).is_ok());
}

#[test]
fn a_deleted_torrent_tells_its_reason_then_is_unregistered() {
    let (site, members) = site();
    ask(&site, &ann(1, 10, 1)).unwrap();
    update(
        &site,
        &format!(
            "action=delete_torrent&id=10&info_hash={}&reason=0",
            pct(&hash(10))
        ),
    );
    let e = ask(&site, &ann(1, 10, 1)).unwrap_err();
    assert_eq!(e.reason, "Unregistered torrent: Dupe");
    // Still registered, so that the announce reaches the rules and hears the reason.
    assert!(members.torrent(&InfoHash(hash(10))).is_some());
    // Its client is gone: written inactive.
    let batch = site.take_batch(&[]);
    assert!(batch.peers.iter().any(|p| p.torrent_id == 10 && !p.active));
    // After del_reason_lifetime the reaper forgets the reason and the registration.
    site.reap(shoal_gazelle::site::unix_now() + 86_400);
    assert_eq!(ask(&site, &ann(1, 10, 1)).unwrap_err().reason, UNREGISTERED);
    assert!(members.torrent(&InfoHash(hash(10))).is_none());
    // Without a known code: the plain text.
    update(
        &site,
        &format!(
            "action=delete_torrent&info_hash={}&reason=99",
            pct(&hash(11))
        ),
    );
    assert_eq!(ask(&site, &ann(1, 11, 1)).unwrap_err().reason, UNREGISTERED);
}

#[test]
fn own_clients_are_hidden_and_protected_addresses_never_written() {
    let (site, _) = site();
    ask(&site, &ann(3, 10, 1)).unwrap();
    let adm = ask(&site, &ann(3, 10, 2)).unwrap();
    assert_eq!(
        adm.hide,
        vec!["10.0.0.1:6881".parse::<SocketAddr>().unwrap()]
    );
    ask(&site, &ann(1, 10, 3)).unwrap();
    let batch = site.take_batch(&[]);
    for p in &batch.peers {
        assert_eq!(p.ip.is_none(), p.user_id == 3, "{p:?}");
    }
}

#[test]
fn stopped_clients_leave_their_lists_and_are_written_inactive() {
    let (site, mut a) = announced(1, 10, 1);
    a.event = AnnounceEvent::Stopped;
    let adm = ask(&site, &a).unwrap();
    assert!(!adm.gets_peers && adm.listed, "the store takes the stop");
    let t = site.torrent(&hash(10)).unwrap();
    assert_eq!((t.seeders, t.leechers, t.clients.len()), (0, 0, 0));
    assert_eq!(site.user(1).unwrap().leeching, 0);
    let batch = site.take_batch(&[]);
    assert_eq!(batch.peers.len(), 1);
    assert!(!batch.peers[0].active);
}

#[test]
fn silent_clients_are_reaped() {
    let (site, _) = site();
    ask(&site, &ann(1, 10, 1)).unwrap();
    site.take_batch(&[]);
    site.reap(shoal_gazelle::site::unix_now() + 7201);
    let t = site.torrent(&hash(10)).unwrap();
    assert_eq!((t.leechers, t.clients.len()), (0, 0));
    let batch = site.take_batch(&[]);
    assert!(!batch.peers[0].active);
    assert_eq!(batch.torrents[0].leechers, 0);
}

#[test]
fn users_come_and_go_and_change_passkeys() {
    let (site, members) = site();
    update(
        &site,
        &format!("action=add_user&passkey={}&id=7&visible=0", passkey(7)),
    );
    assert!(members.user(&passkey(7)).is_some());
    assert!(site.user(7).unwrap().user.protected);
    update(
        &site,
        &format!(
            "action=change_passkey&oldpasskey={}&newpasskey={}",
            passkey(7),
            passkey(8)
        ),
    );
    assert!(members.user(&passkey(7)).is_none());
    assert_eq!(members.user(&passkey(8)).unwrap().id, 7);
    update(
        &site,
        &format!("action=remove_users&passkeys={}{}", passkey(8), passkey(1)),
    );
    assert!(members.user(&passkey(8)).is_none() && members.user(&passkey(1)).is_none());
    update(&site, &format!("action=remove_user&passkey={}", passkey(2)));
    assert!(members.user(&passkey(2)).is_none());
}

#[test]
fn the_site_changes_interval_and_jitter() {
    let (site, _) = site();
    update(
        &site,
        "action=update_announce_interval&new_announce_interval=900",
    );
    update(&site, "action=update_announce_jitter&new_announce_jitter=0");
    assert_eq!(ask(&site, &ann(1, 10, 1)).unwrap().interval, Some(900));
    let bad = update(
        &site,
        "action=update_announce_interval&new_announce_interval=x",
    );
    assert!(bad.contains("failure reason"), "{bad}");
    assert_eq!(site.interval(), (900, 0));
}

#[test]
fn ledger_sums_become_user_gains_and_torrent_balance() {
    let (site, _) = site();
    ask(&site, &ann(1, 10, 1)).unwrap();
    let sums = [Delta {
        user_id: 1,
        torrent_id: 10,
        uploaded: 50,
        downloaded: 0,
        uploaded_raw: 50,
        downloaded_raw: 80,
        ..Delta::default()
    }];
    let batch = site.take_batch(&sums);
    assert_eq!(
        (batch.users[0].uploaded, batch.users[0].downloaded),
        (50, 0)
    );
    assert_eq!(batch.torrents[0].balance, -30);
    // A failed write puts the site's part back.
    site.put_back(&batch);
    let again = site.take_batch(&[]);
    assert_eq!(again.peers.len(), 1);
    assert_eq!(again.torrents.len(), 1);
}
