//! UNIT3D's tables behind the seam every site schema implements ([`Schema`]): the
//! accounting the core hands over is joined with the site's pending changes into one
//! [`crate::model::Batch`] ([`Site::take_batch`]) and written in one transaction; a batch
//! that fails goes back (the site's part here, the ledger's sums through the caller).
//!
//! UNIT3D's tables keep no record of which batches were written, and shoal creates nothing
//! in the site's database: a batch whose COMMIT succeeded but whose answer was lost is
//! written again (as UNIT3D-Announce would). `docs/unit3d.md` says so.

use std::sync::Arc;

use shoal_accounts::{
    Accounting, BoxFuture, Error, Loaded, Schema, Torrent as ShoalTorrent, User as ShoalUser,
    Written,
};

use crate::db::Unit3dDb;
use crate::site::Site;

/// A UNIT3D site's database and the site in memory.
pub struct Unit3dSchema {
    db: Unit3dDb,
    site: Arc<Site>,
}

impl Unit3dSchema {
    pub fn new(db: Unit3dDb, site: Arc<Site>) -> Self {
        Self { db, site }
    }

    /// The site in memory.
    pub fn site(&self) -> &Arc<Site> {
        &self.site
    }

    /// The database, password masked.
    pub fn url(&self) -> &str {
        self.db.url()
    }
}

/// Keeps no row per client ([`Schema::keeps_peers`]): the site keeps its clients itself
/// (they decide its rules), so the core's per-client log stays off.
impl Schema for Unit3dSchema {
    fn name(&self) -> &'static str {
        "unit3d"
    }

    /// The users and torrents in force, as the private rule's tables hold them: the site
    /// in memory is kept current by the site's control calls, not by reloads.
    fn load(&self) -> BoxFuture<'_, Result<Loaded, Error>> {
        let loaded = self.site.loaded();
        Box::pin(async move { Ok(loaded) })
    }

    fn write<'a>(&'a self, batch: Accounting<'a>) -> BoxFuture<'a, Result<Written, Error>> {
        Box::pin(async move {
            let b = self.site.take_batch(batch.sums);
            match self.db.write(&b).await {
                Ok(_) => Ok(Written {
                    applied: batch.sums.len(),
                    ..Written::default()
                }),
                Err(e) => {
                    self.site.put_back(&b);
                    Err(e.into())
                }
            }
        })
    }
}

impl Site {
    /// The users and torrents as shoal's own model names them (the private rule's view).
    pub fn loaded(&self) -> Loaded {
        Loaded {
            users: self
                .users
                .iter()
                .map(|u| ShoalUser::new(i64::from(u.user.id), u.user.passkey.clone()))
                .collect(),
            torrents: self
                .torrents
                .iter()
                .map(|t| ShoalTorrent::new(Some(i64::from(t.torrent.id)), t.torrent.info_hash))
                .collect(),
            clients: Vec::new(),
        }
    }
}
