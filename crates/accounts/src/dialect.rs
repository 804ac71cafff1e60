//! The three SQL dialects: which one a URL names, and every statement the crate sends, written
//! once and spelled for each dialect when the database is opened.
//!
//! The statements differ in two places only: placeholders (`$1` for PostgreSQL, `?` for the
//! others) and upserts (`ON CONFLICT ... excluded.x` for SQLite and PostgreSQL, `ON DUPLICATE
//! KEY UPDATE ... VALUES(x)` for MariaDB/MySQL). Everything else is the common SQL all three
//! accept, so one text per statement stays the reference and the dialects cannot drift.

use crate::error::Error;

/// Which database server (or file) the accounts live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
    MySql,
}

impl Dialect {
    /// The dialect a database URL names: `sqlite:`, `postgres:`/`postgresql:`, `mysql:`/`mariadb:`.
    pub fn of_url(url: &str) -> Result<Dialect, Error> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => Ok(Dialect::Sqlite),
            "postgres" | "postgresql" => Ok(Dialect::Postgres),
            "mysql" | "mariadb" => Ok(Dialect::MySql),
            _ => Err(Error::UnknownScheme(crate::error::masked_url(url))),
        }
    }

    /// The dialect's name in messages and in the migrations directory.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
            Dialect::MySql => "mysql",
        }
    }

    /// `sql` (written with `?` placeholders) as this dialect spells it.
    fn spell(self, sql: &str) -> String {
        if self != Dialect::Postgres {
            return sql.to_owned();
        }
        let mut spelled = String::with_capacity(sql.len() + 8);
        let mut n = 0;
        for c in sql.chars() {
            if c == '?' {
                n += 1;
                spelled.push('$');
                spelled.push_str(&n.to_string());
            } else {
                spelled.push(c);
            }
        }
        spelled
    }

    /// `INSERT INTO table (columns) VALUES (?, ...)` that, on a conflict with `key`, sets each of
    /// `set` to `<set>` where `{old}` and `{new}` name the stored and the offered value.
    fn upsert(self, table: &str, columns: &[&str], key: &str, set: &[(&str, &str)]) -> String {
        self.upsert_rows(table, columns, key, set, 1)
    }

    /// `Dialect::upsert` (private) for `rows` rows in one statement (binds: each row's
    /// columns in turn).
    pub fn upsert_rows(
        self,
        table: &str,
        columns: &[&str],
        key: &str,
        set: &[(&str, &str)],
        rows: usize,
    ) -> String {
        let marks = format!("({})", vec!["?"; columns.len()].join(", "));
        let head = format!(
            "INSERT INTO {table} ({}) VALUES {}",
            columns.join(", "),
            vec![marks; rows.max(1)].join(", ")
        );
        let assign = |column: &str, value: &str| -> String {
            let (old, new) = match self {
                Dialect::MySql => (column.to_owned(), format!("VALUES({column})")),
                _ => (format!("{table}.{column}"), format!("excluded.{column}")),
            };
            let value = value.replace("{old}", &old).replace("{new}", &new);
            format!("{column} = {value}")
        };
        let sets: Vec<String> = set.iter().map(|(c, v)| assign(c, v)).collect();
        let tail = match self {
            Dialect::MySql => format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", ")),
            _ => format!(" ON CONFLICT ({key}) DO UPDATE SET {}", sets.join(", ")),
        };
        self.spell(&(head + &tail))
    }
}

/// Every statement, spelled for one dialect. Bind order is the order of the `?` in each text.
#[derive(Debug)]
pub struct Statements {
    pub select_users: String,
    pub select_torrents: String,
    pub select_clients: String,
    pub user_by_id: String,
    /// Binds: passkey, enabled, can_download, download_factor, upload_factor, id.
    pub update_user: String,
    /// Binds as `update_user`.
    pub insert_user: String,
    pub delete_user: String,
    pub torrent_by_hash: String,
    pub torrent_by_id: String,
    pub last_torrent_id: String,
    /// Binds: info_hash, info_hash_v2, download_factor, upload_factor, id.
    pub update_torrent: String,
    /// Binds as `update_torrent`.
    pub insert_torrent: String,
    pub delete_torrent: String,
    pub insert_client: String,
    pub delete_client: String,
    /// Binds: now, user_id, torrent_id. Changes a row only the first time.
    pub mark_snatched: String,
    pub count_snatch: String,
    /// Binds: batch id. A row if that batch was committed.
    pub batch_written: String,
    /// Binds: batch id, now.
    pub record_batch: String,
    /// Binds: the oldest `written_at` to keep.
    pub forget_batches: String,
    pub user_totals: String,
    pub user_torrent_rows: String,
    dialect: Dialect,
}

/// The columns of a `user_torrents` row a write adds, in bind order.
pub const USER_TORRENT_COLUMNS: [&str; 7] = [
    "user_id",
    "torrent_id",
    "uploaded",
    "downloaded",
    "seed_seconds",
    "leech_seconds",
    "updated_at",
];

/// The accounting counters that a write adds to, in `users` and `user_torrents` alike.
const COUNTERS: [&str; 4] = ["uploaded", "downloaded", "seed_seconds", "leech_seconds"];

impl Statements {
    /// `SELECT id FROM torrents WHERE id IN (n binds)`.
    pub fn torrents_in(&self, n: usize) -> String {
        self.dialect.spell(&format!(
            "SELECT id FROM torrents WHERE id IN ({})",
            vec!["?"; n.max(1)].join(", ")
        ))
    }

    /// `SELECT id FROM users WHERE id IN (n binds)`.
    pub fn users_in(&self, n: usize) -> String {
        self.dialect.spell(&format!(
            "SELECT id FROM users WHERE id IN ({})",
            vec!["?"; n.max(1)].join(", ")
        ))
    }

    /// Adds `n` rows to `user_torrents` (created on first use), in one statement. Binds, per
    /// row: user_id, torrent_id, uploaded, downloaded, seed_seconds, leech_seconds, now.
    pub fn add_user_torrents(&self, n: usize) -> String {
        let mut sum: Vec<(&str, &str)> = COUNTERS.iter().map(|c| (*c, "{old} + {new}")).collect();
        sum.push(("updated_at", "{new}"));
        self.dialect.upsert_rows(
            "user_torrents",
            &USER_TORRENT_COLUMNS,
            "user_id, torrent_id",
            &sum,
            n,
        )
    }

    /// Adds to the totals of `n` users in one statement (a user that no longer exists is
    /// left out by the join). Binds, per user: id, uploaded, downloaded, seed_seconds,
    /// leech_seconds. One statement per user cost the SQLite writer a round trip to its
    /// worker thread each, which profiled at a third of a busy private tracker's CPU.
    pub fn add_users_totals(&self, n: usize) -> String {
        let n = n.max(1);
        let text = match self.dialect {
            // SQLite and PostgreSQL name the columns of a `VALUES` list column1, column2, ...
            Dialect::Sqlite | Dialect::Postgres => {
                let sets: Vec<String> = COUNTERS
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c} = users.{c} + v.column{}", i + 2))
                    .collect();
                format!(
                    "UPDATE users SET {} FROM (VALUES {}) AS v WHERE users.id = v.column1",
                    sets.join(", "),
                    vec!["(?, ?, ?, ?, ?)"; n].join(", ")
                )
            }
            // MariaDB has no column names for a `VALUES` table: a derived table of
            // `SELECT`s joined to `users` instead.
            Dialect::MySql => {
                let first = format!(
                    "SELECT ? AS id, {}",
                    COUNTERS.map(|c| format!("? AS {c}")).join(", ")
                );
                let rows = std::iter::once(first)
                    .chain(std::iter::repeat_n(
                        "SELECT ?, ?, ?, ?, ?".to_owned(),
                        n - 1,
                    ))
                    .collect::<Vec<_>>()
                    .join(" UNION ALL ");
                let sets: Vec<String> = COUNTERS
                    .iter()
                    .map(|c| format!("users.{c} = users.{c} + v.{c}"))
                    .collect();
                format!(
                    "UPDATE users JOIN ({rows}) AS v ON users.id = v.id SET {}",
                    sets.join(", ")
                )
            }
        };
        self.dialect.spell(&text)
    }

    /// Whether [`Statements::mark_snatched_rows`] can be used: SQLite and PostgreSQL.
    /// MariaDB's `UPDATE` has no `RETURNING`, so there each snatch takes
    /// [`Statements::mark_snatched`] and [`Statements::count_snatch`]. A statement per
    /// snatch cost the SQLite writer a round trip to its worker thread each: under
    /// shoal-bench's load (2% of re-announces `completed`) some 25,000 per flush, and the
    /// two threads' context switches showed as 94 ns per announce on the tracker's CPU.
    pub fn marks_snatches_in_batches(&self) -> bool {
        self.dialect != Dialect::MySql
    }

    /// Marks `n` (user, torrent) rows snatched at once, each only if it was not already,
    /// and answers one row (`user_id`) per row it marked. Binds: now, then per row user_id,
    /// torrent_id. Only where [`Statements::marks_snatches_in_batches`].
    pub fn mark_snatched_rows(&self, n: usize) -> String {
        // A join, not `(user_id, torrent_id) IN (VALUES ...)`: SQLite plans that one as a
        // scan of the whole table, this one as one index search per row.
        self.dialect.spell(&format!(
            "UPDATE user_torrents SET completed_at = ? FROM (VALUES {}) AS v \
             WHERE user_torrents.user_id = v.column1 AND user_torrents.torrent_id = v.column2 \
             AND user_torrents.completed_at IS NULL RETURNING user_torrents.user_id",
            vec!["(?, ?)"; n.max(1)].join(", ")
        ))
    }

    /// Adds to the `completed` count of `n` users in one statement. Binds, per user: id,
    /// count. Only where [`Statements::marks_snatches_in_batches`].
    pub fn add_users_completed(&self, n: usize) -> String {
        self.dialect.spell(&format!(
            "UPDATE users SET completed = users.completed + v.column2 FROM (VALUES {}) AS v \
             WHERE users.id = v.column1",
            vec!["(?, ?)"; n.max(1)].join(", ")
        ))
    }

    pub fn new(dialect: Dialect) -> Statements {
        let d = dialect;
        let mut sum: Vec<(&str, &str)> = COUNTERS.iter().map(|c| (*c, "{old} + {new}")).collect();
        sum.push(("updated_at", "{new}"));
        Statements {
            dialect: d,
            select_users: d.spell(
                "SELECT id, passkey, enabled, can_download, download_factor, upload_factor \
                 FROM users ORDER BY id",
            ),
            select_torrents: d.spell(
                "SELECT id, info_hash, info_hash_v2, download_factor, upload_factor \
                 FROM torrents ORDER BY id",
            ),
            select_clients: d.spell("SELECT prefix FROM clients ORDER BY prefix"),
            user_by_id: d.spell("SELECT id FROM users WHERE id = ?"),
            update_user: d.spell(
                "UPDATE users SET passkey = ?, enabled = ?, can_download = ?, \
                 download_factor = ?, upload_factor = ? WHERE id = ?",
            ),
            insert_user: d.spell(
                "INSERT INTO users (passkey, enabled, can_download, download_factor, \
                 upload_factor, id) VALUES (?, ?, ?, ?, ?, ?)",
            ),
            delete_user: d.spell("DELETE FROM users WHERE id = ?"),
            torrent_by_hash: d.spell("SELECT id FROM torrents WHERE info_hash = ?"),
            torrent_by_id: d.spell("SELECT id FROM torrents WHERE id = ?"),
            last_torrent_id: d.spell("SELECT MAX(id) FROM torrents"),
            update_torrent: d.spell(
                "UPDATE torrents SET info_hash = ?, info_hash_v2 = ?, download_factor = ?, \
                 upload_factor = ? WHERE id = ?",
            ),
            insert_torrent: d.spell(
                "INSERT INTO torrents (info_hash, info_hash_v2, download_factor, upload_factor, \
                 id) VALUES (?, ?, ?, ?, ?)",
            ),
            delete_torrent: d.spell("DELETE FROM torrents WHERE info_hash = ?"),
            insert_client: d.upsert("clients", &["prefix"], "prefix", &[("prefix", "{old}")]),
            delete_client: d.spell("DELETE FROM clients WHERE prefix = ?"),
            mark_snatched: d.spell(
                "UPDATE user_torrents SET completed_at = ? \
                 WHERE user_id = ? AND torrent_id = ? AND completed_at IS NULL",
            ),
            count_snatch: d.spell("UPDATE users SET completed = completed + 1 WHERE id = ?"),
            batch_written: d.spell("SELECT written_at FROM written_batches WHERE id = ?"),
            record_batch: d.spell("INSERT INTO written_batches (id, written_at) VALUES (?, ?)"),
            forget_batches: d.spell("DELETE FROM written_batches WHERE written_at < ?"),
            user_totals: d.spell(
                "SELECT uploaded, downloaded, completed, seed_seconds, leech_seconds \
                 FROM users WHERE id = ?",
            ),
            user_torrent_rows: d.spell(
                "SELECT ut.torrent_id, t.info_hash, ut.uploaded, ut.downloaded, \
                 ut.seed_seconds, ut.leech_seconds, ut.completed_at, ut.updated_at \
                 FROM user_torrents ut JOIN torrents t ON t.id = ut.torrent_id \
                 WHERE ut.user_id = ? ORDER BY ut.torrent_id",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Dialect, Statements};

    #[test]
    fn urls_name_their_dialect() {
        assert_eq!(Dialect::of_url("sqlite://a.db").unwrap(), Dialect::Sqlite);
        assert_eq!(
            Dialect::of_url("postgresql://h/d").unwrap(),
            Dialect::Postgres
        );
        assert_eq!(Dialect::of_url("mariadb://h/d").unwrap(), Dialect::MySql);
        let refused = Dialect::of_url("redis://u:secret@h/0")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("expected sqlite://PATH"), "{refused}");
        assert!(!refused.contains("secret"), "{refused}");
    }

    #[test]
    fn postgres_placeholders_are_numbered() {
        let pg = Statements::new(Dialect::Postgres);
        assert_eq!(
            pg.mark_snatched,
            "UPDATE user_torrents SET completed_at = $1 \
             WHERE user_id = $2 AND torrent_id = $3 AND completed_at IS NULL"
        );
        assert!(!Statements::new(Dialect::MySql).mark_snatched.contains('$'));
    }

    #[test]
    fn user_totals_are_one_statement_per_chunk_in_every_dialect() {
        let sqlite = Statements::new(Dialect::Sqlite).add_users_totals(2);
        assert_eq!(
            sqlite,
            "UPDATE users SET uploaded = users.uploaded + v.column2, \
             downloaded = users.downloaded + v.column3, \
             seed_seconds = users.seed_seconds + v.column4, \
             leech_seconds = users.leech_seconds + v.column5 \
             FROM (VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)) AS v WHERE users.id = v.column1"
        );
        let pg = Statements::new(Dialect::Postgres).add_users_totals(2);
        assert!(pg.contains("($6, $7, $8, $9, $10)) AS v"), "{pg}");
        let mysql = Statements::new(Dialect::MySql).add_users_totals(2);
        assert!(
            mysql.starts_with(
                "UPDATE users JOIN (SELECT ? AS id, ? AS uploaded, ? AS downloaded, \
                 ? AS seed_seconds, ? AS leech_seconds UNION ALL SELECT ?, ?, ?, ?, ?) AS v \
                 ON users.id = v.id SET users.uploaded = users.uploaded + v.uploaded"
            ),
            "{mysql}"
        );
    }

    #[test]
    fn upserts_add_to_the_stored_counters() {
        let sqlite = Statements::new(Dialect::Sqlite).add_user_torrents(1);
        assert!(
            sqlite.contains("ON CONFLICT (user_id, torrent_id) DO UPDATE SET"),
            "{sqlite}"
        );
        assert!(sqlite.contains("uploaded = user_torrents.uploaded + excluded.uploaded"));
        assert!(sqlite.contains("updated_at = excluded.updated_at"));
        let mysql = Statements::new(Dialect::MySql).add_user_torrents(2);
        assert!(mysql.contains("ON DUPLICATE KEY UPDATE"), "{mysql}");
        assert!(
            mysql.contains("uploaded = uploaded + VALUES(uploaded)"),
            "{mysql}"
        );
        assert!(mysql.contains("VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?) ON"));
        let pg = Statements::new(Dialect::Postgres).add_user_torrents(2);
        assert!(
            pg.contains("VALUES ($1, $2, $3, $4, $5, $6, $7), ($8, $9, $10, $11, $12, $13, $14)"),
            "{pg}"
        );
    }
}
