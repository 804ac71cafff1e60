//! The accounting rules, named after what each test pins down, and a property test that the
//! ledger's totals equal what a model of real clients reported.

use std::collections::HashMap;

use proptest::prelude::*;
use shoal_proto::{AnnounceEvent, PeerId};

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash};
use shoal_swarm::journal::AnyAddr;
use shoal_swarm::{Announce, Family, Peer, PeerSink, StoreConfig};

use super::credit::{apply_factor, AccountedAnnounce, Delta};
use super::ledger::{Ledger, LedgerConfig, SlotStore};

use AnnounceEvent::{Completed, None as Regular, Started, Stopped};

const MAX_GAP: u32 = 3600;

fn ledger() -> Ledger {
    Ledger::new(LedgerConfig {
        shards: 4,
        max_gap: MAX_GAP,
        peer_ttl: 2 * MAX_GAP,
        max_pending: usize::MAX,
    })
}

fn peer(n: u8) -> PeerId {
    PeerId([n; 20])
}

/// One client (user 1 on torrent 7 unless changed), factors 1.
fn client(peer_n: u8) -> AccountedAnnounce {
    AccountedAnnounce {
        user_id: 1,
        torrent_id: 7,
        peer_id: peer(peer_n),
        uploaded: 0,
        downloaded: 0,
        left: 1000,
        event: Regular,
        now: 0,
        download_factor: 1.0,
        upload_factor: 1.0,
    }
}

/// `base` announcing `event` at `now` with counters (`up`, `down`) and `left`.
fn at(
    base: AccountedAnnounce,
    now: u32,
    event: AnnounceEvent,
    up: u64,
    down: u64,
    left: u64,
) -> AccountedAnnounce {
    AccountedAnnounce {
        now,
        event,
        uploaded: up,
        downloaded: down,
        left,
        ..base
    }
}

/// The one pending delta of user 1 on torrent 7 (an empty one if none).
fn drained_one(ledger: &Ledger) -> Delta {
    let batch = ledger.drain();
    assert!(batch.len() <= 1, "one account expected: {batch:?}");
    batch.first().copied().unwrap_or(Delta::new(1, 7))
}

/// Records each announce in turn and returns the account's drained sum.
fn run(ledger: &Ledger, announces: &[AccountedAnnounce]) -> Delta {
    for a in announces {
        ledger.record(a);
    }
    drained_one(ledger)
}

fn bytes(d: &Delta) -> (u64, u64, u64, u64) {
    (d.uploaded, d.downloaded, d.uploaded_raw, d.downloaded_raw)
}

/// One client's announces, rule by rule: (name, [(peer, time, event, uploaded, downloaded,
/// left)], expected (uploaded, downloaded, seed seconds, leech seconds, snatched)). Factors
/// are 1, so the credited bytes equal the raw ones.
type Session = (
    &'static str,
    &'static [(u8, u32, AnnounceEvent, u64, u64, u64)],
    (u64, u64, u64, u64, bool),
);

const SESSIONS: &[Session] = &[
    (
        "a normal session counts each difference once",
        &[
            (1, 0, Started, 0, 0, 1000),
            (1, 1800, Regular, 100, 400, 600),
            (1, 3600, Completed, 250, 1000, 0),
            (1, 5400, Regular, 900, 1000, 0),
            (1, 6000, Stopped, 1200, 1000, 0),
        ],
        (1200, 1000, 600 + 1800, 1800 + 1800, true),
    ),
    // Only `started` opens a session: lower counters count nothing and the higher values
    // stay the baseline, so the bytes are not credited again when the counters climb back.
    (
        "counters that go down count nothing and are not credited again",
        &[
            (1, 0, Started, 0, 0, 1000),
            (1, 1800, Regular, 100, 500, 500),
            (1, 3600, Regular, 30, 200, 300),
            (1, 5400, Regular, 180, 700, 200),
        ],
        (180, 700, 0, 3 * 1800, false),
    ),
    // What libtorrent does: its `stopped` leaves out the block it was receiving.
    (
        "a stopped reporting a little less than the last announce counts nothing more",
        &[
            (1, 0, Started, 0, 0, 5_000_000),
            (1, 1800, Regular, 0, 4_159_902, 840_098),
            (1, 1900, Stopped, 0, 4_145_152, 854_848),
        ],
        (0, 4_159_902, 0, 1900, false),
    ),
    (
        "started again under the same peer id is a new session, even with higher counters",
        &[
            (1, 0, Started, 0, 0, 1000),
            (1, 1800, Regular, 100, 500, 500),
            (1, 1900, Started, 150, 600, 400),
            (1, 3700, Regular, 170, 700, 300),
        ],
        (270, 1200, 0, 3600, false),
    ),
    (
        "a restart under a new peer id is a new client beginning with started",
        &[
            (1, 0, Started, 0, 0, 1000),
            (1, 1800, Regular, 100, 500, 500),
            (2, 1900, Started, 0, 0, 500),
            (2, 3700, Regular, 40, 400, 100),
        ],
        (140, 900, 0, 1800 + 1800, false),
    ),
    (
        "a repeated started is a retry, not a new session",
        &[
            (1, 0, Started, 10, 50, 1000),
            (1, 60, Started, 30, 90, 900),
            (1, 1860, Regular, 40, 100, 800),
        ],
        (10 + 20 + 10, 100, 0, 1860, false),
    ),
    // Leeching 1000 s, seeding 500 s, silent 10 hours (only the cap counts), then a clock
    // that went back (nothing).
    (
        "seed and leech time follow the previous state and stop at the cap",
        &[
            (1, 100, Started, 0, 0, 1000),
            (1, 1100, Completed, 0, 1000, 0),
            (1, 1600, Regular, 10, 1000, 0),
            (1, 1600 + 36_000, Regular, 20, 1000, 0),
            (1, 1000, Regular, 30, 1000, 0),
        ],
        (30, 1000, 500 + MAX_GAP as u64, 1000, true),
    ),
];

#[test]
fn sessions_are_credited_by_the_rules() {
    for &(name, rows, (up, down, seed, leech, snatched)) in SESSIONS {
        let announces: Vec<_> = rows
            .iter()
            .map(|&(n, now, event, up, down, left)| at(client(n), now, event, up, down, left))
            .collect();
        let d = run(&ledger(), &announces);
        assert_eq!(bytes(&d), (up, down, up, down), "{name}");
        assert_eq!(
            (d.seed_seconds, d.leech_seconds, d.completed),
            (seed, leech, snatched),
            "{name}"
        );
    }
}

#[test]
fn two_clients_of_one_user_on_one_torrent_add_to_one_account() {
    let (a, b) = (client(1), client(2));
    let l = ledger();
    let d = run(
        &l,
        &[
            at(a, 0, Started, 0, 0, 0),
            at(b, 10, Started, 0, 0, 1000),
            at(a, 1800, Regular, 700, 0, 0),
            at(b, 1810, Regular, 5, 300, 700),
            at(b, 3610, Regular, 6, 900, 100),
            at(a, 3600, Regular, 1000, 0, 0),
        ],
    );
    assert_eq!(bytes(&d), (1006, 900, 1006, 900));
    assert_eq!((d.seed_seconds, d.leech_seconds), (3600, 3600));
    assert_eq!(l.peers(), 2);
}

#[test]
fn accounts_of_other_users_and_torrents_stay_apart() {
    let l = ledger();
    let other_user = AccountedAnnounce {
        user_id: 2,
        ..client(1)
    };
    let other_torrent = AccountedAnnounce {
        torrent_id: 8,
        ..client(1)
    };
    for c in [client(1), other_user, other_torrent] {
        l.record(&at(c, 0, Started, 0, 0, 10));
        l.record(&at(c, 10, Regular, c.user_id * 100 + c.torrent_id, 0, 10));
    }
    let mut batch = l.drain();
    batch.sort_by_key(|d| (d.user_id, d.torrent_id));
    let got: Vec<_> = batch
        .iter()
        .map(|d| (d.user_id, d.torrent_id, d.uploaded))
        .collect();
    assert_eq!(got, [(1, 7, 107), (1, 8, 108), (2, 7, 207)]);
}

#[test]
fn freeleech_and_double_upload_apply_per_delta_rounding_down() {
    type Rows = &'static [(u32, AnnounceEvent, u64, u64)];
    let cases: [(f64, f64, Rows, _); 2] = [
        // Freeleech and double upload.
        (
            0.0,
            2.0,
            &[(0, Started, 0, 0), (10, Regular, 300, 5000)],
            (600, 0, 300, 5000),
        ),
        // Per delta: 1 * 1.5 = 1 twice (not 3 * 1.5 = 4); 3 * 0.5 = 1 twice.
        (
            0.5,
            1.5,
            &[(0, Started, 0, 0), (10, Regular, 1, 3), (20, Regular, 2, 6)],
            (2, 2, 2, 6),
        ),
    ];
    for (download_factor, upload_factor, rows, expected) in cases {
        let c = AccountedAnnounce {
            download_factor,
            upload_factor,
            ..client(1)
        };
        let announces: Vec<_> = rows
            .iter()
            .map(|&(now, event, up, down)| at(c, now, event, up, down, 10))
            .collect();
        assert_eq!(bytes(&run(&ledger(), &announces)), expected);
    }
}

#[test]
fn factors_that_make_no_sense_never_wrap_an_account() {
    assert_eq!(apply_factor(u64::MAX, 1.0), u64::MAX);
    assert_eq!(apply_factor(1000, -1.0), 0);
    assert_eq!(apply_factor(1000, f64::NAN), 0);
    assert_eq!(apply_factor(u64::MAX, 3.0), u64::MAX);
    assert_eq!(apply_factor(1001, 0.5), 500);
}

#[test]
fn completed_counts_one_snatch_per_user_and_torrent() {
    let l = ledger();
    let (a, b) = (client(1), client(2));
    let first = l.record(&at(a, 0, Completed, 0, 0, 0));
    assert!(first.delta.completed);
    // Repeated, and from another client of the same user: no second snatch.
    assert!(!l.record(&at(a, 10, Completed, 0, 0, 0)).delta.completed);
    assert!(!l.record(&at(b, 20, Completed, 0, 0, 0)).delta.completed);
    assert!(drained_one(&l).completed);
    assert!(!l.record(&at(a, 10, Completed, 0, 0, 0)).delta.completed);
    assert!(l.drain().is_empty(), "a repeat adds nothing to drain");

    // A snatch the database already holds is not counted again.
    let l = ledger();
    l.remember_snatch(1, 7);
    assert!(!l.record(&at(a, 0, Completed, 0, 0, 0)).delta.completed);
    // Another user on the same torrent still snatches.
    let other = AccountedAnnounce { user_id: 2, ..a };
    assert!(l.record(&at(other, 0, Completed, 0, 0, 0)).delta.completed);
}

#[test]
fn stopped_counts_the_last_delta_and_forgets_the_client() {
    let l = ledger();
    let c = client(1);
    let d = run(
        &l,
        &[
            at(c, 0, Started, 0, 0, 1000),
            at(c, 1800, Regular, 100, 200, 800),
            at(c, 2000, Stopped, 150, 260, 740),
        ],
    );
    assert_eq!(bytes(&d), (150, 260, 150, 260));
    assert_eq!(d.leech_seconds, 2000);
    assert_eq!(l.peers(), 0);
    // Its next session begins with `started`, counters from zero.
    let d = run(
        &l,
        &[
            at(c, 9000, Started, 0, 0, 740),
            at(c, 9100, Regular, 1, 2, 738),
        ],
    );
    assert_eq!(bytes(&d), (1, 2, 1, 2));
    // A stopped from a client never seen counts nothing and leaves nothing behind.
    let l = ledger();
    assert!(l.record(&at(c, 0, Stopped, 500, 500, 0)).delta.is_empty());
    assert_eq!((l.peers(), l.pending_accounts()), (0, 0));
}

#[test]
fn a_client_first_seen_without_started_sets_its_baseline() {
    let l = ledger();
    let c = client(1);
    let first = l.record(&at(c, 0, Regular, 5000, 7000, 0));
    assert!(!first.known);
    assert!(first.delta.is_empty(), "{first:?}");
    assert_eq!(l.pending_accounts(), 0);
    let d = run(&l, &[at(c, 1800, Regular, 5600, 7000, 0)]);
    assert_eq!(bytes(&d), (600, 0, 600, 0));
    assert_eq!(d.seed_seconds, 1800);

    // With `started`, the counters are the new session's: counted from zero.
    let l = ledger();
    let d = run(&l, &[at(c, 0, Started, 16, 32, 0)]);
    assert_eq!(bytes(&d), (16, 32, 16, 32));
}

/// Two nodes of a cluster: what each shares reaches the other before the next announce.
fn exchange(from: &Ledger, to: &Ledger) {
    for shared in from.take_shared() {
        to.adopt(&shared);
    }
}

#[test]
fn a_client_moving_between_nodes_is_credited_once_for_every_byte() {
    let (a, b) = (ledger(), ledger());
    a.share_records();
    b.share_records();
    let c = client(1);
    // started on A, then B, A, B, and stopped on A: the nodes' sums are the session's.
    let steps = [
        (&a, &b, at(c, 0, Started, 0, 0, 1000)),
        (&b, &a, at(c, 1800, Regular, 100, 300, 700)),
        (&a, &b, at(c, 3600, Regular, 250, 900, 100)),
        (&b, &a, at(c, 5400, Completed, 400, 1000, 0)),
        (&a, &b, at(c, 7200, Stopped, 1000, 1000, 0)),
    ];
    for (node, other, announce) in &steps {
        let r = node.record(announce);
        assert!(
            r.known || announce.event == Started,
            "{announce:?} met as a stranger"
        );
        exchange(node, other);
    }
    let mut sum = drained_one(&a);
    sum.merge(&drained_one(&b));
    assert_eq!(bytes(&sum), (1000, 1000, 1000, 1000));
    assert_eq!((sum.leech_seconds, sum.seed_seconds), (5400, 1800));
    assert!(sum.completed);
    // The stop on A ended the client on B too.
    assert_eq!((a.peers(), b.peers()), (0, 0));

    // Without the exchange, the same announces credit B's part twice over (the bug this
    // prevents): B meets the client as a stranger, A compares with its own older record.
    let (a, b) = (ledger(), ledger());
    for (node, _, announce) in &steps {
        node.record(announce);
    }
    let mut sum = drained_one(&a);
    sum.merge(&drained_one(&b));
    assert_ne!(bytes(&sum), (1000, 1000, 1000, 1000));
}

#[test]
fn an_older_shared_record_never_replaces_a_newer_one() {
    let (a, b) = (ledger(), ledger());
    a.share_records();
    let c = client(1);
    a.record(&at(c, 0, Started, 0, 0, 1000));
    let old = a.take_shared();
    b.record(&at(c, 0, Started, 0, 0, 1000));
    b.record(&at(c, 100, Regular, 50, 50, 950));
    drained_one(&b);
    // A's record of time 0 arrives late at B: B keeps its own of time 100.
    assert!(!b.adopt(&old[0]));
    let d = run(&b, &[at(c, 200, Regular, 80, 60, 940)]);
    assert_eq!(bytes(&d), (30, 10, 30, 10));
    // Nothing is shared unless asked, and an ended record of an older time ends nothing.
    assert!(b.take_shared().is_empty());
    let mut ended = old[0];
    ended.ended = true;
    assert!(!b.adopt(&ended));
    assert_eq!(b.peers(), 1);

    // Within a second of each other the two nodes' clocks cannot order records: the one
    // with the higher counters is the later (B's record is now at time 200, (80, 60)).
    let mut next = old[0];
    next.record.seen = 199;
    next.record.uploaded = 90;
    next.record.downloaded = 60;
    assert!(b.adopt(&next), "higher counters a second 'earlier'");
    next.record.seen = 200;
    next.record.uploaded = 85;
    assert!(!b.adopt(&next), "lower counters in the same second");
    next.record.seen = 202;
    assert!(b.adopt(&next), "two seconds later, whatever the counters");
}

#[test]
fn drain_empties_and_restore_loses_nothing() {
    let l = ledger();
    let c = client(1);
    l.record(&at(c, 0, Started, 0, 0, 1000));
    l.record(&at(c, 100, Completed, 10, 1000, 0));
    let failed = l.drain();
    assert_eq!(failed.len(), 1);
    assert!(l.drain().is_empty(), "drain leaves nothing pending");
    // More arrives while the write fails; the batch comes back and merges with it.
    l.record(&at(c, 200, Regular, 15, 1000, 0));
    l.restore(failed);
    assert_eq!(
        l.pending_accounts(),
        2,
        "the client's new sums, and the batch put back"
    );
    let d = drained_one(&l);
    assert_eq!(bytes(&d), (15, 1000, 15, 1000));
    assert_eq!((d.leech_seconds, d.seed_seconds), (100, 100));
    assert!(d.completed);
    // Restoring into an empty ledger recreates the accounts.
    let l2 = ledger();
    l2.restore(vec![d]);
    assert_eq!(l2.drain(), vec![d]);
}

#[test]
fn expire_forgets_silent_clients_only() {
    let l = ledger();
    let (a, b) = (client(1), client(2));
    l.record(&at(a, 0, Started, 0, 0, 10));
    l.record(&at(b, 5000, Started, 0, 0, 10));
    assert_eq!(l.expire(2 * MAX_GAP), 0);
    assert_eq!(l.expire(2 * MAX_GAP + 1), 1);
    assert_eq!(l.peers(), 1);
    // The expired client, back: its counters are a new baseline.
    assert_eq!(
        l.record(&at(a, 9000, Regular, 100, 100, 10)).delta.uploaded,
        0
    );
}

#[test]
fn recording_from_many_threads_adds_up() {
    let l = ledger();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let l = &l;
            s.spawn(move || {
                let c = client(t);
                l.record(&at(c, 0, Started, 0, 0, 10));
                for i in 1..=1000u64 {
                    l.record(&at(c, i as u32, Regular, i, 2 * i, 10));
                }
            });
        }
    });
    let d = drained_one(&l);
    assert_eq!(bytes(&d), (4000, 8000, 4000, 8000));
    assert_eq!(d.leech_seconds, 4000);
}

/// A step of the model: what one of the simulated clients does next.
#[derive(Clone, Debug)]
enum Step {
    /// The client moves bytes (not yet reported).
    Transfer { up: u64, down: u64 },
    /// The client announces: `started` if its session is not open, else a regular or
    /// `completed` announce; `seeding` sets `left`.
    Announce { completed: bool, seeding: bool },
    /// The client sends `stopped` and pauses (its counters start over).
    Stop,
    /// The client crashes and restarts (its counters start over; it says `started` again,
    /// as every real client does).
    Crash,
    /// The clock moves on.
    Tick(u32),
    /// The database writer drains the ledger; `fails`: the write fails and is restored.
    Drain { fails: bool },
    /// The store's housekeeping ([`slot_housekeep`]; only in the slot test).
    Housekeep,
}

fn step() -> impl Strategy<Value = (usize, Step)> {
    let step = prop_oneof![
        3 => (0u64..5000, 0u64..5000).prop_map(|(up, down)| Step::Transfer { up, down }),
        4 => (any::<bool>(), any::<bool>())
            .prop_map(|(completed, seeding)| Step::Announce { completed, seeding }),
        1 => Just(Step::Stop),
        1 => Just(Step::Crash),
        2 => (0u32..250).prop_map(Step::Tick),
        1 => any::<bool>().prop_map(|fails| Step::Drain { fails }),
    ];
    (0usize..CLIENTS.len(), step)
}

/// (user, torrent, peer): users 1 and 2, torrents 7 and 8, user 1 with two clients on 7.
const CLIENTS: [(u64, u64, u8); 4] = [(1, 7, 1), (1, 7, 2), (1, 8, 3), (2, 7, 4)];

/// What a simulated client has done, as the client itself knows it.
#[derive(Clone, Copy, Default)]
struct Model {
    up: u64,
    down: u64,
    /// The session is open (its `started` was sent).
    open: bool,
    /// (time, seeding, counters) at its last announce in this session.
    last: Option<(u32, bool, u64, u64)>,
    /// Its last announce was its `started`.
    just_started: bool,
}

/// Adds a written batch to what the database holds.
fn write(batch: Vec<Delta>, into: &mut HashMap<(u64, u64), Delta>) {
    for d in batch {
        into.entry((d.user_id, d.torrent_id))
            .or_insert(Delta::new(d.user_id, d.torrent_id))
            .merge(&d);
    }
}

/// Integer factors (exact), per account: (download, upload).
fn factors(user: u64, torrent: u64) -> (f64, f64) {
    match (user, torrent) {
        (1, 7) => (1.0, 1.0),
        (1, 8) => (0.0, 2.0),
        _ => (2.0, 0.0),
    }
}

/// Sums per (user, torrent).
type Accounts = HashMap<(u64, u64), Delta>;

/// What the database holds after `steps` (and a last drain), and what the clients reported:
/// each announce is handed to `send` (the client's index, the step's route, the announce),
/// and `Step::Housekeep` to `housekeep` (the route, the clock) between announces.
fn simulate(
    l: &Ledger,
    steps: Vec<(usize, usize, Step)>,
    mut send: impl FnMut(usize, usize, &AccountedAnnounce),
    mut housekeep: impl FnMut(usize, u32),
) -> (Accounts, Accounts) {
    const GAP: u32 = 100;
    assert_eq!(l.config().max_gap, GAP);
    let mut models = [Model::default(); CLIENTS.len()];
    let mut expected: HashMap<(u64, u64), Delta> = HashMap::new();
    let mut written: HashMap<(u64, u64), Delta> = HashMap::new();
    let mut now = 0u32;
    for (i, route, step) in steps {
        let (user, torrent, peer_n) = CLIENTS[i];
        let m = &mut models[i];
        let (download_factor, upload_factor) = factors(user, torrent);
        let announce = |m: &Model, event, seeding: bool, now| AccountedAnnounce {
            user_id: user,
            torrent_id: torrent,
            peer_id: peer(peer_n),
            uploaded: m.up,
            downloaded: m.down,
            left: if seeding { 0 } else { 1 },
            event,
            now,
            download_factor,
            upload_factor,
        };
        // What the client reported since its last announce of this session, and the
        // time since then, as the client sees it.
        let mut report = |m: &Model, completed: bool| {
            let e = expected
                .entry((user, torrent))
                .or_insert(Delta::new(user, torrent));
            let (up, down) = match m.last {
                // A counter reported lower than last time counts nothing.
                Some((_, _, up, down)) => (m.up.saturating_sub(up), m.down.saturating_sub(down)),
                None => (m.up, m.down),
            };
            e.uploaded_raw += up;
            e.downloaded_raw += down;
            e.uploaded += up * upload_factor as u64;
            e.downloaded += down * download_factor as u64;
            if let Some((then, seeding, _, _)) = m.last {
                let secs = u64::from((now - then).min(GAP));
                if seeding {
                    e.seed_seconds += secs
                } else {
                    e.leech_seconds += secs
                }
            }
            // The account's first `completed` is its snatch, dated by that announce.
            if completed && !e.completed {
                e.completed = true;
                e.completed_at = Some(now);
            }
        };
        match step {
            Step::Transfer { up, down } => {
                m.up += up;
                m.down += down;
            }
            Step::Announce { completed, seeding } => {
                let event = if !m.open {
                    Started
                } else if completed {
                    Completed
                } else {
                    Regular
                };
                report(m, event == Completed);
                send(i, route, &announce(m, event, seeding, now));
                m.just_started = !m.open;
                m.open = true;
                m.last = Some((now, seeding, m.up, m.down));
            }
            // Like libtorrent, `stopped` may report a little less than was moved (the
            // block being received is left out): that part is never credited.
            Step::Stop if m.open => {
                let seeding = m.last.is_some_and(|(_, s, _, _)| s);
                m.down = m.down.saturating_sub(100);
                report(m, false);
                send(i, route, &announce(m, Stopped, seeding, now));
                *m = Model::default();
            }
            // A crash right after `started` looks like a retry of it (see the rules);
            // real clients do not restart within one announce, so the model does not.
            Step::Crash if m.open && !m.just_started => {
                *m = Model::default();
            }
            Step::Stop | Step::Crash => {}
            Step::Tick(secs) => now += secs,
            Step::Drain { fails } => {
                let pending = l.pending_accounts();
                let batch = l.drain();
                // Every sum the drain takes was counted as pending, wherever it waited (in
                // the map, in a slot, put back after a failed write); one count per client,
                // so two clients of one account count twice for one sum.
                assert!(
                    pending >= batch.len(),
                    "{pending} pending, {batch:?} drained"
                );
                assert_eq!(
                    pending == 0,
                    batch.is_empty(),
                    "{pending} pending, {batch:?}"
                );
                assert_eq!(l.pending_accounts(), 0, "pending after a drain");
                if fails {
                    l.restore(batch);
                } else {
                    write(batch, &mut written);
                }
            }
            Step::Housekeep => housekeep(route, now),
        }
    }
    write(l.drain(), &mut written);
    expected.retain(|_, d| !d.is_empty());
    (written, expected)
}

/// A ledger for [`simulate`].
fn simulated_ledger() -> Ledger {
    Ledger::new(LedgerConfig {
        shards: 2,
        max_gap: 100,
        peer_ttl: u32::MAX,
        max_pending: usize::MAX,
    })
}

/// Announce `a` through `store` from `addr`.
fn announce_from<A: Family>(l: &Ledger, store: &SlotStore, addr: A, a: &AccountedAnnounce)
where
    Vec<A>: PeerSink<A>,
{
    let req = Announce {
        info_hash: InfoHash([a.torrent_id as u8; 20]),
        peer_id: a.peer_id,
        addr,
        event: a.event,
        left: a.left,
        numwant: 10,
    };
    l.announce(store, &req, a.now, &mut Vec::<A>::new(), a);
}

/// The ways a client's announce reaches the ledger through a slot store ([`ROUTES`]).
fn slot_announce(
    l: &Ledger,
    store: &SlotStore,
    client: usize,
    route: usize,
    a: &AccountedAnnounce,
) {
    let n = client as u8 + 1;
    let v4 = |ip: [u8; 4], port| CompactPeerV4::new(Ipv4Addr::from(ip), port);
    match route {
        0 => announce_from(l, store, v4([10, 0, 0, n], 1000), a),
        // The same client on a new port.
        1 => announce_from(l, store, v4([10, 0, 0, n], 2000), a),
        // Its IPv6 address (dual stack).
        2 => {
            let ip = Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, u16::from(n)]);
            announce_from(l, store, CompactPeerV6::new(ip, 1000), a);
        }
        // One address every client shares (behind one NAT, one port): each takes the
        // slot over from the last.
        3 => announce_from(l, store, v4([10, 9, 9, 9], 9999), a),
        // WebTorrent: no slot, the map.
        _ => {
            l.record(a);
        }
    }
}

/// Routes of [`slot_announce`].
const ROUTES: usize = 5;

/// Housekeeping of a slot store: route 0 expires every slot silent for 50 s (their records
/// go back to the ledger); route 1 has another node's peer take the shared address's slot
/// over; others take the IPv4 slots of client 0 out, as another node's removal would.
fn slot_housekeep(l: &Ledger, store: &SlotStore, route: usize, now: u32) {
    let shared = CompactPeerV4::new(Ipv4Addr::new(10, 9, 9, 9), 9999);
    match route {
        0 => {
            store.clean_with(now + 50, |h, id, addr, x| l.parker(h, addr)(id, x));
        }
        1 => {
            for t in [7u8, 8] {
                let h = InfoHash([t; 20]);
                let peer = Peer {
                    peer_id: PeerId([0xee; 20]),
                    addr: shared,
                    expires: now + 1000,
                    seeder: false,
                };
                store.upsert_remote_with(&h, peer, l.parker(&h, AnyAddr::V4(shared)));
            }
        }
        _ => {
            for t in [7u8, 8] {
                let h = InfoHash([t; 20]);
                for port in [1000, 2000] {
                    let addr = CompactPeerV4::new(Ipv4Addr::new(10, 0, 0, 1), port);
                    store.remove_remote_with(&h, addr, l.parker(&h, AnyAddr::V4(addr)));
                }
            }
        }
    }
}

#[test]
fn pending_sums_are_counted_in_slots_and_in_the_map() {
    let l = ledger();
    let store = Arc::new(SlotStore::with_extension(StoreConfig::default()));
    l.attach(store.clone());
    let (a, b) = (client(1), client(2));
    let b = AccountedAnnounce { user_id: 2, ..b };
    // A announces from its swarm slot: its sums wait there.
    let v4 = CompactPeerV4::new(Ipv4Addr::new(10, 0, 0, 1), 1000);
    announce_from(&l, &store, v4, &at(a, 0, Started, 0, 0, 1000));
    assert_eq!(l.pending_accounts(), 0, "a baseline is no sum");
    announce_from(&l, &store, v4, &at(a, 100, Regular, 10, 20, 980));
    assert_eq!((l.pending_in_map(), l.pending_in_slots()), (0, 1));
    // B announces over WebTorrent: its sums wait in the map.
    l.record(&at(b, 0, Started, 0, 0, 1000));
    l.record(&at(b, 100, Regular, 5, 5, 995));
    assert_eq!((l.pending_in_map(), l.pending_in_slots()), (1, 1));
    assert_eq!(l.pending_accounts(), 2);
    // A's next announce adds to the same sums: still one.
    announce_from(&l, &store, v4, &at(a, 200, Regular, 30, 40, 960));
    assert_eq!(l.pending_accounts(), 2);
    let batch = l.drain();
    assert_eq!(batch.len(), 2);
    assert_eq!(l.pending_accounts(), 0);
    // A failed write puts the batch back into the map, where it is counted as well; the
    // slot's new sums beside it.
    announce_from(&l, &store, v4, &at(a, 300, Regular, 31, 40, 960));
    l.restore(batch);
    assert_eq!((l.pending_in_map(), l.pending_in_slots()), (2, 1));
    assert_eq!(l.drain().len(), 2);
    assert_eq!(l.pending_accounts(), 0);
}

proptest! {
    /// The ledger's totals, over any sequence of client behaviour and failed writes, equal
    /// the sums of what the clients reported in each session, computed from the clients'
    /// side (not from the ledger's rules).
    #[test]
    fn totals_equal_what_the_clients_reported(steps in prop::collection::vec(step(), 0..200)) {
        let l = simulated_ledger();
        let steps = steps.into_iter().map(|(i, s)| (i, 0, s)).collect();
        let (written, expected) = simulate(&l, steps, |_, _, a| {
            l.record(a);
        }, |_, _| ());
        prop_assert_eq!(written, expected);
    }

    /// The same with records in swarm slots: each announce through one of five routes (two
    /// ports, IPv6, an address every client shares, WebTorrent's map), with slots expiring
    /// and taken over by other nodes between them. However often a record moves between
    /// slots and the map, every byte a client reported is counted once.
    #[test]
    fn totals_equal_what_the_clients_reported_through_slots(
        steps in prop::collection::vec((step(), 0..ROUTES), 0..300),
        housekeeping in prop::collection::vec(0usize..3, 0..40),
    ) {
        let l = simulated_ledger();
        let store = Arc::new(SlotStore::with_extension(StoreConfig {
            peer_ttl: 60,
            ..StoreConfig::default()
        }));
        l.attach(store.clone());
        let mut chores = housekeeping.into_iter();
        let steps = steps
            .into_iter()
            .map(|((i, step), route)| match step {
                // Every drain step also does a chore (while there are some left).
                Step::Drain { .. } => match chores.next() {
                    Some(chore) => (i, chore, Step::Housekeep),
                    None => (i, route, step),
                },
                step => (i, route, step),
            })
            .collect();
        let (written, expected) = simulate(
            &l,
            steps,
            |client, route, a| slot_announce(&l, &store, client, route, a),
            |route, now| slot_housekeep(&l, &store, route, now),
        );
        prop_assert_eq!(written, expected);
    }
}
