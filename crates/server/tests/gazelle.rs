//! A Gazelle site on shoal, end to end: a real MariaDB (strict mode) holding Gazelle's
//! tables (`tests/fixtures/gazelle.sql`) and the rows a site inserts, shoal started with
//! `[private] schema = "gazelle"` on it, announces with the site's passkeys over HTTP
//! (`/<passkey>/announce`, IPv4 and IPv6), UDP (BEP 41 URL data) and WebTorrent, the rows
//! the writer leaves in Gazelle's tables, the site's control calls and reports, the reload
//! (SIGUSR1's), and the call back to a stand-in site when a token is used up.

#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::site_schema::{browser_seeds, enc, pid, udp_session};
use common::{http_with_headers, temp_dir};
use shoal_server::Tracker;

#[path = "../../gazelle/tests/gazelle_site/mod.rs"]
mod gazelle_site;

use gazelle_site::{info_hash, passkey, Db};

const TOKEN: &str = "gazelle-test-admin-token";
const SITE_PW: &str = "S1te5ecretS1te5ecretS1te5ecret00";
const REPORT_PW: &str = "Rep0rtKeyRep0rtKeyRep0rtKey00000";
const AGENT: &str = "qBittorrent/4.6.5";

/// One HTTP announce `/<passkey>/announce`; the body.
fn announce(
    addr: SocketAddr,
    user: u32,
    torrent: u8,
    peer: u8,
    (downloaded, left): (u64, u64),
    event: &str,
) -> String {
    let target = format!(
        "/{}/announce?info_hash={}&peer_id={}&port={}&uploaded=0&downloaded={downloaded}\
         &left={left}&event={event}&compact=1",
        passkey(user),
        enc(&info_hash(torrent)),
        enc(&pid(peer).0),
        50_000 + u16::from(peer),
    );
    let agent = format!("User-Agent: {AGENT}\r\n");
    let (_, body) = http_with_headers(addr, "GET", &target, &agent, b"");
    String::from_utf8_lossy(&body).into_owned()
}

/// A control call or report: the body.
fn call(addr: SocketAddr, path: &str) -> String {
    let (status, body) = http_with_headers(addr, "GET", path, "", b"");
    assert_eq!(status, 200, "Ocelot answers every call with a 200");
    String::from_utf8_lossy(&body).into_owned()
}

fn flush(tracker: &Tracker) {
    common::site_schema::flush(tracker, TOKEN);
}

fn config(db: &Db, dir: &std::path::Path) -> shoal_server::Config {
    let mut c = common::private_config(dir, TOKEN);
    c.http.listen.push("[::1]:0".parse().unwrap());
    c.private.schema = "gazelle".into();
    c.private.database = db.url.clone();
    c.private.site_password = SITE_PW.into();
    c.private.report_password = REPORT_PW.into();
    c.sites.gazelle.announce_jitter = 0;
    c.sites.gazelle.announce_interval = 60;
    c
}

/// The site's database with its rows; `None`, said, where MariaDB is not available.
fn site_db(rt: &tokio::runtime::Runtime, name: &str) -> Option<Db> {
    let db = rt.block_on(Db::with_rows(name));
    if db.is_none() {
        eprintln!("MariaDB is not available here: skipped");
    }
    db
}

#[test]
fn a_gazelle_site_announces_over_every_protocol_and_its_rows_are_written() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = site_db(&rt, "shoal_e2e") else {
        return;
    };
    rt.block_on(db.run("update torrents_leech_stats set Seeders = 9 where TorrentID = 11"));
    let dir = temp_dir("gazelle-e2e");
    let mut c = config(&db, &dir);
    // Only the test's flushes write.
    c.sites.gazelle.schedule_interval = 3600;
    let tracker = Tracker::start(c).unwrap();
    let n = |sql: &str| rt.block_on(db.number(&format!("select cast(({sql}) as signed)")));
    assert_eq!(
        n("select Seeders from torrents_leech_stats where TorrentID = 11"),
        0,
        "the swarms start empty, as Ocelot's"
    );
    let v4 = tracker.http_addrs()[0];
    let v6 = tracker.http_addrs()[1];

    // alice (1) leeches torrent 10 (her token makes it free for her); carol (3, paranoid)
    // seeds it over IPv6; erin (5) leeches it over IPv6 and is sent carol.
    let a = announce(v4, 1, 10, 1, (0, 1000), "started");
    assert!(a.contains("8:intervali60e"), "{a}");
    announce(v6, 3, 10, 3, (0, 0), "started");
    let e = announce(v6, 5, 10, 5, (0, 1000), "started");
    assert!(
        e.contains("6:peers618:"),
        "erin is sent carol's IPv6 address: {e}"
    );
    // bob (2) seeds the free torrent 11 over IPv6 (seeding needs no leech right).
    announce(v6, 2, 11, 12, (0, 0), "started");
    // bob (2) may not leech: recorded, sent no peers, told why.
    let b = announce(v4, 2, 10, 2, (0, 1000), "started");
    assert!(b.contains("33:Access denied, leeching forbidden"), "{b}");
    assert!(b.contains("5:peers0:"), "{b}");
    // Ocelot's refusals.
    assert!(announce(v4, 42, 10, 9, (0, 10), "started").contains("Passkey not found"));
    assert!(announce(v4, 1, 99, 9, (0, 10), "started").contains("Unregistered torrent"));
    assert!(
        announce(v4, 4, 10, 9, (0, 10), "started").contains("Passkey not found"),
        "dave is disabled"
    );

    // alice downloads 600 of torrent 10, erin 400; over UDP alice downloads 300 of the
    // free torrent 11, the passkey in BEP 41 URL data.
    announce(v4, 1, 10, 1, (600, 400), "");
    announce(v6, 5, 10, 5, (400, 600), "");
    let url = format!("/{}/announce", passkey(1));
    let udp = tracker.udp_addrs()[0];
    udp_session(udp, &url, (info_hash(11), 1, 50_001), (1000, 700), (0, 300));
    // erin seeds the neutral torrent 12 from a browser, the passkey in the WebSocket path.
    let path = format!("/{}/announce", passkey(5));
    browser_seeds(&rt, v4, &path, info_hash(12), 22);
    flush(&tracker);

    // users_leech_stats: what was credited (the token and freeleech count no download).
    assert_eq!(
        n("select Downloaded from users_leech_stats where UserID = 1"),
        0
    );
    assert_eq!(
        n("select Downloaded from users_leech_stats where UserID = 5"),
        400
    );
    // users_freeleeches: what alice's token saved.
    assert_eq!(
        n("select Downloaded from users_freeleeches where UserID = 1 and TorrentID = 10"),
        600
    );
    // xbt_files_users: a row per client, paranoid carol's address empty, IPv6 kept.
    assert_eq!(n("select count(*) from xbt_files_users where fid = 10"), 4);
    let ip = |uid: u32, fid: u32| {
        let rows = rt.block_on(db.rows(&format!(
            "select ip from xbt_files_users where uid = {uid} and fid = {fid}"
        )));
        sqlx::Row::get::<String, _>(&rows[0], 0)
    };
    assert_eq!(ip(1, 10), "127.0.0.1");
    assert_eq!(ip(3, 10), "", "paranoid");
    assert_eq!(ip(5, 10), "", "masked (IP 127.0.0.1 in users_main)");
    assert_eq!(ip(2, 11), "::1");
    for (query, want) in [
        (
            "select downloaded from xbt_files_users where uid = 1 and fid = 11",
            300,
        ),
        ("select count(*) from xbt_files_users where fid = 12", 1),
        ("select count(*) from xbt_files_users where fid = 11", 2),
        // torrents_leech_stats: the figures the clients make.
        (
            "select Seeders from torrents_leech_stats where TorrentID = 10",
            1,
        ),
        (
            "select Leechers from torrents_leech_stats where TorrentID = 10",
            3,
        ),
    ] {
        assert_eq!(n(query), want, "{query}");
    }

    // alice completes torrent 10: one snatch, the token used up.
    announce(v4, 1, 10, 1, (1000, 0), "completed");
    flush(&tracker);
    for (query, want) in [
        (
            "select count(*) from xbt_snatched where uid = 1 and fid = 10",
            1,
        ),
        (
            "select Snatched from torrents_leech_stats where TorrentID = 10",
            1,
        ),
        (
            "select Seeders from torrents_leech_stats where TorrentID = 10",
            2,
        ),
    ] {
        assert_eq!(n(query), want, "{query}");
    }

    // The site's control calls on the same listener.
    let update = |q: &str| call(v4, &format!("/{SITE_PW}/update?{q}"));
    assert_eq!(
        update(&format!(
            "action=add_user&passkey={}&id=6&visible=1",
            passkey(6)
        )),
        "success"
    );
    assert_eq!(
        update(&format!(
            "action=add_torrent&info_hash={}&id=30&freetorrent=0",
            enc(&info_hash(30))
        )),
        "success"
    );
    assert!(announce(v4, 6, 30, 6, (0, 0), "started").contains("8:completei1e"));
    let info = update(&format!(
        "action=info_torrent&info_hash={}",
        enc(&info_hash(30))
    ));
    assert!(info.contains("\"id\":30"), "{info}");
    update(&format!(
        "action=delete_torrent&info_hash={}&id=30&reason=3",
        enc(&info_hash(30))
    ));
    let gone = announce(v4, 6, 30, 6, (0, 0), "");
    assert!(
        gone.contains("Unregistered torrent: Bad Folder Names"),
        "{gone}"
    );
    update("action=update_announce_interval&new_announce_interval=900");
    assert!(announce(v4, 5, 10, 5, (400, 600), "").contains("8:intervali900e"));
    let wrong = call(
        v4,
        &format!(
            "/{}/update?action=remove_user&passkey={}",
            "x".repeat(32),
            passkey(5)
        ),
    );
    assert!(wrong.contains("Authentication failure"), "{wrong}");
    let report = |q: &str| call(v4, &format!("/{REPORT_PW}/report?{q}"));
    let stats = report("get=stats");
    assert!(stats.contains("\"successful announcements\""), "{stats}");
    let user = report(&format!("get=user&key={}", passkey(1)));
    assert!(user.starts_with("{") && user.contains("\"id\":1"), "{user}");
    assert!(user.contains("\"seeding\":1"), "{user}");

    // A user the site adds to its tables alone is served after a reload (SIGUSR1's).
    rt.block_on(db.run(&format!(
        "insert into users_main (ID, Username, Email, PassHash, Enabled, PermissionID, \
             torrent_pass, auth_key, stylesheet_id) \
         values (7, 'gina', 'gina@example.org', 'hash', '1', 2, '{}', 'authkey7', 1)",
        passkey(7)
    )));
    assert!(announce(v4, 7, 10, 7, (0, 0), "started").contains("Passkey not found"));
    tracker.reload_site().unwrap();
    assert!(announce(v4, 7, 10, 7, (0, 0), "started").contains("8:complete"));
    drop(tracker);
    std::fs::remove_dir_all(dir).ok();
}

/// A stand-in for the site's `tools.php`: answers the first call 500, the next ones 200,
/// and hands each request line over `seen`.
fn stand_in_site() -> (SocketAddr, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate().take(5) {
            let Ok(mut stream) = stream else { return };
            // The whole request read before answering: closing on unread bytes would reset
            // the connection, and the tracker could lose the answer and call again.
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            reader.read_line(&mut line).ok();
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let status = if i == 0 {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            let _ = write!(stream, "HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

#[test]
fn a_used_up_token_is_reported_to_the_site_until_it_answers_200() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = site_db(&rt, "shoal_tokens") else {
        return;
    };
    let (site, seen) = stand_in_site();
    let dir = temp_dir("gazelle-tokens");
    let mut c = config(&db, &dir);
    c.private.site_url = format!("http://{site}/gazelle");
    c.sites.gazelle.schedule_interval = 1;
    let tracker = Tracker::start(c).unwrap();
    let v4 = tracker.http_addrs()[0];
    announce(v4, 1, 10, 1, (0, 1000), "started");
    announce(v4, 1, 10, 1, (1000, 0), "completed");
    let expected = format!(
        "GET /gazelle/tools.php?key={SITE_PW}&type=expiretoken&action=ocelot&tokens=1:10 HTTP/1.0"
    );
    let first = seen.recv_timeout(Duration::from_secs(30)).expect("a call");
    assert_eq!(first.trim_end(), expected);
    // Refused with a 500: tried again (after Ocelot's 5 seconds) until the site takes it.
    let started = Instant::now();
    let second = seen.recv_timeout(Duration::from_secs(30)).expect("a retry");
    assert_eq!(second.trim_end(), expected);
    assert!(started.elapsed() >= Duration::from_secs(1), "not at once");
    // The token's saved download reached the site's table too.
    let deadline = Instant::now() + Duration::from_secs(30);
    let saved = loop {
        let v = rt.block_on(db.number(
            "select Downloaded from users_freeleeches where UserID = 1 and TorrentID = 10",
        ));
        if v == 1000 || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(saved, 1000);
    drop(tracker);
    let more = seen.try_recv();
    assert!(more.is_err(), "nothing more to report: {more:?}");
    std::fs::remove_dir_all(dir).ok();
}
