//! A listening TCP socket watched by tokio's event loop, without tokio's accept.
//!
//! `tokio::net::TcpListener::accept` registers every connection it returns with the
//! event loop (an `epoll_ctl` to add it, one to remove it at the close, and the
//! registration's memory), which a connection answered and closed where it was accepted
//! never needs: the HTTP accept loop takes the listener's readiness from tokio and
//! accepts itself. Tokio made the registration of a descriptor it does not own
//! `unsafe` (the caller vouches that it stays open), hence this wrapper here.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A non-blocking listener whose readability tokio watches.
pub struct WatchedListener(AsyncFd<TcpListener>);

impl WatchedListener {
    /// Watches `listener` (which must be non-blocking) on the current tokio runtime.
    pub fn new(listener: TcpListener) -> io::Result<Self> {
        // SAFETY: the `AsyncFd` owns the listener for its whole life and hands out only
        // shared references to it, so the descriptor it registered stays open and is the
        // one `as_raw_fd` returns until the `AsyncFd` (deregistering first) is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) };
        fd.map(Self).map_err(io::Error::from)
    }

    /// The listener itself (for a non-blocking `accept` or its descriptor).
    pub fn get_ref(&self) -> &TcpListener {
        self.0.get_ref()
    }

    /// The next connection, as a std stream in blocking mode, registered nowhere.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            let mut ready = self.0.readable().await?;
            if let Ok(accepted) = ready.try_io(|l| l.get_ref().accept()) {
                return accepted;
            }
        }
    }
}
