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

use std::time::Duration;

use shoal_site::mysql::SiteDb;
pub use shoal_site::mysql::{Error, ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};

use crate::model::Batch;

mod load;
mod schema;
mod write;

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
    db: SiteDb,
    widths: Widths,
}

impl Unit3dDb {
    /// Opens a pool to `mysql://user:pw@host:port/database` (`mariadb://` is the same) and
    /// makes its first connection. Nothing is read or written yet.
    pub async fn connect(url: &str) -> Result<Unit3dDb, Error> {
        Ok(Unit3dDb {
            db: SiteDb::connect(url).await?,
            widths: Widths::default(),
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(self, timeout: Duration) -> Unit3dDb {
        Unit3dDb {
            db: self.db.with_operation_timeout(timeout),
            ..self
        }
    }

    /// The URL it was opened with, password masked.
    pub fn url(&self) -> &str {
        self.db.url()
    }

    /// Closes the pool: waits for the connections in use to come back, then closes them.
    pub async fn close(&self) {
        self.db.close().await
    }

    /// Writes `batch` in one transaction: everything or, on an error, nothing.
    pub async fn write(&self, batch: &Batch) -> Result<Written, Error> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        let mut written = self
            .db
            .write(async |tx| write::run(tx, batch, self.widths).await)
            .await?;
        // BEGIN and COMMIT.
        written.statements += 2;
        Ok(written)
    }
}
