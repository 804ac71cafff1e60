//! This machine as the flood test sees it: where a thread runs and at what priority
//! (`taskset -p`, `renice -p` on thread ids), and how much CPU a group of threads used
//! (`/proc/self/task`).

use std::process::Command;

/// The calling thread's id, for `taskset -p` and `renice -p`.
pub fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name().unwrap().to_string_lossy().into_owned()
}

/// Puts the calling thread on `cpu` and/or at `nice` (threads it spawns inherit both).
pub fn place_this_thread(cpu: Option<&str>, nice: Option<i32>) {
    let tid = thread_id();
    let run = |program: &str, args: &[&str]| {
        let ok = Command::new(program)
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{program} {args:?} failed");
    };
    if let Some(cpu) = cpu {
        run("taskset", &["-p", "-c", cpu, &tid]);
    }
    if let Some(nice) = nice {
        run("renice", &["-n", &nice.to_string(), "-p", &tid]);
    }
}

/// CPU seconds used so far by this process's threads whose name starts with `prefix` (the
/// tracker's UDP workers are `udp-N`), from `/proc/self/task/*/stat`.
pub fn cpu_seconds(prefix: &str) -> f64 {
    let ticks = |task: &std::path::Path| -> Option<u64> {
        let comm = std::fs::read_to_string(task.join("comm")).ok()?;
        if !comm.starts_with(prefix) {
            return None;
        }
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let total: u64 = tasks.flatten().filter_map(|t| ticks(&t.path())).sum();
    // USER_HZ is 100 on Linux.
    total as f64 / 100.0
}
