//! Accounting: what the tracker adds per user and torrent (a batch of deltas, written in
//! one transaction or not at all) and what it reads back (a user's totals and rows).
//!
//! The batch is planned in memory first (`batch.rs`: sums per user and per row, and which
//! users and torrents still exist); this file runs the plan as few multi-row statements.

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use super::{decode_each, finish, Database, Pool};
use crate::batch::{self, KEYS_PER_LOOKUP, ROWS_PER_STATEMENT};
use crate::column::{check_text, count, info_hash, unix_now};
use crate::error::Error;
use crate::model::{Delta, UserStats, UserTorrentStats, Written};

/// Seconds a committed batch id is remembered (a retry comes within minutes; a week covers
/// any outage worth keeping a batch through).
pub(super) const BATCH_IDS_KEPT: i64 = 7 * 24 * 3600;

impl Database {
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
        in_transaction!(self, |tx| {
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
            let (torrent_ids, ids) = batch::keys(batch);
            let mut torrents = HashSet::with_hasher(batch::Hasher::default());
            for chunk in torrent_ids.chunks(KEYS_PER_LOOKUP) {
                let text = sql.torrents_in(chunk.len());
                let mut q = sqlx::query(&text);
                for id in chunk {
                    q = q.bind(*id);
                }
                for row in q.fetch_all(&mut *tx).await? {
                    torrents.insert(row.try_get::<i64, _>("id")?);
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
        })
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
                let torrents = decode_each(&rows, |row| {
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
                })?;
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
