//! The site's rows as shoal holds them in memory: what [`crate`] loads from UNIT3D's tables
//! at start, what the site's control calls change, and what the batches write back.
//!
//! Ids are the site's own (`unsigned int` columns). Byte counts are `u64` as clients report
//! them; the tables keep them as `unsigned bigint`. Times are Unix seconds.

use std::net::IpAddr;

/// A v1 info hash (UNIT3D keeps only the v1 hash of a torrent: `torrents.info_hash`).
pub type InfoHash = [u8; 20];

/// A user group (`groups`): the rules that follow a user's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub id: u32,
    /// `banned`, `validating` and `disabled` are refused; other slugs are the site's own.
    pub slug: String,
    /// How many torrents a member may leech at once; `None`: no limit.
    pub download_slots: Option<u32>,
    /// History rows of immune members are exempt from hit-and-run (`history.immune`).
    pub is_immune: bool,
    /// Everything a member downloads is free.
    pub is_freeleech: bool,
    /// Everything a member uploads counts twice.
    pub is_double_upload: bool,
}

/// A site member (`users`, deleted users left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: u32,
    pub group_id: u32,
    /// 32 characters in UNIT3D (`users.passkey`).
    pub passkey: String,
    pub can_download: bool,
    pub is_donor: bool,
    pub is_lifetime: bool,
    /// The member's active, visible seeding and leeching clients (download slots).
    pub num_seeding: u32,
    pub num_leeching: u32,
}

/// A torrent's moderation status (`torrents.status`, a smallint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Status {
    Pending,
    Approved,
    Rejected,
    Postponed,
    /// A value the site does not define.
    #[default]
    Unknown,
}

impl Status {
    /// The status a `torrents.status` value means.
    pub fn from_i16(v: i16) -> Status {
        match v {
            0 => Status::Pending,
            1 => Status::Approved,
            2 => Status::Rejected,
            3 => Status::Postponed,
            _ => Status::Unknown,
        }
    }

    /// The column value of this status (`Unknown` as -1).
    pub fn to_i16(self) -> i16 {
        match self {
            Status::Pending => 0,
            Status::Approved => 1,
            Status::Rejected => 2,
            Status::Postponed => 3,
            Status::Unknown => -1,
        }
    }

    /// The name UNIT3D-Announce's API shows (`GET /torrents/<id>`).
    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "Pending",
            Status::Approved => "Approved",
            Status::Rejected => "Rejected",
            Status::Postponed => "Postponed",
            Status::Unknown => "Unknown",
        }
    }
}

/// A torrent (`torrents`, deleted ones too so that their announces are refused by name), one
/// per info hash as UNIT3D-Announce v0.3.1 chooses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torrent {
    pub id: u32,
    pub info_hash: InfoHash,
    pub status: Status,
    /// Deleted: `deleted_at` set when loaded, or through the site's API (`DELETE /torrents`)
    /// since the start.
    pub is_deleted: bool,
    pub seeders: u32,
    pub leechers: u32,
    pub times_completed: u32,
    /// Percent of the download charged: `100 - torrents.free` (0: freeleech).
    pub download_factor: u8,
    /// Percent of the upload credited: 200 with `torrents.doubleup`, else 100.
    pub upload_factor: u8,
}

/// One client of one user on one torrent (`peers`, keyed by user, torrent and peer id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub user_id: u32,
    pub torrent_id: u32,
    pub peer_id: [u8; 20],
    pub ip: IpAddr,
    pub port: u16,
    /// Its `User-Agent` (HTTP); the protocol's name for UDP and WebTorrent clients, which
    /// send none (`peers.agent` is not null).
    pub agent: String,
    /// Its reported totals.
    pub uploaded: u64,
    pub downloaded: u64,
    pub left: u64,
    pub seeder: bool,
    /// False after `stopped`.
    pub active: bool,
    /// False while the user is over their group's download slots.
    pub visible: bool,
    pub connectable: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Everything read from the site's database at start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteData {
    pub groups: Vec<Group>,
    pub users: Vec<User>,
    pub torrents: Vec<Torrent>,
    pub peers: Vec<Peer>,
    /// Peer-id prefixes of refused clients (`blacklist_clients.peer_id_prefix`).
    pub blacklisted_prefixes: Vec<Vec<u8>>,
    /// (user, torrent) pairs with a freeleech token.
    pub freeleech_tokens: Vec<(u32, u32)>,
    /// Users with personal freeleech in force.
    pub personal_freeleech: Vec<u32>,
    /// Featured torrents (free and double upload).
    pub featured: Vec<u32>,
}

/// What one (user, torrent) pair adds to its `history` row in one batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryUpdate {
    pub user_id: u32,
    pub torrent_id: u32,
    pub agent: String,
    /// Added to `history.uploaded` (factors applied) and `history.actual_uploaded`.
    pub credited_uploaded: u64,
    pub actual_uploaded: u64,
    /// The client's reported total, written as it is (`history.client_uploaded`).
    pub client_uploaded: u64,
    pub credited_downloaded: u64,
    pub actual_downloaded: u64,
    pub client_downloaded: u64,
    pub seeder: bool,
    pub active: bool,
    /// Added to `history.seedtime`.
    pub seedtime: u64,
    pub immune: bool,
    /// Set once (`completed_at` is written only where it is still null).
    pub completed_at: Option<i64>,
    pub updated_at: i64,
}

/// What one user's totals gain in one batch (`users.uploaded`, `users.downloaded`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserUpdate {
    pub user_id: u32,
    pub uploaded: u64,
    pub downloaded: u64,
}

/// A torrent's figures now (`torrents.seeders`, `leechers`, `times_completed`) and what
/// its `balance` gains (actual uploaded minus actual downloaded of the batch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorrentUpdate {
    pub torrent_id: u32,
    pub seeders: u32,
    pub leechers: u32,
    pub times_completed: u32,
    pub balance: i64,
}

/// An announce of an info hash the site does not know (or deleted):
/// `unregistered_info_hashes` (user, info hash), counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unregistered {
    pub user_id: u32,
    pub info_hash: InfoHash,
    pub at: i64,
}

/// One write to the site's tables, in one transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Upserted by (user, torrent, peer id).
    pub peers: Vec<Peer>,
    /// Peers forgotten (silent past `inactive_peer_ttl`): their rows deleted.
    pub peer_deletions: Vec<(u32, u32, [u8; 20])>,
    pub history: Vec<HistoryUpdate>,
    pub users: Vec<UserUpdate>,
    pub torrents: Vec<TorrentUpdate>,
    pub unregistered: Vec<Unregistered>,
}

impl Batch {
    /// Nothing to write: every list empty (the default batch).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}
