//! The `[stats]` section: opentracker's `/stats` page on the HTTP listeners (see
//! `http/stats.rs` and docs/opentracker.md). Its own file so that the config tree's main
//! file only names it.

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::parse_net;

/// Who may read opentracker's `/stats` (its `access.stats`), and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatsConfig {
    /// Addresses or networks (CIDR) answered; others get 403. Empty: `/stats` is off (404).
    pub allow: Vec<String>,
    /// Its path (opentracker's `access.stats_path`, with the leading `/`).
    pub path: String,
}

impl Default for StatsConfig {
    fn default() -> Self {
        Self {
            allow: vec!["127.0.0.1".into(), "::1".into()],
            path: "/stats".into(),
        }
    }
}

impl StatsConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        for net in &self.allow {
            parse_net(net)
                .with_context(|| format!("stats.allow: {net:?} is not an address or network"))?;
        }
        if !self.path.starts_with('/') || self.path.len() < 2 || self.path.contains(['?', ' ']) {
            bail!("stats.path must be a path such as \"/stats\" (not \"/\", no '?' or space)");
        }
        Ok(())
    }
}
