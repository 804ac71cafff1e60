//! The rules UNIT3D sites live by, as UNIT3D-Announce applies them, for every protocol:
//! [`Site`] is the core's [`SiteRules`]. The private rule has found the user (by passkey)
//! and the torrent (by info hash); this decides the rest and records the client's new
//! state on its torrent, under the torrent's lock.
//!
//! | check | answer |
//! |---|---|
//! | HTTP: a `User-Agent` is sent, at most 64 bytes, not a browser's or a crawler's | refused |
//! | the peer id has no blacklisted prefix | refused |
//! | the port is not refused (except on `stopped`) | refused |
//! | the user's group is known and not banned, validating or disabled | refused |
//! | a leecher's user may download | refused |
//! | the torrent is not deleted | refused, recorded as unregistered |
//! | the torrent is approved (pending, rejected, postponed: a warning, interval 30; other: refused) | no peers |
//! | a `stopped` client is known | refused |
//! | a new client: the user has fewer than `max_peers_per_torrent_per_user` | refused |
//! | a new leecher: the user is within their group's download slots | kept out of the swarm, warned |
//! | the client's last announce was `announce_min` ago or more, or this is its first `completed` | counted, no peers (no warning, as since v0.3) |
//! | the user's peer lists are within their rates | no peers |
//!
//! Factors (percent): the upload credited is the best of the global, the group's (double
//! upload) and the torrent's, 200 on a featured torrent; the download charged the lowest of
//! the global, the group's (freeleech) and the torrent's, 0 with personal freeleech, a
//! freeleech token on the torrent, or a featured torrent; donors and lifetime donors get
//! at least their configured factors. A user's own other clients are never in their list;
//! seeders get only leechers (the swarm store's rule).

use std::net::SocketAddr;

use shoal_proto::{AnnounceEvent, InfoHash as Hash};
use shoal_tracker::policy::private_rule;
use shoal_tracker::site::{Admission, Asked, Refusal, SiteRules};
use shoal_tracker::Protocol;

use crate::model::{Peer, Status};
use crate::site::{unix_now, Site, TorrentState};

shoal_site::refusals! {
    INVALID_USER_AGENT = "Invalid user agent.", "invalid_user_agent";
    USER_AGENT_TOO_LONG = "The user agent of this client is too long.", "user_agent_too_long";
    NOT_A_CLIENT = "Browser, crawler or cheater is not allowed.", "not_a_client";
    BLACKLISTED_CLIENT = "Client is not acceptable. Please check our blacklist.", "blacklisted_client";
    BLACKLISTED_PORT = "Illegal port. Port should be between 6881-64999.", "blacklisted_port";
    USER_NOT_FOUND = "User does not exist. Please re-download the .torrent file.", "user_not_found";
    DOWNLOAD_REVOKED = "Your downloading privileges have been disabled.", "download_revoked";
    GROUP_NOT_FOUND = "Group not found.", "group_not_found";
    GROUP_BANNED = "Your account is not enabled. (Current: Banned).", "group_banned";
    GROUP_VALIDATING = "Your account is not enabled. (Current: Validating).", "group_validating";
    GROUP_DISABLED = "Your account is not enabled. (Current: Disabled).", "group_disabled";
    TORRENT_NOT_FOUND = "Torrent not found.", "torrent_not_found";
    TORRENT_DELETED = "Torrent has been deleted.", "torrent_deleted";
    TORRENT_NOT_APPROVED = "Torrent not approved.", "torrent_not_approved";
    STOPPED_UNKNOWN = "Stopped peer doesn't exist.", "stopped_peer_unknown";
}

pub const PENDING: &str = "Torrent is pending moderation.";
pub const REJECTED: &str = "Torrent has been rejected.";
pub const POSTPONED: &str = "Torrent has been postponed.";
pub const SLOTS_FULL: &str = "Download slot limit reached";

/// The interval sent with a moderation warning: the uploader's client comes back soon
/// after its torrent is approved.
pub const MODERATION_INTERVAL: u32 = 30;

/// Substrings of the user agents of browsers and crawlers (compared in lower case).
const NOT_CLIENTS: [&str; 10] = [
    "mozilla",
    "browser",
    "chrome",
    "safari",
    "applewebkit",
    "opera",
    "links",
    "lynx",
    "bot",
    "unknown",
];

/// The agent column of a client whose protocol carries no `User-Agent`.
fn agent_of(a: &Asked<'_>) -> String {
    match (a.agent, a.protocol) {
        (Some(agent), _) => agent.to_owned(),
        (None, p) => format!("shoal/{}", p.label()),
    }
}

/// Whether the agent column `kept` already says what `agent_of(a)` would (no new string).
fn same_agent(a: &Asked<'_>, kept: &str) -> bool {
    match a.agent {
        Some(agent) => agent == kept,
        None => kept
            .strip_prefix("shoal/")
            .is_some_and(|p| p == a.protocol.label()),
    }
}

/// What the rules need of a client's previous state.
#[derive(Clone, Copy)]
struct Prior {
    active: bool,
    visible: bool,
    seeder: bool,
    updated_at: i64,
}

impl Prior {
    fn of(p: &Peer) -> Self {
        Self {
            active: p.active,
            visible: p.visible,
            seeder: p.seeder,
            updated_at: p.updated_at,
        }
    }
}

/// Whether `hay` contains `needle` (lower case), ASCII case ignored, without a copy.
fn contains_lower(hay: &str, needle: &str) -> bool {
    hay.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// The HTTP checks of the user agent.
fn check_agent(a: &Asked<'_>) -> Result<(), Refusal> {
    if a.protocol != Protocol::Http {
        return Ok(());
    }
    let agent = a.agent.ok_or(INVALID_USER_AGENT)?;
    if agent.len() > 64 {
        return Err(USER_AGENT_TOO_LONG);
    }
    if NOT_CLIENTS.iter().any(|w| contains_lower(agent, w)) {
        return Err(NOT_A_CLIENT);
    }
    Ok(())
}

/// The user's and group's facts the rules need, copied out of their maps.
struct Who {
    can_download: bool,
    is_donor: bool,
    is_lifetime: bool,
    num_leeching: u32,
    slots: Option<u32>,
    group_free: bool,
    group_double: bool,
}

impl Site {
    fn who(&self, user_id: u32) -> Result<Who, Refusal> {
        let (group_id, can_download, is_donor, is_lifetime, num_leeching) = {
            let u = self.users.get(&user_id).ok_or(USER_NOT_FOUND)?;
            let u = &u.user;
            (
                u.group_id,
                u.can_download,
                u.is_donor,
                u.is_lifetime,
                u.num_leeching,
            )
        };
        let groups = self.groups.read();
        let g = groups.get(&group_id).ok_or(GROUP_NOT_FOUND)?;
        match g.slug.as_str() {
            "banned" => return Err(GROUP_BANNED),
            "validating" => return Err(GROUP_VALIDATING),
            "disabled" => return Err(GROUP_DISABLED),
            _ => {}
        }
        Ok(Who {
            can_download,
            is_donor,
            is_lifetime,
            num_leeching,
            slots: g.download_slots,
            group_free: g.is_freeleech,
            group_double: g.is_double_upload,
        })
    }

    /// The factors (percent) for `user` on torrent `t`.
    fn factors(&self, who: &Who, user: u32, t: &TorrentState) -> (u8, u8) {
        let c = &self.config;
        let id = t.torrent.id;
        let featured = self.featured.contains(&id);
        let mut up = c
            .upload_factor
            .max(if who.group_double { 200 } else { 100 })
            .max(t.torrent.upload_factor);
        let mut down = c
            .download_factor
            .min(if who.group_free { 0 } else { 100 })
            .min(t.torrent.download_factor);
        if featured {
            up = up.max(200);
        }
        if featured || self.personal.contains(&user) || self.tokens.contains(&(user, id)) {
            down = 0;
        }
        if who.is_lifetime {
            up = up.max(c.lifetime_upload_factor);
            down = down.min(c.lifetime_download_factor);
        } else if who.is_donor {
            up = up.max(c.donor_upload_factor);
            down = down.min(c.donor_download_factor);
        }
        (up, down)
    }

    /// Records an announce of an info hash the site does not know (or deleted).
    fn note_unregistered(&self, user: u32, info_hash: &[u8; 20]) {
        self.pending
            .lock()
            .unregistered
            .insert((user, *info_hash), unix_now());
    }

    /// Moves a user's seeding and leeching counts by a client's change.
    fn count_user(&self, user: u32, seeding: i32, leeching: i32) {
        if seeding == 0 && leeching == 0 {
            return;
        }
        if let Some(mut u) = self.users.get_mut(&user) {
            let u = &mut u.user;
            u.num_seeding = u.num_seeding.saturating_add_signed(seeding);
            u.num_leeching = u.num_leeching.saturating_add_signed(leeching);
        }
    }

    /// Whether the user may receive one more peer list of the kind a `seeder` gets, and if
    /// so counts it.
    fn take_list(&self, user: u32, seeder: bool, now: f64) -> bool {
        let Some(mut u) = self.users.get_mut(&user) else {
            return false;
        };
        let rates = if seeder {
            &mut u.leech_lists
        } else {
            &mut u.seed_lists
        };
        if rates.allows(now) {
            rates.tick(now);
            true
        } else {
            false
        }
    }
}

/// Which list a client is counted in: (seeding, leeching), each 0 or 1.
fn listed(p: &Peer) -> (i32, i32) {
    if !(p.active && p.visible) {
        (0, 0)
    } else if p.seeder {
        (1, 0)
    } else {
        (0, 1)
    }
}

impl SiteRules for Site {
    fn admit(&self, a: &Asked<'_>) -> Result<Admission, Refusal> {
        check_agent(a)?;
        if self
            .blacklist
            .read()
            .iter()
            .any(|p| a.peer_id.0.starts_with(p))
        {
            return Err(BLACKLISTED_CLIENT);
        }
        let stopped = a.event == AnnounceEvent::Stopped;
        if let Some(addr) = a.addr {
            if !stopped && self.config.port_refused(addr.port()) {
                return Err(BLACKLISTED_PORT);
            }
        }
        let (user, tid) = (a.user_id as u32, a.torrent_id as u32);
        let who = self.who(user)?;
        let left = a.left.unwrap_or(u64::MAX);
        let seeder = left == 0 || a.event == AnnounceEvent::Completed && a.left.is_none();
        if !seeder && !who.can_download {
            return Err(DOWNLOAD_REVOKED);
        }
        let now = unix_now();
        let mut t = self.torrents.get_mut(&tid).ok_or(TORRENT_NOT_FOUND)?;
        if t.torrent.is_deleted {
            drop(t);
            self.note_unregistered(user, &a.info_hash.0);
            return Err(TORRENT_DELETED);
        }
        let mut warning = match t.torrent.status {
            Status::Approved => None,
            Status::Pending => Some(PENDING),
            Status::Rejected => Some(REJECTED),
            Status::Postponed => Some(POSTPONED),
            Status::Unknown => return Err(TORRENT_NOT_APPROVED),
        };
        let moderated = warning.is_some();
        let (up, down) = self.factors(&who, user, &t);
        let key = (user, a.peer_id.0);
        let old = t.clients.get(&key).map(Prior::of);
        let (ip, port) = match a.addr {
            Some(addr) => (addr.ip(), addr.port()),
            None => (a.source, 0),
        };
        let mine = (user, [0; 20])..=(user, [0xff; 20]);
        let completed = a.event == AnnounceEvent::Completed;
        let first_completed = completed && !t.completed.contains(&key);
        let (before, after, visible);
        if stopped {
            let t = &mut *t;
            let Some(old) = t.clients.get_mut(&key) else {
                return Err(STOPPED_UNKNOWN);
            };
            // Its next `completed` is a first again (UNIT3D-Announce forgets a stopped
            // client).
            t.completed.remove(&key);
            before = listed(old);
            // As UNIT3D-Announce writes a stopped client: inactive, invisible, its last
            // report.
            (old.active, old.visible) = (false, false);
            old.uploaded = a.uploaded;
            old.downloaded = a.downloaded;
            old.left = a.left.unwrap_or(old.left);
            old.updated_at = now;
            after = (0, 0);
            visible = false;
        } else {
            if old.is_none_or(|o| !o.active) {
                let others = t
                    .clients
                    .range(mine.clone())
                    .filter(|((_, id), p)| *id != a.peer_id.0 && p.active)
                    .count();
                if others >= self.config.max_peers_per_torrent_per_user as usize {
                    return Err(Refusal {
                        reason: self.peers_limit_reason,
                        label: "peers_per_torrent_per_user",
                    });
                }
            }
            let slots_full = !seeder && who.slots.is_some_and(|s| s <= who.num_leeching);
            let was_visible_leecher = old.is_some_and(|o| o.active && o.visible && !o.seeder);
            visible = was_visible_leecher || seeder || !slots_full;
            let p = t.clients.entry(key).or_insert_with(|| Peer {
                user_id: user,
                torrent_id: tid,
                peer_id: a.peer_id.0,
                ip,
                port,
                agent: agent_of(a),
                uploaded: 0,
                downloaded: 0,
                left: 0,
                seeder: false,
                active: false,
                visible: false,
                connectable: false,
                created_at: now,
                updated_at: now,
            });
            before = listed(p);
            if !same_agent(a, &p.agent) {
                p.agent = agent_of(a);
            }
            (p.ip, p.port) = (ip, port);
            (p.uploaded, p.downloaded) = (a.uploaded, a.downloaded);
            p.left = a.left.unwrap_or(0);
            (p.seeder, p.active, p.visible) = (seeder, true, visible);
            p.updated_at = now;
            after = listed(p);
            if first_completed {
                t.completed.insert(key);
            }
        }
        let (seeding, leeching) = (after.0 - before.0, after.1 - before.1);
        let tt = &mut t.torrent;
        tt.seeders = tt.seeders.saturating_add_signed(seeding);
        tt.leechers = tt.leechers.saturating_add_signed(leeching);
        if old.is_some_and(|o| !o.seeder) && seeder && !stopped {
            tt.times_completed = tt.times_completed.saturating_add(1);
        }
        // The user's other clients here: a range of the (user, peer id) ordered map.
        let hide: Vec<SocketAddr> = t
            .clients
            .range(mine)
            .filter(|((_, id), p)| *id != a.peer_id.0 && p.port != 0)
            .map(|(_, p)| SocketAddr::new(p.ip, p.port))
            .collect();
        drop(t);
        {
            let mut pending = self.pending.lock();
            pending.peers.insert((tid, user, a.peer_id.0));
            if seeding != 0 || leeching != 0 || seeder {
                pending.torrents.insert(tid);
            }
        }
        self.count_user(user, seeding, leeching);
        // Sooner than the minimum: no peers and, as since UNIT3D-Announce v0.3, no warning
        // (its `Rate limit exceeded. Please wait.` is silent). A client's first `completed`
        // is exempt: the new seeder is sent leechers (v0.3.1).
        let too_soon = !first_completed
            && old.is_some_and(|o| {
                o.active
                    && now
                        < o.updated_at
                            .saturating_add(i64::from(self.config.announce_min))
            });
        if warning.is_none() && !visible && !stopped {
            warning = Some(SLOTS_FULL);
        }
        let gets_peers =
            warning.is_none() && !too_soon && !stopped && self.take_list(user, seeder, now as f64);
        self.stats.announce_response();
        let (min, max) = (self.config.announce_min, self.config.announce_max);
        let interval = if moderated {
            MODERATION_INTERVAL
        } else {
            fastrand::u32(min.min(max)..=max.max(min))
        };
        Ok(Admission {
            download_factor: f64::from(down) / 100.0,
            upload_factor: f64::from(up) / 100.0,
            listed: visible || stopped,
            gets_peers,
            warning,
            interval: Some(interval),
            hide,
        })
    }

    fn unregistered(&self, user_id: u64, info_hash: &Hash, _now: u32) {
        self.note_unregistered(user_id as u32, &info_hash.0);
    }

    /// UNIT3D-Announce's texts for the refusals the private rule makes.
    fn reason(&self, private_rule_reason: &'static str) -> &'static str {
        match private_rule_reason {
            private_rule::PASSKEY_REQUIRED => "Invalid passkey.",
            private_rule::UNKNOWN_PASSKEY => {
                "Passkey does not exist. Please re-download the .torrent file."
            }
            private_rule::NOT_REGISTERED => "InfoHash not found.",
            other => other,
        }
    }
}
