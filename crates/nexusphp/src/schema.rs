//! NexusPHP's tables behind the seam every site schema implements ([`Schema`]): the
//! ledger's sums (the members' credit, factors applied) and the rows the announces left
//! to write ([`Site::take_batch`]) go in one transaction; a batch that fails goes back
//! ([`Site::put_back`], the site's part; the ledger's sums come back through the caller).
//! [`Schema::load`] (SIGUSR1, the admin API's reload) reads the site's tables again as a
//! poll does.
//!
//! After the rows, the batch's records for the cleanup go to the site's Redis
//! ([`crate::cleanup`], when `[nexusphp] redis_url` is set); those that fail go back for the
//! next batch, and a failure there fails nothing else.
//!
//! NexusPHP's tables keep no record of which batches were written and shoal creates
//! nothing there: a batch whose COMMIT succeeded but whose answer was lost is written
//! again (as NexusPHP's own announce would, on the client's retry).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use shoal_accounts::{
    Accounting, BoxFuture, Error, Loaded, Schema, Torrent as ShoalTorrent, User as ShoalUser,
    Written,
};
use shoal_tracker::private::members::Members;

use crate::cleanup::Cleanup;
use crate::db::{NexusDb, Sums};
use crate::site::Site;

/// A NexusPHP site's database, the site in memory and the private rule's tables.
pub struct NexusSchema {
    db: NexusDb,
    site: Arc<Site>,
    members: Arc<Members>,
    /// The site's Redis, for the cleanup's records (`None`: not configured).
    cleanup: Option<Cleanup>,
}

impl NexusSchema {
    pub fn new(
        db: NexusDb,
        site: Arc<Site>,
        members: Arc<Members>,
        cleanup: Option<Cleanup>,
    ) -> Self {
        Self {
            db,
            site,
            members,
            cleanup,
        }
    }

    /// Reads what the site may have changed and puts it in force.
    pub async fn poll(&self) -> Result<crate::sync::Applied, Error> {
        let data = self.db.load(false).await?;
        Ok(self.site.apply(data, &self.members))
    }

    async fn write_sums(&self, accounting: Accounting<'_>) -> Result<Written, Error> {
        let mut sums = Sums::new();
        for d in accounting.sums {
            let Ok(uid) = u32::try_from(d.user_id) else {
                continue;
            };
            let s = sums.entry(uid).or_default();
            (s.0, s.1) = (s.0 + d.uploaded, s.1 + d.downloaded);
        }
        let mut batch = self.site.take_batch();
        let mut passkeys: HashMap<u32, String> = HashMap::new();
        for (_, p) in &batch.peers {
            if let Entry::Vacant(v) = passkeys.entry(p.user_id) {
                if let Some(u) = self.site.users.get(&p.user_id) {
                    v.insert(u.passkey.clone());
                }
            }
        }
        match self.db.write(&batch, &sums, &passkeys).await {
            Ok(w) => {
                tracing::debug!(?w, "NexusPHP batch written");
                if let Some(cleanup) = &self.cleanup {
                    let records = std::mem::take(&mut batch.recorded);
                    cleanup.flush(&self.site, records).await;
                }
                Ok(Written {
                    applied: accounting.sums.len(),
                    ..Written::default()
                })
            }
            Err(e) => {
                self.site.put_back(batch);
                Err(e.into())
            }
        }
    }
}

impl Schema for NexusSchema {
    fn name(&self) -> &'static str {
        "nexusphp"
    }

    /// The site's tables read again (as a poll), then the members and torrents in force.
    fn load(&self) -> BoxFuture<'_, Result<Loaded, Error>> {
        Box::pin(async move {
            self.poll().await?;
            Ok(self.site.loaded())
        })
    }

    fn write<'a>(&'a self, batch: Accounting<'a>) -> BoxFuture<'a, Result<Written, Error>> {
        Box::pin(self.write_sums(batch))
    }
}

impl Site {
    /// The members and torrents as shoal's own model names them (the private rule's view:
    /// every check is the site's rules').
    pub fn loaded(&self) -> Loaded {
        Loaded {
            users: (self.users.iter())
                .map(|u| ShoalUser::new(i64::from(u.id), u.passkey.clone()))
                .collect(),
            torrents: (self.torrents.iter())
                .map(|t| ShoalTorrent::new(Some(i64::from(t.torrent.id)), t.torrent.info_hash))
                .collect(),
            clients: Vec::new(),
        }
    }
}
