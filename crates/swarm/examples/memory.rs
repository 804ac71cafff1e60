//! Measures the store's memory per peer: RSS before and after filling it with a number
//! of IPv4 peers spread over a number of torrents, divided by the peer count.
//!
//! `cargo run --release -p shoal-swarm --example memory -- [PEERS] [TORRENTS] [uniform|pareto|bench] [snapshot] [no-ids] [malloc-default]`
//! (defaults: 1,000,000 peers over 100,000 torrents, uniform). `bench` draws torrents as
//! `shoal-bench --pareto-shape 0.2` does (issue 43's setting): 30 million peers over 10
//! million torrents name about 5 million of them, and 40% of the peers the last one.
//!
//! `snapshot` then times a snapshot of the filled store written to nowhere (encoding and
//! checksums, no file), by one thread and by every CPU, alternating, 3 rounds; then the
//! same of the store restored from its own snapshot.
//!
//! `no-ids` fills a store that keeps no peer id (`[store] peer_ids = false`) instead.
//!
//! The allocator is set as the `shoal` binary sets it (blocks of 32 KiB or more mapped on
//! their own, `shoal_datagrams::malloc`); `malloc-default` leaves glibc's own setting.
//!
//! RSS is read from /proc/self/statm, so the figure includes allocator overhead and
//! slack: what an operator would see.

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;

use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_swarm::{Announce, Anonymous, PeerExt, Store, StoreConfig};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("statm resident field");
    pages * 4096
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let peers: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let torrents: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mode = args.get(3).map_or("uniform", String::as_str);
    let snapshot = args.iter().skip(4).any(|a| a == "snapshot");
    if !args.iter().skip(3).any(|a| a == "malloc-default") {
        shoal_datagrams::malloc::map_blocks_from(shoal_datagrams::malloc::STORE_THRESHOLD);
    }
    if args.iter().skip(4).any(|a| a == "no-ids") {
        run::<Anonymous>(peers, torrents, mode, snapshot);
    } else {
        run::<()>(peers, torrents, mode, snapshot);
    }
}

fn run<X: PeerExt>(peers: u64, torrents: u64, mode: &str, snapshot: bool) {
    let pareto = mode == "pareto";
    let store: Store<X> = Store::with_extension(StoreConfig::default());
    let mut out: Vec<CompactPeerV4> = Vec::with_capacity(200);
    let before = rss_bytes();
    let mut rng = fastrand::Rng::with_seed(42);
    for n in 0..peers {
        let t = if mode == "bench" {
            // shoal-bench's mapping (crates/bench/src/workload.rs, pareto_from_uniform):
            // x = (1 - u)^(-1/shape), its excess over 1 capped at 100, scaled to the range.
            let x = (1.0 - rng.f64()).powf(-1.0 / 0.2);
            let fraction = (x - 1.0).min(100.0) / 100.0;
            ((fraction * torrents as f64) as u64).min(torrents - 1)
        } else if pareto {
            // Pareto-like popularity (shape 1.0 over the torrent range).
            let u = rng.f64().max(1e-12);
            ((1.0 / u - 1.0) as u64).min(torrents - 1)
        } else {
            n % torrents
        };
        let mut ih = [0u8; 20];
        ih[..8].copy_from_slice(&t.to_le_bytes());
        ih[8..16].copy_from_slice(&(t.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
        let mut pid = [0u8; 20];
        pid[..8].copy_from_slice(&n.to_le_bytes());
        pid[8..16].copy_from_slice(&rng.u64(..).to_le_bytes());
        out.clear();
        store.announce(
            &Announce {
                info_hash: InfoHash(ih),
                peer_id: PeerId(pid),
                addr: CompactPeerV4::new(Ipv4Addr::from(n as u32), 6881),
                event: AnnounceEvent::Started,
                left: if rng.bool() { 0 } else { 1 },
                numwant: 0,
            },
            0,
            &mut out,
        );
    }
    let after = rss_bytes();
    let report = store.clean(0);
    assert_eq!(report.peers as u64, peers, "every peer is in the store");
    println!(
        "{} peers over {} torrents ({}, peer ids {}): RSS +{:.1} MiB, {:.1} bytes per peer",
        peers,
        report.torrents,
        mode,
        if std::mem::size_of::<X::Id>() == 0 {
            "not kept"
        } else {
            "kept"
        },
        (after - before) as f64 / (1 << 20) as f64,
        (after - before) as f64 / peers as f64
    );
    if snapshot {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let header = shoal_swarm::SnapshotHeader::default();
        for round in 1..=3 {
            for encoders in [1, cpus] {
                let started = std::time::Instant::now();
                let s = store
                    .write_snapshot(std::io::sink(), &header, 0, encoders)
                    .expect("a snapshot to nowhere");
                println!(
                    "round {round}: snapshot by {encoders} encoder(s) in {:?} ({} peers)",
                    started.elapsed(),
                    s.peers
                );
            }
        }
        // The same store restored from its own snapshot, as a restarted tracker holds it.
        let mut bytes = Vec::new();
        store
            .write_snapshot(&mut bytes, &header, 0, cpus)
            .expect("a snapshot in memory");
        drop(store);
        let restored: Store<X> = Store::with_extension(StoreConfig::default());
        let started = std::time::Instant::now();
        restored
            .restore_snapshot(&bytes[..], 0, 0)
            .expect("its own snapshot");
        println!("restored in {:?}", started.elapsed());
        drop(bytes);
        for round in 1..=3 {
            for encoders in [1, cpus] {
                let started = std::time::Instant::now();
                restored
                    .write_snapshot(std::io::sink(), &header, 0, encoders)
                    .expect("a snapshot to nowhere");
                println!(
                    "restored, round {round}: snapshot by {encoders} encoder(s) in {:?}",
                    started.elapsed()
                );
            }
        }
    }
}
