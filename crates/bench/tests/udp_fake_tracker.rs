//! The UDP generator against tiny in-test trackers whose behaviour is known exactly: one
//! answers every request after a fixed delay (the reported latency must match it), one
//! answers with a known mix of broken responses (each must be counted as an error of the
//! right kind, and only the good ones as responses). Each also records the passkey (and the
//! whole path) every peer's announces carried as BEP 41 URL data, for the load of a private
//! tracker.

#![forbid(unsafe_code)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use common::{PasskeysFile, KEYS};
use shoal_bench::udp::{run, UdpArgs};
use shoal_proto::udp::{
    url_data, url_data_path, AnnounceHeader, ConnectionId, Request, Response, ScrapeStats,
    ANNOUNCE_REQUEST_LEN, URL_PATH_BUFFER,
};
use shoal_proto::{AnnounceEvent, CompactPeerV4};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: UdpArgs,
}

#[derive(Default, Debug, Clone)]
struct Sent {
    connects: u64,
    good: u64,
    wrong_action: u64,
    too_many_peers: u64,
    truncated: u64,
    wrong_tid: u64,
    error: u64,
    scrapes: u64,
    /// The passkeys (BEP 41 URL data) each peer id's announces carried.
    passkeys: BTreeMap<[u8; 20], BTreeSet<Option<String>>>,
    /// The whole URL data (the path) each peer id's announces carried, when any.
    paths: BTreeMap<[u8; 20], BTreeSet<String>>,
    /// `started` announces per peer id, and the info hashes they named.
    started: BTreeMap<[u8; 20], u32>,
    started_hashes: BTreeSet<[u8; 20]>,
}

/// The passkey in the BEP 41 URL data after an announce (`packet` is the whole datagram).
fn passkey_of(packet: &[u8]) -> Option<String> {
    let mut url = [0u8; URL_PATH_BUFFER];
    let path = url_data_path(packet.get(ANNOUNCE_REQUEST_LEN..)?, &mut url)?.ok()?;
    path.passkey.map(String::from)
}

/// Builds the answer to `req`: a correct one, or for `bad` one of the broken kinds.
fn answer(req: &Request<'_>, mode: u64, out: &mut [u8], sent: &mut Sent) -> Option<usize> {
    let peers = [CompactPeerV4([127, 0, 0, 9, 0, 80]); 3];
    match req {
        Request::Connect(c) => {
            sent.connects += 1;
            Response::Connect {
                transaction_id: c.transaction_id,
                connection_id: ConnectionId(42),
            }
            .write(out)
        }
        Request::Announce(a) => {
            let header = AnnounceHeader {
                transaction_id: a.transaction_id,
                interval: 1800,
                leechers: 1,
                seeders: 2,
            };
            match mode {
                0 => {
                    sent.good += 1;
                    let n = (a.numwant.max(0) as usize).min(peers.len());
                    Response::AnnounceV4 {
                        header,
                        peers: &peers[..n],
                    }
                    .write(out)
                }
                1 => {
                    sent.wrong_action += 1;
                    Response::Scrape {
                        transaction_id: a.transaction_id,
                        stats: &[],
                    }
                    .write(out)
                }
                2 => {
                    sent.too_many_peers += 1;
                    // numwant is 2 in that test: three peers is one too many.
                    Response::AnnounceV4 {
                        header,
                        peers: &peers,
                    }
                    .write(out)
                }
                3 => {
                    sent.truncated += 1;
                    let n = Response::AnnounceV4 { header, peers: &[] }.write(out)?;
                    Some(n - 3)
                }
                4 => {
                    sent.wrong_tid += 1;
                    let mut h = header;
                    h.transaction_id.0 ^= 0x8000_0000;
                    Response::AnnounceV4 {
                        header: h,
                        peers: &[],
                    }
                    .write(out)
                }
                _ => {
                    sent.error += 1;
                    Response::Error {
                        transaction_id: a.transaction_id,
                        message: b"connection id expired",
                    }
                    .write(out)
                }
            }
        }
        Request::Scrape(s) => {
            sent.good += 1;
            sent.scrapes += 1;
            let stats = vec![ScrapeStats::new(1, 2, 3); s.info_hashes.len()];
            Response::Scrape {
                transaction_id: s.transaction_id,
                stats: &stats,
            }
            .write(out)
        }
    }
}

/// A tracker on 127.0.0.1:0 that answers each request `delay` after it arrived, cycling
/// announce answers through `modes`. Returns its address, a stop flag and its counts.
fn fake_tracker(
    delay: Duration,
    modes: &'static [u64],
) -> (std::net::SocketAddr, Arc<AtomicBool>, Arc<Mutex<Sent>>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Mutex::new(Sent::default()));
    let (stop2, sent2) = (stop.clone(), sent.clone());
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut out = [0u8; 2048];
        let mut announces = 0usize;
        // Bounded: the test stops it, and it gives up by itself after 60 s.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let arrived = Instant::now();
            let Ok(req) = Request::parse(&buf[..n]) else {
                continue;
            };
            let mode = if matches!(req, Request::Announce(_)) {
                announces += 1;
                modes[(announces - 1) % modes.len()]
            } else {
                0
            };
            let mut s = sent2.lock().unwrap().clone();
            if let Request::Announce(a) = &req {
                if a.event == AnnounceEvent::Started {
                    *s.started.entry(a.peer_id.0).or_default() += 1;
                    s.started_hashes.insert(a.info_hash.0);
                }
                let key = passkey_of(&buf[..n]);
                s.passkeys.entry(a.peer_id.0).or_default().insert(key);
                let mut path = [0u8; 512];
                let n = url_data(&buf[ANNOUNCE_REQUEST_LEN.min(n)..n], &mut path);
                if n > 0 {
                    let path = String::from_utf8_lossy(&path[..n]).into_owned();
                    s.paths.entry(a.peer_id.0).or_default().insert(path);
                }
            }
            let Some(len) = answer(&req, mode, &mut out, &mut s) else {
                continue;
            };
            let due = arrived + delay;
            // Sleep most of the way, then spin: thread wake-ups are too coarse for 10%.
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                thread::sleep(d.saturating_sub(Duration::from_micros(300)));
            }
            while Instant::now() < due {
                std::hint::spin_loop();
            }
            let _ = sock.send_to(&out[..len], from);
            *sent2.lock().unwrap() = s;
        }
    });
    (addr, stop, sent)
}

/// One worker, no warm-up, against `target` for `duration`, then the flags in `extra`
/// (separated by spaces).
fn args(target: &str, duration: &str, extra: &str) -> UdpArgs {
    let mut v = vec!["t", "--quiet", "--warmup", "0s", "--workers", "1"];
    v.extend_from_slice(&["--target", target, "--duration", duration]);
    v.extend(extra.split_whitespace());
    Cli::parse_from(v).args
}

/// One test of this file at a time: a run measures its process's CPU (the generator's
/// verdict), and the tests' fake trackers and generators beside it in the same process
/// would count in it.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn reported_p50_matches_a_known_delay() {
    let _serial = serial();
    // 10 ms: long enough that a loaded machine's wake-up latency (a few hundred µs, seen
    // on CI's VM) stays well inside the 10% asked; the measurement itself is what is tested.
    let delay = Duration::from_millis(10);
    let (addr, stop, sent) = fake_tracker(delay, &[0]);
    let target = addr.to_string();
    let a = args(&target, "3s", "--concurrency 1 --weight-scrape 1");
    let r = run(&a).expect("run against the fake tracker");
    stop.store(true, Ordering::Relaxed);
    let s = &r.summary;
    let p50 = s.ops["announce"].p50;
    assert!(
        (p50 - 10_000.0).abs() <= 1_000.0,
        "announce p50 {p50}µs, expected 10,000µs ± 10%"
    );
    assert!(
        (s.ops["scrape"].p50 - 10_000.0).abs() <= 1_000.0,
        "{:?}",
        s.ops
    );
    assert!(
        s.ops["announce"].min >= 10_000.0,
        "answers cannot beat the delay"
    );
    // One request at a time for 3 s at ~10 ms each: about 300 responses.
    assert!(s.responses > 200, "{}", s.responses);
    assert_eq!(s.total_errors(), 0, "{:?}", s.errors);
    // Our count of responses equals what the tracker sent, but for the one in flight.
    thread::sleep(Duration::from_millis(50));
    let sent = sent.lock().unwrap().clone();
    let tracker_total = sent.connects + sent.good;
    assert!(
        tracker_total.abs_diff(s.responses) <= 1 + tracker_total / 100,
        "tracker sent {tracker_total}, bench counted {}",
        s.responses
    );
}

#[test]
fn invalid_responses_are_counted_as_errors() {
    let _serial = serial();
    // good, wrong action, too many peers, truncated, wrong transaction id, error response.
    static MODES: [u64; 6] = [0, 1, 2, 3, 4, 5];
    let (addr, stop, sent) = fake_tracker(Duration::ZERO, &MODES);
    let target = addr.to_string();
    let flags = "--concurrency 1 --timeout 20ms --weight-scrape 0 --numwant 2";
    let a = args(&target, "1s", flags);
    let r = run(&a).expect("run against the broken tracker");
    stop.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(50));
    let sent = sent.lock().unwrap().clone();
    let s = &r.summary;
    let e = |k: &str| s.errors[k];
    let close = |a: u64, b: u64| a.abs_diff(b) <= 1;
    assert!(sent.good >= 5, "{sent:?}");
    assert!(
        close(s.ops["announce"].responses, sent.good),
        "{sent:?} {s:?}"
    );
    // Each broken answer counted as an error of its kind. A wrong transaction id leaves
    // the real request unanswered: it also times out.
    let kinds = [
        (
            "invalid_response",
            sent.wrong_action + sent.too_many_peers + sent.truncated,
        ),
        ("unknown_transaction", sent.wrong_tid),
        ("error_response", sent.error),
        ("timeout", sent.wrong_tid),
    ];
    for (kind, expected) in kinds {
        assert!(close(e(kind), expected), "{kind}: {sent:?} {:?}", s.errors);
    }
    // After each error response the client fetched a new connection id: one connect at
    // the start and one after every error but perhaps the last (the run may end between
    // that error and its reconnect; CI once stopped there, with 44 of each).
    assert!(sent.error >= 2 && sent.connects >= sent.error, "{sent:?}");
}

#[test]
fn a_silent_target_is_a_clear_error() {
    let _serial = serial();
    // A bound socket that never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = silent.local_addr().unwrap().to_string();
    let a = args(&target, "10s", "--timeout 200ms");
    let t = Instant::now();
    let err = run(&a).expect_err("nothing answers");
    assert!(t.elapsed() < Duration::from_secs(5), "gave up late");
    let msg = format!("{err:#}");
    assert!(msg.contains("no valid response"), "{msg}");
    assert!(msg.contains("timeout"), "{msg}");
}

/// A run of 1 s, 4 requests at a time from 30 peers, with a passkeys file that holds `text`,
/// then `flags`, against a tracker that answers at once; what the tracker was sent, once
/// the run counted no error and every peer announced.
fn sent_with_passkeys(name: &str, text: &str, flags: &str) -> Sent {
    let (addr, stop, sent) = fake_tracker(Duration::ZERO, &[0]);
    let keys = PasskeysFile::new(name, text);
    let flags = format!(
        "--concurrency 4 --peers 30 --passkeys {} {flags}",
        keys.path()
    );
    let r = run(&args(&addr.to_string(), "1s", &flags)).expect("run with passkeys");
    stop.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(50));
    let sent = sent.lock().unwrap().clone();
    assert_eq!(r.summary.total_errors(), 0, "{:?}", r.summary.errors);
    assert_eq!(sent.passkeys.len(), 30, "every peer announced: {sent:?}");
    sent
}

/// Which simulated peer sent `peer_id`: the last six digits of its id.
fn peer_index(peer_id: &[u8; 20]) -> usize {
    std::str::from_utf8(&peer_id[14..])
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn passkeys_ride_in_bep41_url_data_one_per_peer_and_scrapes_are_left_out() {
    let _serial = serial();
    let text = "# three users\nkey-zero\n\nkey.one\nkey_two\n";
    let sent = sent_with_passkeys("udp-keys", text, "--weight-scrape 5");
    assert_eq!(sent.scrapes, 0, "a UDP scrape cannot carry a passkey");
    for (peer_id, seen) in &sent.passkeys {
        // Simulated peer i always uses key i mod 3.
        let i = peer_index(peer_id);
        let want = BTreeSet::from([Some(KEYS[i % 3].to_string())]);
        assert_eq!(seen, &want, "peer {i}");
    }
}

#[test]
fn the_passkey_path_rides_in_bep41_url_data() {
    let _serial = serial();
    let text = "key-zero\nkey.one\nkey_two\n";
    let sent = sent_with_passkeys("udp-path", text, "--passkey-path /announce/{passkey}");
    for (peer_id, seen) in &sent.paths {
        let i = peer_index(peer_id);
        let want = BTreeSet::from([format!("/announce/{}", KEYS[i % 3])]);
        assert_eq!(seen, &want, "peer {i}");
    }
    assert_eq!(sent.paths.len(), 30);
}

#[test]
fn nexusphps_query_passkey_rides_whole_in_bep41_url_data() {
    let _serial = serial();
    let text = "key-zero\nkey.one\nkey_two\n";
    let flags = "--passkey-path /announce.php?passkey={passkey}";
    let sent = sent_with_passkeys("udp-query", text, flags);
    for (peer_id, seen) in &sent.paths {
        let i = peer_index(peer_id);
        let want = BTreeSet::from([format!("/announce.php?passkey={}", KEYS[i % 3])]);
        assert_eq!(seen, &want, "peer {i}");
        // The tracker's reader takes the key from the query.
        let want = BTreeSet::from([Some(KEYS[i % 3].to_string())]);
        assert_eq!(sent.passkeys[peer_id], want, "peer {i}");
    }
    assert_eq!(sent.paths.len(), 30);
}

#[test]
fn a_sweep_spreads_each_keys_peers_over_the_torrents() {
    let _serial = serial();
    let text = "key-zero\nkey.one\nkey_two\n";
    // 30 peers of 3 keys on 10 torrents: each (key, torrent) once, every torrent three
    // peers (at random, Pareto popularity would put most on the first).
    let sent = sent_with_passkeys("udp-sweep", text, "--sweep --torrents 10");
    assert_eq!(sent.started.len(), 30);
    assert_eq!(sent.started_hashes.len(), 10);
}

#[test]
fn a_fill_announces_every_peer_once_before_the_run() {
    let _serial = serial();
    let (addr, stop, sent) = fake_tracker(Duration::ZERO, &[0]);
    let flags = "--fill --peers 3000 --torrents 500 --concurrency 16 --weight-scrape 0 \
                 --stopped-probability 0";
    let r = run(&args(&addr.to_string(), "1s", flags)).expect("fill and run");
    stop.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(50));
    let sent = sent.lock().unwrap().clone();
    let fill = r.fill.as_ref().expect("a fill was asked for");
    assert!(fill.complete, "{fill:?}");
    assert_eq!(
        (fill.peers, fill.peers_asked, fill.answered),
        (3000, 3000, 3000)
    );
    assert!(fill.errors.is_empty(), "{fill:?}");
    // Every peer started once, in the fill: the run that followed only re-announced.
    assert_eq!(sent.started.len(), 3000);
    assert!(sent.started.values().all(|&n| n == 1), "{:?}", sent.started);
    assert!(r.summary.ops["announce"].responses > 0);
    // The fill counted the torrents the tracker was told of.
    assert_eq!(fill.torrents, sent.started_hashes.len() as u64);
    assert!(fill.generator_rss_kib.is_some_and(|k| k > 0));
    assert!(shoal_bench::report::run_text(&r).starts_with("fill: 3,000 of 3,000 peers"));
}

#[test]
fn an_open_loop_held_back_by_its_in_flight_window_says_so() {
    let _serial = serial();
    // One slot and 10 ms answers: at most 100 a second leave, of the 400 due. The run
    // says why requests were late (the window, not a slow sender), and the backlog the
    // window held back voids it, without blaming the generator: the tracker never got
    // the load asked for.
    let (addr, stop, _) = fake_tracker(Duration::from_millis(10), &[0]);
    let flags = "--concurrency 1 --rate 400 --weight-scrape 0";
    let r = run(&args(&addr.to_string(), "1s", flags)).expect("open loop");
    stop.store(true, Ordering::Relaxed);
    let s = &r.summary;
    assert!(s.slot_waits > 0, "{s:?}");
    assert!(s.unsent > 100, "{s:?}");
    assert!(
        !r.valid,
        "a backlog of a quarter of the offer voids the run"
    );
    let g = &r.generator;
    assert!(
        g.undelivered[0].contains("requests due never left"),
        "{g:?}"
    );
    assert!(g.behind.is_empty(), "{g:?}");
    assert!(g.notes[0].contains("in-flight window was full"));
    let text = shoal_bench::report::run_text(&r);
    assert!(
        text.contains("\nNOT VALID: the tracker answered slower than the rate"),
        "{text}"
    );
}
