//! What the site reads back: `GET /torrents/<id>` and `GET /users/<id>`, with exactly the
//! fields and JSON types UNIT3D's `Unit3dAnnounce` service checks before it shows them
//! (an answer with one field missing or of another type is shown as empty).
//!
//! The torrent's clients are an object keyed by `<user id>-<peer id in hex>`, as
//! UNIT3D-Announce writes them, in key order. Each carries what the site checks (with
//! `user_id` and `torrent_id`, which UNIT3D-Announce dropped in v0.3) and v0.3.1's
//! `is_connectable` and `has_sent_completed`.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::model::Peer;
use crate::rates::Rates;
use crate::site::{TorrentState, UserState};

/// `GET /torrents/<id>`.
#[derive(Serialize)]
pub(super) struct TorrentAnswer {
    id: u32,
    /// `Pending`, `Approved`, `Rejected`, `Postponed` or `Unknown`.
    status: &'static str,
    is_deleted: bool,
    peers: BTreeMap<String, PeerAnswer>,
    seeders: u32,
    leechers: u32,
    times_completed: u32,
    download_factor: u8,
    upload_factor: u8,
}

/// One client in [`TorrentAnswer`].
#[derive(Serialize)]
struct PeerAnswer {
    ip_address: String,
    user_id: u32,
    torrent_id: u32,
    port: u16,
    is_seeder: bool,
    is_active: bool,
    is_visible: bool,
    /// As the client's row says: shoal makes no connectivity checks, so false for every
    /// client it has seen announce.
    is_connectable: bool,
    /// Whether it announced `completed` since it started.
    has_sent_completed: bool,
    /// Unix seconds.
    updated_at: i64,
    uploaded: u64,
    downloaded: u64,
}

impl From<&TorrentState> for TorrentAnswer {
    fn from(state: &TorrentState) -> Self {
        let t = &state.torrent;
        TorrentAnswer {
            id: t.id,
            status: t.status.name(),
            is_deleted: t.is_deleted,
            peers: state
                .clients
                .iter()
                .map(|(key, p)| {
                    let completed = state.completed.contains(key);
                    (peer_key(p), PeerAnswer::of(p, completed))
                })
                .collect(),
            seeders: t.seeders,
            leechers: t.leechers,
            times_completed: t.times_completed,
            download_factor: t.download_factor,
            upload_factor: t.upload_factor,
        }
    }
}

impl PeerAnswer {
    fn of(p: &Peer, has_sent_completed: bool) -> Self {
        PeerAnswer {
            ip_address: p.ip.to_string(),
            user_id: p.user_id,
            torrent_id: p.torrent_id,
            port: p.port,
            is_seeder: p.seeder,
            is_active: p.active,
            is_visible: p.visible,
            is_connectable: p.connectable,
            has_sent_completed,
            updated_at: p.updated_at,
            uploaded: p.uploaded,
            downloaded: p.downloaded,
        }
    }
}

/// `<user id>-<peer id in hex>`.
fn peer_key(p: &Peer) -> String {
    let mut key = String::with_capacity(11 + 40);
    let _ = write!(key, "{}-", p.user_id);
    for b in p.peer_id {
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// `GET /users/<id>`.
#[derive(Serialize)]
pub(super) struct UserAnswer<'a> {
    id: u32,
    group_id: u32,
    passkey: &'a str,
    can_download: bool,
    is_donor: bool,
    is_lifetime: bool,
    num_seeding: u32,
    num_leeching: u32,
    /// Peer lists with seeders received: `{"rates": [{count, max_count, window,
    /// updated_at}]}`, every number a float.
    receive_seed_list_rates: &'a Rates,
    receive_leech_list_rates: &'a Rates,
}

impl<'a> From<&'a UserState> for UserAnswer<'a> {
    fn from(state: &'a UserState) -> Self {
        let u = &state.user;
        UserAnswer {
            id: u.id,
            group_id: u.group_id,
            passkey: &u.passkey,
            can_download: u.can_download,
            is_donor: u.is_donor,
            is_lifetime: u.is_lifetime,
            num_seeding: u.num_seeding,
            num_leeching: u.num_leeching,
            receive_seed_list_rates: &state.seed_lists,
            receive_leech_list_rates: &state.leech_lists,
        }
    }
}
