//! The one error type of the accounts crate.
//!
//! Callers need to tell three things apart: a URL they must fix (`UnknownScheme`, `BadUrl`), a
//! server they must wait for (`Unreachable`, `Query`, `TimedOut`: retry later, keep the batch),
//! and a request refused for its values (`Invalid`) or by the stored data (`Conflict`,
//! `Corrupt`). sqlx's error is kept as the source, boxed, so that no caller has to name sqlx.
//! URLs in messages have their password masked.

use std::error::Error as StdError;

type Source = Box<dyn StdError + Send + Sync>;

/// Why an accounts operation failed. Nothing was changed in the database when a write or an
/// upsert returns an error (each runs in one transaction).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown database URL {0:?}: expected sqlite://PATH, postgres://... or mysql://...")]
    UnknownScheme(String),
    #[error("bad database URL {url}: {source}")]
    BadUrl {
        url: String,
        #[source]
        source: Source,
    },
    #[error("cannot reach the database at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: Source,
    },
    #[error("migrating the {dialect} accounts schema failed: {source}")]
    Migrate {
        dialect: &'static str,
        #[source]
        source: Source,
    },
    #[error("accounts database query failed: {0}")]
    Query(#[source] Source),
    #[error("accounts database did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    #[error("refused value: {0}")]
    Invalid(String),
    #[error("refused by the accounts data: {0}")]
    Conflict(String),
    #[error("accounts database holds a value out of shape: {0}")]
    Corrupt(String),
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Error::Query(Box::new(error))
    }
}

/// `url` with the password of its user part replaced by `***`, for messages and logs.
pub fn masked_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::masked_url;

    #[test]
    fn masked_url_hides_only_the_password() {
        assert_eq!(
            masked_url("mysql://shoal:pw@127.0.0.1:3306/shoal"),
            "mysql://shoal:***@127.0.0.1:3306/shoal"
        );
        assert_eq!(
            masked_url("postgres://shoal@127.0.0.1:5/x"),
            "postgres://shoal@127.0.0.1:5/x"
        );
        assert_eq!(masked_url("sqlite://a/b@c.db"), "sqlite://a/b@c.db");
        assert_eq!(masked_url("nonsense"), "nonsense");
    }
}
