//! Tests of the WebTorrent store: membership per connection, offer targets, answer checks.

use super::*;
// `None` is a regular re-announce; named so, it does not hide `Option::None`.
use AnnounceEvent::{Completed, None as Regular, Started, Stopped};

const IH: InfoHash = InfoHash([1; 20]);

fn pid(n: u8) -> PeerId {
    PeerId([n; 20])
}

fn oid(n: u8) -> OfferId {
    OfferId::new(&[n; 20]).unwrap()
}

fn ann(peer: u8, conn: ConnectionId, event: AnnounceEvent, seeder: bool) -> WsAnnounce {
    WsAnnounce {
        info_hash: IH,
        peer_id: pid(peer),
        conn,
        event,
        seeder,
    }
}

/// `req`, in torrent `t` instead of `IH`.
fn in_torrent(t: u8, req: WsAnnounce) -> WsAnnounce {
    WsAnnounce {
        info_hash: InfoHash([t; 20]),
        ..req
    }
}

/// Announces `req` with the offers numbered `offers`, at `now`; the targets land in `out`.
fn announce(
    s: &WebTorrentStore,
    req: WsAnnounce,
    offers: &[u8],
    now: u32,
    out: &mut Vec<OfferTarget>,
) -> WsAnnounceOutcome {
    let offers: Vec<OfferId> = offers.iter().map(|&n| oid(n)).collect();
    s.announce(&req, &offers, now, out)
}

/// Peer `answerer`, on `conn`, answers peer `to`'s offer `offer` in `IH` at `now`.
fn answer(
    s: &WebTorrentStore,
    answerer: u8,
    conn: ConnectionId,
    to: u8,
    offer: &OfferId,
    now: u32,
) -> Result<ConnectionId, AnswerRefusal> {
    s.answer(&IH, &pid(answerer), conn, &pid(to), offer, now)
}

/// Peer 1 (on connection 1) announces with the offers numbered `offers`. Checks that each
/// target is a different peer and none is peer 1, and returns the targets.
fn offer_targets(s: &WebTorrentStore, offers: &[u8], out: &mut Vec<OfferTarget>) -> Vec<PeerId> {
    announce(s, ann(1, 1, Regular, false), offers, 0, out);
    let mut targets: Vec<_> = out.iter().map(|t| t.peer_id).collect();
    targets.sort();
    targets.dedup();
    assert_eq!(targets.len(), out.len(), "two offers to one peer: {out:?}");
    assert!(!targets.contains(&pid(1)));
    targets
}

fn stats(seeders: u32, leechers: u32, completed: u32) -> TorrentStats {
    TorrentStats {
        seeders,
        leechers,
        completed,
    }
}

/// A store (see [`store`]) in which `peers` have announced, without offers, at time 0, and
/// a buffer for offer targets.
fn store_with(peers: &[WsAnnounce]) -> (WebTorrentStore, Vec<OfferTarget>) {
    let s = store();
    let mut out = Vec::new();
    for p in peers {
        s.announce(p, &[], 0, &mut out);
    }
    (s, out)
}

/// A store (see [`store`]) in which leechers numbered `peers` have announced, each on the
/// connection of its own number, and a buffer for offer targets.
fn store_of_leechers(peers: std::ops::RangeInclusive<u8>) -> (WebTorrentStore, Vec<OfferTarget>) {
    let peers: Vec<WsAnnounce> = peers
        .map(|n| ann(n, n as ConnectionId, Started, false))
        .collect();
    store_with(&peers)
}

/// Peer 1, on connection 1, announces at `now` with the offers numbered 1 to `offers`, which
/// go only to connections that `takes_offers`; the targets land in `out`.
fn offer_from_1(
    s: &WebTorrentStore,
    offers: u8,
    now: u32,
    out: &mut Vec<OfferTarget>,
    takes_offers: impl Fn(ConnectionId) -> bool,
) -> WsAnnounceOutcome {
    let offers: Vec<OfferId> = (1..=offers).map(oid).collect();
    s.announce_to(
        &ann(1, 1, Regular, false),
        &mut &offers[..],
        now,
        out,
        takes_offers,
    )
}

fn store() -> WebTorrentStore {
    store_holding(64)
}

/// A store whose peers remember at most `pending` offers each.
fn store_holding(pending: usize) -> WebTorrentStore {
    WebTorrentStore::new(WsStoreConfig {
        shards: 4,
        offer_max_age: 10,
        max_pending_offers: pending,
        ..WsStoreConfig::default()
    })
}

#[test]
fn announce_counts_seeders_leechers_and_completed() {
    let s = store();
    let mut out = Vec::new();
    let o = announce(&s, ann(1, 1, Completed, true), &[], 0, &mut out);
    assert!(o.joined);
    assert_eq!(o.stats, stats(1, 0, 1));
    let o = announce(&s, ann(2, 2, Started, false), &[], 0, &mut out);
    assert_eq!(o.stats, stats(1, 1, 1));
    let o = announce(&s, ann(2, 2, Regular, false), &[], 0, &mut out);
    assert!(!o.joined);
    let o = announce(&s, ann(2, 2, Completed, true), &[], 0, &mut out);
    assert_eq!(o.stats, stats(2, 0, 2));
    // A repeated completed does not count twice.
    let o = announce(&s, ann(2, 2, Completed, true), &[], 0, &mut out);
    assert_eq!(o.stats.completed, 2);
    assert_eq!(s.scrape(&IH), o.stats);
    assert_eq!(s.scrape(&InfoHash([9; 20])), TorrentStats::default());
}

#[test]
fn offers_go_to_distinct_other_peers() {
    let s = store();
    let mut out = Vec::new();
    for p in 1..=6 {
        announce(&s, ann(p, u64::from(p), Started, false), &[], 0, &mut out);
    }
    for _ in 0..50 {
        // Five other peers: five offers, all to different peers, none to the sender.
        let targets = offer_targets(&s, &[1, 2, 3, 4, 5, 6, 7], &mut out);
        assert_eq!(targets.len(), 5);
        for t in &out {
            assert_eq!(t.conn, u64::from(t.peer_id.0[0]));
        }
    }
}

#[test]
fn offers_in_a_large_swarm_are_distinct_and_random() {
    let s = store();
    let mut out = Vec::new();
    for p in 1..=200u8 {
        announce(&s, ann(p, u64::from(p), Started, false), &[], 0, &mut out);
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let targets = offer_targets(&s, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], &mut out);
        assert_eq!(targets.len(), 10);
        seen.extend(targets);
    }
    assert!(seen.len() > 50, "only {} distinct targets", seen.len());
}

#[test]
fn no_offers_to_own_connection_or_between_seeders() {
    let (s, mut out) = store_with(&[
        ann(1, 1, Started, true),
        ann(2, 1, Started, false),
        ann(3, 3, Started, true),
    ]);
    announce(&s, ann(1, 1, Regular, true), &[1, 2], 0, &mut out);
    assert!(out.is_empty(), "{out:?}");
    announce(&s, ann(4, 4, Started, false), &[1, 2, 3], 0, &mut out);
    assert_eq!(out.len(), 3);
}

#[test]
fn answers_are_checked_against_relayed_offers() {
    let (s, mut out) = store_with(&[ann(1, 10, Started, true), ann(3, 30, Started, false)]);
    announce(&s, ann(2, 20, Started, false), &[7, 8], 0, &mut out);
    assert_eq!(out.len(), 2);
    // Peer 1 (conn 10) got one of the offers: find which.
    let to1 = out.iter().find(|t| t.peer_id == pid(1)).unwrap();
    let o = [oid(7), oid(8)][to1.offer];
    // Forged: the answer claims to come from peer 1 but arrives on another connection.
    assert_eq!(answer(&s, 1, 99, 2, &o, 1), Err(AnswerRefusal::NotAPeer));
    // Wrong offerer, unknown offer id, unknown torrent.
    assert_eq!(answer(&s, 1, 10, 3, &o, 1), Err(AnswerRefusal::NoSuchOffer));
    assert_eq!(
        answer(&s, 1, 10, 2, &oid(99), 1),
        Err(AnswerRefusal::NoSuchOffer)
    );
    assert_eq!(
        s.answer(&InfoHash([5; 20]), &pid(1), 10, &pid(2), &o, 1),
        Err(AnswerRefusal::NotAPeer)
    );
    // The real answer goes to peer 2's connection, once.
    assert_eq!(answer(&s, 1, 10, 2, &o, 1), Ok(20));
    assert_eq!(answer(&s, 1, 10, 2, &o, 1), Err(AnswerRefusal::NoSuchOffer));
}

#[test]
fn late_answers_and_answers_to_departed_peers_are_refused() {
    let (s, mut out) = store_with(&[ann(1, 10, Started, false)]);
    announce(&s, ann(2, 20, Started, false), &[1], 0, &mut out);
    assert_eq!(
        answer(&s, 1, 10, 2, &oid(1), 11),
        Err(AnswerRefusal::Expired)
    );
    announce(&s, ann(2, 20, Regular, false), &[2], 20, &mut out);
    announce(&s, ann(2, 20, Stopped, false), &[], 20, &mut out);
    assert_eq!(
        answer(&s, 1, 10, 2, &oid(2), 21),
        Err(AnswerRefusal::OffererGone)
    );
}

/// A peer that holds `max_pending_offers` answerable offers is sent no more until one is
/// answered or expires: another would push out the oldest, whose answer, sent by a client
/// that did nothing wrong, would then be refused.
#[test]
fn a_peer_with_its_pending_offers_full_is_passed_over() {
    let s = store_holding(3);
    let mut out = Vec::new();
    s.announce(&ann(1, 10, Started, false), &[], 0, &mut out);
    for n in 0..5 {
        announce(&s, ann(2, 20, Regular, false), &[n], 0, &mut out);
        // Cap 3: the fourth and fifth offers found no peer to go to.
        assert_eq!(out.len(), usize::from(n < 3), "offer {n}");
    }
    for n in 3..5 {
        assert_eq!(
            answer(&s, 1, 10, 2, &oid(n), 0),
            Err(AnswerRefusal::NoSuchOffer)
        );
    }
    assert_eq!(answer(&s, 1, 10, 2, &oid(1), 0), Ok(20));
    // One answered: room for one more.
    announce(&s, ann(2, 20, Regular, false), &[5], 0, &mut out);
    assert_eq!(out.len(), 1);
    announce(&s, ann(2, 20, Regular, false), &[6], 0, &mut out);
    assert!(out.is_empty());
    for n in [0, 2, 5] {
        assert_eq!(answer(&s, 1, 10, 2, &oid(n), 0), Ok(20));
    }
    // Full again, then the oldest expire (age 10): offers go through again.
    for n in 7..10 {
        announce(&s, ann(2, 20, Regular, false), &[n], 0, &mut out);
    }
    announce(&s, ann(2, 20, Regular, false), &[10], 10, &mut out);
    assert!(out.is_empty(), "the oldest is not expired at 10");
    announce(&s, ann(2, 20, Regular, false), &[10], 11, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(answer(&s, 1, 10, 2, &oid(10), 11), Ok(20));
}

/// A busy peer is sent thousands of offers before it reads the first (they wait in its
/// socket buffers): with the default cap every one of them stays answerable, in any order,
/// and ages out from the front without a scan of the list.
#[test]
fn a_busy_peer_keeps_thousands_of_offers_answerable() {
    let s = WebTorrentStore::new(WsStoreConfig {
        shards: 4,
        offer_max_age: 10,
        ..WsStoreConfig::default()
    });
    let mut out = Vec::new();
    s.announce(&ann(1, 10, Started, false), &[], 0, &mut out);
    let ids: Vec<OfferId> = (0..4000u32)
        .map(|n| OfferId::new(&n.to_be_bytes()).unwrap())
        .collect();
    // Peer 2 offers 4,000 times at times 0..4 (peer 1 is its only possible target).
    let offer_all = |out: &mut Vec<OfferTarget>| {
        for (n, id) in ids.iter().enumerate() {
            s.announce(&ann(2, 20, Regular, false), &[*id], n as u32 / 1000, out);
            assert_eq!(out.len(), 1);
        }
    };
    offer_all(&mut out);
    // Answered newest first, then oldest first: all relayed, each once.
    for id in ids[2000..].iter().rev().chain(&ids[..2000]) {
        assert_eq!(answer(&s, 1, 10, 2, id, 5), Ok(20));
        assert_eq!(answer(&s, 1, 10, 2, id, 5), Err(AnswerRefusal::NoSuchOffer));
    }
    // Offers made at 0..4: at 13 those of time 0..2 have aged out of the list when the next
    // offer goes in; those of time 3 are answerable until 13.
    offer_all(&mut out);
    s.announce(&ann(2, 20, Regular, false), &[oid(200)], 13, &mut out);
    assert_eq!(
        answer(&s, 1, 10, 2, &ids[2999], 13),
        Err(AnswerRefusal::NoSuchOffer)
    );
    assert_eq!(answer(&s, 1, 10, 2, &ids[3000], 13), Ok(20));
    assert_eq!(answer(&s, 1, 10, 2, &oid(200), 13), Ok(20));
    // An answer that names the right offer id but another offerer matches nothing.
    assert_eq!(
        answer(&s, 1, 10, 3, &ids[3999], 13),
        Err(AnswerRefusal::NoSuchOffer)
    );
}

#[test]
fn stopped_removes_only_the_senders_own_peer() {
    let (s, mut out) = store_with(&[ann(1, 10, Started, false), ann(2, 20, Started, false)]);
    // Connection 20 claims to stop peer 1: nothing happens.
    let o = announce(&s, ann(1, 20, Stopped, false), &[], 0, &mut out);
    assert!(!o.left);
    assert_eq!(o.stats.leechers, 2);
    let o = announce(&s, ann(2, 20, Stopped, false), &[], 0, &mut out);
    assert!(o.left);
    assert_eq!(o.stats.leechers, 1);
    assert_eq!(s.peer_connection(&IH, &pid(1)), Some(10));
    // Stopping in an unknown torrent creates nothing.
    let req = in_torrent(8, ann(1, 10, Stopped, false));
    announce(&s, req, &[], 0, &mut out);
    assert_eq!(s.clean(0).torrents, 1);
}

#[test]
fn a_closed_connection_removes_its_peers_but_not_moved_ones() {
    let s = store();
    let mut out = Vec::new();
    let ih2 = InfoHash([2; 20]);
    announce(&s, ann(1, 10, Started, false), &[], 0, &mut out);
    let req = in_torrent(2, ann(1, 10, Started, true));
    announce(&s, req, &[], 0, &mut out);
    announce(&s, ann(3, 10, Started, false), &[], 0, &mut out);
    // Peer 3 reconnected on connection 11.
    let o = announce(&s, ann(3, 11, Regular, false), &[], 0, &mut out);
    assert!(o.joined);
    let removed = s.remove_connection(10, [(IH, pid(1)), (ih2, pid(1)), (IH, pid(3))]);
    assert_eq!(removed, 2);
    assert_eq!(s.scrape(&IH), stats(0, 1, 0));
    assert_eq!(s.scrape(&ih2), TorrentStats::default());
    assert_eq!(s.peer_connection(&IH, &pid(3)), Some(11));
}

#[test]
fn totals_count_torrents_and_peers_of_every_shard() {
    let s = store();
    let mut out = Vec::new();
    assert_eq!(s.totals(), WsTotals::default());
    for t in 1..=5u8 {
        for p in 0..t {
            let req = in_torrent(t, ann(p, u64::from(p), Started, p == 0));
            announce(&s, req, &[], 0, &mut out);
        }
    }
    assert_eq!(
        s.totals(),
        WsTotals {
            torrents: 5,
            seeders: 5,
            leechers: 10
        }
    );
    // A closed connection's peers leave at once; their torrent stays until cleaned.
    let gone: Vec<_> = (1..=5u8).map(|t| (InfoHash([t; 20]), pid(0))).collect();
    assert_eq!(s.remove_connection(0, gone), 5);
    assert_eq!(
        s.totals(),
        WsTotals {
            torrents: 5,
            seeders: 0,
            leechers: 10
        }
    );
}

#[test]
fn clean_expires_peers_and_empty_torrents() {
    let s = WebTorrentStore::new(WsStoreConfig {
        shards: 2,
        peer_ttl: 100,
        torrent_ttl: 50,
        ..WsStoreConfig::default()
    });
    let mut out = Vec::new();
    announce(&s, ann(1, 10, Started, true), &[], 0, &mut out);
    announce(&s, ann(2, 20, Started, false), &[], 90, &mut out);
    let r = s.clean(150);
    assert_eq!((r.peers_expired, r.peers, r.torrents), (1, 1, 1));
    assert_eq!(s.scrape(&IH).seeders, 0);
    let r = s.clean(300);
    assert_eq!((r.peers_expired, r.torrents_removed, r.torrents), (1, 1, 0));
    let mut n = 0;
    s.scrape_all(10, |_, _| n += 1);
    assert_eq!(n, 0);
}

#[test]
fn full_scrape_is_bounded() {
    let s = store();
    let mut out = Vec::new();
    for i in 0..10u8 {
        let req = in_torrent(i, ann(1, 1, Started, false));
        announce(&s, req, &[], 0, &mut out);
    }
    let mut n = 0;
    s.scrape_all(4, |_, st| {
        assert_eq!(st.leechers, 1);
        n += 1
    });
    assert_eq!(n, 4);
}

#[test]
fn offers_go_only_to_peers_whose_connection_takes_them() {
    // Peers 2..=9 on connections 2..=9; connections 3, 5 and 7 have full queues.
    let (s, mut out) = store_of_leechers(2..=9);
    let full = |c: ConnectionId| [3, 5, 7].contains(&c);
    for round in 0..20 {
        offer_from_1(&s, 8, round, &mut out, |c| !full(c));
        assert_eq!(
            out.len(),
            5,
            "one offer for each peer that takes them: {out:?}"
        );
        assert!(out.iter().all(|t| !full(t.conn)), "{out:?}");
    }
    // The full peers were never sent an offer, so they have none to answer.
    assert_eq!(
        answer(&s, 3, 3, 1, &oid(1), 20),
        Err(AnswerRefusal::NoSuchOffer)
    );
    // Nobody takes offers: none goes out, the announce still counts.
    let outcome = offer_from_1(&s, 8, 21, &mut out, |_| false);
    assert!(out.is_empty());
    assert_eq!(outcome.stats.leechers, 9);
}

#[test]
fn only_the_drawn_peers_are_asked_whether_they_take_offers() {
    // A small swarm (shuffled, not sampled): ten peers, two offers an announce.
    let (s, mut out) = store_of_leechers(2..=11);
    let mut reached = std::collections::BTreeSet::new();
    for round in 0..200 {
        let asked = std::cell::Cell::new(0);
        offer_from_1(&s, 2, round, &mut out, |_| {
            asked.set(asked.get() + 1);
            true
        });
        assert_eq!(asked.get(), 2, "one question per offer sent");
        assert_eq!(out.len(), 2);
        assert_ne!(out[0].conn, out[1].conn, "{out:?}");
        reached.extend(out.iter().map(|t| t.conn));
    }
    // Every peer is drawn now and then.
    assert_eq!(reached.len(), 10, "{reached:?}");
    // Those that refuse are asked once and skipped: all but one refuse.
    let asked = std::cell::Cell::new(0);
    offer_from_1(&s, 2, 300, &mut out, |c| {
        asked.set(asked.get() + 1);
        c == 6
    });
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].conn, 6);
    assert!(
        asked.get() <= 10,
        "each peer asked at most once: {}",
        asked.get()
    );
}

#[test]
fn remote_peers_are_counted_but_never_displace_local_ones() {
    const NODE: ConnectionId = REMOTE_CONNECTION | 7;
    let (s, _) = store_with(&[ann(1, 1, Started, false)]);
    // Another node cannot take over a peer a local connection announced.
    s.upsert_remote(&IH, pid(1), NODE, true, 100);
    assert_eq!(s.peer_connection(&IH, &pid(1)), Some(1));
    assert_eq!(s.scrape(&IH), stats(0, 1, 0));
    // A peer of its own is listed and counted, and its seeder flag follows the node's word.
    s.upsert_remote(&IH, pid(2), NODE, true, 100);
    assert_eq!(s.scrape(&IH), stats(1, 1, 0));
    s.upsert_remote(&IH, pid(2), NODE, false, 100);
    assert_eq!(s.scrape(&IH), stats(0, 2, 0));
    // An offer it forwards to a local peer is answerable like a local one; the offerer is
    // listed until then. None is delivered to a peer that is not local.
    let to_local = s.accept_remote_offer(&IH, &pid(1), (&pid(3), NODE), oid(1), 0);
    assert_eq!(to_local, Some(1));
    assert_eq!(answer(&s, 1, 1, 3, &oid(1), 1), Ok(NODE));
    let to_remote = s.accept_remote_offer(&IH, &pid(2), (&pid(3), NODE), oid(2), 0);
    assert_eq!(to_remote, None);
    // Only the node's own peers are unlisted on its word.
    s.remove_remote(&IH, &pid(2));
    s.remove_remote(&IH, &pid(1));
    assert_eq!(s.peer_connection(&IH, &pid(2)), None);
    assert_eq!(s.peer_connection(&IH, &pid(1)), Some(1));
}

/// Offer ids are asked for in order, one per target found: an announce's offers past the
/// targets are never asked for, and one that cannot be read stops the relay there.
#[test]
fn offer_ids_are_asked_for_one_per_target_and_a_bad_one_stops_the_relay() {
    struct Ids {
        asked: Vec<usize>,
        bad: usize,
    }
    impl OfferIds for Ids {
        fn count(&self) -> usize {
            10
        }
        fn id(&mut self, i: usize) -> Option<OfferId> {
            self.asked.push(i);
            (i != self.bad).then(|| oid(i as u8 + 1))
        }
    }
    // Three other peers: three of the ten offers are asked for.
    let (s, mut out) = store_of_leechers(1..=4);
    let mut ids = Ids {
        asked: Vec::new(),
        bad: usize::MAX,
    };
    s.announce_to(&ann(1, 1, Regular, false), &mut ids, 0, &mut out, |_| true);
    assert_eq!((ids.asked, out.len()), (vec![0, 1, 2], 3));
    // The second cannot be read: only the first goes, and only its answer is taken.
    let (s, mut out) = store_of_leechers(1..=4);
    let mut ids = Ids {
        asked: Vec::new(),
        bad: 1,
    };
    s.announce_to(&ann(1, 1, Regular, false), &mut ids, 0, &mut out, |_| true);
    assert_eq!((ids.asked, out.len()), (vec![0, 1], 1));
    let t = out[0];
    let answerer = t.peer_id.0[19];
    assert_eq!(answer(&s, answerer, t.conn, 1, &oid(1), 0), Ok(1));
    for other in (2..=4).filter(|&p| p != answerer) {
        let refused = answer(&s, other, ConnectionId::from(other), 1, &oid(2), 0);
        assert_eq!(refused, Err(AnswerRefusal::NoSuchOffer));
    }
}
