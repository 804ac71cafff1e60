//! The site's records: users, registered torrents and allowed client prefixes. The tracker
//! loads them all at start and on reload; the admin API puts and deletes them one at a time.
//!
//! A put is an upsert in one transaction (look the key up, then insert or update), so that
//! a passkey or v2 hash that belongs to another record is a `Conflict` with its meaning,
//! not a driver error.

use sqlx::Row;

use super::{decode_each, finish, Database, Pool};
use crate::column::{check_factor, check_text, info_hash};
use crate::error::Error;
use crate::model::{ClientPrefix, InfoHashBytes, Loaded, Torrent, User};

/// The longest passkey and client prefix the schema holds (in bytes, ASCII).
const PASSKEY_MAX: usize = 64;
const PREFIX_MAX: usize = 20;

impl Database {
    /// Every user, torrent and client prefix, for the tracker's memory.
    pub async fn load(&self) -> Result<Loaded, Error> {
        let sql = &self.sql;
        self.bounded(async {
            on_pool!(&self.pool, |p| {
                let users = sqlx::query(&sql.select_users).fetch_all(p).await?;
                let torrents = sqlx::query(&sql.select_torrents).fetch_all(p).await?;
                let clients = sqlx::query(&sql.select_clients).fetch_all(p).await?;
                Ok(Loaded {
                    users: decode_each(&users, |row| {
                        Ok(from_columns!(row => User {
                            id, passkey, enabled, can_download, download_factor, upload_factor
                        }))
                    })?,
                    torrents: decode_each(&torrents, |row| {
                        let v2: Option<Vec<u8>> = row.try_get("info_hash_v2")?;
                        Ok(from_columns!(row => Torrent {
                            download_factor, upload_factor;
                            id: Some(row.try_get("id")?),
                            info_hash: info_hash(row.try_get("info_hash")?)?,
                            info_hash_v2: v2.map(info_hash).transpose()?,
                        }))
                    })?,
                    clients: decode_each(&clients, |row| Ok(ClientPrefix(row.try_get("prefix")?)))?,
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
        in_transaction!(self, |tx| {
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
        })
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
        in_transaction!(self, |tx| {
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
                .map_err(|e| unique_conflict(e, "the v2 info hash belongs to another torrent"))?;
            Ok(id)
        })
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
}

/// The key of a row to delete.
#[derive(Clone, Copy)]
enum Key<'a> {
    Id(i64),
    Hash(&'a InfoHashBytes),
    Text(&'a str),
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
