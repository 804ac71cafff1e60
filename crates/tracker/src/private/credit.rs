//! What one announce of a private-tracker peer is worth: the rules that compare a peer's
//! counters with its previous announce and turn the difference into a [`Delta`] for its
//! user's account on that torrent.
//!
//! These are pure functions of (what the ledger remembers of the peer, the announce): no
//! locks, maps or clocks, so every rule is tested on its own and the [`crate::private::ledger`]
//! only has to find the peer and add the result up. The rules, and why each is so, are in
//! the [`crate::private`] module documentation.

use shoal_proto::{AnnounceEvent, PeerId};

/// One announce as the ledger needs it: who, which torrent, which peer, what the client
/// reports, and the factors in force for this user on this torrent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccountedAnnounce {
    /// The user the passkey belongs to.
    pub user_id: u64,
    /// The torrent's accounting id: a hybrid torrent's v1 and v2 info hashes map to one id.
    pub torrent_id: u64,
    /// The id the client picked for itself (one user may run several clients).
    pub peer_id: PeerId,
    /// Bytes uploaded, as the client reports them (cumulative since it started the torrent).
    pub uploaded: u64,
    /// Bytes downloaded, as the client reports them (cumulative since it started the torrent).
    pub downloaded: u64,
    /// Bytes the client still needs; 0 means it is seeding.
    pub left: u64,
    /// The announce's event.
    pub event: AnnounceEvent,
    /// The coarse clock, in seconds ([`shoal_swarm::clock::now`]).
    pub now: u32,
    /// Multiplier of the downloaded bytes credited (freeleech: 0).
    pub download_factor: f64,
    /// Multiplier of the uploaded bytes credited (double upload: 2).
    pub upload_factor: f64,
}

/// What the ledger remembers of one peer between its announces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerRecord {
    /// The client's `uploaded` at its last announce.
    pub uploaded: u64,
    /// The client's `downloaded` at its last announce.
    pub downloaded: u64,
    /// When it last announced (coarse clock, seconds).
    pub seen: u32,
    /// Whether it was seeding (`left == 0`) at its last announce.
    pub seeding: bool,
    /// Whether its last announce was `started`: a `started` again right after is a retry
    /// of the same one (its answer was lost), not a new session.
    pub started: bool,
}

impl PeerRecord {
    /// The record after `announce`, given the `previous` one: a counter is kept at its
    /// highest value within a session, so that bytes a client reports again after
    /// reporting less (see [`transferred`]) are not credited twice.
    #[inline]
    pub fn after(previous: Option<&PeerRecord>, announce: &AccountedAnnounce) -> Self {
        let (mut uploaded, mut downloaded) = (announce.uploaded, announce.downloaded);
        if let Some(p) = previous.filter(|p| !new_session(p, announce)) {
            uploaded = uploaded.max(p.uploaded);
            downloaded = downloaded.max(p.downloaded);
        }
        Self {
            uploaded,
            downloaded,
            seen: announce.now,
            seeding: announce.left == 0,
            started: announce.event == AnnounceEvent::Started,
        }
    }
}

/// Whether `a` opens a new session of the client `previous` describes: a `started` that is
/// not the retry of another.
#[inline]
fn new_session(previous: &PeerRecord, a: &AccountedAnnounce) -> bool {
    a.event == AnnounceEvent::Started && !previous.started
}

/// What one (user, torrent) account gained: from one announce, or summed over many until
/// the ledger is drained. Byte sums saturate rather than wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// The user.
    pub user_id: u64,
    /// The torrent's accounting id.
    pub torrent_id: u64,
    /// Bytes uploaded, upload factor applied (what the user is credited with).
    pub uploaded: u64,
    /// Bytes downloaded, download factor applied (what the user is charged with).
    pub downloaded: u64,
    /// Bytes uploaded as the client reported them, no factor (what really moved: for
    /// audits, cheat detection and the transfer tests).
    pub uploaded_raw: u64,
    /// Bytes downloaded as the client reported them, no factor.
    pub downloaded_raw: u64,
    /// Seconds spent seeding (capped per announce gap).
    pub seed_seconds: u64,
    /// Seconds spent leeching (capped per announce gap).
    pub leech_seconds: u64,
    /// A snatch: the user completed this torrent (at most once per user and torrent).
    pub completed: bool,
    /// When the snatch was announced (the store's coarse clock), with `completed`.
    pub completed_at: Option<u32>,
}

impl Delta {
    /// An empty delta for one account.
    #[inline]
    pub fn new(user_id: u64, torrent_id: u64) -> Self {
        Self {
            user_id,
            torrent_id,
            ..Self::default()
        }
    }

    /// Whether it adds nothing to the account.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let Self {
            user_id: _,
            torrent_id: _,
            uploaded,
            downloaded,
            uploaded_raw,
            downloaded_raw,
            seed_seconds,
            leech_seconds,
            completed,
            completed_at: _,
        } = *self;
        (uploaded | downloaded | uploaded_raw | downloaded_raw | seed_seconds | leech_seconds) == 0
            && !completed
    }

    /// Adds `other` (of the same account) to this one.
    #[inline]
    pub fn merge(&mut self, other: &Delta) {
        debug_assert_eq!(
            (self.user_id, self.torrent_id),
            (other.user_id, other.torrent_id)
        );
        self.uploaded = self.uploaded.saturating_add(other.uploaded);
        self.downloaded = self.downloaded.saturating_add(other.downloaded);
        self.uploaded_raw = self.uploaded_raw.saturating_add(other.uploaded_raw);
        self.downloaded_raw = self.downloaded_raw.saturating_add(other.downloaded_raw);
        self.seed_seconds = self.seed_seconds.saturating_add(other.seed_seconds);
        self.leech_seconds = self.leech_seconds.saturating_add(other.leech_seconds);
        self.completed |= other.completed;
        self.completed_at = match (self.completed_at, other.completed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// When the snatch was announced, in Unix seconds (`completed_at` is the coarse clock
    /// of this process).
    #[inline]
    pub fn completed_unix(&self) -> Option<u64> {
        self.completed_at.map(shoal_swarm::clock::unix_of)
    }

    /// The snatch of one account, announced at `at`.
    #[inline]
    pub fn snatch(user_id: u64, torrent_id: u64, at: u32) -> Self {
        Self {
            completed: true,
            completed_at: Some(at),
            ..Self::new(user_id, torrent_id)
        }
    }
}

/// The bytes (uploaded, downloaded) the client moved since `previous`, before factors, and
/// whether this announce continues the previous one's session (so the time between them
/// is the peer's).
///
/// - No previous record: counted from zero on `started` (a new session's counters begin
///   at zero); otherwise the values are only the baseline (0 counted), because the ledger
///   cannot tell what part of them was already counted before the tracker restarted.
/// - `started` after anything but `started`: a new session, counted from zero. `started`
///   right after `started` is a retry: only the difference counts.
/// - Otherwise: the differences, each counter on its own; a counter lower than before
///   counts nothing. Only `started` opens a session: a counter that goes down is not a
///   restart (libtorrent's `stopped` reports a few KiB less than its last announce, leaving
///   out the block it was receiving), and the record keeps the higher value, so the bytes
///   are not credited again when the counter climbs back past it.
#[inline]
pub fn transferred(previous: Option<&PeerRecord>, a: &AccountedAnnounce) -> (u64, u64, bool) {
    let started = a.event == AnnounceEvent::Started;
    let Some(p) = previous else {
        return if started {
            (a.uploaded, a.downloaded, false)
        } else {
            (0, 0, false)
        };
    };
    if new_session(p, a) {
        (a.uploaded, a.downloaded, false)
    } else {
        (
            a.uploaded.saturating_sub(p.uploaded),
            a.downloaded.saturating_sub(p.downloaded),
            true,
        )
    }
}

/// `bytes` times `factor`, rounded down. A factor of 1 is exact at any size; a negative or
/// NaN factor counts as 0 and a product past `u64::MAX` saturates (Rust's float to integer
/// conversion), so a misconfigured factor never wraps an account.
#[inline]
pub fn apply_factor(bytes: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        bytes
    } else {
        (bytes as f64 * factor) as u64
    }
}

/// What `announce` adds to its account, given the peer's `previous` record; the time since
/// the previous announce counts up to `max_gap` seconds. `completed` is left false: whether
/// this is the user's first snatch of the torrent is the ledger's to know.
#[inline]
pub fn credit(previous: Option<&PeerRecord>, a: &AccountedAnnounce, max_gap: u32) -> Delta {
    let (uploaded, downloaded, continued) = transferred(previous, a);
    let mut delta = Delta {
        uploaded: apply_factor(uploaded, a.upload_factor),
        downloaded: apply_factor(downloaded, a.download_factor),
        uploaded_raw: uploaded,
        downloaded_raw: downloaded,
        ..Delta::new(a.user_id, a.torrent_id)
    };
    if let (Some(p), true) = (previous, continued) {
        let seconds = u64::from(a.now.saturating_sub(p.seen).min(max_gap));
        if p.seeding {
            delta.seed_seconds = seconds;
        } else {
            delta.leech_seconds = seconds;
        }
    }
    delta
}
