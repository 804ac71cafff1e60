//! The UDP side: the normal client (one connection id, one announce at a time), the
//! flood (one socket sending as fast as it can, a second thread draining the answers), and
//! the sampler of the tracker socket's receive queue and drops in `/proc/net/udp`.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_proto::udp::{
    AnnounceRequest, ConnectRequest, ConnectionId, Request, Response, TransactionId,
};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

use crate::phase::{steady, Normal};
use crate::{Options, FLOOD, NORMAL};

fn udp_socket(from: &str) -> UdpSocket {
    let s = UdpSocket::bind(format!("{from}:0")).expect("a loopback address");
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s
}

fn connect_udp(s: &UdpSocket, tracker: SocketAddr) -> ConnectionId {
    let mut out = Vec::new();
    Request::Connect(ConnectRequest {
        transaction_id: TransactionId(0),
    })
    .write(&mut out);
    s.send_to(&out, tracker).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = s.recv_from(&mut buf).expect("a connect answer");
    match Response::parse(&buf[..n], false) {
        Ok(Response::Connect { connection_id, .. }) => connection_id,
        other => panic!("not a connect answer: {other:?}"),
    }
}

fn udp_announce(cid: ConnectionId, tid: u32, peer: u8, out: &mut Vec<u8>) {
    out.clear();
    Request::Announce(AnnounceRequest {
        connection_id: cid,
        transaction_id: TransactionId(tid),
        info_hash: InfoHash([0x42; 20]),
        peer_id: PeerId([peer; 20]),
        downloaded: 0,
        left: 1,
        uploaded: 0,
        event: AnnounceEvent::None,
        ip: [0; 4],
        key: 0,
        numwant: 10,
        port: 6881,
    })
    .write(out);
}

pub fn normal(tracker: SocketAddr, o: &Options) -> Normal {
    let s = udp_socket(NORMAL);
    let cid = connect_udp(&s, tracker);
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    steady(o.seconds, o.rate, |tid| {
        udp_announce(cid, tid, 3, &mut out);
        let sent = Instant::now();
        s.send_to(&out, tracker).unwrap();
        // Answers to earlier (timed-out) requests are skipped by transaction id.
        while let Ok((n, _)) = s.recv_from(&mut buf) {
            if n >= 8 && buf[4..8] == tid.to_be_bytes() {
                return Some(sent.elapsed());
            }
        }
        None
    })
}

/// Floods from FLOOD until `stop`; returns (sent, answered).
pub fn flood(tracker: SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64) {
    let s = udp_socket(FLOOD);
    let cid = connect_udp(&s, tracker);
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let answered = Arc::new(AtomicU64::new(0));
    let drain = {
        let (s, stop, answered) = (s.try_clone().unwrap(), stop.clone(), answered.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if s.recv_from(&mut buf).is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let mut out = Vec::new();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        udp_announce(cid, sent as u32, 2, &mut out);
        if s.send_to(&out, tracker).is_ok() {
            sent += 1;
        }
    }
    drain.join().unwrap();
    (sent, answered.load(Ordering::Relaxed))
}

/// The tracker's UDP socket as `/proc/net/udp` shows it: (receive queue bytes, drops).
fn udp_socket_state(port: u16) -> Option<(u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f.get(1)?.ends_with(&local) {
            return None;
        }
        let rx = u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()?;
        Some((rx, f.last()?.parse().ok()?))
    })
}

/// Samples the tracker socket's queue every 10 ms until `stop`: (median and largest queue
/// in bytes, datagrams the kernel dropped because it was full).
pub fn sample_queue(port: u16, stop: Arc<AtomicBool>) -> (u64, u64, u64) {
    let first_drops = udp_socket_state(port).map_or(0, |s| s.1);
    let (mut queue, mut drops) = (Vec::new(), first_drops);
    while !stop.load(Ordering::Relaxed) {
        if let Some((rx, d)) = udp_socket_state(port) {
            queue.push(rx);
            drops = d;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    queue.sort_unstable();
    let median = queue.get(queue.len() / 2).copied().unwrap_or(0);
    let max = queue.last().copied().unwrap_or(0);
    (median, max, drops - first_drops)
}
