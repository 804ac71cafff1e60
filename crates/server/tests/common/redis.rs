//! A real Redis Cluster for the cluster tests (docs/real-servers.md): three masters from
//! Debian's `redis-server` (installed if missing), on free loopback ports, each in a private
//! directory, joined with `redis-cli --cluster create`. Stopped by PID when dropped; a
//! master can be stopped and started again (same directory, so it rejoins with its slots).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisCluster {
    dir: PathBuf,
    pub ports: Vec<u16>,
    servers: Vec<Option<Child>>,
}

/// `n` distinct free ports, each with its cluster-bus port (10000 above) free too. Every
/// port is held until all are chosen: a port let go is often the next one the system
/// hands out, and two masters given one port make a cluster of fewer nodes (one of them
/// owning every slot), which two CI runs met.
fn free_ports(n: usize) -> Vec<u16> {
    let mut held = Vec::new();
    while held.len() < n {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port > 55535 {
            continue;
        }
        if let Ok(bus) = TcpListener::bind(("127.0.0.1", port + 10000)) {
            held.push((port, l, bus));
        }
    }
    held.into_iter().map(|(port, _, _)| port).collect()
}

/// `redis-server` and `redis-cli`, installed with apt-get if missing; `Err` says why not.
fn installed() -> Result<(), String> {
    let present = |p: &str| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok()
    };
    if present("redis-server") && present("redis-cli") {
        return Ok(());
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "redis-server"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("apt-get: {e}"))?;
    if !status.success() {
        Command::new("apt-get")
            .arg("update")
            .status()
            .map_err(|e| e.to_string())?;
        let again = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "redis-server"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| e.to_string())?;
        if !again.success() {
            return Err("apt-get install redis-server failed".into());
        }
    }
    Ok(())
}

impl RedisCluster {
    /// Three masters joined into a cluster, ready (`cluster_state:ok`). `None` (with the
    /// reason printed) only when SHOAL_SKIP_REAL_SERVERS=1 and Redis cannot be had.
    pub fn start(name: &str) -> Option<Self> {
        if let Err(e) = installed() {
            if std::env::var("SHOAL_SKIP_REAL_SERVERS").as_deref() == Ok("1") {
                eprintln!("SKIPPED (SHOAL_SKIP_REAL_SERVERS=1): {e}");
                return None;
            }
            panic!("Redis could not be installed: {e} (SHOAL_SKIP_REAL_SERVERS=1 skips)");
        }
        let dir = super::temp_dir(name);
        let ports = free_ports(3);
        let mut c = Self {
            dir,
            ports: ports.clone(),
            servers: Vec::new(),
        };
        for i in 0..3 {
            let child = c.spawn(i);
            c.servers.push(Some(child));
        }
        for (i, &p) in ports.iter().enumerate() {
            c.wait_for_ping(p);
            c.check_running(i);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for p in &ports {
            create.arg(format!("127.0.0.1:{p}"));
        }
        let out = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        c.wait_until_ok();
        for i in 0..3 {
            assert!(
                !c.own_slots(i).is_empty(),
                "master {i} owns no slot after the cluster was created:\n{}",
                c.nodes_views().join("\n")
            );
        }
        Some(c)
    }

    fn spawn(&self, i: usize) -> Child {
        let port = self.ports[i];
        let dir = self.dir.join(port.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args([
                "--cluster-node-timeout",
                "2000",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server")
    }

    fn cli(&self, port: u16, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for_ping(&self, port: u16) {
        let until = Instant::now() + Duration::from_secs(10);
        while self.cli(port, &["ping"]).trim() != "PONG" {
            if Instant::now() > until {
                let log = self.dir.join(port.to_string()).join("redis.log");
                let log = std::fs::read_to_string(log).unwrap_or_default();
                panic!("redis on {port} did not start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every running master says `cluster_state:ok`.
    pub fn wait_until_ok(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        for (i, s) in self.servers.iter().enumerate() {
            if s.is_none() {
                continue;
            }
            while !self
                .cli(self.ports[i], &["cluster", "info"])
                .contains("cluster_state:ok")
            {
                assert!(Instant::now() < until, "the cluster did not become ok");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The seed URLs, comma-separated (for `--cluster`).
    pub fn seeds(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// Stops master `i` (SIGKILL, by PID).
    pub fn stop(&mut self, i: usize) {
        if let Some(mut child) = self.servers[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts master `i` again with its directory (it rejoins with its slots).
    pub fn restart(&mut self, i: usize) {
        self.start_again(i);
        self.wait_for_ping(self.ports[i]);
        self.check_running(i);
        self.wait_until_ok();
    }

    /// Panics (with its log) if master `i`'s process has exited: what answered on its
    /// port would then be something else.
    fn check_running(&mut self, i: usize) {
        if let Some(Ok(Some(status))) = self.servers[i].as_mut().map(Child::try_wait) {
            let log = self.dir.join(self.ports[i].to_string()).join("redis.log");
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("master {i} exited ({status}) after it answered:\n{log}");
        }
    }

    /// Starts master `i` again with its directory, without waiting for anything (the
    /// caller watches [`RedisCluster::state_of`]).
    pub fn start_again(&mut self, i: usize) {
        let child = self.spawn(i);
        self.servers[i] = Some(child);
    }

    /// What master `i` says of the cluster: `Some(true)` for `cluster_state:ok`,
    /// `Some(false)` for `cluster_state:fail`, `None` if it does not answer.
    pub fn state_of(&self, i: usize) -> Option<bool> {
        let info = self.cli(self.ports[i], &["cluster", "info"]);
        if info.contains("cluster_state:ok") {
            Some(true)
        } else if info.contains("cluster_state:fail") {
            Some(false)
        } else {
            None
        }
    }

    /// Each master's `cluster nodes`, read once for [`RedisCluster::owner`].
    pub fn nodes_views(&self) -> Vec<String> {
        let ports = self.ports.iter();
        ports.map(|p| self.cli(*p, &["cluster", "nodes"])).collect()
    }

    /// The master serving `slot` as most masters see it in `views`
    /// ([`RedisCluster::nodes_views`]): one master's view may lag, or be wrong, just
    /// after a master came back.
    pub fn owner(&self, slot: u16, views: &[String]) -> Option<usize> {
        let mut votes = vec![0; self.ports.len()];
        for view in views {
            for f in view
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
            {
                let port = f
                    .get(1)
                    .and_then(|a| a.split(['@', ':']).nth(1)?.parse().ok());
                let Some(i) = self.ports.iter().position(|p| Some(*p) == port) else {
                    continue;
                };
                let serves = f.iter().skip(8).any(|range| {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    matches!((a.parse(), b.parse()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
                });
                votes[i] += usize::from(serves);
            }
        }
        (0..votes.len()).find(|&i| votes[i] * 2 > views.len())
    }

    /// `key`'s hash slot.
    pub fn slot_of(&self, key: &str) -> u16 {
        let answer = self.cli(self.ports[0], &["cluster", "keyslot", key]);
        answer
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("cluster keyslot answered {answer:?}"))
    }

    /// The slot ranges that master `i` says are its own (its `myself` line): a master's
    /// word on its own slots, which never lags as another master's view of it can.
    pub fn own_slots(&self, i: usize) -> Vec<(u16, u16)> {
        let nodes = self.cli(self.ports[i], &["cluster", "nodes"]);
        let line = nodes
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(2)
                    .is_some_and(|f| f.contains("myself"))
            })
            .unwrap_or_else(|| panic!("master {i} has no myself line in:\n{nodes}"));
        line.split_whitespace()
            .skip(8)
            .filter_map(|range| {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect()
    }

    /// The master that serves `key`'s slot (its index), as most masters see it.
    pub fn master_of(&self, key: &str) -> usize {
        let (slot, views) = (self.slot_of(key), self.nodes_views());
        self.owner(slot, &views)
            .unwrap_or_else(|| panic!("no master serves slot {slot}:\n{}", views.join("\n")))
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.stop(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
