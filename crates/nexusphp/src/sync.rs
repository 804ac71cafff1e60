//! Keeping the site in memory in step with the site's tables, and the batches with the
//! writes: a poll's rows put in force (members and torrents added, changed or removed,
//! with the private rule's tables beside them), a batch whose write failed merged back
//! into what waits, and the sweep of silent clients NexusPHP's cleanup does.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use shoal_tracker::private::members::{Member, Members, Registered};

use crate::agent::AllowList;
use crate::model::SiteData;
use crate::site::{Batch, Pair, Site, TorrentWrite, Windows};

/// What a poll changed, for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub users_changed: usize,
    pub users_removed: usize,
    pub torrents_changed: usize,
    pub torrents_removed: usize,
}

impl Site {
    /// Puts a read of the site's tables in force (the start's or a poll's): settings,
    /// promotions, the allow list and purchases replaced; members and torrents added,
    /// changed or removed here and in the private rule's `members`. The clients and the
    /// snatches shoal holds stay (its own are newer than the tables').
    pub fn apply(&self, data: SiteData, members: &Members) -> Applied {
        let mut applied = Applied::default();
        self.set_settings(data.settings);
        self.set_promotions(data.promotions);
        self.set_allow_list(AllowList::new(data.families, data.exceptions));
        *self.bought.write() = data.bought.into_iter().collect();
        let ids: HashSet<u32> = data.users.iter().map(|u| u.id).collect();
        for mut u in data.users {
            // What an announce set and the next batch has yet to write stands.
            if let Some(w) = self.pending.lock().users.get(&u.id) {
                u.enabled &= !w.disable;
                u.can_download &= !w.revoke_download;
                u.client_select = w.client_select.unwrap_or(u.client_select);
                u.show_client_error = w.show_client_error.unwrap_or(u.show_client_error);
            }
            let held = self.users.get(&u.id).map(|h| h.clone());
            if held.as_ref() == Some(&u) {
                continue;
            }
            members.put_user(&u.passkey, Member::checked_by_site(i64::from(u.id)));
            applied.users_changed += 1;
            self.put_user(u);
        }
        let gone: Vec<u32> = (self.users.iter())
            .map(|u| u.id)
            .filter(|id| !ids.contains(id))
            .collect();
        for id in gone {
            self.users.remove(&id);
            members.remove_user(i64::from(id));
            applied.users_removed += 1;
        }
        let ids: HashSet<u32> = data.torrents.iter().map(|t| t.id).collect();
        for t in data.torrents {
            let held = self.torrent(t.id);
            let same = held.as_ref().is_some_and(|h| {
                let mut h = h.clone();
                (h.seeders, h.leechers, h.times_completed) =
                    (t.seeders, t.leechers, t.times_completed);
                h == t
            });
            if same {
                continue;
            }
            if let Some(h) = held.filter(|h| h.info_hash != t.info_hash) {
                members.remove_torrent(&shoal_proto::InfoHash(h.info_hash));
            }
            members.put_torrent(Registered::v1_checked_by_site(
                i64::from(t.id),
                shoal_proto::InfoHash(t.info_hash),
            ));
            applied.torrents_changed += 1;
            self.put_torrent(t);
        }
        let gone: Vec<(u32, [u8; 20])> = (self.torrents.iter())
            .filter(|t| !ids.contains(t.key()))
            .map(|t| (*t.key(), t.torrent.info_hash))
            .collect();
        for (id, hash) in gone {
            self.torrents.remove(&id);
            members.remove_torrent(&shoal_proto::InfoHash(hash));
            applied.torrents_removed += 1;
        }
        applied
    }

    /// Registers every member and torrent held in the private rule's tables (at start).
    pub fn register(&self, members: &Members) {
        for u in self.users.iter() {
            members.put_user(&u.passkey, Member::checked_by_site(i64::from(u.id)));
        }
        for t in self.torrents.iter() {
            members.put_torrent(Registered::v1_checked_by_site(
                i64::from(t.torrent.id),
                shoal_proto::InfoHash(t.torrent.info_hash),
            ));
        }
    }

    /// The members' passkeys (what `peers.passkey` holds).
    pub fn passkeys(&self) -> HashMap<u32, String> {
        self.users
            .iter()
            .map(|u| (u.id, u.passkey.clone()))
            .collect()
    }

    /// Merges back a batch whose write failed: what the announces since added is newer
    /// and stays; the batch's additions are added to it.
    pub fn put_back(&self, b: Batch) {
        let mut p = self.pending.lock();
        for (tid, peer) in b.peers {
            let key = (tid, peer.user_id, peer.peer_id);
            if !p.gone.contains(&key) {
                p.peers.insert(key);
            }
        }
        for key in b.peer_deletions {
            if !p.peers.contains(&key) {
                p.gone.insert(key);
            }
        }
        for old in b.snatches {
            match p.snatches.entry((old.user_id, old.torrent_id)) {
                Entry::Vacant(v) => {
                    v.insert(old);
                }
                Entry::Occupied(mut o) => {
                    // The newer announces set `to_go` and `last_action`; the older insert
                    // is the row's first.
                    let e = o.get_mut();
                    if old.insert.is_some() {
                        e.insert = old.insert;
                    }
                    e.uploaded += old.uploaded;
                    e.downloaded += old.downloaded;
                    e.seedtime += old.seedtime;
                    e.leechtime += old.leechtime;
                    e.leech_time_no_seeder += old.leech_time_no_seeder;
                    e.completed_at = old.completed_at.or(e.completed_at);
                }
            }
        }
        for old in b.torrents {
            let e = p.torrents.entry(old.torrent_id).or_insert(TorrentWrite {
                completed: 0,
                ..old.clone()
            });
            e.completed += old.completed;
            e.last_action = e.last_action.max(old.last_action);
        }
        for old in b.users {
            let e = p.user(old.user_id);
            e.last_announce_at = e.last_announce_at.or(old.last_announce_at);
            e.client_select = e.client_select.or(old.client_select);
            e.show_client_error = e.show_client_error.or(old.show_client_error);
            e.disable |= old.disable;
            e.revoke_download |= old.revoke_download;
        }
        let mut cheaters = b.cheaters;
        cheaters.append(&mut p.cheaters);
        p.cheaters = cheaters;
        let mut hrs = b.hit_and_runs;
        hrs.append(&mut p.hit_and_runs);
        p.hit_and_runs = hrs;
        drop(p);
        self.put_back_records(b.recorded);
    }

    /// Puts back the cleanup's records that were not written (the database's or Redis's
    /// write failed): the next batch writes them. A newer record of the same (member,
    /// torrent) stands for both.
    pub fn put_back_records(&self, records: Vec<(u32, u32, i64)>) {
        let mut p = self.pending.lock();
        for (uid, tid, at) in records {
            let e = p.recorded.entry((uid, tid)).or_insert(at);
            *e = (*e).max(at);
        }
    }

    /// Drops the clients silent for longer than NexusPHP's cleanup keeps them (1.3 x
    /// `main.anninterthree`, `include/cleanup.php:299`), their rows deleted with the next
    /// batch and their torrents' counts written; and the windows of (member, torrent) pairs
    /// whose every deadline has passed, as NexusPHP's Redis keys expire (`A:42-66`,
    /// `:631`), so that they hold the pairs of the last `main.autoclean_interval_one`.
    pub fn sweep(&self, now: i64) -> usize {
        self.pairs.retain(|_, p| {
            let w = p.windows;
            if w.repeat_until.max(w.frequent_until).max(w.recorded_until) <= now {
                p.windows = Windows::default();
            }
            *p != Pair::default()
        });
        let timeout = (f64::from(self.settings().anninterthree) * 1.3) as i64;
        let cutoff = now - timeout;
        let mut swept = Vec::new();
        for mut t in self.torrents.iter_mut() {
            let tid = *t.key();
            let silent: Vec<_> = (t.clients.iter())
                .filter(|(_, p)| p.last_action < cutoff)
                .map(|(k, p)| (*k, p.seeder))
                .collect();
            for ((uid, pid), seeder) in silent {
                t.clients.remove(&(uid, pid));
                if seeder {
                    t.torrent.seeders = t.torrent.seeders.saturating_sub(1);
                } else {
                    t.torrent.leechers = t.torrent.leechers.saturating_sub(1);
                    if let Some(mut n) = self.leeching.get_mut(&uid) {
                        *n = n.saturating_sub(1);
                    }
                }
                swept.push((tid, uid, pid));
            }
        }
        let n = swept.len();
        let mut p = self.pending.lock();
        for key in swept {
            p.peers.remove(&key);
            p.gone.insert(key);
            p.torrents.entry(key.0).or_insert(TorrentWrite {
                torrent_id: key.0,
                ..TorrentWrite::default()
            });
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use shoal_proto::InfoHash;
    use shoal_tracker::private::members::{Members, Roster};

    use crate::model::{Peer, SiteData, SnatchState, Torrent, User};
    use crate::site::{
        Batch, Pair, Site, SnatchInsert, SnatchWrite, TorrentWrite, UserWrite, Windows,
    };

    fn user(id: u32, passkey: &str) -> User {
        User {
            id,
            passkey: passkey.to_owned(),
            enabled: true,
            can_download: true,
            ..User::default()
        }
    }

    fn torrent(id: u32) -> Torrent {
        Torrent {
            id,
            info_hash: [id as u8; 20],
            size: 1000,
            ..Torrent::default()
        }
    }

    fn client(user_id: u32, seeder: bool, last_action: i64) -> Peer {
        Peer {
            user_id,
            peer_id: [user_id as u8; 20],
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ipv4: None,
            ipv6: None,
            port: 6000,
            uploaded: 0,
            downloaded: 0,
            left: 0,
            seeder,
            started: last_action,
            last_action,
            prev_action: None,
            agent: String::new(),
            finished_at: 0,
        }
    }

    #[test]
    fn a_poll_adds_changes_and_removes_members_and_torrents_in_both_tables() {
        let site = Site::new(SiteData {
            users: vec![user(1, "one"), user(2, "two")],
            torrents: vec![torrent(10), torrent(11)],
            ..SiteData::default()
        });
        let members = Members::new(&Roster::default(), false);
        site.register(&members);
        assert!(members.user("one").is_some() && members.torrent(&InfoHash([11; 20])).is_some());
        let applied = site.apply(
            SiteData {
                users: vec![user(1, "uno"), user(3, "three")],
                torrents: vec![torrent(10), torrent(12)],
                ..SiteData::default()
            },
            &members,
        );
        assert_eq!(
            (applied.users_changed, applied.users_removed),
            (2, 1),
            "1's passkey, 3 new; 2 gone"
        );
        assert_eq!((applied.torrents_changed, applied.torrents_removed), (1, 1));
        assert!(members.user("one").is_none() && members.user("uno").is_some());
        assert!(members.user("two").is_none() && members.user("three").is_some());
        assert!(members.torrent(&InfoHash([11; 20])).is_none());
        assert!(members.torrent(&InfoHash([12; 20])).is_some());
        assert!(site.user(2).is_none() && site.torrent(11).is_none());
        // A flag an announce set, not written yet, stands against the poll's older row.
        site.pending.lock().user(1).disable = true;
        site.apply(
            SiteData {
                users: vec![user(1, "uno")],
                ..SiteData::default()
            },
            &members,
        );
        assert!(!site.user(1).unwrap().enabled);
    }

    #[test]
    fn a_failed_batch_goes_back_under_what_came_since() {
        let site = Site::new(SiteData {
            users: vec![user(1, "one")],
            torrents: vec![torrent(10)],
            ..SiteData::default()
        });
        let insert = SnatchInsert {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 6000,
            uploaded: 5,
            downloaded: 6,
            started: 100,
        };
        let failed = Batch {
            snatches: vec![SnatchWrite {
                user_id: 1,
                torrent_id: 10,
                insert: Some(insert.clone()),
                uploaded: 10,
                to_go: 500,
                last_action: 100,
                ..SnatchWrite::default()
            }],
            torrents: vec![TorrentWrite {
                torrent_id: 10,
                completed: 1,
                last_action: 100,
                ..TorrentWrite::default()
            }],
            users: vec![UserWrite {
                user_id: 1,
                client_select: Some(3),
                last_announce_at: Some(100),
                ..UserWrite::default()
            }],
            hit_and_runs: vec![(1, 10)],
            recorded: vec![(1, 11, 90), (1, 10, 100)],
            ..Batch::default()
        };
        {
            let mut p = site.pending.lock();
            p.snatches.insert(
                (1, 10),
                SnatchWrite {
                    user_id: 1,
                    torrent_id: 10,
                    uploaded: 7,
                    to_go: 0,
                    last_action: 200,
                    completed_at: Some(200),
                    ..SnatchWrite::default()
                },
            );
            p.user(1).last_announce_at = Some(200);
            p.recorded.insert((1, 10), 200);
        }
        site.put_back(failed);
        let b = site.take_batch();
        let s = &b.snatches[0];
        assert_eq!(s.insert.as_ref(), Some(&insert), "the row is still new");
        assert_eq!((s.uploaded, s.to_go, s.last_action), (17, 0, 200));
        assert_eq!(s.completed_at, Some(200));
        assert_eq!(
            (b.torrents[0].completed, b.torrents[0].last_action),
            (1, 100)
        );
        assert_eq!(b.users[0].last_announce_at, Some(200), "the newer");
        assert_eq!(b.users[0].client_select, Some(3));
        assert_eq!(b.hit_and_runs, [(1, 10)]);
        assert_eq!(
            b.recorded,
            [(1, 11, 90), (1, 10, 200)],
            "one record per pair, the newer; oldest first"
        );
    }

    #[test]
    fn silent_clients_are_swept_as_the_cleanup_does() {
        let now = 1_800_000_000;
        let site = Site::new(SiteData {
            users: vec![user(1, "one"), user(2, "two")],
            torrents: vec![torrent(10)],
            peers: vec![
                (10, client(1, true, now - 5000)),
                (10, client(2, false, now - 60)),
            ],
            ..SiteData::default()
        });
        // 1.3 x 3600 s (`main.anninterthree`'s default).
        assert_eq!(site.sweep(now), 1);
        let b = site.take_batch();
        assert_eq!(b.peer_deletions, [(10, 1, [1; 20])]);
        assert_eq!(b.torrents.len(), 1);
        assert_eq!(site.sweep(now), 0);
    }

    #[test]
    fn expired_windows_are_dropped_by_the_sweep() {
        let snatch = SnatchState {
            exists: true,
            downloaded: 5,
            ..SnatchState::default()
        };
        let site = Site::new(SiteData {
            snatches: vec![((2, 10), snatch)],
            ..SiteData::default()
        });
        let w = |until| Windows {
            repeat_until: until,
            frequent_until: until,
            recorded_until: until,
        };
        let pair = |windows| Pair {
            windows,
            ..Pair::default()
        };
        site.pairs.insert((1, 10), pair(w(100)));
        site.pairs.insert((1, 11), pair(w(200)));
        site.pairs.get_mut(&(2, 10)).unwrap().windows = w(100);
        site.sweep(150);
        assert!(!site.pairs.contains_key(&(1, 10)), "every deadline passed");
        assert_eq!(
            site.pairs.get(&(1, 11)).unwrap().windows,
            w(200),
            "still in force"
        );
        let kept = *site.pairs.get(&(2, 10)).unwrap();
        assert_eq!(
            kept,
            Pair {
                snatch,
                ..Pair::default()
            },
            "the snatch stays, its windows gone"
        );
    }
}
