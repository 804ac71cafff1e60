//! The TCP socket under a WebSocket connection, plain or TLS: where its send buffer is
//! sized (`ws.send_buffer`).
//!
//! Left to itself, Linux grows a socket's send buffer up to `net.ipv4.tcp_wmem`'s maximum
//! (4 MiB by default) for a client that reads slowly, and reports the socket writable
//! again only once a third of what it holds has been read. Under aquatic_ws_load_test, one
//! of whose connections its own executor serves at times with a few hundred messages a
//! second (about 85 KB/s), that wait passed `ws.send_timeout` (10 s) with the client
//! reading all along: shoal closed a busy connection, and the answers to its peers' offers
//! got `answer to a peer that has left` (1 to 8 connections and 10 to 800 such failures
//! in 40 s, in about half the runs on the 2-core VM). Megabytes queued in the kernel for
//! one client are also seconds of stale offers. A bounded buffer keeps what is in flight
//! to a client to what it reads in a fraction of a second; the tracker's own queues
//! decide what waits beyond that, and in which order.

use tokio::net::TcpStream;

/// A stream whose TCP socket can be reached, if it has one: the HTTP listeners' plain and
/// TLS streams do, the Unix socket's (`[http] unix_socket`) does not.
pub trait OverTcp {
    fn tcp(&self) -> Option<&TcpStream>;
}

impl OverTcp for TcpStream {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl OverTcp for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self.get_ref().0)
    }
}

impl OverTcp for tokio::net::UnixStream {
    fn tcp(&self) -> Option<&TcpStream> {
        None
    }
}

/// Sets the send buffer of `tcp` to `bytes` (Linux doubles it for its bookkeeping); 0
/// leaves the kernel's sizing. A failure only leaves the kernel's sizing too.
pub fn size_send_buffer(tcp: &TcpStream, bytes: usize) {
    if bytes > 0 {
        if let Err(e) = socket2::SockRef::from(tcp).set_send_buffer_size(bytes) {
            tracing::debug!("ws: setting SO_SNDBUF to {bytes}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_send_buffer_is_sized_and_zero_leaves_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let size = |s: &TcpStream| socket2::SockRef::from(s).send_buffer_size().unwrap();
        let before = size(&server);
        size_send_buffer(server.tcp().unwrap(), 0);
        assert_eq!(size(&server), before);
        size_send_buffer(server.tcp().unwrap(), 32 << 10);
        // Linux reports twice what was set.
        assert_eq!(size(&server), 64 << 10);
        drop(client);
    }
}
