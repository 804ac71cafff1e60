//! Placeholder for the WebTorrent front end (built on another branch, which replaces this
//! module wholesale when it is merged).
//!
//! It holds only the seam the HTTP front end calls: a request head with `Upgrade:
//! websocket` (on any path, plain or TLS) is handed over with [`serve_upgrade`]. Until the
//! real module lands, the answer is `501 Not Implemented` and the connection closes.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// A WebSocket upgrade request, as the HTTP front end parsed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeRequest {
    /// The request target (path and query).
    pub path: String,
    /// The `Sec-WebSocket-Key` header.
    pub sec_websocket_key: String,
    /// The client's address (after the reverse-proxy rules).
    pub remote: SocketAddr,
    /// Bytes read past the request head.
    pub leftover: Vec<u8>,
}

/// What the WebTorrent front end shares between connections.
#[derive(Debug, Default)]
pub struct WsContext {}

/// Takes over a connection whose request asked for a WebSocket upgrade.
pub async fn serve_upgrade<S>(mut stream: S, _upgrade: UpgradeRequest, _ctx: Arc<WsContext>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _ = stream
        .write_all(
            b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
    let _ = stream.shutdown().await;
}
