//! Opening a UNIT3D site's database (`[private] schema = "unit3d"`): connect, check that
//! its tables are UNIT3D's (the start stops with what is missing), read the site into
//! memory ([`shoal_unit3d::Site`]) and register its users and torrents with the private
//! rule's tables. Nothing is created in the site's database.

use std::sync::Arc;

use anyhow::Context;
use shoal_proto::PeerId;
use shoal_tracker::private::credit::PeerRecord;
use shoal_tracker::private::ledger::SavedPeer;
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

/// The site's active clients as the ledger's records, from their `peers` rows: the first
/// announce of each after the start is counted from what it last reported there (a restart
/// without a ledger file, or a switch-over from another announce server, loses nothing
/// and counts nothing twice). `now` is the coarse clock, `unix` the wall clock at the same
/// moment.
pub fn ledger_records(site: &Site, now: u32, unix: u64) -> Vec<SavedPeer> {
    site.active_clients()
        .into_iter()
        .map(|p| {
            let age = unix.saturating_sub(u64::try_from(p.updated_at).unwrap_or(0));
            SavedPeer {
                user_id: u64::from(p.user_id),
                torrent_id: u64::from(p.torrent_id),
                peer_id: PeerId(p.peer_id),
                record: PeerRecord {
                    uploaded: p.uploaded,
                    downloaded: p.downloaded,
                    seen: now.saturating_sub(u32::try_from(age).unwrap_or(u32::MAX)),
                    seeding: p.seeder,
                    started: false,
                },
            }
        })
        .collect()
}
