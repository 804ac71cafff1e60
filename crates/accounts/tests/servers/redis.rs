//! One real Redis (a single `redis-server`, as NexusPHP sites run it, with a password) for
//! the tests of a test binary, per docs/real-servers.md: installed if missing (Debian's
//! `redis-server`), started once per test binary on a free loopback port with a private
//! directory, stopped by PID when the test binary exits (a watcher shell waits for this
//! process to end), and stoppable and startable again for the outage tests. Each test uses
//! a database number of its own.
//!
//! A server that cannot be installed or started fails the test with the reason, unless
//! `SHOAL_SKIP_DB_SERVERS=1` or `SHOAL_SKIP_REAL_SERVERS=1` is set: then the test says it
//! skipped and passes.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The password the server asks for (NexusPHP's `.env` `REDIS_PASSWORD`).
pub const PASSWORD: &str = "redis-test-pw";

/// The Redis of this test binary.
pub struct Redis {
    dir: PathBuf,
    pub port: u16,
    child: Mutex<Option<Child>>,
}

static REDIS: OnceLock<Result<Redis, String>> = OnceLock::new();

/// The Redis of this test binary, started on first use; `None` when skipped.
pub fn redis() -> Option<&'static Redis> {
    match REDIS.get_or_init(launch) {
        Ok(r) => Some(r),
        Err(reason)
            if ["SHOAL_SKIP_DB_SERVERS", "SHOAL_SKIP_REAL_SERVERS"]
                .iter()
                .any(|k| std::env::var(k).as_deref() == Ok("1")) =>
        {
            eprintln!("SKIPPED the Redis test: {reason}");
            None
        }
        Err(reason) => panic!(
            "Redis could not be installed or started: {reason}\n\
             (set SHOAL_SKIP_REAL_SERVERS=1 to skip the real-server tests on this machine)"
        ),
    }
}

impl Redis {
    /// `redis://:PASSWORD@127.0.0.1:PORT/<db>`.
    pub fn url(&self, db: u8) -> String {
        format!("redis://:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// `redis-cli` on database `db`: its output, trimmed (one line per reply element).
    pub fn cli(&self, db: u8, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["--no-auth-warning", "-a", PASSWORD, "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-n", &db.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server (SIGKILL, by PID), as an outage.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
            // Nothing for the watcher to signal (the PID may be another process's later).
            let _ = std::fs::remove_file(self.dir.join("pid"));
        }
    }

    /// Starts it again on the same port (empty: it keeps nothing on disk), and waits until
    /// it answers.
    pub fn start(&self) -> Result<(), String> {
        let child = spawn(&self.dir, self.port)?;
        std::fs::write(self.dir.join("pid"), child.id().to_string()).map_err(|e| e.to_string())?;
        *self.child.lock().unwrap() = Some(child);
        let until = Instant::now() + Duration::from_secs(10);
        while self.cli(0, &["ping"]) != "PONG" {
            if Instant::now() > until {
                let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server did not answer within 10 s:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

fn launch() -> Result<Redis, String> {
    installed()?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!("shoal-redis-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Once this process has gone: the server's PID (changed by a restart) from its file.
    let watcher = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; [ -e {dir}/pid ] && kill -9 $(cat {dir}/pid); \
         rm -rf {dir}",
        me = std::process::id(),
        dir = dir.display()
    );
    Command::new("sh")
        .args(["-c", &watcher])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("watcher: {e}"))?;
    let redis = Redis {
        dir,
        port,
        child: Mutex::new(None),
    };
    redis.start()?;
    eprintln!("Redis ready on 127.0.0.1:{port}");
    Ok(redis)
}

fn spawn(dir: &std::path::Path, port: u16) -> Result<Child, String> {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--requirepass",
            PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server: {e}"))
}

/// `redis-server` and `redis-cli`, installed with apt-get if missing.
fn installed() -> Result<(), String> {
    let present = |p: &str| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present("redis-server") && present("redis-cli") {
        return Ok(());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let install = ["install", "-y", "--no-install-recommends", "redis-server"];
    if apt(&install) || (apt(&["update"]) && apt(&install)) {
        Ok(())
    } else {
        Err("apt-get install redis-server failed".into())
    }
}
