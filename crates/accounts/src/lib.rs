//! shoal's accounts database for private trackers: the users and their passkeys, the
//! registered torrents, the allowed client prefixes, and per-user accounting (bytes after
//! factors, seeding and leeching time, snatches), in SQLite, PostgreSQL or MariaDB/MySQL.
//!
//! Its boundary: this crate talks SQL and nothing else. It never sits on the announce path:
//! the tracker loads everything into memory at start, aggregates deltas itself, and hands
//! them over in batches, each committed in one transaction or not at all (the caller keeps a
//! batch that failed and writes it later). Both go through [`Schema`], the interface every
//! site schema implements; [`Database`] is shoal's own.
//! The model types are plain Rust, so the rest of shoal never names sqlx; the accounting sum
//! is the core's own `Delta` (user id, torrent id), written as the ledger drains it. The schema, the URL
//! forms, how a site maps its own tables onto these, and the write contract are in
//! `docs/private.md`.

#![forbid(unsafe_code)]

// First, so that its `from_columns!` is in scope in the modules below it.
#[macro_use]
mod column;
mod batch;
mod database;
mod dialect;
mod error;
mod migrations;
mod model;
mod schema;

pub use database::{finish, mysql_url, within, Database, ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};
pub use dialect::Dialect;
pub use error::{masked_url, Error};
pub use model::{
    Accounting, ClientPrefix, Delta, InfoHashBytes, Loaded, PeerRow, Torrent, User, UserStats,
    UserTorrentStats, Written,
};
pub use schema::{BoxFuture, Schema};
