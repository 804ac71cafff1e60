//! A contender's process: started pinned with `taskset`, waited on until it answers,
//! stopped by the PID we started it with (SIGTERM, then SIGKILL), and the port checked free
//! before the next one starts.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A tracker we started; stopped (by its PID) when dropped.
pub struct Tracker {
    child: Child,
}

impl Tracker {
    pub fn start(cpus: &str, words: &[String], log: &Path) -> Result<Self> {
        let log = std::fs::File::create(log)?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpus)
            .args(words)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", words.join(" ")))?;
        Ok(Self { child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it exited (and with what), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn stop(&mut self) {
        stop_child(&mut self.child);
    }

    /// Waits until the tracker answers (a BEP 15 connect for UDP, a TCP connection
    /// otherwise), up to 10 s.
    pub fn wait_ready(&mut self, udp: bool, port: u16) -> Result<()> {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                bail!("the tracker exited at start ({status}); see its log");
            }
            let ok = if udp {
                answers_connect(addr)?
            } else {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            };
            if ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the tracker did not answer on port {port} within 10 s")
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// SIGTERM, then SIGKILL after 5 s, for a process we started.
pub fn stop_child(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = crate::sys::terminate(child.id());
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn answers_connect(addr: SocketAddr) -> Result<bool> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut req = Vec::new();
    shoal_proto::udp::Request::Connect(shoal_proto::udp::ConnectRequest {
        transaction_id: shoal_proto::udp::TransactionId(7),
    })
    .write(&mut req);
    let _ = s.send_to(&req, addr);
    let mut buf = [0u8; 64];
    Ok(matches!(s.recv_from(&mut buf), Ok((16, _))))
}

/// Whether the port is free for the next contender: no UDP socket bound to it (UDP), no
/// socket listening on it (TCP).
///
/// For TCP the kernel's own table is read rather than a test bind: the previous contender's
/// TIME_WAIT connections keep a test bind from succeeding when its listener had neither
/// SO_REUSEADDR nor SO_REUSEPORT (aquatic_http), although the next tracker binds with
/// them; and a test bind with SO_REUSEPORT would succeed beside a live listener.
pub fn port_is_free(udp: bool, port: u16) -> bool {
    if udp {
        return UdpSocket::bind(("127.0.0.1", port)).is_ok();
    }
    !["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|table| std::fs::read_to_string(table).is_ok_and(|text| listening_on(&text, port)))
}

/// Whether a `/proc/net/tcp`-style table has a socket in state LISTEN (`0A`) on `port`.
fn listening_on(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1).unwrap_or("");
        let state = fields.nth(1).unwrap_or("");
        state == "0A"
            && local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// Waits up to 60 s for the port to be free (the previous contender's connections may
/// hold it for a while after it exited).
pub fn wait_port_free(udp: bool, port: u16) -> Result<()> {
    let free_by = Instant::now() + Duration::from_secs(60);
    while !port_is_free(udp, port) && Instant::now() < free_by {
        std::thread::sleep(Duration::from_millis(500));
    }
    if !port_is_free(udp, port) {
        bail!("port {port} is in use; stop whatever listens there first");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_read_from_the_kernel_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0DAC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:0DB6 0100007F:9C40 06 00000000:00000000 03:00000000 00000000     0        0 0 3\n";
        assert!(listening_on(table, 3500));
        // TIME_WAIT (06) on 3510 is not a listener.
        assert!(!listening_on(table, 3510));
        assert!(!listening_on(table, 80));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!port_is_free(false, port));
        drop(listener);
        assert!(port_is_free(false, port));
    }
}
