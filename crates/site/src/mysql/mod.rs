//! The MySQL/MariaDB plumbing every site crate shares, written once: a site's tables
//! differ, the way shoal reaches them does not.
//!
//! - [`SiteDb::connect`]: a small pool whose sessions run in UTC (`+00:00`), said
//!   explicitly for every site: the sites' `timestamp` and `datetime` columns hold UTC as
//!   their own announce servers write them, and `FROM_UNIXTIME`/`UNIX_TIMESTAMP` agree
//!   with shoal's Unix seconds. (sqlx's default is the same zone; saying it keeps a change
//!   of that default from moving every time a site reads.)
//! - Every operation is bounded: a connection is waited for [`ACQUIRE_TIMEOUT`] at most,
//!   a whole operation [`OPERATION_TIMEOUT`] by default, so a stopped or hung server is an
//!   error the caller sees and retries, never a wait forever.
//! - [`SiteDb::read`] reads in one transaction rolled back after (one consistent view of
//!   several tables); [`SiteDb::write`] writes in one transaction, committed whole or
//!   rolled back at once (a transaction dropped unfinished would hold its row locks until
//!   its connection is next used).
//! - [`rows`]: streamed rows, each decoded or left out with a count in a warning;
//!   [`existing`]: which ids of a batch the site still has (rows of removed members and
//!   torrents are pruned from a write, not sent to break a foreign key);
//!   [`catalog::Catalog`]: the table, column and key check at start;
//!   [`statement::Statement`]: multi-row statements, a thousand rows each, the full
//!   chunk's prepared once and kept.

use std::future::Future;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::MySqlConnection;

pub use shoal_accounts::{ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};

pub mod catalog;
mod error;
mod rows;
pub mod statement;

pub use error::Error;
pub use rows::{existing, id, rows};

/// Connections in a site's pool: the writer, a load, a check.
const MAX_CONNECTIONS: u32 = 4;

/// Unix seconds now (0 before the epoch), as the sites' tables hold times.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A site's database. Cheap to clone (the pool is shared); safe to use from many tasks.
#[derive(Debug, Clone)]
pub struct SiteDb {
    pool: MySqlPool,
    url: String,
    limit: Duration,
}

impl SiteDb {
    /// Opens a pool to `mysql://user:pw@host:port/database` (`mariadb://` is the same) and
    /// makes its first connection. Nothing is read or written yet.
    pub async fn connect(url: &str) -> Result<SiteDb, Error> {
        let masked = shoal_accounts::masked_url(url);
        let options =
            MySqlConnectOptions::from_str(&shoal_accounts::mysql_url(url)).map_err(|e| {
                Error::BadUrl {
                    url: masked.clone(),
                    source: Box::new(e),
                }
            })?;
        if options.get_database().is_none_or(str::is_empty) {
            return Err(Error::NoDatabase(masked));
        }
        let options = options.timezone(Some("+00:00".to_owned()));
        let pool = MySqlPoolOptions::new()
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(|e| Error::Unreachable {
                url: masked.clone(),
                source: Box::new(e),
            })?;
        Ok(SiteDb {
            pool,
            url: masked,
            limit: OPERATION_TIMEOUT,
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(self, limit: Duration) -> SiteDb {
        SiteDb { limit, ..self }
    }

    /// The URL it was opened with, password masked.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The pool, for statements outside a transaction.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Closes the pool: waits for the connections in use to come back, then closes them.
    pub async fn close(&self) {
        self.pool.close().await
    }

    /// Runs `work` within the operation's bound.
    pub async fn bounded<T>(
        &self,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        shoal_accounts::within(self.limit, work, Error::TimedOut).await
    }

    /// The database's catalog, once it is checked to hold every table, column and unique
    /// key of `tables` and `unique_keys` ([`Error::Missing`] names each one it lacks).
    pub async fn check_tables(
        &self,
        tables: catalog::Tables,
        unique_keys: catalog::Tables,
    ) -> Result<catalog::Catalog, Error> {
        let catalog = self
            .read(async |conn| catalog::Catalog::read(conn).await)
            .await?;
        catalog.check(&catalog::Needs {
            tables,
            unique_keys,
        })?;
        Ok(catalog)
    }

    /// Runs `work` in one transaction that is rolled back after: a consistent view of
    /// several tables, changing nothing.
    pub async fn read<T>(
        &self,
        work: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.transaction(false, work).await
    }

    /// Runs `work` in one transaction: committed if it succeeds, rolled back at once if it
    /// fails, so that everything or nothing is written.
    pub async fn write<T>(
        &self,
        work: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.transaction(true, work).await
    }

    /// `work` in one transaction, within the operation's bound: kept (`keep`) if it
    /// succeeds, rolled back otherwise.
    async fn transaction<T>(
        &self,
        keep: bool,
        work: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.bounded(async {
            let mut tx = self.pool.begin().await?;
            let result = work(&mut tx).await;
            if keep {
                shoal_accounts::finish(tx, result).await
            } else {
                let _ = tx.rollback().await;
                result
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::{Error, SiteDb};

    #[tokio::test]
    async fn a_url_without_a_database_is_refused_before_connecting() {
        let e = SiteDb::connect("mysql://shoal:secret@127.0.0.1:1")
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

    #[test]
    fn a_failed_write_is_a_server_to_wait_for_not_a_refused_value() {
        use shoal_accounts::Error as Accounts;
        let limit = std::time::Duration::from_secs(5);
        let e: Accounts = Error::TimedOut(limit).into();
        assert!(matches!(e, Accounts::TimedOut(t) if t == limit), "{e}");
        let e: Accounts = Error::Unreachable {
            url: "mysql://shoal:***@127.0.0.1:3306/site".into(),
            source: "connection refused".into(),
        }
        .into();
        assert!(matches!(e, Accounts::Unreachable { .. }), "{e}");
        let e: Accounts = Error::Query("Lock wait timeout exceeded".into()).into();
        assert!(matches!(e, Accounts::Query(_)), "{e}");
        assert!(e.to_string().contains("Lock wait timeout exceeded"), "{e}");
    }
}
