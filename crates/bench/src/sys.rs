//! The operating-system calls the load generator needs beyond std, all through `nix`.
//!
//! Batched UDP I/O lives in the `shoal-datagrams` crate (shared with the server, and the
//! workspace's only `unsafe`). Here: `poll`, so that an idle worker sleeps instead of
//! spinning (and its CPU figure means something); the open-file limit, raised so that tens
//! of thousands of TCP connections fit; clock ticks, the unit of `/proc/PID/stat`;
//! SIGTERM for the trackers `compare` started; and CPU affinity for pinning.

use std::io;
use std::os::fd::BorrowedFd;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Largest datagram the generator expects back (a 74-hash scrape reply is 896 bytes, an
/// announce reply with 200 IPv6 peers 3620). Longer datagrams are truncated and flagged.
pub const MAX_DATAGRAM: usize = 4096;

/// Waits until one of `fds` is readable or `timeout_ms` passes (an interrupted wait
/// returns early, which is fine for a worker that only naps between sends).
pub fn wait_readable<'a>(
    fds: impl IntoIterator<Item = BorrowedFd<'a>>,
    timeout_ms: u16,
) -> io::Result<()> {
    let mut polls: Vec<PollFd> = fds
        .into_iter()
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    match nix::poll::poll(&mut polls, PollTimeout::from(timeout_ms)) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Waits until one of `fds` is readable or `timeout` passes, to the nanosecond (`ppoll`,
/// where `poll` counts whole milliseconds: an open-loop sender whose next request is due in
/// 25 µs could only spin or oversleep). Returns a mask with bit `i` set when `fds[i]` (one
/// of the first 64) is readable, or every bit when the wait was interrupted, so that the
/// caller looks at all of them.
pub fn wait_readable_for<'a>(
    fds: impl IntoIterator<Item = BorrowedFd<'a>>,
    timeout: std::time::Duration,
) -> io::Result<u64> {
    let mut polls: Vec<PollFd> = fds
        .into_iter()
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    let spec = nix::sys::time::TimeSpec::from_duration(timeout);
    match nix::poll::ppoll(&mut polls, Some(spec), None) {
        Ok(_) => Ok(polls
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, p)| p.any().unwrap_or(true))
            .fold(0, |mask, (i, _)| mask | 1 << i)
            | if polls.len() > 64 { u64::MAX << 63 } else { 0 }),
        Err(nix::errno::Errno::EINTR) => Ok(u64::MAX),
        Err(e) => Err(e.into()),
    }
}

/// Lets the kernel wake this thread at most `ns` late from a timed wait (`PR_SET_TIMERSLACK`;
/// the default is 50 µs, two open-loop intervals at 40,000 requests a second).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    nix::sys::prctl::set_timerslack(ns as _)?;
    Ok(())
}

/// Raises this process's open-file soft limit to its hard limit; returns the new limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(soft.max(hard))
}

/// Clock ticks per second, the unit of the CPU times in `/proc/PID/stat`.
pub fn clock_ticks_per_second() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as u64,
        _ => 100,
    }
}

/// Sends SIGTERM to process `pid` (a tracker this program started).
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    Ok(())
}

/// Parses a taskset-style CPU list (`1`, `0-3`, `0,2`).
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b >= 1024 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => {
                let c: usize = part.parse().ok()?;
                if c >= 1024 {
                    return None;
                }
                cpus.push(c);
            }
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// A CPU list as taskset takes it, runs of consecutive CPUs as ranges: `[0, 1, 2, 5]` ->
/// `0-2,5`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on (its affinity mask, which `taskset` around the whole
/// run narrows), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    Ok((0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// Pins this process (threads started from now on inherit it) to the CPUs in `list`.
pub fn pin_to_cpus(list: &str) -> io::Result<()> {
    let cpus = parse_cpu_list(list)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad CPU list"))?;
    let mut set = nix::sched::CpuSet::new();
    for c in cpus {
        set.set(c)?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("2-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 5]), "0-2,5");
        assert_eq!(format_cpu_list(&[3]), "3");
        assert_eq!(format_cpu_list(&[1, 3, 4]), "1,3-4");
        assert_eq!(format_cpu_list(&[]), "");
        assert!(!allowed_cpus().unwrap().is_empty());
    }

    #[test]
    fn a_timed_wait_reports_the_readable_socket_only() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        use std::os::fd::AsFd;
        // Bounded: the datagram is on loopback already, or arrives within the wait.
        let mask =
            wait_readable_for([a.as_fd(), b.as_fd()], std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(mask, 0b10);
        assert!(set_timer_slack(1_000).is_ok());
    }

    #[test]
    fn nofile_limit_is_raised_to_the_hard_limit() {
        let limit = raise_nofile_limit().unwrap();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!((soft, limit), (hard, hard));
    }
}
