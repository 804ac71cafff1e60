//! The Gazelle site's tables on a real MariaDB in Gazelle's strict `sql_mode`, loaded with
//! `tests/fixtures/gazelle.sql`: the check, the load, and the batched writes, with the
//! values Ocelot fails on (a long agent, a token's row) and IPv6 addresses.

mod gazelle_site;

use gazelle_site::{info_hash, passkey, Db};
use shoal_gazelle::db::{Error, GazelleDb};
use shoal_gazelle::model::{Batch, LeechType, PeerRow, Snatch, TokenUse, TorrentFigures, UserGain};
use sqlx::Row;

async fn connect(db: &Db) -> GazelleDb {
    let mut g = GazelleDb::connect(&db.url).await.expect("connect");
    g.check().await.expect("Gazelle's tables");
    g
}

/// What `f` shows of each of `rows`, in order.
fn each<T, U>(rows: &[T], f: impl Fn(&T) -> U) -> Vec<U> {
    rows.iter().map(f).collect()
}

#[tokio::test]
async fn check_names_what_a_database_lacks() {
    let Some(db) = Db::empty("check").await else {
        return;
    };
    let mut g = GazelleDb::connect(&db.url).await.unwrap();
    let e = g.check().await.unwrap_err();
    assert!(matches!(&e, Error::Missing(m) if m.len() == 8), "{e}");
    assert!(e.to_string().contains("table xbt_files_users"), "{e}");
    db.run(gazelle_site::FIXTURE).await;
    db.run(
        "ALTER TABLE users_freeleeches DROP COLUMN Downloaded; \
            ALTER TABLE xbt_files_users DROP PRIMARY KEY",
    )
    .await;
    let e = g.check().await.unwrap_err().to_string();
    assert!(e.contains("column users_freeleeches.downloaded"), "{e}");
    assert!(
        e.contains("unique key xbt_files_users (peer_id, fid, uid)"),
        "{e}"
    );
    assert!(!e.contains("table "), "{e}");
}

#[tokio::test]
async fn load_reads_what_ocelot_reads() {
    let Some(db) = Db::with_rows("load").await else {
        return;
    };
    db.run("insert into xbt_client_whitelist (peer_id, vstring) values ('-qB', 'qBittorrent'), ('-TR', 'Transmission')")
        .await;
    let data = connect(&db).await.load().await.unwrap();
    let users = each(&data.users, |u| (u.id, u.can_leech, u.protected));
    // Dave is disabled; carol is paranoid, erin's address is masked: protected.
    assert_eq!(
        users,
        [
            (1, true, false),
            (2, false, false),
            (3, true, true),
            (5, true, true)
        ]
    );
    assert_eq!(data.users[0].passkey, passkey(1));
    let torrents = each(&data.torrents, |t| (t.id, t.leech_type, t.snatched));
    // 13 has no leech statistics row: not served.
    assert_eq!(
        torrents,
        [
            (10, LeechType::Normal, 0),
            (11, LeechType::Free, 0),
            (12, LeechType::Neutral, 5)
        ]
    );
    assert_eq!(data.torrents[0].info_hash, info_hash(10));
    assert_eq!(data.tokens, [(1, 10)], "bob's token is expired");
    assert_eq!(data.whitelist, [b"-qB".to_vec(), b"-TR".to_vec()]);
}

fn peer(user: u32, torrent: u32, id: u8, ip: Option<&str>, agent: &str) -> PeerRow {
    PeerRow {
        user_id: user,
        torrent_id: torrent,
        peer_id: [id; 20],
        active: true,
        uploaded: 1000,
        downloaded: 2000,
        remaining: 300,
        corrupt: 0,
        upspeed: 10,
        downspeed: 20,
        timespent: 60,
        announced: 3,
        ip: ip.map(|i| i.parse().unwrap()),
        useragent: agent.into(),
        mtime: 1_700_000_000,
    }
}

#[tokio::test]
async fn a_batch_is_written_whole_in_strict_mode() {
    let Some(db) = Db::with_rows("write").await else {
        return;
    };
    let g = connect(&db).await;
    let long_agent = "a".repeat(80);
    let batch = Batch {
        users: vec![
            UserGain {
                user_id: 1,
                uploaded: 500,
                downloaded: 700,
            },
            UserGain {
                user_id: 99,
                uploaded: 1,
                downloaded: 1,
            },
        ],
        torrents: vec![
            TorrentFigures {
                torrent_id: 10,
                seeders: 2,
                leechers: 1,
                snatched: 1,
                balance: -200,
            },
            TorrentFigures {
                torrent_id: 77,
                seeders: 1,
                leechers: 0,
                snatched: 0,
                balance: 0,
            },
        ],
        peers: vec![
            peer(1, 10, 1, Some("10.0.0.1"), "qBittorrent/4.6.2"),
            peer(1, 10, 2, Some("2001:db8::1"), &long_agent),
            peer(3, 10, 3, None, "Transmission/4.0"),
            peer(5, 10, 4, Some("2001:db8:1:2:3:4:5:6"), "Deluge"),
        ],
        snatches: vec![Snatch {
            user_id: 1,
            torrent_id: 10,
            at: 1_700_000_000,
            ip: Some("10.0.0.1".parse().unwrap()),
        }],
        tokens: vec![
            TokenUse {
                user_id: 1,
                torrent_id: 10,
                downloaded: 700,
            },
            // No row yet: `Time` must be given (Ocelot's statement fails here).
            TokenUse {
                user_id: 5,
                torrent_id: 11,
                downloaded: 9,
            },
        ],
    };
    let w = g.write(&batch).await.expect("written under strict mode");
    assert_eq!(
        (w.users, w.torrents, w.peers, w.snatches, w.tokens),
        (1, 1, 4, 1, 2)
    );
    assert_eq!(w.skipped, 2, "user 99 and torrent 77 are not the site's");
    assert_eq!(w.addresses_too_wide, 1);
    let row = &db
        .rows("select Uploaded, Downloaded from users_leech_stats where UserID = 1")
        .await[0];
    assert_eq!((row.get::<i64, _>(0), row.get::<i64, _>(1)), (500, 700));
    let row = &db
        .rows("select Seeders, Leechers, Snatched, Balance, last_action is not null from torrents_leech_stats where TorrentID = 10")
        .await[0];
    assert_eq!(
        (
            row.get::<i32, _>(0),
            row.get::<i32, _>(1),
            row.get::<i32, _>(2),
            row.get::<i64, _>(3),
            row.get::<i32, _>(4)
        ),
        (2, 1, 1, -200, 1)
    );
    let peers = db
        .rows("select hex(peer_id), ip, useragent, active, uploaded, remaining, announced, mtime from xbt_files_users order by peer_id")
        .await;
    let ips: Vec<String> = peers.iter().map(|r| r.get(1)).collect();
    assert_eq!(ips, ["10.0.0.1", "2001:db8::1", "", ""]);
    let agent: String = peers[1].get(2);
    assert_eq!(agent.len(), 51);
    assert_eq!(peers[0].get::<i64, _>(4), 1000);
    assert_eq!(peers[0].get::<i32, _>(6), 3);
    let snatch = &db
        .rows("select uid, fid, tstamp, IP from xbt_snatched")
        .await;
    assert_eq!(snatch.len(), 1);
    assert_eq!(snatch[0].get::<String, _>(3), "10.0.0.1");
    db.expect(
        "select Downloaded from users_freeleeches where UserID = 1 and TorrentID = 10",
        700,
    )
    .await;
    db.expect(
        "select Downloaded from users_freeleeches where UserID = 5 and TorrentID = 11",
        9,
    )
    .await;
    // A second batch adds to the counters and replaces the client's row.
    let mut again = batch.clone();
    again.peers[0].uploaded = 5000;
    again.peers[0].active = false;
    g.write(&again).await.unwrap();
    db.expect(
        "select Uploaded from users_leech_stats where UserID = 1",
        1000,
    )
    .await;
    db.expect(
        "select Snatched from torrents_leech_stats where TorrentID = 10",
        2,
    )
    .await;
    db.expect(
        "select Downloaded from users_freeleeches where UserID = 1 and TorrentID = 10",
        1400,
    )
    .await;
    db.expect("select count(*) from xbt_files_users", 4).await;
    db.expect(
        "select uploaded from xbt_files_users where peer_id = unhex(repeat('01', 20))",
        5000,
    )
    .await;
    db.expect("select count(*) from xbt_files_users where active = 0", 1)
        .await;
}

#[tokio::test]
async fn at_start_the_swarms_are_empty() {
    let Some(db) = Db::with_rows("reset").await else {
        return;
    };
    db.run("update torrents_leech_stats set Seeders = 4, Leechers = 2; \
            insert into xbt_files_users (uid, fid, peer_id, active) values (1, 10, repeat('x', 20), 1)")
        .await;
    connect(&db).await.reset_swarms().await.unwrap();
    db.expect(
        "select cast(sum(Seeders) + sum(Leechers) as signed) from torrents_leech_stats",
        0,
    )
    .await;
    db.expect("select count(*) from xbt_files_users where active = 1", 0)
        .await;
}
