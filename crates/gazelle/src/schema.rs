//! Gazelle's tables behind the seam every site schema implements ([`Schema`]): the
//! accounting the core hands over is joined with the site's pending changes into one
//! [`crate::model::Batch`] ([`Site::take_batch`]) and written in one transaction; a batch
//! that fails goes back (the site's part here, the ledger's sums through the caller).
//! [`Schema::load`] is the reload Ocelot does on SIGUSR1: the site's tables read again and
//! put in force.
//!
//! Gazelle's tables keep no record of which batches were written and shoal creates
//! nothing there: a batch whose COMMIT succeeded but whose answer was lost is written
//! again (as Ocelot would).

use std::sync::Arc;

use shoal_accounts::{Accounting, BoxFuture, Delta, Error, Loaded, Schema, Written};

use crate::db::GazelleDb;
use crate::site::Site;

/// A Gazelle site's database and the site in memory.
pub struct GazelleSchema {
    db: GazelleDb,
    site: Arc<Site>,
}

impl GazelleSchema {
    pub fn new(db: GazelleDb, site: Arc<Site>) -> Self {
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

    /// One write: the ledger's `sums` and the site's pending changes as one batch (put
    /// back when the write fails). The silent clients were reaped before, when due
    /// ([`shoal_site::Site::before_flush`]).
    async fn write_sums(&self, sums: &[Delta]) -> Result<Written, Error> {
        let b = self.site.take_batch(sums);
        let applied = Written {
            applied: sums.len(),
            ..Written::default()
        };
        if self.site.config.readonly {
            return Ok(applied);
        }
        let written = self.db.write(&b).await.map_err(|e| {
            self.site.put_back(&b);
            Error::from(e)
        })?;
        if written.addresses_too_wide > 0 {
            tracing::debug!(
                count = written.addresses_too_wide,
                "addresses wider than their column written empty"
            );
        }
        Ok(applied)
    }
}

impl Schema for GazelleSchema {
    /// Reads the site's tables again and puts them in force (SIGUSR1, the admin API's
    /// reload); answers the users and torrents the private rule should know.
    fn load(&self) -> BoxFuture<'_, Result<Loaded, Error>> {
        Box::pin(async move {
            let data = self.db.load().await?;
            self.site.reload(data);
            Ok(self.site.loaded())
        })
    }

    fn write<'a>(&'a self, batch: Accounting<'a>) -> BoxFuture<'a, Result<Written, Error>> {
        Box::pin(self.write_sums(batch.sums))
    }

    fn name(&self) -> &'static str {
        "gazelle"
    }

    /// The site keeps its clients itself: the core's per-client log stays off.
    fn keeps_peers(&self) -> bool {
        false
    }
}
