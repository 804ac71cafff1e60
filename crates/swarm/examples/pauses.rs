//! How long an announce waits while the store is snapshotted or swept, on the torrent that
//! hurts most: one very large swarm (shoal-bench's Pareto 0.2 draw at 30 million peers puts
//! 12 million on one torrent) beside many small ones.
//!
//! `cargo run --release -p shoal-swarm --example pauses -- [HOT] [SMALL]` (defaults:
//! 12,000,000 peers on the large torrent, 2,000,000 torrents of 3 peers). One thread
//! re-announces peers of the large torrent (numwant 50) as fast as it can and times each
//! announce, while the main thread writes a snapshot to `io::sink()`, then sweeps 1% of
//! the large torrent's peers out as expired. For each window: how long it took, the
//! announces served meanwhile and their latency (p50, p99, p99.9, max). Latency here is
//! the lock's wait plus the announce's own work, nothing of a network.

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_swarm::{Announce, SnapshotHeader, Store, StoreConfig};

fn announce(info_hash: InfoHash, n: u32, numwant: usize) -> Announce<CompactPeerV4> {
    let mut id = [7u8; 20];
    id[..4].copy_from_slice(&n.to_be_bytes());
    id[4..8].copy_from_slice(&info_hash.0[..4]);
    Announce {
        info_hash,
        peer_id: PeerId(id),
        addr: CompactPeerV4::new(Ipv4Addr::from(n), 6881),
        event: AnnounceEvent::None,
        left: u64::from(n % 2),
        numwant,
    }
}

fn small(t: u32) -> InfoHash {
    let mut ih = [0u8; 20];
    ih[..4].copy_from_slice(&t.to_le_bytes());
    ih[4..8].copy_from_slice(&t.wrapping_mul(0x9e37_79b9).to_le_bytes());
    InfoHash(ih)
}

/// Runs `work` on this thread while another re-announces peers of `hot`; prints the
/// window's figures.
fn window(store: &Store, name: &str, hot: InfoHash, peers: u32, work: impl FnOnce()) {
    let stop = AtomicBool::new(false);
    let (took, mut lat) = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let mut rng = fastrand::Rng::with_seed(7);
            let mut out: Vec<CompactPeerV4> = Vec::with_capacity(64);
            let mut lat = Vec::with_capacity(1 << 20);
            while !stop.load(Ordering::Relaxed) {
                out.clear();
                // Not one of the peers the sweep is to find expired (n % 100 == 0).
                let n = rng.u32(..peers / 100) * 100 + rng.u32(1..100);
                let ann = announce(hot, n.min(peers - 1), 50);
                let t = Instant::now();
                store.announce(&ann, 200, &mut out);
                lat.push(t.elapsed());
            }
            lat
        });
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        work();
        let took = t.elapsed();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        (took, worker.join().expect("worker"))
    });
    lat.sort_unstable();
    let q = |f: f64| lat[((lat.len() as f64 * f) as usize).min(lat.len() - 1)];
    println!(
        "{name}: {:.3} s; {} announces on the large torrent meanwhile: p50 {:?}, p99 {:?}, \
         p99.9 {:?}, max {:?}",
        took.as_secs_f64(),
        lat.len(),
        q(0.5),
        q(0.99),
        q(0.999),
        lat[lat.len() - 1]
    );
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let hot_peers = args.first().copied().unwrap_or(12_000_000);
    let small_torrents = args.get(1).copied().unwrap_or(2_000_000);
    let store = Store::new(StoreConfig::default());
    let hot = InfoHash([0xee; 20]);
    let mut out: Vec<CompactPeerV4> = Vec::new();
    // Store clock 0 for 1% of the large torrent's peers (expired at the sweep's 3650),
    // 100 for the rest (a TTL of 3600: alive until 3700).
    for n in 0..hot_peers {
        let now = if n.is_multiple_of(100) { 0 } else { 100 };
        store.announce(&announce(hot, n, 0), now, &mut out);
    }
    for t in 0..small_torrents {
        for p in 0..3 {
            store.announce(&announce(small(t), t * 3 + p, 0), 100, &mut out);
        }
    }
    println!("filled: {hot_peers} peers on one torrent, {small_torrents} torrents of 3");
    let header = SnapshotHeader {
        written_unix: 0,
        writer: 0,
        is_final: false,
        key: vec![0; 16],
        base: None,
    };
    window(&store, "snapshot", hot, hot_peers, || {
        store
            .write_snapshot(std::io::sink(), &header, 200, 1)
            .expect("a snapshot to nowhere");
    });
    window(&store, "sweep", hot, hot_peers, || {
        let report = store.clean(3650);
        assert!(report.peers_expired > 0, "the sweep removes peers");
    });
}
