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
    super::ready(REDIS.get_or_init(launch), "Redis")
}

/// [`redis`], with its database `db` emptied first (each test takes a database of its own).
pub fn redis_db(db: u8) -> Option<&'static Redis> {
    let r = redis()?;
    r.cli(db, &["flushdb"]);
    Some(r)
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
    if !super::on_path("redis-server") || !super::on_path("redis-cli") {
        super::install("redis-server")?;
    }
    let port = super::free_port()?;
    let dir = super::private_dir("redis")?;
    // Once this process has gone: the server's PID (changed by a restart) from its file.
    let pid = dir.join("pid");
    let stop = format!(
        "[ -e {p} ] && kill -9 $(cat {p}); rm -f {p}",
        p = pid.display()
    );
    super::watch(&dir, &stop)?;
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
