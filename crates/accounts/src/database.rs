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

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::Row;

use std::collections::{HashMap, HashSet};

use crate::batch::{self, KEYS_PER_LOOKUP, ROWS_PER_STATEMENT};
use crate::column::{check_factor, check_text, count, info_hash, unix_now};
use crate::dialect::{Dialect, Statements};
use crate::error::{masked_url, Error};
use crate::model::{
    ClientPrefix, Delta, InfoHashBytes, Loaded, Torrent, User, UserStats, UserTorrentStats, Written,
};

/// How long an operation waits for a connection, connecting included, before it fails.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a whole operation (a write batch included) may take before it fails, by default.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Seconds a committed batch id is remembered (a retry comes within minutes; a week covers
/// any outage worth keeping a batch through).
const BATCH_IDS_KEPT: i64 = 7 * 24 * 3600;

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

/// The longest passkey and client prefix the schema holds (in bytes, ASCII).
const PASSKEY_MAX: usize = 64;
const PREFIX_MAX: usize = 20;

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
async fn finish<DB: sqlx::Database, T>(
    tx: sqlx::Transaction<'_, DB>,
    done: Result<T, Error>,
) -> Result<T, Error> {
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
        match tokio::time::timeout(self.operation_timeout, operation).await {
            Ok(result) => result,
            Err(_) => Err(Error::TimedOut(self.operation_timeout)),
        }
    }

    /// Every user, torrent and client prefix, for the tracker's memory.
    pub async fn load(&self) -> Result<Loaded, Error> {
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let users = sqlx::query(&sql.select_users).fetch_all(p).await?;
                let torrents = sqlx::query(&sql.select_torrents).fetch_all(p).await?;
                let clients = sqlx::query(&sql.select_clients).fetch_all(p).await?;
                Ok(Loaded {
                    users: users
                        .iter()
                        .map(|row| -> Result<User, Error> {
                            Ok(User {
                                id: row.try_get("id")?,
                                passkey: row.try_get("passkey")?,
                                enabled: row.try_get("enabled")?,
                                can_download: row.try_get("can_download")?,
                                download_factor: row.try_get("download_factor")?,
                                upload_factor: row.try_get("upload_factor")?,
                            })
                        })
                        .collect::<Result<_, Error>>()?,
                    torrents: torrents
                        .iter()
                        .map(|row| -> Result<Torrent, Error> {
                            let v2: Option<Vec<u8>> = row.try_get("info_hash_v2")?;
                            Ok(Torrent {
                                id: Some(row.try_get("id")?),
                                info_hash: info_hash(row.try_get("info_hash")?)?,
                                info_hash_v2: v2.map(info_hash).transpose()?,
                                download_factor: row.try_get("download_factor")?,
                                upload_factor: row.try_get("upload_factor")?,
                            })
                        })
                        .collect::<Result<_, Error>>()?,
                    clients: clients
                        .iter()
                        .map(|row| -> Result<ClientPrefix, Error> {
                            Ok(ClientPrefix(row.try_get("prefix")?))
                        })
                        .collect::<Result<_, Error>>()?,
                })
            })
        })
        .await
    }

    /// Adds the user, or replaces the settings of the user with this id (their totals stay).
    /// A passkey that another user holds is a `Conflict`.
    pub async fn put_user(&self, user: &User) -> Result<(), Error> {
        check_text("passkey", &user.passkey, PASSKEY_MAX)?;
        check_factor(user.download_factor)?;
        check_factor(user.upload_factor)?;
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let mut tx = p.begin().await?;
                let done = async {
                    let known = sqlx::query(&sql.user_by_id)
                        .bind(user.id)
                        .fetch_optional(&mut *tx)
                        .await?
                        .is_some();
                    let statement = if known {
                        &sql.update_user
                    } else {
                        &sql.insert_user
                    };
                    sqlx::query(statement)
                        .bind(user.passkey.as_str())
                        .bind(user.enabled)
                        .bind(user.can_download)
                        .bind(user.download_factor)
                        .bind(user.upload_factor)
                        .bind(user.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| unique_conflict(e, "the passkey belongs to another user"))?;
                    Ok(())
                }
                .await;
                finish(tx, done).await
            })
        })
        .await
    }

    /// Removes the user and their per-torrent rows. Whether there was such a user.
    pub async fn delete_user(&self, user_id: i64) -> Result<bool, Error> {
        self.delete(&self.sql.delete_user, Key::Id(user_id)).await
    }

    /// Registers the torrent, or replaces the registration of its v1 info hash (or of its id,
    /// which re-keys that torrent to a new hash). Answers the torrent's id. A v2 hash that
    /// another torrent holds, or an id that differs from the one the hash is registered under,
    /// is a `Conflict`.
    pub async fn put_torrent(&self, torrent: &Torrent) -> Result<i64, Error> {
        check_factor(torrent.download_factor)?;
        check_factor(torrent.upload_factor)?;
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let mut tx = p.begin().await?;
                let done = async {
                    let by_hash = sqlx::query(&sql.torrent_by_hash)
                        .bind(&torrent.info_hash[..])
                        .fetch_optional(&mut *tx)
                        .await?;
                    let by_hash: Option<i64> = by_hash.map(|row| row.try_get(0)).transpose()?;
                    let (id, known) = match (by_hash, torrent.id) {
                        (Some(found), Some(wanted)) if found != wanted => {
                            return Err(Error::Conflict(format!(
                                "this info hash is registered as torrent {found}, not {wanted}"
                            )))
                        }
                        (Some(found), _) => (found, true),
                        (None, Some(wanted)) => {
                            let row = sqlx::query(&sql.torrent_by_id)
                                .bind(wanted)
                                .fetch_optional(&mut *tx)
                                .await?;
                            (wanted, row.is_some())
                        }
                        (None, None) => {
                            let row = sqlx::query(&sql.last_torrent_id)
                                .fetch_one(&mut *tx)
                                .await?;
                            let last: Option<i64> = row.try_get(0)?;
                            (last.unwrap_or(0) + 1, false)
                        }
                    };
                    let statement = if known {
                        &sql.update_torrent
                    } else {
                        &sql.insert_torrent
                    };
                    sqlx::query(statement)
                        .bind(&torrent.info_hash[..])
                        .bind(torrent.info_hash_v2.as_ref().map(|h| &h[..]))
                        .bind(torrent.download_factor)
                        .bind(torrent.upload_factor)
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| {
                            unique_conflict(e, "the v2 info hash belongs to another torrent")
                        })?;
                    Ok(id)
                }
                .await;
                finish(tx, done).await
            })
        })
        .await
    }

    /// Removes the torrent with this v1 info hash and every user's row for it (users' totals
    /// stay). Whether there was such a torrent.
    pub async fn delete_torrent(&self, info_hash: &InfoHashBytes) -> Result<bool, Error> {
        self.delete(&self.sql.delete_torrent, Key::Hash(info_hash))
            .await
    }

    /// Allows the peer-id prefix (ASCII, at most 20 bytes). Adding it twice is no error.
    pub async fn put_client(&self, client: &ClientPrefix) -> Result<(), Error> {
        check_text("client prefix", &client.0, PREFIX_MAX)?;
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                sqlx::query(&sql.insert_client)
                    .bind(client.0.as_str())
                    .execute(p)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    /// Removes the peer-id prefix from the allow-list. Whether it was there.
    pub async fn delete_client(&self, client: &ClientPrefix) -> Result<bool, Error> {
        self.delete(&self.sql.delete_client, Key::Text(&client.0))
            .await
    }

    async fn delete(&self, statement: &str, key: Key<'_>) -> Result<bool, Error> {
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let query = sqlx::query(statement);
                let query = match key {
                    Key::Id(id) => query.bind(id),
                    Key::Hash(hash) => query.bind(&hash[..]),
                    Key::Text(text) => query.bind(text),
                };
                Ok(query.execute(p).await?.rows_affected() > 0)
            })
        })
        .await
    }

    /// Adds a batch of deltas, in ONE transaction: to each user's row for the torrent (created
    /// on first use) and to the user's totals; a `completed` delta marks the row snatched and
    /// counts one completion for the user, only the first time for that user and torrent.
    ///
    /// The contract with the caller: `Ok` means the whole batch is committed; `Err` means
    /// none of it is (the transaction rolled back or never began), and the caller must keep
    /// the batch and write it again later (merged with newer deltas or not: addition does not
    /// care). Nothing is ever dropped here, except deltas of a user deleted since the
    /// announce, which are counted in the answer. The one case the database cannot settle is a
    /// connection lost while COMMIT is in flight: the server may have committed although the
    /// caller sees `Err`, and writing again then counts the bytes twice (never the snatch).
    pub async fn write(&self, batch: &[Delta]) -> Result<Written, Error> {
        self.write_batch(None, batch).await
    }

    /// [`write`](Self::write), closing its one ambiguous case: with an `id` (unique per
    /// batch, at most 64 ASCII bytes), the transaction also records the id, and a batch whose
    /// id is already recorded is not applied again (`Written::already_written`). So a caller
    /// that got `Err` writes the *same* batch again under the same id, and it counts exactly
    /// once whether or not the first COMMIT went through. Ids are kept for a week.
    pub async fn write_batch(&self, id: Option<&str>, batch: &[Delta]) -> Result<Written, Error> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        if let Some(id) = id {
            check_text("batch id", id, 64)?;
        }
        let now = unix_now();
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let mut tx = p.begin().await?;
                let done = async {
                    let mut written = Written::default();
                    if let Some(id) = id {
                        let seen = sqlx::query(&sql.batch_written)
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await?;
                        if seen.is_some() {
                            // Nothing was written: committing ends the read.
                            written.already_written = true;
                            return Ok(written);
                        }
                        sqlx::query(&sql.record_batch)
                            .bind(id)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(&sql.forget_batches)
                            .bind(now - BATCH_IDS_KEPT)
                            .execute(&mut *tx)
                            .await?;
                    }
                    let (hashes, ids) = batch::keys(batch);
                    let mut torrents = HashMap::with_hasher(batch::Hasher::default());
                    for chunk in hashes.chunks(KEYS_PER_LOOKUP) {
                        let text = sql.torrents_in(chunk.len());
                        let mut q = sqlx::query(&text);
                        for h in chunk {
                            q = q.bind(&h[..]);
                        }
                        for row in q.fetch_all(&mut *tx).await? {
                            torrents
                                .insert(info_hash(row.try_get("info_hash")?)?, row.try_get("id")?);
                        }
                    }
                    let mut users = HashSet::with_hasher(batch::Hasher::default());
                    for chunk in ids.chunks(KEYS_PER_LOOKUP) {
                        let text = sql.users_in(chunk.len());
                        let mut q = sqlx::query(&text);
                        for id in chunk {
                            q = q.bind(*id);
                        }
                        for row in q.fetch_all(&mut *tx).await? {
                            users.insert(row.try_get::<i64, _>("id")?);
                        }
                    }
                    let plan = batch::plan(batch, &users, &torrents);
                    written = Written {
                        already_written: false,
                        ..plan.written
                    };
                    for chunk in plan.totals.chunks(ROWS_PER_STATEMENT) {
                        let text = sql.add_users_totals(chunk.len());
                        let mut q = sqlx::query(&text);
                        for (user, c) in chunk {
                            q = q.bind(*user).bind(c[0]).bind(c[1]).bind(c[2]).bind(c[3]);
                        }
                        q.execute(&mut *tx).await?;
                    }
                    for chunk in plan.rows.chunks(ROWS_PER_STATEMENT) {
                        let text = sql.add_user_torrents(chunk.len());
                        let mut q = sqlx::query(&text);
                        for ((user, torrent), c) in chunk {
                            q = q.bind(*user).bind(*torrent);
                            q = q.bind(c[0]).bind(c[1]).bind(c[2]).bind(c[3]).bind(now);
                        }
                        q.execute(&mut *tx).await?;
                    }
                    if sql.marks_snatches_in_batches() {
                        // The rows each statement marked, per user: what `completed` adds.
                        let mut completed: HashMap<i64, i64> = HashMap::new();
                        for chunk in plan.snatches.chunks(ROWS_PER_STATEMENT) {
                            let text = sql.mark_snatched_rows(chunk.len());
                            let mut q = sqlx::query(&text).bind(now);
                            for (user, torrent) in chunk {
                                q = q.bind(*user).bind(*torrent);
                            }
                            for row in q.fetch_all(&mut *tx).await? {
                                *completed.entry(row.try_get("user_id")?).or_default() += 1;
                            }
                        }
                        let counts: Vec<(i64, i64)> = completed.into_iter().collect();
                        for chunk in counts.chunks(ROWS_PER_STATEMENT) {
                            let text = sql.add_users_completed(chunk.len());
                            let mut q = sqlx::query(&text);
                            for (user, n) in chunk {
                                q = q.bind(*user).bind(*n);
                                written.new_snatches += *n as usize;
                            }
                            q.execute(&mut *tx).await?;
                        }
                        return Ok(written);
                    }
                    for (user, torrent) in &plan.snatches {
                        let marked = sqlx::query(&sql.mark_snatched)
                            .bind(now)
                            .bind(*user)
                            .bind(*torrent)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        if marked > 0 {
                            sqlx::query(&sql.count_snatch)
                                .bind(*user)
                                .execute(&mut *tx)
                                .await?;
                            written.new_snatches += 1;
                        }
                    }
                    Ok(written)
                }
                .await;
                finish(tx, done).await
            })
        })
        .await
    }

    /// The user's totals and per-torrent rows; `None` if there is no such user.
    pub async fn user_stats(&self, user_id: i64) -> Result<Option<UserStats>, Error> {
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let totals = sqlx::query(&sql.user_totals)
                    .bind(user_id)
                    .fetch_optional(p)
                    .await?;
                let Some(totals) = totals else {
                    return Ok(None);
                };
                let rows = sqlx::query(&sql.user_torrent_rows)
                    .bind(user_id)
                    .fetch_all(p)
                    .await?;
                let torrents = rows
                    .iter()
                    .map(|row| -> Result<UserTorrentStats, Error> {
                        Ok(UserTorrentStats {
                            torrent_id: row.try_get("torrent_id")?,
                            info_hash: info_hash(row.try_get("info_hash")?)?,
                            uploaded: count("uploaded", row.try_get("uploaded")?)?,
                            downloaded: count("downloaded", row.try_get("downloaded")?)?,
                            seed_seconds: count("seed_seconds", row.try_get("seed_seconds")?)?,
                            leech_seconds: count("leech_seconds", row.try_get("leech_seconds")?)?,
                            completed_at: row.try_get("completed_at")?,
                            updated_at: row.try_get("updated_at")?,
                        })
                    })
                    .collect::<Result<_, Error>>()?;
                Ok(Some(UserStats {
                    user_id,
                    uploaded: count("uploaded", totals.try_get("uploaded")?)?,
                    downloaded: count("downloaded", totals.try_get("downloaded")?)?,
                    completed: count("completed", totals.try_get("completed")?)?,
                    seed_seconds: count("seed_seconds", totals.try_get("seed_seconds")?)?,
                    leech_seconds: count("leech_seconds", totals.try_get("leech_seconds")?)?,
                    torrents,
                }))
            })
        })
        .await
    }
}

/// The key of a row to delete.
#[derive(Clone, Copy)]
enum Key<'a> {
    Id(i64),
    Hash(&'a InfoHashBytes),
    Text(&'a str),
}

/// sqlx's MySQL driver reads only `mysql://`; `mariadb://` is the same server.
fn mysql_url(url: &str) -> String {
    match url.get(..10) {
        Some(scheme) if scheme.eq_ignore_ascii_case("mariadb://") => {
            format!("mysql://{}", &url[10..])
        }
        _ => url.to_owned(),
    }
}

/// A unique-key violation as the `Conflict` it means; anything else as a query error.
fn unique_conflict(error: sqlx::Error, meaning: &str) -> Error {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            Error::Conflict(meaning.to_owned())
        }
        _ => error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{mysql_url, unix_now, Database, Pool, BATCH_IDS_KEPT};
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
        let passkey = "0123456789abcdef0123456789abcdef".to_owned();
        db.put_user(&User {
            id: 1,
            passkey,
            enabled: true,
            can_download: true,
            download_factor: 1.0,
            upload_factor: 1.0,
        })
        .await
        .unwrap();
        let hash = [0x22; 20];
        db.put_torrent(&Torrent {
            id: Some(1),
            info_hash: hash,
            info_hash_v2: None,
            download_factor: 1.0,
            upload_factor: 1.0,
        })
        .await
        .unwrap();
        let delta = Delta {
            user_id: 1,
            torrent: hash,
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
