//! A UNIT3D site on the site seam ([`shoal_site::Site`]): opened from `[unit3d]` and the
//! site's database (checked, read into memory, nothing created), its control calls under
//! `/announce/<site key>/` and UNIT3D-Announce's `GET /announce/health/ping`, the clients
//! its `peers` table lists (the swarms resume, the ledger counts from their last
//! reports), and the sweep of silent clients before each write.

use std::sync::Arc;

use anyhow::Context;
use shoal_site::control::{Control, Reply};
use shoal_site::{
    connect_check_load, log_loaded, site_members, LastReport, ListedPeer, Opening, Parts,
};
use shoal_tracker::private::ledger::SavedPeer;

use crate::api;
use crate::config::Unit3dConfig;
use crate::db::Unit3dDb;
use crate::schema::Unit3dSchema;
use crate::site::Site;

/// UNIT3D-Announce's health check (since v0.3.1): monitoring asks it, it answers `PONG`.
pub const HEALTH_PATH: &str = "/announce/health/ping";

/// A UNIT3D site in force.
pub struct Unit3d {
    site: Arc<Site>,
    parts: Parts,
}

/// Opens the site: connect, check that its tables are UNIT3D's (the start stops with what
/// is missing), read it into memory. Nothing is created in its database.
pub fn open(config: &Unit3dConfig, o: &Opening<'_>) -> anyhow::Result<Arc<dyn shoal_site::Site>> {
    let key =
        o.keys.site_key.clone().context(
            "private.schema = \"unit3d\" needs private.site_api_key or site_api_key_file",
        )?;
    let (db, data) = o.runtime.block_on(connect_check_load(
        ("UNIT3D", "groups, users, torrents and peers"),
        Unit3dDb::connect(o.database_url),
        async |db| db.check().await,
        async |db| db.load().await,
    ))?;
    let counts = [
        (data.groups.len(), "groups"),
        (data.users.len(), "users"),
        (data.torrents.len(), "torrents"),
        (data.peers.len(), "peers"),
    ];
    log_loaded("UNIT3D", db.url(), &counts);
    let members = site_members();
    let site = Arc::new(Site::new(config.clone(), members.clone(), data));
    let schema = Arc::new(Unit3dSchema::new(db, site.clone()));
    let control = Arc::new(Unit3dControl {
        site: site.clone(),
        key,
    });
    let parts = Parts::new("unit3d", members, site.clone(), schema, Some(control));
    Ok(Arc::new(Unit3d { site, parts }))
}

impl shoal_site::Site for Unit3d {
    fn parts(&self) -> &Parts {
        &self.parts
    }

    /// The site's active clients as the ledger's records, from their `peers` rows: the
    /// first announce of each after the start is counted from what it last reported there
    /// (a restart without a ledger file, or a switch-over from another announce server,
    /// loses nothing and counts nothing twice).
    fn saved_peers(&self, now: u32, unix: u64) -> Vec<SavedPeer> {
        let report = |p: crate::model::Peer| LastReport {
            user_id: p.user_id,
            torrent_id: p.torrent_id,
            peer_id: p.peer_id,
            uploaded: p.uploaded,
            downloaded: p.downloaded,
            seeder: p.seeder,
            at: p.updated_at,
        };
        let clients = self.site.active_clients().into_iter();
        clients.map(|p| report(p).saved(now, unix)).collect()
    }

    fn listed_peers(&self) -> Vec<ListedPeer> {
        self.site.listed_peers()
    }

    fn before_flush(&self, unix_now: i64) {
        self.site.sweep_if_due(unix_now);
    }
}

/// The site's control calls, with its key.
struct Unit3dControl {
    site: Arc<Site>,
    key: String,
}

impl Control for Unit3dControl {
    fn route(&self, _method: &str, path: &str, content_length: Option<&[u8]>) -> Option<usize> {
        let path = path.split('?').next().unwrap_or(path);
        if path != HEALTH_PATH {
            api::route(path)?;
        }
        // A body without a `Content-Length` (chunked) is refused as every request body is.
        let length = content_length.map_or(Some(0), |v| {
            std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.trim().parse().ok())
        });
        Some(length.unwrap_or(usize::MAX))
    }

    fn answer(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        let path = path.split('?').next().unwrap_or(path);
        if path == HEALTH_PATH {
            return match method {
                "GET" | "HEAD" => Reply::new(200, "text/plain", "PONG"),
                _ => Reply {
                    allow: Some("GET"),
                    ..Reply::error(405, "the health check takes GET")
                },
            };
        }
        self.site.stats.request();
        api::serve(&self.site, &self.site.stats, &self.key, method, path, body)
            .map(Reply::from)
            .unwrap_or_else(|| Reply::error(404, "not a call of the site's API"))
    }
}

impl From<api::ApiReply> for Reply {
    fn from(r: api::ApiReply) -> Reply {
        Reply {
            content_type: r.content_type(),
            status: r.status,
            body: r.body,
            allow: r.allow,
        }
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
        if key.chars().count() < api::MIN_KEY_LEN {
            anyhow::bail!(
                "private.site_api_key must be at least {} characters (the site's TRACKER_KEY)",
                api::MIN_KEY_LEN
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
