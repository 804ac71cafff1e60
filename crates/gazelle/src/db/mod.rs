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

use std::time::Duration;

use shoal_site::mysql::SiteDb;
pub use shoal_site::mysql::{Error, ACQUIRE_TIMEOUT, OPERATION_TIMEOUT};

use crate::model::Batch;

mod check;
mod load;
mod write;

pub use write::Written;

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
    db: SiteDb,
    widths: Widths,
}

impl GazelleDb {
    /// Opens a pool to `mysql://user:pw@host:port/database` (`mariadb://` is the same).
    pub async fn connect(url: &str) -> Result<GazelleDb, Error> {
        Ok(GazelleDb {
            db: SiteDb::connect(url).await?,
            widths: Widths::default(),
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(self, limit: Duration) -> GazelleDb {
        GazelleDb {
            db: self.db.with_operation_timeout(limit),
            ..self
        }
    }

    /// The URL, password masked.
    pub fn url(&self) -> &str {
        self.db.url()
    }

    /// The column widths in force.
    pub fn widths(&self) -> Widths {
        self.widths
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.db.close().await
    }

    /// As Ocelot at start: the swarms start empty, so the torrents' seeders and leechers
    /// are set to 0 and the clients' rows marked inactive (Ocelot empties
    /// `xbt_files_users`; shoal keeps the rows, which the site shows as history).
    pub async fn reset_swarms(&self) -> Result<(), Error> {
        self.db
            .write(async |conn| {
                sqlx::query("UPDATE torrents_leech_stats SET Seeders = 0, Leechers = 0")
                    .execute(&mut *conn)
                    .await?;
                sqlx::query("UPDATE xbt_files_users SET active = 0 WHERE active = 1")
                    .execute(&mut *conn)
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
        let widths = self.widths;
        self.db
            .write(async |conn| write::run(conn, batch, widths).await)
            .await
    }
}
