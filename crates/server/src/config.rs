//! The configuration: one struct tree, read from TOML, every option defaulted.
//!
//! The documented defaults live in `default_config.toml`, which `--print-config` prints
//! verbatim; a test checks that it parses to exactly [`Config::default`] and mentions every
//! option, so the printed file and the code cannot drift apart. Unknown keys are refused
//! (serde's `deny_unknown_fields`), and the error names the key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// The documented default configuration, as printed by `shoal --print-config`.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("default_config.toml");

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub log_level: String,
    pub workers: usize,
    pub udp: UdpConfig,
    pub announce: AnnounceConfig,
    pub store: StoreSection,
    pub access_list: AccessListConfig,
    pub state: StateConfig,
    pub admin: AdminConfig,
    pub privileges: PrivilegesConfig,
}

/// Snapshots of the swarm store (see `state.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    pub file: PathBuf,
    pub snapshot_interval: u64,
    pub handover_timeout: u64,
}

/// The admin listener: metrics, status page, JSON API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    pub listen: Vec<SocketAddr>,
    pub token: String,
    pub token_file: PathBuf,
    pub sample_interval: u64,
}

/// Who the process runs as once its sockets are bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PrivilegesConfig {
    pub user: String,
    pub group: String,
    pub chroot: PathBuf,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            file: PathBuf::from("shoal.state"),
            snapshot_interval: 300,
            handover_timeout: 120,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: vec!["127.0.0.1:6970".parse().expect("valid address")],
            token: String::new(),
            token_file: PathBuf::new(),
            sample_interval: 5,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpConfig {
    pub listen: Vec<SocketAddr>,
    pub batch_size: usize,
    pub recv_buffer_bytes: usize,
    pub connection_id_max_age: u32,
    pub connection_id_grace: u32,
    pub connection_id_key_file: PathBuf,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnounceConfig {
    pub interval: u32,
    pub min_interval: u32,
    pub default_numwant: usize,
    pub max_numwant: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSection {
    pub shards: usize,
    pub peer_ttl: u32,
    pub torrent_ttl: u32,
    pub clean_interval: u64,
}

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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            log_level: "info".into(),
            workers: 0,
            udp: UdpConfig::default(),
            announce: AnnounceConfig::default(),
            store: StoreSection::default(),
            access_list: AccessListConfig::default(),
            state: StateConfig::default(),
            admin: AdminConfig::default(),
            privileges: PrivilegesConfig::default(),
        }
    }
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            listen: vec![
                "0.0.0.0:6969".parse().expect("valid address"),
                "[::]:6969".parse().expect("valid address"),
            ],
            batch_size: 64,
            recv_buffer_bytes: 8 << 20,
            connection_id_max_age: 120,
            connection_id_grace: 180,
            connection_id_key_file: PathBuf::new(),
            allow_ip_field: false,
            max_scrape_hashes: 74,
        }
    }
}

impl Default for AnnounceConfig {
    fn default() -> Self {
        Self {
            interval: 1800,
            min_interval: 900,
            default_numwant: 50,
            max_numwant: 200,
        }
    }
}

impl Default for StoreSection {
    fn default() -> Self {
        Self {
            shards: 512,
            peer_ttl: 3600,
            torrent_ttl: 3600,
            clean_interval: 30,
        }
    }
}

/// Largest `max_numwant` a UDP response can carry (IPv6 peers, 18 bytes each, in a
/// datagram that stays below 4 KiB).
pub const UDP_MAX_NUMWANT: usize = 200;
/// Largest `max_scrape_hashes`: a scrape request of that many hashes fits the 2 KiB
/// receive buffer.
pub const UDP_MAX_SCRAPE_HASHES: usize = 100;

impl Config {
    /// Parses a config file's text.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let config: Config = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("in config file {}", path.display()))
    }

    /// Refuses values that would make the tracker misbehave, naming the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.announce.max_numwant > UDP_MAX_NUMWANT {
            bail!("announce.max_numwant must be at most {UDP_MAX_NUMWANT}");
        }
        if self.udp.max_scrape_hashes == 0 || self.udp.max_scrape_hashes > UDP_MAX_SCRAPE_HASHES {
            bail!("udp.max_scrape_hashes must be between 1 and {UDP_MAX_SCRAPE_HASHES}");
        }
        if self.udp.batch_size == 0 || self.udp.batch_size > 1024 {
            bail!("udp.batch_size must be between 1 and 1024");
        }
        if self.announce.min_interval > self.announce.interval {
            bail!("announce.min_interval must not exceed announce.interval");
        }
        if self.access_list.mode != AccessModeConfig::Off
            && self.access_list.path.as_os_str().is_empty()
        {
            bail!("access_list.path must be set when access_list.mode is not \"off\"");
        }
        if self.admin.sample_interval == 0 || self.admin.sample_interval > 3600 {
            bail!("admin.sample_interval must be between 1 and 3600 seconds");
        }
        if !self.privileges.chroot.as_os_str().is_empty() && self.privileges.user.is_empty() {
            bail!("privileges.chroot needs privileges.user (a chroot left as root is no jail)");
        }
        if self.store.clean_interval == 0 {
            bail!("store.clean_interval must be at least 1 second");
        }
        Ok(())
    }

    /// The defaults, but nothing that outlives or collides with another in-process
    /// tracker: UDP on loopback port 0, no snapshot file, no admin listener. For tests and
    /// tools that start trackers in-process (the embedded defaults would share
    /// `shoal.state` in the working directory and port 6970).
    pub fn ephemeral() -> Self {
        let mut c = Self::default();
        c.udp.listen = vec!["127.0.0.1:0".parse().expect("valid address")];
        c.state.file = PathBuf::new();
        c.admin.listen = Vec::new();
        c
    }

    /// Worker threads to start: the configured number, or one per core.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    pub fn store_config(&self) -> shoal_swarm::StoreConfig {
        shoal_swarm::StoreConfig {
            shards: self.store.shards,
            peer_ttl: self.store.peer_ttl,
            torrent_ttl: self.store.torrent_ttl,
            default_numwant: self.announce.default_numwant,
            max_numwant: self.announce.max_numwant,
        }
    }

    pub fn access_mode(&self) -> shoal_swarm::AccessMode {
        match self.access_list.mode {
            AccessModeConfig::Off => shoal_swarm::AccessMode::Off,
            AccessModeConfig::Allow => shoal_swarm::AccessMode::Allow,
            AccessModeConfig::Deny => shoal_swarm::AccessMode::Deny,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_defaults_are_the_defaults() {
        let parsed: Config = toml::from_str(DEFAULT_CONFIG_TOML).unwrap();
        assert_eq!(parsed, Config::default());
    }

    /// Every option of the struct tree appears in the printed file, with a comment above.
    #[test]
    fn printed_defaults_document_every_option() {
        let value = toml::Value::try_from(Config::default()).unwrap();
        let mut keys = Vec::new();
        fn walk(prefix: &str, v: &toml::Value, keys: &mut Vec<String>) {
            if let toml::Value::Table(t) = v {
                for (k, v) in t {
                    match v {
                        toml::Value::Table(_) => walk(k, v, keys),
                        _ => keys.push(format!("{prefix}.{k}")),
                    }
                }
            }
        }
        walk("", &value, &mut keys);
        assert!(keys.len() > 15);
        let lines: Vec<&str> = DEFAULT_CONFIG_TOML.lines().collect();
        for key in keys {
            let (section, name) = key.split_once('.').unwrap();
            let header = format!("[{section}]");
            let start = if section.is_empty() {
                0
            } else {
                lines
                    .iter()
                    .position(|l| *l == header)
                    .unwrap_or_else(|| panic!("no section {header}"))
            };
            let at = lines[start..]
                .iter()
                .position(|l| l.starts_with(&format!("{name} = ")))
                .unwrap_or_else(|| panic!("option {key} not in default_config.toml"))
                + start;
            assert!(
                lines[at - 1].starts_with('#'),
                "option {key} has no comment"
            );
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::from_toml("[udp]\nlisten = []\nbogus_key = 1\n").unwrap_err();
        assert!(format!("{err:#}").contains("bogus_key"), "{err:#}");
        let err = Config::from_toml("wrkers = 3\n").unwrap_err();
        assert!(format!("{err:#}").contains("wrkers"), "{err:#}");
    }

    #[test]
    fn partial_files_keep_other_defaults() {
        let c = Config::from_toml("workers = 3\n[announce]\ninterval = 60\nmin_interval = 30\n")
            .unwrap();
        assert_eq!(c.workers, 3);
        assert_eq!(c.announce.interval, 60);
        assert_eq!(c.announce.max_numwant, 200);
        assert_eq!(c.udp, UdpConfig::default());
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let err = Config::from_toml("[announce]\nmax_numwant = 5000\n").unwrap_err();
        assert!(err.to_string().contains("max_numwant"));
        let err = Config::from_toml("[access_list]\nmode = \"allow\"\n").unwrap_err();
        assert!(err.to_string().contains("access_list.path"));
    }
}
