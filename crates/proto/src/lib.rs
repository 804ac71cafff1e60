//! Sans-IO codecs for the tracker protocols shoal speaks.
//!
//! This crate turns bytes into typed requests and typed responses into bytes, and nothing
//! else: no sockets, no threads, no clocks, no allocation on the server's hot paths. That
//! keeps every parser testable by feeding it bytes, property-testable for round trips, and
//! fuzzable (see `fuzz/`). The server crate and the bench crate both build on it: the
//! server parses requests and writes responses, the load generator does the reverse.
//!
//! - [`common`]: the tracker's vocabulary shared by all protocols (info hashes, peer ids,
//!   events, compact peer addresses).
//! - [`path`]: the tracker paths sites hand out (`/announce`, `/<passkey>/announce`, ...),
//!   one parser for HTTP targets, BEP 41 URL data and WebSocket upgrade paths.
//! - [`udp`]: BEP 15 (UDP tracker protocol) with BEP 41 options.
//! - [`http`]: BEP 3 / BEP 48 request targets and query strings.
//! - [`bencode`]: the bencoded responses of the HTTP tracker (BEP 3, 7, 23, 48).
//! - [`ws`]: WebTorrent tracker messages (JSON over WebSocket).
//! - [`proxy_header`]: the PROXY protocol header (v1 and v2) a load balancer sends first.
//! - [`forwarded`]: the client's address in a reverse proxy's header (`X-Forwarded-For`).

#![forbid(unsafe_code)]

pub mod bencode;
pub mod common;
pub mod forwarded;
pub mod http;
pub mod path;
pub mod proxy_header;
pub mod udp;
pub mod ws;

pub use common::{AnnounceEvent, CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
