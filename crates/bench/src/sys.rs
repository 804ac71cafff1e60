//! The few system calls the load generator needs that std does not offer.
//!
//! Batched UDP I/O (`recvmmsg`/`sendmmsg`) is what lets one core of load generator keep up
//! with a tracker on another core: one syscall moves dozens of datagrams, and the kernel's
//! per-call cost, not our code, is most of a UDP client's CPU time. `poll` lets an idle
//! worker sleep instead of spinning (so its CPU figure means something), and the open-file
//! limit is raised so that tens of thousands of TCP connections fit. All `unsafe` in the
//! crate lives here, each block with the reason it is sound.

use std::io;
use std::os::fd::RawFd;

/// Largest datagram the generator expects back (a 74-hash scrape reply is 896 bytes, an
/// announce reply with 200 IPv6 peers 3620). Longer datagrams are truncated and flagged.
pub const MAX_DATAGRAM: usize = 4096;

/// Receive buffers for one `recvmmsg` call, reused across calls.
pub struct RecvBatch {
    bufs: Vec<u8>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

// The raw pointers inside `iovecs`/`headers` are rebuilt before every call from `bufs`,
// which this struct owns, so moving a batch to another thread is sound.
// SAFETY: no pointer stored in the batch outlives a `recv` call; see above.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, 1024);
        Self {
            bufs: vec![0; capacity * MAX_DATAGRAM],
            lens: vec![0; capacity],
            truncated: vec![false; capacity],
            // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes are a
            // valid value (null pointers, zero lengths).
            iovecs: vec![unsafe { std::mem::zeroed() }; capacity],
            // SAFETY: as above.
            headers: vec![unsafe { std::mem::zeroed() }; capacity],
        }
    }

    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The `i`th datagram of the last call, and whether the kernel truncated it.
    pub fn get(&self, i: usize) -> (&[u8], bool) {
        let start = i * MAX_DATAGRAM;
        (&self.bufs[start..start + self.lens[i]], self.truncated[i])
    }

    /// Receives up to `capacity` datagrams from `fd` without blocking. Returns how many
    /// arrived (0 when none are waiting).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let n = self.capacity();
        for i in 0..n {
            self.iovecs[i] = libc::iovec {
                iov_base: self.bufs[i * MAX_DATAGRAM..].as_mut_ptr().cast(),
                iov_len: MAX_DATAGRAM,
            };
            // SAFETY: all-zero is a valid msghdr; the fields we need are set below.
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = &mut self.iovecs[i];
            hdr.msg_iovlen = 1;
            self.headers[i] = libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            };
        }
        // SAFETY: `headers` holds `n` initialised mmsghdrs whose iovecs point into `bufs`,
        // each MAX_DATAGRAM bytes long and exclusively borrowed for the call; no address
        // buffer is passed (msg_name is null), and a null timeout is allowed.
        let got = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(err),
            };
        }
        let got = got as usize;
        for i in 0..got {
            let h = &self.headers[i];
            self.lens[i] = (h.msg_len as usize).min(MAX_DATAGRAM);
            self.truncated[i] = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        }
        Ok(got)
    }
}

/// Scratch space for one `sendmmsg` call.
pub struct SendBatch {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

// SAFETY: the pointers inside are only meaningful during one `send` call, which rebuilds
// them from the caller's borrowed slices; nothing dangling is ever read.
unsafe impl Send for SendBatch {}

impl Default for SendBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl SendBatch {
    pub fn new() -> Self {
        Self {
            iovecs: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// Sends `packets` on the connected socket `fd` in one call (at most 1024 at a time,
    /// the kernel's limit). Returns how many were sent; fewer than asked means the socket
    /// buffer is full and the rest should be retried later.
    pub fn send(&mut self, fd: RawFd, packets: &[&[u8]]) -> io::Result<usize> {
        let n = packets.len().min(1024);
        if n == 0 {
            return Ok(0);
        }
        self.iovecs.clear();
        for p in &packets[..n] {
            self.iovecs.push(libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            });
        }
        self.headers.clear();
        for i in 0..n {
            // SAFETY: all-zero is a valid msghdr; the iovec fields are set below.
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = &mut self.iovecs[i];
            hdr.msg_iovlen = 1;
            self.headers.push(libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            });
        }
        // SAFETY: `headers` holds `n` initialised mmsghdrs whose iovecs point to the
        // caller's packets, borrowed for the duration of the call; the kernel only reads
        // them. The socket is connected, so no destination address is needed.
        let sent = unsafe {
            libc::sendmmsg(
                fd,
                self.headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(err),
            };
        }
        Ok(sent as usize)
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes.
pub fn wait_readable(fds: &mut Vec<libc::pollfd>, timeout_ms: i32) -> io::Result<()> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfds.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

/// A pollfd for `fd`, for [`wait_readable`].
pub fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Raises this process's open-file soft limit to its hard limit; returns the new limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    // SAFETY: all-zero is a valid rlimit, filled in by getrlimit.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is a valid, exclusively borrowed rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit; raising the soft limit up to the hard limit is
        // always permitted.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(lim.rlim_cur as u64)
}

/// Clock ticks per second, the unit of the CPU times in `/proc/PID/stat`.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Sends SIGTERM to process `pid` (a tracker this program started).
pub fn terminate(pid: u32) -> io::Result<()> {
    // SAFETY: kill has no memory effects; the caller passes the PID of its own child.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error());
    }
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

/// Pins this process (threads started from now on inherit it) to the CPUs in `list`.
pub fn pin_to_cpus(list: &str) -> io::Result<()> {
    let cpus = parse_cpu_list(list)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad CPU list"))?;
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus {
        // SAFETY: CPU_SET writes inside `set`; `c` < 1024 = CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
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
    }

    #[test]
    fn batched_udp_round_trip() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        use std::os::fd::AsRawFd;
        let packets: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 10 + i as usize]).collect();
        let refs: Vec<&[u8]> = packets.iter().map(|p| p.as_slice()).collect();
        assert_eq!(SendBatch::new().send(a.as_raw_fd(), &refs).unwrap(), 10);
        let mut batch = RecvBatch::new(4);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 10 && std::time::Instant::now() < deadline {
            let n = batch.recv(b.as_raw_fd()).unwrap();
            assert!(n <= 4);
            for i in 0..n {
                let (d, truncated) = batch.get(i);
                assert!(!truncated);
                got.push(d.to_vec());
            }
        }
        assert_eq!(got, packets);
    }
}
