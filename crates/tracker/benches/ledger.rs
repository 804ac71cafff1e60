//! The private tracker's accounting ledger alone: what recording one re-announce costs
//! when the ledger holds the records of 10,000, 100,000 or 330,000 clients, the announces
//! arriving in random client order as a busy tracker's do. 100,000 is what one round of
//! `shoal-bench compare --tracker shoal-private` leaves in it (its default `--peers`, each
//! round started afresh); 330,000 what it left when rounds kept the previous round's state;
//! 10,000 a ledger small enough to stay in this VM's caches, so the difference between the
//! sizes is the price of the memory access to the client's record.
//!
//! A second group measures a whole private announce, store and accounting, with 100,000
//! clients on 10,007 torrents: the store alone (open mode), the record in the client's
//! swarm slot (`Ledger::announce`, private mode since 2026-11-27), and the store then the
//! ledger's map (private mode before it).
//!
//! `cargo bench -p shoal-server --bench ledger`

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
use shoal_swarm::{Announce, Store, StoreConfig};
use shoal_tracker::private::credit::AccountedAnnounce;
use shoal_tracker::private::ledger::{Ledger, SlotStore};

/// Ledger sizes measured: clients with a record.
const SIZES: [u64; 3] = [10_000, 100_000, 330_000];
const ANNOUNCES: usize = 1 << 20;

/// A small, fixed pseudo-random sequence (xorshift), so every run loads the same.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn announce(client: u64, round: u64) -> AccountedAnnounce {
    let mut peer_id = [0u8; 20];
    peer_id[..8].copy_from_slice(&client.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    AccountedAnnounce {
        user_id: client % 10_000 + 1,
        torrent_id: client % 10_007 + 1,
        peer_id: PeerId(peer_id),
        uploaded: round * 1000,
        downloaded: round * 500,
        left: if client.is_multiple_of(4) { 0 } else { 1 << 30 },
        event: if round == 0 {
            AnnounceEvent::Started
        } else {
            AnnounceEvent::None
        },
        now: round as u32,
        download_factor: 1.0,
        upload_factor: 1.0,
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger re-announce");
    for clients in SIZES {
        let mut state = 0x2545_f491_4f6c_dd1d;
        let order: Vec<u64> = (0..ANNOUNCES).map(|_| next(&mut state) % clients).collect();
        let ledger = Ledger::default();
        for client in 0..clients {
            ledger.record(&announce(client, 0));
        }
        let mut i = 0usize;
        let mut round = 1;
        group.bench_function(BenchmarkId::new("record", clients), |b| {
            b.iter(|| {
                ledger.record(&announce(order[i], round));
                i += 1;
                if i == ANNOUNCES {
                    // A new round of the same clients, and the sums drained as a flush would.
                    i = 0;
                    round += 1;
                    ledger.drain();
                }
            })
        });
    }
    group.finish();
}

/// The store's announce for `a`: its torrent from its torrent id, its address from its
/// client number.
fn store_announce(client: u64, a: &AccountedAnnounce) -> Announce<CompactPeerV4> {
    let mut info_hash = [0u8; 20];
    info_hash[..8].copy_from_slice(&a.torrent_id.to_le_bytes());
    Announce {
        info_hash: InfoHash(info_hash),
        peer_id: a.peer_id,
        addr: CompactPeerV4::new(Ipv4Addr::from(0x0a00_0000 + client as u32), 6881),
        event: a.event,
        left: a.left,
        numwant: 50,
    }
}

fn whole_announce(c: &mut Criterion) {
    const CLIENTS: u64 = 100_000;
    let mut group = c.benchmark_group("private announce");
    let mut state = 0x2545_f491_4f6c_dd1d;
    let order: Vec<u64> = (0..ANNOUNCES).map(|_| next(&mut state) % CLIENTS).collect();
    let config = StoreConfig {
        peer_ttl: u32::MAX / 2,
        ..StoreConfig::default()
    };
    let open = Store::new(config.clone());
    let map = (Store::new(config.clone()), Ledger::default());
    let slots = Ledger::default();
    let slot_store = Arc::new(SlotStore::with_extension(config));
    slots.attach(slot_store.clone());
    let mut out: Vec<CompactPeerV4> = Vec::with_capacity(50);
    for client in 0..CLIENTS {
        let a = announce(client, 0);
        let req = store_announce(client, &a);
        open.announce(&req, 0, &mut out);
        map.0.announce(&req, 0, &mut out);
        map.1.record(&a);
        slots.announce(&slot_store, &req, 0, &mut out, &a);
    }
    let mut run = |name: &str, one: &mut dyn FnMut(u64, u64)| {
        let (mut i, mut round) = (0usize, 1);
        group.bench_function(name, |b| {
            b.iter(|| {
                one(order[i], round);
                i += 1;
                if i == ANNOUNCES {
                    (i, round) = (0, round + 1);
                }
            })
        });
    };
    run("open store", &mut |client, round| {
        let a = announce(client, round);
        out.clear();
        open.announce(&store_announce(client, &a), a.now, &mut out);
    });
    run("record in the slot", &mut |client, round| {
        let a = announce(client, round);
        out.clear();
        slots.announce(
            &slot_store,
            &store_announce(client, &a),
            a.now,
            &mut out,
            &a,
        );
    });
    run("store, then the ledger's map", &mut |client, round| {
        let a = announce(client, round);
        out.clear();
        map.0.announce(&store_announce(client, &a), a.now, &mut out);
        map.1.record(&a);
    });
    group.finish();
}

/// What `shoal_private_pending_accounts` costs at each metrics scrape: the walk over every
/// swarm slot that counts those with unwritten sums (`Ledger::pending_in_slots`), with
/// 100,000 and 1,000,000 clients in slots, every other one with sums waiting. It takes
/// the store's 512 shard locks one at a time, as a drain does every flush interval.
fn pending_walk(c: &mut Criterion) {
    let mut group = c.benchmark_group("pending walk");
    group.sample_size(20);
    for clients in [100_000u64, 1_000_000] {
        let ledger = Ledger::default();
        let store = Arc::new(SlotStore::with_extension(StoreConfig {
            peer_ttl: u32::MAX / 2,
            ..StoreConfig::default()
        }));
        ledger.attach(store.clone());
        let mut out: Vec<CompactPeerV4> = Vec::with_capacity(50);
        for round in 0..2 {
            for client in (0..clients).filter(|c| round == 0 || c % 2 == 0) {
                let a = announce(client, round);
                out.clear();
                ledger.announce(&store, &store_announce(client, &a), a.now, &mut out, &a);
            }
        }
        assert_eq!(ledger.pending_in_slots() as u64, clients / 2);
        group.bench_function(BenchmarkId::new("pending_in_slots", clients), |b| {
            b.iter(|| ledger.pending_in_slots())
        });
    }
    group.finish();
}

criterion_group!(benches, bench, whole_announce, pending_walk);
criterion_main!(benches);
