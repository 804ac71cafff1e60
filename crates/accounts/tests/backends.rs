//! The accounts database against real backends: a SQLite file, and PostgreSQL and MariaDB
//! servers that the test installs and starts itself (see `servers`). One scenario runs on
//! all three, so the dialects cannot drift; an outage test stops PostgreSQL under a write.

#![forbid(unsafe_code)]

mod servers;

use std::time::{Duration, Instant};

use shoal_accounts::{
    Accounting, ClientPrefix, Database, Delta, Dialect, Error, InfoHashBytes, PeerRow, Schema,
    Torrent, User, Written,
};

const FREELEECH: InfoHashBytes = [0x11; 20];
const FREELEECH_V2: InfoHashBytes = [0x12; 20];
const PLAIN: InfoHashBytes = [0x22; 20];

/// The torrent ids the scenario registers its hashes under (`NEVER_REGISTERED_ID`: none).
const FREELEECH_ID: u64 = 100;
const PLAIN_ID: u64 = 101;
const NEVER_REGISTERED_ID: u64 = 333;

fn delta(user_id: u64, torrent_id: u64, uploaded: u64, downloaded: u64) -> Delta {
    Delta {
        user_id,
        torrent_id,
        uploaded,
        downloaded,
        ..Delta::default()
    }
}

/// The whole life of an accounts database: migrations, upserts (the site's ids and passkeys
/// as keys), refusals, a batch written twice with one snatch, totals, user stats, deletes,
/// and a second start on the same database.
async fn accounts_scenario(url: &str, dialect: Dialect) {
    let db = Database::connect(url).await.expect("connect and migrate");
    assert_eq!(db.dialect(), dialect);
    let empty = db.load().await.unwrap();
    assert!(empty.users.is_empty() && empty.torrents.is_empty() && empty.clients.is_empty());

    // Users: imported with the site's ids and passkeys; a second put replaces the settings.
    let mut alice = User::new(7, "0123456789abcdef0123456789abcdef");
    db.put_user(&alice).await.unwrap();
    let mut bob = User::new(9, "BOBPASSKEYbobpasskey");
    bob.enabled = false;
    bob.download_factor = 0.5;
    db.put_user(&bob).await.unwrap();
    alice.can_download = false;
    alice.upload_factor = 1.5;
    db.put_user(&alice).await.unwrap();
    let stolen = db
        .put_user(&User::new(11, alice.passkey.clone()))
        .await
        .unwrap_err();
    assert!(matches!(stolen, Error::Conflict(_)), "{stolen}");
    let bad = db.put_user(&User::new(12, "")).await.unwrap_err();
    assert!(matches!(bad, Error::Invalid(_)), "{bad}");

    // Torrents: keyed by v1 hash, with the site's id or the next free one.
    let mut freeleech = Torrent::new(Some(100), FREELEECH);
    freeleech.info_hash_v2 = Some(FREELEECH_V2);
    freeleech.download_factor = 0.0;
    freeleech.upload_factor = 2.0;
    assert_eq!(db.put_torrent(&freeleech).await.unwrap(), 100);
    assert_eq!(
        db.put_torrent(&Torrent::new(None, PLAIN)).await.unwrap(),
        101
    );
    let mut plain = Torrent::new(None, PLAIN);
    plain.upload_factor = 3.0;
    assert_eq!(
        db.put_torrent(&plain).await.unwrap(),
        101,
        "same hash, same id"
    );
    plain.id = Some(101);
    let moved = db
        .put_torrent(&Torrent::new(Some(5), PLAIN))
        .await
        .unwrap_err();
    assert!(matches!(moved, Error::Conflict(_)), "{moved}");
    let mut thief = Torrent::new(None, [0x44; 20]);
    thief.info_hash_v2 = Some(FREELEECH_V2);
    let stolen = db.put_torrent(&thief).await.unwrap_err();
    assert!(matches!(stolen, Error::Conflict(_)), "{stolen}");

    // Clients: putting twice is fine, deleting answers whether it was there.
    for prefix in ["-qB", "-TR", "-qB", "-lt"] {
        db.put_client(&ClientPrefix(prefix.into())).await.unwrap();
    }
    assert!(db.delete_client(&ClientPrefix("-TR".into())).await.unwrap());
    assert!(!db.delete_client(&ClientPrefix("-TR".into())).await.unwrap());

    let loaded = db.load().await.unwrap();
    assert_eq!(loaded.users, vec![alice.clone(), bob.clone()]);
    assert_eq!(loaded.torrents, vec![freeleech.clone(), plain.clone()]);
    let clients: Vec<ClientPrefix> = ["-lt", "-qB"].map(|p| ClientPrefix(p.into())).into();
    assert_eq!(loaded.clients, clients);

    // A batch: known deltas, a snatch, a user that is gone, a torrent never registered.
    let mut snatch = delta(7, PLAIN_ID, 10, 500);
    snatch.leech_seconds = 60;
    snatch.completed = true;
    let mut seeding = delta(7, FREELEECH_ID, 1000, 0);
    seeding.seed_seconds = 30;
    let batch = [
        seeding,
        snatch,
        delta(9, FREELEECH_ID, 4, 0),
        delta(999, FREELEECH_ID, 1, 1),
        delta(7, NEVER_REGISTERED_ID, 5, 0),
    ];
    let first = db.write(&batch).await.unwrap();
    let expected = Written {
        applied: 4,
        without_user: 1,
        without_torrent: 1,
        new_snatches: 1,
        already_written: false,
    };
    assert_eq!(first, expected);
    // The same batch again adds the bytes again but not the snatch.
    let second = db.write(&batch).await.unwrap();
    assert_eq!(
        second,
        Written {
            new_snatches: 0,
            ..expected
        }
    );
    assert_eq!(db.write(&[]).await.unwrap(), Written::default());

    let stats = db.user_stats(7).await.unwrap().expect("alice");
    assert_eq!(
        (stats.uploaded, stats.downloaded, stats.completed),
        (2 * (1000 + 10 + 5), 2 * 500, 1)
    );
    assert_eq!((stats.seed_seconds, stats.leech_seconds), (60, 120));
    let rows: Vec<_> = stats
        .torrents
        .iter()
        .map(|t| {
            (
                t.torrent_id,
                t.info_hash,
                t.uploaded,
                t.downloaded,
                t.snatched(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (100, FREELEECH, 2000, 0, false),
            (101, PLAIN, 20, 1000, true)
        ]
    );
    assert_eq!(
        (
            stats.torrents[0].seed_seconds,
            stats.torrents[1].leech_seconds
        ),
        (60, 120)
    );
    assert!(stats.torrents.iter().all(|t| t.updated_at > 1_700_000_000));
    assert_eq!(db.user_stats(9).await.unwrap().unwrap().uploaded, 8);
    // A batch written under an id counts once, however often it is written again (a retry
    // after a COMMIT whose answer was lost).
    let once = [Delta {
        user_id: 9,
        torrent_id: PLAIN_ID,
        uploaded: 100,
        ..Delta::default()
    }];
    let w = db.write_batch(Some("batch-1"), &once).await.unwrap();
    assert_eq!((w.applied, w.already_written), (1, false));
    let w = db.write_batch(Some("batch-1"), &once).await.unwrap();
    assert_eq!((w.applied, w.already_written), (0, true));
    assert_eq!(db.user_stats(9).await.unwrap().unwrap().uploaded, 108);
    assert!(db.write_batch(Some(&"x".repeat(65)), &once).await.is_err());
    assert_eq!(db.user_stats(999).await.unwrap(), None);

    // Several snatches in one batch, of two users, one of them already counted: each
    // (user, torrent) counts once, and each user's count gets only their new ones.
    let snatched = |user_id, torrent_id| Delta {
        user_id,
        torrent_id,
        completed: true,
        ..Delta::default()
    };
    let w = db
        .write(&[
            snatched(7, FREELEECH_ID),
            snatched(7, PLAIN_ID),
            snatched(9, FREELEECH_ID),
        ])
        .await
        .unwrap();
    assert_eq!((w.applied, w.new_snatches), (3, 2));
    assert_eq!(db.user_stats(7).await.unwrap().unwrap().completed, 2);
    assert_eq!(db.user_stats(9).await.unwrap().unwrap().completed, 1);
    let w = db.write(&[snatched(9, FREELEECH_ID)]).await.unwrap();
    assert_eq!(w.new_snatches, 0);

    // Deleting a torrent drops its rows, not the user's totals; deleting a user drops theirs.
    assert!(db.delete_torrent(&PLAIN).await.unwrap());
    assert!(!db.delete_torrent(&PLAIN).await.unwrap());
    let after = db.user_stats(7).await.unwrap().unwrap();
    assert_eq!(
        (after.uploaded, after.completed, after.torrents.len()),
        (2030, 2, 1)
    );
    assert!(db.delete_user(9).await.unwrap());
    assert!(!db.delete_user(9).await.unwrap());
    db.close().await;

    // A second start on the same database: migrations already applied, everything kept.
    let again = Database::connect(url).await.expect("second start");
    let reloaded = again.load().await.unwrap();
    assert_eq!(reloaded.users, vec![alice]);
    assert_eq!(reloaded.torrents, vec![freeleech]);
    assert_eq!(reloaded.clients, clients);
    again.close().await;
}

#[tokio::test]
async fn sqlite_file_is_created_with_its_schema_and_keeps_the_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("accounts.db");
    assert!(!path.exists());
    accounts_scenario(&format!("sqlite://{}", path.display()), Dialect::Sqlite).await;
    assert!(path.exists());
}

/// shoal's own schema through the seam every site schema implements: it loads what
/// `load` loads, keeps no per-client rows, and writes the sums of a batch (raw bytes and
/// the snatch's time ride along; its tables keep the credited sums and the snatch).
#[tokio::test]
async fn shoal_schema_through_the_seam() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("seam.db").display());
    let db = Database::connect(&url).await.unwrap();
    db.put_user(&User::new(5, "0123456789abcdef0123456789abcdef"))
        .await
        .unwrap();
    db.put_torrent(&Torrent::new(Some(3), PLAIN)).await.unwrap();
    let schema: &dyn Schema = &db;
    assert_eq!((schema.name(), schema.keeps_peers()), ("shoal", false));
    let loaded = schema.load().await.unwrap();
    assert_eq!((loaded.users.len(), loaded.torrents.len()), (1, 1));
    let sums = [Delta {
        uploaded: 200,
        uploaded_raw: 100,
        completed: true,
        completed_at: Some(1),
        ..delta(5, 3, 200, 0)
    }];
    let peers = [PeerRow {
        user_id: 5,
        torrent_id: 3,
        protocol: "udp",
        ..PeerRow::default()
    }];
    let batch = Accounting {
        id: Some("seam-1"),
        sums: &sums,
        peers: &peers,
    };
    let w = schema.write(batch).await.unwrap();
    assert_eq!((w.applied, w.new_snatches), (1, 1));
    let stats = db.user_stats(5).await.unwrap().unwrap();
    assert_eq!(stats.uploaded, 200);
    let w = schema.write(batch).await.unwrap();
    assert!(w.already_written);
}

#[tokio::test]
async fn postgres_server_keeps_the_accounts() {
    let Some((server, _turn)) = servers::postgres().await else {
        return;
    };
    let url = server.create_database("shoal_accounts");
    accounts_scenario(&url, Dialect::Postgres).await;
}

#[tokio::test]
async fn mariadb_server_keeps_the_accounts() {
    let Some(server) = servers::mariadb() else {
        return;
    };
    let url = server.create_database("shoal_accounts");
    accounts_scenario(&url, Dialect::MySql).await;
}

/// The database stops under the tracker: the write fails within seconds (no hang), nothing of
/// the batch is kept, and once the server is back the same batch goes in whole.
#[tokio::test]
async fn postgres_stopped_mid_run_fails_the_write_and_the_kept_batch_goes_in_after() {
    let Some((server, _turn)) = servers::postgres().await else {
        return;
    };
    let url = server.create_database("shoal_outage");
    let db = Database::connect(&url).await.unwrap();
    db.put_user(&User::new(1, "outagepasskey")).await.unwrap();
    db.put_torrent(&Torrent::new(Some(1), PLAIN)).await.unwrap();
    db.write(&[delta(1, 1, 100, 200)]).await.unwrap();

    let mut finished = delta(1, 1, 7, 3000);
    finished.completed = true;
    let kept = [finished, delta(1, 1, 1, 1)];
    server.stop_postgres().unwrap();
    let began = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(30), db.write(&kept))
        .await
        .expect("a write to a stopped server must fail, not hang");
    let failed_in = began.elapsed();
    assert!(outcome.is_err(), "write to a stopped server: {outcome:?}");
    assert!(
        failed_in < Duration::from_secs(10),
        "failed after {failed_in:?}"
    );
    eprintln!(
        "write to the stopped server failed in {failed_in:.1?}: {}",
        outcome.unwrap_err()
    );

    server.start_postgres().unwrap();
    let written = db
        .write(&kept)
        .await
        .expect("the kept batch, once the server is back");
    assert_eq!(written.new_snatches, 1);
    let stats = db.user_stats(1).await.unwrap().unwrap();
    assert_eq!(
        (stats.uploaded, stats.downloaded, stats.completed),
        (108, 3201, 1)
    );
    db.close().await;
}

#[tokio::test]
async fn unknown_schemes_and_unreachable_servers_are_clear_errors() {
    let unknown = Database::connect("redis://127.0.0.1/0").await.unwrap_err();
    assert!(matches!(unknown, Error::UnknownScheme(_)), "{unknown}");
    let port = servers::free_port().unwrap();
    for url in [
        format!("postgres://shoal:secret@127.0.0.1:{port}/shoal"),
        format!("mysql://shoal:secret@127.0.0.1:{port}/shoal"),
    ] {
        let began = Instant::now();
        let refused = Database::connect(&url).await.unwrap_err();
        assert!(matches!(refused, Error::Unreachable { .. }), "{refused}");
        let message = refused.to_string();
        assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
        assert!(!message.contains("secret"), "{message}");
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{:?}",
            began.elapsed()
        );
    }
    let missing_dir = Database::connect("sqlite:///nonexistent-dir/x/accounts.db").await;
    assert!(
        matches!(missing_dir, Err(Error::Unreachable { .. })),
        "{missing_dir:?}"
    );
}
