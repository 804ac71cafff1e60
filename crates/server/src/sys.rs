//! The syscalls the standard library does not wrap: batched datagram I/O.
//!
//! This is the only module of the server with `unsafe`. `recvmmsg` and `sendmmsg` move a
//! whole batch of datagrams per system call, which is what a UDP tracker's throughput
//! rests on: the kernel's per-call cost dominates the work of answering a request.
//!
//! [`Datagrams`] owns one batch worth of buffers, addresses and the `mmsghdr` array that
//! points into them. The buffers live in boxed slices that are never resized, so the
//! pointers written into the headers stay valid for the life of the value; they are
//! rewritten before every call anyway, so a moved `Datagrams` is still correct.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

/// A batch of datagram slots: buffers, peer addresses and lengths.
pub struct Datagrams {
    data: Box<[u8]>,
    slot_size: usize,
    lens: Box<[usize]>,
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
            let h = &mut self.headers[i];
            h.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = if receiving {
                size_of::<libc::sockaddr_storage>() as libc::socklen_t
            } else {
                self.addr_lens[i]
            };
            h.msg_hdr.msg_iov = &mut self.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
    }

    /// Receives up to a full batch: blocks until one datagram arrives (or the socket's
    /// receive timeout passes), then takes whatever else is already queued.
    pub fn recv(&mut self, socket: &impl AsRawFd) -> io::Result<usize> {
        let n = self.capacity();
        self.prepare(n, true);
        let fd: RawFd = socket.as_raw_fd();
        // SAFETY: `headers[..n]` point at `n` iovecs and address slots owned by `self`,
        // each iovec covering its own `slot_size` bytes of `data`; the kernel writes within
        // those bounds only. The pointers stay valid for the duration of the call.
        let got = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got as usize;
        for i in 0..got {
            self.lens[i] = (self.headers[i].msg_len as usize).min(self.slot_size);
            self.addr_lens[i] = self.headers[i].msg_hdr.msg_namelen;
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

/// Sets `TCP_DEFER_ACCEPT` on a listening socket: the kernel completes `accept` only once
/// the client has sent data (or after about `seconds`), so the request is already in the
/// socket when the tracker first looks at it, and a client that connects and says nothing
/// waits in the kernel rather than holding a file descriptor of ours.
pub fn set_tcp_defer_accept(socket: &impl AsRawFd, seconds: i32) -> io::Result<()> {
    let value: libc::c_int = seconds;
    // SAFETY: `value` is a live c_int for the duration of the call and its size is passed
    // as the option length; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    #[test]
    fn batch_round_trip_over_loopback() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        for i in 0..5u8 {
            client
                .send_to(&[i; 10], server.local_addr().unwrap())
                .unwrap();
        }
        let mut inbox = Datagrams::new(8, 64);
        let mut got = 0;
        while got < 5 {
            let n = inbox.recv(&server).unwrap();
            assert!(n >= 1);
            got += n;
            assert_eq!(inbox.addr(0).unwrap(), client.local_addr().unwrap());
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
}
