//! shoal's accounts database for private trackers: the users and their passkeys, the
//! registered torrents, the allowed client prefixes, and per-user accounting (bytes after
//! factors, seeding and leeching time, snatches), in SQLite, PostgreSQL or MariaDB/MySQL.
//!
//! Its boundary: this crate talks SQL and nothing else. It never sits on the announce path:
//! the tracker [`load`](Database::load)s everything into memory at start, aggregates deltas
//! itself, and hands them over in batches to [`write`](Database::write), which commits a batch
//! in one transaction or not at all (the caller keeps a batch that failed and writes it later).
//! The model types are plain Rust, so the rest of shoal never names sqlx. The schema, the URL
//! forms, how a site maps its own tables onto these, and the write contract are in
//! `docs/private.md`.

#![forbid(unsafe_code)]

mod batch;
mod column;
mod database;
mod dialect;
mod error;
mod migrations;
mod model;

pub use database::{Database, ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};
pub use dialect::Dialect;
pub use error::{masked_url, Error};
pub use model::{
    ClientPrefix, Delta, InfoHashBytes, Loaded, Torrent, User, UserStats, UserTorrentStats, Written,
};
