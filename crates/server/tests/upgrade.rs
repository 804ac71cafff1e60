//! Upgrade without downtime: under continuous UDP load, a second shoal starts on the same
//! ports (`SO_REUSEPORT`), the first is stopped with SIGTERM, and the second merges its
//! final snapshot. Counts lost responses and checks that no peer is lost. Runs the binary.

#![forbid(unsafe_code)]

mod common;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Ann, Client, Shoal, Site};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

const CLIENTS: usize = 4;
const LOAD: Duration = Duration::from_secs(5);

/// Starts `name` on the site: a snapshot every second, hand-over, no admin listener.
fn start(site: &Site, name: &str) -> Shoal {
    site.start(
        name,
        "snapshot_interval = 1\nhandover_timeout = 30",
        "listen = []",
    )
}

fn info_hash(k: usize) -> InfoHash {
    InfoHash([0x40 + k as u8; 20])
}

#[test]
fn second_process_takes_over_without_losing_responses_or_peers() {
    let site = Site::new("upgrade");
    let tracker = site.udp();
    let old = start(&site, "old");
    // The old process has persisted its key (written at start).
    old.wait_for("listening on", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));

    // Phase: 0 = old alone, 1 = both, 2 = new alone (for the report).
    let phase = Arc::new(AtomicU8::new(0));
    let load: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let phase = phase.clone();
            std::thread::spawn(move || {
                let mut c = Client::new(tracker);
                c.connect();
                let started = Instant::now();
                let (mut sent, mut answered, mut lost) = (0u64, 0u64, [0u64; 3]);
                // A peer is its address (IP and port): these ports are the distinct peers
                // acknowledged, and those whose reply was lost (recorded or not).
                let mut acknowledged = std::collections::HashSet::new();
                let mut unanswered = std::collections::HashSet::new();
                let mut seq = 0u64;
                // Bounded by time and by count.
                while started.elapsed() < LOAD && seq < 5_000_000 {
                    // A batch of 16 new peers, each announced once.
                    let anns: Vec<Ann> = (0..16)
                        .map(|_| {
                            seq += 1;
                            let mut id = [k as u8; 20];
                            id[12..].copy_from_slice(&seq.to_be_bytes());
                            Ann {
                                info_hash: info_hash(k),
                                peer_id: PeerId(id),
                                port: (seq % 60_000) as u16 + 1,
                                left: 1,
                                event: AnnounceEvent::Started,
                                numwant: 5,
                            }
                        })
                        .collect();
                    let p = phase.load(Ordering::Relaxed) as usize;
                    let got = c.announce_all(&anns, 16);
                    sent += got.len() as u64;
                    let ok = got.iter().filter(|a| **a).count() as u64;
                    answered += ok;
                    lost[p] += got.len() as u64 - ok;
                    for (a, &answered) in anns.iter().zip(&got) {
                        if answered {
                            acknowledged.insert(a.port);
                        } else {
                            unanswered.insert(a.port);
                        }
                    }
                }
                (sent, answered, lost, acknowledged, unanswered)
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(1500));
    let new = start(&site, "new");
    new.wait_for("waiting for its final snapshot", Duration::from_secs(5));
    phase.store(1, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1500));
    let stop_started = Instant::now();
    phase.store(2, Ordering::Relaxed);
    let old_output = old.stop();
    let stop_took = stop_started.elapsed();
    let merged = new.wait_for("merged the final snapshot", Duration::from_secs(10));

    let mut totals = (0u64, 0u64, [0u64; 3]);
    let mut acknowledged = Vec::new();
    let mut unanswered = Vec::new();
    for t in load {
        let (sent, answered, lost, ack, maybe) = t.join().unwrap();
        unanswered.push(maybe);
        totals.0 += sent;
        totals.1 += answered;
        for (total, l) in totals.2.iter_mut().zip(lost) {
            *total += l;
        }
        acknowledged.push(ack);
    }
    eprintln!(
        "upgrade: {} announces sent in {:?}, {} answered, lost: {} with the old process \
         alone, {} with both, {} from SIGTERM on; old process stopped in {:?}",
        totals.0, LOAD, totals.1, totals.2[0], totals.2[1], totals.2[2], stop_took
    );
    eprintln!(
        "old: {}",
        old_output
            .lines()
            .filter(|l| l.contains("final snapshot"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    eprintln!("new: {merged}");

    // No peer lost: every acknowledged peer is in the new process's store. (An announce
    // whose reply was lost may or may not have been recorded, so allow for those.)
    let mut c = Client::new(tracker);
    c.connect();
    let hashes: Vec<InfoHash> = (0..CLIENTS).map(info_hash).collect();
    let stats = c.scrape(&hashes).unwrap();
    for (k, &(seeders, _, leechers)) in stats.iter().enumerate() {
        assert_eq!(seeders, 0);
        let acked = acknowledged[k].len();
        assert!(
            leechers as usize >= acked,
            "torrent {k}: {leechers} peers in the store, {acked} acknowledged"
        );
        assert!(leechers as usize <= acknowledged[k].union(&unanswered[k]).count());
    }
    eprintln!(
        "peers acknowledged: {}, peers in the new process: {}",
        acknowledged.iter().map(|a| a.len()).sum::<usize>(),
        stats.iter().map(|s| u64::from(s.2)).sum::<u64>()
    );
    // Loopback does not drop datagrams at this rate, and on SIGTERM the old process
    // connects its sockets (bound to 127.0.0.1 here) so that the kernel sends every new
    // datagram to the new process while the old one drains its queues: nothing may be
    // lost. One window of slack for a scheduling stall past the client's 500 ms timeout on
    // a loaded machine.
    let lost_total: u64 = totals.2.iter().sum();
    assert!(
        lost_total <= 16,
        "lost {:?} (old alone, both, from SIGTERM on)",
        totals.2
    );
    new.stop();
    site.remove();
}
