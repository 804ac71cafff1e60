//! The batched write on a real MariaDB holding NexusPHP's schema as it ships
//! (`tests/fixtures/nexusphp.sql`): the rows the end-to-end test does not reach through
//! announces (cheaters, hit and runs, an IPv6 client, a stop, the flags), written as
//! NexusPHP writes them, and a batch whose write fails leaving nothing.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

use shoal_nexusphp::db::{NexusDb, Sums};
use shoal_nexusphp::model::Peer;
use shoal_nexusphp::site::{Batch, CheaterWrite, SnatchInsert, SnatchWrite, UserWrite};

#[allow(dead_code)]
#[path = "../../accounts/tests/servers/mod.rs"]
mod servers;

#[allow(dead_code)]
#[path = "../../accounts/tests/servers/site_db.rs"]
mod site_db;

const FIXTURE: &str = include_str!("../../../tests/fixtures/nexusphp.sql");
const T: i64 = 1_800_000_000;

fn cheater(comment: &'static str, disabling: bool) -> CheaterWrite {
    CheaterWrite {
        user_id: 1,
        torrent_id: 10,
        at: T,
        uploaded: 2 << 30,
        downloaded: 0,
        secs: 60,
        seeders: 1,
        leechers: 0,
        comment,
        disabling,
    }
}

/// A database `name` on the test MariaDB holding NexusPHP's tables as shipped; `None`
/// (said on stderr) where no MariaDB is available here.
async fn database(name: &str) -> Option<site_db::SiteDb> {
    let Some(db) = site_db::SiteDb::create(name).await else {
        eprintln!("MariaDB is not available here: skipped");
        return None;
    };
    db.run(FIXTURE).await;
    Some(db)
}

#[tokio::test]
async fn cheaters_hit_and_runs_ipv6_clients_and_flags_are_written_as_nexusphp_writes_them() {
    let Some(db) = database("nexusphp_write").await else {
        return;
    };
    db.run(
        "insert into users (id, username, email, passkey) values (1, 'alice', 'a@example.org', \
         '00000000000000000000000000000001'); \
         insert into torrents (id, info_hash, name, filename, size) values \
         (10, 0x0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a, 'T', 't.torrent', 1000)",
    )
    .await;
    let site = NexusDb::connect(&db.url, "+08:00").await.unwrap();
    site.check().await.unwrap();
    let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    let peer = Peer {
        user_id: 1,
        peer_id: *b"-qB4650-aaaaaaaaaaaa",
        ip: IpAddr::V6(v6),
        ipv4: None,
        ipv6: Some(v6),
        port: 6881,
        uploaded: 0,
        downloaded: 700,
        left: 300,
        seeder: false,
        started: T - 60,
        last_action: T,
        prev_action: Some(T - 60),
        agent: "qBittorrent/4.6.5".into(),
        finished_at: 0,
    };
    let batch = Batch {
        peers: vec![(10, peer.clone())],
        snatches: vec![SnatchWrite {
            user_id: 1,
            torrent_id: 10,
            insert: Some(SnatchInsert {
                ip: IpAddr::V6(v6),
                port: 6881,
                uploaded: 0,
                downloaded: 0,
                started: T - 60,
            }),
            downloaded: 700,
            leechtime: 60,
            to_go: 300,
            last_action: T,
            ..SnatchWrite::default()
        }],
        users: vec![UserWrite {
            user_id: 1,
            last_announce_at: Some(T),
            client_select: Some(4),
            show_client_error: Some(true),
            revoke_download: true,
            ..UserWrite::default()
        }],
        cheaters: vec![
            cheater("Abnormally high uploading rate", false),
            cheater("Abnormally high uploading rate", false),
            cheater("User account was automatically disabled by system", true),
        ],
        hit_and_runs: vec![(1, 10)],
        ..Batch::default()
    };
    let sums: Sums = HashMap::from([(1, (0, 350))]);
    let passkeys = HashMap::from([(1, "00000000000000000000000000000001".to_owned())]);
    site.write(&batch, &sums, &passkeys).await.unwrap();

    let n = |sql: String| {
        let db = &db;
        async move { db.number(&format!("select cast(({sql}) as signed)")).await }
    };
    // The client, its address in `ip` and `ipv6`, its times in the site's zone (+08:00).
    assert_eq!(
        n(format!(
            "select count(*) from peers where ip = '{v6}' and ipv6 = '{v6}' and ipv4 = '' \
             and to_go = 300 and seeder = 'no' and downloadoffset = 700 \
             and last_action = '2027-01-15 16:00:00' and passkey like '%1'"
        ))
        .await,
        1
    );
    assert_eq!(
        n(
            "select downloaded + leechtime * 1000 + to_go * 1000000 from snatched \
           where userid = 1 and torrentid = 10"
                .into()
        )
        .await,
        700 + 60_000 + 300_000_000
    );
    assert_eq!(
        n("select downloaded from users where id = 1".into()).await,
        350
    );
    assert_eq!(
        n(
            "select clientselect * 10 + (showclienterror = 'yes') * 100 + (downloadpos = 'no') \
           from users where id = 1 and last_announce_at is not null"
                .into()
        )
        .await,
        141
    );
    // The suspect's second hit on its row of the last 24 h; the disabling row apart.
    assert_eq!(
        n("select hit from cheaters where comment like 'Abnormally%'".into()).await,
        2
    );
    assert_eq!(n("select count(*) from cheaters".into()).await, 2);
    // The hit and run on its snatch, and the snatch's link back.
    assert_eq!(
        n(
            "select count(*) from hit_and_runs h join snatched s on s.id = h.snatched_id \
           and s.hit_and_run_id = h.id where h.uid = 1 and h.torrent_id = 10"
                .into()
        )
        .await,
        1
    );

    // The client stops: its row is deleted; the next batch repeats nothing.
    let stop = Batch {
        peer_deletions: vec![(10, 1, peer.peer_id)],
        hit_and_runs: vec![(1, 10)],
        ..Batch::default()
    };
    site.write(&stop, &Sums::new(), &HashMap::new())
        .await
        .unwrap();
    assert_eq!(n("select count(*) from peers".into()).await, 0);
    assert_eq!(n("select count(*) from hit_and_runs".into()).await, 1);

    // A batch that fails half-way (a table gone) leaves nothing: the credit stays as it was.
    db.run("drop table cheaters").await;
    let failing = Batch {
        cheaters: vec![cheater("x", true)],
        ..Batch::default()
    };
    let sums: Sums = HashMap::from([(1, (0, 1_000))]);
    assert!(site.write(&failing, &sums, &HashMap::new()).await.is_err());
    assert_eq!(
        n("select downloaded from users where id = 1".into()).await,
        350
    );
}

/// `snatched` in one write: more rows than one statement takes (a full, prepared chunk
/// and a short one), new rows with nothing to add (inserted only), a new row with bytes to
/// add (inserted, then added to), and a row the site held that shoal did not know of (its
/// totals kept, `to_go` and `last_action` taken, as the update with nothing to add would).
#[tokio::test]
async fn snatched_rows_are_inserted_in_chunks_and_added_to_only_where_there_is_something_to_add() {
    let Some(db) = database("nexusphp_snatches").await else {
        return;
    };
    db.run(
        "insert into snatched (torrentid, userid, ip, port, uploaded, downloaded, to_go, \
         startdat, last_action) values (10, 5000, '127.0.0.1', 6000, 5, 6, 99, \
         '2020-01-01 00:00:00', '2020-01-01 00:00:00')",
    )
    .await;
    let site = NexusDb::connect(&db.url, "+00:00").await.unwrap();
    let new = |user_id: u32, uploaded: u64| SnatchWrite {
        user_id,
        torrent_id: 10,
        insert: Some(SnatchInsert {
            ip: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 6000,
            uploaded: 1,
            downloaded: 2,
            started: T - 60,
        }),
        uploaded,
        to_go: 300,
        last_action: T,
        ..SnatchWrite::default()
    };
    let mut snatches: Vec<SnatchWrite> = (1..=1_200).map(|u| new(u, 0)).collect();
    snatches.push(new(1_201, 40));
    snatches.push(new(5000, 0));
    let batch = Batch {
        snatches,
        ..Batch::default()
    };
    let w = site
        .write(&batch, &Sums::new(), &HashMap::new())
        .await
        .unwrap();
    assert_eq!(w.snatches, 1_202);
    let n = |sql: &str| {
        let db = &db;
        let sql = format!("select cast(({sql}) as signed)");
        async move { db.number(&sql).await }
    };
    assert_eq!(
        n(
            "select count(*) from snatched where userid <= 1200 and uploaded = 1 \
           and downloaded = 2 and to_go = 300 and last_action = from_unixtime(1800000000)"
        )
        .await,
        1_200
    );
    assert_eq!(
        n("select uploaded from snatched where userid = 1201").await,
        41
    );
    assert_eq!(
        n(
            "select uploaded * 1000000 + downloaded * 1000 + to_go from snatched \
           where userid = 5000 and last_action = from_unixtime(1800000000)"
        )
        .await,
        5_006_300,
        "the site's row: its totals kept"
    );
    assert_eq!(n("select count(*) from snatched").await, 1_202);
}
