//! What one write to the site's tables holds ([`Batch`]), assembled from the core's
//! accounting and the site's pending changes, and put back when the write fails.
//!
//! The core's ledger counts what each (user, torrent) moved since the last write (credited
//! and actual bytes, seeding time, the snatch); the site knows each client's latest state
//! (its row in `peers`, and the reported totals, seeder and active flags its `history` row
//! shows) and the torrents' figures. A batch joins the two: one `history` row per (user,
//! torrent) with either, one `peers` row per client that announced, the users' credited
//! sums, the torrents' figures now and their balance.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use shoal_accounts::Delta;

use crate::model::{Batch, HistoryUpdate, Peer, TorrentUpdate, UserUpdate};
use crate::site::{unix_now, Pending, Site, TorrentState};

impl Site {
    /// Takes everything pending, with the ledger's `sums`, as one batch.
    pub fn take_batch(&self, sums: &[Delta]) -> Batch {
        let pending = std::mem::take(&mut *self.pending.lock());
        let now = unix_now();
        let mut batch = Batch::default();
        let mut history: HashMap<(u32, u32), HistoryUpdate> = HashMap::new();
        let mut balance: HashMap<u32, i64> = HashMap::new();
        for key in &pending.peers {
            let (tid, user, peer_id) = *key;
            let Some(t) = self.torrents.get(&tid) else {
                continue;
            };
            let Some(p) = t.clients.get(&(user, peer_id)) else {
                continue;
            };
            batch.peers.push(p.clone());
            let h = history.entry((user, tid)).or_insert_with(|| HistoryUpdate {
                user_id: user,
                torrent_id: tid,
                ..HistoryUpdate::default()
            });
            // The client that announced last speaks for the row.
            if p.updated_at >= h.updated_at {
                speak_for(h, p, &t);
            }
        }
        let from_clients: HashSet<(u32, u32)> = history.keys().copied().collect();
        let mut users: HashMap<u32, UserUpdate> = HashMap::new();
        for d in sums {
            let Ok(tid) = u32::try_from(d.torrent_id) else {
                continue;
            };
            let user = d.user_id as u32;
            let h = history.entry((user, tid)).or_insert_with(|| HistoryUpdate {
                user_id: user,
                torrent_id: tid,
                updated_at: now,
                ..HistoryUpdate::default()
            });
            h.credited_uploaded += d.uploaded;
            h.actual_uploaded += d.uploaded_raw;
            h.credited_downloaded += d.downloaded;
            h.actual_downloaded += d.downloaded_raw;
            h.seedtime += d.seed_seconds;
            if let Some(at) = d.completed_unix().filter(|_| d.completed) {
                h.completed_at = Some(h.completed_at.map_or(at as i64, |c| c.min(at as i64)));
            }
            let u = users.entry(user).or_insert_with(|| UserUpdate {
                user_id: user,
                ..UserUpdate::default()
            });
            u.uploaded += d.uploaded;
            u.downloaded += d.downloaded;
            *balance.entry(tid).or_default() += d.uploaded_raw as i64 - d.downloaded_raw as i64;
        }
        for h in history.values_mut() {
            h.immune = self.immune(h.user_id);
            if !from_clients.contains(&(h.user_id, h.torrent_id)) {
                self.latest_client_speaks(h);
            }
        }
        batch.history = history.into_values().collect();
        batch.users = users
            .into_values()
            .filter(|u| u.uploaded != 0 || u.downloaded != 0)
            .collect();
        let mut touched = pending.torrents;
        touched.extend(balance.keys().copied());
        for tid in touched {
            if let Some(t) = self.torrents.get(&tid) {
                batch.torrents.push(TorrentUpdate {
                    torrent_id: tid,
                    seeders: t.torrent.seeders,
                    leechers: t.torrent.leechers,
                    times_completed: t.torrent.times_completed,
                    balance: balance.get(&tid).copied().unwrap_or(0),
                });
            }
        }
        batch.peer_deletions = pending.deletions.into_iter().collect();
        batch.unregistered = pending
            .unregistered
            .into_iter()
            .map(|((user_id, info_hash), at)| crate::model::Unregistered {
                user_id,
                info_hash,
                at,
            })
            .collect();
        // Each table's rows in the order of its unique key: the server writes its index
        // pages in order rather than at random (NexusPHP mode's rows went in twice as fast
        // sorted, on the same MariaDB).
        batch
            .peers
            .sort_unstable_by_key(|p| (p.user_id, p.torrent_id, p.peer_id));
        batch
            .history
            .sort_unstable_by_key(|h| (h.user_id, h.torrent_id));
        batch.users.sort_unstable_by_key(|u| u.user_id);
        batch.torrents.sort_unstable_by_key(|t| t.torrent_id);
        batch.peer_deletions.sort_unstable();
        batch
            .unregistered
            .sort_unstable_by_key(|u| (u.info_hash, u.user_id));
        batch
    }

    /// Puts back what a failed write took (the ledger's sums go back through the ledger):
    /// the clients, torrents, deletions and unregistered hashes are marked pending again,
    /// to be written with their state at the next write.
    pub fn put_back(&self, batch: &Batch) {
        let mut pending = self.pending.lock();
        for p in &batch.peers {
            pending.peers.insert((p.torrent_id, p.user_id, p.peer_id));
        }
        pending
            .torrents
            .extend(batch.torrents.iter().map(|t| t.torrent_id));
        pending
            .deletions
            .extend(batch.peer_deletions.iter().copied());
        for u in &batch.unregistered {
            pending
                .unregistered
                .entry((u.user_id, u.info_hash))
                .or_insert(u.at);
        }
    }

    /// The row's client state (agent, reported totals, seeder, active) for sums whose
    /// clients are not in this batch: the row is replaced on these columns, so they must
    /// not go blank. That happens when the clients went with another batch: after a failed
    /// write the flush writes the failed batch's sums again first, and that write takes
    /// every client pending, so the sums of the announces made meanwhile come next without
    /// them. The user's client on the torrent that announced last speaks for the row, as
    /// in a batch with clients.
    fn latest_client_speaks(&self, h: &mut HistoryUpdate) {
        let Some(t) = self.torrents.get(&h.torrent_id) else {
            return;
        };
        let latest = t
            .clients
            .iter()
            .filter(|((user, _), _)| *user == h.user_id)
            .map(|(_, p)| p)
            .max_by_key(|p| p.updated_at);
        if let Some(p) = latest {
            speak_for(h, p, &t);
        }
    }

    /// Whether the user's group is immune (their history rows are exempt from
    /// hit-and-run).
    fn immune(&self, user: u32) -> bool {
        let Some(group) = self.users.get(&user).map(|u| u.user.group_id) else {
            return false;
        };
        self.groups.read().get(&group).is_some_and(|g| g.is_immune)
    }

    /// Sweeps silent peers ([`Site::expire`]) when `peer_expiry_interval` has passed since
    /// the last sweep (the writer asks before every write).
    pub fn sweep_if_due(&self, now: i64) {
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now - last >= self.config.peer_expiry_interval as i64
            && self
                .last_sweep
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.expire(now);
        }
    }

    /// The periodic sweep: clients silent for `active_peer_ttl` become inactive (no longer
    /// counted), those silent for `inactive_peer_ttl` are forgotten and their rows deleted.
    pub fn expire(&self, now: i64) {
        let (active, inactive) = (
            self.config.active_peer_ttl as i64,
            self.config.inactive_peer_ttl as i64,
        );
        let mut changes: Vec<(u32, i32, i32)> = Vec::new();
        let mut pending = Pending::default();
        for mut t in self.torrents.iter_mut() {
            let tid = t.torrent.id;
            let (mut seeders, mut leechers) = (0i32, 0i32);
            let state = &mut *t;
            state.clients.retain(|(user, peer_id), p| {
                let silent = now - p.updated_at;
                if p.active && silent >= active {
                    if p.visible {
                        let (s, l) = if p.seeder { (1, 0) } else { (0, 1) };
                        seeders += s;
                        leechers += l;
                        changes.push((*user, -s, -l));
                    }
                    p.active = false;
                    pending.peers.insert((tid, *user, *peer_id));
                }
                if silent >= inactive {
                    pending.peers.remove(&(tid, *user, *peer_id));
                    pending.deletions.insert((tid, *user, *peer_id));
                    return false;
                }
                true
            });
            let TorrentState {
                clients, completed, ..
            } = state;
            completed.retain(|key| clients.contains_key(key));
            if seeders != 0 || leechers != 0 {
                let tt = &mut t.torrent;
                tt.seeders = tt.seeders.saturating_add_signed(-seeders);
                tt.leechers = tt.leechers.saturating_add_signed(-leechers);
                pending.torrents.insert(tid);
            }
        }
        for (user, s, l) in changes {
            if let Some(mut u) = self.users.get_mut(&user) {
                u.user.num_seeding = u.user.num_seeding.saturating_add_signed(s);
                u.user.num_leeching = u.user.num_leeching.saturating_add_signed(l);
            }
        }
        let mut p = self.pending.lock();
        p.peers.extend(pending.peers);
        p.deletions.extend(pending.deletions);
        p.torrents.extend(pending.torrents);
    }
}

/// The client's state, as its (user, torrent) `history` row shows it. The row stays
/// active while the user has another active client on the torrent: one client's `stopped`
/// does not end the user's seeding there (UNIT3D-Announce v0.3, `src/announce.rs`
/// `is_active_after_stop`).
fn speak_for(h: &mut HistoryUpdate, p: &Peer, t: &TorrentState) {
    h.agent.clone_from(&p.agent);
    h.client_uploaded = p.uploaded;
    h.client_downloaded = p.downloaded;
    h.seeder = p.seeder;
    h.active = p.active
        || t.clients
            .range((p.user_id, [0; 20])..=(p.user_id, [0xff; 20]))
            .any(|(_, other)| other.active);
    h.updated_at = p.updated_at;
}
