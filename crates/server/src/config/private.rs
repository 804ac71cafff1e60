//! The `[private]` section: private-tracker mode (passkeys, registered torrents, per-user
//! accounting in a database). Its own file because it is the one section whose meaning is
//! a whole mode of the tracker; `docs/private.md` explains each key at length.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrivateConfig {
    /// Private mode: every announce and scrape needs a registered user's passkey.
    pub enabled: bool,
    /// `sqlite://PATH`, `postgres://...` or `mysql://...`; empty: `shoal.db` beside the
    /// state file (or in the working directory without one).
    pub database: String,
    /// Seconds between two batched writes of the accounting.
    pub flush_interval: u64,
    /// Only clients whose peer id starts with a registered prefix may announce.
    pub client_allow_list: bool,
    /// The most (user, torrent) accounts with unwritten sums kept in memory while the
    /// database is unreachable.
    pub max_pending_accounts: usize,
}

impl Default for PrivateConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            database: String::new(),
            flush_interval: 5,
            client_allow_list: false,
            max_pending_accounts: 1_000_000,
        }
    }
}

impl PrivateConfig {
    /// The database URL in force, given the state file (if any).
    pub fn database_url(&self, state_file: Option<&Path>) -> String {
        if !self.database.is_empty() {
            return self.database.clone();
        }
        let dir = state_file
            .and_then(Path::parent)
            .filter(|d| !d.as_os_str().is_empty());
        match dir {
            Some(dir) => format!("sqlite://{}", dir.join("shoal.db").display()),
            None => "sqlite://shoal.db".to_string(),
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.flush_interval == 0 {
            anyhow::bail!("private.flush_interval must be at least 1 (seconds)");
        }
        if self.max_pending_accounts == 0 {
            anyhow::bail!("private.max_pending_accounts must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_database_sits_beside_the_state_file() {
        let p = PrivateConfig::default();
        assert_eq!(
            p.database_url(Some(Path::new("/var/lib/shoal/shoal.state"))),
            "sqlite:///var/lib/shoal/shoal.db"
        );
        assert_eq!(
            p.database_url(Some(Path::new("shoal.state"))),
            "sqlite://shoal.db"
        );
        assert_eq!(p.database_url(None), "sqlite://shoal.db");
        let named = PrivateConfig {
            database: "postgres://u@h/db".into(),
            ..p
        };
        assert_eq!(named.database_url(None), "postgres://u@h/db");
    }
}
