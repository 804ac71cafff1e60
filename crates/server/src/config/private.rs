//! The `[private]` section: private-tracker mode (passkeys, registered torrents, per-user
//! accounting in a database). Its own file because it is the one section whose meaning is
//! a whole mode of the tracker; `docs/private.md` explains each key at length.

use std::path::{Path, PathBuf};

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
    /// Whose tables the database holds: `shoal` (shoal's own, created at start) or a
    /// site's, read and written as the site's own announce server does, nothing created:
    /// `unit3d` (docs/unit3d.md) or `gazelle` (docs/gazelle.md); its section
    /// (`[unit3d]`, `[gazelle]`) holds the site's settings.
    pub schema: String,
    /// The key of the site's control calls (`/announce/<key>/...`, UNIT3D's
    /// `TRACKER_KEY`): at least 32 characters.
    pub site_api_key: String,
    /// A file holding the key instead (its first line).
    pub site_api_key_file: PathBuf,
    /// The password of a Gazelle site's control calls (`/<site_password>/update`).
    pub site_password: String,
    /// The password of a Gazelle site's reports (`/<report_password>/report`).
    pub report_password: String,
    /// Where a Gazelle site answers the tracker's calls (`http://host[:port][/path]`).
    pub site_url: String,
}

impl Default for PrivateConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            database: String::new(),
            flush_interval: 5,
            client_allow_list: false,
            max_pending_accounts: 1_000_000,
            schema: "shoal".into(),
            site_api_key: String::new(),
            site_api_key_file: PathBuf::new(),
            site_password: String::new(),
            report_password: String::new(),
            site_url: String::new(),
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
        if self.schema != "shoal" && !crate::sites::SCHEMAS.contains(&self.schema.as_str()) {
            anyhow::bail!(
                "private.schema must be \"shoal\" or one of {:?}, not {:?}",
                crate::sites::SCHEMAS,
                self.schema
            );
        }
        Ok(())
    }

    /// The schema of a site in force (`None`: private mode off, or shoal's own schema).
    pub fn site(&self) -> Option<&str> {
        (self.enabled && self.schema != "shoal").then_some(self.schema.as_str())
    }

    /// The keys of the site's control calls and calls back, the site key read from its
    /// file where it is given that way.
    pub fn site_keys(&self) -> anyhow::Result<shoal_site::Keys> {
        let set = !self.site_api_key.is_empty() || !self.site_api_key_file.as_os_str().is_empty();
        Ok(shoal_site::Keys {
            site_key: if set { Some(self.site_key()?) } else { None },
            site_password: self.site_password.clone(),
            report_password: self.report_password.clone(),
            site_url: self.site_url.clone(),
        })
    }

    /// The site's control key: `site_api_key`, or the first line of `site_api_key_file`.
    pub fn site_key(&self) -> anyhow::Result<String> {
        if !self.site_api_key.is_empty() {
            return Ok(self.site_api_key.clone());
        }
        if self.site_api_key_file.as_os_str().is_empty() {
            anyhow::bail!(
                "private.schema = \"unit3d\" needs private.site_api_key or site_api_key_file"
            );
        }
        let text = std::fs::read_to_string(&self.site_api_key_file).map_err(|e| {
            anyhow::anyhow!(
                "private.site_api_key_file {}: {e}",
                self.site_api_key_file.display()
            )
        })?;
        Ok(text.lines().next().unwrap_or("").trim().to_string())
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

    /// A whole config with this `[private]` section (the site's section checks the key).
    fn config(private: PrivateConfig) -> crate::config::Config {
        crate::config::Config {
            private,
            ..crate::config::Config::default()
        }
    }

    #[test]
    fn a_site_schema_needs_a_known_name_and_a_long_enough_key() {
        let unit3d = |key: &str| {
            config(PrivateConfig {
                enabled: true,
                schema: "unit3d".into(),
                site_api_key: key.into(),
                ..PrivateConfig::default()
            })
        };
        assert!(unit3d(&"k".repeat(32)).validate().is_ok());
        let short = unit3d(&"k".repeat(31)).validate().unwrap_err().to_string();
        assert!(short.contains("at least 32 characters"), "{short}");
        let none = unit3d("").validate().unwrap_err().to_string();
        assert!(none.contains("site_api_key"), "{none}");
        let other = PrivateConfig {
            schema: "gazelle2".into(),
            ..PrivateConfig::default()
        };
        assert!(other
            .validate()
            .unwrap_err()
            .to_string()
            .contains("gazelle2"));
        // The key from a file: its first line.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{}\n", "f".repeat(40))).unwrap();
        let from_file = config(PrivateConfig {
            site_api_key_file: path,
            ..unit3d("").private
        });
        assert_eq!(from_file.private.site_key().unwrap(), "f".repeat(40));
        assert!(from_file.validate().is_ok());
    }
}
