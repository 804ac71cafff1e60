//! Opening a Gazelle site's database (`[private] schema = "gazelle"`): connect, check that
//! its tables are Gazelle's (the start stops with what is missing), read the site into
//! memory ([`shoal_gazelle::Site`]), register its users and torrents with the private
//! rule's tables, and empty the swarms' figures as Ocelot does at start. Nothing is
//! created in the site's database.

use std::sync::Arc;

use anyhow::Context;
use shoal_gazelle::db::GazelleDb;
use shoal_gazelle::schema::GazelleSchema;
use shoal_gazelle::Site;
use shoal_tracker::private::members::{Members, Roster};

use crate::config::Config;

/// The site's schema (with the site in memory) and the members it registered.
pub fn open(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
    url: &str,
) -> anyhow::Result<(Arc<GazelleSchema>, Arc<Members>)> {
    let (db, data) = runtime.block_on(async {
        let mut db = GazelleDb::connect(url)
            .await
            .context("opening the Gazelle site's database")?;
        db.check()
            .await
            .context("checking the Gazelle site's tables")?;
        let data = db
            .load()
            .await
            .context("loading the Gazelle site's users, torrents, tokens and whitelist")?;
        if !config.gazelle.readonly {
            db.reset_swarms()
                .await
                .context("resetting the Gazelle site's seeders and leechers")?;
        }
        anyhow::Ok((db, data))
    })?;
    let counts = [
        data.users.len(),
        data.torrents.len(),
        data.tokens.len(),
        data.whitelist.len(),
    ];
    tracing::info!(
        site = db.url(),
        "Gazelle site loaded: {} users, {} torrents, {} tokens, {} whitelisted clients",
        counts[0],
        counts[1],
        counts[2],
        counts[3]
    );
    // Ocelot's rules decide every announce: the private rule only finds the user and the
    // torrent.
    let members = Arc::new(Members::new(&Roster::default(), false));
    let site = Site::new(config.gazelle.clone(), members.clone(), data);
    Ok((Arc::new(GazelleSchema::new(db, Arc::new(site))), members))
}

/// The settings a Gazelle site's rules put in force: its numwant limit (sent also when the
/// client does not say), its interval as the `min interval` (the answer's own carries the
/// jitter) and its schedule as the flush interval.
pub fn settings(config: &mut Config) {
    let g = &config.gazelle;
    let numwant = g.numwant_limit.min(crate::config::UDP_MAX_NUMWANT);
    config.announce.default_numwant = numwant;
    config.announce.max_numwant = numwant;
    config.announce.min_interval = g.announce_interval;
    config.announce.interval = g.announce_interval;
    config.private.flush_interval = g.schedule_interval;
}

/// The call back to the site for used-up tokens, when `site_url` is set (and the site is
/// not only read).
pub fn token_expiry(
    config: &Config,
    site: &Arc<Site>,
) -> anyhow::Result<Option<shoal_gazelle::expiry::TokenExpiry>> {
    let p = &config.private;
    if p.site_url.is_empty() || config.gazelle.readonly {
        return Ok(None);
    }
    let url = shoal_gazelle::expiry::SiteUrl::parse(&p.site_url).map_err(anyhow::Error::msg)?;
    let every = std::time::Duration::from_secs(config.gazelle.schedule_interval);
    let caller = shoal_gazelle::expiry::TokenExpiry::start(
        site.clone(),
        url,
        p.site_password.clone(),
        every,
    )
    .context("starting the token-expiry caller")?;
    Ok(Some(caller))
}
