//! The upgrade request as the HTTP connection loop hands it over: what the WebTorrent
//! connection needs of the HTTP request that opened it. Its own file because both the
//! door ([`super::upgrade`]) and the connection task read it.

use std::net::SocketAddr;

/// An `Upgrade: websocket` request, as read by the HTTP connection loop.
#[derive(Clone, Debug)]
pub struct UpgradeRequest {
    /// The request path (any path is accepted; kept for logs).
    pub path: String,
    /// The `Sec-WebSocket-Key` header, from which `Sec-WebSocket-Accept` is derived.
    pub sec_websocket_key: String,
    /// The client's address.
    pub remote: SocketAddr,
    /// Bytes already read past the request head (the start of the first frames).
    pub leftover: Vec<u8>,
}
