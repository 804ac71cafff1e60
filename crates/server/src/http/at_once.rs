//! The accept loop's fast path for plain HTTP: answer a connection whose whole request has
//! already arrived, right where it was accepted.
//!
//! A client sends its request as soon as the connection is up, so by the time `accept`
//! returns the request is usually waiting in the socket. Reading it there with one
//! non-blocking `recv`, answering from a buffer and a handler that the accept loop owns
//! and reuses, and writing the response with one non-blocking `send` saves what the
//! general path costs per connection: a task, its buffers, timers, a round through the
//! event loop before the first read, `TCP_NODELAY`, and a `shutdown` before the close.
//! Without keep-alive that is most of shoal's own work per request (the kernel's accept
//! and close are the rest), which is what a close-per-request benchmark measures. The
//! connection is not even registered with tokio's event loop (two `epoll_ctl` calls, and
//! the registration's memory): the accept loop hands it to tokio only if it goes on.
//!
//! Whatever is not that simple case goes to the general path ([`super::connection`]) with
//! the bytes read so far and nothing written: a partial head, a WebSocket upgrade, a
//! response the socket would not take at once. Nothing here waits, so nothing needs a
//! timeout.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::socket::{recv, send, MsgFlags};

use super::connection::{answer_head, Head};
use super::context::HttpContext;
use super::handler::{Handler, Next};
use crate::ws::UpgradeRequest;

/// What became of a freshly accepted connection.
pub enum Outcome {
    /// Answered in full; drop the connection (the close sends the FIN).
    Done,
    /// Serve it in the general path, starting from these bytes (nothing was written).
    Serve(Vec<u8>),
    /// The response was written in full and the connection stays open: serve the next
    /// requests in the general path, starting from what the client pipelined.
    KeepAlive(Vec<u8>),
    /// The socket took only part of the response: write `rest`, then close or go on.
    Rest {
        rest: Vec<u8>,
        close: bool,
        leftover: Vec<u8>,
    },
    /// A WebSocket upgrade, for the WebTorrent front end.
    Upgrade(UpgradeRequest),
}

/// The accept loop's reusable state.
pub struct AtOnce {
    handler: Handler,
    buf: Box<[u8]>,
    out: Vec<u8>,
    max_headers: usize,
}

impl AtOnce {
    pub fn new(ctx: Arc<HttpContext>) -> Self {
        let buf = vec![0u8; ctx.settings.max_request_bytes].into_boxed_slice();
        let max_headers = ctx.settings.max_headers;
        Self {
            handler: Handler::new(ctx),
            buf,
            out: Vec::with_capacity(512),
            max_headers,
        }
    }

    /// Tries to answer `tcp` without waiting. The socket may be in blocking mode (it is
    /// not yet tokio's): every call here says `MSG_DONTWAIT`.
    pub fn try_answer(&mut self, tcp: &TcpStream, remote: SocketAddr) -> Outcome {
        self.handler.new_connection();
        let fd = tcp.as_raw_fd();
        // One recv, data or not.
        let filled = match recv(fd, &mut self.buf, MsgFlags::MSG_DONTWAIT) {
            Ok(0) => return Outcome::Done,
            Ok(n) => n,
            Err(Errno::EAGAIN) => return Outcome::Serve(Vec::new()),
            Err(_) => return Outcome::Done,
        };
        let head = answer_head(
            &self.buf[..filled],
            self.max_headers,
            &mut self.handler,
            remote,
            &mut self.out,
        );
        let (head_len, next) = match head {
            Head::Complete(n, next) => (n, next),
            Head::Partial => return Outcome::Serve(self.buf[..filled].to_vec()),
            Head::Bad => {
                // Best effort, then close: the general path does the same with a timeout.
                let _ = send(
                    fd,
                    &self.out,
                    MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                );
                return Outcome::Done;
            }
        };
        let leftover = &self.buf[head_len..filled];
        let (body, close): (&[u8], bool) = match &next {
            Next::Close => (&[], true),
            Next::KeepAlive => (&[], false),
            Next::SendDocument { doc, gzip, close } => match doc.as_sent(*gzip) {
                Some(body) => (body, *close),
                // The plain form of a gzip document is inflated as it is written: the
                // general path does that.
                None => return Outcome::Serve(self.buf[..filled].to_vec()),
            },
            // A control call has a body to read: the general path reads it.
            Next::SiteCall(_) => return Outcome::Serve(self.buf[..filled].to_vec()),
            Next::Upgrade(_) => {
                let Next::Upgrade(u) = next else {
                    unreachable!()
                };
                return Outcome::Upgrade(u);
            }
        };
        // Not with bytes left unread: closing such a socket resets it, and a response held
        // back for the FIN would be thrown away with it.
        let written = write_some(fd, &self.out, body, close && leftover.is_empty());
        let total = self.out.len() + body.len();
        if written < total {
            let mut rest = Vec::with_capacity(total - written);
            if written < self.out.len() {
                rest.extend_from_slice(&self.out[written..]);
                rest.extend_from_slice(body);
            } else {
                rest.extend_from_slice(&body[written - self.out.len()..]);
            }
            return Outcome::Rest {
                rest,
                close,
                leftover: leftover.to_vec(),
            };
        }
        if close {
            Outcome::Done
        } else {
            Outcome::KeepAlive(leftover.to_vec())
        }
    }
}

/// Writes `head` then `body` without waiting; returns how many bytes went.
///
/// When the connection is closed right after (`closing`), the last bytes are sent with
/// `MSG_MORE`: the kernel holds them until the close, whose FIN then rides in the same
/// segment as the response: one packet instead of two, each of which costs a transmit
/// here and a receive at the client. (The close follows at once, so nothing is held back
/// for long.)
fn write_some(fd: std::os::fd::RawFd, head: &[u8], body: &[u8], closing: bool) -> usize {
    let mut written = 0;
    let parts: &[&[u8]] = if body.is_empty() {
        &[head]
    } else {
        &[head, body]
    };
    for (i, part) in parts.iter().enumerate() {
        let mut flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        if closing && i + 1 == parts.len() {
            // nix does not name it.
            flags |= MsgFlags::from_bits_retain(libc::MSG_MORE);
        }
        let mut at = 0;
        while at < part.len() {
            match send(fd, &part[at..], flags) {
                Ok(0) | Err(_) => return written + at,
                Ok(n) => at += n,
            }
        }
        written += part.len();
    }
    written
}
