//! The rules Gazelle sites live by, as Ocelot applies them, for every protocol: [`Site`] is
//! the core's [`SiteRules`]. The private rule has found the user (by passkey) and the
//! torrent (by info hash); this decides the rest and records the client's new state on
//! its torrent, under the torrent's lock.
//!
//! | check | answer |
//! |---|---|
//! | the whitelist is empty, or the peer id starts with one of its prefixes | refused |
//! | the torrent is not deleted | refused, with the deletion's reason for `del_reason_lifetime` |
//! | a leecher's user may leech | recorded, not listed, no peers, warned |
//!
//! Factors: neutral leech counts neither way; freeleech, or a token of the user's on the
//! torrent, counts no download. A token's saved download is recorded for
//! `users_freeleeches`; when its holder completes the torrent the token is used up (the
//! site is called back). A snatch is a `completed` with nothing left from a client that
//! was not seeding, once. The interval sent is the site's plus up to its jitter. A user's
//! own other clients are never in their list; seeders get only leechers (the swarm
//! store's rule).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use shoal_proto::{AnnounceEvent, InfoHash as Hash};
use shoal_tracker::policy::private_rule;
use shoal_tracker::site::{Admission, Asked, Refusal, SiteRules};

use crate::model::{LeechType, Snatch};
use crate::site::{unix_now, Client, Site, TorrentState};

/// Refused: the client's peer id has no whitelisted prefix.
pub const NOT_WHITELISTED: Refusal = Refusal {
    reason: "Your client is not on the whitelist",
    label: "client_not_whitelisted",
};

/// The warning of a leecher whose user may not leech (Ocelot answers it as a failure
/// after recording the client; shoal records it the same way and answers it as a
/// warning, with no peers).
pub const LEECHING_FORBIDDEN: &str = "Access denied, leeching forbidden";

/// The texts of an unregistered or deleted torrent's announces.
pub const UNREGISTERED: &str = "Unregistered torrent";

/// Gazelle's deletion reasons by code, as Ocelot names them in "Unregistered torrent:
/// <reason>".
const DELETION_REASONS: [&str; 23] = [
    "Unregistered torrent: Dupe",
    "Unregistered torrent: Trump",
    "Unregistered torrent: Bad File Names",
    "Unregistered torrent: Bad Folder Names",
    "Unregistered torrent: Bad Tags",
    "Unregistered torrent: Disallowed Format",
    "Unregistered torrent: Discs Missing",
    "Unregistered torrent: Discography",
    "Unregistered torrent: Edited Log",
    "Unregistered torrent: Inaccurate Bitrate",
    "Unregistered torrent: Low Bitrate",
    "Unregistered torrent: Mutt Rip",
    "Unregistered torrent: Disallowed Source",
    "Unregistered torrent: Encode Errors",
    "Unregistered torrent: Specifically Banned",
    "Unregistered torrent: Tracks Missing",
    "Unregistered torrent: Transcode",
    "Unregistered torrent: Unapproved Cassette",
    "Unregistered torrent: Unsplit Album",
    "Unregistered torrent: User Compilation",
    "Unregistered torrent: Wrong Format",
    "Unregistered torrent: Wrong Media",
    "Unregistered torrent: Audience Recording",
];

/// What an announce of a deleted torrent is told: the reason's text while the deletion
/// is recent and its code is one Gazelle defines (Ocelot answers "Unregistered torrent:"
/// with nothing after for an unknown code; shoal leaves the colon out).
pub fn deletion_text(reason: Option<i32>) -> &'static str {
    reason
        .and_then(|r| usize::try_from(r).ok())
        .and_then(|r| DELETION_REASONS.get(r).copied())
        .unwrap_or(UNREGISTERED)
}

/// Every refusal of these rules (for the metrics' labels).
pub const REFUSALS: &[Refusal] = &[NOT_WHITELISTED];

/// The factors (download, upload) of `user` on torrent `t`.
fn factors(t: &TorrentState, user: u32) -> (f64, f64) {
    match t.torrent.leech_type {
        LeechType::Neutral => (0.0, 0.0),
        LeechType::Free => (0.0, 1.0),
        LeechType::Normal if t.tokened.contains(&user) => (0.0, 1.0),
        LeechType::Normal => (1.0, 1.0),
    }
}

/// The agent column of a client whose protocol carries no `User-Agent`.
fn agent_of(a: &Asked<'_>) -> String {
    match a.agent {
        Some(agent) => agent.to_owned(),
        None => format!("shoal/{}", a.protocol.label()),
    }
}

/// What a client moved since its last announce, (uploaded, downloaded), when it reports
/// new bytes and neither counter went down (a decrease is a restarted client: nothing
/// counted, as Ocelot).
fn gained(c: &Client, uploaded: u64, downloaded: u64) -> Option<(u64, u64)> {
    let up = uploaded.checked_sub(c.uploaded)?;
    let down = downloaded.checked_sub(c.downloaded)?;
    (up > 0 || down > 0).then_some((up, down))
}

/// A client's speeds at this announce, as Ocelot writes them to `xbt_files_users`: what it
/// moved since its last announce over the seconds between them; 0 when it moved nothing,
/// a counter went down, or no whole second has passed (an earlier announce's speed is
/// never kept).
pub(crate) fn speeds(c: &Client, uploaded: u64, downloaded: u64, now: i64) -> (u64, u64) {
    let elapsed = u64::try_from(now.saturating_sub(c.last_announced)).unwrap_or(0);
    match gained(c, uploaded, downloaded) {
        Some((up, down)) if elapsed > 0 => (up / elapsed, down / elapsed),
        _ => (0, 0),
    }
}

/// What one announce did to its client, for the counts and the writes.
struct Change {
    was_seeder: Option<bool>,
    is_seeder: Option<bool>,
    snatched: bool,
    token_used_up: bool,
    token_saved: u64,
}

impl Site {
    /// The refusal of an announce of a torrent that is not (or no longer) served.
    fn unserved(&self, info_hash: &[u8; 20], now: i64) -> Refusal {
        let lifetime = i64::try_from(self.config.del_reason_lifetime).unwrap_or(i64::MAX);
        let reason = match self.deleted.get(info_hash) {
            Some(d) if now.saturating_sub(d.at) < lifetime => deletion_text(d.reason),
            _ => UNREGISTERED,
        };
        Refusal {
            reason,
            label: "torrent_unregistered",
        }
    }

    /// Applies announce `a` to its client on torrent `t` (locked by the caller).
    fn apply(&self, a: &Asked<'_>, t: &mut TorrentState, can_leech: bool, now: i64) -> Change {
        let user = a.user_id as u32;
        let key = (user, a.peer_id.0);
        let left = a.left.unwrap_or(u64::MAX);
        let seeder = left == 0;
        let previous = t.clients.get(&key).map(|c| c.seeder);
        let mut change = Change {
            was_seeder: previous,
            is_seeder: None,
            snatched: false,
            token_used_up: false,
            token_saved: 0,
        };
        let tokened = t.tokened.contains(&user) && t.torrent.leech_type != LeechType::Neutral;
        if a.event == AnnounceEvent::Stopped {
            if let Some(c) = t.clients.remove(&key) {
                let mut c = c;
                (c.upspeed, c.downspeed) = speeds(&c, a.uploaded, a.downloaded, now);
                if tokened {
                    change.token_saved = gained(&c, a.uploaded, a.downloaded).map_or(0, |g| g.1);
                }
                (c.uploaded, c.downloaded) = (a.uploaded, a.downloaded);
                c.left = a.left.unwrap_or(c.left);
                c.last_announced = now;
                c.announces = c.announces.saturating_add(1);
                let row = self.row(t.torrent.id, user, a.peer_id.0, &c, false, now);
                let mut pending = self.pending.lock();
                let k = (t.torrent.id, user, a.peer_id.0);
                pending.peers.remove(&k);
                pending.gone.insert(k, row);
            }
            return change;
        }
        let (ip, port) = match a.addr {
            Some(addr) => (addr.ip(), addr.port()),
            None => (a.source, 0),
        };
        let c = t.clients.entry(key).or_insert_with(|| Client {
            ip,
            port,
            agent: agent_of(a),
            uploaded: a.uploaded,
            downloaded: a.downloaded,
            left,
            seeder,
            upspeed: 0,
            downspeed: 0,
            first_announced: now,
            last_announced: now,
            announces: 0,
            visible: true,
        });
        let fresh = previous.is_none() || a.event == AnnounceEvent::Started;
        if fresh {
            c.first_announced = now;
            c.announces = 1;
            (c.upspeed, c.downspeed) = (0, 0);
        } else {
            c.announces = c.announces.saturating_add(1);
            (c.upspeed, c.downspeed) = speeds(c, a.uploaded, a.downloaded, now);
            if tokened {
                change.token_saved = gained(c, a.uploaded, a.downloaded).map_or(0, |g| g.1);
            }
        }
        (c.uploaded, c.downloaded) = (a.uploaded, a.downloaded);
        (c.ip, c.port) = (ip, port);
        if a.agent.is_some_and(|agent| agent != c.agent) {
            c.agent = agent_of(a);
        }
        c.left = left;
        c.seeder = seeder;
        c.last_announced = now;
        c.visible = seeder || can_leech;
        change.is_seeder = Some(seeder);
        // A completion from a client that was not seeding (a new client's too, as Ocelot
        // counts it): the snatch, once.
        if a.event == AnnounceEvent::Completed && seeder && previous != Some(true) {
            change.snatched = true;
            t.torrent.snatched = t.torrent.snatched.saturating_add(1);
            if t.tokened.remove(&user) {
                change.token_used_up = true;
            }
        }
        change
    }
}

impl SiteRules for Site {
    fn admit(&self, a: &Asked<'_>) -> Result<Admission, Refusal> {
        self.counters.announces.fetch_add(1, Ordering::Relaxed);
        {
            let list = self.whitelist.read();
            if !list.is_empty() && !list.iter().any(|p| a.peer_id.0.starts_with(p)) {
                return Err(NOT_WHITELISTED);
            }
        }
        let user = a.user_id as u32;
        let now = unix_now();
        let (can_leech, protected, traced) = match self.users.get(&user) {
            Some(u) if !u.deleted => (u.user.can_leech, u.user.protected, u.traced),
            _ => return Err(self.unserved(&a.info_hash.0, now)),
        };
        let tid = a.torrent_id as u32;
        let mut t = match self.torrents.get_mut(&tid) {
            Some(t) if t.torrent.info_hash == a.info_hash.0 => t,
            _ => return Err(self.unserved(&a.info_hash.0, now)),
        };
        let (download_factor, upload_factor) = factors(&t, user);
        let change = self.apply(a, &mut t, can_leech, now);
        // The counts follow the client from list to list.
        let (seeders, leechers) = (&mut 0i32, &mut 0i32);
        for (was, by) in [(change.was_seeder, -1), (change.is_seeder, 1)] {
            match was {
                Some(true) => *seeders += by,
                Some(false) => *leechers += by,
                None => {}
            }
        }
        t.seeders = t.seeders.saturating_add_signed(*seeders);
        t.leechers = t.leechers.saturating_add_signed(*leechers);
        let moved = *seeders != 0 || *leechers != 0;
        let stale = t.last_flushed + 3600 < now;
        if moved || change.snatched || stale {
            t.last_flushed = now;
        }
        let hide: Vec<SocketAddr> = t
            .clients
            .range((user, [0; 20])..=(user, [0xff; 20]))
            .filter(|((_, id), c)| *id != a.peer_id.0 && c.port != 0)
            .map(|(_, c)| SocketAddr::new(c.ip, c.port))
            .collect();
        let visible = t
            .clients
            .get(&(user, a.peer_id.0))
            .is_none_or(|c| c.visible);
        drop(t);
        if let Some(was) = change.was_seeder {
            self.count_user(user, was, -1);
        }
        if let Some(is) = change.is_seeder {
            self.count_user(user, is, 1);
        }
        {
            let mut pending = self.pending.lock();
            if change.is_seeder.is_some() {
                pending.peers.insert((tid, user, a.peer_id.0));
            }
            if moved || change.snatched || stale {
                pending.torrents.insert(tid);
            }
            if change.snatched {
                *pending.snatched.entry(tid).or_default() += 1;
                pending.snatches.push(Snatch {
                    user_id: user,
                    torrent_id: tid,
                    at: now,
                    ip: (!protected).then_some(a.addr.map_or(a.source, |s| s.ip())),
                });
            }
            if change.token_saved > 0 {
                *pending.tokens.entry((user, tid)).or_default() += change.token_saved;
            }
        }
        if change.token_used_up {
            self.expired_tokens.lock().push((user, tid));
        }
        if traced {
            tracing::info!(
                user,
                torrent = tid,
                event = ?a.event,
                uploaded = a.uploaded,
                downloaded = a.downloaded,
                left = ?a.left,
                "traced announce"
            );
        }
        self.counters.served.fetch_add(1, Ordering::Relaxed);
        let (interval, jitter) = self.interval();
        let leecher = change.is_seeder == Some(false);
        let forbidden = leecher && !can_leech;
        Ok(Admission {
            download_factor,
            upload_factor,
            listed: visible || a.event == AnnounceEvent::Stopped,
            gets_peers: !forbidden && a.event != AnnounceEvent::Stopped,
            warning: forbidden.then_some(LEECHING_FORBIDDEN),
            interval: Some(interval.saturating_add(fastrand::u32(0..=jitter))),
            hide,
        })
    }

    fn unregistered(&self, _user_id: u64, _info_hash: &Hash, _now: u32) {}

    /// Ocelot's texts for the refusals the private rule makes.
    fn reason(&self, private_rule_reason: &'static str) -> &'static str {
        match private_rule_reason {
            private_rule::PASSKEY_REQUIRED => "Malformed announce",
            private_rule::UNKNOWN_PASSKEY => {
                self.counters
                    .bad_announce_key
                    .fetch_add(1, Ordering::Relaxed);
                "Passkey not found"
            }
            private_rule::NOT_REGISTERED => UNREGISTERED,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    use shoal_proto::PeerId;
    use shoal_tracker::private::{Members, Roster};
    use shoal_tracker::Protocol;

    use super::*;
    use crate::model::{SiteData, Torrent, User};
    use crate::GazelleConfig;

    /// User 1 holding a token on the normal torrent 10.
    fn site() -> Site {
        let members = Arc::new(Members::new(&Roster::default(), false));
        let data = SiteData {
            users: vec![User {
                id: 1,
                passkey: "1".repeat(32),
                can_leech: true,
                protected: false,
            }],
            torrents: vec![Torrent {
                id: 10,
                info_hash: [10; 20],
                leech_type: LeechType::Normal,
                snatched: 0,
            }],
            tokens: vec![(1, 10)],
            whitelist: vec![],
        };
        Site::new(GazelleConfig::default(), members, data)
    }

    fn ask(site: &Site, downloaded: u64, left: u64, event: AnnounceEvent) -> Admission {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let asked = Asked {
            protocol: Protocol::Http,
            source: ip,
            user_id: 1,
            torrent_id: 10,
            info_hash: &Hash([10; 20]),
            peer_id: PeerId([1; 20]),
            addr: Some(SocketAddr::new(ip, 6881)),
            agent: Some("libtorrent/2.0.8.0"),
            uploaded: 0,
            downloaded,
            left: Some(left),
            event,
            now: 0,
        };
        site.admit(&asked).expect("served")
    }

    #[test]
    fn a_stopped_announce_adds_what_the_token_saved_since_the_last_one() {
        let site = site();
        ask(&site, 0, 1000, AnnounceEvent::Started);
        ask(&site, 300, 700, AnnounceEvent::None);
        let stopped = ask(&site, 800, 200, AnnounceEvent::Stopped);
        assert_eq!(stopped.download_factor, 0.0, "still free");
        let batch = site.take_batch(&[]);
        assert_eq!(batch.tokens.len(), 1);
        assert_eq!(
            batch.tokens[0].downloaded, 800,
            "300, then 500 with the stop"
        );
        assert_eq!(batch.peers.len(), 1);
        assert!(!batch.peers[0].active);
    }

    fn client(uploaded: u64, downloaded: u64, last_announced: i64) -> Client {
        Client {
            announces: 2,
            first_announced: 0,
            last_announced,
            left: 10,
            seeder: false,
            visible: true,
            uploaded,
            upspeed: 7,
            downloaded,
            downspeed: 7,
            ip: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 6881,
            agent: String::new(),
        }
    }

    #[test]
    fn speeds_are_this_announces_own_as_ocelot_writes_them() {
        let c = client(1000, 500, 100);
        assert_eq!(speeds(&c, 1400, 700, 104), (100, 50));
        // Nothing new, the same second, or a counter that went down: 0, not the old speed.
        assert_eq!(speeds(&c, 1000, 500, 104), (0, 0));
        assert_eq!(speeds(&c, 1400, 700, 100), (0, 0));
        assert_eq!(speeds(&c, 900, 700, 104), (0, 0));
        assert_eq!(gained(&c, 1400, 500), Some((400, 0)));
        assert_eq!(gained(&c, 1000, 400), None);
    }
}
