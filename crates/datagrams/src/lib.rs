//! The system calls safe Rust cannot make, behind safe types: batched datagram I/O
//! (`recvmmsg` and `sendmmsg`, the crate's first job and its name) and a TCP listener whose
//! readiness tokio watches while shoal accepts itself ([`WatchedListener`]). It is the
//! workspace's one crate with `unsafe`: whatever needs it comes here, behind a safe type.
//!
//! A UDP tracker's throughput, and a UDP load generator's, rests on moving a whole batch of
//! datagrams per system call: the kernel's per-call cost dominates the work of answering
//! (or of asking) a BEP 15 request. Neither std nor socket2 nor nix offers a batch API that
//! reuses its buffers without allocating per call, so this crate wraps the two syscalls
//! once, for the server and for shoal-bench, the way quinn keeps `quinn-udp` apart from
//! its protocol crate. It is the only crate of the workspace with `unsafe`; each block
//! says why it is sound.
//!
//! - [`Datagrams`] owns one batch worth of slots (buffers, peer addresses, lengths) and the
//!   `mmsghdr` array that points into them: receive into it, answer into another one, send.
//! - [`SendBatch`] sends datagrams the caller already holds, on a connected socket.
//! - [`WatchedListener`]: a TCP listener whose readiness tokio watches, accepted by the
//!   HTTP workers themselves (no registration per connection); tokio makes registering a
//!   descriptor it does not own `unsafe`, so it lives here.
//! - [`malloc::map_blocks_from`]: the one allocator setting the server makes at start
//!   (glibc's mmap threshold), which keeps the store's growing arrays from leaving holes.

pub mod malloc;

mod watch;
pub use watch::WatchedListener;

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

/// How [`Datagrams::recv`] waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Block until one datagram arrives (or the socket's receive timeout passes), then take
    /// whatever else is already queued (`MSG_WAITFORONE`): a server worker.
    ForOne,
    /// Take what is queued and return at once, 0 when nothing is (`MSG_DONTWAIT`): a load
    /// generator that also has requests to send.
    No,
}

/// A batch of datagram slots: buffers, peer addresses and lengths.
///
/// The buffers live in boxed slices that are never resized, so the pointers written into
/// the headers stay valid for the life of the value; they are rewritten before every call
/// anyway, so a moved `Datagrams` is still correct.
pub struct Datagrams {
    data: Box<[u8]>,
    slot_size: usize,
    lens: Box<[usize]>,
    truncated: Box<[bool]>,
    addrs: Box<[libc::sockaddr_storage]>,
    addr_lens: Box<[libc::socklen_t]>,
    iovecs: Box<[libc::iovec]>,
    headers: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers inside `iovecs` and `headers` only ever point into this value's
// own boxed slices; nothing is shared with another thread.
unsafe impl Send for Datagrams {}

impl Datagrams {
    /// `count` slots of `slot_size` bytes each.
    pub fn new(count: usize, slot_size: usize) -> Self {
        // SAFETY: all-zero is a valid value for these plain C structs (null pointers, zero
        // lengths).
        let zero_addr: libc::sockaddr_storage = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_iov: libc::iovec = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        Self {
            data: vec![0u8; count * slot_size].into_boxed_slice(),
            slot_size,
            lens: vec![0; count].into_boxed_slice(),
            truncated: vec![false; count].into_boxed_slice(),
            addrs: vec![zero_addr; count].into_boxed_slice(),
            addr_lens: vec![0; count].into_boxed_slice(),
            iovecs: vec![zero_iov; count].into_boxed_slice(),
            headers: vec![zero_hdr; count].into_boxed_slice(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The bytes of slot `i` (its received length, or what was set with [`Self::set_len`]).
    pub fn payload(&self, i: usize) -> &[u8] {
        let start = i * self.slot_size;
        &self.data[start..start + self.lens[i]]
    }

    /// Whether the datagram received into slot `i` was longer than the slot (and cut).
    pub fn truncated(&self, i: usize) -> bool {
        self.truncated[i]
    }

    /// The whole buffer of slot `i`, to write a datagram into.
    pub fn buffer_mut(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.slot_size;
        &mut self.data[start..start + self.slot_size]
    }

    pub fn set_len(&mut self, i: usize, len: usize) {
        self.lens[i] = len.min(self.slot_size);
    }

    /// The peer address of slot `i`, if it is an IPv4 or IPv6 one.
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        let storage = &self.addrs[i];
        match i32::from(storage.ss_family) {
            libc::AF_INET if self.addr_lens[i] as usize >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says this storage holds a sockaddr_in, the length says
                // it was filled that far, and sockaddr_storage is aligned for every
                // sockaddr type.
                let sin = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    u32::from_be(sin.sin_addr.s_addr).into(),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if self.addr_lens[i] as usize >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let sin6 = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// Copies slot `from` of `other`'s address into slot `i` (a reply goes where the
    /// request came from).
    pub fn copy_addr_from(&mut self, i: usize, other: &Datagrams, from: usize) {
        self.addrs[i] = other.addrs[from];
        self.addr_lens[i] = other.addr_lens[from];
    }

    /// Points headers `0..n` at their slots. Receiving, each slot takes its whole buffer
    /// and any address; sending, its set length and its address (none: a connected socket).
    fn prepare(&mut self, n: usize, receiving: bool) {
        for i in 0..n {
            let start = i * self.slot_size;
            self.iovecs[i] = libc::iovec {
                iov_base: self.data[start..].as_mut_ptr().cast(),
                iov_len: if receiving {
                    self.slot_size
                } else {
                    self.lens[i]
                },
            };
            let name_len = if receiving {
                size_of::<libc::sockaddr_storage>() as libc::socklen_t
            } else {
                self.addr_lens[i]
            };
            let h = &mut self.headers[i];
            h.msg_hdr.msg_name = if name_len == 0 {
                std::ptr::null_mut()
            } else {
                (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast()
            };
            h.msg_hdr.msg_namelen = name_len;
            h.msg_hdr.msg_iov = &mut self.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
    }

    /// Receives up to a full batch; returns how many slots were filled. With
    /// [`Wait::No`], nothing queued is `Ok(0)`, not an error.
    pub fn recv(&mut self, socket: &impl AsRawFd, wait: Wait) -> io::Result<usize> {
        let n = self.capacity();
        self.prepare(n, true);
        let fd: RawFd = socket.as_raw_fd();
        let flags = match wait {
            Wait::ForOne => libc::MSG_WAITFORONE,
            Wait::No => libc::MSG_DONTWAIT,
        };
        // SAFETY: `headers[..n]` point at `n` iovecs and address slots owned by `self`,
        // each iovec covering its own `slot_size` bytes of `data`; the kernel writes within
        // those bounds only. The pointers stay valid for the duration of the call.
        let got = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                n as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            let err = io::Error::last_os_error();
            return match (wait, err.kind()) {
                (Wait::No, io::ErrorKind::WouldBlock) => Ok(0),
                _ => Err(err),
            };
        }
        let got = got as usize;
        for i in 0..got {
            let h = &self.headers[i];
            self.lens[i] = (h.msg_len as usize).min(self.slot_size);
            self.truncated[i] = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            self.addr_lens[i] = h.msg_hdr.msg_namelen;
        }
        Ok(got)
    }

    /// Sends slots `0..n` (lengths and addresses set beforehand). Returns how many went;
    /// a datagram the kernel refuses (for example to an unreachable address) is skipped
    /// rather than retried forever.
    pub fn send(&mut self, socket: &impl AsRawFd, n: usize) -> usize {
        let n = n.min(self.capacity());
        self.prepare(n, false);
        let fd: RawFd = socket.as_raw_fd();
        let mut sent = 0;
        let mut skipped = 0;
        while sent + skipped < n {
            let offset = sent + skipped;
            // SAFETY: `headers[offset..n]` were prepared above and point into `self`'s
            // buffers, which outlive the call; the kernel only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.headers[offset..].as_mut_ptr(),
                    (n - offset) as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                sent += r as usize;
            } else {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first datagram of the rest failed: drop it and go on.
                skipped += 1;
            }
        }
        sent
    }
}

/// Scratch space for sending datagrams the caller holds (no copy into slots), on a
/// connected socket: what a load generator does with requests it built in place.
///
/// With [`SendBatch::gso`] on, runs of equal-sized datagrams go to the kernel as one
/// message each with a `UDP_SEGMENT` control message (UDP generic segmentation offload,
/// Linux 4.18+): the kernel builds one large datagram and cuts it into the same datagrams
/// the receiver would have got one by one, so the socket, routing and IP output path is
/// walked once per run instead of once per datagram. A load generator sends nearly all its
/// requests to one address at a handful of sizes, so the runs are long; profiled,
/// `sendmmsg` was 70% of shoal-bench's UDP worker. If the kernel refuses the option
/// (`EIO`, `EINVAL`, `ENOPROTOOPT`: no support, or a device that cannot take it), GSO is
/// turned off for this batch and the datagrams are sent one per message.
pub struct SendBatch {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Datagrams carried by each header (1 without GSO).
    counts: Vec<usize>,
    /// One control-message buffer per header, `u64`s for the alignment `cmsghdr` needs.
    controls: Vec<[u64; CONTROL_WORDS]>,
    gso: bool,
}

/// Room for one `cmsghdr` with a `u16` (`CMSG_SPACE(2)` is 24 bytes on 64-bit Linux).
const CONTROL_WORDS: usize = 4;
/// The most datagrams one GSO message may carry (the kernel's `UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGMENTS: usize = 64;
/// The most payload bytes of one GSO message (a UDP datagram's limit, with room to spare).
const GSO_MAX_BYTES: usize = 65_000;

// SAFETY: the pointers inside are only meaningful during one `send` call, which rebuilds
// them from the caller's borrowed slices; nothing dangling is ever read.
unsafe impl Send for SendBatch {}

impl Default for SendBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl SendBatch {
    /// One datagram per message (no GSO).
    pub fn new() -> Self {
        Self {
            iovecs: Vec::new(),
            headers: Vec::new(),
            counts: Vec::new(),
            controls: Vec::new(),
            gso: false,
        }
    }

    /// Turns UDP GSO on or off (see the type's documentation).
    pub fn gso(mut self, on: bool) -> Self {
        self.gso = on;
        self
    }

    /// Whether GSO is on (it turns itself off if the kernel refused it).
    pub fn gso_enabled(&self) -> bool {
        self.gso
    }

    /// Sends `packets` on the connected socket in one call without blocking. Returns how
    /// many were sent, from the front; fewer than asked means the socket buffer is full (or
    /// the call's limit of 1024 messages was reached) and the rest should be retried.
    pub fn send(&mut self, socket: &impl AsRawFd, packets: &[&[u8]]) -> io::Result<usize> {
        if packets.is_empty() {
            return Ok(0);
        }
        if self.gso {
            match self.send_once(socket.as_raw_fd(), packets, true) {
                Err(e) if gso_refused(&e) => self.gso = false,
                other => return other,
            }
        }
        self.send_once(socket.as_raw_fd(), packets, false)
    }

    fn send_once(&mut self, fd: RawFd, packets: &[&[u8]], gso: bool) -> io::Result<usize> {
        self.iovecs.clear();
        self.counts.clear();
        // Group the packets: with GSO, a run of equal sizes up to a message's limits;
        // without, one each.
        let mut i = 0;
        while i < packets.len() && self.counts.len() < 1024 {
            let size = packets[i].len();
            let mut n = 1;
            let mut bytes = size;
            if gso && size > 0 {
                while i + n < packets.len()
                    && n < GSO_MAX_SEGMENTS
                    && bytes + packets[i + n].len() <= GSO_MAX_BYTES
                    && packets[i + n].len() == size
                {
                    bytes += size;
                    n += 1;
                }
            }
            self.counts.push(n);
            i += n;
        }
        let messages = self.counts.len();
        self.iovecs.extend(packets[..i].iter().map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        }));
        if self.controls.len() < messages {
            self.controls.resize(messages, [0; CONTROL_WORDS]);
        }
        self.headers.clear();
        let mut first = 0;
        for m in 0..messages {
            let n = self.counts[m];
            // SAFETY: all-zero is a valid msghdr; the iovec fields are set below.
            let mut hdr: libc::msghdr = unsafe { zeroed() };
            hdr.msg_iov = self.iovecs[first..].as_mut_ptr();
            hdr.msg_iovlen = n;
            if n > 1 {
                let control = &mut self.controls[m];
                *control = [0; CONTROL_WORDS];
                hdr.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                // SAFETY: CMSG_SPACE only computes a size.
                hdr.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as usize;
                debug_assert!(hdr.msg_controllen <= CONTROL_WORDS * 8);
                // SAFETY: msg_control points to `controls[m]`, zeroed and large enough for
                // one cmsghdr carrying a u16 (checked above), and 8-byte aligned; so
                // CMSG_FIRSTHDR is that buffer and CMSG_DATA lies inside it.
                unsafe {
                    let cmsg = libc::CMSG_FIRSTHDR(&hdr);
                    (*cmsg).cmsg_level = libc::SOL_UDP;
                    (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                    let size = packets[first].len() as u16;
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, size);
                }
            }
            self.headers.push(libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            });
            first += n;
        }
        // SAFETY: `headers` holds `messages` initialised mmsghdrs whose iovecs point to
        // the caller's packets (borrowed for the duration of the call) and whose control
        // buffers live in `self.controls`, neither moved nor resized until the call
        // returns; the kernel only reads them. The socket is connected, so no destination
        // address is needed.
        let sent = unsafe {
            libc::sendmmsg(
                fd,
                self.headers.as_mut_ptr(),
                messages as libc::c_uint,
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
        Ok(self.counts[..sent as usize].iter().sum())
    }
}

/// Whether a send failed because the kernel (or the route's device) does not take
/// `UDP_SEGMENT`.
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};

    fn socket() -> UdpSocket {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s
    }

    #[test]
    fn slots_round_trip_with_addresses() {
        let (server, client) = (socket(), socket());
        for i in 0..5u8 {
            client
                .send_to(&[i; 10], server.local_addr().unwrap())
                .unwrap();
        }
        let mut inbox = Datagrams::new(8, 64);
        let mut got = 0;
        while got < 5 {
            let n = inbox.recv(&server, Wait::ForOne).unwrap();
            assert!(n >= 1);
            got += n;
            assert_eq!(inbox.addr(0).unwrap(), client.local_addr().unwrap());
            assert!(!inbox.truncated(0));
        }
        let mut outbox = Datagrams::new(8, 64);
        outbox.buffer_mut(0)[..3].copy_from_slice(b"abc");
        outbox.set_len(0, 3);
        outbox.copy_addr_from(0, &inbox, 0);
        assert_eq!(outbox.send(&server, 1), 1);
        let mut buf = [0u8; 16];
        let (n, _) = client.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"abc");
    }

    #[test]
    fn borrowed_packets_on_a_connected_socket_and_truncation() {
        let (a, b) = (socket(), socket());
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        let packets: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 10 + i as usize]).collect();
        let refs: Vec<&[u8]> = packets.iter().map(|p| p.as_slice()).collect();
        assert_eq!(SendBatch::new().send(&a, &refs).unwrap(), 10);
        // Slots of 15 bytes: datagrams 6..10 (16 to 19 bytes) arrive cut.
        let mut batch = Datagrams::new(4, 15);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 10 && Instant::now() < deadline {
            let n = batch.recv(&b, Wait::No).unwrap();
            assert!(n <= 4);
            for i in 0..n {
                got.push((batch.payload(i).to_vec(), batch.truncated(i)));
            }
        }
        let want: Vec<(Vec<u8>, bool)> = packets
            .iter()
            .map(|p| (p[..p.len().min(15)].to_vec(), p.len() > 15))
            .collect();
        assert_eq!(got, want);
        // Nothing queued: Wait::No answers 0 at once.
        assert_eq!(batch.recv(&b, Wait::No).unwrap(), 0);
    }

    #[test]
    fn gso_sends_the_same_datagrams() {
        let (a, b) = (socket(), socket());
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        // Runs of equal sizes (longer than one GSO message's 64) and sizes that change
        // every packet.
        let mut packets: Vec<Vec<u8>> = Vec::new();
        for i in 0..150u32 {
            packets.push(vec![(i % 251) as u8; 98]);
        }
        packets.push(vec![7; 40]);
        for i in 0..20u8 {
            packets.push(vec![i; 16 + usize::from(i)]);
        }
        let refs: Vec<&[u8]> = packets.iter().map(|p| p.as_slice()).collect();
        let mut batch = SendBatch::new().gso(true);
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while sent < refs.len() && Instant::now() < deadline {
            sent += batch.send(&a, &refs[sent..]).unwrap();
        }
        assert_eq!(sent, refs.len());
        assert!(
            batch.gso_enabled(),
            "the kernel refused UDP_SEGMENT on loopback"
        );
        let mut inbox = Datagrams::new(64, 256);
        let mut got = Vec::new();
        while got.len() < packets.len() && Instant::now() < deadline {
            let n = inbox.recv(&b, Wait::No).unwrap();
            for i in 0..n {
                got.push(inbox.payload(i).to_vec());
            }
        }
        // Every datagram arrives once, cut where it was cut, in order.
        assert_eq!(got, packets);
    }
}
