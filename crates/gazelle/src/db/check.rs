//! What shoal needs of a Gazelle site's database, and the check that it is there: a
//! database that is not Gazelle's (or a Gazelle without a column shoal writes) stops the
//! start with everything it lacks named, instead of failing one batch at a time later.
//! The keys the upserts rely on are checked too: without one an upsert would add a second
//! row where the site expects one.

use super::{Error, GazelleDb, Widths};

/// Every table shoal reads or writes, with the columns it names (as Ocelot names them).
pub const NEEDED: &[(&str, &str)] = &[
    ("users_main", "id torrent_pass can_leech visible ip enabled"),
    ("torrents", "id info_hash freetorrent"),
    (
        "torrents_leech_stats",
        "torrentid seeders leechers snatched balance last_action",
    ),
    ("users_leech_stats", "userid uploaded downloaded"),
    (
        "users_freeleeches",
        "userid torrentid time expired downloaded",
    ),
    ("xbt_client_whitelist", "peer_id"),
    (
        "xbt_files_users",
        "uid fid peer_id active uploaded downloaded upspeed downspeed remaining corrupt timespent \
        announced ip useragent mtime",
    ),
    ("xbt_snatched", "uid fid tstamp ip"),
];

/// The unique keys the upserts rely on (`ON DUPLICATE KEY UPDATE`).
pub const KEYS: &[(&str, &str)] = &[
    ("xbt_files_users", "peer_id fid uid"),
    ("users_leech_stats", "userid"),
    ("torrents_leech_stats", "torrentid"),
    ("users_freeleeches", "userid torrentid"),
];

impl GazelleDb {
    /// Checks that every table, column and key shoal needs is there, and notes the widths
    /// of the text columns it writes (a longer value is fitted to them).
    pub async fn check(&mut self) -> Result<(), Error> {
        let catalog = self.db.check_tables(NEEDED, KEYS).await?;
        let d = Widths::default();
        self.widths = Widths {
            useragent: catalog.width("xbt_files_users", "useragent", d.useragent),
            peer_ip: catalog.width("xbt_files_users", "ip", d.peer_ip),
            snatch_ip: catalog.width("xbt_snatched", "ip", d.snatch_ip),
        };
        Ok(())
    }
}
