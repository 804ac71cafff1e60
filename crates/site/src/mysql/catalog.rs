//! The check at start that a site's database holds what shoal reads and writes: every table
//! and column, every unique key an upsert relies on. shoal creates nothing in a site's
//! database, so a missing one stops the start with its name rather than failing a write
//! an hour later. The widths of text columns are noted too: a longer value is cut to fit.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::{MySqlConnection, Row};

use super::error::Error;

const COLUMNS: &str = "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, \
     CAST(LOWER(COLUMN_NAME) AS CHAR) AS c, \
     CAST(COALESCE(CHARACTER_MAXIMUM_LENGTH, 0) AS SIGNED) AS w \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()";

const UNIQUE_KEYS: &str = "SELECT CAST(LOWER(TABLE_NAME) AS CHAR) AS t, \
     CAST(INDEX_NAME AS CHAR) AS i, CAST(LOWER(COLUMN_NAME) AS CHAR) AS c \
     FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0";

/// `(table, columns)` pairs, the columns' names apart by white space (`"id passkey"`).
pub type Tables = &'static [(&'static str, &'static str)];

/// What a site needs: `(table, columns)` and the unique keys `(table, columns)` its
/// upserts rely on.
pub struct Needs {
    pub tables: Tables,
    pub unique_keys: Tables,
}

/// The tables, columns (with their widths in characters, 0 where not text) and unique
/// keys of a database, names in lower case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub columns: BTreeMap<(String, String), usize>,
    pub unique_keys: BTreeMap<String, Vec<BTreeSet<String>>>,
}

impl Catalog {
    /// Reads the catalog of the connection's database.
    pub async fn read(conn: &mut MySqlConnection) -> Result<Catalog, Error> {
        let mut catalog = Catalog::default();
        for r in sqlx::query(COLUMNS).fetch_all(&mut *conn).await? {
            let w: i64 = r.try_get("w")?;
            let width = usize::try_from(w).unwrap_or(0);
            catalog
                .columns
                .insert((r.try_get("t")?, r.try_get("c")?), width);
        }
        let mut by_index: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for r in sqlx::query(UNIQUE_KEYS).fetch_all(&mut *conn).await? {
            by_index
                .entry((r.try_get("t")?, r.try_get("i")?))
                .or_default()
                .insert(r.try_get("c")?);
        }
        for ((table, _), columns) in by_index {
            catalog.unique_keys.entry(table).or_default().push(columns);
        }
        Ok(catalog)
    }

    /// What `needs` names that the database lacks, in `needs`' order: `table t` for a
    /// table with none of its columns, else `column t.c` for each column missing, and
    /// `unique key t (a, b)` for a key missing on a table that is there.
    pub fn lacking(&self, needs: &Needs) -> Vec<String> {
        let mut out = Vec::new();
        for (table, columns) in needs.tables {
            if !self.has_table(table) {
                out.push(format!("table {table}"));
                continue;
            }
            out.extend(
                columns
                    .split_whitespace()
                    .filter(|c| {
                        !self
                            .columns
                            .contains_key(&(table.to_string(), c.to_string()))
                    })
                    .map(|c| format!("column {table}.{c}")),
            );
        }
        for (table, columns) in needs.unique_keys {
            let wanted: BTreeSet<String> = columns.split_whitespace().map(String::from).collect();
            let found = (self.unique_keys.get(*table)).is_some_and(|keys| keys.contains(&wanted));
            if self.has_table(table) && !found {
                let columns: Vec<&str> = columns.split_whitespace().collect();
                out.push(format!("unique key {table} ({})", columns.join(", ")));
            }
        }
        out
    }

    /// [`Error::Missing`] with what `needs` names that the database lacks, if anything.
    pub fn check(&self, needs: &Needs) -> Result<(), Error> {
        let lacking = self.lacking(needs);
        if lacking.is_empty() {
            Ok(())
        } else {
            Err(Error::Missing(lacking))
        }
    }

    /// The width of a text column, or `default` where it is not text or not there.
    pub fn width(&self, table: &str, column: &str, default: usize) -> usize {
        match self.columns.get(&(table.to_owned(), column.to_owned())) {
            Some(&w) if w > 0 => w,
            _ => default,
        }
    }

    fn has_table(&self, table: &str) -> bool {
        self.columns.keys().any(|(t, _)| t == table)
    }
}

#[cfg(test)]
mod tests {
    use super::{Catalog, Needs};

    const NEEDS: Needs = Needs {
        tables: &[("peers", "peer_id ip"), ("users", "id")],
        unique_keys: &[("peers", "peer_id torrent_id")],
    };

    #[test]
    fn each_table_column_and_key_missing_is_named_in_order() {
        let mut c = Catalog::default();
        c.columns.insert(("peers".into(), "peer_id".into()), 20);
        assert_eq!(
            c.lacking(&NEEDS),
            [
                "column peers.ip",
                "table users",
                "unique key peers (peer_id, torrent_id)"
            ]
        );
        c.columns.insert(("peers".into(), "ip".into()), 0);
        c.columns.insert(("users".into(), "id".into()), 0);
        c.unique_keys.insert(
            "peers".into(),
            vec![["peer_id", "torrent_id"]
                .iter()
                .map(|s| s.to_string())
                .collect()],
        );
        assert!(c.check(&NEEDS).is_ok());
        assert_eq!(c.width("peers", "peer_id", 5), 20);
        assert_eq!(c.width("peers", "ip", 5), 5, "not text: the default");
    }
}
