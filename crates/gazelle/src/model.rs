//! The site's rows as shoal holds them: what is read from Gazelle's tables at start (and on
//! a reload), what the site's control calls change, and the rows each write adds.
//!
//! Ids are the site's own (`int` columns). Byte counts are `u64` as clients report them;
//! the tables keep `bigint`. Times are Unix seconds.

use std::net::IpAddr;

/// A v1 info hash (`torrents.info_hash`, 20 bytes).
pub type InfoHash = [u8; 20];

/// A torrent's leech type (`torrents.FreeTorrent`, Gazelle's `LeechType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeechType {
    /// Download and upload count.
    #[default]
    Normal,
    /// Freeleech: the download does not count.
    Free,
    /// Neutral leech: neither counts.
    Neutral,
}

impl LeechType {
    /// The type a `freetorrent` value names, as Ocelot reads it from a control call: `0`
    /// normal, `1` free, anything else neutral.
    pub fn from_call(value: &str) -> Self {
        match value {
            "0" => LeechType::Normal,
            "1" => LeechType::Free,
            _ => LeechType::Neutral,
        }
    }

    /// The type a `torrents.FreeTorrent` value names, as Ocelot reads it from the table:
    /// `1` free, `2` neutral, anything else normal.
    pub fn from_column(value: &str) -> Self {
        match value {
            "1" => LeechType::Free,
            "2" => LeechType::Neutral,
            _ => LeechType::Normal,
        }
    }

    /// The number Ocelot shows for it (`info_torrent`'s `free`).
    pub fn number(self) -> u8 {
        match self {
            LeechType::Normal => 0,
            LeechType::Free => 1,
            LeechType::Neutral => 2,
        }
    }
}

/// An enabled member (`users_main` with `Enabled = '1'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: u32,
    /// `users_main.torrent_pass`: 32 characters.
    pub passkey: String,
    /// `users_main.can_leech`: without it, a leecher is recorded but sent no peers.
    pub can_leech: bool,
    /// Paranoid (`Visible = '0'`) or masked (`IP = '127.0.0.1'`): their address is never
    /// written.
    pub protected: bool,
}

/// A torrent the site serves (`torrents` with its `torrents_leech_stats` row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torrent {
    pub id: u32,
    pub info_hash: InfoHash,
    pub leech_type: LeechType,
    /// `torrents_leech_stats.Snatched` at load, then counted.
    pub snatched: u32,
}

/// Everything read from the site's database.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteData {
    pub users: Vec<User>,
    pub torrents: Vec<Torrent>,
    /// (user, torrent) with a freeleech token not yet expired.
    pub tokens: Vec<(u32, u32)>,
    /// Peer-id prefixes of the allowed clients (`xbt_client_whitelist.peer_id`); empty:
    /// every client.
    pub whitelist: Vec<Vec<u8>>,
}

/// One `xbt_files_users` row: a client of a user on a torrent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRow {
    pub user_id: u32,
    pub torrent_id: u32,
    pub peer_id: [u8; 20],
    /// False once stopped or silent for `peers_timeout`.
    pub active: bool,
    /// The client's reported totals.
    pub uploaded: u64,
    pub downloaded: u64,
    pub remaining: u64,
    pub corrupt: u64,
    /// Bytes per second over the last announce interval.
    pub upspeed: u64,
    pub downspeed: u64,
    /// Seconds since its first announce.
    pub timespent: u64,
    /// Announces since its first.
    pub announced: u32,
    /// `None` for a protected user (written empty).
    pub ip: Option<IpAddr>,
    pub useragent: String,
    /// Its last announce.
    pub mtime: i64,
}

/// One `xbt_snatched` row: a completed download.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snatch {
    pub user_id: u32,
    pub torrent_id: u32,
    pub at: i64,
    /// `None` for a protected user.
    pub ip: Option<IpAddr>,
}

/// What a freeleech token saved in one batch (`users_freeleeches.Downloaded`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenUse {
    pub user_id: u32,
    pub torrent_id: u32,
    pub downloaded: u64,
}

/// What one user's totals gain (`users_leech_stats`), factors applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserGain {
    pub user_id: u32,
    pub uploaded: u64,
    pub downloaded: u64,
}

/// A torrent's figures now (`torrents_leech_stats`): seeders and leechers as counted,
/// the snatches and balance this batch adds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorrentFigures {
    pub torrent_id: u32,
    pub seeders: u32,
    pub leechers: u32,
    pub snatched: u32,
    pub balance: i64,
}

/// One write to the site's tables, in one transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    pub users: Vec<UserGain>,
    pub torrents: Vec<TorrentFigures>,
    pub peers: Vec<PeerRow>,
    pub snatches: Vec<Snatch>,
    pub tokens: Vec<TokenUse>,
}

impl Batch {
    /// Nothing to write: every list empty (the default batch).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}
