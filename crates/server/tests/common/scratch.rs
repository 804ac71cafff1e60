//! Where a test keeps its files and which port it may take, and waiting for something to
//! become true: what every kind of test needs, whichever protocol it speaks.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shoal-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A UDP port free right now on 127.0.0.1.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Asks `check` every `every` until it gives a value, and returns it; after `within`,
/// fails the test with the message `failure` writes.
pub fn wait_until<T>(
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
    failure: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{}", failure());
        std::thread::sleep(every);
    }
}
