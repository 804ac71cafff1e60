//! The knobs of a Gazelle site's announce server, with Ocelot's defaults (its
//! `ocelot.conf` names, where they differ, in brackets), in shoal's config as `[gazelle]`.
//!
//! Ocelot's other settings have a home of their own in shoal's config: `listen_port` is
//! `[http] listen`, `max_connections`, `connection_timeout`, `keepalive_timeout` and
//! `max_request_size` are `[http]`'s, `mysql_*` is `[private] database`, `site_host`,
//! `site_service` and `site_path` are `[private] site_url`, `site_password` and
//! `report_password` are `[private]`'s, `log*` is `[log]`.

use serde::{Deserialize, Serialize};

/// `[gazelle]`: the rules Gazelle sites live by, as numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GazelleConfig {
    /// Seconds clients are told to wait between announces, and the `min interval`; the
    /// site changes it with `update_announce_interval`.
    pub announce_interval: u32,
    /// Up to this many seconds, drawn per answer, are added to the interval so that
    /// clients spread out after a restart; the site changes it with
    /// `update_announce_jitter`.
    pub announce_jitter: u32,
    /// Peers sent at most, and when the client does not say how many.
    pub numwant_limit: usize,
    /// Seconds an announce of a deleted torrent is told why it was deleted
    /// ("Unregistered torrent: Dupe"); after that, "Unregistered torrent".
    pub del_reason_lifetime: u64,
    /// Seconds of silence after which a peer is dropped from its torrent.
    pub peers_timeout: u64,
    /// Seconds between two sweeps for silent peers.
    pub reap_peers_interval: u64,
    /// Seconds between two writes to the site's tables (and two calls to the site for
    /// used-up tokens).
    pub schedule_interval: u64,
    /// Reads the site but writes nothing to its tables and calls nothing back: for a
    /// trial beside the site's own Ocelot.
    pub readonly: bool,
}

impl Default for GazelleConfig {
    fn default() -> Self {
        Self {
            announce_interval: 1800,
            announce_jitter: 240,
            numwant_limit: 50,
            del_reason_lifetime: 86_400,
            peers_timeout: 7200,
            reap_peers_interval: 1800,
            schedule_interval: 3,
            readonly: false,
        }
    }
}

impl GazelleConfig {
    /// Checks the values that would make the rules meaningless.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.schedule_interval == 0 {
            anyhow::bail!("gazelle.schedule_interval must be at least 1 (seconds)");
        }
        if self.announce_interval == 0 {
            anyhow::bail!("gazelle.announce_interval must be at least 1 (seconds)");
        }
        if self.peers_timeout == 0 || self.reap_peers_interval == 0 {
            anyhow::bail!(
                "gazelle.peers_timeout and gazelle.reap_peers_interval must be at least 1"
            );
        }
        Ok(())
    }
}

/// What the server asks of the `[gazelle]` section.
impl shoal_site::SiteConfig for GazelleConfig {
    /// The section's own checks, the site's passwords (32 letters and digits, as the site
    /// sends them in the path) and its URL.
    fn validate(&self, keys: &shoal_site::Keys) -> anyhow::Result<()> {
        GazelleConfig::validate(self)?;
        for (name, pw) in [
            ("site_password", &keys.site_password),
            ("report_password", &keys.report_password),
        ] {
            let safe = pw.chars().all(|c| c.is_ascii_alphanumeric());
            if pw.chars().count() != 32 || !safe {
                anyhow::bail!(
                    "private.{name} must be 32 letters and digits (the site's TRACKER_SECRET \
                     and TRACKER_REPORTKEY), as schema = \"gazelle\" needs"
                );
            }
        }
        if !keys.site_url.is_empty() {
            crate::expiry::SiteUrl::parse(&keys.site_url)
                .map_err(|e| anyhow::anyhow!("private.site_url: {e}"))?;
        }
        Ok(())
    }

    /// Ocelot's numwant limit (sent also when the client does not say), its interval as
    /// the `min interval` (the answer's own carries the jitter) and its schedule as the
    /// flush interval.
    fn settings(&self) -> shoal_site::SiteSettings {
        shoal_site::SiteSettings {
            default_numwant: self.numwant_limit,
            max_numwant: self.numwant_limit,
            min_interval: self.announce_interval,
            interval: self.announce_interval,
            flush_interval: self.schedule_interval,
        }
    }
}
