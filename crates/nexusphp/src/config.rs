//! `[nexusphp]`: what a NexusPHP site keeps outside its tables (its PHP time zone, its
//! Redis) and how
//! shoal serves it (how often it writes, how often it reads the site's changes, how many
//! peers it sends). Everything NexusPHP keeps in its `settings` table (intervals, the wait
//! and slot systems, promotions, hit and run) is read from there, not configured here.

use serde::{Deserialize, Serialize};

use crate::model::MIN_ANNOUNCE_WAIT;

/// `[nexusphp]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NexusphpConfig {
    /// Seconds between two writes to the site's tables.
    pub flush_interval: u64,
    /// Seconds between two reads of what the site changed (members, passkeys, torrents,
    /// promotions, settings, the allow list, purchases): at most 15.
    pub poll_interval: u64,
    /// The time zone the site's PHP writes its `datetime` columns in (`.env` `TIMEZONE`),
    /// as an offset from UTC: `+08:00` for `Asia/Shanghai`.
    pub time_zone: String,
    /// Peers sent when the client does not say (NexusPHP's `numwant` default).
    pub numwant_default: usize,
    /// Peers sent at most (NexusPHP sets no ceiling).
    pub numwant_max: usize,
    /// The site's Redis (`.env` `REDIS_HOST`, `REDIS_PORT`, `REDIS_PASSWORD`, `REDIS_DB`),
    /// as `redis://:PASSWORD@HOST:PORT/DB`, where shoal adds the cleanup's records
    /// ([`crate::cleanup`]). Empty: none are written, and the site's cleanup computes no
    /// seeding bonus nor members' seed and leech time for the announces shoal serves.
    pub redis_url: String,
}

impl Default for NexusphpConfig {
    fn default() -> Self {
        Self {
            flush_interval: 3,
            poll_interval: 10,
            time_zone: "+00:00".into(),
            numwant_default: 50,
            numwant_max: 200,
            redis_url: String::new(),
        }
    }
}

/// Whether `tz` is an offset MySQL takes as a session time zone: `+hh:mm` or `-hh:mm`.
pub fn is_offset(tz: &str) -> bool {
    let b = tz.as_bytes();
    b.len() == 6
        && matches!(b[0], b'+' | b'-')
        && b[3] == b':'
        && [1, 2, 4, 5].iter().all(|&i| b[i].is_ascii_digit())
        && tz[1..3].parse::<u8>().is_ok_and(|h| h <= 14)
        && tz[4..6].parse::<u8>().is_ok_and(|m| m < 60)
}

impl shoal_site::SiteConfig for NexusphpConfig {
    fn validate(&self, _keys: &shoal_site::Keys) -> anyhow::Result<()> {
        if self.flush_interval == 0 {
            anyhow::bail!("nexusphp.flush_interval must be at least 1 (seconds)");
        }
        if !(1..=15).contains(&self.poll_interval) {
            anyhow::bail!("nexusphp.poll_interval must be 1 to 15 (seconds)");
        }
        if !is_offset(&self.time_zone) {
            anyhow::bail!(
                "nexusphp.time_zone must be an offset such as \"+08:00\", not {:?}",
                self.time_zone
            );
        }
        if self.numwant_default == 0 || self.numwant_max < self.numwant_default {
            anyhow::bail!("nexusphp.numwant_default must be 1 to nexusphp.numwant_max");
        }
        if !self.redis_url.is_empty() {
            if let Err(e) = redis::Client::open(self.redis_url.as_str()) {
                // Not echoed: it may hold the password where it does not parse.
                anyhow::bail!(
                    "nexusphp.redis_url must be a Redis URL such as \
                     \"redis://:PASSWORD@127.0.0.1:6379/0\": {e}"
                );
            }
        }
        Ok(())
    }

    /// NexusPHP's `min interval` (300 s); the interval sent is drawn by the rules from
    /// the site's bands, `main.announce_interval` (1800 by default) standing for it here.
    fn settings(&self) -> shoal_site::SiteSettings {
        shoal_site::SiteSettings {
            default_numwant: self.numwant_default,
            max_numwant: self.numwant_max,
            min_interval: MIN_ANNOUNCE_WAIT,
            interval: 1800,
            flush_interval: self.flush_interval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_offset, NexusphpConfig};
    use shoal_site::SiteConfig;

    #[test]
    fn the_defaults_serve_and_bad_values_are_named() {
        let keys = shoal_site::Keys::default();
        assert!(NexusphpConfig::default().validate(&keys).is_ok());
        let with = |change: fn(&mut NexusphpConfig)| {
            let mut c = NexusphpConfig::default();
            change(&mut c);
            c
        };
        for (c, key) in [
            (with(|c| c.poll_interval = 16), "poll_interval"),
            (with(|c| c.time_zone = "Asia/Shanghai".into()), "time_zone"),
            (with(|c| c.flush_interval = 0), "flush_interval"),
            (
                with(|c| c.redis_url = "redis//:secret@127.0.0.1:6379".into()),
                "redis_url",
            ),
            (
                with(|c| c.redis_url = "http://:secret@127.0.0.1:6379/0".into()),
                "redis_url",
            ),
        ] {
            let e = c.validate(&keys).unwrap_err().to_string();
            assert!(e.contains(key) && !e.contains("secret"), "{e}");
        }
        let with_redis = NexusphpConfig {
            redis_url: "redis://:pw@127.0.0.1:6379/2".into(),
            ..NexusphpConfig::default()
        };
        assert!(with_redis.validate(&keys).is_ok());
        assert!(is_offset("+08:00") && is_offset("-03:30") && !is_offset("+8:00"));
        assert_eq!(NexusphpConfig::default().settings().min_interval, 300);
    }
}
