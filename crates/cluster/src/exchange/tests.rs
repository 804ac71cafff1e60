//! The exchange's rules over plain values: what is written, what a failed call puts back,
//! what other nodes' feeds do to the stores.

use super::*;
use crate::feed::News;
use crate::ws_link::WsLink;
use shoal_proto::{CompactPeerV4, PeerId};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::webtorrent::{is_remote, WebTorrentStore, WsStoreConfig};
use shoal_swarm::{Store, StoreConfig};
use shoal_tracker::{Core, Policy, Swarms};

const IH: InfoHash = InfoHash([1; 20]);

fn addr(port: u16) -> AnyAddr {
    AnyAddr::V4(CompactPeerV4::new("10.0.0.1".parse().unwrap(), port))
}

fn v4(port: u16) -> Endpoint {
    addr(port).into()
}

fn announced(port: u16, seeder: bool, completed: bool) -> Change {
    Change::Announced {
        info_hash: IH,
        addr: addr(port),
        peer_id: PeerId([port as u8; 20]),
        seeder,
        completed,
    }
}

/// A node's stores, for the exchange to write the other nodes' peers into.
struct Node {
    core: Core,
    link: WsLink,
}

impl Node {
    fn new(name: &str) -> Self {
        let swarms = Swarms::Open(Store::new(StoreConfig::default()));
        let webtorrent = WebTorrentStore::new(WsStoreConfig::default());
        Self {
            core: Core::new(Policy::default(), swarms, webtorrent),
            link: WsLink::new(name.into()),
        }
    }

    fn stores(&self) -> Stores<'_> {
        Stores {
            core: &self.core,
            link: &self.link,
        }
    }
}

/// This round's calls that write something.
fn calls_with_writes(x: &mut Exchange, unix: u64) -> Vec<Call> {
    x.plan(unix)
        .into_iter()
        .filter(|c| !c.writes.is_empty())
        .collect()
}

/// The writes of this round, all buckets together.
fn writes(x: &mut Exchange, unix: u64) -> Writes {
    let mut all = Writes::default();
    for call in x.plan(unix) {
        assert_eq!(call.entry().is_empty(), call.writes.is_empty());
        all.peers.extend(call.writes.peers);
        all.completed.extend(call.writes.completed);
        all.clients.extend(call.writes.clients);
    }
    all
}

#[test]
fn only_what_changed_is_written_and_completions_are_totals() {
    let mut x = Exchange::new("a".into(), 800);
    x.record(
        &[
            announced(1, false, false),
            announced(1, true, true),
            announced(2, false, false),
            Change::Stopped {
                info_hash: IH,
                addr: addr(2),
            },
            Change::Stopped {
                info_hash: IH,
                addr: addr(3),
            },
            Change::Scraped { info_hash: IH },
        ],
        1000,
    );
    let w = writes(&mut x, 1000);
    assert_eq!(w.peers.len(), 2, "{w:?}");
    let one = w.peers[&(IH, v4(1))].unwrap();
    assert!(one.seeder && one.expires == 1800);
    assert_eq!(w.peers[&(IH, v4(2))], None, "stopped before it was sent");
    assert_eq!(w.completed[&IH], 1);
    // Re-announces as published, within an eighth of the lifetime: nothing to write.
    x.record(&[announced(1, true, false)], 1100);
    assert!(writes(&mut x, 1100).peers.is_empty());
    // Past it, or a change of state: written again.
    x.record(&[announced(1, true, false)], 1101);
    assert_eq!(
        writes(&mut x, 1101).peers[&(IH, v4(1))].unwrap().expires,
        1901
    );
    x.record(&[announced(1, false, false)], 1102);
    assert!(!writes(&mut x, 1102).peers[&(IH, v4(1))].unwrap().seeder);
    // A stop of a published peer is a delete; one nobody heard of is nothing.
    x.record(
        &[Change::Stopped {
            info_hash: IH,
            addr: addr(1),
        }],
        1103,
    );
    assert_eq!(writes(&mut x, 1103).peers[&(IH, v4(1))], None);
    x.record(&[announced(4, false, false)], 1104);
    assert!(writes(&mut x, 1104).peers.contains_key(&(IH, v4(4))));
    // Once its expiry passed, the sweep deletes it from Redis.
    let mut deleted = false;
    for _ in 0..SWEEP_ROUNDS {
        deleted |= writes(&mut x, 1904 + 1).peers.get(&(IH, v4(4))) == Some(&None);
    }
    assert!(deleted, "an expired peer is deleted");
}

#[test]
fn a_failed_call_comes_back_under_newer_changes() {
    let mut x = Exchange::new("a".into(), 100);
    x.record(
        &[announced(1, false, false), announced(2, false, true)],
        1000,
    );
    let calls = calls_with_writes(&mut x, 1000);
    assert_eq!(calls.len(), 1);
    x.record(&[announced(1, true, false)], 1010);
    x.retry(calls.into_iter().next().unwrap());
    let w = writes(&mut x, 1010);
    assert!(
        w.peers[&(IH, v4(1))].unwrap().seeder,
        "the newer announce wins"
    );
    assert!(w.peers.contains_key(&(IH, v4(2))));
    assert_eq!(w.completed[&IH], 1);
}

#[test]
fn what_redis_lost_is_written_again() {
    let mut x = Exchange::new("a".into(), 800);
    x.record(&[announced(1, false, true)], 1000);
    let call = x
        .plan(1000)
        .into_iter()
        .find(|c| !c.writes.is_empty())
        .unwrap();
    x.check_own(&call, 7);
    // The next round writes nothing and finds its version as it left it: nothing.
    let idle = x.plan(1000).swap_remove(call.bucket);
    x.check_own(&idle, 7);
    assert!(writes(&mut x, 1000).peers.is_empty());
    // Redis came back empty: the version is not the one this node wrote.
    let idle = x.plan(1000).swap_remove(call.bucket);
    x.check_own(&idle, 0);
    let again = writes(&mut x, 1000);
    assert!(again.peers[&(IH, v4(1))].is_some() && again.completed[&IH] == 1);
}

fn entry(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        r.write(&mut out);
    }
    out
}

fn set(port: u16, expires: u32) -> Record {
    Record::Peer {
        info_hash: IH,
        endpoint: v4(port),
        value: Some(PeerValue {
            expires,
            seeder: true,
            peer_id: PeerId([7; 20]),
        }),
    }
}

fn feed(node: &str, version: u64, news: News) -> NodeFeed {
    NodeFeed {
        node: node.into(),
        version,
        news,
    }
}

#[test]
fn client_records_travel_with_their_times_and_leave_redis_when_old() {
    use shoal_tracker::private::{PeerRecord, SharedRecord};
    let record = |seen, uploaded| PeerRecord {
        uploaded,
        downloaded: 5,
        seen,
        seeding: false,
        started: false,
    };
    let shared = |seen, uploaded, ended| SharedRecord {
        user_id: 3,
        torrent_id: 300,
        peer_id: PeerId([9; 20]),
        record: record(seen, uploaded),
        ended,
    };
    // Node A: its ledger's clock reads 50 when the wall clock reads 10,000; two
    // announces of one client this round: the last is written.
    let mut a = Exchange::new("a".into(), 100);
    a.keep_clients_for(1000);
    a.record_clients(&[shared(40, 7, false), shared(45, 9, false)], 10_000, 50);
    let calls = calls_with_writes(&mut a, 10_000);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].bucket, 300 % BUCKETS);
    let entry = calls[0].entry();
    // Node B (clock 7 at wall 10,002) reads it: seen 5 s before its wall clock.
    let node = Node::new("x");
    let store = node.stores();
    let mut b = Exchange::new("b".into(), 100);
    b.keep_clients_for(1000);
    b.apply(
        &store,
        300 % BUCKETS,
        vec![feed("a", 1, News::Log(vec![entry]))],
        10_002,
    );
    let got = b.take_adopted(10_002, 7);
    assert_eq!(
        got,
        vec![shared(0, 9, false)],
        "seen 7 - 7 s, saturating at 0"
    );
    assert!(b.take_adopted(10_002, 7).is_empty());
    // A record older than the record lifetime is not handed over.
    let mut old = Vec::new();
    Record::Client {
        torrent_id: 300,
        user_id: 3,
        peer_id: PeerId([9; 20]),
        value: Some(ClientValue {
            uploaded: 1,
            downloaded: 1,
            seen: 8_000,
            seeding: true,
            started: false,
            ended: false,
        }),
    }
    .write(&mut old);
    b.apply(
        &store,
        300 % BUCKETS,
        vec![feed("a", 2, News::Log(vec![old]))],
        10_002,
    );
    assert!(b.take_adopted(10_002, 7).is_empty());
    // On A, the record leaves Redis once it is older than the lifetime.
    let mut deleted = false;
    for _ in 0..SWEEP_ROUNDS {
        deleted |= writes(&mut a, 10_995 + 1000)
            .clients
            .values()
            .any(Option::is_none);
    }
    assert!(deleted, "an old client record is deleted");
}

#[test]
fn other_nodes_peers_come_in_leave_and_expire() {
    let node = Node::new("x");
    let store = node.stores();
    let b = bucket_of(&IH);
    let mut x = Exchange::new("a".into(), 100);
    x.record(&[announced(9, false, true)], 1000);
    let log = entry(&[
        set(1, 2000),
        set(2, 2000),
        set(3, 999),
        Record::Completed {
            info_hash: IH,
            total: 4,
        },
    ]);
    x.apply(&store, b, vec![feed("b", 1, News::Log(vec![log]))], 1000);
    let st = store.core.swarms().scrape(&IH);
    assert_eq!((st.seeders, st.completed), (2, 5), "own completion + b's 4");
    assert_eq!(x.plan(1000)[b].held, vec![("b".to_string(), 1)]);
    // C says it left a peer that is B's here: B's stays. B says it left: it goes.
    let gone = entry(&[Record::Peer {
        info_hash: IH,
        endpoint: v4(1),
        value: None,
    }]);
    x.apply(
        &store,
        b,
        vec![feed("c", 1, News::Log(vec![gone.clone()]))],
        1000,
    );
    assert_eq!(store.core.swarms().scrape(&IH).seeders, 2);
    x.apply(&store, b, vec![feed("b", 2, News::Log(vec![gone]))], 1000);
    assert_eq!(store.core.swarms().scrape(&IH).seeders, 1);
    // B's whole hash read again: what is not in it leaves.
    let mut field = IH.0.to_vec();
    field.extend_from_slice(&CompactPeerV4::new("10.0.0.1".parse().unwrap(), 5).0);
    let mut value = Vec::new();
    PeerValue {
        expires: 1500,
        seeder: false,
        peer_id: PeerId([5; 20]),
    }
    .write(&mut value);
    x.apply(
        &store,
        b,
        vec![feed("b", 9, News::Whole(vec![field, value]))],
        1000,
    );
    let st = store.core.swarms().scrape(&IH);
    assert_eq!((st.seeders, st.leechers), (0, 1));
    assert_eq!(x.remote_peers(), 1);
    // Its expiry passes: it leaves, without a word from B (B may be dead).
    x.expire(&store, 1500);
    assert_eq!(x.remote_peers(), 1);
    x.expire(&store, 1501);
    assert_eq!(
        (x.remote_peers(), store.core.swarms().scrape(&IH).leechers),
        (0, 0)
    );
    assert_eq!(
        store.core.swarms().scrape(&IH).completed,
        5,
        "completed never goes down"
    );
}

#[test]
fn webtorrent_peers_travel_in_the_bucket_feeds_after_the_rest() {
    let peer = PeerId([3; 20]);
    let joined = |seeder, stopped| Outgoing::Peer {
        info_hash: IH,
        peer_id: peer,
        seeder,
        stopped,
    };
    let mut a = Exchange::new("a".into(), 100);
    a.record(&[announced(1, false, true)], 1000);
    a.record_webtorrent(&[joined(false, false), joined(true, false)], 1000);
    let calls = calls_with_writes(&mut a, 1000);
    assert_eq!(calls.len(), 1, "one bucket, one call, every protocol");
    let key = (IH, Endpoint::WebTorrent(peer));
    assert!(calls[0].writes.peers[&key].unwrap().seeder, "the last wins");
    let log = calls[0].entry();
    let mut kinds = Vec::new();
    Record::read_log(&log, |r| kinds.push(r)).unwrap();
    assert!(
        matches!(
            kinds.last(),
            Some(Record::Peer {
                endpoint: Endpoint::WebTorrent(_),
                ..
            })
        ),
        "WebTorrent records last: {kinds:?}"
    );
    // Node B lists A's WebTorrent peer under the connection id that stands for A.
    let node = Node::new("b");
    let store = node.stores();
    let mut b = Exchange::new("b".into(), 100);
    let bucket = bucket_of(&IH);
    b.apply(
        &store,
        bucket,
        vec![feed("a", 1, News::Log(vec![log]))],
        1000,
    );
    let conn = node.core.webtorrent().peer_connection(&IH, &peer);
    assert!(conn.is_some_and(is_remote), "{conn:?}");
    assert_eq!(node.link.name_of(conn.unwrap()).as_deref(), Some("a"));
    assert_eq!(node.core.webtorrent().scrape(&IH).seeders, 1);
    assert_eq!(b.remote_peers(), 2);
    // A's peer stops: a delete, and it leaves B's WebTorrent store.
    a.record_webtorrent(&[joined(true, true)], 1001);
    let calls = calls_with_writes(&mut a, 1001);
    assert_eq!(calls[0].writes.peers[&key], None);
    let log = calls[0].entry();
    b.apply(
        &store,
        bucket,
        vec![feed("a", 2, News::Log(vec![log]))],
        1001,
    );
    assert_eq!(node.core.webtorrent().peer_connection(&IH, &peer), None);
    assert_eq!(b.remote_peers(), 1);
}
