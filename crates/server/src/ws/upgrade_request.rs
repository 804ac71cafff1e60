//! The upgrade request as the HTTP connection loop hands it over: what the WebTorrent
//! connection needs of the HTTP request that opened it. Its own file because both the
//! door ([`super::upgrade`]) and the connection task read it.
//!
//! Its path is where a WebTorrent client's passkey travels (`wss://host/<passkey>/announce`
//! or `wss://host/announce/<passkey>`): [`UpgradeRequest::passkey`] reads it with the path
//! parser every protocol shares, once per connection.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An `Upgrade: websocket` request, as read by the HTTP connection loop.
#[derive(Clone, Debug)]
pub struct UpgradeRequest {
    /// The request target, path and query (any path is accepted: kept for logs, and read
    /// for a passkey).
    pub path: String,
    /// The `Sec-WebSocket-Key` header, from which `Sec-WebSocket-Accept` is derived.
    pub sec_websocket_key: String,
    /// The client's address.
    pub remote: SocketAddr,
    /// Bytes already read past the request head (the start of the first frames).
    pub leftover: Vec<u8>,
}

impl UpgradeRequest {
    /// The passkey in the path, if it is a tracker path with one (`/<passkey>/announce`,
    /// `/announce/<passkey>`, or the same with `scrape`; the query is ignored). Any other
    /// path, a malformed passkey included, gives none: the connection is served all the
    /// same, as every path always was (a private-mode rule refuses what lacks a passkey).
    pub fn passkey(&self) -> Option<&str> {
        shoal_proto::path::parse_target_path(self.path.as_bytes())
            .ok()?
            .passkey
    }
}

/// The upgraded stream, with the bytes the HTTP loop had already read past the request
/// head served first: frames a client sent without waiting for the `101`. It counts the
/// bytes written through it into `written`, the progress the connection's `send_timeout`
/// watches.
pub struct Prefixed<S> {
    leftover: Vec<u8>,
    at: usize,
    inner: S,
    written: Arc<AtomicU64>,
}

impl<S> Prefixed<S> {
    pub fn new(leftover: Vec<u8>, inner: S, written: Arc<AtomicU64>) -> Self {
        Self {
            leftover,
            at: 0,
            inner,
            written,
        }
    }

    fn count(&self, wrote: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = wrote {
            self.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.leftover.len() {
            let n = (this.leftover.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.leftover[this.at..this.at + n]);
            this.at += n;
            if this.at == this.leftover.len() {
                // Served: the connection keeps no memory for it.
                this.leftover = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.count(&wrote);
        wrote
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.count(&wrote);
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn what_was_read_past_the_head_comes_first_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(64);
        let written = Arc::new(AtomicU64::new(0));
        let mut s = Prefixed::new(b"early".to_vec(), server, written.clone());
        client.write_all(b" later").await.unwrap();
        let mut got = [0u8; 3];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ear");
        let mut rest = [0u8; 8];
        s.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"ly later");
        s.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
        assert_eq!(
            written.load(Ordering::Relaxed),
            4,
            "the bytes written are counted"
        );
    }

    #[test]
    fn the_passkey_comes_from_the_path_and_any_path_is_fine() {
        let passkey = |path: &str| {
            UpgradeRequest {
                path: path.to_owned(),
                sec_websocket_key: String::new(),
                remote: "127.0.0.1:1".parse().unwrap(),
                leftover: Vec::new(),
            }
            .passkey()
            .map(String::from)
        };
        for (path, expected) in [
            ("/0123abcd/announce", Some("0123abcd")),
            ("/announce/0123abcd?x=1", Some("0123abcd")),
            ("/k/scrape", Some("k")),
            ("/announce", None),
            ("/", None),
            ("/any/path?x=1", None),
            ("/announce/bad!key", None),
            ("", None),
        ] {
            assert_eq!(passkey(path).as_deref(), expected, "{path}");
        }
    }
}
