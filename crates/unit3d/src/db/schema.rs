//! What shoal needs of the site's database, and the check that it is there.
//!
//! The site owns its schema (Laravel's migrations create it); shoal only reads and writes.
//! A database that is not UNIT3D's, or an older UNIT3D without a column shoal writes, must
//! stop the start with the list of what is missing, not fail one batch at a time later. The
//! unique keys are checked too: the upserts rely on them, and without one an upsert would
//! quietly add a second row where the site expects one.

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use super::{Error, Unit3dDb, Widths};

/// Every table shoal reads or writes, with every column it names.
const TABLES: &[(&str, &[&str])] = &[
    (
        "groups",
        &[
            "id",
            "slug",
            "download_slots",
            "is_immune",
            "is_freeleech",
            "is_double_upload",
        ],
    ),
    (
        "users",
        &[
            "id",
            "group_id",
            "passkey",
            "can_download",
            "is_donor",
            "is_lifetime",
            "uploaded",
            "downloaded",
            "deleted_at",
        ],
    ),
    (
        "torrents",
        &[
            "id",
            "info_hash",
            "status",
            "free",
            "doubleup",
            "seeders",
            "leechers",
            "times_completed",
            "balance",
            "deleted_at",
        ],
    ),
    (
        "peers",
        &[
            "peer_id",
            "ip",
            "port",
            "agent",
            "uploaded",
            "downloaded",
            "left",
            "seeder",
            "active",
            "visible",
            "connectable",
            "created_at",
            "updated_at",
            "torrent_id",
            "user_id",
        ],
    ),
    (
        "history",
        &[
            "user_id",
            "torrent_id",
            "agent",
            "uploaded",
            "actual_uploaded",
            "client_uploaded",
            "downloaded",
            "actual_downloaded",
            "client_downloaded",
            "seeder",
            "active",
            "seedtime",
            "immune",
            "created_at",
            "updated_at",
            "completed_at",
        ],
    ),
    ("blacklist_clients", &["peer_id_prefix"]),
    ("freeleech_tokens", &["user_id", "torrent_id"]),
    ("personal_freeleeches", &["user_id"]),
    ("featured_torrents", &["torrent_id"]),
    (
        "unregistered_info_hashes",
        &["user_id", "info_hash", "created_at", "updated_at"],
    ),
];

/// The unique keys the upserts rely on (`ON DUPLICATE KEY UPDATE`), by their columns.
const UNIQUE_KEYS: &[(&str, &[&str])] = &[
    ("peers", &["user_id", "torrent_id", "peer_id"]),
    ("history", &["user_id", "torrent_id"]),
    ("unregistered_info_hashes", &["info_hash", "user_id"]),
];

const COLUMNS: &str = "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, \
     CAST(LOWER(COLUMN_NAME) AS CHAR) AS c, \
     CAST(COALESCE(CHARACTER_MAXIMUM_LENGTH, 0) AS SIGNED) AS width \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()";

const UNIQUE_INDEX_COLUMNS: &str = "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, \
     CAST(INDEX_NAME AS CHAR) AS i, CAST(LOWER(COLUMN_NAME) AS CHAR) AS c \
     FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0";

/// (table, column) -> its length in characters (0 where it is not text).
type Found = HashMap<(String, String), usize>;

impl Unit3dDb {
    /// Checks that every table, column and unique key shoal reads or writes is in the
    /// site's database, and notes the lengths of the text columns it writes (a longer
    /// value is cut to fit). [`Error::Missing`] names each one that is not, e.g.
    /// `missing in the site's database: table peers, column history.seedtime`.
    pub async fn check(&mut self) -> Result<(), Error> {
        let (columns, unique) = self
            .bounded(async {
                let columns = sqlx::query(COLUMNS).fetch_all(&self.pool).await?;
                let unique = sqlx::query(UNIQUE_INDEX_COLUMNS)
                    .fetch_all(&self.pool)
                    .await?;
                Ok((columns, unique))
            })
            .await?;
        let mut found = Found::new();
        for row in &columns {
            let width: i64 = row.try_get("width")?;
            found.insert(
                (row.try_get("t")?, row.try_get("c")?),
                usize::try_from(width).unwrap_or(0),
            );
        }
        let mut keys: HashMap<(String, String), HashSet<String>> = HashMap::new();
        for row in &unique {
            keys.entry((row.try_get("t")?, row.try_get("i")?))
                .or_default()
                .insert(row.try_get("c")?);
        }
        let missing = missing(&found, &keys);
        if !missing.is_empty() {
            return Err(Error::Missing(missing));
        }
        self.widths = widths(&found);
        Ok(())
    }
}

/// What `TABLES` and `UNIQUE_KEYS` name that the database lacks, in their order.
fn missing(found: &Found, keys: &HashMap<(String, String), HashSet<String>>) -> Vec<String> {
    let tables: HashSet<&str> = found.keys().map(|(t, _)| t.as_str()).collect();
    let mut missing = Vec::new();
    for (table, columns) in TABLES {
        if !tables.contains(table) {
            missing.push(format!("table {table}"));
            continue;
        }
        for column in *columns {
            if !found.contains_key(&(table.to_string(), column.to_string())) {
                missing.push(format!("column {table}.{column}"));
            }
        }
    }
    for (table, columns) in UNIQUE_KEYS {
        if !tables.contains(table) {
            continue;
        }
        let wanted: HashSet<String> = columns.iter().map(|c| c.to_string()).collect();
        let present = keys.iter().any(|((t, _), c)| t == table && *c == wanted);
        if !present {
            missing.push(format!("unique key {table} ({})", columns.join(", ")));
        }
    }
    missing
}

/// The agent columns' lengths as found; UNIT3D's where a column is not text.
fn widths(found: &Found) -> Widths {
    let width =
        |table: &str, default: usize| match found.get(&(table.to_owned(), "agent".to_owned())) {
            Some(&w) if w > 0 => w,
            _ => default,
        };
    let default = Widths::default();
    Widths {
        peers_agent: width("peers", default.peers_agent),
        history_agent: width("history", default.history_agent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everything() -> (Found, HashMap<(String, String), HashSet<String>>) {
        let mut found = Found::new();
        for (table, columns) in TABLES {
            for column in *columns {
                found.insert((table.to_string(), column.to_string()), 0);
            }
        }
        let mut keys = HashMap::new();
        for (table, columns) in UNIQUE_KEYS {
            keys.insert(
                (table.to_string(), "PRIMARY".to_string()),
                columns.iter().map(|c| c.to_string()).collect(),
            );
        }
        (found, keys)
    }

    #[test]
    fn a_complete_schema_lacks_nothing() {
        let (found, keys) = everything();
        assert!(missing(&found, &keys).is_empty());
    }

    #[test]
    fn a_key_over_other_columns_is_not_the_key() {
        let (found, mut keys) = everything();
        keys.insert(
            ("history".into(), "PRIMARY".into()),
            ["user_id".to_string()].into(),
        );
        assert_eq!(
            missing(&found, &keys),
            ["unique key history (user_id, torrent_id)"]
        );
    }

    #[test]
    fn widths_follow_the_agent_columns() {
        let (mut found, _) = everything();
        found.insert(("peers".into(), "agent".into()), 255);
        assert_eq!(
            widths(&found),
            Widths {
                peers_agent: 255,
                history_agent: 64
            }
        );
    }
}
