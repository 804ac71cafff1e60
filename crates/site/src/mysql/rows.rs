//! Reading rows of a site's tables: streamed (a busy site has millions of peer rows), each
//! decoded or left out, and the look-up of which ids a batch names still exist.

use std::collections::HashSet;

use futures_util::TryStreamExt;
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::error::Error;

/// Ids in one `IN (...)` look-up.
const IDS_PER_LOOKUP: usize = 5000;

/// Every row of `sql` decoded by `decode`; a row it answers `None` for (a value shoal cannot
/// hold: an id below zero, an address of 7 bytes) is left out and counted in one warning
/// naming `table`, so a stray row never stops a start.
pub async fn rows<T>(
    conn: &mut MySqlConnection,
    table: &'static str,
    sql: &str,
    mut decode: impl FnMut(&MySqlRow) -> Result<Option<T>, Error>,
) -> Result<Vec<T>, Error> {
    let mut stream = sqlx::query(sql).fetch(&mut *conn);
    let (mut kept, mut left_out) = (Vec::new(), 0usize);
    while let Some(row) = stream.try_next().await? {
        match decode(&row)? {
            Some(value) => kept.push(value),
            None => left_out += 1,
        }
    }
    if left_out > 0 {
        tracing::warn!(
            table,
            left_out,
            "rows of the site's database that shoal cannot hold were left out"
        );
    }
    Ok(kept)
}

/// The id in `column` (read as a signed integer); `None` where it does not fit a `u32`.
pub fn id(row: &MySqlRow, column: &str) -> Result<Option<u32>, Error> {
    let value: Option<i64> = row.try_get(column)?;
    Ok(value.and_then(|v| u32::try_from(v).ok()))
}

/// Which of `ids` are still rows of `table` (its key in `column`): the rows of a batch
/// whose member or torrent the site removed since are left out of the write. Answers the
/// ids found and the statements it ran.
pub async fn existing(
    conn: &mut MySqlConnection,
    table: &str,
    column: &str,
    ids: &[u32],
) -> Result<(HashSet<u32>, usize), Error> {
    let mut found = HashSet::with_capacity(ids.len());
    let mut statements = 0;
    for chunk in ids.chunks(IDS_PER_LOOKUP) {
        let places = vec!["?"; chunk.len()].join(", ");
        let sql = format!(
            "SELECT CAST({column} AS SIGNED) AS id FROM {table} WHERE {column} IN ({places})"
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for id in chunk {
            query = query.bind(*id);
        }
        for row in query.fetch_all(&mut *conn).await? {
            let id: i64 = row.try_get("id")?;
            found.extend(u32::try_from(id).ok());
        }
        statements += 1;
    }
    Ok((found, statements))
}
