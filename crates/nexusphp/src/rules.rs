//! NexusPHP's announce rules (`public/announce.php` at 1.10.3, commit `dd27164`), for every
//! protocol: [`Site`] is the core's [`SiteRules`]. The private rule has found the member (by
//! passkey) and the torrent (by info hash); this decides the rest in NexusPHP's order and
//! records the client's new state on its torrent, under the torrent's lock.
//!
//! NexusPHP's warnings (`warn()`) write nothing and send no peers; the seam's
//! [`Admission`] would record the announce, so they are answered as [`Refusal`]s, with
//! the same text (on `completed` and `stopped` NexusPHP sends them as failures too). Every
//! rule, its source line and the texts are in `docs/nexusphp.md`.

use shoal_proto::{AnnounceEvent, InfoHash};
use shoal_tracker::policy::private_rule;
use shoal_tracker::site::{Admission, Asked, Refusal, SiteRules};

use crate::agent::is_browser;
use crate::client::{client_row, refresh, seeding, Before};
use crate::limits::{self, Cheat};
use crate::model::{HrMode, Settings, User, CLASS_VIP, MIN_ANNOUNCE_WAIT};
use crate::promotion;
use crate::site::{CheaterWrite, Site, SnatchInsert, SnatchWrite, TorrentWrite};

shoal_site::refusals! {
    BROWSER = "Browser access blocked!", "browser";
    REQUIRE_PASSKEY = "Require passkey", "passkey_required";
    TOO_FREQUENT = "Request too frequent(h)", "too_frequent";
    INVALID_PORT = "invalid port", "invalid_port";
    DISABLED = "Your account is disabled!", "account_disabled";
    PARKED = "Your account is parked! (Read the FAQ)", "account_parked";
    NO_DOWNLOAD = "Your downloading privileges have been disabled! (Read the rules)", "download_disabled";
    NOT_REGISTERED = "torrent not registered with this tracker", "torrent_not_registered";
    BANNED = "torrent banned", "torrent_banned";
    NOT_APPROVED = "torrent review not approved", "torrent_not_approved";
    FAKE = "fake announce", "fake_announce";
    MIN_INTERVAL = "There is a minimum announce time of 300 seconds", "min_interval";
    PURCHASE = "purchase started, please wait", "purchase_started";
    SAME_LOCATION = "You cannot seed the same torrent in the same location from more than 1 client.", "same_location";
    ONE_LEECH = "You already are downloading the same torrent. You may only leech from one location at a time.", "one_leech_location";
    THREE_SEEDS = "You cannot seed the same torrent from more than 3 locations.", "three_seed_locations";
    CHEATER = "We believe you're trying to cheat. And your account is disabled.", "cheater";
}

/// `portblacklisted` (`include/functions_announce.php:193-208`).
pub fn port_blacklisted(port: u16) -> bool {
    matches!(port, 411..=413 | 1214 | 4662 | 6346..=6347 | 6699 | 6881..=6889)
}

/// The site's address for the texts that name it (`basic.BASEURL`).
fn base(s: &Settings) -> &str {
    s.base_url.trim_end_matches('/')
}

/// The rules about the member (`public/announce.php:124-129`).
fn check_member(u: &User) -> Result<(), Refusal> {
    if !u.enabled {
        return Err(DISABLED);
    }
    if u.parked {
        return Err(PARKED);
    }
    if !u.can_download {
        return Err(NO_DOWNLOAD);
    }
    Ok(())
}

impl Site {
    fn refusal(&self, text: String, label: &'static str) -> Refusal {
        Refusal {
            reason: self.texts.intern(text),
            label,
        }
    }

    /// The Redis windows of `public/announce.php:42-66`: whether this is a re-announce
    /// (the same passkey and torrent within 5 s), or too frequent (again within 30 s); and
    /// whether the cleanup's record is due (checked again when it is written).
    fn windows(
        &self,
        key: (u32, u32),
        final_event: bool,
        now: i64,
    ) -> Result<(bool, bool), Refusal> {
        let mut pair = self.pairs.entry(key).or_default();
        let w = &mut pair.windows;
        let record_due = now >= w.recorded_until;
        let repeat = now < w.repeat_until;
        if !repeat {
            w.repeat_until = now + 5;
        }
        if !final_event && !repeat {
            if now < w.frequent_until {
                return Err(TOO_FREQUENT);
            }
            w.frequent_until = now + 30;
        }
        Ok((repeat, record_due))
    }

    /// The client check (`public/announce.php:152-172`): the family id, or the refusal
    /// (marking `showclienterror`).
    fn check_client(&self, a: &Asked<'_>, u: &User, s: &Settings) -> Result<u32, Refusal> {
        let list = self.allow.read().clone();
        match list.check(&a.peer_id.0, a.agent, false) {
            Ok(family) => Ok(family),
            Err(why) => {
                if !u.show_client_error {
                    self.pending.lock().user(u.id).show_client_error = Some(true);
                    if let Some(mut u) = self.users.get_mut(&u.id) {
                        u.show_client_error = true;
                    }
                }
                Err(self.refusal(why.text(base(s)), "client_not_allowed"))
            }
        }
    }

    /// The rules of a client new on this torrent (`public/announce.php:383-427`).
    fn check_new_client(
        &self,
        a: &Asked<'_>,
        u: &User,
        t: &crate::site::TorrentState,
        s: &Settings,
        now: i64,
    ) -> Result<(), Refusal> {
        let seeder = seeding(a);
        let mine = t.clients.range((u.id, [0; 20])..=(u.id, [0xff; 20]));
        let (mut count, mut same_ip) = (0, false);
        for (_, p) in mine {
            count += 1;
            same_ip |= p.ip == a.source;
        }
        if same_ip && seeder {
            return Err(SAME_LOCATION);
        }
        if count >= 1 && !seeder {
            return Err(ONE_LEECH);
        }
        if count >= 3 && seeder {
            return Err(THREE_SEEDS);
        }
        if u.class >= CLASS_VIP {
            return Ok(());
        }
        let age = now.saturating_sub(t.torrent.added);
        if s.waitsystem && limits::wait_refuses(u.downloaded, u.ratio(), age) {
            let wait = i64::from(limits::wait_hours(u.downloaded, u.ratio())) * 3600;
            let text = format!(
                "Your ratio is too low! You need to wait {} to start, please read {}/faq.php#id46 for details",
                limits::pretty_time(wait - age),
                base(s)
            );
            return Err(self.refusal(text, "wait"));
        }
        if s.maxdlsystem {
            if let Some(max) = limits::download_slots(u.downloaded, u.ratio()) {
                let leeching = self.leeching.get(&u.id).map_or(0, |n| *n);
                if leeching >= max {
                    let text = format!(
                        "Your slot limit is reached! You may at most download {max} torrents at the same time, please read {}/faq.php#id66 for details",
                        base(s)
                    );
                    return Err(self.refusal(text, "slots"));
                }
            }
        }
        Ok(())
    }

    /// Counts a client moving between lists: on the torrent and in the member's slots.
    fn recount(
        &self,
        t: &mut crate::site::TorrentState,
        uid: u32,
        was: Option<bool>,
        is: Option<bool>,
    ) {
        for (side, by) in [(was, -1i32), (is, 1)] {
            match side {
                Some(true) => t.torrent.seeders = t.torrent.seeders.saturating_add_signed(by),
                Some(false) => {
                    t.torrent.leechers = t.torrent.leechers.saturating_add_signed(by);
                    let mut n = self.leeching.entry(uid).or_default();
                    *n = n.saturating_add_signed(by);
                }
                None => {}
            }
        }
    }
}

impl SiteRules for Site {
    fn admit(&self, a: &Asked<'_>) -> Result<Admission, Refusal> {
        let now = (self.clock)();
        let s = self.settings();
        let stopped = a.event == AnnounceEvent::Stopped;
        let completed = a.event == AnnounceEvent::Completed;
        if a.agent.is_some_and(is_browser) {
            return Err(BROWSER);
        }
        let (uid, tid) = (a.user_id as u32, a.torrent_id as u32);
        let (repeat, record_due) = self.windows((uid, tid), stopped || completed, now)?;
        if let Some(addr) = a.addr {
            let port = addr.port();
            if port == 0 {
                return Err(INVALID_PORT);
            }
            if port_blacklisted(port) {
                return Err(
                    self.refusal(format!("Port {port} is blacklisted."), "blacklisted_port")
                );
            }
        }
        let user = self.member(uid).ok_or(NOT_REGISTERED)?;
        check_member(&user)?;
        let family = self.check_client(a, &user, &s)?;
        let mut t = self.torrents.get_mut(&tid).ok_or(NOT_REGISTERED)?;
        let staff = user.class >= s.seebanned_class;
        if t.torrent.banned && !staff {
            return Err(BANNED);
        }
        if t.torrent.approval_status != 1 && !s.approval_status_none_visible && !staff {
            return Err(NOT_APPROVED);
        }
        let left = a.left.unwrap_or(0);
        if left > t.torrent.size {
            drop(t);
            self.pending.lock().user(uid).revoke_download = true;
            if let Some(mut u) = self.users.get_mut(&uid) {
                u.can_download = false;
            }
            return Err(FAKE);
        }
        let interval = limits::draw_interval(limits::interval_band(&s, now - t.torrent.added));
        let global = promotion::global_state(&self.promotions.read(), now);
        let own = promotion::torrent_state(&t.torrent, &s, now);
        let f = promotion::factors(global, own, &t.torrent, uid, user.class, &s);
        if repeat {
            // `public/announce.php:266-270`: answered, nothing written, no peers.
            return Ok(Admission {
                download_factor: f.download,
                upload_factor: f.upload,
                listed: !stopped,
                gets_peers: false,
                warning: None,
                interval: Some(interval),
                hide: Vec::new(),
            });
        }
        let key = (uid, a.peer_id.0);
        let old = t.clients.get(&key).map(Before::of);
        if let Some(o) = &old {
            let recent = o
                .prev_action
                .is_some_and(|p| p > now - i64::from(MIN_ANNOUNCE_WAIT));
            if a.event == AnnounceEvent::None && recent {
                return Err(MIN_INTERVAL);
            }
        }
        let seeder = seeding(a);
        let paid = t.torrent.price > 0 && t.torrent.owner != uid && s.paid_torrent_enabled;
        if !seeder && paid && !self.bought.read().contains(&(uid, tid)) {
            // NexusPHP queues the purchase (a job of the site's queue) and warns; shoal
            // cannot queue it and answers as the first such announce is answered.
            return Err(PURCHASE);
        }
        // Read here, under the torrent's lock, not with the windows above (taken before
        // it); the entry is in the processor's cache since that look-up.
        let snatch_before = (self.pairs.get(&(uid, tid)))
            .map(|p| p.snatch)
            .unwrap_or_default();
        let mut credited = true;
        let mut moved = (0u64, 0u64, 0u64);
        match &old {
            None => self.check_new_client(a, &user, &t, &s, now)?,
            Some(o) => {
                let secs = u64::try_from(now - o.last_action).unwrap_or(0);
                let up = a.uploaded.saturating_sub(o.uploaded);
                let down = a.downloaded.saturating_sub(o.downloaded);
                moved = (up, down, secs);
                if s.cheaterdet != 0 && user.class < s.nodetect_class && secs > 10 {
                    let verdict = limits::cheater(
                        up,
                        secs,
                        t.torrent.leechers,
                        s.cheaterdet,
                        s.maximum_upload_speed,
                    );
                    let row = |comment, disabling| CheaterWrite {
                        user_id: uid,
                        torrent_id: tid,
                        at: now,
                        uploaded: up,
                        downloaded: down,
                        secs,
                        seeders: t.torrent.seeders,
                        leechers: t.torrent.leechers,
                        comment,
                        disabling,
                    };
                    match verdict {
                        Cheat::Disable => {
                            let w = row(limits::DISABLED_COMMENT, true);
                            drop(t);
                            let mut pending = self.pending.lock();
                            pending.cheaters.push(w);
                            pending.user(uid).disable = true;
                            drop(pending);
                            if let Some(mut u) = self.users.get_mut(&uid) {
                                u.enabled = false;
                            }
                            return Err(CHEATER);
                        }
                        Cheat::Suspect(comment) => {
                            self.pending.lock().cheaters.push(row(comment, false));
                        }
                        Cheat::None => {}
                    }
                }
            }
        }
        // The client's new state.
        let (was, is);
        let mut snatch = None;
        let mut completions = 0;
        match (&old, stopped) {
            (None, true) => {
                // `public/announce.php:539-541`: a new client's stop writes nothing.
                (was, is) = (None, None);
                credited = false;
            }
            (None, false) => {
                t.clients.insert(key, client_row(a, now));
                (was, is) = (None, Some(seeder));
                credited = false;
                snatch = Some(SnatchWrite {
                    insert: (!snatch_before.exists).then(|| SnatchInsert {
                        ip: a.source,
                        port: a.addr.map_or(0, |s| s.port()),
                        uploaded: a.uploaded,
                        downloaded: a.downloaded,
                        started: now,
                    }),
                    to_go: left,
                    last_action: now,
                    ..SnatchWrite::default()
                });
            }
            (Some(o), _) => {
                let (up, down, secs) = moved;
                let no_seeder = t.torrent.seeders == 0 && !seeder && secs > 0;
                if stopped {
                    t.clients.remove(&key);
                    (was, is) = (Some(o.seeder), None);
                } else {
                    if let Some(p) = t.clients.get_mut(&key) {
                        refresh(p, a, now, completed);
                    }
                    (was, is) = (Some(o.seeder), Some(seeder));
                    if completed {
                        completions = 1;
                    }
                }
                if snatch_before.exists {
                    snatch = Some(SnatchWrite {
                        uploaded: up,
                        downloaded: down,
                        seedtime: if o.seeder { secs } else { 0 },
                        leechtime: if o.seeder { 0 } else { secs },
                        leech_time_no_seeder: if no_seeder { secs } else { 0 },
                        to_go: left,
                        last_action: now,
                        completed_at: (completed && !stopped).then_some(now),
                        ..SnatchWrite::default()
                    });
                }
            }
        }
        self.recount(&mut t, uid, was, is);
        t.torrent.times_completed = t.torrent.times_completed.saturating_add(completions);
        let (size, hr_torrent, mode) = (t.torrent.size, t.torrent.hr, t.torrent.mode);
        drop(t);
        let mut pending = self.pending.lock();
        if is.is_some() {
            pending.peers.insert((tid, uid, a.peer_id.0));
            if !pending.gone.is_empty() {
                pending.gone.remove(&(tid, uid, a.peer_id.0));
            }
        } else if was.is_some() {
            pending.peers.remove(&(tid, uid, a.peer_id.0));
            pending.gone.insert((tid, uid, a.peer_id.0));
        }
        if was != is || completions > 0 {
            let w = pending.torrents.entry(tid).or_insert_with(|| TorrentWrite {
                torrent_id: tid,
                ..TorrentWrite::default()
            });
            w.completed += completions;
            w.last_action = now;
        }
        let mut snatch_after = snatch_before;
        if let Some(mut sw) = snatch {
            snatch_after.exists = true;
            snatch_after.uploaded = snatch_after.uploaded.saturating_add(sw.uploaded);
            snatch_after.downloaded = match &sw.insert {
                Some(i) => i.downloaded,
                None => snatch_after.downloaded.saturating_add(sw.downloaded),
            };
            let entry = pending
                .snatches
                .entry((uid, tid))
                .or_insert_with(|| SnatchWrite {
                    user_id: uid,
                    torrent_id: tid,
                    ..SnatchWrite::default()
                });
            if entry.insert.is_none() {
                entry.insert = sw.insert.take();
            }
            entry.uploaded += sw.uploaded;
            entry.downloaded += sw.downloaded;
            entry.seedtime += sw.seedtime;
            entry.leechtime += sw.leechtime;
            entry.leech_time_no_seeder += sw.leech_time_no_seeder;
            entry.to_go = sw.to_go;
            entry.last_action = sw.last_action;
            entry.completed_at = entry.completed_at.or(sw.completed_at);
        }
        // Hit and run (`public/announce.php:546-593`): the snatch as read before this
        // announce's update for a known client, as written for a new one.
        let hr_snatch = if old.is_some() {
            snatch_before
        } else {
            snatch_after
        };
        let hr_on = match s.hr_mode {
            HrMode::Global => true,
            HrMode::Manual => hr_torrent,
            HrMode::Disabled => false,
        };
        if (left > 0 || completed)
            && user.class < CLASS_VIP
            && !user.is_donor(now)
            && mode.is_some()
            && hr_on
            && !snatch_after.hit_and_run
            && hr_snatch.exists
            && hr_snatch.downloaded as f64 >= size as f64 * s.hr_include_rate
        {
            snatch_after.hit_and_run = true;
            pending.hit_and_runs.push((uid, tid));
        }
        let w = pending.user(uid);
        w.last_announce_at = Some(now);
        if family != 0 && family != user.client_select {
            w.client_select = Some(family);
        }
        if user.show_client_error {
            w.show_client_error = Some(false);
        }
        if snatch_after != snatch_before || record_due {
            let mut pair = self.pairs.entry((uid, tid)).or_default();
            pair.snatch = snatch_after;
            if record_due && now >= pair.windows.recorded_until {
                pair.windows.recorded_until = now + i64::from(s.autoclean_interval_one);
                pending.recorded.insert((uid, tid), now);
            }
        }
        drop(pending);
        if family != user.client_select || user.show_client_error {
            if let Some(mut u) = self.users.get_mut(&uid) {
                u.client_select = family;
                u.show_client_error = false;
            }
        }
        // A client's first announce moves no bytes (`include/globalfunctions.php:1082-1091`).
        let (download_factor, upload_factor) = if credited {
            (f.download, f.upload)
        } else {
            (0.0, 0.0)
        };
        Ok(Admission {
            download_factor,
            upload_factor,
            // A stop too: the core's store removes the client from the swarm only when it
            // is given the announce (`A:476` deletes its `peers` row, so no one is sent it).
            listed: true,
            gets_peers: !stopped,
            warning: None,
            interval: Some(interval),
            // NexusPHP lists a member's other clients to them (`public/announce.php:282`).
            hide: Vec::new(),
        })
    }

    fn unregistered(&self, _user_id: u64, _info_hash: &InfoHash, _now: u32) {}

    /// NexusPHP's texts for the refusals the private rule makes.
    fn reason(&self, private_rule_reason: &'static str) -> &'static str {
        match private_rule_reason {
            private_rule::PASSKEY_REQUIRED => REQUIRE_PASSKEY.reason,
            private_rule::UNKNOWN_PASSKEY => {
                let s = self.settings();
                self.texts.intern(format!(
                    "Invalid passkey! Re-download the .torrent from {}",
                    base(&s)
                ))
            }
            private_rule::ACCOUNT_DISABLED => DISABLED.reason,
            private_rule::NOT_REGISTERED => NOT_REGISTERED.reason,
            private_rule::CANNOT_DOWNLOAD => NO_DOWNLOAD.reason,
            other => other,
        }
    }
}
