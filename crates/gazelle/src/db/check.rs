//! What shoal needs of a Gazelle site's database, and the check that it is there: a
//! database that is not Gazelle's (or a Gazelle without a column shoal writes) stops the
//! start with everything it lacks named, instead of failing one batch at a time later.
//! The keys the upserts rely on are checked too: without one an upsert would add a second
//! row where the site expects one.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::Row;

use super::{Error, GazelleDb, Widths};

/// Every table shoal reads or writes, with the columns it names (as Ocelot names them).
pub const NEEDED: &[(&str, &[&str])] = &[
    (
        "users_main",
        &[
            "id",
            "torrent_pass",
            "can_leech",
            "visible",
            "ip",
            "enabled",
        ],
    ),
    ("torrents", &["id", "info_hash", "freetorrent"]),
    (
        "torrents_leech_stats",
        &[
            "torrentid",
            "seeders",
            "leechers",
            "snatched",
            "balance",
            "last_action",
        ],
    ),
    ("users_leech_stats", &["userid", "uploaded", "downloaded"]),
    (
        "users_freeleeches",
        &["userid", "torrentid", "time", "expired", "downloaded"],
    ),
    ("xbt_client_whitelist", &["peer_id"]),
    (
        "xbt_files_users",
        &[
            "uid",
            "fid",
            "peer_id",
            "active",
            "uploaded",
            "downloaded",
            "upspeed",
            "downspeed",
            "remaining",
            "corrupt",
            "timespent",
            "announced",
            "ip",
            "useragent",
            "mtime",
        ],
    ),
    ("xbt_snatched", &["uid", "fid", "tstamp", "ip"]),
];

/// The unique keys the upserts rely on (`ON DUPLICATE KEY UPDATE`).
pub const KEYS: &[(&str, &[&str])] = &[
    ("xbt_files_users", &["peer_id", "fid", "uid"]),
    ("users_leech_stats", &["userid"]),
    ("torrents_leech_stats", &["torrentid"]),
    ("users_freeleeches", &["userid", "torrentid"]),
];

/// (table, column) -> its width in characters (0: not text), all in lower case.
pub type Columns = BTreeMap<(String, String), usize>;
/// The column sets of the unique keys, by table.
pub type Keys = BTreeMap<String, Vec<BTreeSet<String>>>;

impl GazelleDb {
    /// Checks that every table, column and key shoal needs is there, and notes the widths
    /// of the text columns it writes (a longer value is fitted to them).
    pub async fn check(&mut self) -> Result<(), Error> {
        let (columns, keys) = self
            .bounded(async {
                let mut columns = Columns::new();
                let rows = sqlx::query(
                    "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, \
                     CAST(LOWER(COLUMN_NAME) AS CHAR) AS c, \
                     CAST(COALESCE(CHARACTER_MAXIMUM_LENGTH, 0) AS SIGNED) AS w \
                     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()",
                )
                .fetch_all(&self.pool)
                .await?;
                for r in rows {
                    let w: i64 = r.try_get("w")?;
                    columns.insert((r.try_get("t")?, r.try_get("c")?), w.max(0) as usize);
                }
                let rows = sqlx::query(
                    "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, CAST(INDEX_NAME AS CHAR) AS i, \
                     CAST(LOWER(COLUMN_NAME) AS CHAR) AS c FROM information_schema.STATISTICS \
                     WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0",
                )
                .fetch_all(&self.pool)
                .await?;
                let mut by_index: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
                for r in rows {
                    by_index
                        .entry((r.try_get("t")?, r.try_get("i")?))
                        .or_default()
                        .insert(r.try_get("c")?);
                }
                let mut keys = Keys::new();
                for ((table, _), cols) in by_index {
                    keys.entry(table).or_default().push(cols);
                }
                Ok((columns, keys))
            })
            .await?;
        let lacking = lacking(&columns, &keys);
        if !lacking.is_empty() {
            return Err(Error::Missing(lacking));
        }
        let width = |table: &str, column: &str, default: usize| match columns
            .get(&(table.to_owned(), column.to_owned()))
        {
            Some(&w) if w > 0 => w,
            _ => default,
        };
        let d = Widths::default();
        self.widths = Widths {
            useragent: width("xbt_files_users", "useragent", d.useragent),
            peer_ip: width("xbt_files_users", "ip", d.peer_ip),
            snatch_ip: width("xbt_snatched", "ip", d.snatch_ip),
        };
        Ok(())
    }
}

/// What [`NEEDED`] and [`KEYS`] name that `columns` and `keys` lack, in their order.
pub fn lacking(columns: &Columns, keys: &Keys) -> Vec<String> {
    let mut out = Vec::new();
    for (table, needed) in NEEDED {
        let has = |c: &str| columns.contains_key(&(table.to_string(), c.to_string()));
        if !needed.iter().any(|c| has(c)) && !columns.keys().any(|(t, _)| t == table) {
            out.push(format!("table {table}"));
            continue;
        }
        out.extend(
            needed
                .iter()
                .filter(|c| !has(c))
                .map(|c| format!("column {table}.{c}")),
        );
    }
    for (table, cols) in KEYS {
        let wanted: BTreeSet<String> = cols.iter().map(|c| c.to_string()).collect();
        let found = keys.get(*table).is_some_and(|ks| ks.contains(&wanted));
        let table_there = columns.keys().any(|(t, _)| t == table);
        if table_there && !found {
            out.push(format!("unique key {table} ({})", cols.join(", ")));
        }
    }
    out
}
