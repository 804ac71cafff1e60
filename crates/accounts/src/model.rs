//! The plain values that cross the accounts boundary: what the tracker loads at start, what it
//! registers through the admin API, what it writes back, and what a user's page shows.
//!
//! No type here names sqlx or a dialect: the tracker keeps these in memory and in its snapshot,
//! and a caller that never opens a database (tests, the bench tool) can still build them.
//! Byte counts and seconds are `u64` as the tracker counts them; the database stores them as
//! signed 64-bit integers (see `docs/private.md`).

/// A v1 info hash (SHA-1) or a v2 one (SHA-256 truncated to 20 bytes, BEP 52).
pub type InfoHashBytes = [u8; 20];

/// A member of the site, as the tracker needs to know them.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    /// The site's own user id: the key, so that a site's ids carry over unchanged.
    pub id: i64,
    /// The secret in the announce URL. Unique; ASCII, at most 64 characters.
    pub passkey: String,
    /// A disabled user is refused on every announce.
    pub enabled: bool,
    /// A user who may not download is refused while leeching (seeding stays allowed).
    pub can_download: bool,
    /// Multiplies what the user downloads (0 = personal freeleech).
    pub download_factor: f64,
    /// Multiplies what the user uploads.
    pub upload_factor: f64,
}

impl User {
    /// A user in good standing: enabled, allowed to download, both factors 1 (what the
    /// admin API gives a new user whose settings are not given).
    pub fn new(id: i64, passkey: impl Into<String>) -> User {
        User {
            id,
            passkey: passkey.into(),
            enabled: true,
            can_download: true,
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }
}

/// A registered torrent. Announces for any other info hash are refused in private mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Torrent {
    /// The site's torrent id. `None` in [`put_torrent`](crate::Database::put_torrent) keeps the
    /// id of a hash already registered, or takes the next free id for a new one; always `Some`
    /// in [`Loaded`].
    pub id: Option<i64>,
    /// The v1 info hash: the torrent's key in the tracker and in [`Delta`].
    pub info_hash: InfoHashBytes,
    /// The truncated v2 info hash of a hybrid or v2 torrent: the same swarm, the same account.
    pub info_hash_v2: Option<InfoHashBytes>,
    /// Multiplies what is downloaded of this torrent (0 = freeleech).
    pub download_factor: f64,
    /// Multiplies what is uploaded of this torrent (2 = double upload).
    pub upload_factor: f64,
}

impl Torrent {
    /// A v1-only torrent with both factors 1; `id: None` lets
    /// [`put_torrent`](crate::Database::put_torrent) choose it.
    pub fn new(id: Option<i64>, info_hash: InfoHashBytes) -> Torrent {
        Torrent {
            id,
            info_hash,
            info_hash_v2: None,
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }
}

/// One allowed peer-id prefix (e.g. `-qB`, `-TR`), when the client allow-list is on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientPrefix(pub String);

/// Everything the tracker holds in memory, as read by [`load`](crate::Database::load).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    pub users: Vec<User>,
    pub torrents: Vec<Torrent>,
    pub clients: Vec<ClientPrefix>,
}

/// What one user did on one torrent since the last write: the unit of a write batch, the
/// same type the core's ledger sums (one accounting type from the announce to the
/// database). `uploaded` and `downloaded` are already multiplied by the factors; the
/// `_raw` bytes are what really moved; a batch may hold several for one account.
pub use shoal_tracker::private::credit::Delta;

/// One client's state at its last announce (for schemas that keep a row per client: a
/// user's client on one torrent, by peer id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerRow {
    pub user_id: i64,
    /// The registered torrent's id.
    pub torrent_id: u64,
    pub peer_id: [u8; 20],
    /// `udp`, `http` or `ws`.
    pub protocol: &'static str,
    /// Where other peers reach it; `None` for a WebRTC peer.
    pub addr: Option<std::net::SocketAddr>,
    /// Its `User-Agent`, where its protocol carries one.
    pub agent: Option<String>,
    /// Its reported totals (of its current session) and what it has left (`None`: a
    /// WebTorrent client that did not say).
    pub uploaded: u64,
    pub downloaded: u64,
    pub left: Option<u64>,
    pub seeder: bool,
    /// False once it said `stopped`.
    pub active: bool,
    /// Its last announce (Unix seconds), and how many it made since the last write.
    pub announced_at: u64,
    pub announces: u32,
}

/// One write: the accounts' sums, and for schemas that keep them the clients' rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Accounting<'a> {
    /// Names the batch: a batch written again under the same id (its first answer was
    /// lost) is applied at most once, where the schema keeps ids (shoal's own does).
    pub id: Option<&'a str>,
    pub sums: &'a [Delta],
    pub peers: &'a [PeerRow],
}

/// What [`write`](crate::Database::write) did with a batch that it committed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Deltas added to a user's totals (and to a per-torrent row when the torrent is known).
    pub applied: usize,
    /// Deltas for a user that no longer exists (deleted since the announce): nothing recorded.
    pub without_user: usize,
    /// Deltas whose torrent no longer exists: added to the user's totals only, no snatch.
    pub without_torrent: usize,
    /// Snatches counted for the first time by this batch.
    pub new_snatches: usize,
    /// The batch's id was already committed (by an earlier attempt whose answer was lost):
    /// nothing was added this time.
    pub already_written: bool,
}

/// A user's totals and their row for each torrent they have announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStats {
    pub user_id: i64,
    pub uploaded: u64,
    pub downloaded: u64,
    /// Torrents completed (snatches).
    pub completed: u64,
    pub seed_seconds: u64,
    pub leech_seconds: u64,
    /// One row per torrent, ordered by torrent id.
    pub torrents: Vec<UserTorrentStats>,
}

/// One user's accounting on one torrent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserTorrentStats {
    pub torrent_id: i64,
    pub info_hash: InfoHashBytes,
    pub uploaded: u64,
    pub downloaded: u64,
    pub seed_seconds: u64,
    pub leech_seconds: u64,
    /// When the user completed the torrent (Unix seconds), if they did.
    pub completed_at: Option<i64>,
    /// When a write last added to this row (Unix seconds).
    pub updated_at: i64,
}

impl UserTorrentStats {
    /// Whether the user completed (snatched) this torrent.
    pub fn snatched(&self) -> bool {
        self.completed_at.is_some()
    }
}
