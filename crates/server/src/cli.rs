//! The command line: flags for the common options on top of the config file.
//!
//! Precedence: embedded defaults, then `--config FILE`, then flags. Listener flags replace
//! the configured listeners: when any is given, only the listeners named on the command
//! line start.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Parser, Subcommand};

use crate::config::{Config, LogFormat, DEFAULT_CONFIG_TOML};

#[derive(Debug, Parser)]
#[command(
    name = "shoal",
    version,
    about = "A BitTorrent tracker: UDP, HTTP(S) and WebTorrent from one swarm store",
    after_help = "Files: --config FILE (the Debian package: /etc/shoal/shoal.toml; \
        `shoal --print-config` shows every option). State: the snapshot file \
        (state.file), the access list, the admin token file.\n\
        Signals: HUP reloads the access list, the admin token and TLS certificates; TERM or \
        INT drain the sockets, write the final snapshot and exit.\n\
        Exit status: 0 after a clean stop; 1 on a bad config or a failed start \
        (`shoal check-config FILE` lists every problem).\n\
        Guide: docs/operations.md (the package: /usr/share/doc/shoal/operations.md)."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Read the configuration from this TOML file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print every option with its default and a comment (valid TOML), then exit.
    #[arg(long)]
    pub print_config: bool,
    /// Serve UDP on this address (repeatable, e.g. --udp 0.0.0.0:6969 --udp [::]:6969).
    #[arg(long, value_name = "ADDR")]
    pub udp: Vec<SocketAddr>,
    /// Serve plain HTTP on this address (repeatable).
    #[arg(long, value_name = "ADDR")]
    pub http: Vec<SocketAddr>,
    /// Serve HTTPS on this address (repeatable); needs --tls-cert and --tls-key (or the
    /// config's https.cert and https.key).
    #[arg(long, value_name = "ADDR")]
    pub https: Vec<SocketAddr>,
    /// PEM certificate chain for HTTPS.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Worker threads (0 = one per core).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Snapshot file (restored at start, written periodically and on exit). Empty
    /// (`--state-file=`): no snapshots.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "",
          value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from))]
    pub state_file: Option<PathBuf>,
    /// Admin listener (metrics, status page, API) on this address.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Private-tracker mode: passkeys required, registered torrents only, per-user
    /// accounting (config `[private] enabled`).
    #[arg(long)]
    pub private: bool,
    /// The private tracker's database: sqlite://PATH, postgres://... or mysql://...
    /// (config `[private] database`).
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Whose tables the database holds: shoal, unit3d, gazelle or nexusphp (config
    /// `[private] schema`).
    #[arg(long, value_name = "NAME")]
    pub schema: Option<String>,
    /// Share swarms with other nodes through Redis: comma-separated redis://host:port seed
    /// nodes of a Redis Cluster, or one Redis (config `[cluster]`).
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Log line format: text (for people) or json (one object per line, for log shippers)
    /// (config `log_format`).
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
}

/// What to do instead of serving.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a config file and the files it names (certificate, key, access list, token
    /// file), print each problem with its key path, and exit non-zero if there is one.
    /// Binds nothing (like `nginx -t`).
    CheckConfig {
        /// The config file to check.
        file: PathBuf,
    },
    /// Print another tracker's config file as shoal's TOML, each line that has no shoal
    /// equivalent named in a comment (see docs/opentracker.md).
    ConvertConfig {
        /// The tracker the file is for.
        #[arg(long, value_enum)]
        from: ConvertFrom,
        /// Its config file (e.g. /etc/opentracker/opentracker.conf).
        file: PathBuf,
    },
}

/// Trackers whose config `convert-config` reads.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ConvertFrom {
    Opentracker,
}

impl Args {
    /// The configuration these arguments ask for.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if self.any_listener() {
            config.udp.listen = self.udp.clone();
            config.http.listen = self.http.clone();
            config.https.listen = self.https.clone();
        }
        if let Some(cert) = &self.tls_cert {
            config.https.cert = cert.clone();
        }
        if let Some(key) = &self.tls_key {
            config.https.key = key.clone();
        }
        if let Some(w) = self.workers {
            config.workers = w;
        }
        if let Some(p) = &self.state_file {
            config.state.file = p.clone();
        }
        if let Some(a) = self.admin {
            config.admin.listen = vec![a];
        }
        if self.private {
            config.private.enabled = true;
        }
        if let Some(url) = &self.database {
            config.private.database = url.clone();
        }
        if let Some(schema) = &self.schema {
            config.private.schema = schema.clone();
        }
        if !self.cluster.is_empty() {
            config.cluster.enabled = true;
            config.cluster.redis = self.cluster.clone();
        }
        if let Some(l) = &self.log_level {
            config.log_level = l.clone();
        }
        if let Some(f) = self.log_format {
            config.log_format = f;
        }
        config.validate()?;
        Ok(config)
    }

    fn any_listener(&self) -> bool {
        !self.udp.is_empty() || !self.http.is_empty() || !self.https.is_empty()
    }
}

/// The documented default configuration.
pub fn default_config_text() -> &'static str {
    DEFAULT_CONFIG_TOML
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_flags_replace_configured_listeners() {
        let args = Args::parse_from(["shoal", "--udp", "127.0.0.1:7000", "--workers", "3"]);
        let c = args.config().unwrap();
        assert_eq!(c.udp.listen, vec!["127.0.0.1:7000".parse().unwrap()]);
        assert!(c.http.listen.is_empty());
        assert_eq!(c.workers, 3);
        let c = Args::parse_from([
            "shoal",
            "--http",
            "127.0.0.1:7001",
            "--http",
            "[::1]:7001",
            "--https",
            "127.0.0.1:7443",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ])
        .config()
        .unwrap();
        assert!(c.udp.listen.is_empty());
        assert_eq!(c.http.listen.len(), 2);
        assert_eq!(c.https.listen, vec!["127.0.0.1:7443".parse().unwrap()]);
        assert_eq!(c.https.cert, PathBuf::from("c.pem"));
        let err = Args::parse_from(["shoal", "--https", "127.0.0.1:7443"])
            .config()
            .unwrap_err();
        assert!(err.to_string().contains("https.cert"));
        let args = Args::parse_from([
            "shoal",
            "--state-file",
            "/var/lib/shoal/state",
            "--admin",
            "127.0.0.1:7001",
        ]);
        let c = args.config().unwrap();
        assert_eq!(c.state.file, PathBuf::from("/var/lib/shoal/state"));
        let off = Args::parse_from(["shoal", "--state-file="])
            .config()
            .unwrap();
        assert_eq!(off.state.file, PathBuf::new(), "empty: no snapshots");
        assert_eq!(c.admin.listen, vec!["127.0.0.1:7001".parse().unwrap()]);
        assert_eq!(
            c.udp,
            Config::default().udp,
            "--admin is not a tracker listener"
        );
        let c = Args::parse_from(["shoal"]).config().unwrap();
        assert_eq!(c, Config::default());
    }
}
