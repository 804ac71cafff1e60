//! The cleanup's records on a real Redis (`redis-server` with a password, as a NexusPHP
//! site runs it): the keys, fields, values and expiries NexusPHP's announce leaves
//! (`public/announce.php:631-635`, `app/Repositories/CleanupRepository.php:42-54`,
//! `:163-193`), the shared lock, a batch key the cleanup left reused, and a Redis that does
//! not answer failing within the bound with every record handed back.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use shoal_nexusphp::cleanup::{Cleanup, Lifetimes, BATCH_KEYS, TIMEOUT};

#[allow(dead_code)]
#[path = "../../accounts/tests/servers/mod.rs"]
mod servers;
use servers::redis as redis_server;

/// 2024-10-20 15:47:40 UTC: 23:47:40 in the site's zone (+08:00).
const T: i64 = 1_729_439_260;
const SUFFIX: &str = "20241020_234740";
/// `main.autoclean_interval_one` 900, `_three` 7200, `_four` 86400.
const LIFE: Lifetimes = Lifetimes {
    lock: 900,
    batch: 900 + 7200 + 86_400,
};

/// A hash's fields and values.
fn hash(r: &redis_server::Redis, db: u8, key: &str) -> BTreeMap<String, String> {
    let out = r.cli(db, &["hgetall", key]);
    let lines: Vec<&str> = out.lines().collect();
    lines
        .chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].to_owned(), p[1].to_owned()))
        .collect()
}

fn ttl(r: &redis_server::Redis, db: u8, key: &str) -> i64 {
    r.cli(db, &["ttl", key]).parse().unwrap()
}

fn fields(pairs: &[(&str, i64)]) -> BTreeMap<String, String> {
    (pairs.iter())
        .map(|(f, v)| ((*f).to_owned(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn records_leave_the_keys_nexusphps_announce_leaves() {
    let db = 1;
    let Some(r) = redis_server::redis_db(db) else {
        return;
    };
    let c = Cleanup::new(&r.url(db), "+08:00").unwrap();
    // alice (1) on torrents 10 and 11, bob (2) on 10; written 3 s after the first.
    let added = c
        .write(&[(1, 10, T), (2, 10, T + 1), (1, 11, T + 2)], LIFE, T + 3)
        .await
        .unwrap();
    assert_eq!(added, 3);
    // Each key names its batch, `<key>:<Ymd_His>` in the site's time, from the first record.
    let [bonus, time, torrents] = BATCH_KEYS.map(|k| format!("{k}:{SUFFIX}"));
    for (key, batch) in BATCH_KEYS.iter().zip([&bonus, &time, &torrents]) {
        assert_eq!(&r.cli(db, &["get", key]), batch);
    }
    // Fields: the member (the first two), the torrent (the third); values: the announce's
    // time, the latest one's where a member announced twice.
    let members = fields(&[("1", T + 2), ("2", T + 1)]);
    assert_eq!(hash(r, db, &bonus), members);
    assert_eq!(hash(r, db, &time), members);
    assert_eq!(
        hash(r, db, &torrents),
        fields(&[("10", T + 1), ("11", T + 2)])
    );
    // The seeding bonus batch never expires; the other two, and their keys, after
    // four + three + one.
    assert_eq!((ttl(r, db, BATCH_KEYS[0]), ttl(r, db, &bonus)), (-1, -1));
    for key in [BATCH_KEYS[1], BATCH_KEYS[2], &time, &torrents] {
        let t = ttl(r, db, key);
        assert!(
            (LIFE.batch as i64 - 5..=LIFE.batch as i64).contains(&t),
            "{key}: {t}"
        );
    }
    // The lock: the announce's time, gone `autoclean_interval_one` after the announce.
    assert_eq!(r.cli(db, &["get", "record_batch_lock:1:10"]), T.to_string());
    let t = ttl(r, db, "record_batch_lock:1:10");
    assert!((890..=897).contains(&t), "{t}");
    assert_eq!(
        ttl(r, db, "record_batch_lock:1:11"),
        ttl(r, db, "record_batch_lock:2:10") + 1
    );

    // Within the window (another process recorded the pair, or this one before a restart):
    // the lock holds, nothing is recorded.
    let again = c.write(&[(1, 10, T + 100)], LIFE, T + 101).await.unwrap();
    assert_eq!(again, 0);
    assert_eq!(hash(r, db, &bonus), members);

    // Past its window (written late, Redis having been away): recorded, no lock taken.
    let late = c.write(&[(3, 12, T + 5)], LIFE, T + 5 + 901).await.unwrap();
    assert_eq!(late, 1);
    assert_eq!(r.cli(db, &["exists", "record_batch_lock:3:12"]), "0");
    assert_eq!(hash(r, db, &torrents)["12"], (T + 5).to_string());
}

#[tokio::test]
async fn the_batches_the_cleanup_left_are_added_to_as_they_are() {
    let db = 2;
    let Some(r) = redis_server::redis_db(db) else {
        return;
    };
    // The cleanup's run renews the keys of the second and third batches
    // (`CleanupRepository.php:89-95`): a key naming a new hash that holds -1, both
    // expiring. Here the third key names a hash that has gone.
    let renewed = format!("{}:20241020_230000", BATCH_KEYS[1]);
    let gone = format!("{}:20241020_220000", BATCH_KEYS[2]);
    for cmd in [
        vec!["set", BATCH_KEYS[1], renewed.as_str(), "ex", "5000"],
        vec!["hset", renewed.as_str(), "-1", "1"],
        vec!["expire", renewed.as_str(), "5000"],
        vec!["set", BATCH_KEYS[2], gone.as_str(), "ex", "4000"],
    ] {
        r.cli(db, &cmd);
    }
    let c = Cleanup::new(&r.url(db), "+08:00").unwrap();
    assert_eq!(c.write(&[(7, 20, T)], LIFE, T).await.unwrap(), 1);
    assert_eq!(r.cli(db, &["get", BATCH_KEYS[1]]), renewed);
    assert_eq!(hash(r, db, &renewed), fields(&[("-1", 1), ("7", T)]));
    // Their expiries are left as they were.
    assert!(ttl(r, db, BATCH_KEYS[1]) <= 5000 && ttl(r, db, &renewed) <= 5000);
    assert!(ttl(r, db, BATCH_KEYS[2]) <= 4000);
    // A key whose hash has gone: the hash comes back, without an expiry (as NexusPHP's
    // script sets one only on a batch it names itself).
    assert_eq!(hash(r, db, &gone), fields(&[("20", T)]));
    assert_eq!(ttl(r, db, &gone), -1);
    // The first batch did not exist: made as new.
    let bonus = format!("{}:{SUFFIX}", BATCH_KEYS[0]);
    assert_eq!(r.cli(db, &["get", BATCH_KEYS[0]]), bonus);
    assert_eq!(hash(r, db, &bonus), fields(&[("7", T)]));
}

#[tokio::test]
async fn a_redis_that_does_not_answer_fails_within_the_bound_and_hands_back_every_record() {
    let records: Vec<(u32, u32, i64)> = (0..2500).map(|i| (i, 10, T)).collect();
    // Nothing listening.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let c = Cleanup::new(&format!("redis://127.0.0.1:{port}/0"), "+00:00").unwrap();
    let began = Instant::now();
    let e = c.write(&records, LIFE, T).await.unwrap_err();
    assert_eq!(e.records, records, "all of them, for the next batch");
    assert!(began.elapsed() < TIMEOUT * 2, "{:?}", began.elapsed());
    // A server that takes the connection and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept() {
            held.push(s);
        }
    });
    let c = Cleanup::new(&format!("redis://:pw@{addr}/0"), "+00:00").unwrap();
    let began = Instant::now();
    let e = c.write(&records, LIFE, T).await.unwrap_err();
    assert_eq!(e.records.len(), records.len());
    let took = began.elapsed();
    assert!(
        took >= TIMEOUT - Duration::from_millis(100),
        "{took:?}: {}",
        e.error
    );
    assert!(took < TIMEOUT * 2, "{took:?}");
    eprintln!("a silent Redis: given up after {took:?} ({})", e.error);
}
