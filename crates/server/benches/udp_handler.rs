//! The UDP request handler alone, without sockets: what one connect, announce or scrape
//! costs in shoal's own code (parse, connection-id check, store, reply), to set beside the
//! kernel's per-datagram cost that dominates a real run.
//!
//! The abuse controls' cost is measured beside it: a connect with the rate limit and a
//! block list of 10,000 networks on (the source admitted, so every rule runs in full),
//! and a connect from a source over its limit (what a flood costs per datagram).
//!
//! `cargo bench -p shoal-server --bench udp_handler`

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use shoal_proto::udp::{AnnounceRequest, ConnectRequest, Request, ScrapeRequest, TransactionId};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::udp::connection_id::ConnectionIds;
use shoal_server::udp::handler::{Handler, HandlerConfig, Now};
use shoal_swarm::webtorrent::{WebTorrentStore, WsStoreConfig};
use shoal_swarm::{Store, StoreConfig};
use shoal_tracker::policy::{BlockList, Limits, Policy, RateLimit};
use shoal_tracker::{Core, Swarms};

fn handler() -> Handler {
    handler_with(Policy::default())
}

/// A policy with a block list of 10,000 networks (none of them loopback) and a rate limit
/// of `rps` requests a second per source, in bursts of `burst`.
fn guarded(rps: u32, burst: u32) -> Policy {
    let nets = (0..10_000u32).map(|i| {
        let addr = std::net::Ipv4Addr::from((11 << 24) | (i << 8));
        ipnet::IpNet::V4(ipnet::Ipv4Net::new(addr, 24).unwrap())
    });
    let limit = Limits::new(rps, burst);
    Policy::default()
        .with_block_list(BlockList::new(nets), Default::default())
        .with_rate_limit(RateLimit::new(&limit))
}

fn handler_with(policy: Policy) -> Handler {
    let store = Swarms::Open(Store::new(StoreConfig::default()));
    let webtorrent = WebTorrentStore::new(WsStoreConfig::default());
    Handler::new(
        Arc::new(Core::new(policy, store, webtorrent)),
        ConnectionIds::new([3; 16], 300),
        HandlerConfig {
            interval: 1800,
            allow_ip_field: false,
            max_scrape_hashes: 74,
        },
    )
}

fn bench(c: &mut Criterion) {
    let mut h = handler();
    let now = Now::read();
    let src: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let mut out = vec![0u8; 4096];

    let mut connect = Vec::new();
    Request::Connect(ConnectRequest {
        transaction_id: TransactionId(1),
    })
    .write(&mut connect);
    c.bench_function("connect", |b| {
        b.iter(|| h.handle(&connect, src, now, &mut out))
    });
    let mut open = handler_with(guarded(u32::MAX, u32::MAX));
    c.bench_function("connect, rate limit and 10k-network block list on", |b| {
        b.iter(|| open.handle(&connect, src, now, &mut out))
    });
    let mut flooded = handler_with(guarded(1, 1));
    // A batch begins with the source rules asked about the flooding source; the rest of
    // the batch from that source is dropped on its address (Handler::start_batch).
    c.bench_function(
        "connect from a source over its limit (dropped, rules asked)",
        |b| {
            b.iter(|| {
                flooded.start_batch();
                flooded.handle(&connect, src, now, &mut out)
            })
        },
    );
    flooded.start_batch();
    c.bench_function(
        "connect from a source over its limit (dropped on its address)",
        |b| b.iter(|| flooded.handle(&connect, src, now, &mut out)),
    );

    let cid = ConnectionIds::new([3; 16], 300).issue(src.ip(), now.unix);
    // 10,000 torrents of 20 peers each, as a busy tracker's small swarms look.
    let mut rng = fastrand::Rng::with_seed(7);
    let mut packets = Vec::new();
    for t in 0..10_000u32 {
        for p in 0..20u32 {
            let mut ih = [0u8; 20];
            ih[..4].copy_from_slice(&t.to_be_bytes());
            let mut pid = [0u8; 20];
            pid[..4].copy_from_slice(&p.to_be_bytes());
            let mut pkt = Vec::new();
            Request::Announce(AnnounceRequest {
                connection_id: cid,
                transaction_id: TransactionId(p),
                info_hash: InfoHash(ih),
                peer_id: PeerId(pid),
                downloaded: 0,
                left: if rng.u8(..4) == 0 { 1 } else { 0 },
                uploaded: 0,
                event: AnnounceEvent::None,
                ip: [0; 4],
                key: 0,
                numwant: 30,
                port: 1000 + p as u16,
            })
            .write(&mut pkt);
            packets.push(pkt);
        }
    }
    for p in &packets {
        h.handle(p, src, now, &mut out);
    }
    c.bench_function("announce (20-peer swarms, numwant 30)", |b| {
        b.iter_batched(
            || &packets[rng.usize(..packets.len())],
            |p| h.handle(p, src, now, &mut out),
            BatchSize::SmallInput,
        )
    });

    let hashes: Vec<InfoHash> = (0..10u32)
        .map(|t| {
            let mut ih = [0u8; 20];
            ih[..4].copy_from_slice(&t.to_be_bytes());
            InfoHash(ih)
        })
        .collect();
    let mut scrape = Vec::new();
    Request::Scrape(ScrapeRequest {
        connection_id: cid,
        transaction_id: TransactionId(9),
        info_hashes: &hashes,
    })
    .write(&mut scrape);
    c.bench_function("scrape (10 hashes)", |b| {
        b.iter(|| h.handle(&scrape, src, now, &mut out))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
