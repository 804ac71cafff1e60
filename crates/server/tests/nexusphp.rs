//! A NexusPHP site on shoal, end to end: a real MariaDB (strict mode) holding NexusPHP's own
//! schema as it ships (`tests/fixtures/nexusphp.sql`, the 1.10 line's
//! `database/schema/mysql-schema.sql`) and rows inserted as the site inserts them, shoal
//! started with `[private] schema = "nexusphp"` on it, announces as NexusPHP's clients send
//! them (`/announce.php?passkey=`, `/api/announce?passkey=`; the same path in UDP's BEP 41
//! URL data and as a WebSocket URL), NexusPHP's refusals, the promotion factors, the rows
//! written in `users`, `snatched`, `torrents` and `peers`, and a member, a torrent and a
//! passkey changed in the tables while shoal runs, in force within the poll's bound; the
//! faults (the database stopped, the shutdown, a restart); the cleanup's records in the
//! site's Redis (a real `redis-server`), through a Redis outage too.
//!
//! NexusPHP's windows run on the wall clock: a second announce of one member on one torrent
//! within 5 s is a re-announce (nothing written), within 30 s too frequent unless it is a
//! `completed` or `stopped` (`public/announce.php:42-66`). So each (member, torrent) below
//! announces `started`, then, after [`REPEAT`], `completed` or `stopped`.

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::site_schema::{browser_seeds, enc, pid, udp_session};
use common::{http_with_headers, temp_dir};
use shoal_server::Tracker;

#[allow(dead_code)]
#[path = "../../accounts/tests/servers/mod.rs"]
mod servers;

#[allow(dead_code)]
#[path = "../../accounts/tests/servers/site_db.rs"]
mod site_db;

use servers::redis as redis_server;

const TOKEN: &str = "nexusphp-test-admin-token";
/// Held by each test: the fault test stops the one MariaDB the tests share.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
const AGENT: &str = "qBittorrent/4.6.5";
const BASE: &str = "https://pt.example.org";
/// NexusPHP's schema as it ships.
const FIXTURE: &str = include_str!("../../../tests/fixtures/nexusphp.sql");
/// Longer than NexusPHP's re-announce window (5 s).
const REPEAT: Duration = Duration::from_secs(6);
/// A torrent in each of NexusPHP's promotion states (`sp_state` 1 to 7, in that order but
/// for 5 before 4).
const PROMOTED: [u8; 7] = [10, 11, 12, 13, 17, 18, 19];
/// The torrents' size: a client's `left` never above it.
const SIZE: u64 = 10_000;

/// A passkey as NexusPHP makes them: 32 hex characters.
fn passkey(user: u32) -> String {
    format!("{user:032x}")
}

fn info_hash(id: u8) -> [u8; 20] {
    [id; 20]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A client's peer id: client `n` of [`pid`] (qBittorrent's), or one given whole.
trait Client {
    fn peer_id(self) -> [u8; 20];
}

impl Client for u8 {
    fn peer_id(self) -> [u8; 20] {
        pid(self).0
    }
}

impl Client for [u8; 20] {
    fn peer_id(self) -> [u8; 20] {
        self
    }
}

/// The peer id of client `n` of the build whose prefix is `prefix` (`-TR2940-`).
fn peer_of(prefix: &[u8; 8], n: u8) -> [u8; 20] {
    let mut p = [n; 20];
    p[..8].copy_from_slice(prefix);
    p
}

/// One announce of client `peer` on torrent `torrent` to `path` with `key` as the
/// passkey in the query (none: no passkey); the body.
#[allow(clippy::too_many_arguments)]
fn announce_to(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    torrent: u8,
    peer: impl Client,
    port: u16,
    (uploaded, downloaded, left): (u64, u64, u64),
    event: &str,
    agent: &str,
) -> String {
    let key = key.map_or(String::new(), |k| format!("passkey={k}&"));
    let target = format!(
        "{path}?{key}info_hash={}&peer_id={}&port={port}&uploaded={uploaded}\
         &downloaded={downloaded}&left={left}&event={event}&compact=1",
        enc(&info_hash(torrent)),
        enc(&peer.peer_id()),
    );
    let (_, body) = http_with_headers(
        addr,
        "GET",
        &target,
        &format!("User-Agent: {agent}\r\n"),
        b"",
    );
    String::from_utf8_lossy(&body).into_owned()
}

/// Member `user`'s client `user` on torrent `torrent` at `/announce.php`.
fn announce(
    addr: SocketAddr,
    user: u32,
    torrent: u8,
    transfer: (u64, u64, u64),
    event: &str,
) -> String {
    announce_as(
        addr,
        (user, torrent, pid(user as u8).0, transfer, event, AGENT),
    )
}

/// One announce at `/announce.php`: member, torrent, the client's peer id, (uploaded,
/// downloaded, left), event, `User-Agent`.
type Ask<'a> = (u32, u8, [u8; 20], (u64, u64, u64), &'a str, &'a str);

/// Member `user`'s client `peer` (port 50,000 + `user`) as [`Ask`] says.
fn announce_as(addr: SocketAddr, (user, torrent, peer, transfer, event, agent): Ask) -> String {
    let key = passkey(user);
    let port = 50_000 + user as u16;
    announce_to(
        addr,
        "/announce.php",
        Some(&key),
        torrent,
        peer,
        port,
        transfer,
        event,
        agent,
    )
}

/// The rows a NexusPHP site holds: its settings (the site's address), one client family
/// (qBittorrent by its peer id), a category, members 1 alice, 2 bob (VIP), 3 carol
/// (disabled), 4 dave (parked), 5 erin (download privileges removed), 6 frank; torrents 10
/// normal, 11 free, 12 2x, 13 50%, 14 banned, 15 and 16 normal; bob's seeder on torrent 10 in
/// `peers` (from NexusPHP's own announce, before the switch).
async fn insert_site_rows(db: &site_db::SiteDb) {
    db.run(&format!(
        "insert into settings (name, value, autoload) values ('basic.BASEURL', '{BASE}', 'yes'); \
         insert into agent_allowed_family (id, family, start_name, peer_id_pattern, \
             peer_id_match_num, peer_id_matchtype, peer_id_start, agent_pattern, agent_match_num, \
             agent_matchtype, agent_start, exception, allowhttps) values \
             (1, 'qBittorrent', 'qBittorrent 4.0.0', '/^-qB/', 0, 'dec', '-qB4000-', '', 0, \
             'dec', '', 'no', 'yes'); \
         insert into categories (id, mode, name) values (401, 4, 'Movies');"
    ))
    .await;
    let mut users = Vec::new();
    for (id, name, class, enabled, parked, downloadpos) in [
        (1, "alice", 1, "yes", "no", "yes"),
        (2, "bob", 10, "yes", "no", "yes"),
        (3, "carol", 1, "no", "no", "yes"),
        (4, "dave", 1, "yes", "yes", "yes"),
        (5, "erin", 1, "yes", "no", "no"),
        (6, "frank", 1, "yes", "no", "yes"),
    ] {
        users.push(format!(
            "({id}, '{name}', '{name}@example.org', 'confirmed', NOW(), {class}, '{enabled}', \
             '{parked}', '{downloadpos}', '{}')",
            passkey(id)
        ));
    }
    db.run(&format!(
        "insert into users (id, username, email, status, added, class, enabled, parked, \
         downloadpos, passkey) values {}",
        users.join(", ")
    ))
    .await;
    let mut torrents = Vec::new();
    for (id, sp_state, banned) in [
        (10, 1, "no"),
        (11, 2, "no"),
        (12, 3, "no"),
        (13, 5, "no"),
        (14, 1, "yes"),
        (15, 1, "no"),
        (16, 1, "no"),
        (17, 4, "no"),
        (18, 6, "no"),
        (19, 7, "no"),
    ] {
        torrents.push(format!(
            "({id}, 0x{}, 'Torrent {id}', 'torrent-{id}.torrent', 401, {SIZE}, \
             NOW() - INTERVAL 1 DAY, 99, {sp_state}, '{banned}', 1)",
            hex(&info_hash(id))
        ));
    }
    db.run(&format!(
        "insert into torrents (id, info_hash, name, filename, category, size, added, owner, \
         sp_state, banned, approval_status) values {}",
        torrents.join(", ")
    ))
    .await;
    db.run(&format!(
        "insert into peers (torrent, peer_id, ip, port, uploaded, downloaded, to_go, seeder, \
             started, last_action, userid, agent, passkey, ipv4) values \
         (10, 0x{}, '127.0.0.2', 50002, 0, 0, 0, 'yes', NOW(), NOW(), 2, '{AGENT}', '{}', \
             '127.0.0.2'); \
         update torrents set seeders = 1 where id = 10",
        hex(&pid(2).0),
        passkey(2)
    ))
    .await;
}

/// What a test holds: its turn (the tests share one MariaDB, which one of them stops), a
/// runtime, and the site's database.
type Held = (
    std::sync::MutexGuard<'static, ()>,
    tokio::runtime::Runtime,
    site_db::SiteDb,
);

/// A test's turn on the one MariaDB the tests share (held while the test runs), a
/// runtime, and a fresh database `name` holding NexusPHP's schema and, with `rows`, the
/// site's rows; `None` where MariaDB is not available here (the test is skipped).
fn nexusphp_db(name: &str, rows: bool) -> Option<Held> {
    let turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = rt.block_on(site_db::SiteDb::create(name)) else {
        eprintln!("MariaDB is not available here: skipped");
        return None;
    };
    rt.block_on(db.run(FIXTURE));
    if rows {
        rt.block_on(insert_site_rows(&db));
    }
    Some((turn, rt, db))
}

/// [`nexusphp_db`] with the site's rows, and the test's own database `rdb` of a Redis,
/// emptied.
fn nexusphp_db_and_redis(name: &str, rdb: u8) -> Option<(Held, &'static redis_server::Redis)> {
    let held = nexusphp_db(name, true)?;
    Some((held, redis_server::redis_db(rdb)?))
}

/// shoal's config with `[private] schema = "nexusphp"` on the site's database.
fn nexusphp_config(dir: &std::path::Path, db: &site_db::SiteDb) -> shoal_server::Config {
    let mut c = common::private_config(dir, TOKEN);
    c.private.schema = "nexusphp".into();
    c.private.database = db.url.clone();
    c
}

#[test]
fn a_nexusphp_site_announces_over_http_and_udp_and_its_rows_are_written() {
    let Some((_turn, rt, db)) = nexusphp_db("nexusphp_e2e", true) else {
        return;
    };
    let dir = temp_dir("nexusphp-e2e");
    let mut c = nexusphp_config(&dir, &db);
    // Only the test's flushes write; the site's changes are read every 2 s.
    c.sites.nexusphp.flush_interval = 3600;
    c.sites.nexusphp.poll_interval = 2;
    let tracker = Tracker::start(c).unwrap();
    let http = tracker.http_addrs()[0];

    // alice (1) starts leeching a torrent in each promotion state: 10 normal, 11 free, 12
    // 2x, 13 50%, 17 2x free, 18 2x 50%, 19 30%; on 10 she is sent bob's seeder, resumed
    // from the site's `peers`.
    for t in PROMOTED {
        let a = announce(http, 1, t, (0, 0, SIZE), "started");
        assert!(a.contains("8:intervali"), "{a}");
        if t == 10 {
            assert!(a.contains("8:completei1e"), "bob seeds: {a}");
            assert!(a.contains("5:peers6:"), "bob's address: {a}");
        }
    }

    // NexusPHP's refusals, in its words.
    let refused = |user: u32, torrent: u8, agent: &str, port: u16| {
        let key = passkey(user);
        let pid = 40 + torrent;
        announce_to(
            http,
            "/announce.php",
            Some(&key),
            torrent,
            pid,
            port,
            (0, 0, 10),
            "started",
            agent,
        )
    };
    let texts = [
        (
            refused(42, 15, AGENT, 50_100),
            format!("Invalid passkey! Re-download the .torrent from {BASE}"),
        ),
        (
            refused(3, 15, AGENT, 50_100),
            "Your account is disabled!".to_string(),
        ),
        (
            refused(4, 15, AGENT, 50_100),
            "Your account is parked! (Read the FAQ)".to_string(),
        ),
        (
            refused(5, 15, AGENT, 50_100),
            "Your downloading privileges have been disabled! (Read the rules)".to_string(),
        ),
        (
            refused(6, 15, "Mozilla/5.0 (X11)", 50_100),
            "Browser access blocked!".to_string(),
        ),
        (refused(6, 14, AGENT, 50_100), "torrent banned".to_string()),
        (
            refused(6, 99, AGENT, 50_100),
            "torrent not registered with this tracker".to_string(),
        ),
        (
            refused(6, 13, AGENT, 6881),
            "Port 6881 is blacklisted.".to_string(),
        ),
    ];
    for (body, text) in &texts {
        assert!(
            body.contains(&format!("14:failure reason{}:{text}", text.len())),
            "{text}: {body}"
        );
    }
    // A client off the allow list (its peer id is not qBittorrent's).
    let target = format!(
        "/announce.php?passkey={}&info_hash={}&peer_id=-XX1000-000000000000&port=50106\
         &uploaded=0&downloaded=0&left=10&event=started",
        passkey(6),
        enc(&info_hash(12)),
    );
    let (_, body) = http_with_headers(http, "GET", &target, "User-Agent: Xx/1.0\r\n", b"");
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("Banned Client, Please goto"), "{body}");
    // No passkey; then NexusPHP 1.7's path, as torrents downloaded then carry it: served
    // the same.
    let key6 = passkey(6);
    #[rustfmt::skip]
    let asks = [
        ("/announce.php", None, 11, 61, 50_106, (0, 0, 10), "Require passkey"),
        ("/api/announce", Some(key6.as_str()), 15, 6, 50_006, (0, 0, 0), "8:intervali"),
    ];
    for (path, key, torrent, peer, port, transfer, says) in asks {
        let body = announce_to(
            http, path, key, torrent, peer, port, transfer, "started", AGENT,
        );
        assert!(body.contains(says), "{path}: {body}");
    }

    // frank (6) over UDP, the passkey in BEP 41 URL data as NexusPHP's path: leeches 10.
    let url = format!("/announce.php?passkey={}", passkey(6));
    let udp = tracker.udp_addrs()[0];
    let (_, seeders) = udp_session(udp, &url, (info_hash(10), 6, 50_016), (SIZE, SIZE), (0, 0));
    assert_eq!(seeders, 1, "bob");

    // bob (2) seeds torrent 16 from a browser over WebTorrent, NexusPHP's path and query
    // as the WebSocket URL.
    let path = format!("/announce.php?passkey={}", passkey(2));
    browser_seeds(&rt, http, &path, info_hash(16), 22);

    // alice completes the seven torrents, each 10,000 bytes down and 2,000 up.
    std::thread::sleep(REPEAT);
    for t in PROMOTED {
        let a = announce(http, 1, t, (2_000, SIZE, 0), "completed");
        assert!(a.contains("8:intervali"), "{t}: {a}");
    }
    flush(&tracker);

    let n = |sql: &str| rt.block_on(db.number(&format!("select cast(({sql}) as signed)")));
    // users: the credit, promotion factors applied (`include/globalfunctions.php:1032-1139`,
    // `app/Models/Torrent.php:85-125`): down 10,000 (normal) + 0 (free) + 10,000 (2x) +
    // 5,000 (50%) + 0 (2x free) + 5,000 (2x 50%) + 3,000 (30%); up 2,000 each, 4,000 on
    // the three 2x.
    assert_eq!(n("select downloaded from users where id = 1"), 33_000);
    assert_eq!(n("select uploaded from users where id = 1"), 20_000);
    assert_eq!(
        n("select clientselect from users where id = 1"),
        1,
        "the family"
    );
    assert_eq!(
        n("select count(*) from users where id = 1 and last_announce_at is not null"),
        1
    );
    // snatched: the actual bytes, finished (`public/announce.php:496-507`).
    for t in PROMOTED {
        let row = |col: &str| {
            n(&format!(
                "select {col} from snatched where userid = 1 and torrentid = {t}"
            ))
        };
        assert_eq!(row("downloaded"), SIZE as i64, "{t}");
        assert_eq!(row("uploaded"), 2_000, "{t}");
        assert_eq!(row("to_go"), 0, "{t}");
        assert_eq!(
            row("finished = 'yes' and completedat is not null"),
            1,
            "{t}"
        );
        assert!(row("leechtime") >= 5, "{t}");
    }
    // torrents: shoal's counts, a completion each.
    assert_eq!(
        n("select seeders from torrents where id = 10"),
        2,
        "bob and alice"
    );
    assert_eq!(
        n("select leechers from torrents where id = 10"),
        1,
        "frank, over UDP"
    );
    for t in PROMOTED {
        assert_eq!(
            n(&format!(
                "select times_completed from torrents where id = {t}"
            )),
            1
        );
        assert_eq!(
            n(&format!(
                "select visible = 'yes' from torrents where id = {t}"
            )),
            1
        );
    }
    // peers: one row per client, over every protocol.
    assert_eq!(n("select count(*) from peers where torrent = 10"), 3);
    assert_eq!(
        n("select count(*) from peers where torrent = 10 and seeder = 'yes'"),
        2
    );
    assert_eq!(
        n(&format!(
            "select count(*) from peers where userid = 6 and torrent = 10 and passkey = '{key6}'"
        )),
        1
    );
    assert_eq!(
        n("select count(*) from peers where userid = 2 and torrent = 16 and seeder = 'yes'"),
        1,
        "WebTorrent"
    );
    assert_eq!(
        n("select count(*) from peers where userid = 6 and torrent = 15"),
        1,
        "/api/announce"
    );

    // The site adds a member and a torrent and changes alice's passkey: in force within the
    // poll's bound (15 s at most).
    let changed = Instant::now();
    rt.block_on(db.run(&format!(
        "insert into users (id, username, email, status, added, class, passkey) values \
             (7, 'grace', 'grace@example.org', 'confirmed', NOW(), 1, '{}'); \
         insert into torrents (id, info_hash, name, filename, category, size, added, owner) \
             values (20, 0x{}, 'Torrent 20', 'torrent-20.torrent', 401, {SIZE}, NOW(), 99); \
         update users set passkey = '{}' where id = 1",
        passkey(7),
        hex(&info_hash(20)),
        "a".repeat(32)
    )));
    let key7 = passkey(7);
    let served = loop {
        let a = announce_to(
            http,
            "/announce.php",
            Some(&key7),
            20,
            7,
            50_007,
            (0, 0, 0),
            "started",
            AGENT,
        );
        if a.contains("8:intervali") {
            break changed.elapsed();
        }
        assert!(
            changed.elapsed() < Duration::from_secs(15),
            "not in force in 15 s: {a}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!("a member and a torrent added were served after {served:?}");
    let new_key = "a".repeat(32);
    let a = announce_to(
        http,
        "/announce.php",
        Some(&new_key),
        20,
        1,
        50_001,
        (0, 0, SIZE),
        "started",
        AGENT,
    );
    assert!(a.contains("8:intervali"), "alice's new passkey: {a}");
    let old = announce_to(
        http,
        "/announce.php",
        Some(&passkey(1)),
        15,
        1,
        50_001,
        (0, 0, SIZE),
        "started",
        AGENT,
    );
    assert!(
        old.contains("Invalid passkey!"),
        "alice's old passkey: {old}"
    );
    flush(&tracker);
    assert_eq!(n("select seeders from torrents where id = 20"), 1, "grace");
    assert_eq!(n("select leechers from torrents where id = 20"), 1, "alice");
    assert_eq!(n(&format!("select count(*) from peers where torrent = 20 and userid = 1 and passkey = '{new_key}'")), 1);
    drop(tracker);
    std::fs::remove_dir_all(dir).ok();
}

fn flush(tracker: &Tracker) {
    common::site_schema::flush(tracker, TOKEN);
}

/// 20 GiB: above the 10 GiB from which the wait and slot rules apply (`A:396`).
const DOWNLOADED_20_GIB: u64 = 20 << 30;

/// The rows of [`every_nexusphp_refusal_on_a_real_mariadb_in_its_words`], beside
/// [`insert_site_rows`]'s, as NexusPHP's pages and announces write them: the settings of its
/// admin page (torrents not approved hidden, the wait and slot systems on, cheater
/// detection at level 1 and 8000 Mbit/s); two client families (Transmission from 3.00;
/// Deluge, with a banned build); members 21 ida to 34 vic (leo, 24, of class 12,
/// `authority.seebanned`; sam, 31, and tina, 32, 20 GiB down and nothing up); torrents 30
/// (not approved), 31 (100 bonus to buy, bought by olga, 27) and 32 (added a second ago);
/// and the members' clients that NexusPHP's own announces left in `peers`.
fn refusal_rows() -> String {
    let mut sql = String::from(
        "insert into settings (name, value, autoload) values \
             ('torrent.approval_status_none_visible', 'no', 'yes'), \
             ('main.waitsystem', 'yes', 'yes'), ('main.maxdlsystem', 'yes', 'yes'), \
             ('security.cheaterdet', '1', 'yes'), \
             ('system.maximum_upload_speed', '8000', 'yes'); \
         insert into agent_allowed_family (id, family, start_name, peer_id_pattern, \
             peer_id_match_num, peer_id_matchtype, peer_id_start, agent_pattern, \
             agent_match_num, agent_matchtype, agent_start, exception, allowhttps) values \
             (2, 'Transmission', 'Transmission 3.00', '/^-TR([0-9])([0-9])([0-9])([0-9])-/', \
             4, 'dec', '-TR3000-', '/^Transmission.([0-9])[.]([0-9]+)/', 2, 'dec', \
             'Transmission/3.00', 'no', 'yes'), \
             (3, 'Deluge', 'Deluge 2.0.0', '/^-DE/', 0, 'dec', '-DE2000-', '', 0, 'dec', '', \
             'yes', 'yes'); \
         insert into agent_allowed_exception (id, family_id, name, peer_id, agent, comment) \
             values (1, 3, 'Deluge 2.0.3', '-DE203s-', 'Deluge/2.0.3 libtorrent/2.0.5.0', \
             'misreports its upload'); \
         insert into torrent_buy_logs (uid, torrent_id, price, channel, created_at, \
             updated_at) values (27, 31, 100, 'Web', NOW(), NOW()); ",
    );
    let mut users = Vec::new();
    #[rustfmt::skip]
    let members = [(21, "ida", 1, 0), (22, "jack", 1, 0), (23, "kate", 1, 0), (24, "leo", 12, 0), (25, "mia", 1, 0), (26, "ned", 1, 0), (27, "olga", 1, 0), (28, "pat", 1, 0), (29, "quinn", 1, 0), (30, "rose", 1, 0), (31, "sam", 1, DOWNLOADED_20_GIB), (32, "tina", 1, DOWNLOADED_20_GIB), (33, "uma", 1, 0), (34, "vic", 1, 0)];
    for (id, name, class, downloaded) in members {
        users.push(format!(
            "({id}, '{name}', '{name}@example.org', 'confirmed', NOW(), {class}, {downloaded}, \
             '{}')",
            passkey(id)
        ));
    }
    // Times as shoal reads them, in `[nexusphp] time_zone` (+00:00 here).
    let mut torrents = Vec::new();
    for (id, approval, price, age) in [(30, 0, 0, 86_400), (31, 1, 100, 86_400), (32, 1, 0, 1)] {
        torrents.push(format!(
            "({id}, 0x{}, 'Torrent {id}', 'torrent-{id}.torrent', 401, {SIZE}, \
             UTC_TIMESTAMP() - INTERVAL {age} SECOND, 99, {approval}, {price})",
            hex(&info_hash(id))
        ));
    }
    // (torrent, member, client, address, seeder, its last announce and the one before, in
    // seconds ago): mia's last two announces 100 s and 50 s ago; pat seeding from this
    // address; quinn leeching; rose seeding from three places; tina leeching another
    // torrent; uma's client, last seen a minute ago.
    let mut peers = Vec::new();
    #[rustfmt::skip]
    let clients = [(15, 25, 25, "127.0.0.25", "yes", 50, Some(100)), (15, 28, 28, "127.0.0.1", "yes", 0, None), (15, 29, 29, "127.0.0.29", "no", 0, None), (15, 30, 200, "127.0.0.11", "yes", 0, None), (15, 30, 201, "127.0.0.12", "yes", 0, None), (15, 30, 202, "127.0.0.13", "yes", 0, None), (16, 32, 32, "127.0.0.32", "no", 0, None), (15, 33, 33, "127.0.0.33", "yes", 60, None)];
    for (torrent, user, client, ip, seeder, last, before) in clients {
        let to_go = if seeder == "yes" { 0 } else { SIZE };
        let prev = before.map_or("NULL".to_owned(), |s| {
            format!("UTC_TIMESTAMP() - INTERVAL {s} SECOND")
        });
        peers.push(format!(
            "({torrent}, 0x{}, '{ip}', {}, {to_go}, '{seeder}', UTC_TIMESTAMP() - INTERVAL \
             600 SECOND, UTC_TIMESTAMP() - INTERVAL {last} SECOND, {prev}, {user}, '{AGENT}', \
             '{}', '{ip}')",
            hex(&pid(client).0),
            51_000 + u16::from(client),
            passkey(user)
        ));
    }
    sql.push_str(&format!(
        "insert into users (id, username, email, status, added, class, downloaded, passkey) \
             values {}; \
         insert into torrents (id, info_hash, name, filename, category, size, added, owner, \
             approval_status, price) values {}; \
         insert into peers (torrent, peer_id, ip, port, to_go, seeder, started, last_action, \
             prev_action, userid, agent, passkey, ipv4) values {}; \
         update torrents t set \
             seeders = (select count(*) from peers p where p.torrent = t.id and p.seeder = 'yes'), \
             leechers = (select count(*) from peers p where p.torrent = t.id and p.seeder = 'no')",
        users.join(", "),
        torrents.join(", "),
        peers.join(", ")
    ));
    sql
}

/// Every refusal of NexusPHP's announce that shoal applies, through the server on MariaDB,
/// each set up in the site's rows as NexusPHP sets it up ([`refusal_rows`]) and answered in
/// NexusPHP's words, with the source line of each (the rule table of `docs/nexusphp.md`:
/// `A` is `public/announce.php`, `FA` `include/functions_announce.php`, `AR`
/// `app/Repositories/AgentAllowRepository.php`, at 1.10.3 `dd27164`); then what they wrote:
/// nothing of the announce (no `peers` row added or changed, no `snatched`, nothing credited,
/// no `last_announce_at`), only the flags NexusPHP sets (`downloadpos` for a fake announce,
/// `enabled` and a `cheaters` row for a cheater, `showclienterror` for a client refused).
/// Where NexusPHP warns (`warn()`: rules 10, 22-25 and 28, nothing written, no peers) shoal
/// answers a failure with the same text ("Where shoal differs").
///
/// Not here: rule 11's `invalid port` (`A:72-73`): shoal's request parser refuses port 0
/// first, in its own words (`invalid port 0`), over HTTP and UDP alike.
#[test]
fn every_nexusphp_refusal_on_a_real_mariadb_in_its_words() {
    let Some((_turn, rt, db)) = nexusphp_db("nexusphp_refusals", true) else {
        return;
    };
    rt.block_on(db.run(&refusal_rows()));
    let began = Instant::now();
    let dir = temp_dir("nexusphp-refusals");
    let tracker = {
        let mut c = nexusphp_config(&dir, &db);
        // Only the test's flush writes; the site's changes are read every second.
        let site = &mut c.sites.nexusphp;
        (site.flush_interval, site.poll_interval) = (3600, 1);
        Tracker::start(c).unwrap()
    };
    let http = tracker.http_addrs()[0];
    let n = |sql: &str| rt.block_on(db.number(&format!("select cast(({sql}) as signed)")));
    let ask = |a: Ask| announce_as(http, a);
    let failure = |text: &str| format!("d14:failure reason{}:{text}e", text.len());
    let check = |asks: &[(&str, Ask, &str)]| {
        for (source, a, text) in asks {
            assert_eq!(ask(*a), failure(text), "{source}");
        }
    };

    // Rule 28 (`A:397-411`): sam (31), 20 GiB down and nothing up, waits 24 hours for a new
    // torrent; NexusPHP compares the torrent's age in seconds with that, so 32, added a
    // second before shoal started, is refused for its first 23 seconds, the wait left written
    // as `mkprettytime` writes it (`include/functions.php:2208-2231`).
    let added = n("select timestampdiff(second, '1970-01-01', added) from torrents where id = 32");
    let before = unix_now();
    let body = ask((31, 32, pid(31).0, (0, 0, SIZE), "started", AGENT));
    let ages = (before - added)..=(unix_now() - added);
    assert!(
        *ages.end() < 24,
        "announced too late for the rule: {ages:?}"
    );
    let mut waits = ages.map(|age| {
        failure(&format!(
            "Your ratio is too low! You need to wait 23:59:{:02} to start, please read \
             {BASE}/faq.php#id46 for details",
            60 - age
        ))
    });
    assert!(waits.any(|w| w == body), "{body}");

    // Rule 10 (`A:60-66`), its first half: ida (21) starts on 15, served.
    let first = Instant::now();
    let a = ask((21, 15, pid(21).0, (0, 0, SIZE), "started", AGENT));
    assert!(a.contains("8:intervali"), "{a}");
    // Served: leo, of class `authority.seebanned`, on the banned 14 and the unapproved 30
    // (`A:197-206`); olga on 31, which she bought (`torrent_buy_logs`, `A:341-378`).
    for (user, torrent) in [(24, 14), (24, 30), (27, 31)] {
        let a = ask((
            user,
            torrent,
            pid(user as u8).0,
            (0, 0, SIZE),
            "started",
            AGENT,
        ));
        assert!(a.contains("8:intervali"), "{user} on {torrent}: {a}");
    }

    let slots = format!(
        "Your slot limit is reached! You may at most download 1 torrents at the same time, \
         please read {BASE}/faq.php#id66 for details"
    );
    let (tr, de) = (peer_of(b"-TR2940-", 34), peer_of(b"-DE203s-", 34));
    let deluge = "Deluge/2.0.3 libtorrent/2.0.5.0";
    // Rule 22: jack's `left` above the torrent's size takes his download privileges, gone at
    // once (rule 16); 21: kate on 30, not approved; 23: mia's third announce within 300 s
    // (her `peers` row's `prev_action`), no event; 24: ned leeching 31, not bought; 25-27:
    // pat's new client seeding where another seeds, quinn's leeching beside another, rose's
    // fourth place; 29: tina's slot, 1 at her ratio below 0.5, taken by her client on 16;
    // 31: uma's client uploading 1 TiB in a minute (over 1000 MiB/s at level 1) disables her
    // (rule 14 at once); 18: vic's Transmission 2.94 below the family's 3.00, his Deluge
    // build banned.
    #[rustfmt::skip]
    let refusals: [(&str, Ask, &str); 13] = [
        ("A:208-213", (22, 15, pid(22).0, (0, 0, SIZE + 1), "started", AGENT), "fake announce"),
        ("A:128-129", (22, 16, pid(22).0, (0, 0, SIZE), "started", AGENT), "Your downloading privileges have been disabled! (Read the rules)"),
        ("A:202-206", (23, 30, pid(23).0, (0, 0, SIZE), "started", AGENT), "torrent review not approved"),
        ("A:317-324", (25, 15, pid(25).0, (500, 0, 0), "", AGENT), "There is a minimum announce time of 300 seconds"),
        ("A:341-378", (26, 31, pid(26).0, (0, 0, SIZE), "started", AGENT), "purchase started, please wait"),
        ("A:385-388", (28, 15, pid(128).0, (0, 0, 0), "started", AGENT), "You cannot seed the same torrent in the same location from more than 1 client."),
        ("A:389-390", (29, 15, pid(129).0, (0, 0, SIZE), "started", AGENT), "You already are downloading the same torrent. You may only leech from one location at a time."),
        ("A:391", (30, 15, pid(130).0, (0, 0, 0), "started", AGENT), "You cannot seed the same torrent from more than 3 locations."),
        ("A:412-426", (32, 15, pid(132).0, (0, 0, SIZE), "started", AGENT), &slots),
        ("A:446-451, FA:112-190", (33, 15, pid(33).0, (1 << 40, 0, 0), "", AGENT), "We believe you're trying to cheat. And your account is disabled."),
        ("A:124-125", (33, 16, pid(33).0, (0, 0, 0), "started", AGENT), "Your account is disabled!"),
        ("AR:151-158", (34, 10, tr, (0, 0, SIZE), "started", "Transmission/2.94"), "Your Transmission 's version is too low, please update it after Transmission 3.00"),
        ("AR:168-180", (34, 15, de, (0, 0, SIZE), "started", deluge), "[3-1]Client: Deluge 2.0.3 is banned due to: misreports its upload"),
    ];
    check(&refusals);

    // The site adds a family whose rule does not match its own start (`AR:54-65`): in force
    // at the next poll, judged for a client no family before it allows.
    rt.block_on(db.run(
        "insert into agent_allowed_family (id, family, start_name, peer_id_pattern, \
         peer_id_start, exception, allowhttps) values \
         (4, 'Aria', 'Aria 1.0', '/^-AR/', '-AB1000-', 'no', 'yes')",
    ));
    std::thread::sleep(REPEAT.saturating_sub(first.elapsed()));
    // Rule 10, its second half: ida again on 15, past the 5-s repeat, within the 30 s.
    #[rustfmt::skip]
    let later: [(&str, Ask, &str); 2] = [
        ("A:60-66", (21, 15, pid(21).0, (500, 0, SIZE), "", AGENT), "Request too frequent(h)"),
        ("AR:54-65", (34, 16, peer_of(b"-XX1000-", 34), (0, 0, SIZE), "started", "Xx/1.0"), "regular expression err for peer_id: -AB1000-, please ask sysop to fix this"),
    ];
    check(&later);
    flush(&tracker);

    // What the refusals wrote: (member, its clients in `peers`, `enabled`, `downloadpos`,
    // `showclienterror`): jack's download privileges taken (`A:208-213`), uma disabled
    // (`FA:112-190`), vic's client error shown (`A:152-168`); nothing else.
    #[rustfmt::skip]
    let members = [(22, 0, "yes", "no", "no"), (23, 0, "yes", "yes", "no"), (25, 1, "yes", "yes", "no"), (26, 0, "yes", "yes", "no"), (28, 1, "yes", "yes", "no"), (29, 1, "yes", "yes", "no"), (30, 3, "yes", "yes", "no"), (31, 0, "yes", "yes", "no"), (32, 1, "yes", "yes", "no"), (33, 1, "no", "yes", "no"), (34, 0, "yes", "yes", "yes")];
    for (user, clients, enabled, downloadpos, error) in members {
        let row = format!(
            "select count(*) from users where id = {user} and enabled = '{enabled}' and \
             downloadpos = '{downloadpos}' and showclienterror = '{error}' and uploaded = 0 \
             and last_announce_at is null"
        );
        assert_eq!(n(&row), 1, "{row}");
        let peers = format!("select count(*) from peers where userid = {user}");
        assert_eq!(n(&peers), clients, "{user}: none added");
        let moved = format!(
            "select count(*) as c from peers where userid = {user} and uploaded > 0 \
             union all select count(*) from snatched where userid = {user}"
        );
        assert_eq!(n(&format!("select sum(c) from ({moved}) m")), 0, "{user}");
    }
    assert_eq!(
        n("select count(*) from cheaters where userid = 33 and torrentid = 15 and \
           uploaded = 1099511627776 and comment = 'User account was automatically disabled by system'"),
        1
    );
    // ida's client as her start left it: the refused announce's 500 bytes not written.
    assert_eq!(
        n("select count(*) from peers where userid = 21 and torrent = 15 and uploaded = 0"),
        1
    );
    assert_eq!(n("select uploaded from users where id = 21"), 0);
    assert_eq!(
        n("select count(*) from peers where userid in (24, 27)"),
        3,
        "served"
    );
    eprintln!("every refusal in {:?}", began.elapsed());
    drop(tracker);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_nexusphp_database_without_a_table_or_column_shoal_needs_stops_the_start_by_name() {
    let Some((_turn, rt, db)) = nexusphp_db("nexusphp_missing", false) else {
        return;
    };
    rt.block_on(
        db.run("alter table snatched drop column leech_time_no_seeder; drop table torrents_state"),
    );
    let dir = temp_dir("nexusphp-missing");
    let c = nexusphp_config(&dir, &db);
    let e = format!("{:#}", Tracker::start(c).err().expect("refused"));
    assert!(e.contains("column snatched.leech_time_no_seeder"), "{e}");
    assert!(e.contains("table torrents_state"), "{e}");
    rt.block_on(db.expect("select count(*) from information_schema.tables where table_schema = database() and table_name = 'torrents_state'", 0));
    std::fs::remove_dir_all(dir).ok();
}

/// The faults, as for UNIT3D and Gazelle: the database stopped mid-transfer (the batch is
/// kept and written once it is back), `SIGTERM`'s shutdown (the last batch written), a
/// restart (each client counted from what its `peers` row recorded): nothing credited is
/// lost or counted twice.
#[test]
fn a_nexusphp_site_loses_nothing_and_counts_nothing_twice_through_an_outage_and_a_restart() {
    let Some((_turn, rt, db)) = nexusphp_db("nexusphp_faults", true) else {
        return;
    };
    let dir = temp_dir("nexusphp-faults");
    let config = || {
        let mut c = nexusphp_config(&dir, &db);
        c.sites.nexusphp.flush_interval = 3600;
        c
    };
    let n = |sql: &str| rt.block_on(db.number(&format!("select cast(({sql}) as signed)")));
    let tracker = Tracker::start(config()).unwrap();
    let http = tracker.http_addrs()[0];
    assert!(announce(http, 1, 10, (0, 0, SIZE), "started").contains("8:intervali"));
    flush(&tracker);

    // The database stops; alice completes meanwhile; the write fails and is kept.
    db.server.stop_mariadb().unwrap();
    std::thread::sleep(REPEAT);
    let done = announce(http, 1, 10, (2_000, SIZE, 0), "completed");
    assert!(done.contains("8:intervali"), "{done}");
    let admin = tracker.admin_addrs()[0];
    let (status, body) =
        common::http_with_body(admin, "POST", "/api/private/flush", Some(TOKEN), "");
    assert_ne!(status, 200, "{body}");
    db.server.start_mariadb().unwrap();
    flush(&tracker);
    assert_eq!(n("select downloaded from users where id = 1"), SIZE as i64);
    assert_eq!(n("select uploaded from users where id = 1"), 2_000);
    assert_eq!(
        n("select downloaded from snatched where userid = 1 and torrentid = 10"),
        SIZE as i64
    );
    assert_eq!(n("select times_completed from torrents where id = 10"), 1);
    assert_eq!(n("select seeders from torrents where id = 10"), 2);
    flush(&tracker);
    assert_eq!(
        n("select downloaded from users where id = 1"),
        SIZE as i64,
        "once"
    );

    // frank leeches the 2x torrent and stops; shoal is stopped before any flush: the
    // shutdown writes the batch.
    assert!(announce(http, 6, 12, (0, 0, SIZE), "started").contains("8:intervali"));
    std::thread::sleep(REPEAT);
    assert!(announce(http, 6, 12, (3_000, 4_000, 6_000), "stopped").contains("8:intervali"));
    drop(tracker);
    assert_eq!(n("select uploaded from users where id = 6"), 6_000, "2x");
    assert_eq!(n("select downloaded from users where id = 6"), 4_000);
    assert_eq!(
        n("select count(*) from peers where userid = 6"),
        0,
        "stopped"
    );
    assert_eq!(
        n("select uploaded from snatched where userid = 6 and torrentid = 12"),
        3_000
    );

    // A restart: alice, still seeding, is counted from what her row recorded (2,000 up).
    let tracker = Tracker::start(config()).unwrap();
    let http = tracker.http_addrs()[0];
    let stop = announce(http, 1, 10, (2_500, SIZE, 0), "stopped");
    assert!(stop.contains("8:intervali"), "{stop}");
    flush(&tracker);
    assert_eq!(
        n("select uploaded from users where id = 1"),
        2_500,
        "500 more, not 2,500"
    );
    assert_eq!(
        n("select uploaded from snatched where userid = 1 and torrentid = 10"),
        2_500
    );
    assert_eq!(
        n("select count(*) from peers where userid = 1 and torrent = 10"),
        0
    );
    assert_eq!(n("select seeders from torrents where id = 10"), 1, "bob");
    drop(tracker);
    std::fs::remove_dir_all(&dir).ok();
}

/// The cleanup's batch keys (`app/Repositories/CleanupRepository.php:15-17`).
const BONUS: &str = "batch_key:user_seed_bonus";
const TIME: &str = "batch_key:user_seeding_leeching_time";
const SEEDERS: &str = "batch_key:torrent_seeders_etc";

/// A Redis hash's fields and values.
fn redis_hash(
    r: &redis_server::Redis,
    db: u8,
    key: &str,
) -> std::collections::BTreeMap<String, String> {
    let out = r.cli(db, &["hgetall", key]);
    let lines: Vec<&str> = out.lines().collect();
    (lines.chunks(2))
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].to_owned(), p[1].to_owned()))
        .collect()
}

fn redis_ttl(r: &redis_server::Redis, db: u8, key: &str) -> i64 {
    r.cli(db, &["ttl", key]).parse().unwrap()
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `public/announce.php:631-635`: each (member, torrent) that announces is added to the
/// cleanup's three Redis batches at most once per `main.autoclean_interval_one`, under the
/// shared lock `record_batch_lock:<uid>:<tid>`; the batches' keys, fields, values and
/// expiries as NexusPHP's script leaves them (`CleanupRepository.php:42-54`, `:163-193`),
/// a batch the cleanup left reused, a pair PHP recorded (its lock held) not recorded again.
#[test]
fn a_nexusphp_site_gets_the_cleanups_redis_records() {
    let rdb = 5;
    let Some(((_turn, rt, db), r)) = nexusphp_db_and_redis("nexusphp_redis", rdb) else {
        return;
    };
    // The site's cleanup intervals (NexusPHP's settings page): one 900, three 3600, four
    // 43200; the batches live 47,700 s.
    rt.block_on(db.run(
        "insert into settings (name, value, autoload) values \
         ('main.autoclean_interval_one', '900', 'yes'), \
         ('main.autoclean_interval_three', '3600', 'yes'), \
         ('main.autoclean_interval_four', '43200', 'yes')",
    ));
    let life = 900 + 3600 + 43_200;
    // The cleanup's last run renewed the second batch (`CleanupRepository.php:89-95`);
    // PHP served alice (1) on torrent 11 a minute ago (its lock holds).
    let renewed = format!("{TIME}:20241020_230000");
    for cmd in [
        vec!["set", TIME, renewed.as_str(), "ex", "5000"],
        vec!["hset", renewed.as_str(), "-1", "1"],
        vec!["expire", renewed.as_str(), "5000"],
        vec!["set", "record_batch_lock:1:11", "1729439260", "ex", "840"],
    ] {
        r.cli(rdb, &cmd);
    }
    let dir = temp_dir("nexusphp-redis");
    let mut c = nexusphp_config(&dir, &db);
    c.sites.nexusphp.flush_interval = 3600;
    c.sites.nexusphp.time_zone = "+08:00".into();
    c.sites.nexusphp.redis_url = r.url(rdb);
    let tracker = Tracker::start(c).unwrap();
    let http = tracker.http_addrs()[0];

    let before = unix_now();
    for (user, torrent) in [(1, 10), (1, 11), (6, 12)] {
        let a = announce(http, user, torrent, (0, 0, SIZE), "started");
        assert!(a.contains("8:intervali"), "{a}");
    }
    let after = unix_now();
    flush(&tracker);
    let flushed = unix_now();

    // The torrents' batch: 10 and 12; not 11, whose lock PHP holds.
    let seeders = r.cli(rdb, &["get", SEEDERS]);
    let torrents = redis_hash(r, rdb, &seeders);
    assert_eq!(
        torrents.keys().collect::<Vec<_>>(),
        ["10", "12"],
        "{torrents:?}"
    );
    let at = |v: &String| -> i64 { v.parse().unwrap() };
    let first = at(&torrents["10"]);
    assert!((before..=after).contains(&first), "the announce's time");
    assert!(first <= at(&torrents["12"]) && at(&torrents["12"]) <= after);
    // A batch made by this write is named by its first record's time in the site's zone.
    let suffix = shoal_nexusphp::cleanup::ymd_his(first + 8 * 3600);
    assert_eq!(seeders, format!("{SEEDERS}:{suffix}"));
    let bonus = r.cli(rdb, &["get", BONUS]);
    assert_eq!(bonus, format!("{BONUS}:{suffix}"));
    // The members' batches: alice (1) and frank (6), each at their latest recorded announce;
    // the second one the batch the cleanup left.
    let members = redis_hash(r, rdb, &bonus);
    assert_eq!(members.keys().collect::<Vec<_>>(), ["1", "6"]);
    assert_eq!(members["1"], torrents["10"], "alice's record on 10");
    assert_eq!(members["6"], torrents["12"]);
    assert_eq!(r.cli(rdb, &["get", TIME]), renewed);
    let mut time = redis_hash(r, rdb, &renewed);
    assert_eq!(time.remove("-1").as_deref(), Some("1"));
    assert_eq!(time, members);
    // Expiries: none on the seeding bonus batch; the torrents' made here, four + three +
    // one; the renewed one's left as they were.
    assert_eq!(redis_ttl(r, rdb, BONUS), -1);
    assert_eq!(redis_ttl(r, rdb, &bonus), -1);
    for key in [SEEDERS, seeders.as_str()] {
        let t = redis_ttl(r, rdb, key);
        assert!((life - 10..=life).contains(&t), "{key}: {t}");
    }
    assert!(redis_ttl(r, rdb, TIME) <= 5000 && redis_ttl(r, rdb, &renewed) <= 5000);
    // The locks: the announce's time, gone `autoclean_interval_one` after the announce.
    assert_eq!(
        r.cli(rdb, &["get", "record_batch_lock:1:10"]),
        first.to_string()
    );
    let t = redis_ttl(r, rdb, "record_batch_lock:1:10");
    assert!(
        (900 - (flushed - first) - 1..=900).contains(&t),
        "{t}, {} s after",
        flushed - first
    );
    assert_eq!(
        r.cli(rdb, &["get", "record_batch_lock:1:11"]),
        "1729439260",
        "PHP's"
    );

    // alice completes torrent 10 within the interval: no new record.
    std::thread::sleep(REPEAT);
    let a = announce(http, 1, 10, (0, SIZE, 0), "completed");
    assert!(a.contains("8:intervali"), "{a}");
    flush(&tracker);
    assert_eq!(redis_hash(r, rdb, &seeders), torrents);
    assert_eq!(redis_hash(r, rdb, &bonus), members);
    drop(tracker);
    std::fs::remove_dir_all(dir).ok();
}

/// The site's Redis stopped while shoal serves: announces are served as before, the rows
/// are written, and the records wait in memory (merged per member and torrent) until a
/// batch finds Redis back, then arrive as they would have. (Records waiting when shoal
/// stops are not kept: the members' next announces record them again.)
#[test]
fn the_cleanups_records_wait_for_redis_through_an_outage() {
    let rdb = 6;
    let Some(((_turn, rt, db), r)) = nexusphp_db_and_redis("nexusphp_redis_outage", rdb) else {
        return;
    };
    let dir = temp_dir("nexusphp-redis-outage");
    let mut c = nexusphp_config(&dir, &db);
    c.sites.nexusphp.flush_interval = 3600;
    c.sites.nexusphp.redis_url = r.url(rdb);
    let tracker = Tracker::start(c).unwrap();
    let http = tracker.http_addrs()[0];

    r.stop();
    let began = Instant::now();
    let a = announce(http, 1, 10, (0, 0, SIZE), "started");
    assert!(a.contains("8:intervali"), "{a}");
    assert!(began.elapsed() < Duration::from_secs(1), "not held up");
    let at = unix_now();
    // The rows are written; the records are not, and stay.
    let began = Instant::now();
    flush(&tracker);
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    let n = |sql: &str| rt.block_on(db.number(&format!("select cast(({sql}) as signed)")));
    assert_eq!(
        n("select count(*) from peers where userid = 1 and torrent = 10"),
        1
    );

    r.start().unwrap();
    assert_eq!(r.cli(rdb, &["dbsize"]), "0", "an empty Redis");
    flush(&tracker);
    let seeders = r.cli(rdb, &["get", SEEDERS]);
    let torrents = redis_hash(r, rdb, &seeders);
    assert_eq!(torrents.keys().collect::<Vec<_>>(), ["10"]);
    let recorded: i64 = torrents["10"].parse().unwrap();
    assert!((at - 2..=at).contains(&recorded), "the announce's time");
    assert_eq!(
        redis_hash(r, rdb, &r.cli(rdb, &["get", BONUS]))
            .keys()
            .collect::<Vec<_>>(),
        ["1"]
    );
    assert_eq!(r.cli(rdb, &["exists", "record_batch_lock:1:10"]), "1");
    // Written once: the next batch has nothing for Redis.
    r.cli(rdb, &["hdel", &seeders, "10"]);
    flush(&tracker);
    assert!(redis_hash(r, rdb, &seeders).is_empty());
    drop(tracker);
    std::fs::remove_dir_all(dir).ok();
}
