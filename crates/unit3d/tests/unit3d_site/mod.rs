//! A UNIT3D site's database for the tests: a database on the real MariaDB of this test
//! binary (started once, see `servers`), with the site's tables
//! and, where a test asks, the rows a site inserts (groups, users, torrents, the lists).
//!
//! Tests share the one server. The outage test stops it: it takes [`Turn`] alone, the
//! others share it.

#![allow(dead_code)]

use std::ops::Deref;

#[allow(dead_code)]
#[path = "../../../accounts/tests/servers/mod.rs"]
pub mod servers;

#[path = "../../../accounts/tests/servers/site_db.rs"]
pub mod site_db;

use site_db::SiteDb;

/// The site's tables, as UNIT3D's schema has them.
pub const FIXTURE: &str = include_str!("../../../../tests/fixtures/unit3d.sql");

/// Held while a test uses the server: shared by the tests, taken alone by the one that
/// stops the server.
pub static TURN: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

pub enum Turn {
    Shared(tokio::sync::RwLockReadGuard<'static, ()>),
    Alone(tokio::sync::RwLockWriteGuard<'static, ()>),
}

/// One test's database (its URL, pool and queries are [`SiteDb`]'s), and the test's turn
/// on the server.
pub struct Site {
    db: SiteDb,
    _turn: Turn,
}

impl Deref for Site {
    type Target = SiteDb;

    fn deref(&self) -> &SiteDb {
        &self.db
    }
}

impl Site {
    /// An empty database named `name` (unique per test); `None` when the real-server tests
    /// are skipped on this machine.
    pub async fn empty(name: &str) -> Option<Site> {
        Site::open(name, Turn::Shared(TURN.read().await)).await
    }

    /// A database with UNIT3D's tables and no rows.
    pub async fn tables(name: &str) -> Option<Site> {
        let site = Site::empty(name).await?;
        site.run(FIXTURE).await;
        Some(site)
    }

    /// A database with UNIT3D's tables and the rows of [`insert_site_rows`].
    pub async fn with_rows(name: &str) -> Option<Site> {
        let site = Site::tables(name).await?;
        insert_site_rows(&site).await;
        Some(site)
    }

    /// The same as [`Site::with_rows`], for a test that stops the server: no other test
    /// runs meanwhile.
    pub async fn with_rows_alone(name: &str) -> Option<Site> {
        let site = Site::open(name, Turn::Alone(TURN.write().await)).await?;
        site.run(FIXTURE).await;
        insert_site_rows(&site).await;
        Some(site)
    }

    async fn open(name: &str, turn: Turn) -> Option<Site> {
        // Prefixed: a test's name may be a reserved word (`load`, `write`).
        let db = SiteDb::create(&format!("unit3d_{name}")).await?;
        Some(Site { db, _turn: turn })
    }
}

/// A passkey as UNIT3D makes them: 32 hex characters.
pub fn passkey(user_id: u32) -> String {
    format!("{user_id:032x}")
}

/// The info hash of the test torrent `id`: its byte 20 times.
pub fn info_hash(id: u8) -> [u8; 20] {
    [id; 20]
}

/// The rows a UNIT3D site inserts, as its seeders and its pages insert them:
///
/// - groups 1 `user` (8 download slots), 2 `banned`, 3 `validating`, 4 `disabled`, 5 `vip`
///   (immune, freeleech, double upload, no slot limit);
/// - users 1 alice (user), 2 bob (vip, donor), 3 carol (banned, cannot download), 4 dave
///   (deleted), 5 erin (user, lifetime donor), passkeys [`passkey`];
/// - torrents, uploaded by alice, info hash [`info_hash`] of their id: 10 approved, 11
///   pending, 12 rejected, 13 postponed, 14 approved 100% free and double upload, 15
///   approved 25% free, 16 deleted, 17 approved with torrent 10's info hash (a re-upload).
pub async fn insert_site_rows(site: &Site) {
    site.run(
        "insert into `groups` (id, name, slug, position, color, icon, download_slots, \
             is_immune, is_freeleech, is_double_upload, can_chat, can_comment, can_invite, \
             can_request) values \
         (1, 'User', 'user', 6, '#7289DA', 'fas fa-user', 8, 0, 0, 0, 1, 1, 0, 1), \
         (2, 'Banned', 'banned', 0, 'red', 'fas fa-ban', null, 0, 0, 0, 0, 0, 0, 0), \
         (3, 'Validating', 'validating', 1, '#95A5A6', 'fas fa-question-circle', null, \
             0, 0, 0, 0, 0, 0, 0), \
         (4, 'Disabled', 'disabled', 2, '#8D6262', 'fas fa-pause-circle', null, \
             0, 0, 0, 0, 0, 0, 0), \
         (5, 'VIP', 'vip', 12, '#FFB900', 'fas fa-star', null, 1, 1, 1, 1, 1, 1, 1)",
    )
    .await;
    let mut users = Vec::new();
    for (id, name, group, can_download, donor, lifetime, deleted) in [
        (1, "alice", 1, 1, 0, 0, "null"),
        (2, "bob", 5, 1, 1, 0, "null"),
        (3, "carol", 2, 0, 0, 0, "null"),
        (4, "dave", 1, 1, 0, 0, "'2025-01-02 03:04:05'"),
        (5, "erin", 1, 1, 1, 1, "null"),
    ] {
        users.push(format!(
            "({id}, '{name}', '{name}@example.org', '$2y$10$hash', '{passkey}', {group}, \
             'rss{id}', {can_download}, {donor}, {lifetime}, '2024-06-01 00:00:00', \
             '2024-06-01 00:00:00', {deleted})",
            passkey = passkey(id)
        ));
    }
    site.run(&format!(
        "insert into users (id, username, email, password, passkey, group_id, rsskey, \
             can_download, is_donor, is_lifetime, created_at, updated_at, deleted_at) \
         values {}",
        users.join(", ")
    ))
    .await;
    let mut torrents = Vec::new();
    for (id, hash, status, free, doubleup, deleted) in [
        (10, 10, 1, 0, 0, "null"),
        (11, 11, 0, 0, 0, "null"),
        (12, 12, 2, 0, 0, "null"),
        (13, 13, 3, 0, 0, "null"),
        (14, 14, 1, 100, 1, "null"),
        (15, 15, 1, 25, 0, "null"),
        (16, 16, 1, 0, 0, "'2025-01-02 03:04:05'"),
        (17, 10, 1, 0, 0, "null"),
    ] {
        torrents.push(format!(
            "({id}, 'Torrent {id}', 'A description.', 'torrent-{id}.torrent', 3, 1234567.0, \
             1, 0x{hash}, {status}, {free}, {doubleup}, '2024-06-02 00:00:00', \
             '2024-06-02 00:00:00', {deleted})",
            hash = hex(&info_hash(hash))
        ));
    }
    site.run(&format!(
        "insert into torrents (id, name, description, file_name, num_file, size, user_id, \
             info_hash, status, free, doubleup, created_at, updated_at, deleted_at) \
         values {}",
        torrents.join(", ")
    ))
    .await;
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
