//! The real `shoal` binary: what an operator types and sees.

#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{refused_start, temp_dir, SHOAL};

/// Starts shoal and returns it with the UDP address it printed.
fn start(args: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(SHOAL)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = lines.next().expect("a line on stdout").unwrap();
    let addr = line
        .split("udp://")
        .nth(1)
        .and_then(|s| s.strip_suffix("/announce"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    (child, addr.parse().unwrap())
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("shoal did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One connect + announce; returns the reply's action (1 announce, 3 error) and body.
fn announce(tracker: SocketAddr, info_hash: [u8; 20]) -> (u32, Vec<u8>) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut req = Vec::new();
    req.extend_from_slice(&0x41727101980u64.to_be_bytes());
    req.extend_from_slice(&0u32.to_be_bytes());
    req.extend_from_slice(&1u32.to_be_bytes());
    s.send_to(&req, tracker).unwrap();
    let mut buf = [0u8; 2048];
    let n = s.recv(&mut buf).unwrap();
    assert_eq!(n, 16);
    let cid = &buf[8..16].to_vec();
    let mut req = Vec::new();
    req.extend_from_slice(cid);
    req.extend_from_slice(&1u32.to_be_bytes());
    req.extend_from_slice(&2u32.to_be_bytes());
    req.extend_from_slice(&info_hash);
    req.extend_from_slice(&[9; 20]);
    req.extend_from_slice(&[0; 24]);
    req.extend_from_slice(&2u32.to_be_bytes());
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(&(-1i32).to_be_bytes());
    req.extend_from_slice(&6881u16.to_be_bytes());
    s.send_to(&req, tracker).unwrap();
    let n = s.recv(&mut buf).unwrap();
    (
        u32::from_be_bytes(buf[..4].try_into().unwrap()),
        buf[8..n].to_vec(),
    )
}

#[test]
fn print_config_is_valid_toml_that_the_binary_accepts() {
    let out = Command::new(SHOAL).arg("--print-config").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[udp]") && text.contains("# "));
    let dir = temp_dir("printed");
    let file = dir.join("shoal.toml");
    // The printed file, with only the listeners and the state file changed (tests run in
    // parallel), starts a tracker.
    let defaults = r#"listen = ["0.0.0.0:6969", "[::]:6969"]"#;
    assert_eq!(text.matches(defaults).count(), 2, "UDP and HTTP defaults");
    let edited = text
        .replacen(defaults, r#"listen = ["127.0.0.1:0"]"#, 1)
        .replacen(defaults, "listen = []", 1)
        .replace(r#"listen = ["127.0.0.1:6970"]"#, "listen = []")
        .replace(r#"file = "shoal.state""#, "file = \"\"");
    assert_ne!(edited, text);
    std::fs::write(&file, edited).unwrap();
    let (mut child, addr) = start(&["--config", file.to_str().unwrap()]);
    assert_eq!(announce(addr, [1; 20]).0, 1);
    signal(&child, "-TERM");
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_config_key_is_an_error_naming_it() {
    let err = refused_start("unknown", "[udp]\nlisten_on = [\"127.0.0.1:0\"]\n");
    assert!(
        err.contains("listen_on"),
        "error does not name the key: {err}"
    );
}

#[test]
fn sighup_reloads_the_access_list_and_sigterm_stops() {
    let dir = temp_dir("hup");
    let list = dir.join("allowed");
    std::fs::write(&list, format!("{}\n", "01".repeat(20))).unwrap();
    let config = dir.join("shoal.toml");
    std::fs::write(
        &config,
        format!(
            "[access_list]\nmode = \"allow\"\npath = \"{}\"\n[admin]\nlisten = []\n[state]\nfile = \"\"\n",
            list.display()
        ),
    )
    .unwrap();
    let (mut child, addr) = start(&[
        "--config",
        config.to_str().unwrap(),
        "--udp",
        "127.0.0.1:0",
        "--workers",
        "2",
    ]);
    assert_eq!(announce(addr, [1; 20]).0, 1);
    let (action, body) = announce(addr, [2; 20]);
    assert_eq!((action, body.as_slice()), (3, &b"torrent not allowed"[..]));

    std::fs::write(&list, format!("{}\n", "02".repeat(20))).unwrap();
    signal(&child, "-HUP");
    let deadline = Instant::now() + Duration::from_secs(5);
    while announce(addr, [2; 20]).0 != 1 {
        assert!(Instant::now() < deadline, "SIGHUP did not reload the list");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(announce(addr, [1; 20]).0, 3);
    signal(&child, "-TERM");
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}
