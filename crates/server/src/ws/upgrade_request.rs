//! The upgrade request as the HTTP connection loop hands it over: what the WebTorrent
//! connection needs of the HTTP request that opened it. Its own file because both the
//! door ([`super::upgrade`]) and the connection task read it.
//!
//! Its path is where a WebTorrent client's passkey travels (`wss://host/<passkey>/announce`
//! or `wss://host/announce/<passkey>`): [`UpgradeRequest::passkey`] reads it with the path
//! parser every protocol shares, once per connection.

use std::net::SocketAddr;

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

#[cfg(test)]
mod tests {
    use super::*;

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
