//! The configuration: one struct tree, read from TOML, every option defaulted.
//!
//! The documented defaults live in `default_config.toml`, which `--print-config` prints
//! verbatim; a test checks that it parses to exactly [`Config::default`] and mentions every
//! option, so the printed file and the code cannot drift apart. Unknown keys are refused
//! (serde's `deny_unknown_fields`), and the error names the key.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

mod abuse;
mod cluster;
mod private;

pub use abuse::{AccessListConfig, AccessModeConfig, BlockListConfig, RateLimitConfig};
pub use cluster::ClusterConfig;
pub use private::PrivateConfig;
pub use shoal_opentracker::config::StatsConfig;

/// The documented default configuration, as printed by `shoal --print-config`.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("default_config.toml");

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub log_level: String,
    pub log_format: LogFormat,
    pub workers: usize,
    pub udp: UdpConfig,
    pub http: HttpConfig,
    pub https: HttpsConfig,
    pub announce: AnnounceConfig,
    pub store: StoreSection,
    pub access_list: AccessListConfig,
    pub stats: StatsConfig,
    pub rate_limit: RateLimitConfig,
    pub block_list: BlockListConfig,
    pub ws: WsConfig,
    pub state: StateConfig,
    pub admin: AdminConfig,
    pub privileges: PrivilegesConfig,
    pub private: PrivateConfig,
    pub cluster: ClusterConfig,
    /// Every site's own section (`[unit3d]`, `[gazelle]`, ...), from the site registry.
    #[serde(flatten)]
    pub sites: crate::sites::SiteSections,
}

/// Snapshots of the swarm store (see `state.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    pub file: PathBuf,
    pub snapshot_interval: u64,
    pub changes_interval: u64,
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
            changes_interval: 60,
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

/// The HTTP tracker (BEP 3, 23, 7, 48): plain-HTTP listeners and the settings HTTP and
/// HTTPS listeners share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    pub listen: Vec<SocketAddr>,
    pub keep_alive: bool,
    pub idle_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub max_request_bytes: usize,
    pub max_headers: usize,
    pub max_connections: usize,
    pub allow_ip_field: bool,
    pub max_scrape_hashes: usize,
    pub full_scrape: bool,
    pub full_scrape_interval: u64,
    pub gzip: bool,
    pub proxy_header: String,
    pub proxy_hop: usize,
    pub proxy_trusted: Vec<String>,
    pub proxy_protocol: bool,
    /// Where `GET /` is redirected (302); empty: 404 (opentracker's `tracker.redirect_url`).
    pub redirect_url: String,
    pub unix_socket: PathBuf,
}

/// HTTPS listeners (rustls) and their certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct HttpsConfig {
    pub listen: Vec<SocketAddr>,
    pub cert: PathBuf,
    pub key: PathBuf,
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
    /// Whether the open store keeps each peer's id (20 bytes a peer): only HTTP's
    /// non-compact answers show it; opentracker keeps none.
    pub peer_ids: bool,
}

/// The WebTorrent tracker (WebSocket on the HTTP and HTTPS listeners).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WsConfig {
    pub interval: u32,
    pub max_offers: usize,
    pub max_message_size: usize,
    pub max_frame_size: usize,
    pub max_connections: usize,
    pub max_torrents_per_connection: usize,
    pub outgoing_queue: usize,
    pub answer_queue: usize,
    pub offers_per_reply: u8,
    pub send_buffer: usize,
    pub send_timeout: u64,
    pub ping_interval: u64,
    pub idle_timeout: u64,
    pub max_strikes: u32,
    pub offer_max_age: u32,
    pub max_pending_offers: usize,
    pub max_scrape_hashes: usize,
    pub full_scrape: bool,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            interval: 120,
            max_offers: 10,
            max_message_size: 64 << 10,
            max_frame_size: 64 << 10,
            max_connections: 50_000,
            max_torrents_per_connection: 10_000,
            outgoing_queue: 1024,
            answer_queue: 16_384,
            offers_per_reply: 4,
            send_buffer: 64 << 10,
            send_timeout: 10,
            ping_interval: 60,
            idle_timeout: 180,
            max_strikes: 5,
            offer_max_age: 60,
            max_pending_offers: 16_384,
            max_scrape_hashes: 64,
            full_scrape: false,
        }
    }
}

/// How log lines are written: for a person (`text`) or for a log shipper (`json`, one
/// object per line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            log_level: "info".into(),
            log_format: LogFormat::Text,
            workers: 0,
            udp: UdpConfig::default(),
            http: HttpConfig::default(),
            https: HttpsConfig::default(),
            announce: AnnounceConfig::default(),
            store: StoreSection::default(),
            access_list: AccessListConfig::default(),
            stats: StatsConfig::default(),
            rate_limit: RateLimitConfig::default(),
            block_list: BlockListConfig::default(),
            ws: WsConfig::default(),
            state: StateConfig::default(),
            admin: AdminConfig::default(),
            privileges: PrivilegesConfig::default(),
            private: PrivateConfig::default(),
            cluster: ClusterConfig::default(),
            sites: crate::sites::SiteSections::default(),
        }
    }
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            listen: everywhere(6969),
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

impl HttpConfig {
    /// `proxy_trusted`, each an address or a network.
    pub fn proxy_trusted_nets(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        self.proxy_trusted.iter().map(|t| parse_net(t)).collect()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: everywhere(6969),
            keep_alive: true,
            idle_timeout_ms: 30_000,
            request_timeout_ms: 5_000,
            max_request_bytes: 4096,
            max_headers: 32,
            max_connections: 20_000,
            allow_ip_field: false,
            max_scrape_hashes: 100,
            full_scrape: true,
            full_scrape_interval: 60,
            gzip: true,
            proxy_header: String::new(),
            proxy_hop: 1,
            proxy_trusted: vec!["127.0.0.1".into(), "::1".into()],
            proxy_protocol: false,
            redirect_url: String::new(),
            unix_socket: PathBuf::new(),
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
            peer_ids: true,
        }
    }
}

/// Most headers a request may have (`http.max_headers`).
pub const MAX_HTTP_HEADERS: usize = 128;

pub use shoal_tracker::policy::block_list::parse_net;

/// Every address of both families on `port`: where the tracker listens by default.
fn everywhere(port: u16) -> Vec<SocketAddr> {
    vec![
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
    ]
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
        let config = Self::parse(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Parses without validating. An error names the key path first (`udp.listen[0]: invalid
    /// socket address syntax (line 3, column 11)`, `udp.bogus: unknown field ...`): toml's
    /// own message points at a line but does not say which option a wrong type belongs to.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                // The site sections are flattened in (`sites`), and serde loses the path
                // through a flattened field: find the key at fault from the text itself.
                if let Some(located) = locate_site_problem(text) {
                    return anyhow::anyhow!("{located}");
                }
            }
            let inner = e.into_inner();
            let message = inner.message().trim_end();
            let at = inner.span().map(|span| line_and_column(text, span.start));
            match at {
                Some((line, column)) => {
                    anyhow::anyhow!("{path}: {message} (line {line}, column {column})")
                }
                None => anyhow::anyhow!("{path}: {message}"),
            }
        })
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
        self.access_list.validate()?;
        self.stats.validate().map_err(anyhow::Error::msg)?;
        if self.http.redirect_url.contains(['\r', '\n']) {
            bail!("http.redirect_url must be one line");
        }
        self.private.validate()?;
        if let Some(schema) = self.private.site() {
            self.sites.validate(schema, &self.private.site_keys()?)?;
        }
        self.rate_limit.validate()?;
        self.cluster.validate()?;
        let ws = &self.ws;
        if ws.max_message_size < 1024 || ws.max_frame_size < 1024 {
            bail!("ws.max_message_size and ws.max_frame_size must be at least 1024");
        }
        if ws.outgoing_queue == 0
            || ws.answer_queue == 0
            || ws.offers_per_reply == 0
            || ws.max_connections == 0
            || ws.max_strikes == 0
            || ws.max_torrents_per_connection == 0
        {
            bail!(
                "ws.outgoing_queue, ws.answer_queue, ws.offers_per_reply, ws.max_connections, ws.max_strikes and \
                 ws.max_torrents_per_connection must be at least 1"
            );
        }
        if ws.ping_interval == 0 || ws.idle_timeout <= ws.ping_interval {
            bail!("ws.ping_interval must be at least 1 and below ws.idle_timeout");
        }
        if ws.send_timeout == 0 || ws.interval == 0 {
            bail!("ws.send_timeout and ws.interval must be at least 1");
        }
        self.validate_http()?;
        if self.admin.sample_interval == 0 || self.admin.sample_interval > 3600 {
            bail!("admin.sample_interval must be between 1 and 3600 seconds");
        }
        if !self.privileges.chroot.as_os_str().is_empty() && self.privileges.user.is_empty() {
            bail!("privileges.chroot needs privileges.user (a chroot left as root is no jail)");
        }
        if self.store.clean_interval == 0 {
            bail!("store.clean_interval must be at least 1 second");
        }
        if !self.store.peer_ids && (self.private.enabled || self.cluster.enabled) {
            bail!(
                "store.peer_ids = false is for open trackers on one node: private mode accounts \
                 each client by its peer id, and a cluster's nodes exchange them"
            );
        }
        Ok(())
    }

    fn validate_http(&self) -> anyhow::Result<()> {
        let h = &self.http;
        if !(256..=65536).contains(&h.max_request_bytes) {
            bail!("http.max_request_bytes must be between 256 and 65536");
        }
        if !(1..=MAX_HTTP_HEADERS).contains(&h.max_headers) {
            bail!("http.max_headers must be between 1 and {MAX_HTTP_HEADERS}");
        }
        if h.max_connections == 0 {
            bail!("http.max_connections must be at least 1");
        }
        if h.idle_timeout_ms == 0 || h.request_timeout_ms == 0 {
            bail!("http.idle_timeout_ms and http.request_timeout_ms must be at least 1");
        }
        if h.max_scrape_hashes == 0 {
            bail!("http.max_scrape_hashes must be at least 1");
        }
        if h.full_scrape_interval == 0 {
            bail!("http.full_scrape_interval must be at least 1 second");
        }
        if !h.proxy_header.is_empty()
            && !h
                .proxy_header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            bail!("http.proxy_header must be a header name such as X-Forwarded-For");
        }
        if h.proxy_hop == 0 {
            bail!("http.proxy_hop must be at least 1 (1 = the address the nearest proxy saw)");
        }
        for net in &h.proxy_trusted {
            parse_net(net).with_context(|| {
                format!("http.proxy_trusted: {net:?} is not an address or network")
            })?;
        }
        if !self.https.listen.is_empty()
            && (self.https.cert.as_os_str().is_empty() || self.https.key.as_os_str().is_empty())
        {
            bail!("https.cert and https.key must be set when https.listen is not empty");
        }
        Ok(())
    }

    /// The defaults, but nothing that outlives or collides with another in-process
    /// tracker: UDP on loopback port 0, no HTTP listener, no snapshot file, no admin
    /// listener. For tests and
    /// tools that start trackers in-process (the embedded defaults would share
    /// `shoal.state` in the working directory and port 6970).
    pub fn ephemeral() -> Self {
        let mut c = Self::default();
        c.udp.listen = vec!["127.0.0.1:0".parse().expect("valid address")];
        c.http.listen = Vec::new();
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

    /// The WebTorrent store's settings (`[store]`, and `[ws]`'s offer limits).
    pub fn ws_store_config(&self) -> shoal_swarm::webtorrent::WsStoreConfig {
        shoal_swarm::webtorrent::WsStoreConfig {
            shards: self.store.shards,
            peer_ttl: self.store.peer_ttl,
            torrent_ttl: self.store.torrent_ttl,
            offer_max_age: self.ws.offer_max_age,
            max_pending_offers: self.ws.max_pending_offers,
        }
    }

    /// The snapshot file; `None` when snapshots are off (`state.file` empty).
    pub fn state_file(&self) -> Option<&Path> {
        set(&self.state.file)
    }

    /// The connection-id key file; `None` when unset (the key comes from the snapshot, or
    /// is new).
    pub fn connection_id_key_file(&self) -> Option<&Path> {
        set(&self.udp.connection_id_key_file)
    }

    /// The private tracker's database URL (see [`PrivateConfig::database_url`]).
    pub fn private_database(&self) -> String {
        self.private.database_url(self.state_file())
    }

    /// The admin token file; `None` when unset.
    pub fn admin_token_file(&self) -> Option<&Path> {
        set(&self.admin.token_file)
    }
}

/// The key at fault in `text`, where the flattened site sections hide it from serde's path:
/// a top-level key no section or option has (`wrkers: unknown field`), or a problem inside
/// a site's section (`unit3d.bogus: unknown field`).
fn locate_site_problem(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let defaults = toml::Value::try_from(Config::default()).ok()?;
    let known = defaults.as_table()?;
    for (key, value) in table {
        if crate::sites::SCHEMAS.contains(&key.as_str()) {
            if let Err(problem) = crate::sites::SiteSections::check_section(&key, value) {
                return Some(format!("{key}.{problem}"));
            }
        } else if !known.contains_key(&key) {
            return Some(format!("{key}: unknown field `{key}`"));
        }
    }
    None
}

/// 1-based line and column of a byte offset.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The config's rule for optional paths: empty means unset.
fn set(path: &Path) -> Option<&Path> {
    (!path.as_os_str().is_empty()).then_some(path)
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
    fn networks_contain_their_addresses() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap().to_canonical();
        let n = parse_net("10.1.0.0/16").unwrap();
        assert!(n.contains(&ip("10.1.200.3")));
        assert!(n.contains(&ip("::ffff:10.1.0.1")));
        assert!(!n.contains(&ip("10.2.0.1")));
        assert!(parse_net("0.0.0.0/0").unwrap().contains(&ip("1.2.3.4")));
        let one = parse_net("::1").unwrap();
        assert!(one.contains(&ip("::1")));
        assert!(!one.contains(&ip("::2")));
        assert!(parse_net("10.0.0.0/33").is_err());
        assert!(parse_net("nope").is_err());
        let err = Config::from_toml("[http]\nproxy_trusted = [\"x\"]\n").unwrap_err();
        assert!(err.to_string().contains("proxy_trusted"), "{err:#}");
        let err = Config::from_toml("[https]\nlisten = [\"127.0.0.1:443\"]\n").unwrap_err();
        assert!(err.to_string().contains("https.cert"), "{err:#}");
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
