//! The per-peer extension ([`PeerExt`]): what the layer above keeps in a peer's slot stays
//! with that peer however the store moves it, and comes back out when the peer leaves.

use std::collections::HashMap;

use super::tests::{ih, pid, v4};
use super::*;

/// A test extension: how many announces the slot has seen since its peer joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Count(u32);

// Kept inline when alone, so that these tests also follow an extension in and out of the
// inline slot.
impl PeerExt for Count {
    type Id = PeerId;
    type One<A: Address> = Inline<A, Self>;
}

// Open mode's slots stay as small as before the extension existed.
const _: () = assert!(std::mem::size_of::<PeerMeta>() == 24);
// What a torrent costs before its peers (docs/architecture.md, "What a torrent and a peer
// cost"): 64 bytes, 88 with its info hash in the shard's array; the same where no peer id
// is kept, whose inline peer fits beside the heap pointers' niche (slots.rs).
const _: () = assert!(std::mem::size_of::<Torrent>() == 64);
const _: () = assert!(std::mem::size_of::<(shoal_proto::InfoHash, Torrent)>() == 88);
const _: () = assert!(std::mem::size_of::<Torrent<Anonymous>>() == 64);
const _: () = assert!(std::mem::size_of::<(shoal_proto::InfoHash, Torrent<Anonymous>)>() == 88);
// A slot that keeps no peer id is its expiry alone.
const _: () = assert!(std::mem::size_of::<PeerMeta<Anonymous>>() == 4);

#[test]
fn a_store_without_peer_ids_keeps_peers_by_address_and_lists_them_with_zero_ids() {
    let store: Store<Anonymous> = Store::with_extension(StoreConfig::default());
    let mut out: Vec<(CompactPeerV4, PeerId)> = Vec::new();
    store.announce(&ann(1, 1, 0, AnnounceEvent::Started), 0, &mut out);
    // Another id at the same address replaces nothing but the expiry: still one seeder.
    let st = store.announce(&ann(1, 7, 0, AnnounceEvent::None), 0, &mut out);
    assert_eq!((st.seeders, st.leechers), (1, 0));
    out.clear();
    let st = store.announce(&ann(2, 2, 9, AnnounceEvent::Started), 0, &mut out);
    assert_eq!((st.seeders, st.leechers), (1, 1));
    assert_eq!(out, vec![(v4(1), PeerId([0; 20]))]);
    // Stopping by address, whatever id the stop carries.
    let st = store.announce(&ann(1, 5, 0, AnnounceEvent::Stopped), 0, &mut out);
    assert_eq!((st.seeders, st.leechers), (0, 1));
}

fn ann(peer: u32, id: u32, left: u64, event: AnnounceEvent) -> Announce<CompactPeerV4> {
    Announce {
        info_hash: ih(1),
        peer_id: pid(id),
        addr: v4(peer),
        event,
        left,
        numwant: 50,
    }
}

/// What an announce's visit saw, with the extension's value after it counted one more.
#[derive(Debug, PartialEq, Eq)]
enum Saw {
    Found(u32),
    New(u32),
    Replaced(PeerId, u32, u32),
    Removed(PeerId, u32),
    Absent,
}

fn count(slot: ExtSlot<'_, Count>) -> Saw {
    match slot {
        ExtSlot::Found(x) => {
            x.0 += 1;
            Saw::Found(x.0)
        }
        ExtSlot::New(x) => {
            x.0 += 1;
            Saw::New(x.0)
        }
        ExtSlot::Replaced(id, old, x) => {
            x.0 += 1;
            Saw::Replaced(id, old.0, x.0)
        }
        ExtSlot::Removed(id, old) => Saw::Removed(id, old.0),
        ExtSlot::Absent => Saw::Absent,
    }
}

fn announce(store: &Store<Count>, a: &Announce<CompactPeerV4>, now: u32) -> Saw {
    let mut out: Vec<CompactPeerV4> = Vec::new();
    store.announce_with(a, now, &mut out, count).1
}

/// Announces each request in turn, at times 1, 2, ..., and checks what the extension saw.
fn play(store: &Store<Count>, steps: &[(Announce<CompactPeerV4>, Saw)]) {
    for (now, (a, want)) in (1..).zip(steps) {
        assert_eq!(&announce(store, a, now), want, "announce {now}: {a:?}");
    }
}

/// Peer 1 joins and announces again: its extension counts 1, then 2.
fn joins_and_returns() -> [(Announce<CompactPeerV4>, Saw); 2] {
    [
        (ann(1, 1, 10, AnnounceEvent::Started), Saw::New(1)),
        (ann(1, 1, 10, AnnounceEvent::None), Saw::Found(2)),
    ]
}

#[test]
fn an_extension_starts_at_default_and_is_found_again_by_the_next_announce() {
    let store = Store::<Count>::with_extension(StoreConfig::default());
    let [joins, returns] = joins_and_returns();
    let completes = (ann(1, 1, 0, AnnounceEvent::Completed), Saw::Found(3));
    play(&store, &[joins, returns, completes]);
}

#[test]
fn a_stop_hands_back_what_the_slot_held_and_a_second_stop_finds_nothing() {
    let store = Store::<Count>::with_extension(StoreConfig::default());
    let [joins, returns] = joins_and_returns();
    let stop = ann(1, 1, 10, AnnounceEvent::Stopped);
    // A stop for a torrent the store never held creates nothing and finds nothing.
    let elsewhere = Announce {
        info_hash: ih(9),
        ..stop
    };
    play(
        &store,
        &[
            joins,
            returns,
            (stop, Saw::Removed(pid(1), 2)),
            (stop, Saw::Absent),
            (elsewhere, Saw::Absent),
        ],
    );
    assert!(store.with_torrent(&ih(9), |_| ()).is_none());
}

#[test]
fn another_client_on_the_same_address_gets_a_fresh_extension() {
    let store = Store::<Count>::with_extension(StoreConfig::default());
    let [joins, returns] = joins_and_returns();
    // The client restarted with a new peer id on the same address and port.
    let restarts = (
        ann(1, 2, 10, AnnounceEvent::Started),
        Saw::Replaced(pid(1), 2, 1),
    );
    let returns_again = (ann(1, 2, 10, AnnounceEvent::None), Saw::Found(2));
    play(&store, &[joins, returns, restarts, returns_again]);
}

/// Many peers (past the index threshold), changing between leecher and seeder and leaving
/// in a random order: every swap and removal moves slots, and each peer's count must stay
/// its own.
#[test]
fn each_peer_keeps_its_own_extension_however_the_slots_move() {
    let store = Store::<Count>::with_extension(StoreConfig::default());
    let mut rng = fastrand::Rng::with_seed(7);
    let mut expected: HashMap<PeerId, u32> = HashMap::new();
    for now in 0..4000u32 {
        let peer = rng.u32(0..100);
        let event = match rng.u32(0..10) {
            0 => AnnounceEvent::Stopped,
            1 => AnnounceEvent::Completed,
            _ => AnnounceEvent::None,
        };
        let left = if rng.bool() { 0 } else { 10 };
        let saw = announce(&store, &ann(peer, peer, left, event), now);
        let id = pid(peer);
        match saw {
            Saw::Removed(who, n) => {
                assert_eq!(who, id);
                assert_eq!(Some(n), expected.remove(&id));
            }
            Saw::Absent => assert!(!expected.contains_key(&id)),
            Saw::New(n) => {
                assert!(!expected.contains_key(&id));
                expected.insert(id, n);
            }
            Saw::Found(n) => {
                let e = expected.get_mut(&id).expect("found a peer that had left");
                *e += 1;
                assert_eq!(*e, n);
            }
            Saw::Replaced(..) => panic!("every peer keeps its own address"),
        }
    }
    let mut walked = HashMap::new();
    store.for_each_ext_mut(|h, id, x| {
        assert_eq!(*h, ih(1));
        walked.insert(id, x.0);
    });
    assert_eq!(walked, expected);
}

#[test]
fn expired_peers_hand_over_their_extensions_to_the_cleaner() {
    let config = StoreConfig::default();
    let ttl = config.peer_ttl;
    let store = Store::<Count>::with_extension(config);
    for peer in 0..40 {
        announce(&store, &ann(peer, peer, 10, AnnounceEvent::Started), 100);
    }
    for peer in 0..10 {
        announce(&store, &ann(peer, peer, 10, AnnounceEvent::None), 200);
    }
    let mut gone = Vec::new();
    let report = store.clean_with(100 + ttl + 1, |h, id, _, x| gone.push((*h, id, x)));
    assert_eq!(report.peers_expired, 30);
    gone.sort_by_key(|(_, id, _)| id.0);
    let want: Vec<_> = (10..40).map(|p| (ih(1), pid(p), Count(1))).collect();
    assert_eq!(gone, want);
    let mut left = 0;
    store.for_each_ext_mut(|_, _, x| {
        assert_eq!(*x, Count(2));
        left += 1;
    });
    assert_eq!(left, 10);
}

#[test]
fn remote_changes_hand_back_the_local_slots_they_displace_and_peers_are_found_by_address() {
    let store: Store<Count> = Store::with_extension(StoreConfig::default());
    let mut out: Vec<CompactPeerV4> = Vec::new();
    store.announce_with(&ann(1, 1, 5, AnnounceEvent::None), 10, &mut out, count);
    store.announce_with(&ann(1, 1, 5, AnnounceEvent::None), 10, &mut out, count);
    assert_eq!(
        store.with_peer_ext(&ih(1), &v4(1), |e| e.map(|(id, x)| (id, *x))),
        Some((pid(1), Count(2)))
    );
    assert!(store.with_peer_ext(&ih(1), &v4(2), |e| e.is_none()));
    assert!(store.with_peer_ext(&ih(2), &v4(1), |e| e.is_none()));
    let v6 = CompactPeerV6::new(std::net::Ipv6Addr::LOCALHOST, 1);
    assert!(store.with_peer_ext(&ih(1), &v6, |e| e.is_none()));
    // A remote peer with the same id on the address keeps the slot's extension.
    let remote = |id| Peer {
        peer_id: pid(id),
        addr: v4(1),
        expires: 100,
        seeder: false,
    };
    let mut displaced = Vec::new();
    store.upsert_remote_with(&ih(1), remote(1), |id, x| displaced.push((id, x)));
    assert!(displaced.is_empty());
    // Another client's: the local one's extension comes back.
    store.upsert_remote_with(&ih(1), remote(7), |id, x| displaced.push((id, x)));
    assert_eq!(displaced, vec![(pid(1), Count(2))]);
    store.announce_with(&ann(1, 7, 5, AnnounceEvent::None), 10, &mut out, count);
    let mut removed = Vec::new();
    store.remove_remote_with(&ih(1), v4(1), |id, x| removed.push((id, x)));
    assert_eq!(removed, vec![(pid(7), Count(1))]);
    store.remove_remote_with(&ih(1), v4(1), |id, x| removed.push((id, x)));
    assert_eq!(removed.len(), 1);
    assert!(store.with_peer_ext(&ih(1), &v4(1), |e| e.is_none()));
}
