//! Private-tracker accounting: what each user uploaded, downloaded, seeded and snatched,
//! counted from the announces of their clients.
//!
//! [`ledger::Ledger`] records every announce of a private tracker in memory and sums what
//! each announce is worth per (user, torrent) until the database writer drains the sums;
//! [`credit`] holds the rules that decide what one announce is worth; [`members`] who may
//! announce. Nothing here does I/O: the server loads the members from the site's database
//! and writes the drained sums back.
//!
//! # The rules, and why
//!
//! **What clients report.** BEP 3 defines `uploaded` and `downloaded` as the totals "so
//! far", and real clients mean *so far in this session*: the counters start at zero when
//! the client starts (or resumes) the torrent and are reset when it restarts or pauses
//! (libtorrent, and so qBittorrent and Deluge, resets them on pause; Transmission after
//! its `stopped` announce). A session opens with `started`, ends with `stopped`, and sends
//! `completed` once, when the download finishes (not when the data was complete at the
//! start). `left == 0` means the client is seeding. So the tracker must count the
//! *difference* between successive announces of the same client, and notice when the
//! counters started over.
//!
//! **A client** is one `peer_id` of one user on one torrent: a user who runs two clients
//! on the same torrent (a seedbox and a laptop) has two, counted separately and added to
//! the same account.
//!
//! **Bytes.** For a client the ledger has seen before, an announce is worth its counters
//! minus the previous announce's, each counter on its own. Only a `started` opens a new
//! session (counted from zero), except right after another `started`: that is the client
//! retrying an announce whose answer it did not get, and only the difference counts. A
//! counter that went *down* without a `started` counts nothing, and the ledger keeps the
//! higher value as the client's baseline: libtorrent (so qBittorrent and Deluge) reports a
//! few KiB less in its `stopped` than in its last announce, leaving out the block it was
//! receiving, and taking that for a restart would credit its whole session twice. A client
//! that restarts without saying `started` (none of the real ones does) loses what it moved
//! until its counters pass their old values; nothing is ever negative, and no byte is
//! counted twice.
//!
//! **A client never seen before** counts from zero if it says `started`. Otherwise its
//! counters are taken as its *baseline* and nothing is counted: the announce may come
//! from a client whose earlier announces were counted before the tracker restarted, and
//! counting its totals again would credit the same bytes twice. Over-crediting is the
//! failure a ratio economy cannot recover from, so the ledger errs on the side of the
//! baseline. What this loses after a tracker restart (the bytes between a client's last
//! announce before the restart and its first after) is recovered by saving the ledger's
//! per-client baselines in the snapshot at shutdown and restoring them at start, which is
//! the wiring's job, not this module's.
//!
//! **Factors.** Each announce's bytes are multiplied by the factors in force for that
//! user on that torrent when it is recorded (freeleech: download factor 0; double upload:
//! upload factor 2), rounded down. Factors are applied per announce, so changing a
//! torrent to freeleech affects what is moved from then on, not what was moved before.
//! The raw bytes are kept beside the credited ones (`uploaded_raw`, `downloaded_raw`), so
//! that a site can always see what really moved.
//!
//! **Time.** The seconds between two announces of a client count as seeding if it was
//! seeding at the first of them (it had nothing left), else as leeching; a client that
//! restarted (a new `started`) is credited no time for the gap, since it
//! was not running for all of it. One gap counts at most
//! [`ledger::LedgerConfig::max_gap`] seconds (two announce intervals by default): a
//! client that vanished for hours (a laptop asleep, a crash) and comes back was not
//! seeding all that while.
//!
//! **Snatches.** A `completed` event counts as a snatch at most once per user and torrent
//! for the ledger's lifetime, however often it is repeated, by however many of the user's
//! clients; the wiring loads the snatches already in the database with
//! [`ledger::Ledger::remember_snatch`], so that "once" also holds across restarts.
//!
//! **Stopped** counts the client's last difference and forgets it: its next session
//! begins with `started`, from zero.
//!
//! **Memory.** Per-client records of clients silent for longer than
//! [`ledger::LedgerConfig::peer_ttl`] are dropped by [`ledger::Ledger::expire`]; their
//! last announce was already counted. If such a client comes back, its counters are a new
//! baseline (see above). Pending sums are one per (user, torrent) with activity since the
//! last write, whatever the number of announces. The snatches seen are kept for the
//! ledger's lifetime (about 20 bytes each); the database should also refuse a second
//! snatch of one (user, torrent), so the wiring may load only recent ones.
//!
//! **Several nodes** (a cluster: the server's exchange): a client's announces may reach any
//! node, each of which accounts what it serves and writes its own sums. What keeps that
//! right is the per-client record: every record an announce changes (and every `stopped`)
//! is shared through the exchange ([`ledger::Ledger::share_records`]), and the other nodes
//! adopt it if it is later than theirs ([`ledger::Ledger::adopt`]), so a client's next
//! announce is compared with its last one on whichever node it reached. What a node has
//! not yet heard (a client that moves between nodes within one exchange interval) is
//! compared with the older record it has, as after a restart without the saved records.
//!
//! **Nothing lost on the way to the database.** [`ledger::Ledger::drain`] takes the
//! pending sums; if the write fails, [`ledger::Ledger::restore`] adds them back, merged
//! with what arrived meanwhile, for the next attempt.

pub mod credit;
pub mod ledger;
pub mod members;
pub mod peers;

pub use credit::{AccountedAnnounce, Delta, PeerRecord};
pub use ledger::{
    Ledger, LedgerConfig, Recorded, SavedPeer, SharedRecord, SlotAt, SlotRecord, SlotState,
    SlotStore,
};
pub use members::{Member, Members, Registered, Roster};
pub use peers::{PeerLog, PeerState};

#[cfg(test)]
mod tests;
