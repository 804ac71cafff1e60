//! The site's own database: Gazelle's tables on MariaDB or MySQL, read at start and on a
//! reload, and written in batches, as Ocelot reads and writes them.
//!
//! shoal creates nothing there. [`GazelleDb::check`] says whether every table, column
//! and key that shoal reads or writes is present (`check`); [`GazelleDb::load`] reads
//! the rows shoal keeps in memory (`load`); [`GazelleDb::write`] writes one [`Batch`] in
//! one transaction (`write`), one multi-row statement per table and chunk.
//!
//! Every operation is bounded like the accounts database's: a connection is waited for
//! [`ACQUIRE_TIMEOUT`] at most, a whole operation [`OPERATION_TIMEOUT`] by default, so a
//! stopped or hung server is an error the caller sees (and retries), never a wait.

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use shoal_accounts::{masked_url, mysql_url, ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};

use crate::model::Batch;

mod check;
mod load;
mod write;

pub use write::Written;

/// Why an operation on the site's database failed. A write that fails changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the site's database lacks: `table xbt_files_users`,
    /// `column users_main.torrent_pass`, `primary key xbt_files_users (peer_id, fid, uid)`.
    #[error("missing in the Gazelle site's database: {}", .0.join(", "))]
    Missing(Vec<String>),
    #[error("the database URL {0} names no database: add /<database> to it")]
    NoDatabase(String),
    #[error(transparent)]
    Db(#[from] shoal_accounts::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e.into())
    }
}

/// The widths of the text columns shoal writes, in characters, as `check` found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    pub useragent: usize,
    pub peer_ip: usize,
    pub snatch_ip: usize,
}

impl Default for Widths {
    /// Gazelle's: `varchar(51)` and `varchar(15)`.
    fn default() -> Self {
        Widths {
            useragent: 51,
            peer_ip: 15,
            snatch_ip: 15,
        }
    }
}

/// A Gazelle site's database. Cheap to clone. Call [`check`](GazelleDb::check) once after
/// connecting.
#[derive(Debug, Clone)]
pub struct GazelleDb {
    pool: MySqlPool,
    url: String,
    widths: Widths,
    limit: Duration,
}

impl GazelleDb {
    /// Opens a pool to `mysql://user:pw@host:port/database` (`mariadb://` is the same).
    pub async fn connect(url: &str) -> Result<GazelleDb, Error> {
        let masked = masked_url(url);
        let bad_url = |e: sqlx::Error| shoal_accounts::Error::BadUrl {
            url: masked.clone(),
            source: Box::new(e),
        };
        let options = MySqlConnectOptions::from_str(&mysql_url(url)).map_err(bad_url)?;
        if options.get_database().is_none_or(str::is_empty) {
            return Err(Error::NoDatabase(masked));
        }
        let pool = MySqlPoolOptions::new()
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| shoal_accounts::Error::Unreachable {
                url: masked.clone(),
                source: Box::new(e),
            })?;
        Ok(GazelleDb {
            pool,
            url: masked,
            widths: Widths::default(),
            limit: OPERATION_TIMEOUT,
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(self, limit: Duration) -> GazelleDb {
        GazelleDb { limit, ..self }
    }

    /// The URL, password masked.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The column widths in force.
    pub fn widths(&self) -> Widths {
        self.widths
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await
    }

    async fn bounded<T>(&self, work: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        tokio::time::timeout(self.limit, work)
            .await
            .unwrap_or(Err(Error::Db(shoal_accounts::Error::TimedOut(self.limit))))
    }

    /// As Ocelot at start: the swarms start empty, so the torrents' seeders and leechers
    /// are set to 0 and the clients' rows marked inactive (Ocelot empties
    /// `xbt_files_users`; shoal keeps the rows, which the site shows as history).
    pub async fn reset_swarms(&self) -> Result<(), Error> {
        self.bounded(async {
            sqlx::query("UPDATE torrents_leech_stats SET Seeders = 0, Leechers = 0")
                .execute(&self.pool)
                .await?;
            sqlx::query("UPDATE xbt_files_users SET active = 0 WHERE active = 1")
                .execute(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes `batch` in one transaction: everything or, on an error, nothing.
    pub async fn write(&self, batch: &Batch) -> Result<Written, Error> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        self.bounded(async {
            let mut tx = self.pool.begin().await?;
            let result = write::run(&mut tx, batch, self.widths).await;
            if result.is_ok() {
                tx.commit().await?;
            } else {
                // At once: a transaction dropped unfinished holds its locks until its
                // connection is used again.
                let _ = tx.rollback().await;
            }
            result
        })
        .await
    }
}
