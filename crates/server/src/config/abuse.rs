//! The `[access_list]`, `[rate_limit]` and `[block_list]` sections: the rules asked before
//! the store (see the core's `policy/`), and the core's [`Policy`] built from the config. Their own file so that the config tree's main file only
//! names them; `docs/abuse.md` explains them at length.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};
use shoal_tracker::policy::{AccessList, AccessMode, BlockList, Limits, Policy, RateLimit};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AccessModeConfig {
    #[default]
    Off,
    Allow,
    Deny,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct AccessListConfig {
    pub mode: AccessModeConfig,
    pub path: PathBuf,
    /// Named pipes whose lines (hex info hashes) list or unlist a torrent in force, the file
    /// untouched (opentracker's `access.fifo_add`, `access.fifo_delete`); empty: none.
    pub fifo_add: PathBuf,
    pub fifo_delete: PathBuf,
}

impl AccessListConfig {
    /// Refuses a list mode without a file, and pipes without a list, naming the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        let set = |p: &PathBuf| !p.as_os_str().is_empty();
        if self.mode != AccessModeConfig::Off && !set(&self.path) {
            bail!("access_list.path must be set when access_list.mode is not \"off\"");
        }
        if self.mode == AccessModeConfig::Off && (set(&self.fifo_add) || set(&self.fifo_delete)) {
            bail!("access_list.fifo_add and fifo_delete need an access list (access_list.mode)");
        }
        Ok(())
    }
}

/// Per-source token buckets (one per IPv4 address or IPv6 prefix, in a fixed table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Off by default: one IPv4 address can be a whole carrier-grade NAT.
    pub enabled: bool,
    /// Requests per second a source may keep up (its bucket's refill rate).
    pub requests_per_second: u32,
    /// Requests a source may send at once after a quiet spell (its bucket's size).
    pub burst: u32,
    /// Leading bits of an IPv4 address that make one source (32: each address).
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that make one source (64: each subnet).
    pub ipv6_prefix: u8,
    /// Buckets in the table (rounded up to a power of two); its memory is 8 bytes each.
    pub buckets: usize,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            requests_per_second: 20,
            burst: 1000,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            buckets: 1 << 16,
        }
    }
}

impl RateLimitConfig {
    /// Limits on, at `requests_per_second` in bursts of `burst`, the rest by default.
    pub fn on(requests_per_second: u32, burst: u32) -> Self {
        Self {
            enabled: true,
            requests_per_second,
            burst,
            ..Self::default()
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.requests_per_second == 0 || self.burst == 0 {
            bail!("rate_limit.requests_per_second and rate_limit.burst must be at least 1");
        }
        if !(1..=32).contains(&self.ipv4_prefix) || !(1..=128).contains(&self.ipv6_prefix) {
            bail!("rate_limit.ipv4_prefix must be 1 to 32 and rate_limit.ipv6_prefix 1 to 128");
        }
        if !(1..=1 << 24).contains(&self.buckets) {
            bail!("rate_limit.buckets must be between 1 and 16777216");
        }
        Ok(())
    }
}

/// Networks whose requests are never served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct BlockListConfig {
    /// File of CIDR ranges, one per line; empty: no block list.
    pub path: PathBuf,
}

impl RateLimitConfig {
    /// The core's settings for these limits.
    pub fn limits(&self) -> Limits {
        Limits {
            requests_per_second: self.requests_per_second,
            burst: self.burst,
            ipv4_prefix: self.ipv4_prefix,
            ipv6_prefix: self.ipv6_prefix,
            buckets: self.buckets,
        }
    }
}

impl super::Config {
    /// The policy this config asks for (reads the access-list and block-list files).
    pub fn policy(&self) -> anyhow::Result<Policy> {
        let mode = match self.access_list.mode {
            AccessModeConfig::Off => AccessMode::Off,
            AccessModeConfig::Allow => AccessMode::Allow,
            AccessModeConfig::Deny => AccessMode::Deny,
        };
        let path = self.access_list.path.clone();
        let mut policy = Policy::new(AccessList::load(mode, &path)?, path);
        let blocks = &self.block_list.path;
        if !blocks.as_os_str().is_empty() {
            policy = policy.with_block_list(BlockList::load(blocks)?, blocks.clone());
        }
        if self.rate_limit.enabled {
            policy = policy.with_rate_limit(RateLimit::new(&self.rate_limit.limits()));
        }
        Ok(policy)
    }
}
