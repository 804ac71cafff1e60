//! The `[cluster]` section: several shoal nodes sharing their swarms through Redis (a Redis
//! Cluster, or one Redis). `docs/cluster.md` explains the design and each fault.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Share swarms with the other nodes (flag `--cluster URL,...` sets the seeds and this).
    pub enabled: bool,
    /// Seed nodes: `redis://host:port` of some Redis Cluster masters, or of one Redis.
    pub redis: Vec<String>,
    /// This node's name among the nodes; empty: the host name and the process id.
    pub node_id: String,
    /// Milliseconds between two exchanges with Redis.
    pub exchange_interval_ms: u64,
    /// Prefix of every key shoal writes (several trackers may share one Redis).
    pub key_prefix: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            redis: Vec::new(),
            node_id: String::new(),
            exchange_interval_ms: 1000,
            key_prefix: "shoal".into(),
        }
    }
}

impl ClusterConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if self.redis.is_empty() {
            anyhow::bail!("cluster.redis must name at least one redis://host:port");
        }
        for url in &self.redis {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                anyhow::bail!("cluster.redis: {url:?} is not a redis:// URL");
            }
        }
        if !(50..=60_000).contains(&self.exchange_interval_ms) {
            anyhow::bail!("cluster.exchange_interval_ms must be between 50 and 60000");
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            anyhow::bail!("cluster.key_prefix must be non-empty and free of braces");
        }
        Ok(())
    }

    /// This node's id: as configured, else `<host name>-<pid>`.
    pub fn node_id(&self) -> String {
        if !self.node_id.is_empty() {
            return self.node_id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "shoal".into());
        format!("{host}-{}", std::process::id())
    }
}
