//! The `[stats]` section of shoal's config: who may read opentracker's `/stats` page (its
//! `access.stats`) and where it is (its `access.stats_path`). Here rather than in the
//! server's config tree so that the page's rules and its settings live together.

use serde::{Deserialize, Serialize};

use crate::conf::net;

/// Who may read `/stats`, and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatsConfig {
    /// Addresses or networks (CIDR) answered; others get 403. Empty: `/stats` is off (404).
    pub allow: Vec<String>,
    /// Its path, with the leading `/`.
    pub path: String,
}

impl Default for StatsConfig {
    /// Loopback only: the counts say how busy the tracker is and which torrents are the
    /// largest, which is for the operator's graphs, not for anyone who asks.
    fn default() -> Self {
        Self {
            allow: vec!["127.0.0.1".into(), "::1".into()],
            path: "/stats".into(),
        }
    }
}

impl StatsConfig {
    /// Refuses what would not work, naming the option.
    pub fn validate(&self) -> Result<(), String> {
        for n in &self.allow {
            net(n).map_err(|e| format!("stats.allow: {e}"))?;
        }
        if !self.path.starts_with('/') || self.path.len() < 2 || self.path.contains(['?', ' ']) {
            return Err(
                "stats.path must be a path such as \"/stats\" (not \"/\", no '?' or space)".into(),
            );
        }
        Ok(())
    }

    /// The allowed networks (those that parse: [`StatsConfig::validate`] names the others).
    pub fn networks(&self) -> Vec<ipnet::IpNet> {
        self.allow.iter().filter_map(|n| net(n).ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_networks_are_allowed_and_paths_checked() {
        let c = StatsConfig {
            allow: vec!["10.1.0.0/16".into(), "::1".into()],
            path: "/s".into(),
        };
        assert!(c.validate().is_ok());
        assert_eq!(c.networks().len(), 2);
        for (allow, path) in [
            ("x", "/stats"),
            ("::1", "/"),
            ("::1", "stats"),
            ("::1", "/a?b"),
        ] {
            let c = StatsConfig {
                allow: vec![allow.into()],
                path: path.into(),
            };
            assert!(c.validate().is_err(), "{allow} {path}");
        }
    }
}
