//! The PROXY protocol through a real HAProxy (Debian's `haproxy`, per
//! docs/real-servers.md), started once by this test on free loopback ports in front of an
//! in-process tracker with `http.proxy_protocol` on and `proxy_trusted = ["127.0.0.1"]`:
//!
//! - one frontend reaches shoal from 127.0.0.1 (trusted) with `send-proxy-v2`: a client
//!   at 127.0.0.5 is recorded as 127.0.0.5, not as the proxy;
//! - another reaches it from 127.0.0.2 (not trusted), also with `send-proxy-v2`: the
//!   header is refused (400, closed);
//! - a trusted address that connects without a header is closed without an answer.
//!
//! HAProxy is installed if missing. If it cannot be installed or started the test fails
//! with the reason, unless `SHOAL_SKIP_REAL_SERVERS=1` is set: then it says it skipped
//! and passes. HAProxy is stopped by PID when the test ends (also when it fails).

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::temp_dir;
use shoal_proto::InfoHash;
use shoal_server::{Config, Tracker};

/// A running HAProxy, killed when dropped.
struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn installed() -> Result<(), String> {
    if Command::new("haproxy").arg("-v").output().is_ok() {
        return Ok(());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())
            .and_then(|s| s.success().then_some(()).ok_or(format!("apt-get {s}")))
    };
    let install = ["install", "-y", "--no-install-recommends", "haproxy"];
    apt(&install)
        .or_else(|_| apt(&["update"]).and_then(|_| apt(&install)))
        .map_err(|e| format!("apt-get install haproxy failed: {e}"))
}

/// HAProxy with a trusted and an untrusted frontend in front of `shoal`; their ports.
fn start_haproxy(shoal: SocketAddr) -> Result<(Haproxy, u16, u16), String> {
    installed()?;
    let dir = temp_dir("haproxy");
    let (trusted, untrusted) = (free_tcp_port(), free_tcp_port());
    let config = format!(
        "global\n  log stdout format raw local0 err\n\
         defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
         frontend trusted\n  bind 127.0.0.1:{trusted}\n  default_backend via_trusted\n\
         frontend untrusted\n  bind 127.0.0.1:{untrusted}\n  default_backend via_untrusted\n\
         backend via_trusted\n  server s1 {shoal} send-proxy-v2 source 127.0.0.1\n\
         backend via_untrusted\n  server s2 {shoal} send-proxy-v2 source 127.0.0.2\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).map_err(|e| e.to_string())?;
    let child = Command::new("haproxy")
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting haproxy: {e}"))?;
    let proxy = Haproxy(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", untrusted)).is_err() {
        if Instant::now() > deadline {
            return Err("haproxy did not listen within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((proxy, trusted, untrusted))
}

/// Sends `request` from loopback address `from` to port `to`; returns all that came back.
fn exchange(from: &str, to: u16, request: &[u8]) -> String {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    let target: SocketAddr = format!("127.0.0.1:{to}").parse().unwrap();
    socket.connect(&target.into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

fn announce(port: u16) -> Vec<u8> {
    let ih = "%07".repeat(20);
    format!(
        "GET /announce?info_hash={ih}&peer_id=-qB4520-haproxy12345&port={port}&left=1 \
         HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn proxy_v2_from_a_real_haproxy_names_the_client_and_only_trusted_proxies_may_send_it() {
    let dir = temp_dir("haproxy-shoal");
    let mut c = Config::ephemeral();
    c.workers = 1;
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.http.proxy_protocol = true;
    c.http.proxy_trusted = vec!["127.0.0.1".into()];
    c.state.file = dir.join("shoal.state");
    let t = Tracker::start(c).unwrap();
    let shoal = t.http_addrs()[0];
    let (_haproxy, trusted, untrusted) = match start_haproxy(shoal) {
        Ok(started) => started,
        Err(reason) if std::env::var("SHOAL_SKIP_REAL_SERVERS").as_deref() == Ok("1") => {
            eprintln!("SKIPPED the HAProxy test (SHOAL_SKIP_REAL_SERVERS=1): {reason}");
            return;
        }
        Err(reason) => panic!(
            "HAProxy could not be installed or started: {reason}\n\
             (set SHOAL_SKIP_REAL_SERVERS=1 to skip the real-server tests on this machine)"
        ),
    };

    let reply = exchange("127.0.0.5", trusted, &announce(6881));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("8:interval"), "{reply}");
    let peers = t
        .store()
        .torrent_peers(&InfoHash([7; 20]))
        .map(|torrent| {
            let peers: Vec<SocketAddr> = torrent
                .v4
                .iter()
                .map(|p| SocketAddr::V4(p.addr.addr()))
                .collect();
            peers
        })
        .expect("the torrent was announced");
    assert_eq!(
        peers,
        vec!["127.0.0.5:6881".parse().unwrap()],
        "the client's address"
    );

    let reply = exchange("127.0.0.6", untrusted, &announce(6882));
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("PROXY header"), "{reply}");

    let reply = exchange("127.0.0.1", shoal.port(), &announce(6883));
    assert_eq!(reply, "", "a trusted proxy must send its header");
    let count = t
        .store()
        .torrent_peers(&InfoHash([7; 20]))
        .map(|torrent| torrent.v4.len());
    assert_eq!(count, Some(1), "only the proxied client was recorded");
    t.shutdown();
}
