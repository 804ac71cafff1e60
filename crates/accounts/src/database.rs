//! `Database`: one connection pool to SQLite, PostgreSQL or MariaDB/MySQL, and the operations
//! the tracker needs (load everything, upsert and delete, write a batch of deltas, read a
//! user's accounting).
//!
//! Each operation is written once, as the body of `on_pool!`, which expands it for the three
//! concrete sqlx pools: every dialect runs the same code with its own driver types, without the
//! `Any` driver's narrowed type mapping and without generic bounds over sqlx's traits. Every
//! operation is bounded: acquiring a connection (including connecting) gives up after
//! `ACQUIRE_TIMEOUT`, a whole operation after the operation timeout, so a stopped or hung
//! server turns into an error, never a caller that waits forever.
//!
//! This file holds the pool and what every operation shares (`on_pool!`, the timeouts, how a
//! transaction ends); the operations live by job in `records` (users, torrents and client
//! prefixes: load, put, delete) and `accounting` (write a batch of deltas, read a user's
//! totals).

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::dialect::{Dialect, Statements};
use crate::error::{masked_url, Error};

/// How long an operation waits for a connection, connecting included, before it fails.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a whole operation (a write batch included) may take before it fails, by default.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `operation` within `limit`; past it, drops it and answers `timed_out(limit)`. Every
/// schema's database bounds its whole operations (a load, a write batch) with it.
pub async fn within<T, E>(
    limit: Duration,
    operation: impl Future<Output = Result<T, E>>,
    timed_out: impl FnOnce(Duration) -> E,
) -> Result<T, E> {
    match tokio::time::timeout(limit, operation).await {
        Ok(result) => result,
        Err(_) => Err(timed_out(limit)),
    }
}

/// Connections per pool: one writer, a reload, a few admin calls at once.
const MAX_CONNECTIONS: u32 = 4;

/// SQLite's page cache per connection, in KiB (`PRAGMA cache_size`, negative: KiB). SQLite's
/// default is 2 MiB: past a few tens of thousands of `user_torrents` rows, most pages an
/// upsert walks are not in it and each is read back through a `pread` system call. Measured
/// with `examples/write_speed` (100,000-row batches into a growing table, 2-core VM): the
/// CPU per row rose from 3.6 to 11-13 µs by the tenth batch at 2 MiB; see
/// `docs/benchmarks/private-udp/README.md` for the figures at this size. The cache fills
/// only as pages are read, so a small database costs only what it holds.
const SQLITE_CACHE_KIB: i64 = 64 * 1024;

#[derive(Debug, Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

/// Ends a transaction by its body's outcome: committed if the body succeeded, rolled back
/// at once if it failed (the body's error is the one answered). A transaction dropped
/// unfinished only queues its rollback until its connection is next used; on SQLite the
/// idle connection keeps the write lock meanwhile, and every other writer waits out its
/// busy timeout and fails with "database is locked" (seen after a refused `put_user`).
pub async fn finish<DB: sqlx::Database, T, E: From<sqlx::Error>>(
    tx: sqlx::Transaction<'_, DB>,
    done: Result<T, E>,
) -> Result<T, E> {
    match done {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Runs `$body` with `$p` bound to the concrete pool, whichever dialect it is.
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
            Pool::MySql($p) => $body,
        }
    };
}

/// Runs `$body` (the statements of one operation, answering `Result<T, Error>`) in one
/// transaction with `$tx` bound to it, within the operation timeout, and ends the
/// transaction by the body's outcome ([`finish`]). Awaited where it stands.
macro_rules! in_transaction {
    ($db:expr, |$tx:ident| { $($body:tt)* }) => {
        $db.bounded(async {
            on_pool!(&$db.pool, |p| {
                let mut $tx = p.begin().await?;
                let done = async { $($body)* }.await;
                finish($tx, done).await
            })
        })
        .await
    };
}

// Declared after the macros, which they use.
mod accounting;
mod records;

/// The accounts database. Cheap to clone (the pool is shared); safe to use from many tasks.
#[derive(Debug, Clone)]
pub struct Database {
    pool: Pool,
    sql: Arc<Statements>,
    dialect: Dialect,
    url: String,
    operation_timeout: Duration,
}

impl Database {
    /// Opens the database that `url` names and brings its schema up to date.
    ///
    /// `sqlite://PATH` (relative to the working directory; `sqlite:///abs/path` for an
    /// absolute one) creates the file on first start; `postgres://user:pw@host:port/db` and
    /// `mysql://user:pw@host:port/db` (MariaDB too; `mariadb://` is accepted) need the database
    /// to exist. The versioned migrations for the dialect run before this returns.
    pub async fn connect(url: &str) -> Result<Database, Error> {
        let dialect = Dialect::of_url(url)?;
        let masked = masked_url(url);
        let bad_url = |e: sqlx::Error| Error::BadUrl {
            url: masked.clone(),
            source: Box::new(e),
        };
        let unreachable = |e: sqlx::Error| Error::Unreachable {
            url: masked.clone(),
            source: Box::new(e),
        };
        let pool = match dialect {
            Dialect::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(bad_url)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .pragma("cache_size", (-SQLITE_CACHE_KIB).to_string())
                    .busy_timeout(Duration::from_secs(5));
                // An in-memory database lives as long as its one connection.
                let in_memory = url.contains(":memory:");
                let pool = SqlitePoolOptions::new()
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .max_connections(if in_memory { 1 } else { MAX_CONNECTIONS });
                let pool = if in_memory {
                    pool.idle_timeout(None::<Duration>)
                        .max_lifetime(None::<Duration>)
                } else {
                    pool
                };
                Pool::Sqlite(pool.connect_with(options).await.map_err(unreachable)?)
            }
            Dialect::Postgres => {
                let options = PgConnectOptions::from_str(url).map_err(bad_url)?;
                let pool = PgPoolOptions::new()
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .max_connections(MAX_CONNECTIONS);
                Pool::Postgres(pool.connect_with(options).await.map_err(unreachable)?)
            }
            Dialect::MySql => {
                let options = MySqlConnectOptions::from_str(&mysql_url(url)).map_err(bad_url)?;
                let pool = MySqlPoolOptions::new()
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .max_connections(MAX_CONNECTIONS);
                Pool::MySql(pool.connect_with(options).await.map_err(unreachable)?)
            }
        };
        let migrate_failed = |e: sqlx::migrate::MigrateError| Error::Migrate {
            dialect: dialect.name(),
            source: Box::new(e),
        };
        let migrator = crate::migrations::migrator(dialect)
            .await
            .map_err(migrate_failed)?;
        on_pool!(&pool, |p| migrator.run(p).await).map_err(migrate_failed)?;
        Ok(Database {
            pool,
            sql: Arc::new(Statements::new(dialect)),
            dialect,
            url: masked,
            operation_timeout: OPERATION_TIMEOUT,
        })
    }

    /// The same database with another bound on each whole operation.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Database {
        self.operation_timeout = timeout;
        self
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The URL it was opened with, password masked.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Closes the pool: waits for the connections in use to come back, then closes them all.
    pub async fn close(&self) {
        on_pool!(&self.pool, |p| p.close().await)
    }

    /// Runs `operation` within the operation timeout.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        within(self.operation_timeout, operation, Error::TimedOut).await
    }
}

/// Decodes each of `rows` with `decode` (one per dialect's row type, as `on_pool!` expands
/// it); the first row that does not decode is the answer.
fn decode_each<R, T>(
    rows: &[R],
    decode: impl FnMut(&R) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    rows.iter().map(decode).collect()
}

/// sqlx's MySQL driver reads only `mysql://`; `mariadb://` is the same server.
pub fn mysql_url(url: &str) -> String {
    match url.get(..10) {
        Some(scheme) if scheme.eq_ignore_ascii_case("mariadb://") => {
            format!("mysql://{}", &url[10..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::accounting::BATCH_IDS_KEPT;
    use super::{mysql_url, Database, Pool};
    use crate::column::unix_now;
    use crate::model::{ClientPrefix, Delta, Torrent, User};

    /// The tracker runs these on spawned tasks (the writer, the admin API): they must be Send.
    #[allow(dead_code)]
    fn operations_are_send(db: &Database, user: &User, torrent: &Torrent, client: &ClientPrefix) {
        fn send<T: Send>(_: T) {}
        send(db.load());
        send(db.put_user(user));
        send(db.delete_user(1));
        send(db.put_torrent(torrent));
        send(db.delete_torrent(&torrent.info_hash));
        send(db.put_client(client));
        send(db.delete_client(client));
        send(db.write(&[]));
        send(db.user_stats(1));
    }

    /// Every write under an id forgets the ids older than a week, and finds them through
    /// the index on `written_at` (schema version 3), not by reading the whole table.
    #[tokio::test]
    async fn batch_ids_older_than_a_week_go_through_their_index() {
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let Pool::Sqlite(pool) = &db.pool else {
            unreachable!("a SQLite URL")
        };
        let now = unix_now();
        sqlx::query(
            "INSERT INTO written_batches (id, written_at) VALUES ('old', ?), ('recent', ?)",
        )
        .bind(now - BATCH_IDS_KEPT - 60)
        .bind(now - BATCH_IDS_KEPT + 3600)
        .execute(pool)
        .await
        .unwrap();
        let passkey = "0123456789abcdef0123456789abcdef";
        db.put_user(&User::new(1, passkey)).await.unwrap();
        let hash = [0x22; 20];
        db.put_torrent(&Torrent::new(Some(1), hash)).await.unwrap();
        let delta = Delta {
            user_id: 1,
            torrent_id: 1,
            uploaded: 10,
            ..Delta::default()
        };
        let written = db.write_batch(Some("new"), &[delta]).await.unwrap();
        assert_eq!(written.applied, 1);
        let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM written_batches ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap();
        assert_eq!(ids, ["new", "recent"]);
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {}", db.sql.forget_batches))
                .bind(now)
                .fetch_all(pool)
                .await
                .unwrap();
        assert!(
            plan.iter()
                .any(|row| row.3.contains("written_batches_by_time")),
            "{plan:?}"
        );
    }

    #[test]
    fn mariadb_urls_reach_the_mysql_driver() {
        assert_eq!(mysql_url("mariadb://u:p@h:1/d"), "mysql://u:p@h:1/d");
        assert_eq!(mysql_url("mysql://u@h/d"), "mysql://u@h/d");
    }
}
