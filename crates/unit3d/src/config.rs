//! The knobs of a UNIT3D site's announce server, with UNIT3D-Announce's defaults (its
//! `.env` names in brackets), in shoal's config as `[unit3d]`.

use serde::{Deserialize, Serialize};

/// `[unit3d]`: the rules UNIT3D sites live by, as numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Unit3dConfig {
    /// Seconds between two writes to the site's tables (`FLUSH_INTERVAL`).
    pub flush_interval: u64,
    /// Peers sent when the client does not say how many (`NUMWANT_DEFAULT`).
    pub numwant_default: usize,
    /// Peers sent at most (`NUMWANT_MAX`).
    pub numwant_max: usize,
    /// The interval sent is drawn between these two, in seconds (`ANNOUNCE_MIN`,
    /// `ANNOUNCE_MAX`); `announce_min` is also the `min interval`: a client that announces
    /// again sooner is counted but sent no peers.
    pub announce_min: u32,
    pub announce_max: u32,
    /// Percent of the upload credited to everyone: 200 is global double upload
    /// (`UPLOAD_FACTOR`).
    pub upload_factor: u8,
    /// Percent of the download charged to everyone: 0 is global freeleech
    /// (`DOWNLOAD_FACTOR`).
    pub download_factor: u8,
    /// Seconds between two sweeps that mark silent peers inactive and forget older ones
    /// (`PEER_EXPIRY_INTERVAL`).
    pub peer_expiry_interval: u64,
    /// Seconds of silence after which a peer is inactive (`ACTIVE_PEER_TTL`).
    pub active_peer_ttl: u64,
    /// Seconds of silence after which a peer is forgotten and its row deleted
    /// (`INACTIVE_PEER_TTL`): long enough for a client to come back from a long outage
    /// and still be counted from where it was.
    pub inactive_peer_ttl: u64,
    /// Active clients one user may run on one torrent (`MAX_PEERS_PER_TORRENT_PER_USER`).
    pub max_peers_per_torrent_per_user: u32,
    /// Ports refused besides the system's (those of services a tracker must not send
    /// peers to, and of old file-sharing programs), except on `stopped`.
    pub blacklisted_ports: Vec<u16>,
    /// Refuse the ports the system reserves (below 1024): almost always a fake, never
    /// connectable port.
    pub refuse_system_ports: bool,
    /// How many peer lists with seeders a user may receive: pairs of (window in seconds,
    /// lists), each counted with exponential decay over its window. Past any of them the
    /// user's leechers are sent leechers only until the count decays.
    pub seed_list_rate_limits: Vec<(u32, u32)>,
    /// The same for peer lists with leechers (sent to seeders).
    pub leech_list_rate_limits: Vec<(u32, u32)>,
    /// Donors (`users.is_donor`) are credited at least this upload and charged at most
    /// this download, in percent (100 and 100: no advantage).
    pub donor_upload_factor: u8,
    pub donor_download_factor: u8,
    /// Lifetime donors (`users.is_lifetime`), the same.
    pub lifetime_upload_factor: u8,
    pub lifetime_download_factor: u8,
}

impl Default for Unit3dConfig {
    fn default() -> Self {
        Self {
            flush_interval: 3,
            numwant_default: 25,
            numwant_max: 50,
            announce_min: 1800,
            announce_max: 3600,
            upload_factor: 100,
            download_factor: 100,
            peer_expiry_interval: 1800,
            active_peer_ttl: 7200,
            inactive_peer_ttl: 1_814_400,
            max_peers_per_torrent_per_user: 3,
            blacklisted_ports: default_blacklisted_ports(),
            refuse_system_ports: true,
            seed_list_rate_limits: vec![(60, 10), (3600, 120)],
            leech_list_rate_limits: vec![(60, 10), (3600, 120)],
            donor_upload_factor: 100,
            donor_download_factor: 100,
            lifetime_upload_factor: 100,
            lifetime_download_factor: 100,
        }
    }
}

/// The ports UNIT3D-Announce refuses above the system's: HTTP's alternatives, Direct
/// Connect hubs, Kazaa, Remote Desktop, eDonkey, Gnutella, WinMX.
fn default_blacklisted_ports() -> Vec<u16> {
    vec![1214, 3389, 4662, 6346, 6347, 6699, 8080, 8081]
}

impl Unit3dConfig {
    /// Checks the values that would make the rules meaningless.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.flush_interval == 0 {
            anyhow::bail!("unit3d.flush_interval must be at least 1 (seconds)");
        }
        if self.announce_min > self.announce_max {
            anyhow::bail!("unit3d.announce_min must not exceed unit3d.announce_max");
        }
        if self.numwant_default > self.numwant_max {
            anyhow::bail!("unit3d.numwant_default must not exceed unit3d.numwant_max");
        }
        for (window, max) in self
            .seed_list_rate_limits
            .iter()
            .chain(&self.leech_list_rate_limits)
        {
            if *window == 0 || *max == 0 {
                anyhow::bail!(
                    "unit3d rate limits are [window seconds > 0, lists >= 1] pairs, not [{window}, {max}]"
                );
            }
        }
        Ok(())
    }

    /// Whether announces from `port` are refused.
    pub fn port_refused(&self, port: u16) -> bool {
        (self.refuse_system_ports && port < 1024) || self.blacklisted_ports.contains(&port)
    }
}

/// What the server asks of the `[unit3d]` section.
impl shoal_site::SiteConfig for Unit3dConfig {
    /// The section's own checks, and the site's key: the site puts it in the path of every
    /// control call (its `TRACKER_KEY`).
    fn validate(&self, keys: &shoal_site::Keys) -> anyhow::Result<()> {
        Unit3dConfig::validate(self)?;
        let Some(key) = &keys.site_key else {
            anyhow::bail!(
                "private.schema = \"unit3d\" needs private.site_api_key or site_api_key_file"
            );
        };
        if key.chars().count() < crate::api::MIN_KEY_LEN {
            anyhow::bail!(
                "private.site_api_key must be at least {} characters (the site's TRACKER_KEY)",
                crate::api::MIN_KEY_LEN
            );
        }
        Ok(())
    }

    /// UNIT3D-Announce's numwant, its interval (the answer's own is drawn between its
    /// minimum and maximum) and its flush interval.
    fn settings(&self) -> shoal_site::SiteSettings {
        shoal_site::SiteSettings {
            default_numwant: self.numwant_default,
            max_numwant: self.numwant_max,
            min_interval: self.announce_min,
            interval: self.announce_max,
            flush_interval: self.flush_interval,
        }
    }
}
