//! Opening a UNIT3D site's database (`[private] schema = "unit3d"`): connect, check that
//! its tables are UNIT3D's (the start stops with what is missing), read the site into
//! memory ([`shoal_unit3d::Site`]) and register its users and torrents with the private
//! rule's tables. Nothing is created in the site's database.

use std::sync::Arc;

use anyhow::Context;
use shoal_tracker::private::members::{Members, Roster};
use shoal_unit3d::db::Unit3dDb;
use shoal_unit3d::schema::Unit3dSchema;
use shoal_unit3d::Site;

use crate::config::Config;

/// The site's schema (with the site in memory) and the members it registered.
pub fn open(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
    url: &str,
) -> anyhow::Result<(Arc<Unit3dSchema>, Arc<Members>)> {
    let db = runtime.block_on(async {
        let mut db = Unit3dDb::connect(url)
            .await
            .context("opening the UNIT3D site's database")?;
        db.check()
            .await
            .context("checking the UNIT3D site's tables")?;
        anyhow::Ok(db)
    })?;
    let data = runtime
        .block_on(db.load())
        .context("loading the UNIT3D site's groups, users, torrents and peers")?;
    tracing::info!(
        "UNIT3D site {}: {} groups, {} users, {} torrents, {} peers",
        db.url(),
        data.groups.len(),
        data.users.len(),
        data.torrents.len(),
        data.peers.len()
    );
    // The site's own rules decide every announce: the private rule only finds the user
    // and the torrent (no client allow-list of shoal's; the site's blacklist applies).
    let members = Arc::new(Members::new(&Roster::default(), false));
    let site = Arc::new(Site::new(config.unit3d.clone(), members.clone(), data));
    Ok((Arc::new(Unit3dSchema::new(db, site)), members))
}
