//! Restart: a tracker stopped with SIGTERM and started again serves the same swarms, and a
//! damaged snapshot never keeps it from starting. Runs the real binary.

#![forbid(unsafe_code)]

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{http, Ann, Client, Shoal, Site};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

const TORRENTS: usize = 20;
const PEERS_PER_TORRENT: usize = 5000;

/// Starts `name` on the site: snapshots only at stop, the admin API on a free port.
fn start(site: &Site, name: &str) -> Shoal {
    site.start(name, STATE, ADMIN)
}

/// The `[state]` lines of every process here: snapshots only at stop.
const STATE: &str = "snapshot_interval = 0";

/// The `[admin]` section of every process here: a free port, the token the tests use.
const ADMIN: &str = "listen = [\"127.0.0.1:0\"]\ntoken = \"restart-test\"";

/// The admin listener's address, from the line shoal prints.
fn admin_addr(shoal: &Shoal) -> SocketAddr {
    let line = shoal.wait_for("admin (metrics", Duration::from_secs(5));
    let url = line.split("http://").nth(1).unwrap();
    url.trim_end_matches('/').parse().unwrap()
}

/// Every peer of a torrent as the admin API lists it: (peer id, address, seeder) and
/// seconds left.
fn peers_of(admin: SocketAddr, t: usize) -> (Vec<(String, String, bool)>, Vec<u64>) {
    let (status, body) = http(
        admin,
        "GET",
        &format!("/api/torrents/{}", info_hash(t).to_hex()),
        Some("restart-test"),
    );
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut peers: Vec<_> = v["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                (
                    p["peer_id"].as_str().unwrap().to_string(),
                    p["addr"].as_str().unwrap().to_string(),
                    p["seeder"].as_bool().unwrap(),
                ),
                p["expires_in"].as_u64().unwrap(),
            )
        })
        .collect();
    peers.sort();
    peers.into_iter().unzip()
}

fn info_hash(t: usize) -> InfoHash {
    let mut h = [0xab; 20];
    h[0] = t as u8;
    InfoHash(h)
}

/// Peer `i` of torrent `t`: every fourth one completed (a seeder), the rest leechers. The
/// port tells the peer apart in responses.
fn ann(t: usize, i: usize) -> Ann {
    let mut id = [b'-'; 20];
    id[..8].copy_from_slice(&(t as u32).to_be_bytes().repeat(2));
    id[8..16].copy_from_slice(&(i as u64).to_be_bytes());
    let seeder = i.is_multiple_of(4);
    Ann {
        info_hash: info_hash(t),
        peer_id: PeerId(id),
        port: 1024 + i as u16,
        left: if seeder { 0 } else { 1000 },
        event: if seeder {
            AnnounceEvent::Completed
        } else {
            AnnounceEvent::Started
        },
        numwant: 0,
    }
}

/// Announces `anns` with `in_flight` outstanding, then resends (up to five times, 16 in
/// flight) those that got no answer: loopback may drop a datagram under a burst, and an
/// announce is idempotent apart from `completed`, which only counts a peer's first
/// completion. Returns whether each was answered.
fn announce_resending(c: &mut Client, anns: &[Ann], in_flight: usize) -> Vec<bool> {
    let mut answered = c.announce_all(anns, in_flight);
    for _ in 0..5 {
        let again: Vec<usize> = (0..anns.len()).filter(|&i| !answered[i]).collect();
        if again.is_empty() {
            break;
        }
        let sub: Vec<Ann> = again.iter().map(|&i| anns[i]).collect();
        for (j, ok) in c.announce_all(&sub, 16).into_iter().enumerate() {
            answered[again[j]] = ok;
        }
    }
    answered
}

#[test]
fn peers_and_completed_counts_survive_sigterm_and_restart() {
    let site = Site::new("restart");
    let tracker = site.udp();
    let first = start(&site, "first");

    // 100,000 peers over 20 torrents, four client threads with 128 announces in flight.
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                let mut c = Client::new(tracker);
                c.connect();
                let mut missing = Vec::new();
                for t in (k..TORRENTS).step_by(4) {
                    let anns: Vec<Ann> = (0..PEERS_PER_TORRENT).map(|i| ann(t, i)).collect();
                    let answered = announce_resending(&mut c, &anns, 128);
                    missing.extend(answered.iter().filter(|a| !**a).map(|_| t));
                }
                (c.cid, missing)
            })
        })
        .collect();
    let mut old_cid = None;
    for t in threads {
        let (cid, missing) = t.join().unwrap();
        assert!(
            missing.is_empty(),
            "unanswered announces: {}",
            missing.len()
        );
        old_cid = Some(cid);
    }
    eprintln!("filled 100000 peers in {:?}", started.elapsed());

    let mut client = Client::new(tracker);
    client.connect();
    let hashes: Vec<InfoHash> = (0..TORRENTS).map(info_hash).collect();
    let before = client.scrape(&hashes).unwrap();
    let seeders = PEERS_PER_TORRENT.div_ceil(4) as u32;
    let leechers = PEERS_PER_TORRENT as u32 - seeders;
    assert!(
        before.iter().all(|&s| s == (seeders, seeders, leechers)),
        "{before:?}"
    );

    let admin = admin_addr(&first);
    let listed_before: Vec<_> = (0..TORRENTS).map(|t| peers_of(admin, t)).collect();
    assert_eq!(
        listed_before.iter().map(|p| p.0.len()).sum::<usize>(),
        TORRENTS * PEERS_PER_TORRENT
    );
    let output = first.stop();
    // The whole snapshot written at start was empty: the change sections (the first
    // comes 2 s after the start) and the final one, a section too, hold all of it; the
    // restart below finds every peer.
    let last = output
        .lines()
        .find(|l| l.contains("final snapshot written"))
        .unwrap_or_else(|| panic!("no final snapshot: {output}"));
    assert!(last.contains("peers (a change section"), "{last}");
    let size = std::fs::metadata(&site.state).unwrap().len();
    let log = std::fs::metadata(site.state.with_extension("state.changes"))
        .unwrap()
        .len();
    eprintln!("snapshot: {size} bytes, change log {log} bytes");

    let second = start(&site, "second");
    let line = second.wait_for("restored snapshot", Duration::from_secs(5));
    assert!(line.contains("20 torrents, 100000 peers"), "{line}");

    // The very same peers (id, address, seeder or not), with the lifetime they had left.
    let admin = admin_addr(&second);
    for (t, (before, left_before)) in listed_before.iter().enumerate() {
        let (after, left_after) = peers_of(admin, t);
        assert!(before == &after, "torrent {t}: peers differ after restart");
        for (b, a) in left_before.iter().zip(&left_after) {
            assert!(
                a <= b && b - a <= 10,
                "torrent {t}: {b} s left before, {a} s after"
            );
        }
    }

    // The old connection id is still good: the key came back with the snapshot.
    let mut old = Client::new(tracker);
    old.cid = old_cid.unwrap();
    assert_eq!(
        old.scrape(&hashes).unwrap(),
        before,
        "same figures after restart"
    );

    // A newcomer to each torrent is served the restored peers: all of them, by port, when
    // it pages through with fresh identities (200 per response, random windows).
    for t in [0usize, 7, 19] {
        let expected: HashSet<u16> = (0..PEERS_PER_TORRENT).map(|i| 1024 + i as u16).collect();
        let mut seen = HashSet::new();
        for probe in 0..2000u32 {
            let mut a = ann(t, 100_000 + probe as usize);
            a.numwant = 200;
            a.event = AnnounceEvent::None;
            a.left = 1;
            let (l, s, ports) = old.announce(&a).expect("announce reply");
            assert_eq!(s, seeders);
            assert!(l > leechers, "the probe counts itself");
            for p in ports {
                if p >= 1024 + PEERS_PER_TORRENT as u16 {
                    continue; // an earlier probe
                }
                assert!(expected.contains(&p), "port {p} was never announced");
                seen.insert(p);
            }
            if seen.len() == expected.len() {
                break;
            }
        }
        assert_eq!(
            seen.len(),
            expected.len(),
            "torrent {t}: every peer is served"
        );
    }
    second.stop();
    site.remove();
}

/// [`start`] with the background load held at its gate (`shoal_state::LOAD_GATE_ENV`)
/// until the file `gate` exists: the load is deterministically unfinished until the test
/// creates it.
fn start_gated(site: &Site, name: &str, gate: &std::path::Path) -> Shoal {
    site.start_with_env(
        name,
        STATE,
        ADMIN,
        &[("SHOAL_TEST_LOAD_GATE", gate.as_os_str())],
    )
}

/// Announces every peer of torrents `0..torrents` (`per` each), resending what loopback
/// dropped; panics if any stays unanswered.
fn fill(tracker: SocketAddr, torrents: usize, per: usize) {
    let mut c = Client::new(tracker);
    c.connect();
    for t in 0..torrents {
        let anns: Vec<Ann> = (0..per).map(|i| ann(t, i)).collect();
        let answered = announce_resending(&mut c, &anns, 64);
        assert!(
            answered.iter().all(|a| *a),
            "torrent {t}: unanswered announces"
        );
    }
}

#[test]
fn a_restart_serves_while_the_snapshot_loads_and_merges_it_under_live_peers() {
    const T: usize = 6;
    const PER: usize = 2000;
    let site = Site::new("restart-load");
    let tracker = site.udp();
    let first = start(&site, "first");
    fill(tracker, T, PER);
    let output = first.stop();
    assert!(output.contains("final snapshot written"), "{output}");
    let seeders = PER.div_ceil(4) as u32;
    let leechers = PER as u32 - seeders;

    // The load waits at its gate: whatever is answered now is answered during the load.
    let gate = site.dir.join("gate");
    let second = start_gated(&site, "second", &gate);
    second.wait_for("loading snapshot", Duration::from_secs(5));
    let mut c = Client::new(tracker);
    c.connect();
    // Peer 1 of torrent 0 (a leecher in the file) completes during the load; peer PER of
    // torrent 1 is new.
    let mut done = ann(0, 1);
    (done.left, done.event) = (0, AnnounceEvent::Completed);
    let (l, s, _) = c.announce(&done).expect("answered during the load");
    assert_eq!(
        (l, s),
        (0, 1),
        "only itself: nothing of the file is loaded yet"
    );
    let (l, s, _) = c
        .announce(&ann(1, PER + 1))
        .expect("answered during the load");
    assert_eq!((l, s), (1, 0));
    assert!(!second.output().contains("restored snapshot"));
    let admin = admin_addr(&second);
    let (status, body) = http(admin, "POST", "/api/snapshot", Some("restart-test"));
    assert_ne!(status, 200, "no snapshot while loading: {body}");

    std::fs::write(&gate, b"").unwrap();
    let line = second.wait_for("restored snapshot", Duration::from_secs(60));
    assert!(
        line.contains(&format!("{T} torrents, {} peers", T * PER)),
        "{line}"
    );
    let hashes: Vec<InfoHash> = (0..T).map(info_hash).collect();
    let mut expected = vec![(seeders, seeders, leechers); T];
    // Peer 1 kept its live state (a seeder) and its completion counts on top of the file's.
    expected[0] = (seeders + 1, seeders + 1, leechers - 1);
    expected[1].2 += 1;
    assert_eq!(c.scrape(&hashes).unwrap(), expected);
    for t in 0..T {
        let (peers, _) = peers_of(admin, t);
        let extra = usize::from(t == 1);
        assert_eq!(peers.len(), PER + extra, "torrent {t}: every saved peer");
    }
    let (peers, _) = peers_of(admin, 0);
    let port1 = format!(":{}", 1024 + 1);
    let one: Vec<_> = peers.iter().filter(|p| p.1.ends_with(&port1)).collect();
    assert_eq!(one.len(), 1);
    assert!(
        one[0].2,
        "peer 1 is a seeder, as it announced during the load"
    );

    // SIGTERM during a load: the rest is merged for the torrents announced meanwhile only,
    // and the final change section holds those, so neither the file's peers nor those
    // heard meanwhile are lost.
    second.stop();
    std::fs::remove_file(&gate).unwrap();
    let third = start_gated(&site, "third", &gate);
    third.wait_for("loading snapshot", Duration::from_secs(5));
    let mut newcomer = ann(2, PER + 2);
    newcomer.numwant = 0;
    c.announce(&newcomer).expect("answered during the load");
    let output = third.stop();
    assert!(output.contains("restored snapshot"), "{output}");
    assert!(
        output.contains("stopped before the end: the rest only for torrents announced"),
        "{output}"
    );
    assert!(
        output.contains("final snapshot written to") && output.contains(": 1 torrents, "),
        "{output}"
    );
    let fourth = start(&site, "fourth");
    fourth.wait_for("restored snapshot", Duration::from_secs(60));
    expected[2].2 += 1;
    assert_eq!(c.scrape(&hashes).unwrap(), expected, "nothing lost");
    fourth.stop();
    site.remove();
}

/// A file that starts like a snapshot and is not one.
const DAMAGED: &[u8] = b"SHOALSNP\x01\x00\x00\x00 this is not a snapshot";

#[test]
fn damaged_snapshot_is_logged_moved_aside_and_the_tracker_starts_empty() {
    let site = Site::new("corrupt");
    std::fs::write(&site.state, DAMAGED).unwrap();
    let shoal = start(&site, "corrupt");
    let line = shoal.wait_for("cannot be restored", Duration::from_secs(5));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("moved to"), "{line}");
    let aside: Vec<_> = std::fs::read_dir(&site.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("shoal.state.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(site.dir.join(&aside[0])).unwrap(), DAMAGED);
    // It serves, and it is empty.
    let mut c = Client::new(site.udp());
    c.connect();
    assert_eq!(c.scrape(&[info_hash(0)]).unwrap(), vec![(0, 0, 0)]);
    // Its own snapshot replaced the damaged one.
    shoal.stop();
    let fresh = std::fs::read(&site.state).unwrap();
    assert_eq!(&fresh[..8], b"SHOALSNP");
    site.remove();
}
