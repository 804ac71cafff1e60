//! Real PostgreSQL and MariaDB servers for the accounts tests, per docs/real-servers.md.
//!
//! Each server is installed if missing (Debian packages), started ONCE per test binary (a
//! `OnceLock`) with a private data directory under the temporary directory and a free loopback
//! port, and stopped by PID when the test binary exits: a small watcher shell waits for this
//! process to end, then stops the server and removes its directory, so a panicking test
//! cannot leave a server behind. Each test gets its own database on the shared server.
//!
//! A server that cannot be installed or started fails the test with the reason, unless
//! `SHOAL_SKIP_DB_SERVERS=1` (or `SHOAL_SKIP_REAL_SERVERS=1`) is set: then the test says it
//! skipped and passes. [`redis`] holds the one Redis the NexusPHP tests use.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A running database server of this test binary.
pub struct Server {
    dir: PathBuf,
    port: u16,
    /// PostgreSQL's bin directory; `None` for MariaDB.
    pg_bin: Option<PathBuf>,
}

#[allow(dead_code)]
pub mod redis;

static POSTGRES: OnceLock<Result<Server, String>> = OnceLock::new();
static MARIADB: OnceLock<Result<Server, String>> = OnceLock::new();
/// apt-get takes the dpkg lock: one install at a time.
static INSTALL: Mutex<()> = Mutex::new(());
/// The PostgreSQL server is stopped by the outage test: its users take turns.
static POSTGRES_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The PostgreSQL server, held for this test alone; `None` when skipped.
pub async fn postgres() -> Option<(&'static Server, tokio::sync::MutexGuard<'static, ()>)> {
    let server = ready(POSTGRES.get_or_init(launch_postgres), "PostgreSQL")?;
    Some((server, POSTGRES_TURN.lock().await))
}

/// The MariaDB server; `None` when skipped.
pub fn mariadb() -> Option<&'static Server> {
    ready(MARIADB.get_or_init(launch_mariadb), "MariaDB")
}

fn ready<T>(started: &'static Result<T, String>, what: &str) -> Option<&'static T> {
    let skip = |k: &str| std::env::var(k).as_deref() == Ok("1");
    match started {
        Ok(server) => Some(server),
        Err(reason) if skip("SHOAL_SKIP_DB_SERVERS") || skip("SHOAL_SKIP_REAL_SERVERS") => {
            eprintln!("SKIPPED the {what} test: {reason}");
            None
        }
        Err(reason) => panic!(
            "{what} could not be installed or started: {reason}\n\
             (set SHOAL_SKIP_DB_SERVERS=1 to skip the real-server tests on this machine)"
        ),
    }
}

impl Server {
    /// A new, empty database on this server; its URL for `Database::connect`.
    pub fn create_database(&self, name: &str) -> String {
        let port = self.port.to_string();
        match &self.pg_bin {
            Some(bin) => {
                let mut createdb = Command::new(bin.join("createdb"));
                createdb.args(["-h", "127.0.0.1", "-p", &port, "-U", "shoal", name]);
                run(&self.dir, "createdb", createdb).unwrap();
                format!("postgres://shoal@127.0.0.1:{port}/{name}")
            }
            None => {
                let sql =
                    format!("CREATE DATABASE {name}; GRANT ALL ON {name}.* TO 'shoal'@'127.0.0.1'");
                run(&self.dir, "create-database", self.mariadb_client(&sql)).unwrap();
                format!("mysql://shoal:pw@127.0.0.1:{port}/{name}")
            }
        }
    }

    /// Stops PostgreSQL (fast shutdown: sessions are cut), as an outage.
    pub fn stop_postgres(&self) -> Result<(), String> {
        let stop = format!(
            "{} -D {}/data -m fast -w stop",
            self.pg_ctl(),
            self.dir.display()
        );
        run(&self.dir, "pg_ctl-stop", as_postgres(&stop))
    }

    /// Starts PostgreSQL again on the same port and data.
    pub fn start_postgres(&self) -> Result<(), String> {
        let start = format!(
            "{} -D {dir}/data -o '-p {port} -k {dir} -c listen_addresses=127.0.0.1' \
             -l {dir}/pg.log -w start",
            self.pg_ctl(),
            dir = self.dir.display(),
            port = self.port
        );
        run(&self.dir, "pg_ctl-start", as_postgres(&start))
    }

    /// Starts MariaDB on this server's port and data (again, after `stop_mariadb`), and
    /// waits until it answers.
    pub fn start_mariadb(&self) -> Result<(), String> {
        let dir = self.dir.display().to_string();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("mariadbd.log"))
            .map_err(|e| e.to_string())?;
        Command::new("mariadbd")
            .args([
                "--no-defaults",
                &format!("--datadir={dir}/data"),
                "--user=root",
                &format!("--port={}", self.port),
                "--bind-address=127.0.0.1",
                &format!("--socket={dir}/sock"),
                &format!("--pid-file={dir}/pid"),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("mariadbd: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while run(&self.dir, "ping", self.mariadb_client("SELECT 1")).is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "mariadbd did not answer within 60 s; see {dir}/mariadbd.log"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Stops MariaDB (SIGTERM to the PID in its pid file), as an outage, and waits until
    /// it has gone (it removes its pid file last). Used by shoal-unit3d's tests, which
    /// include this module.
    #[allow(dead_code)]
    pub fn stop_mariadb(&self) -> Result<(), String> {
        let pid_file = self.dir.join("pid");
        let pid = std::fs::read_to_string(&pid_file).map_err(|e| format!("pid file: {e}"))?;
        let mut kill = Command::new("kill");
        kill.arg(pid.trim());
        run(&self.dir, "kill-mariadbd", kill)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while pid_file.exists() {
            if Instant::now() > deadline {
                return Err("mariadbd did not stop within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    fn pg_ctl(&self) -> String {
        let bin = self.pg_bin.as_ref().expect("a PostgreSQL server");
        bin.join("pg_ctl").display().to_string()
    }

    fn mariadb_client(&self, sql: &str) -> Command {
        let mut client = Command::new("mariadb");
        let port = self.port.to_string();
        client.args([
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            &port,
            "-u",
            "root",
            "-e",
            sql,
        ]);
        client
    }
}

fn launch_postgres() -> Result<Server, String> {
    let began = Instant::now();
    let pg_bin = match postgres_bin() {
        Some(bin) => bin,
        None => {
            install("postgresql")?;
            postgres_bin().ok_or("postgresql installed, but no /usr/lib/postgresql/*/bin/initdb")?
        }
    };
    let installed = began.elapsed();
    let server = Server {
        dir: private_dir("pg")?,
        port: free_port()?,
        pg_bin: Some(pg_bin),
    };
    let dir = server.dir.display().to_string();
    run(&server.dir, "chown", {
        let mut chown = Command::new("chown");
        chown.args(["postgres", &dir]);
        chown
    })?;
    let initdb = format!(
        "{}/initdb -D {dir}/data -U shoal --auth=trust",
        server.pg_bin.as_ref().unwrap().display()
    );
    run(&server.dir, "initdb", as_postgres(&initdb))?;
    // The postmaster's PID changes when the outage test restarts it: read it at the end.
    watch(
        &server.dir,
        &format!("kill -INT $(head -1 {dir}/data/postmaster.pid)"),
    )?;
    server.start_postgres()?;
    eprintln!(
        "PostgreSQL ready on 127.0.0.1:{} in {:.1?} (of which install {:.1?})",
        server.port,
        began.elapsed(),
        installed
    );
    Ok(server)
}

fn launch_mariadb() -> Result<Server, String> {
    let began = Instant::now();
    if !on_path("mariadbd") {
        install("mariadb-server")?;
    }
    let installed = began.elapsed();
    let server = Server {
        dir: private_dir("mariadb")?,
        port: free_port()?,
        pg_bin: None,
    };
    let dir = server.dir.display().to_string();
    let mut install_db = Command::new("mariadb-install-db");
    install_db.args([
        "--no-defaults",
        &format!("--datadir={dir}/data"),
        "--user=root",
        "--auth-root-authentication-method=normal",
    ]);
    run(&server.dir, "mariadb-install-db", install_db)?;
    // The daemon's PID changes when the outage tests restart it: read it at the end.
    watch(&server.dir, &format!("kill $(cat {dir}/pid)"))?;
    server.start_mariadb()?;
    let user = "CREATE USER 'shoal'@'127.0.0.1' IDENTIFIED BY 'pw'";
    run(&server.dir, "create-user", server.mariadb_client(user))?;
    eprintln!(
        "MariaDB ready on 127.0.0.1:{} in {:.1?} (of which install {:.1?})",
        server.port,
        began.elapsed(),
        installed
    );
    Ok(server)
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has an `initdb`.
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).exists()))
        .unwrap_or(false)
}

/// `apt-get install` the package (after an `apt-get update` if the first try fails).
fn install(package: &str) -> Result<(), String> {
    let _one_at_a_time = INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let began = Instant::now();
    let apt = |args: &[&str]| {
        let mut apt = Command::new("apt-get");
        apt.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(&std::env::temp_dir(), "apt-get", apt)
    };
    let install = ["install", "-y", "--no-install-recommends", package];
    apt(&install)
        .or_else(|_| apt(&["update"]).and_then(|_| apt(&install)))
        .map_err(|e| format!("apt-get install {package} failed: {e}"))?;
    eprintln!("installed {package} in {:.1?}", began.elapsed());
    Ok(())
}

/// A command to run as the `postgres` user (initdb and the server refuse root).
fn as_postgres(command: &str) -> Command {
    let mut su = Command::new("su");
    su.args(["postgres", "-s", "/bin/sh", "-c", command]);
    su
}

/// Runs the command with its output in `dir/<label>.log`; the log's tail is the error.
fn run(dir: &Path, label: &str, mut command: Command) -> Result<(), String> {
    let log_path = dir.join(format!("{label}.log"));
    let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let status = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .status()
        .map_err(|e| format!("{label}: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let tail: String = output.lines().rev().take(8).collect::<Vec<_>>().join(" | ");
    Err(format!("{label} exited with {status}: {tail}"))
}

/// A fresh directory under the temporary directory, world-readable for the postgres user.
fn private_dir(kind: &str) -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!(
        "shoal-accounts-{kind}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// A loopback port that nothing listens on right now.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

/// Starts a watcher that, once this test process has exited, runs `stop` (a shell command
/// that signals the server by PID), waits for the server to go, and removes `dir`.
fn watch(dir: &Path, stop: &str) -> Result<(), String> {
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; {stop}; \
         for _ in $(seq 100); do [ -e {dir}/data/postmaster.pid ] || [ -e {dir}/pid ] || break; \
         sleep 0.2; done; rm -rf {dir}",
        me = std::process::id(),
        dir = dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("watcher: {e}"))
}
