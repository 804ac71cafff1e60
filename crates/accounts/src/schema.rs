//! The seam between the tracker and a site's database: [`Schema`], what every site schema
//! implements (shoal's own, [`crate::Database`]; UNIT3D's, Gazelle's and NexusPHP's
//! tables beside it). The tracker reads its members through [`Schema::load`] and writes its
//! accounting through [`Schema::write`], and nothing else of it knows which schema is in
//! force.
//!
//! A schema takes the whole [`Accounting`] the tracker hands over (credited and actual
//! bytes, seeding and leeching time, the snatch and its time, and where the schema asks
//! for them with [`Schema::keeps_peers`] each client's address, agent, reported totals and
//! state) and writes what its tables keep: shoal's own keeps per-account sums and ignores
//! the clients' rows.

use std::future::Future;
use std::pin::Pin;

use crate::database::Database;
use crate::error::Error;
use crate::model::{Accounting, Loaded, Written};

/// A boxed future, so that [`Schema`] can be a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A site's database as the tracker uses it.
pub trait Schema: Send + Sync {
    /// The schema's name, as configured (`shoal`).
    fn name(&self) -> &'static str;

    /// Whether the schema keeps a row per client (then the tracker keeps each client's
    /// latest state and hands it over with every write). By default it does not.
    fn keeps_peers(&self) -> bool {
        false
    }

    /// Everything the announce path needs: users, torrents, client prefixes.
    fn load(&self) -> BoxFuture<'_, Result<Loaded, Error>>;

    /// Writes one batch in one transaction, or nothing (see [`Accounting::id`]).
    fn write<'a>(&'a self, batch: Accounting<'a>) -> BoxFuture<'a, Result<Written, Error>>;
}

impl Schema for Database {
    fn name(&self) -> &'static str {
        "shoal"
    }

    fn load(&self) -> BoxFuture<'_, Result<Loaded, Error>> {
        Box::pin(Database::load(self))
    }

    fn write<'a>(&'a self, batch: Accounting<'a>) -> BoxFuture<'a, Result<Written, Error>> {
        Box::pin(self.write_batch(batch.id, batch.sums))
    }
}
