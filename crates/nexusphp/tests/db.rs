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

#[tokio::test]
async fn cheaters_hit_and_runs_ipv6_clients_and_flags_are_written_as_nexusphp_writes_them() {
    let Some(db) = site_db::SiteDb::create("nexusphp_write").await else {
        eprintln!("MariaDB is not available here: skipped");
        return;
    };
    db.run(FIXTURE).await;
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
