//! The site's own database: UNIT3D's tables on MariaDB or MySQL, read at start and written
//! in batches, as UNIT3D-Announce reads and writes them.
//!
//! shoal creates nothing there. [`Unit3dDb::check`] says whether every table, column and
//! unique key that shoal reads or writes is present (`schema`); [`Unit3dDb::load`] reads the
//! rows shoal keeps in memory (`load`); [`Unit3dDb::write`] writes one [`Batch`] in one
//! transaction (`write`), a few multi-row statements per table, never a statement per row.
//!
//! Every operation is bounded like the accounts database's: a connection is waited for
//! [`ACQUIRE_TIMEOUT`] at most, a whole operation [`OPERATION_TIMEOUT`] by default, so a
//! stopped or hung server is an error the caller sees (and retries), never a wait forever.
//!
//! Times are Unix seconds on shoal's side and `FROM_UNIXTIME`/`UNIX_TIMESTAMP` in SQL; the
//! connection's time zone is UTC (`+00:00`), as UNIT3D-Announce's is, so `timestamp` and
//! `datetime` columns hold UTC.

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use shoal_accounts::mysql_url;
pub use shoal_accounts::{ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};

use crate::model::Batch;

mod load;
mod schema;
mod write;

/// Connections in the pool: the writer, a load, a check.
const MAX_CONNECTIONS: u32 = 4;

type Source = Box<dyn std::error::Error + Send + Sync>;

/// Why an operation on the site's database failed. A write that fails changed nothing (it
/// runs in one transaction): the caller keeps the batch and writes it later.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad database URL {url}: {source}")]
    BadUrl {
        url: String,
        #[source]
        source: Source,
    },
    #[error("cannot reach the site's database at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: Source,
    },
    #[error("the database URL {0} names no database: add /<database> to it")]
    NoDatabase(String),
    /// What the site's database lacks: `table peers`, `column history.seedtime`,
    /// `unique key peers (user_id, torrent_id, peer_id)`.
    #[error("missing in the site's database: {}", .0.join(", "))]
    Missing(Vec<String>),
    #[error("site database query failed: {0}")]
    Query(#[source] Source),
    #[error("the site's database did not answer within {0:?}")]
    TimedOut(Duration),
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Error::Query(Box::new(error))
    }
}

/// What one [`Unit3dDb::write`] wrote, in rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// `peers` rows inserted or updated.
    pub peers: usize,
    /// `peers` rows deleted (those already gone are not counted).
    pub peers_deleted: u64,
    /// `history` rows inserted or added to.
    pub history: usize,
    /// `users` rows whose totals grew.
    pub users: usize,
    /// `torrents` rows updated.
    pub torrents: usize,
    /// `unregistered_info_hashes` rows inserted or touched.
    pub unregistered: usize,
    /// Rows of the batch left out because their user or torrent is no longer in the site's
    /// tables (removed by the site since): writing them would break a foreign key.
    pub skipped: usize,
    /// SQL statements run, the transaction's own included.
    pub statements: usize,
}

/// How long a text column is, in characters, as `check` found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Widths {
    peers_agent: usize,
    history_agent: usize,
}

impl Default for Widths {
    /// UNIT3D's: `varchar(64)` both.
    fn default() -> Self {
        Widths {
            peers_agent: 64,
            history_agent: 64,
        }
    }
}

/// A UNIT3D site's database. Cheap to clone (the pool is shared); safe to use from many
/// tasks. Call [`check`](Unit3dDb::check) once after connecting.
#[derive(Debug, Clone)]
pub struct Unit3dDb {
    pool: MySqlPool,
    url: String,
    widths: Widths,
    operation_timeout: Duration,
}

impl Unit3dDb {
    /// Opens a pool to `mysql://user:pw@host:port/database` (`mariadb://` is the same) and
    /// makes its first connection. Nothing is read or written yet.
    pub async fn connect(url: &str) -> Result<Unit3dDb, Error> {
        let masked = shoal_accounts::masked_url(url);
        let options =
            MySqlConnectOptions::from_str(&mysql_url(url)).map_err(|e| Error::BadUrl {
                url: masked.clone(),
                source: Box::new(e),
            })?;
        if options.get_database().is_none_or(str::is_empty) {
            return Err(Error::NoDatabase(masked));
        }
        let pool = MySqlPoolOptions::new()
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options.timezone(Some("+00:00".to_owned())))
            .await
            .map_err(|e| Error::Unreachable {
                url: masked.clone(),
                source: Box::new(e),
            })?;
        Ok(Unit3dDb {
            pool,
            url: masked,
            widths: Widths::default(),
            operation_timeout: OPERATION_TIMEOUT,
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Unit3dDb {
        self.operation_timeout = timeout;
        self
    }

    /// The URL it was opened with, password masked.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Closes the pool: waits for the connections in use to come back, then closes them.
    pub async fn close(&self) {
        self.pool.close().await
    }

    /// Runs `operation` within the operation timeout.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        shoal_accounts::within(self.operation_timeout, operation, Error::TimedOut).await
    }

    /// Writes `batch` in one transaction: everything or, on an error, nothing.
    pub async fn write(&self, batch: &Batch) -> Result<Written, Error> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        self.bounded(async {
            let mut tx = self.pool.begin().await?;
            match write::run(&mut tx, batch, self.widths).await {
                Ok(mut written) => {
                    tx.commit().await?;
                    // BEGIN and COMMIT.
                    written.statements += 2;
                    Ok(written)
                }
                Err(e) => {
                    // Rolled back at once: a transaction dropped unfinished would hold its
                    // row locks until its connection is next used.
                    let _ = tx.rollback().await;
                    Err(e)
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::{mysql_url, Error, Unit3dDb};

    #[test]
    fn mariadb_urls_reach_the_mysql_driver() {
        assert_eq!(mysql_url("mariadb://u:p@h:1/d"), "mysql://u:p@h:1/d");
        assert_eq!(mysql_url("mysql://u@h/d"), "mysql://u@h/d");
    }

    #[tokio::test]
    async fn a_url_without_a_database_is_refused_before_connecting() {
        let e = Unit3dDb::connect("mysql://shoal:secret@127.0.0.1:1")
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NoDatabase(_)), "{e}");
        assert!(!e.to_string().contains("secret"), "{e}");
    }

    #[test]
    fn missing_names_each_table_and_column() {
        let e = Error::Missing(vec!["table peers".into(), "column history.seedtime".into()]);
        assert_eq!(
            e.to_string(),
            "missing in the site's database: table peers, column history.seedtime"
        );
    }
}
