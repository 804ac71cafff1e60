//! How fast one write batch goes into a fresh SQLite file (or the URL given), at the scale of
//! `shoal-bench compare --tracker shoal-private`: 10,000 users, 10,000 torrents, 100,000
//! (user, torrent) rows per batch. Prints wall time and this process's CPU time per batch.
//! With `update` as third argument, every batch after the first adds to rows that exist
//! (the steady state of a busy tracker, where the same clients announce again and again)
//! instead of mostly creating rows.
//! An empty URL is the fresh file.
//!   cargo run --release -p shoal-accounts --example write_speed [URL] [BATCHES] [update]

#![forbid(unsafe_code)]

use std::time::Instant;

use shoal_accounts::{Database, Delta, Torrent, User};

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn hash(i: u64) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[..8].copy_from_slice(&i.to_le_bytes());
    h[19] = 0x5e;
    h
}

/// Rows an `update` run's batches are drawn from (a batch takes a third of them).
const SPREAD: u64 = 300_000;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let default = format!("sqlite://{}/speed.db", dir.path().display());
    let url = std::env::args()
        .nth(1)
        .filter(|u| !u.is_empty())
        .unwrap_or(default);
    let batches: u64 = std::env::args().nth(2).map_or(5, |n| n.parse().unwrap());
    let update = std::env::args().nth(3).is_some_and(|m| m == "update");
    let db = Database::connect(&url).await.unwrap();
    let (users, torrents, rows) = (10_000u64, 10_000u64, 100_000u64);
    let t = Instant::now();
    for u in 1..=users {
        let user = User::new(u as i64, format!("{u:032x}"));
        db.put_user(&user).await.unwrap();
    }
    for i in 1..=torrents {
        db.put_torrent(&Torrent::new(Some(i as i64), hash(i)))
            .await
            .unwrap();
    }
    println!("registered in {:.1?}", t.elapsed());
    for b in 0..batches {
        let batch: Vec<Delta> = (0..rows)
            .map(|p| {
                if update {
                    (p * 7 + b * rows) % SPREAD
                } else {
                    p
                }
            })
            .map(|p| Delta {
                user_id: p % users + 1,
                torrent_id: ((p / users) * 1231 + p * 3 + if update { 0 } else { b }) % torrents
                    + 1,
                uploaded: 1000 + p,
                downloaded: 10,
                seed_seconds: 1,
                leech_seconds: 0,
                completed: false,
                ..Delta::default()
            })
            .collect();
        let (cpu, t) = (cpu_seconds(), Instant::now());
        let w = db
            .write_batch(Some(&format!("b{b}")), &batch)
            .await
            .unwrap();
        println!(
            "batch {b}: {} rows applied in {:.3} s wall, {:.3} s CPU ({:.1} µs CPU per row)",
            w.applied,
            t.elapsed().as_secs_f64(),
            cpu_seconds() - cpu,
            (cpu_seconds() - cpu) * 1e6 / rows as f64
        );
    }
}
