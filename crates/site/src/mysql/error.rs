//! Why an operation on a site's database failed: one error for every site crate, turned
//! into the accounts' error where the writer and the admin API see it.

use std::time::Duration;

pub(super) type Source = Box<dyn std::error::Error + Send + Sync>;

/// Why an operation on a site's database failed. A write that fails changed nothing: the
/// caller keeps its batch and writes it later.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad database URL {url}: {source}")]
    BadUrl {
        url: String,
        #[source]
        source: Source,
    },
    #[error("cannot reach the site's database at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: Source,
    },
    #[error("the database URL {0} names no database: add /<database> to it")]
    NoDatabase(String),
    /// What the site's database lacks: `table peers`, `column history.seedtime`,
    /// `unique key peers (user_id, torrent_id, peer_id)`.
    #[error("missing in the site's database: {}", .0.join(", "))]
    Missing(Vec<String>),
    #[error("site database query failed: {0}")]
    Query(#[source] Source),
    #[error("the site's database did not answer within {0:?}")]
    TimedOut(Duration),
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Error::Query(Box::new(error))
    }
}

/// A failed operation as the accounts' error (what the writer and the admin API know): a
/// database unreachable, late or failing a statement is a server to wait for (the batch is
/// kept and written again; `POST /api/private/flush` answers 503), never a value refused.
impl From<Error> for shoal_accounts::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Unreachable { url, source } => {
                shoal_accounts::Error::Unreachable { url, source }
            }
            Error::TimedOut(limit) => shoal_accounts::Error::TimedOut(limit),
            other => shoal_accounts::Error::Query(format!("the site's tables: {other}").into()),
        }
    }
}
