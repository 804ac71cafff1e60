//! A UNIT3D site on shoal, end to end: a real MariaDB (strict mode) holding UNIT3D's tables
//! and the rows a site inserts, shoal started with `[private] schema = "unit3d"` on it,
//! announces over HTTP (with the site's passkey in `/announce/<passkey>`) and over UDP (the
//! same path in BEP 41 URL data), then the rows the writer leaves in `peers`, `history`,
//! `users`, `torrents` and `unregistered_info_hashes`.

#![forbid(unsafe_code)]

mod common;

use std::net::SocketAddr;

use common::site_schema::{browser_seeds, enc, pid, udp_session};
use common::{http_with_body, http_with_headers, temp_dir};
use shoal_server::Tracker;

#[path = "../../unit3d/tests/unit3d_site/mod.rs"]
mod unit3d_site;

use unit3d_site::{info_hash, insert_site_rows, passkey, Site};

const TOKEN: &str = "unit3d-test-admin-token";
const AGENT: &str = "qBittorrent/4.6.5";

/// One HTTP announce with `agent` (none: no header); the body.
#[allow(clippy::too_many_arguments)]
fn announce(
    addr: SocketAddr,
    user: u32,
    torrent: u8,
    peer: u8,
    port: u16,
    (uploaded, downloaded, left): (u64, u64, u64),
    event: &str,
    agent: Option<&str>,
) -> String {
    let target = format!(
        "/announce/{}?info_hash={}&peer_id={}&port={port}&uploaded={uploaded}\
         &downloaded={downloaded}&left={left}&event={event}&compact=1",
        passkey(user),
        enc(&info_hash(torrent)),
        enc(&pid(peer).0),
    );
    let agent = agent.map_or(String::new(), |a| format!("User-Agent: {a}\r\n"));
    let (_, body) = http_with_headers(addr, "GET", &target, &agent, b"");
    String::from_utf8_lossy(&body).into_owned()
}

/// One request over the Unix socket at `path` (`line`: the method and target; `headers`:
/// more header lines, each ending in CRLF); the status and the body.
fn over_unix(path: &std::path::Path, line: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        s,
        "{line} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn flush(tracker: &Tracker) {
    common::site_schema::flush(tracker, TOKEN);
}

#[test]
fn a_unit3d_site_announces_over_http_and_udp_and_its_rows_are_written() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(site) = rt.block_on(Site::tables("shoal_unit3d_e2e")) else {
        eprintln!("MariaDB is not available here: skipped");
        return;
    };
    rt.block_on(insert_site_rows(&site));
    let dir = temp_dir("unit3d-e2e");
    let mut c = common::private_config(&dir, TOKEN);
    c.private.schema = "unit3d".into();
    c.private.database = site.url.clone();
    c.private.site_api_key = "k".repeat(32);
    // Only the test's flushes write; no minimum between announces, so that each
    // announce below gets its answer.
    c.sites.unit3d.flush_interval = 3600;
    c.sites.unit3d.announce_min = 0;
    c.sites.unit3d.announce_max = 60;
    // As a site whose nginx proxies to a socket file.
    let socket = dir.join("http.sock");
    c.http.unix_socket = socket.clone();
    let tracker = Tracker::start(c).unwrap();
    let http = tracker.http_addrs()[0];

    // alice (user 1) leeches torrent 10 over HTTP; bob (user 2, VIP) seeds it.
    let a = announce(http, 1, 10, 1, 51413, (0, 0, 1000), "started", Some(AGENT));
    assert!(a.contains("8:complete"), "{a}");
    let b = announce(http, 2, 10, 2, 51414, (0, 0, 0), "started", Some(AGENT));
    assert!(b.contains("5:peers6:"), "bob the seeder is sent alice: {b}");
    // The rules, each by its UNIT3D-Announce message.
    let refused = |user, torrent, agent: Option<&str>| {
        announce(http, user, torrent, 9, 51415, (0, 0, 10), "started", agent)
    };
    assert!(refused(1, 10, None).contains("Invalid user agent."));
    assert!(refused(1, 10, Some("Mozilla/5.0")).contains("Browser, crawler or cheater"));
    assert!(refused(3, 10, Some(AGENT)).contains("(Current: Banned)"));
    let pending = refused(1, 11, Some(AGENT));
    assert!(
        pending.contains("15:warning message30:Torrent is pending moderation."),
        "{pending}"
    );
    assert!(
        announce(http, 1, 10, 7, 22, (0, 0, 10), "started", Some(AGENT)).contains("Illegal port.")
    );
    // An info hash the site does not know: refused and recorded.
    assert!(refused(1, 99, Some(AGENT)).contains("InfoHash not found."));
    assert!(refused(42, 10, Some(AGENT)).contains("Passkey does not exist."));

    // alice downloads 600 bytes of torrent 10 and 300 of the free torrent 14.
    announce(http, 1, 10, 1, 51413, (0, 600, 400), "", Some(AGENT));
    announce(http, 1, 14, 1, 51413, (0, 0, 1000), "started", Some(AGENT));
    announce(http, 1, 14, 1, 51413, (0, 300, 700), "", Some(AGENT));
    // erin (user 5) over UDP, the passkey in BEP 41 URL data: seeds torrent 10.
    let url = format!("/announce/{}", passkey(5));
    let udp = tracker.udp_addrs()[0];
    let (leechers, seeders) = udp_session(udp, &url, (info_hash(10), 5, 51420), (0, 0), (250, 0));
    assert_eq!((leechers, seeders), (1, 2));
    // bob again, now from a browser over WebTorrent, the passkey in the
    // WebSocket URL's path: one user is one account on every protocol.
    let path = format!("/announce/{}", passkey(2));
    browser_seeds(&rt, http, &path, info_hash(15), 22);
    flush(&tracker);

    // Unsigned columns read as signed numbers.
    let n = |sql: &str| rt.block_on(site.number(&format!("select cast(({sql}) as signed)")));
    // history: credited and actual bytes, per (user, torrent).
    assert_eq!(
        n("select downloaded from history where user_id = 1 and torrent_id = 10"),
        600
    );
    assert_eq!(
        n("select actual_downloaded from history where user_id = 1 and torrent_id = 10"),
        600
    );
    assert_eq!(
        n("select downloaded from history where user_id = 1 and torrent_id = 14"),
        0,
        "freeleech credits no download"
    );
    assert_eq!(
        n("select actual_downloaded from history where user_id = 1 and torrent_id = 14"),
        300
    );
    assert_eq!(
        n("select client_downloaded from history where user_id = 1 and torrent_id = 14"),
        300
    );
    assert_eq!(
        n("select uploaded from history where user_id = 5 and torrent_id = 10"),
        250
    );
    // users: what was credited.
    assert_eq!(n("select downloaded from users where id = 1"), 600);
    assert_eq!(n("select uploaded from users where id = 5"), 250);
    // peers: one row per client, over every protocol (the WebRTC peer without a port).
    assert_eq!(
        n("select count(*) from peers where user_id = 2 and torrent_id = 15 and port = 0"),
        1
    );
    assert_eq!(n("select count(*) from peers where torrent_id = 10"), 3);
    assert_eq!(
        n("select count(*) from peers where torrent_id = 10 and seeder = 1"),
        2
    );
    // torrents: the figures the clients make.
    assert_eq!(n("select seeders from torrents where id = 10"), 2);
    assert_eq!(n("select leechers from torrents where id = 10"), 1);
    // The unknown hash, recorded for alice.
    assert_eq!(
        n("select count(*) from unregistered_info_hashes where user_id = 1"),
        1
    );

    // alice completes torrent 10: times_completed + 1, completed_at set.
    announce(
        http,
        1,
        10,
        1,
        51413,
        (0, 1000, 0),
        "completed",
        Some(AGENT),
    );
    flush(&tracker);
    assert_eq!(n("select times_completed from torrents where id = 10"), 1);
    assert_eq!(
        n(
            "select count(*) from history where user_id = 1 and torrent_id = 10 \
           and completed_at is not null"
        ),
        1
    );
    assert_eq!(n("select seeders from torrents where id = 10"), 3);

    // The site's control calls, on the same listener: a user and a torrent added through
    // them are served at once.
    let key = "k".repeat(32);
    let call = |method: &str, path: &str, body: &str| {
        http_with_body(http, method, &format!("/announce/{key}{path}"), None, body)
    };
    let (status, _) = call(
        "PUT",
        "/users",
        r#"{"id":6,"group_id":1,"passkey":"00000000000000000000000000000006","can_download":true,"is_donor":false,"is_lifetime":false,"num_seeding":0,"num_leeching":0}"#,
    );
    assert_eq!(status, 200);
    let hash: String = info_hash(30).iter().map(|b| format!("{b:02x}")).collect();
    let (status, _) = call(
        "PUT",
        "/torrents",
        &format!(
            r#"{{"id":30,"status":1,"info_hash":"{hash}","is_deleted":false,"seeders":0,"leechers":0,"times_completed":0,"download_factor":100,"upload_factor":100}}"#
        ),
    );
    assert_eq!(status, 200);
    let served = announce(http, 6, 30, 6, 51430, (0, 0, 0), "started", Some(AGENT));
    assert!(served.contains("8:completei1e"), "{served}");
    let (status, body) = call("GET", "/torrents/30", "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"seeders\":1"), "{body}");
    // A malformed body is a 400 that says why; a wrong key changes nothing.
    let (status, body) = call("PUT", "/users", r#"{"id":"seven"}"#);
    assert_eq!(status, 400, "{body}");
    let wrong = format!("/announce/{}/users", "w".repeat(32));
    let (status, _) = http_with_body(
        http,
        "DELETE",
        &wrong,
        None,
        r#"{"id":6,"passkey":"00000000000000000000000000000006"}"#,
    );
    assert_eq!(status, 403);
    let again = announce(http, 6, 30, 6, 51430, (0, 0, 0), "", Some(AGENT));
    assert!(
        again.contains("8:complete"),
        "user 6 is still there: {again}"
    );
    let (status, body) = call("GET", "/stats", "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("announce_responses_per_1s"), "{body}");

    // UNIT3D-Announce's health check, for the site's monitoring; over TCP and over the
    // Unix socket, which serves the announces as well.
    let (status, body) = http_with_body(http, "GET", "/announce/health/ping", None, "");
    assert_eq!((status, body.as_str()), (200, "PONG"));
    let (status, body) = over_unix(&socket, "GET /announce/health/ping", "");
    assert_eq!((status, body.as_str()), (200, "PONG"));
    let target = format!(
        "GET /announce/{}?info_hash={}&peer_id={}&port=51431&uploaded=0&downloaded=0&left=0\
         &event=started&compact=1",
        passkey(6),
        enc(&info_hash(30)),
        enc(&pid(16).0),
    );
    let (status, body) = over_unix(&socket, &target, &format!("User-Agent: {AGENT}\r\n"));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("8:completei2e"),
        "a second seeder, over the socket: {body}"
    );
    drop(tracker);
    assert!(!socket.exists(), "the socket file is removed at shutdown");
    std::fs::remove_dir_all(dir).ok();
}
