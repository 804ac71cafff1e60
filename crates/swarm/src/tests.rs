//! Behaviour of the store, named after what it pins down.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::sharded::Hasher;

pub(crate) fn ih(n: u8) -> InfoHash {
    InfoHash([n; 20])
}

pub(crate) fn pid(n: u32) -> PeerId {
    let mut b = [0u8; 20];
    b[..4].copy_from_slice(&n.to_be_bytes());
    PeerId(b)
}

pub(crate) fn v4(n: u32) -> CompactPeerV4 {
    CompactPeerV4::new(Ipv4Addr::from(0x0a00_0000 + n), 6881)
}

fn ann(info: u8, peer: u32, left: u64, event: AnnounceEvent) -> Announce<CompactPeerV4> {
    Announce {
        info_hash: ih(info),
        peer_id: pid(peer),
        addr: v4(peer),
        event,
        left,
        numwant: 50,
    }
}

/// A store with the defaults but what `set` changes.
fn store_with(set: impl FnOnce(&mut StoreConfig)) -> Store {
    let mut config = StoreConfig::default();
    set(&mut config);
    Store::new(config)
}

fn announce(store: &Store, a: &Announce<CompactPeerV4>) -> (TorrentStats, Vec<CompactPeerV4>) {
    let mut out = Vec::new();
    let st = store.announce(a, 10, &mut out);
    (st, out)
}

#[test]
fn announcer_is_never_returned_to_itself() {
    let store = Store::new(StoreConfig::default());
    let (st, peers) = announce(&store, &ann(1, 1, 100, AnnounceEvent::Started));
    assert_eq!(st.leechers, 1);
    assert!(peers.is_empty());
    for n in 2..100 {
        let (_, peers) = announce(&store, &ann(1, n, 100, AnnounceEvent::Started));
        assert!(!peers.contains(&v4(n)), "peer {n} got itself");
        assert_eq!(peers.len(), (n as usize - 1).min(50));
    }
}

#[test]
fn seeders_get_only_leechers() {
    let store = Store::new(StoreConfig::default());
    for n in 0..5 {
        announce(&store, &ann(1, n, 0, AnnounceEvent::Started));
    }
    let (_, peers) = announce(&store, &ann(1, 100, 0, AnnounceEvent::Started));
    assert!(peers.is_empty(), "a seeder was sent seeders: {peers:?}");
    announce(&store, &ann(1, 200, 5, AnnounceEvent::Started));
    let (st, peers) = announce(&store, &ann(1, 100, 0, AnnounceEvent::None));
    assert_eq!(peers, vec![v4(200)]);
    assert_eq!((st.seeders, st.leechers), (6, 1));
    // A leecher gets everyone else.
    let (_, peers) = announce(&store, &ann(1, 200, 5, AnnounceEvent::None));
    assert_eq!(peers.len(), 6);
}

#[test]
fn completed_moves_to_seeders_and_counts_once() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(1, 1, 100, AnnounceEvent::Started));
    let (st, _) = announce(&store, &ann(1, 1, 0, AnnounceEvent::Completed));
    assert_eq!(
        st,
        TorrentStats {
            seeders: 1,
            leechers: 0,
            completed: 1
        }
    );
    // A repeated completed from a peer that is already a seeder is not counted again.
    let (st, _) = announce(&store, &ann(1, 1, 0, AnnounceEvent::Completed));
    assert_eq!(st.completed, 1);
    // A newcomer whose first announce is completed (WebTorrent seeders do this) counts.
    let (st, _) = announce(&store, &ann(1, 2, 0, AnnounceEvent::Completed));
    assert_eq!(st.completed, 2);
    assert_eq!(store.scrape(&ih(1)).completed, 2);
}

#[test]
fn stopped_removes_the_peer_and_only_its_own() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(1, 1, 100, AnnounceEvent::Started));
    announce(&store, &ann(1, 2, 100, AnnounceEvent::Started));
    // Same peer id from another host: a different peer, nothing removed.
    let mut spoof = ann(1, 1, 100, AnnounceEvent::Stopped);
    spoof.addr = v4(99);
    let (st, _) = announce(&store, &spoof);
    assert_eq!(st.leechers, 2);
    let (st, peers) = announce(&store, &ann(1, 1, 100, AnnounceEvent::Stopped));
    assert_eq!(st.leechers, 1);
    assert!(peers.is_empty(), "stopped gets no peers");
    let (_, peers) = announce(&store, &ann(1, 2, 100, AnnounceEvent::None));
    assert!(peers.is_empty(), "stopped peer still listed: {peers:?}");
}

#[test]
fn a_peer_is_its_address() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(1, 1, 100, AnnounceEvent::Started));
    // A restarted client: same address, fresh peer id. It replaces its old entry.
    let mut again = ann(1, 1, 100, AnnounceEvent::Started);
    again.peer_id = pid(77);
    let (st, peers) = announce(&store, &again);
    assert_eq!(st.leechers, 1);
    assert!(peers.is_empty());
    // Two clients behind one NAT: same IP and peer id, different ports. Two peers.
    let mut natted = ann(1, 1, 100, AnnounceEvent::Started);
    natted.peer_id = pid(77);
    natted.addr = CompactPeerV4::new(v4(1).ip(), 7000);
    let (st, peers) = announce(&store, &natted);
    assert_eq!(st.leechers, 2);
    assert_eq!(peers, vec![v4(1)]);
    let mut out: Vec<(CompactPeerV4, PeerId)> = Vec::new();
    store.announce(&natted, 10, &mut out);
    assert_eq!(out, vec![(v4(1), pid(77))], "the peer id is updated");
}

#[test]
fn stopped_for_unknown_torrent_creates_nothing() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(7, 1, 100, AnnounceEvent::Stopped));
    assert_eq!(store.clean(10).torrents, 0);
}

#[test]
fn families_are_kept_apart() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(1, 1, 100, AnnounceEvent::Started));
    let a6 = Announce {
        info_hash: ih(1),
        peer_id: pid(2),
        addr: CompactPeerV6::new(Ipv6Addr::LOCALHOST, 7000),
        event: AnnounceEvent::Started,
        left: 100,
        numwant: 50,
    };
    let mut out6: Vec<CompactPeerV6> = Vec::new();
    let st = store.announce(&a6, 10, &mut out6);
    assert!(out6.is_empty(), "IPv6 announcer got {out6:?}");
    assert_eq!(st.leechers, 2, "stats count both families");
    let (_, out4) = announce(&store, &ann(1, 1, 100, AnnounceEvent::None));
    assert!(out4.is_empty(), "IPv4 announcer got an IPv6 peer");
    let mut a6b = a6;
    a6b.peer_id = pid(3);
    a6b.addr = CompactPeerV6::new(Ipv6Addr::LOCALHOST, 7001);
    let mut out6: Vec<CompactPeerV6> = Vec::new();
    store.announce(&a6b, 10, &mut out6);
    assert_eq!(out6, vec![a6.addr]);
}

#[test]
fn numwant_is_defaulted_and_capped() {
    let store = store_with(|c| (c.default_numwant, c.max_numwant) = (3, 5));
    assert_eq!(store.numwant(None), 3);
    assert_eq!(store.numwant(Some(-1)), 3);
    assert_eq!(store.numwant(Some(0)), 0);
    assert_eq!(store.numwant(Some(4)), 4);
    assert_eq!(store.numwant(Some(1 << 40)), 5);
    for n in 0..20 {
        announce(&store, &ann(1, n, 1, AnnounceEvent::Started));
    }
    let mut a = ann(1, 100, 1, AnnounceEvent::Started);
    a.numwant = store.numwant(Some(1000));
    let (_, peers) = announce(&store, &a);
    assert_eq!(peers.len(), 5);
    let distinct: std::collections::HashSet<_> = peers.iter().collect();
    assert_eq!(distinct.len(), 5, "duplicates in {peers:?}");
}

#[test]
fn a_large_torrent_is_swept_a_chunk_at_a_time_and_whole() {
    // Over two chunks of IPv4 peers and some IPv6 ones; every seventh peer silent since
    // second 0 (leechers and seeders alike), the rest heard from at 60.
    let store = store_with(|c| c.peer_ttl = 100);
    let n = 2 * LOCK_CHUNK as u32 + 1000;
    let mut out4: Vec<CompactPeerV4> = Vec::new();
    let mut out6: Vec<CompactPeerV6> = Vec::new();
    let silent = |p: u32| p.is_multiple_of(7);
    for p in 0..n {
        let a = ann(1, p, u64::from(p % 3), AnnounceEvent::Started);
        store.announce(&a, if silent(p) { 0 } else { 60 }, &mut out4);
    }
    for p in 0..700u32 {
        let a = Announce {
            info_hash: ih(1),
            peer_id: pid(n + p),
            addr: CompactPeerV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, p as u16), 6881),
            event: AnnounceEvent::Started,
            left: u64::from(p % 2),
            numwant: 0,
        };
        store.announce(&a, if silent(p) { 0 } else { 60 }, &mut out6);
    }
    store.announce(&ann(2, 1, 1, AnnounceEvent::Started), 0, &mut out4);
    let mut gone = Vec::new();
    let r = store.clean_with(120, |h, id, _, _| gone.push((*h, id)));
    let silent4 = (0..n).filter(|&p| silent(p)).count();
    let silent6 = (0..700).filter(|&p| silent(p)).count();
    assert_eq!(r.peers_expired, silent4 + silent6 + 1);
    assert_eq!(gone.len(), r.peers_expired);
    let mut expect: Vec<_> = (0..n).filter(|&p| silent(p)).map(pid).collect();
    expect.extend((0..700).filter(|&p| silent(p)).map(|p| pid(n + p)));
    let mut got: Vec<_> = gone.iter().filter(|g| g.0 == ih(1)).map(|g| g.1).collect();
    expect.sort();
    got.sort();
    assert!(
        got == expect,
        "exactly the silent peers of the large torrent, each once"
    );
    let left = n as usize + 700 - silent4 - silent6;
    assert_eq!((r.peers, r.torrents), (left, 2));
    let st = store.scrape(&ih(1));
    assert_eq!((st.seeders + st.leechers) as usize, left);
    let seeders = (0..n)
        .filter(|&p| !silent(p) && p.is_multiple_of(3))
        .count()
        + (0..700)
            .filter(|&p| !silent(p) && p.is_multiple_of(2))
            .count();
    assert_eq!(st.seeders as usize, seeders, "the partition kept");
    assert_eq!(
        store.totals().seeders.load(Ordering::Relaxed),
        seeders as u64
    );
    store.with_torrent(&ih(1), |t| {
        t.v4().check_invariants(store.torrents.hasher());
        t.v6()
            .expect("IPv6 peers left")
            .check_invariants(store.torrents.hasher());
    });
}

#[test]
fn expiry_drops_silent_peers_and_empty_torrents() {
    let store = store_with(|c| (c.peer_ttl, c.torrent_ttl) = (100, 50));
    let mut out: Vec<CompactPeerV4> = Vec::new();
    store.announce(&ann(1, 1, 1, AnnounceEvent::Started), 0, &mut out);
    store.announce(&ann(1, 2, 1, AnnounceEvent::Started), 80, &mut out);
    let r = store.clean(90);
    assert_eq!((r.peers_expired, r.peers, r.torrents), (0, 2, 1));
    let r = store.clean(150);
    assert_eq!((r.peers_expired, r.peers), (1, 1));
    assert_eq!(store.scrape(&ih(1)).leechers, 1);
    let r = store.clean(181);
    assert_eq!(r.peers_expired, 1);
    // Empty, but announced at 80: kept until 80 + 50.
    assert_eq!(r.torrents_removed, 1);
    assert_eq!(store.clean(200).torrents, 0);
    assert_eq!(store.totals().torrents.load(Ordering::Relaxed), 0);
}

#[test]
fn a_sweep_told_to_stop_gives_up_and_leaves_the_totals() {
    let store = store_with(|c| c.peer_ttl = 100);
    let mut out: Vec<CompactPeerV4> = Vec::new();
    for t in 0..20 {
        store.announce(&ann(t, 1, 1, AnnounceEvent::Started), 0, &mut out);
    }
    assert_eq!(store.clean(50).torrents, 20);
    let r = store.clean_until(150, &AtomicBool::new(true), |_, _, _, _| ());
    assert_eq!((r.peers_expired, r.torrents), (0, 0));
    assert_eq!(store.scrape(&ih(3)).leechers, 1, "nothing swept");
    assert_eq!(store.totals().torrents.load(Ordering::Relaxed), 20);
    let r = store.clean_until(150, &AtomicBool::new(false), |_, _, _, _| ());
    assert_eq!(r.peers_expired, 20);
}

#[test]
fn dictionary_sink_carries_peer_ids() {
    let store = Store::new(StoreConfig::default());
    announce(&store, &ann(1, 1, 1, AnnounceEvent::Started));
    let mut out: Vec<(CompactPeerV4, PeerId)> = Vec::new();
    store.announce(&ann(1, 2, 1, AnnounceEvent::Started), 0, &mut out);
    assert_eq!(out, vec![(v4(1), pid(1))]);
}

#[derive(Clone, Debug)]
enum Op {
    Announce { peer: u32, seeder: bool, event: u8 },
    Expire { at: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u32..120, any::<bool>(), 0u8..4).prop_map(|(peer, seeder, event)| Op::Announce { peer, seeder, event }),
        1 => (0u32..50).prop_map(|at| Op::Expire { at }),
    ]
}

/// Plays `ops` on a swarm of `X`'s slots and on a plain map, checking after each that they
/// agree and that the partition and the index stay right.
fn follow_model<X: PeerExt>(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let hasher = Hasher::default();
    let mut swarm: Swarm<CompactPeerV4, X> = Swarm::default();
    let mut model: HashMap<u32, (bool, u32)> = HashMap::new();
    let mut now = 0u32;
    for op in ops {
        match op {
            Op::Announce {
                peer,
                seeder,
                event,
            } => {
                now += 1;
                let stopped = event == 3;
                let p = Peer {
                    peer_id: pid(peer),
                    addr: v4(peer),
                    expires: now + 20,
                    seeder,
                };
                let r = swarm.upsert(p, stopped, &hasher);
                if stopped {
                    model.remove(&peer);
                    prop_assert!(r.position.is_none());
                } else {
                    model.insert(peer, (seeder, now + 20));
                    let pos = r.position.unwrap();
                    if std::mem::size_of::<X::Id>() != 0 {
                        prop_assert_eq!(swarm.peer(pos).peer_id, pid(peer));
                    }
                    let mut out: Vec<CompactPeerV4> = Vec::new();
                    swarm.select(usize::MAX, seeder, Some(pos), &mut out);
                    prop_assert!(!out.contains(&v4(peer)));
                    let expect = model
                        .iter()
                        .filter(|(&k, &(s, _))| k != peer && (!seeder || !s))
                        .count();
                    prop_assert_eq!(out.len(), expect);
                }
            }
            Op::Expire { at } => {
                let at = now.saturating_sub(at);
                swarm.expire(at, &hasher);
                model.retain(|_, (_, exp)| *exp >= at);
            }
        }
        swarm.check_invariants(&hasher);
        prop_assert_eq!(swarm.len(), model.len());
        prop_assert_eq!(
            swarm.seeders() as usize,
            model.values().filter(|(s, _)| *s).count()
        );
    }
    Ok(())
}

proptest! {
    /// Random announces, stops and expiries over a swarm that crosses the index threshold
    /// both ways: the partition and the index stay right, and the store agrees with a
    /// plain map.
    #[test]
    fn swarm_matches_a_model(ops in proptest::collection::vec(op(), 1..600)) {
        follow_model::<()>(ops)?;
    }

    /// The same over a swarm of a few peers whose slots keep no peer id: it goes in and
    /// out of its inline slot.
    #[test]
    fn a_small_swarm_without_peer_ids_matches_a_model(ops in proptest::collection::vec(op(), 1..200)) {
        let few = ops.into_iter().map(|op| match op {
            Op::Announce { peer, seeder, event } => Op::Announce { peer: peer % 3, seeder, event },
            other => other,
        });
        follow_model::<crate::Anonymous>(few.collect())?;
    }
}

proptest! {
    /// Partial windows (which wrap and skip the asker): the right count, no duplicates,
    /// never the asker, and only leechers for a seeder.
    #[test]
    fn selection_windows_are_sound(
        kinds in proptest::collection::vec(any::<bool>(), 1..80),
        asker in any::<proptest::sample::Index>(),
        numwant in 0usize..90,
        rounds in 1usize..8,
    ) {
        let hasher = Hasher::default();
        let mut swarm: Swarm<CompactPeerV4> = Swarm::default();
        for (n, &seeder) in kinds.iter().enumerate() {
            let p = Peer { peer_id: pid(n as u32), addr: v4(n as u32), expires: 100, seeder };
            swarm.upsert(p, false, &hasher);
        }
        let a = asker.index(kinds.len());
        let asker_peer = Peer { peer_id: pid(a as u32), addr: v4(a as u32), expires: 100, seeder: kinds[a] };
        let me = swarm.upsert(asker_peer, false, &hasher).position;
        let leechers: std::collections::HashSet<CompactPeerV4> = kinds.iter().enumerate()
            .filter(|(_, &s)| !s).map(|(n, _)| v4(n as u32)).collect();
        let pool = if kinds[a] { leechers.len() - usize::from(!kinds[a]) } else { kinds.len() - 1 };
        for _ in 0..rounds {
            let mut out: Vec<CompactPeerV4> = Vec::new();
            swarm.select(numwant, kinds[a], me, &mut out);
            prop_assert_eq!(out.len(), numwant.min(pool));
            let distinct: std::collections::HashSet<_> = out.iter().copied().collect();
            prop_assert_eq!(distinct.len(), out.len(), "duplicates");
            prop_assert!(!out.contains(&v4(a as u32)), "the asker got itself");
            if kinds[a] {
                prop_assert!(out.iter().all(|p| leechers.contains(p)), "a seeder got a seeder");
            }
        }
    }
}
