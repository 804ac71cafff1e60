//! The site's own database: NexusPHP's tables on MySQL or MariaDB, checked at start, read
//! into memory (at start, and again by the polls), and written in batches, one
//! transaction each, through the plumbing every site shares ([`SiteDb`]).
//!
//! shoal creates nothing there. [`NexusDb::check`] says whether every table, column and
//! unique key that shoal reads or writes is present ([`NEEDS`]); [`NexusDb::load`] reads
//! what the announce reads (`load`); [`NexusDb::write`] writes one batch (`write`).
//!
//! NexusPHP writes its `datetime` columns in PHP's time zone (`.env` `TIMEZONE`), not in
//! UTC: every transaction first sets the session's zone to `[nexusphp] time_zone`, so that
//! `UNIX_TIMESTAMP` and `FROM_UNIXTIME` read and write the site's local times.

use shoal_site::mysql::catalog::Needs;
pub use shoal_site::mysql::Error;
use shoal_site::mysql::SiteDb;
use sqlx::MySqlConnection;

mod load;
mod write;

pub use write::{Sums, Written};

/// Every table and column shoal reads or writes, and the unique keys its upserts rely on.
pub const NEEDS: Needs = Needs {
    tables: &[
        ("settings", "name value autoload"),
        (
            "users",
            "id passkey class enabled parked downloadpos uploaded downloaded donor donoruntil \
            clientselect showclienterror tracker_url_id last_announce_at",
        ),
        (
            "torrents",
            "id info_hash category size owner sp_state promotion_time_type promotion_until added \
            seeders leechers times_completed last_action visible banned hr approval_status price",
        ),
        ("categories", "id mode"),
        (
            "peers",
            "torrent peer_id userid ip port uploaded downloaded to_go seeder started last_action \
            prev_action connectable agent finishedat downloadoffset uploadoffset passkey ipv4 \
            ipv6 is_seed_box",
        ),
        (
            "snatched",
            "id torrentid userid ip port uploaded downloaded to_go seedtime leechtime last_action \
            startdat completedat finished hit_and_run_id leech_time_no_seeder",
        ),
        ("torrents_state", "id global_sp_state begin deadline"),
        (
            "agent_allowed_family",
            "id family start_name peer_id_pattern peer_id_match_num peer_id_matchtype \
            peer_id_start agent_pattern agent_match_num agent_matchtype agent_start exception \
            allowhttps",
        ),
        (
            "agent_allowed_exception",
            "id family_id name peer_id agent comment",
        ),
        (
            "hit_and_runs",
            "id uid torrent_id snatched_id created_at updated_at",
        ),
        ("torrent_buy_logs", "uid torrent_id"),
        (
            "cheaters",
            "added userid torrentid uploaded downloaded anctime seeders leechers hit comment",
        ),
    ],
    unique_keys: &[
        ("peers", "torrent peer_id userid"),
        ("snatched", "torrentid userid"),
        ("hit_and_runs", "uid torrent_id"),
    ],
};

/// A NexusPHP site's database. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct NexusDb {
    db: SiteDb,
    /// The session time zone of every transaction (`[nexusphp] time_zone`).
    time_zone: String,
}

/// Sets the session's time zone to the site's (`+hh:mm`, checked by the config).
async fn zone(conn: &mut MySqlConnection, tz: &str) -> Result<(), Error> {
    sqlx::query("SET time_zone = ?")
        .bind(tz)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl NexusDb {
    /// Opens a pool to `mysql://user:pw@host:port/database`; nothing is read yet.
    pub async fn connect(url: &str, time_zone: &str) -> Result<NexusDb, Error> {
        Ok(NexusDb {
            db: SiteDb::connect(url).await?,
            time_zone: time_zone.to_owned(),
        })
    }

    /// The URL it was opened with, password masked.
    pub fn url(&self) -> &str {
        self.db.url()
    }

    /// Whether the database holds every table, column and unique key of [`NEEDS`]; the
    /// error names each one missing.
    pub async fn check(&self) -> Result<(), Error> {
        self.db
            .check_tables(NEEDS.tables, NEEDS.unique_keys)
            .await
            .map(drop)
    }

    /// What the announce reads, in one consistent view. `everything`: the start's read,
    /// with the clients (`peers`) and the members' snatches; without it, what a poll
    /// re-reads (settings, members, torrents, promotions, the allow list, purchases).
    pub async fn load(&self, everything: bool) -> Result<crate::model::SiteData, Error> {
        let tz = self.time_zone.as_str();
        self.db
            .read(async |conn| {
                zone(conn, tz).await?;
                load::read(conn, everything).await
            })
            .await
    }

    /// Writes one batch in one transaction: everything or, on an error, nothing.
    pub async fn write(
        &self,
        batch: &crate::site::Batch,
        sums: &Sums,
        passkeys: &std::collections::HashMap<u32, String>,
    ) -> Result<Written, Error> {
        let tz = self.time_zone.as_str();
        self.db
            .write(async |conn| {
                zone(conn, tz).await?;
                write::run(conn, batch, sums, passkeys).await
            })
            .await
    }
}
