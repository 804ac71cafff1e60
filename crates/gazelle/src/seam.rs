//! A Gazelle site on the site seam ([`shoal_site::Site`]): opened from `[gazelle]` and the
//! site's database (checked, read into memory, the swarms' figures emptied as Ocelot does
//! at start, nothing created), its control calls and reports, the reaper of silent clients
//! before each write, and the call back to the site for used-up tokens.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use shoal_site::control::{Control as SiteControl, Reply};
use shoal_site::{connect_check_load, log_loaded, site_members, Opening, Parts};

use crate::config::GazelleConfig;
use crate::control::{self, Control};
use crate::db::GazelleDb;
use crate::expiry::{SiteUrl, TokenExpiry};
use crate::schema::GazelleSchema;
use crate::site::Site;

/// A Gazelle site in force.
pub struct Gazelle {
    site: Arc<Site>,
    parts: Parts,
    /// The call back for used-up tokens, when `site_url` is set and the site not only read.
    token_expiry: Mutex<Option<TokenExpiry>>,
}

/// Opens the site: connect, check that its tables are Gazelle's (the start stops with what
/// is missing), read it into memory, and empty the swarms' figures as Ocelot does at start.
pub fn open(config: &GazelleConfig, o: &Opening<'_>) -> anyhow::Result<Arc<dyn shoal_site::Site>> {
    let (db, data) = o.runtime.block_on(connect_check_load(
        ("Gazelle", "users, torrents, tokens and whitelist"),
        GazelleDb::connect(o.database_url),
        async |db| db.check().await,
        async |db| db.load().await,
    ))?;
    if !config.readonly {
        (o.runtime.block_on(db.reset_swarms()))
            .context("resetting the Gazelle site's seeders and leechers")?;
    }
    let counts = [
        (data.users.len(), "users"),
        (data.torrents.len(), "torrents"),
        (data.tokens.len(), "tokens"),
        (data.whitelist.len(), "whitelisted clients"),
    ];
    log_loaded("Gazelle", db.url(), &counts);
    let members = site_members();
    let site = Arc::new(Site::new(config.clone(), members.clone(), data));
    let token_expiry = if o.keys.site_url.is_empty() || config.readonly {
        None
    } else {
        let url = SiteUrl::parse(&o.keys.site_url).map_err(anyhow::Error::msg)?;
        let every = Duration::from_secs(config.schedule_interval);
        let password = o.keys.site_password.clone();
        let caller = TokenExpiry::start(site.clone(), url, password, every)
            .context("starting the token-expiry caller")?;
        Some(caller)
    };
    let schema = Arc::new(GazelleSchema::new(db, site.clone()));
    let (site_password, report_password) = (&o.keys.site_password, &o.keys.report_password);
    let control = Control::new(site.clone(), site_password.clone(), report_password.clone());
    let parts = Parts::new(
        "gazelle",
        members,
        site.clone(),
        schema,
        Some(Arc::new(control)),
    );
    Ok(Arc::new(Gazelle {
        token_expiry: Mutex::new(token_expiry),
        site,
        parts,
    }))
}

impl shoal_site::Site for Gazelle {
    fn parts(&self) -> &Parts {
        &self.parts
    }

    /// Reaps the silent clients when `reap_peers_interval` has passed, as Ocelot's
    /// schedule does before it writes.
    fn before_flush(&self, unix_now: i64) {
        self.site.reap_if_due(unix_now);
    }

    /// Stops the token-expiry caller after one last try of what is queued.
    fn shutdown(&self) {
        if let Some(caller) = self.token_expiry.lock().take() {
            caller.stop();
        }
    }
}

/// Ocelot's calls are GETs without a body; the query is the call.
impl SiteControl for Control {
    fn route(&self, method: &str, path: &str, _content_length: Option<&[u8]>) -> Option<usize> {
        control::route(path).filter(|_| method == "GET").map(|_| 0)
    }

    fn answer(&self, _method: &str, path: &str, _body: &[u8]) -> Reply {
        match Control::answer(self, path) {
            Some(reply) => Reply::new(200, reply.content_type, reply.body),
            None => Reply::error(404, "not a call of the site's API"),
        }
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
            SiteUrl::parse(&keys.site_url).map_err(|e| anyhow::anyhow!("private.site_url: {e}"))?;
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
