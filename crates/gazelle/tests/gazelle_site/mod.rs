//! A Gazelle site's database for the tests: a database on the real MariaDB of this test
//! binary (started once, strict `sql_mode`, see `servers`), with Gazelle's tables from
//! `tests/fixtures/gazelle.sql` and, where a test asks, the rows a site inserts.

#![allow(dead_code)]

#[allow(dead_code)]
#[path = "../../../accounts/tests/servers/mod.rs"]
pub mod servers;

#[path = "../../../accounts/tests/servers/site_db.rs"]
pub mod site_db;

/// One test's database.
pub use site_db::SiteDb as Db;

/// The site's tables.
pub const FIXTURE: &str = include_str!("../../../../tests/fixtures/gazelle.sql");

impl Db {
    /// An empty database named `gazelle_<name>`; `None` when the real-server tests are
    /// skipped on this machine. The server's `sql_mode` is strict (MariaDB's default,
    /// `STRICT_TRANS_TABLES`, as Gazelle's development setup has it).
    pub async fn empty(name: &str) -> Option<Db> {
        Db::create(&format!("gazelle_{name}")).await
    }

    /// Gazelle's tables, no rows.
    pub async fn tables(name: &str) -> Option<Db> {
        Some(Db::empty(name).await?.with(FIXTURE).await)
    }

    /// Gazelle's tables with the rows of [`insert_site_rows`].
    pub async fn with_rows(name: &str) -> Option<Db> {
        let db = Db::tables(name).await?;
        insert_site_rows(&db).await;
        Some(db)
    }
}

/// A passkey as Gazelle makes them: 32 characters.
pub fn passkey(user_id: u32) -> String {
    format!("{user_id:032x}")
}

/// The info hash of the test torrent `id`: its byte 20 times.
pub fn info_hash(id: u8) -> [u8; 20] {
    [id; 20]
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The rows a Gazelle site inserts:
///
/// - users 1 alice (enabled, may leech), 2 bob (enabled, may not leech), 3 carol
///   (enabled, paranoid: `Visible = '0'`), 4 dave (disabled), 5 erin (enabled, masked IP
///   127.0.0.1), each with a `users_leech_stats` row, passkeys [`passkey`];
/// - torrents of one group, uploaded by alice, info hash [`info_hash`] of their id: 10
///   normal, 11 free, 12 neutral, each with a `torrents_leech_stats` row (12 snatched
///   5 times); 13 normal without one (not served);
/// - a token of alice's on torrent 10, an expired one of bob's on torrent 11.
pub async fn insert_site_rows(db: &Db) {
    let mut users = Vec::new();
    for (id, name, enabled, can_leech, visible, ip) in [
        (1, "alice", "1", 1, "1", "10.0.0.1"),
        (2, "bob", "1", 0, "1", "10.0.0.2"),
        (3, "carol", "1", 1, "0", "10.0.0.3"),
        (4, "dave", "2", 1, "1", "10.0.0.4"),
        (5, "erin", "1", 1, "1", "127.0.0.1"),
    ] {
        users.push(format!(
            "({id}, '{name}', '{name}@example.org', 'hash', '{ip}', '{enabled}', '{visible}', \
             2, {can_leech}, '{passkey}', 'authkey{id}', 1)",
            passkey = passkey(id)
        ));
    }
    db.run(&format!(
        "insert into users_main (ID, Username, Email, PassHash, IP, Enabled, Visible, \
             PermissionID, can_leech, torrent_pass, auth_key, stylesheet_id) values {}; \
         insert into users_leech_stats (UserID, Uploaded, Downloaded) \
             values (1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0), (5, 0, 0); \
         insert into torrents_group (ID, CategoryID, Name, WikiBody, WikiImage) \
             values (1, 1, 'An album', '', '')",
        users.join(", ")
    ))
    .await;
    let mut torrents = Vec::new();
    for (id, free) in [(10u8, "0"), (11, "1"), (12, "2"), (13, "0")] {
        torrents.push(format!(
            "({id}, 1, 1, 0x{hash}, 3, 'files', 1234567, '{free}')",
            hash = hex(&info_hash(id))
        ));
    }
    db.run(&format!(
        "insert into torrents (ID, GroupID, UserID, info_hash, FileCount, FileList, Size, \
             FreeTorrent) values {}; \
         insert into torrents_leech_stats (TorrentID, Snatched) values (10, 0), (11, 0), (12, 5); \
         insert into users_freeleeches (UserID, TorrentID, Time, Expired) \
             values (1, 10, '2025-01-01 00:00:00', 0), (2, 11, '2025-01-01 00:00:00', 1)",
        torrents.join(", ")
    ))
    .await;
}
