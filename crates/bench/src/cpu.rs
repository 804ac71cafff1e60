//! CPU use of the load generator, the tracker and everything else, from `/proc`.
//!
//! A tracker that is faster than the load generator shows up as lower tracker CPU, not as
//! more responses, so every run reports CPU beside throughput (benchmarking.md). Times are
//! read at the start and end of the measured window; `/proc/PID/stat` sums all threads of
//! a process, and `/proc/stat` gives the whole machine, so "others" is what is left of the
//! machine's process time (user, nice, system) once tracker, load generator and the
//! kernel's `ksoftirqd` threads are taken out (on loopback their work is the benchmark's own
//! packet delivery, shown apart). Interrupt and softirq time taken outside `ksoftirqd` (the
//! same packet delivery, inline) and steal (the hypervisor's) belong to no process of this
//! machine and are not "others": counting them flagged every quiet UDP run as noisy. The same snapshot
//! serves shoal-bench's own load (the generator is this process) and another program's
//! (the generator is that process), so `compare` can tell a run disturbed by other work
//! whichever load it drives.

use std::fs;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::sys;

/// The machine in words, for the reports: `2 × AMD EPYC ..., Linux 6.18.0`.
pub fn machine_description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = info
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // Online CPUs of the machine, not of this process's affinity mask.
    let cores = info.lines().filter(|l| l.starts_with("processor")).count();
    let cores = if cores > 0 {
        cores
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} × {cpu}, Linux {}", kernel.trim())
}

/// CPU seconds (user + system) used so far by process `pid` (`None`: ourselves).
pub fn process_cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = fs::read_to_string(path).ok()?;
    parse_stat_cpu_ticks(&text).map(|t| t as f64 / sys::clock_ticks_per_second() as f64)
}

/// utime + stime from one `/proc/PID/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds the machine's processes used (all cores: user, nice and system time), from
/// `/proc/stat`.
pub fn machine_busy_seconds() -> Option<f64> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...: the first three are processes'.
    let busy: u64 = v.iter().take(3).sum();
    Some(busy as f64 / sys::clock_ticks_per_second() as f64)
}

/// The state letter of process `pid` (`R`, `S`, `Z` for exited but not yet reaped, ...).
pub fn process_state(pid: u32) -> Option<char> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Resident memory of process `pid`, KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_kib(&text, "VmRSS")
}

/// This process's resident memory now and at its peak, KiB (`VmRSS` and `VmHWM` of
/// `/proc/self/status`): what the load generator itself holds.
pub fn own_memory_kib() -> (Option<u64>, Option<u64>) {
    let text = fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status_kib(&text, "VmRSS"), status_kib(&text, "VmHWM"))
}

/// The value of a `Field:   1234 kB` line of a `/proc/PID/status` text.
fn status_kib(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Open file descriptors of process `pid`.
pub fn fd_count(pid: u32) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The `Cpus_allowed_list` of each thread of `pid` that is not `cpus`: threads that escaped
/// the pinning.
pub fn threads_not_pinned(pid: u32, cpus: &str) -> Vec<(String, String)> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let status = fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            if list.trim() != cpus {
                out.push((
                    t.file_name().to_string_lossy().into_owned(),
                    list.trim().into(),
                ));
            }
        }
    }
    out
}

/// The kernel's softirq threads, found once.
fn ksoftirqd_pids() -> &'static [u32] {
    static PIDS: OnceLock<Vec<u32>> = OnceLock::new();
    PIDS.get_or_init(|| {
        let Ok(dir) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.starts_with("ksoftirqd/"))
            })
            .collect()
    })
}

/// A snapshot of CPU counters at one instant.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    pub at: std::time::Instant,
    pub generator: f64,
    pub tracker: Option<f64>,
    pub machine: Option<f64>,
    pub ksoftirqd: f64,
}

impl CpuSnapshot {
    /// With this process as the load generator.
    pub fn take(tracker_pid: Option<u32>) -> Self {
        Self::of(None, tracker_pid)
    }

    /// With process `generator_pid` as the load generator (`None`: this process).
    pub fn of(generator_pid: Option<u32>, tracker_pid: Option<u32>) -> Self {
        Self {
            at: std::time::Instant::now(),
            generator: process_cpu_seconds(generator_pid).unwrap_or(0.0),
            tracker: tracker_pid.and_then(|p| process_cpu_seconds(Some(p))),
            machine: machine_busy_seconds(),
            ksoftirqd: ksoftirqd_pids()
                .iter()
                .filter_map(|&p| process_cpu_seconds(Some(p)))
                .sum(),
        }
    }

    /// CPU use between `self` and a later snapshot.
    pub fn until(&self, end: &CpuSnapshot) -> CpuUse {
        let wall = end.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let generator = (end.generator - self.generator).max(0.0);
        let tracker = match (self.tracker, end.tracker) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
        let ksoftirqd = (end.ksoftirqd - self.ksoftirqd).max(0.0);
        let others = match (self.machine, end.machine) {
            (Some(a), Some(b)) => {
                Some(((b - a) - generator - tracker.unwrap_or(0.0) - ksoftirqd).max(0.0))
            }
            _ => None,
        };
        CpuUse {
            wall_seconds: wall,
            generator_cpu_seconds: generator,
            generator_percent: 100.0 * generator / wall,
            tracker_cpu_seconds: tracker,
            tracker_percent: tracker.map(|t| 100.0 * t / wall),
            others_percent: others.map(|o| 100.0 * o / wall),
            ksoftirqd_percent: Some(100.0 * ksoftirqd / wall),
        }
    }
}

/// CPU use over a window, in CPU-seconds and percent of one core.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuUse {
    pub wall_seconds: f64,
    pub generator_cpu_seconds: f64,
    pub generator_percent: f64,
    pub tracker_cpu_seconds: Option<f64>,
    pub tracker_percent: Option<f64>,
    /// Everything else on the machine (a run where this is high is suspect).
    pub others_percent: Option<f64>,
    /// The kernel's softirq threads (loopback packet delivery), apart from "others".
    #[serde(default)]
    pub ksoftirqd_percent: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_in_name() {
        let line = "1234 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 4 0 100";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
    }

    #[test]
    fn own_memory_is_read_and_the_peak_is_at_least_the_current() {
        let text = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_kib(text, "VmRSS"), Some(1024));
        assert_eq!(status_kib(text, "VmHWM"), Some(2048));
        assert_eq!(status_kib(text, "VmSwap"), None);
        let (rss, peak) = own_memory_kib();
        let (rss, peak) = (rss.unwrap(), peak.unwrap());
        assert!(rss > 0 && peak >= rss, "{rss} {peak}");
    }

    #[test]
    fn own_cpu_time_grows_when_busy() {
        // The machine may be busy, so spin until 50 ms of CPU were used (bounded by 10 s
        // of wall time) and check that both readings saw them.
        let a = CpuSnapshot::take(Some(std::process::id()));
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_secs() < 10 && process_cpu_seconds(None).unwrap() - a.generator < 0.06
        {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
        }
        std::hint::black_box(x);
        let b = CpuSnapshot::take(Some(std::process::id()));
        let u = a.until(&b);
        assert!(u.generator_cpu_seconds >= 0.05, "{u:?}");
        assert!(u.tracker_cpu_seconds.unwrap() >= 0.05, "{u:?}");
        assert!(u.generator_percent > 0.0 && u.generator_percent <= 100.0 * 64.0);
    }
}
