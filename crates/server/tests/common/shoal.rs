//! The real `shoal` binary as a process: started with a config file, its output collected
//! line by line, stopped with a signal, or refused at start; and the [`Site`] (snapshot
//! file and UDP port) that the restart and upgrade tests start one process after another
//! on.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::scratch::{free_udp_port, temp_dir, wait_until};

/// How often the output and the exit status are looked at.
const POLL: Duration = Duration::from_millis(20);

/// The binary under test.
pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

/// Writes `config` to `<dir>/<name>.toml` and returns the path.
fn write_config(dir: &Path, name: &str, config: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    path
}

/// Runs `shoal --config FILE` with `config` as the file's text (in a scratch directory
/// named after `name`), which it must refuse; returns what it wrote on stderr.
pub fn refused_start(name: &str, config: &str) -> String {
    let dir = temp_dir(name);
    let path = write_config(&dir, name, config);
    let out = Command::new(SHOAL)
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "started with:\n{config}");
    std::fs::remove_dir_all(&dir).unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A running `shoal` process, its output collected line by line.
pub struct Shoal {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Shoal {
    /// Starts `shoal --config <dir>/<name>.toml` with `config` as the file's text and
    /// waits (at most 20 s) until it says it listens.
    pub fn start(dir: &Path, name: &str, config: &str) -> Self {
        Self::start_with_env(dir, name, config, &[])
    }

    /// [`Shoal::start`] with `env` added to the process's environment.
    pub fn start_with_env(dir: &Path, name: &str, config: &str, env: &[(&str, &OsStr)]) -> Self {
        let path = write_config(dir, name, config);
        let mut command = Command::new(SHOAL);
        command.arg("--config").arg(&path).envs(env.iter().copied());
        Self::spawn(command)
    }

    /// [`Shoal::start`] with the process's open-file limit at `files` (soft and hard, set
    /// by `sh`'s `ulimit` before it runs `shoal`).
    pub fn start_with_open_files(dir: &Path, name: &str, config: &str, files: u64) -> Self {
        let path = write_config(dir, name, config);
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit -n {files} && exec \"$0\" \"$@\""))
            .arg(SHOAL)
            .arg("--config")
            .arg(&path);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting shoal");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let shoal = Self { child, lines };
        shoal.wait_for("listening on", Duration::from_secs(20));
        shoal
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits until a line containing `text` appears; returns it. Panics with the output so
    /// far after `timeout`.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        wait_until(
            timeout,
            POLL,
            || {
                let lines = self.lines.lock().unwrap();
                lines.iter().find(|l| l.contains(text)).cloned()
            },
            || {
                format!(
                    "no line with {text:?} in {timeout:?}; output:\n{}",
                    self.output()
                )
            },
        )
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Sends SIGTERM and waits (at most 30 s) for a clean exit.
    pub fn stop(mut self) -> String {
        self.terminate();
        let lines = self.lines.clone();
        let status = wait_until(
            Duration::from_secs(30),
            POLL,
            || self.child.try_wait().unwrap(),
            || format!("did not exit:\n{}", lines.lock().unwrap().join("\n")),
        );
        // Let the reader threads take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            status.success(),
            "exit {status}; output:\n{}",
            self.output()
        );
        self.output()
    }
}

impl Drop for Shoal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A scratch directory with a snapshot file in it and a UDP port on 127.0.0.1: what the
/// processes of one restart or upgrade test share.
pub struct Site {
    pub dir: PathBuf,
    pub state: PathBuf,
    pub port: u16,
}

impl Site {
    pub fn new(name: &str) -> Self {
        let dir = temp_dir(name);
        let state = dir.join("shoal.state");
        Self {
            dir,
            state,
            port: free_udp_port(),
        }
    }

    /// The UDP tracker's address.
    pub fn udp(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Starts `shoal` as `name`: two workers, UDP on the site's port, no HTTP, the site's
    /// snapshot file; `state` adds lines to the `[state]` section and `admin` is the whole
    /// `[admin]` section.
    pub fn start(&self, name: &str, state: &str, admin: &str) -> Shoal {
        self.start_with_env(name, state, admin, &[])
    }

    /// [`Site::start`] with `env` added to the process's environment.
    pub fn start_with_env(
        &self,
        name: &str,
        state: &str,
        admin: &str,
        env: &[(&str, &OsStr)],
    ) -> Shoal {
        let config = format!(
            "workers = 2\n\
             [udp]\nlisten = [\"{}\"]\n\
             [http]\nlisten = []\n\
             [state]\nfile = {:?}\n{state}\n\
             [admin]\n{admin}\n",
            self.udp(),
            self.state.display().to_string()
        );
        Shoal::start_with_env(&self.dir, name, &config, env)
    }

    /// Removes the directory (at the end of a test that passed).
    pub fn remove(self) {
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

/// An in-process private tracker's config: UDP, HTTP and admin on loopback ports the system
/// picks, one worker, the state file in `dir`, the admin API behind `token`, and a flush
/// interval long enough that only the API's flush writes (each test decides when).
pub fn private_config(dir: &Path, token: &str) -> shoal_server::Config {
    let mut c = shoal_server::Config::ephemeral();
    c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 1;
    c.state.file = dir.join("shoal.state");
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.token = token.into();
    c.private.enabled = true;
    c.private.flush_interval = 3600;
    c
}
