//! The HTTP side: the normal client (one keep-alive connection, reopened if the tracker
//! closes it) and the flood (batches of pipelined announces on keep-alive connections,
//! reopened when the tracker closes them after its 429s).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::phase::{steady, Normal};
use crate::{Options, FLOOD, NORMAL};

/// A connection from loopback address `from` (retried while the ports are busy).
fn tcp_from(from: &str, tracker: SocketAddr) -> TcpStream {
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    loop {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if socket.bind(&local.into()).is_ok() && socket.connect(&tracker.into()).is_ok() {
            let s: TcpStream = socket.into();
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            return s;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn http_request(peer: u8) -> Vec<u8> {
    let ih = "%42".repeat(20);
    let pid = format!("{peer:02x}").repeat(10);
    format!(
        "GET /announce?info_hash={ih}&peer_id={pid}&port=6881&left=1&numwant=10 HTTP/1.1\r\n\
         Host: t\r\n\r\n"
    )
    .into_bytes()
}

/// Reads one response off `s` (its head and Content-Length body); returns its status.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<u16> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return head.split(' ').nth(1)?.parse().ok();
            }
        }
        let mut chunk = [0u8; 16384];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

pub fn normal(tracker: SocketAddr, o: &Options) -> Normal {
    let mut s = tcp_from(NORMAL, tracker);
    let request = http_request(3);
    let mut buf = Vec::new();
    steady(o.seconds, o.rate, |_| {
        let sent = Instant::now();
        if s.write_all(&request).is_err() {
            s = tcp_from(NORMAL, tracker);
            buf.clear();
            return None;
        }
        match read_response(&mut s, &mut buf) {
            Some(200) => Some(sent.elapsed()),
            _ => None,
        }
    })
}

/// Floods from FLOOD until `stop`: batches of pipelined announces on a keep-alive
/// connection, a new connection when the tracker closes one. Returns (sent, 200s, 429s).
pub fn flood(tracker: SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64, u64) {
    let batch: Vec<u8> = http_request(2).repeat(16);
    let (mut sent, mut ok, mut limited) = (0, 0, 0);
    while !stop.load(Ordering::Relaxed) {
        let mut s = tcp_from(FLOOD, tracker);
        let mut buf = Vec::new();
        'connection: while !stop.load(Ordering::Relaxed) {
            if s.write_all(&batch).is_err() {
                break;
            }
            sent += 16;
            for _ in 0..16 {
                match read_response(&mut s, &mut buf) {
                    Some(200) => ok += 1,
                    Some(429) => limited += 1,
                    _ => break 'connection,
                }
            }
        }
    }
    (sent, ok, limited)
}
