//! The WebTorrent front end: JSON over WebSocket on the HTTP and HTTPS listeners.
//!
//! The HTTP connection loop owns the TCP (or TLS) stream and parses the request head; on
//! an `Upgrade: websocket` request (any path) it hands the stream over with
//! [`serve_upgrade`], which answers `101 Switching Protocols` and runs the WebTorrent
//! connection until it closes. Everything WebTorrent connections share lives in one
//! [`WsContext`]: the settings, the tracker's core (policy and WebTorrent store),
//! and the [`registry::Registry`] through which one connection's task hands a
//! relayed offer or answer to another's bounded outgoing queue.
//!
//! - [`context`]: what every connection shares ([`WsContext`], [`WsSettings`]).
//! - [`upgrade_request`]: the upgrade request the HTTP loop hands over.
//! - [`upgrade`]: its answer, `101` or a refusal ([`serve_upgrade`]).
//! - [`connection`]: one connection's task (reads, writes, pings, limits).
//! - [`handler`]: what a message does (policy, announce, offers, answer, scrape, failures).
//! - [`connection_peers`]: the pairs a connection announced, bounded, oldest evicted.
//! - [`outbox`]: a connection's outgoing queues (answers, replies, offers), what is written
//!   first and what is shed first.
//! - [`registry`]: connection ids to outboxes; a full queue drops relays, not the connection.
//! - [`failures`]: every failure reason a client can be sent, counted by reason.
//! - [`socket`]: the TCP socket under a connection, whose send buffer is bounded.

pub mod connection;
pub mod connection_peers;
pub mod context;
pub mod failures;
pub mod handler;
pub mod outbox;
pub mod registry;
pub mod socket;
pub mod upgrade;
pub mod upgrade_request;

pub use context::{WsContext, WsSettings};
pub use socket::OverTcp;
pub use upgrade::serve_upgrade;
pub use upgrade_request::UpgradeRequest;

/// A text message on its way to a client: a reply, or a relayed offer or answer (shared
/// bytes, so queueing and writing it copies nothing).
pub type Text = tokio_websockets::Payload;
