//! The store alone at a million torrents, without sockets (issue 14, item 1): what an
//! announce and a scrape cost when the torrents and their peers no longer fit in any cache,
//! so that a change to the store's layout is seen without the kernel's per-datagram cost
//! around it.
//!
//! The workload is the one `aquatic_udp_load_test` 0.9.0 sends with its default config,
//! rebuilt here from its description: 1,000,000 torrents and 2,000,000 peers; each peer
//! announces one torrent, drawn with a weight of `torrents / peers + e^(6.5 - 500 i /
//! torrents)` for the i-th torrent (about three quarters of the peers crowd into the first
//! few thousand torrents, swarms of hundreds; the rest spread thinly over all of them); a
//! peer's address is one of four IPv4 addresses and a random port; each announce is a
//! seeder's `completed` with probability 0.75, else a leecher's `started`, and wants 30
//! peers. The store is filled with one announce of every peer before timing.
//!
//! `cargo bench -p shoal-swarm --bench store`

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion};
use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_swarm::{Announce, Store, StoreConfig};

const TORRENTS: usize = 1_000_000;
const PEERS: usize = 2_000_000;
/// Announces drawn ahead of the timed loop, replayed in a cycle.
const STREAM: usize = 1 << 20;

/// The load tester's peers: which torrent each announces and from which address.
struct Workload {
    info_hashes: Vec<InfoHash>,
    /// (torrent index, address) per peer.
    peers: Vec<(u32, CompactPeerV4)>,
}

impl Workload {
    fn new(rng: &mut fastrand::Rng) -> Self {
        let info_hashes: Vec<InfoHash> = (0..TORRENTS)
            .map(|_| {
                let mut b = [0u8; 20];
                rng.fill(&mut b);
                InfoHash(b)
            })
            .collect();
        // Cumulative weights, sampled by binary search.
        let floor = TORRENTS as f64 / PEERS as f64;
        let mut total = 0.0;
        let cumulative: Vec<f64> = (0..TORRENTS)
            .map(|i| {
                total += floor + (6.5 - 500.0 * i as f64 / TORRENTS as f64).exp();
                total
            })
            .collect();
        let ips = [1u8, 2, 3, 4].map(|d| Ipv4Addr::new(127, 0, 0, d));
        let peers = (0..PEERS)
            .map(|_| {
                let x = rng.f64() * total;
                let torrent = cumulative.partition_point(|&c| c < x).min(TORRENTS - 1);
                let addr = CompactPeerV4::new(ips[rng.usize(..ips.len())], rng.u16(..));
                (torrent as u32, addr)
            })
            .collect();
        Self { info_hashes, peers }
    }

    fn announce(&self, peer: usize, rng: &mut fastrand::Rng) -> Announce<CompactPeerV4> {
        let (torrent, addr) = self.peers[peer];
        let seeder = rng.f64() < 0.75;
        Announce {
            info_hash: self.info_hashes[torrent as usize],
            peer_id: PeerId([0; 20]),
            addr,
            event: if seeder {
                AnnounceEvent::Completed
            } else {
                AnnounceEvent::Started
            },
            left: if seeder { 0 } else { 50 },
            numwant: 30,
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let work = Workload::new(&mut rng);
    let store = Store::new(StoreConfig::default());
    let now = 1_000;
    let mut out: Vec<CompactPeerV4> = Vec::with_capacity(200);
    for peer in 0..PEERS {
        out.clear();
        store.announce(&work.announce(peer, &mut rng), now, &mut out);
    }
    // The process's resident memory once the store is full (Linux), for layout changes
    // that trade memory for cache misses. The workload's own tables are in it too.
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(rss) = status.lines().find(|l| l.starts_with("VmRSS:")) {
            eprintln!("store filled ({PEERS} announces): {rss}");
        }
    }
    let stream: Vec<Announce<CompactPeerV4>> = (0..STREAM)
        .map(|_| work.announce(rng.usize(..PEERS), &mut rng))
        .collect();
    let scrapes: Vec<InfoHash> = (0..STREAM)
        .map(|_| work.info_hashes[work.peers[rng.usize(..PEERS)].0 as usize])
        .collect();

    let mut i = 0;
    c.bench_function("announce, 1M torrents / 2M peers", |b| {
        b.iter(|| {
            out.clear();
            let stats = store.announce(&stream[i], now, &mut out);
            i = (i + 1) & (STREAM - 1);
            (stats, out.len())
        })
    });
    let mut i = 0;
    c.bench_function("scrape of one torrent, 1M torrents / 2M peers", |b| {
        b.iter(|| {
            let stats = store.scrape(&scrapes[i]);
            i = (i + 1) & (STREAM - 1);
            stats
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
