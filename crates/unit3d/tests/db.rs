//! The site's database against a real MariaDB (strict `sql_mode`, UNIT3D's tables from the
//! fixture): what `check` finds missing, what `load` reads of the rows a site inserts, the
//! exact rows that `write` leaves, and that a batch that fails leaves nothing.

#![forbid(unsafe_code)]

mod unit3d_site;

use std::net::IpAddr;
use std::time::Duration;

use shoal_unit3d::db::{Error, Unit3dDb, Written};
use shoal_unit3d::model::{
    Batch, Group, HistoryUpdate, Peer, SiteData, Status, Torrent, TorrentUpdate, Unregistered,
    User, UserUpdate,
};
use sqlx::Row;
use unit3d_site::{hex, info_hash, passkey, Site};

/// 2023-11-14 22:13:20 UTC.
const T0: i64 = 1_700_000_000;

/// What `$start` (a future of `Option`) gives, or a return from the test where it gives
/// `None`: the real-server tests are skipped on this machine.
macro_rules! or_skip {
    ($start:expr) => {
        match $start.await {
            Some(started) => started,
            None => return,
        }
    };
}

async fn connected(site: &Site) -> Unit3dDb {
    let mut db = Unit3dDb::connect(&site.url).await.expect("connect");
    db.check().await.expect("UNIT3D's tables");
    db
}

/// A database with the site's rows, and shoal's connection to it; `None` when skipped.
async fn site_and_db(name: &str) -> Option<(Site, Unit3dDb)> {
    let site = Site::with_rows(name).await?;
    let db = connected(&site).await;
    Some((site, db))
}

fn peer(user_id: u32, torrent_id: u32, n: u8) -> Peer {
    let mut peer_id = *b"-qB4620-000000000000";
    peer_id[19] = n;
    Peer {
        user_id,
        torrent_id,
        peer_id,
        ip: IpAddr::from([192, 0, 2, n]),
        port: 51413,
        agent: "qBittorrent/4.6.2".into(),
        uploaded: 0,
        downloaded: 0,
        left: 1000,
        seeder: false,
        active: true,
        visible: true,
        connectable: false,
        created_at: T0,
        updated_at: T0,
    }
}

fn history(user_id: u32, torrent_id: u32) -> HistoryUpdate {
    HistoryUpdate {
        user_id,
        torrent_id,
        agent: "qBittorrent/4.6.2".into(),
        updated_at: T0,
        ..HistoryUpdate::default()
    }
}

#[tokio::test]
async fn check_names_every_table_of_a_database_that_is_not_unit3d() {
    let site = or_skip!(Site::empty("not_unit3d"));
    site.run("create table users (id int unsigned not null primary key)")
        .await;
    let mut db = Unit3dDb::connect(&site.url).await.unwrap();
    let e = db.check().await.unwrap_err();
    assert!(matches!(e, Error::Missing(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "missing in the site's database: table groups, column users.group_id, \
         column users.passkey, column users.can_download, column users.is_donor, \
         column users.is_lifetime, column users.uploaded, column users.downloaded, \
         column users.deleted_at, table torrents, table peers, table history, \
         table blacklist_clients, table freeleech_tokens, table personal_freeleeches, \
         table featured_torrents, table unregistered_info_hashes"
    );
}

#[tokio::test]
async fn check_names_a_dropped_column_and_a_dropped_key() {
    let site = or_skip!(Site::tables("dropped_column"));
    site.run(
        "alter table history drop column seedtime; \
         alter table unregistered_info_hashes drop primary key",
    )
    .await;
    let mut db = Unit3dDb::connect(&site.url).await.unwrap();
    let e = db.check().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "missing in the site's database: column history.seedtime, \
         unique key unregistered_info_hashes (info_hash, user_id)"
    );
}

#[tokio::test]
async fn load_reads_what_the_site_inserted() {
    let site = or_skip!(Site::with_rows("load"));
    let seeder = format!("0x{}", hex(b"-TR4050-aaaaaaaaaaaa"));
    let leecher = format!("0x{}", hex(b"-qB4620-bbbbbbbbbbbb"));
    let gone = format!("0x{}", hex(b"-DE2110-cccccccccccc"));
    let hidden = format!("0x{}", hex(b"-lt0D80-dddddddddddd"));
    site.run(&format!(
        "insert into peers (peer_id, ip, port, agent, uploaded, downloaded, `left`, seeder, \
             created_at, updated_at, torrent_id, user_id, connectable, active, visible) values \
         ({seeder}, inet6_aton('192.0.2.7'), 51413, 'Transmission/4.0.5', 500, 0, 0, 1, \
             '2023-11-14 22:00:00', '2023-11-14 22:13:20', 10, 1, 1, 1, 1), \
         ({leecher}, inet6_aton('2001:db8::7'), 6881, 'qBittorrent/4.6.2', 0, 300, 700, 0, \
             '2023-11-14 22:00:00', '2023-11-14 22:13:20', 10, 2, 0, 1, 1), \
         ({gone}, inet6_aton('198.51.100.1'), 6882, 'Deluge/2.1.1', 0, 0, 1000, 0, \
             '2023-11-14 22:00:00', '2023-11-14 22:10:00', 14, 1, 0, 0, 1), \
         ({hidden}, inet6_aton('198.51.100.2'), 6883, 'Deluge/2.1.1', 0, 0, 1000, 0, \
             '2023-11-14 22:00:00', '2023-11-14 22:10:00', 15, 1, 0, 1, 0); \
         insert into blacklist_clients (name, reason, peer_id_prefix) values \
             ('Transmission 4.0.5', 'Bad client', '-TR4050-'), ('Xunlei', null, '-XL'); \
         insert into freeleech_tokens (user_id, torrent_id) values (1, 15), (2, 10); \
         insert into personal_freeleeches (user_id, created_at) values (5, now()); \
         insert into featured_torrents (user_id, torrent_id) values (1, 14)"
    ))
    .await;
    let data = connected(&site).await.load().await.unwrap();

    let group = |id, slug: &str, download_slots, special| Group {
        id,
        slug: slug.into(),
        download_slots,
        is_immune: special,
        is_freeleech: special,
        is_double_upload: special,
    };
    let user = |id, group_id, can_download, is_donor, is_lifetime, counts: (u32, u32)| User {
        id,
        group_id,
        passkey: passkey(id),
        can_download,
        is_donor,
        is_lifetime,
        num_seeding: counts.0,
        num_leeching: counts.1,
    };
    let torrent = |id: u32, status, download_factor, upload_factor| Torrent {
        id,
        info_hash: info_hash(id as u8),
        status,
        is_deleted: false,
        seeders: 0,
        leechers: 0,
        times_completed: 0,
        download_factor,
        upload_factor,
    };
    // As inserted above: created at 22:00:00, last announced at 22:10:00 unless said.
    let peer = |user_id, torrent_id, id: &[u8; 20], ip: &str, port, agent: &str| Peer {
        peer_id: *id,
        ip: ip.parse().unwrap(),
        port,
        agent: agent.into(),
        created_at: T0 - 800,
        updated_at: T0 - 200,
        ..peer(user_id, torrent_id, 0)
    };
    let mut peers = vec![
        Peer {
            uploaded: 500,
            left: 0,
            seeder: true,
            connectable: true,
            updated_at: T0,
            ..peer(
                1,
                10,
                b"-TR4050-aaaaaaaaaaaa",
                "192.0.2.7",
                51413,
                "Transmission/4.0.5",
            )
        },
        Peer {
            downloaded: 300,
            left: 700,
            updated_at: T0,
            ..peer(
                2,
                10,
                b"-qB4620-bbbbbbbbbbbb",
                "2001:db8::7",
                6881,
                "qBittorrent/4.6.2",
            )
        },
        Peer {
            active: false,
            ..peer(
                1,
                14,
                b"-DE2110-cccccccccccc",
                "198.51.100.1",
                6882,
                "Deluge/2.1.1",
            )
        },
        Peer {
            visible: false,
            ..peer(
                1,
                15,
                b"-lt0D80-dddddddddddd",
                "198.51.100.2",
                6883,
                "Deluge/2.1.1",
            )
        },
    ];
    let mut loaded_peers = data.peers.clone();
    loaded_peers.sort_by_key(|p| (p.torrent_id, p.user_id));
    peers.sort_by_key(|p| (p.torrent_id, p.user_id));
    assert_eq!(loaded_peers, peers);
    assert_eq!(
        data,
        SiteData {
            groups: vec![
                group(1, "user", Some(8), false),
                group(2, "banned", None, false),
                group(3, "validating", None, false),
                group(4, "disabled", None, false),
                group(5, "vip", None, true),
            ],
            // Dave is deleted; alice's inactive and invisible clients take no slot.
            users: vec![
                user(1, 1, true, false, false, (1, 0)),
                user(2, 5, true, true, false, (0, 1)),
                user(3, 2, false, false, false, (0, 0)),
                user(5, 1, true, true, true, (0, 0)),
            ],
            // 16 is deleted: loaded, its announces refused by name (UNIT3D-Announce v0.3.1);
            // 17 re-uploads 10's info hash, both approved: the older, 10, is kept.
            torrents: vec![
                torrent(10, Status::Approved, 100, 100),
                torrent(11, Status::Pending, 100, 100),
                torrent(12, Status::Rejected, 100, 100),
                torrent(13, Status::Postponed, 100, 100),
                torrent(14, Status::Approved, 0, 200),
                torrent(15, Status::Approved, 75, 100),
                Torrent {
                    is_deleted: true,
                    ..torrent(16, Status::Approved, 100, 100)
                },
            ],
            peers: data.peers.clone(),
            blacklisted_prefixes: vec![b"-TR4050-".to_vec(), b"-XL".to_vec()],
            freeleech_tokens: vec![(1, 15), (2, 10)],
            personal_freeleech: vec![5],
            featured: vec![14],
        }
    );
}

/// Reads back the columns shoal writes in `peers`, by (user, torrent, last peer-id byte).
async fn peer_rows(site: &Site) -> Vec<String> {
    let rows = site
        .rows(
            "select user_id, torrent_id, peer_id, inet6_ntoa(ip) as ip, port, agent, uploaded, \
             downloaded, `left`, seeder, active, visible, connectable, \
             cast(unix_timestamp(created_at) as signed) as created, \
             cast(unix_timestamp(updated_at) as signed) as updated \
             from peers order by user_id, torrent_id, peer_id",
        )
        .await;
    rows.iter()
        .map(|r| {
            let peer_id: Vec<u8> = r.get("peer_id");
            format!(
                "{}/{}/{} {}:{} {} up {} down {} left {} seeder {} active {} visible {} \
                 connectable {} created {} updated {}",
                r.get::<u32, _>("user_id"),
                r.get::<u32, _>("torrent_id"),
                peer_id[19],
                r.get::<String, _>("ip"),
                r.get::<u16, _>("port"),
                r.get::<String, _>("agent"),
                r.get::<u64, _>("uploaded"),
                r.get::<u64, _>("downloaded"),
                r.get::<u64, _>("left"),
                r.get::<bool, _>("seeder"),
                r.get::<bool, _>("active"),
                r.get::<bool, _>("visible"),
                r.get::<bool, _>("connectable"),
                r.get::<i64, _>("created") - T0,
                r.get::<i64, _>("updated") - T0,
            )
        })
        .collect()
}

/// Reads back `history`, by (user, torrent); times relative to `T0`.
async fn history_rows(site: &Site) -> Vec<String> {
    let rows = site
        .rows(
            "select user_id, torrent_id, agent, uploaded, actual_uploaded, client_uploaded, \
             downloaded, actual_downloaded, client_downloaded, seeder, active, seedtime, \
             immune, cast(unix_timestamp(created_at) as signed) as created, \
             cast(unix_timestamp(updated_at) as signed) as updated, \
             cast(unix_timestamp(completed_at) as signed) as completed \
             from history order by user_id, torrent_id",
        )
        .await;
    rows.iter()
        .map(|r| {
            let completed: Option<i64> = r.get("completed");
            format!(
                "{}/{} {} up {}/{}/{} down {}/{}/{} seeder {} active {} seedtime {} immune {} \
                 created {} updated {} completed {:?}",
                r.get::<u32, _>("user_id"),
                r.get::<u32, _>("torrent_id"),
                r.get::<String, _>("agent"),
                r.get::<u64, _>("uploaded"),
                r.get::<u64, _>("actual_uploaded"),
                r.get::<u64, _>("client_uploaded"),
                r.get::<u64, _>("downloaded"),
                r.get::<u64, _>("actual_downloaded"),
                r.get::<u64, _>("client_downloaded"),
                r.get::<bool, _>("seeder"),
                r.get::<bool, _>("active"),
                r.get::<u64, _>("seedtime"),
                r.get::<bool, _>("immune"),
                r.get::<i64, _>("created") - T0,
                r.get::<i64, _>("updated") - T0,
                completed.map(|c| c - T0),
            )
        })
        .collect()
}

/// Users' totals and torrents' figures, and the unregistered hashes.
async fn totals(site: &Site) -> Vec<String> {
    let mut out = Vec::new();
    for r in site
        .rows("select id, uploaded, downloaded from users order by id")
        .await
    {
        out.push(format!(
            "user {} up {} down {}",
            r.get::<u32, _>("id"),
            r.get::<u64, _>("uploaded"),
            r.get::<u64, _>("downloaded")
        ));
    }
    for r in site
        .rows(
            "select id, seeders, leechers, times_completed, balance from torrents \
             where seeders + leechers + times_completed > 0 or balance is not null order by id",
        )
        .await
    {
        out.push(format!(
            "torrent {} seeders {} leechers {} completed {} balance {:?}",
            r.get::<u32, _>("id"),
            r.get::<i32, _>("seeders"),
            r.get::<i32, _>("leechers"),
            r.get::<i32, _>("times_completed"),
            r.get::<Option<i64>, _>("balance")
        ));
    }
    for r in site
        .rows(
            "select user_id, info_hash, cast(unix_timestamp(created_at) as signed) as created, \
             cast(unix_timestamp(updated_at) as signed) as updated \
             from unregistered_info_hashes order by user_id, info_hash",
        )
        .await
    {
        let hash: Vec<u8> = r.get("info_hash");
        out.push(format!(
            "unregistered {} {:02x} created {} updated {}",
            r.get::<u32, _>("user_id"),
            hash[0],
            r.get::<i64, _>("created") - T0,
            r.get::<i64, _>("updated") - T0
        ));
    }
    out
}

/// Every row `write` changes, as the three readers above show them.
async fn snapshot(site: &Site) -> [Vec<String>; 3] {
    [
        peer_rows(site).await,
        history_rows(site).await,
        totals(site).await,
    ]
}

/// The first of two batches: alice seeds 10, bob leeches it, alice's client on 14 starts.
fn first_batch() -> Batch {
    Batch {
        peers: vec![
            Peer {
                uploaded: 1000,
                left: 0,
                seeder: true,
                connectable: true,
                ..peer(1, 10, 1)
            },
            Peer {
                downloaded: 1000,
                ip: "2001:db8::2".parse().unwrap(),
                ..peer(2, 10, 2)
            },
            peer(1, 14, 3),
        ],
        peer_deletions: vec![],
        history: vec![
            HistoryUpdate {
                credited_uploaded: 1000,
                actual_uploaded: 1000,
                client_uploaded: 1000,
                seeder: true,
                active: true,
                seedtime: 0,
                ..history(1, 10)
            },
            HistoryUpdate {
                credited_downloaded: 1000,
                actual_downloaded: 1000,
                client_downloaded: 1000,
                active: true,
                immune: true,
                ..history(2, 10)
            },
        ],
        users: vec![
            UserUpdate {
                user_id: 1,
                uploaded: 1000,
                downloaded: 0,
            },
            UserUpdate {
                user_id: 2,
                uploaded: 0,
                downloaded: 1000,
            },
        ],
        torrents: vec![TorrentUpdate {
            torrent_id: 10,
            seeders: 1,
            leechers: 1,
            times_completed: 0,
            balance: 0,
        }],
        unregistered: vec![Unregistered {
            user_id: 1,
            info_hash: [0xee; 20],
            at: T0,
        }],
    }
}

/// The second, 30 minutes later: bob completes 10 and seeds; alice's client on 14 is
/// forgotten; alice announces the unknown hash again; agents past the column are cut.
fn second_batch() -> Batch {
    let later = T0 + 1800;
    let long_agent = "x".repeat(70);
    Batch {
        peers: vec![
            Peer {
                uploaded: 1500,
                left: 0,
                seeder: true,
                connectable: true,
                updated_at: later,
                ..peer(1, 10, 1)
            },
            Peer {
                downloaded: 2000,
                left: 0,
                seeder: true,
                ip: "2001:db8::2".parse().unwrap(),
                agent: long_agent.clone(),
                // Whatever the tracker says, the row keeps the time it was first written.
                created_at: later,
                updated_at: later,
                ..peer(2, 10, 2)
            },
        ],
        peer_deletions: vec![(1, 14, peer(1, 14, 3).peer_id)],
        history: vec![
            HistoryUpdate {
                credited_uploaded: 500,
                actual_uploaded: 500,
                client_uploaded: 1500,
                seeder: true,
                active: true,
                seedtime: 1800,
                updated_at: later,
                ..history(1, 10)
            },
            HistoryUpdate {
                credited_downloaded: 500,
                actual_downloaded: 1000,
                client_downloaded: 2000,
                seeder: true,
                active: true,
                immune: false,
                completed_at: Some(later),
                updated_at: later,
                agent: long_agent,
                ..history(2, 10)
            },
        ],
        users: vec![
            UserUpdate {
                user_id: 1,
                uploaded: 500,
                downloaded: 0,
            },
            UserUpdate {
                user_id: 2,
                uploaded: 0,
                downloaded: 500,
            },
        ],
        torrents: vec![TorrentUpdate {
            torrent_id: 10,
            seeders: 2,
            leechers: 0,
            times_completed: 1,
            balance: -500,
        }],
        unregistered: vec![Unregistered {
            user_id: 1,
            info_hash: [0xee; 20],
            at: later,
        }],
    }
}

#[tokio::test]
async fn write_leaves_the_exact_rows_across_two_batches() {
    let (site, db) = or_skip!(site_and_db("write"));
    let written = db.write(&first_batch()).await.unwrap();
    assert_eq!(
        written,
        Written {
            peers: 3,
            peers_deleted: 0,
            history: 2,
            users: 2,
            torrents: 1,
            unregistered: 1,
            skipped: 0,
            // BEGIN, two look-ups, one statement per table, COMMIT.
            statements: 9,
        }
    );
    let written = db.write(&second_batch()).await.unwrap();
    assert_eq!((written.peers, written.peers_deleted), (2, 1));

    let cut = "x".repeat(64);
    assert_eq!(
        peer_rows(&site).await,
        [
            "1/10/1 192.0.2.1:51413 qBittorrent/4.6.2 up 1500 down 0 left 0 seeder true \
             active true visible true connectable true created 0 updated 1800"
                .to_string(),
            format!(
                "2/10/2 2001:db8::2:51413 {cut} up 0 down 2000 left 0 seeder true active true \
                 visible true connectable false created 0 updated 1800"
            ),
        ]
    );
    assert_eq!(
        history_rows(&site).await,
        [
            "1/10 qBittorrent/4.6.2 up 1500/1500/1500 down 0/0/0 seeder true active true \
             seedtime 1800 immune false created 0 updated 1800 completed None"
                .to_string(),
            format!(
                "2/10 {cut} up 0/0/0 down 1500/2000/2000 seeder true active true seedtime 0 \
                 immune false created 0 updated 1800 completed Some(1800)"
            ),
        ]
    );
    assert_eq!(
        totals(&site).await,
        [
            "user 1 up 1500 down 0",
            "user 2 up 0 down 1500",
            "user 3 up 0 down 0",
            "user 4 up 0 down 0",
            "user 5 up 0 down 0",
            "torrent 10 seeders 2 leechers 0 completed 1 balance Some(-500)",
            "unregistered 1 ee created 0 updated 1800",
        ]
    );

    // A later completion does not move completed_at; a batch without one keeps it.
    let mut again = second_batch();
    for h in &mut again.history {
        h.completed_at = Some(T0 + 9999);
    }
    again.peer_deletions.clear();
    db.write(&again).await.unwrap();
    let rows = history_rows(&site).await;
    assert!(rows[1].ends_with("completed Some(1800)"), "{rows:?}");
    assert!(rows[0].ends_with("completed Some(9999)"), "{rows:?}");
}

#[tokio::test]
async fn rows_of_users_and_torrents_the_site_removed_are_left_out() {
    let (site, db) = or_skip!(site_and_db("removed"));
    // The site purges torrent 14 (its peers and history go with it, by their keys).
    site.run("delete from torrents where id = 14").await;
    let mut batch = first_batch();
    batch.history.push(history(1, 14));
    batch.history.push(history(99, 10));
    batch.users.push(UserUpdate {
        user_id: 99,
        uploaded: 5,
        downloaded: 5,
    });
    batch.torrents.push(TorrentUpdate {
        torrent_id: 14,
        ..TorrentUpdate::default()
    });
    batch.unregistered.push(Unregistered {
        user_id: 99,
        info_hash: [0xdd; 20],
        at: T0,
    });
    let written = db.write(&batch).await.unwrap();
    // Alice's peer on 14, her history on 14, user 99's history, totals and hash, torrent 14.
    assert_eq!(written.skipped, 6, "{written:?}");
    assert_eq!((written.peers, written.history), (2, 2));
    site.expect("select count(*) from peers", 2).await;
    site.expect("select count(*) from users where id = 99", 0)
        .await;
    site.expect("select count(*) from torrents where id = 14", 0)
        .await;
}

#[tokio::test]
async fn a_batch_that_fails_halfway_changes_nothing() {
    let (site, db) = or_skip!(site_and_db("fails_halfway"));
    db.write(&first_batch()).await.unwrap();
    let before = snapshot(&site).await;
    // Alice's seed time is one second short of what the column holds: the history upsert,
    // after the peers and before the users, fails in strict mode.
    site.run("update history set seedtime = 18446744073709551614 where user_id = 1")
        .await;
    let before_seedtime = history_rows(&site).await;
    let e = db.write(&second_batch()).await.unwrap_err();
    assert!(matches!(e, Error::Query(_)), "{e}");
    assert!(e.to_string().contains("out of range"), "{e}");
    let after = snapshot(&site).await;
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1], before_seedtime);
    assert_eq!(after[2], before[2]);
}

#[tokio::test]
async fn a_batch_while_the_server_is_stopped_fails_then_writes_once_it_is_back() {
    let site = or_skip!(Site::with_rows_alone("server_stopped"));
    let db = connected(&site)
        .await
        .with_operation_timeout(Duration::from_secs(10));
    db.write(&first_batch()).await.unwrap();
    let before = snapshot(&site).await;
    site.server.stop_mariadb().unwrap();
    let failed = db.write(&second_batch()).await;
    site.server.start_mariadb().unwrap();
    let e = failed.unwrap_err();
    assert!(matches!(e, Error::Query(_) | Error::TimedOut(_)), "{e:?}");
    let after = snapshot(&site).await;
    assert_eq!(after, before);
    db.write(&second_batch()).await.unwrap();
    site.expect(
        "select cast(seedtime as signed) from history where user_id = 1",
        1800,
    )
    .await;
}

#[tokio::test]
async fn large_batches_go_in_chunks_of_a_thousand_rows() {
    let site = or_skip!(Site::with_rows("chunks"));
    // 60 more users and 50 more torrents: 3,000 history rows, 2,500 peers.
    let users: Vec<String> = (100..160)
        .map(|id| {
            format!(
                "({id}, 'u{id}', 'u{id}@example.org', 'x', '{}', 1, 'r{id}')",
                passkey(id)
            )
        })
        .collect();
    let torrents: Vec<String> = (100..150)
        .map(|id| {
            format!(
                "({id}, 't{id}', '', 't{id}', 1, 1, 1, 0x{})",
                hex(&[id as u8; 20])
            )
        })
        .collect();
    site.run(&format!(
        "insert into users (id, username, email, password, passkey, group_id, rsskey) \
         values {}; \
         insert into torrents (id, name, description, file_name, num_file, size, user_id, \
             info_hash) values {}",
        users.join(", "),
        torrents.join(", ")
    ))
    .await;
    let db = connected(&site).await;
    let mut batch = Batch::default();
    for user in 100..160 {
        for torrent in 100..150 {
            batch.history.push(HistoryUpdate {
                actual_uploaded: 1,
                credited_uploaded: 2,
                ..history(user, torrent)
            });
        }
    }
    for n in 0..2500u32 {
        let mut p = peer(100 + n / 50, 100 + n % 50, 0);
        p.peer_id[..4].copy_from_slice(&n.to_be_bytes());
        batch.peers.push(p);
    }
    let written = db.write(&batch).await.unwrap();
    // BEGIN, 2 look-ups, 3 peer and 3 history statements, COMMIT.
    assert_eq!(written.statements, 10, "{written:?}");
    assert_eq!((written.peers, written.history), (2500, 3000));
    let peers = site.number("select count(*) from peers").await;
    let credited = site
        .number("select cast(sum(uploaded) as signed) from history")
        .await;
    assert_eq!((peers, credited), (2500, 6000));
}

#[tokio::test]
async fn agents_are_cut_to_the_columns_length_as_found() {
    let site = or_skip!(Site::with_rows("agent_width"));
    site.run("alter table peers modify agent varchar(16) not null")
        .await;
    let db = connected(&site).await;
    db.write(&first_batch()).await.unwrap();
    let agents: Vec<String> = sqlx::query_scalar("select agent from peers")
        .fetch_all(&site.pool)
        .await
        .unwrap();
    assert!(agents.iter().all(|a| a == "qBittorrent/4.6."), "{agents:?}");
    let history: Vec<String> = sqlx::query_scalar("select agent from history")
        .fetch_all(&site.pool)
        .await
        .unwrap();
    assert!(
        history.iter().all(|a| a == "qBittorrent/4.6.2"),
        "{history:?}"
    );
}
