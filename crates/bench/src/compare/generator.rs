//! Other load generators as the load of a comparison: aquatic's load testers (UDP, HTTP
//! keep-alive plain or TLS, WebTorrent over wss) and wrk without keep-alive, each started
//! pinned to the bench CPUs with the config the Python scripts wrote, and measured over the
//! same kind of window as shoal-bench's own load.
//!
//! aquatic's testers have no warm-up and report every 5 s, so warm-up and duration must be
//! multiples of 5 s: the CPU snapshots are taken when the reports that open and close the
//! window are printed, and the rates are the mean of the reports inside it. wrk has no
//! warm-up either: its rate is over the whole run; tracker CPU is taken from the end of
//! the warm-up to wrk's exit (wrk's own CPU is read while it is an unreaped zombie).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cpu::{self, CpuSnapshot};

use super::contender::find_binary;
use super::generator_output::{
    aquatic_reports, is_failure_line, window_means, wrk_summary, FailureTally,
};
use super::results::{Generator, GeneratorRun, Point};
use super::tracker::stop_child;

/// aquatic's load testers print a report this often (not configurable).
const REPORT_EVERY_S: u64 = 5;

/// Everything a generator run needs besides the tracker.
#[derive(Clone, Debug)]
pub struct GeneratorSetting<'a> {
    pub generator: Generator,
    pub protocol: &'static str,
    pub tls: bool,
    pub port: u16,
    /// Path of the target URL (`/announce`), for wrk's fixed announce.
    pub path: String,
    pub warmup: Duration,
    pub duration: Duration,
    pub bench_cpus: &'a str,
    pub tracker_cpus: &'a str,
    pub bins: &'a [std::path::PathBuf],
    pub dir: &'a Path,
}

impl GeneratorSetting<'_> {
    /// The binary, or why this generator cannot make this load.
    pub fn binary(&self) -> Result<String> {
        let name = match (self.generator, self.protocol, self.tls) {
            (Generator::Aquatic, "udp", _) => "aquatic_udp_load_test",
            (Generator::Aquatic, "http", _) => "aquatic_http_load_test",
            (Generator::Aquatic, "ws", true) => "aquatic_ws_load_test",
            (Generator::Aquatic, "ws", false) => {
                bail!("aquatic_ws_load_test speaks wss only: use a wss:// target")
            }
            (Generator::Wrk, "http", false) => "wrk",
            (Generator::Wrk, _, _) => {
                bail!("--generator wrk is for plain HTTP (an http:// target)")
            }
            _ => bail!(
                "no {:?} load generator for {}",
                self.generator,
                self.protocol
            ),
        };
        Ok(find_binary(name, self.bins))
    }

    /// Checks the timing the generator can honour.
    pub fn check(&self) -> Result<()> {
        self.binary()?;
        let whole =
            |d: Duration| d.subsec_nanos() == 0 && d.as_secs().is_multiple_of(REPORT_EVERY_S);
        if self.generator == Generator::Aquatic
            && !(whole(self.warmup) && whole(self.duration) && !self.duration.is_zero())
        {
            bail!("aquatic's load testers report every 5 s: --warmup and --duration must be multiples of 5 s");
        }
        Ok(())
    }

    fn total_seconds(&self) -> u64 {
        (self.warmup + self.duration).as_secs_f64().ceil() as u64
    }

    /// The generator's config file (aquatic) and command line, as written to the report.
    pub fn command(&self, point: Point) -> Result<(Vec<String>, Option<String>)> {
        let bin = self.binary()?;
        let total = self.total_seconds();
        let workers = point.workers;
        let head = "# written by shoal-bench compare; everything not named here is the load tester's default\n";
        let config = match (self.generator, self.protocol) {
            (Generator::Wrk, _) => {
                let c = point.clients.unwrap_or(64);
                let url = format!("http://127.0.0.1:{}{}", self.port, fixed_announce(&self.path));
                let words = [
                    bin.as_str(), &format!("-t{workers}"), &format!("-c{c}"), &format!("-d{total}s"),
                    "--latency", "-H", "Connection: close", &url,
                ];
                return Ok((words.iter().map(|w| w.to_string()).collect(), None));
            }
            (_, "udp") => format!(
                "{head}server_address = \"127.0.0.1:{}\"\nlog_level = \"error\"\nworkers = {workers}\n\
                 duration = {total}\nsummarize_last = {}\n\
                 # its per-info-hash histograms cost the load generator CPU\nextra_statistics = false\n",
                self.port,
                self.duration.as_secs()
            ),
            (_, "http") => format!(
                "{head}server_address = \"127.0.0.1:{}\"\nnum_workers = {workers}\nduration = {total}\n\
                 keep_alive = true\nenable_tls = {}\n{}",
                self.port,
                self.tls,
                connections_line(point)
            ),
            // `warn`: it then prints each error response's failure reason (the run's log
            // keeps the first 20 and the notes count them).
            // One report past the window: its connections are still open when the window
            // ends (what the tracker counted is read then), not closing as it exits.
            _ => format!(
                "{head}server_address = \"127.0.0.1:{}\"\nlog_level = \"warn\"\nnum_workers = {workers}\n\
                 duration = {}\nmeasure_after_max_connections_reached = false\n{}",
                self.port,
                total + REPORT_EVERY_S,
                connections_line(point)
            ),
        };
        let path = self.dir.join(format!(
            "{}.toml",
            Path::new(&bin)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
        ));
        std::fs::write(&path, &config)?;
        Ok((
            vec![bin, "-c".into(), path.to_string_lossy().into_owned()],
            Some(config),
        ))
    }

    /// Runs the generator once against the tracker `tracker_pid`; its output goes to `log`.
    pub fn run(
        &self,
        point: Point,
        round: usize,
        tracker_pid: u32,
        log: &Path,
    ) -> Result<GeneratorRun> {
        self.run_with(point, round, tracker_pid, log, &mut || {})
    }

    /// [`GeneratorSetting::run`], calling `at_window_end` when the measured window ends
    /// (for aquatic's testers: when its last report is printed; aquatic_ws_load_test runs
    /// one report longer, so that its connections are still open then).
    pub fn run_with(
        &self,
        point: Point,
        round: usize,
        tracker_pid: u32,
        log: &Path,
        at_window_end: &mut dyn FnMut(),
    ) -> Result<GeneratorRun> {
        let (words, _) = self.command(point)?;
        let mut run = match self.generator {
            Generator::Wrk => self.run_wrk(&words, tracker_pid, log)?,
            _ => self.run_aquatic(&words, tracker_pid, log, at_window_end)?,
        };
        run.round = round;
        run.point = point;
        run.tracker_rss_kib = cpu::rss_kib(tracker_pid);
        let stray = cpu::threads_not_pinned(tracker_pid, self.tracker_cpus);
        if !stray.is_empty() {
            run.notes.push(format!(
                "tracker threads not pinned to {}: {stray:?}",
                self.tracker_cpus
            ));
        }
        Ok(run)
    }

    fn spawn(&self, words: &[String], stdout: Stdio) -> Result<std::process::Child> {
        Command::new("taskset")
            .arg("-c")
            .arg(self.bench_cpus)
            .args(words)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", words.join(" ")))
    }

    fn run_aquatic(
        &self,
        words: &[String],
        tracker_pid: u32,
        log: &Path,
        at_window_end: &mut dyn FnMut(),
    ) -> Result<GeneratorRun> {
        let mut child = self.spawn(words, Stdio::piped())?;
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        for out in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let first = (self.warmup.as_secs() / REPORT_EVERY_S) as usize;
        let last = (self.total_seconds() / REPORT_EVERY_S) as usize;
        let mut start = (first == 0).then(|| CpuSnapshot::of(Some(pid), Some(tracker_pid)));
        let mut end = None;
        let mut text = String::new();
        let mut logged = std::fs::File::create(log)?;
        let (mut reports, mut failures) = (0, 0u64);
        let mut tally = FailureTally::default();
        let deadline = Instant::now() + Duration::from_secs(self.total_seconds() + 60);
        let mut summary = false;
        loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                stop_child(&mut child);
                bail!("the load tester did not finish in time");
            };
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            if is_failure_line(&line) {
                failures += 1;
                tally.add(&line);
                if failures > 20 {
                    continue;
                }
            }
            writeln!(logged, "{line}")?;
            summary |= line.starts_with("# aquatic load test report");
            if !summary && line.trim_start().starts_with("Requests out:") {
                reports += 1;
                if reports == first && start.is_none() {
                    start = Some(CpuSnapshot::of(Some(pid), Some(tracker_pid)));
                }
                if reports == last {
                    end = Some(CpuSnapshot::of(Some(pid), Some(tracker_pid)));
                    at_window_end();
                }
            }
            text.push_str(&line);
            text.push('\n');
        }
        let status = child.wait()?;
        let (Some(start), Some(end)) = (start, end) else {
            bail!(
                "incomplete load tester output ({reports} reports, exit {status}); see {}",
                log.display()
            );
        };
        let means = window_means(&aquatic_reports(&text), first, last);
        let mut run = GeneratorRun {
            responses_per_second: means.get("responses").copied().unwrap_or(0.0),
            rates: means,
            cpu: start.until(&end),
            ..Default::default()
        };
        if failures > 0 {
            run.notes.push(format!(
                "{failures} failure or error responses printed: {}",
                tally.summary(5)
            ));
        }
        let errors = run
            .rates
            .get("error")
            .or(run.rates.get("failure"))
            .copied()
            .unwrap_or(0.0);
        if errors > 0.01 * run.responses_per_second.max(1.0) {
            run.notes.push("more than 1% error responses".into());
        }
        Ok(run)
    }

    fn run_wrk(&self, words: &[String], tracker_pid: u32, log: &Path) -> Result<GeneratorRun> {
        let out = std::fs::File::create(log)?;
        let mut child = self.spawn(words, Stdio::from(out))?;
        let pid = child.id();
        let whole_start = CpuSnapshot::of(Some(pid), Some(tracker_pid));
        std::thread::sleep(self.warmup);
        let start = CpuSnapshot::of(Some(pid), Some(tracker_pid));
        // Not reaped before the last snapshot: a zombie's stat still holds its CPU times.
        let deadline = Instant::now() + self.duration + Duration::from_secs(30);
        while !matches!(cpu::process_state(pid), Some('Z' | 'X') | None) {
            if Instant::now() > deadline {
                stop_child(&mut child);
                bail!("wrk did not finish in time");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let end = CpuSnapshot::of(Some(pid), Some(tracker_pid));
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        child.wait()?;
        let text = std::fs::read_to_string(log)? + &stderr;
        let w = wrk_summary(&text)
            .with_context(|| format!("could not read wrk's output; see {}", log.display()))?;
        let mut run = GeneratorRun {
            responses_per_second: w.requests_per_second,
            cpu: start.until(&end),
            latency_ms: w.latency_ms.clone(),
            ..Default::default()
        };
        run.rates.insert("requests".into(), w.requests_per_second);
        let whole = whole_start.until(&end);
        if let Some(cpu) = whole.tracker_cpu_seconds.filter(|c| *c > 0.0) {
            run.notes.push(format!(
                "whole run: {:.0} responses per tracker CPU-second",
                w.total as f64 / cpu
            ));
        }
        if w.non_2xx > 0 {
            run.notes.push(format!("{} non-2xx responses", w.non_2xx));
        }
        if w.socket_errors.iter().any(|&e| e > 0) {
            let [c, r, wr, t] = w.socket_errors;
            run.notes.push(format!(
                "wrk socket errors: connect {c}, read {r}, write {wr}, timeout {t}"
            ));
        }
        Ok(run)
    }
}

fn connections_line(point: Point) -> String {
    point
        .clients
        .map(|c| format!("num_connections = {c}\n"))
        .unwrap_or_default()
}

/// wrk's one URL: an announce of the workload's first torrent (so that a whitelist made
/// with `shoal-bench info-hashes` admits it), every byte of the binary info hash
/// percent-encoded, with `uploaded` and `downloaded` (aquatic_http wants them).
pub fn fixed_announce(path: &str) -> String {
    let mut q = format!("{path}?info_hash=");
    crate::net::percent_encode(&crate::workload::info_hash(0).0, &mut q);
    q.push_str("&peer_id=");
    crate::net::percent_encode(&crate::workload::peer_id(0, 0).0, &mut q);
    q.push_str("&port=6881&uploaded=0&downloaded=0&left=0&compact=1");
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting<'a>(
        generator: Generator,
        protocol: &'static str,
        tls: bool,
        dir: &'a Path,
    ) -> GeneratorSetting<'a> {
        GeneratorSetting {
            generator,
            protocol,
            tls,
            port: 3200,
            path: "/announce".into(),
            warmup: Duration::from_secs(5),
            duration: Duration::from_secs(10),
            bench_cpus: "1",
            tracker_cpus: "0",
            bins: &[],
            dir,
        }
    }

    #[test]
    fn generators_fit_their_protocols_and_timing() {
        let dir = std::env::temp_dir();
        assert!(setting(Generator::Aquatic, "ws", false, &dir)
            .binary()
            .is_err());
        assert!(setting(Generator::Wrk, "udp", false, &dir)
            .binary()
            .is_err());
        assert!(setting(Generator::Wrk, "http", true, &dir)
            .binary()
            .is_err());
        let mut s = setting(Generator::Aquatic, "udp", false, &dir);
        s.warmup = Duration::from_secs(3);
        assert!(s.check().is_err());
    }

    #[test]
    fn wrk_command_is_one_fixed_announce_without_keep_alive() {
        let dir = std::env::temp_dir();
        let s = setting(Generator::Wrk, "http", false, &dir);
        let (w, config) = s
            .command(Point {
                workers: 1,
                clients: Some(64),
                ..Point::default()
            })
            .unwrap();
        assert!(config.is_none());
        assert_eq!(
            w[1..7],
            [
                "-t1",
                "-c64",
                "-d15s",
                "--latency",
                "-H",
                "Connection: close"
            ]
        );
        assert!(
            w[7].starts_with("http://127.0.0.1:3200/announce?info_hash=%"),
            "{}",
            w[7]
        );
        assert!(w[7].ends_with("&uploaded=0&downloaded=0&left=0&compact=1"));
    }
}
