//! Multi-row statements, written the same way for every site: a batch's rows go to the
//! server [`ROWS_PER_STATEMENT`] at a time in one statement each (one round trip per
//! thousand rows, not per row), and the full chunk's statement is prepared once and kept
//! (`persistent`), so that a busy site's server parses it once, not at every write. The
//! statement's text is fixed (`head`, `row` repeated, `tail`): the values only ever travel
//! as bound parameters.

use sqlx::mysql::{MySqlArguments, MySqlConnection};
use sqlx::MySql;

use super::Error;

/// Rows in one multi-row statement. MariaDB and MySQL take at most 65,535 placeholders in
/// one statement: a statement's row has at most [`MAX_PLACEHOLDERS_PER_ROW`].
pub const ROWS_PER_STATEMENT: usize = 1000;

/// The most placeholders one row of a [`Statement`] may have.
pub const MAX_PLACEHOLDERS_PER_ROW: usize = 65;

const _: () = assert!(ROWS_PER_STATEMENT * MAX_PLACEHOLDERS_PER_ROW <= 65_535);

/// A query with its values bound so far.
pub type Query<'q> = sqlx::query::Query<'q, MySql, MySqlArguments>;

/// `$query.bind(a).bind(b)…`: one row's values, in the order of its statement's columns.
#[macro_export]
macro_rules! binds {
    ($query:expr; $($value:expr),+ $(,)?) => {
        $query$(.bind($value))+
    };
}

/// A multi-row statement: `head`, then `row` once per row joined by `separator`, then
/// `tail`.
pub struct Statement {
    pub head: &'static str,
    pub row: &'static str,
    pub separator: &'static str,
    pub tail: &'static str,
}

impl Statement {
    /// `INSERT ... VALUES row, row, ... tail`: rows apart by commas.
    pub const fn values(head: &'static str, row: &'static str, tail: &'static str) -> Self {
        Statement {
            head,
            row,
            separator: ", ",
            tail,
        }
    }

    /// A derived table of rows (`SELECT ... UNION ALL SELECT ...`) between `head` and
    /// `tail`, for an `UPDATE ... JOIN`.
    pub const fn union(head: &'static str, row: &'static str, tail: &'static str) -> Self {
        Statement {
            head,
            row,
            separator: " UNION ALL ",
            tail,
        }
    }

    /// `head` followed by the rows' conditions, any of which matches (`DELETE ... WHERE
    /// (a) OR (b)`).
    pub const fn any_of(head: &'static str, row: &'static str) -> Self {
        Statement {
            head,
            row,
            separator: " OR ",
            tail: "",
        }
    }

    /// The statement's text for `rows` rows.
    pub fn sql(&self, rows: usize) -> String {
        let mut sql = String::with_capacity(
            self.head.len() + rows * (self.row.len() + self.separator.len()) + self.tail.len(),
        );
        sql.push_str(self.head);
        for i in 0..rows {
            if i > 0 {
                sql.push_str(self.separator);
            }
            sql.push_str(self.row);
        }
        sql.push_str(self.tail);
        sql
    }

    /// Runs the statement over `rows`, [`ROWS_PER_STATEMENT`] at a time, each row bound by
    /// `bind`; answers the rows the server says it affected and the statements it ran.
    pub async fn run<T>(
        &self,
        conn: &mut MySqlConnection,
        rows: &[T],
        bind: impl for<'q> Fn(Query<'q>, &T) -> Query<'q>,
    ) -> Result<(u64, usize), Error> {
        debug_assert!(self.row.matches('?').count() <= MAX_PLACEHOLDERS_PER_ROW);
        let (mut affected, mut statements) = (0, 0);
        let full = (rows.len() >= ROWS_PER_STATEMENT).then(|| self.sql(ROWS_PER_STATEMENT));
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let partial;
            let sql = match &full {
                Some(full) if chunk.len() == ROWS_PER_STATEMENT => full,
                _ => {
                    partial = self.sql(chunk.len());
                    &partial
                }
            };
            // A full chunk's statement recurs and stays prepared; a shorter one may not
            // (kept, each length would take a place in the connection's statement cache).
            let mut query = sqlx::query(sql).persistent(chunk.len() == ROWS_PER_STATEMENT);
            for row in chunk {
                query = bind(query, row);
            }
            affected += query.execute(&mut *conn).await?.rows_affected();
            statements += 1;
        }
        Ok((affected, statements))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAIRS: Statement = Statement {
        tail: " LIMIT 5",
        ..Statement::any_of("DELETE FROM t WHERE ", "(a = ? AND b = ?)")
    };

    #[test]
    fn the_row_is_repeated_between_head_and_tail() {
        assert_eq!(
            PAIRS.sql(1),
            "DELETE FROM t WHERE (a = ? AND b = ?) LIMIT 5"
        );
        assert_eq!(
            PAIRS.sql(2),
            "DELETE FROM t WHERE (a = ? AND b = ?) OR (a = ? AND b = ?) LIMIT 5"
        );
        assert_eq!(PAIRS.sql(ROWS_PER_STATEMENT).matches('?').count(), 2000);
    }
}
