//! What one write to the site's tables holds ([`Batch`]), assembled from the core's
//! accounting and the site's pending changes, and put back when the write fails; and the
//! reaper, which drops silent clients and old deletion reasons.
//!
//! The core's ledger counts what each (user, torrent) moved since the last write, factors
//! applied (`users_leech_stats`) and as reported (the torrents' balance); the site knows
//! each client's latest state (`xbt_files_users`), the torrents' seeders and leechers, the
//! snatches and what tokens saved.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use shoal_accounts::Delta;
use shoal_proto::InfoHash as Hash;

use crate::model::{Batch, TokenUse, TorrentFigures, UserGain};
use crate::site::{Pending, Site};

impl Site {
    /// Takes everything pending, with the ledger's `sums`, as one batch.
    pub fn take_batch(&self, sums: &[Delta]) -> Batch {
        let pending = std::mem::take(&mut *self.pending.lock());
        let mut batch = Batch::default();
        for (tid, user, peer_id) in &pending.peers {
            let Some(t) = self.torrents.get(tid) else {
                continue;
            };
            if let Some(c) = t.clients.get(&(*user, *peer_id)) {
                batch
                    .peers
                    .push(self.row(*tid, *user, *peer_id, c, true, c.last_announced));
            }
        }
        batch.peers.extend(pending.gone.into_values());
        let mut users: HashMap<u32, UserGain> = HashMap::new();
        let mut balance: HashMap<u32, i64> = HashMap::new();
        for d in sums {
            let Ok(tid) = u32::try_from(d.torrent_id) else {
                continue;
            };
            let user = u32::try_from(d.user_id).unwrap_or(u32::MAX);
            let gain = users.entry(user).or_insert_with(|| UserGain {
                user_id: user,
                ..UserGain::default()
            });
            gain.uploaded = gain.uploaded.saturating_add(d.uploaded);
            gain.downloaded = gain.downloaded.saturating_add(d.downloaded);
            let moved = i64::try_from(d.uploaded_raw).unwrap_or(i64::MAX)
                - i64::try_from(d.downloaded_raw).unwrap_or(i64::MAX);
            let b = balance.entry(tid).or_default();
            *b = b.saturating_add(moved);
        }
        // Every torrent whose figures, balance or snatches changed.
        let mut touched: HashSet<u32> = (balance.keys().chain(pending.snatched.keys()))
            .copied()
            .collect();
        touched.extend(pending.torrents);
        for tid in touched {
            let (seeders, leechers) = match self.torrents.get(&tid) {
                Some(t) => (t.seeders, t.leechers),
                // Deleted since: its swarm is gone.
                None => (0, 0),
            };
            batch.torrents.push(TorrentFigures {
                torrent_id: tid,
                seeders,
                leechers,
                snatched: pending.snatched.get(&tid).copied().unwrap_or(0),
                balance: balance.get(&tid).copied().unwrap_or(0),
            });
        }
        batch.users = Vec::from_iter(
            users
                .into_values()
                .filter(|gain| gain.uploaded > 0 || gain.downloaded > 0),
        );
        batch.snatches = pending.snatches;
        batch.tokens = pending
            .tokens
            .into_iter()
            .map(|((user_id, torrent_id), downloaded)| TokenUse {
                user_id,
                torrent_id,
                downloaded,
            })
            .collect();
        batch
    }

    /// Puts back what a failed write took (the ledger's sums go back through the ledger):
    /// clients and torrents are marked pending again (written with their state at the
    /// next write), snatches, token uses and the rows of clients gone are kept as they
    /// were.
    pub fn put_back(&self, batch: &Batch) {
        let mut p = self.pending.lock();
        let (live, gone): (Vec<_>, Vec<_>) = batch.peers.iter().partition(|row| row.active);
        p.peers
            .extend(live.iter().map(|r| (r.torrent_id, r.user_id, r.peer_id)));
        for row in gone {
            let key = (row.torrent_id, row.user_id, row.peer_id);
            p.gone.entry(key).or_insert_with(|| row.clone());
        }
        p.torrents
            .extend(batch.torrents.iter().map(|t| t.torrent_id));
        for t in batch.torrents.iter().filter(|t| t.snatched > 0) {
            *p.snatched.entry(t.torrent_id).or_default() += t.snatched;
        }
        p.snatches.extend_from_slice(&batch.snatches);
        for u in &batch.tokens {
            *p.tokens.entry((u.user_id, u.torrent_id)).or_default() += u.downloaded;
        }
    }

    /// Reaps ([`Site::reap`]) when `reap_peers_interval` has passed since the last time.
    pub fn reap_if_due(&self, now: i64) {
        let last = self.last_reap.load(Ordering::Relaxed);
        let every = i64::try_from(self.config.reap_peers_interval).unwrap_or(i64::MAX);
        if now.saturating_sub(last) >= every
            && self
                .last_reap
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.reap(now);
        }
    }

    /// Drops the clients silent for `peers_timeout` (their rows written inactive, their
    /// torrents' and users' counts down) and forgets deletion reasons older than
    /// `del_reason_lifetime` (their torrents no longer registered).
    pub fn reap(&self, now: i64) {
        let timeout = i64::try_from(self.config.peers_timeout).unwrap_or(i64::MAX);
        let mut gone = Pending::default();
        let mut users: Vec<(u32, bool)> = Vec::new();
        for mut t in self.torrents.iter_mut() {
            let tid = t.torrent.id;
            let silent: Vec<_> = t
                .clients
                .iter()
                .filter(|(_, c)| c.last_announced.saturating_add(timeout) < now)
                .map(|(k, _)| *k)
                .collect();
            for key in silent {
                let Some(c) = t.clients.remove(&key) else {
                    continue;
                };
                if c.seeder {
                    t.seeders = t.seeders.saturating_sub(1);
                } else {
                    t.leechers = t.leechers.saturating_sub(1);
                }
                users.push((key.0, c.seeder));
                let row = self.row(tid, key.0, key.1, &c, false, c.last_announced);
                gone.gone.insert((tid, key.0, key.1), row);
                gone.torrents.insert(tid);
            }
        }
        for (user, seeder) in users {
            self.count_user(user, seeder, -1);
        }
        {
            let mut pending = self.pending.lock();
            for key in gone.gone.keys() {
                pending.peers.remove(key);
            }
            pending.gone.extend(gone.gone);
            pending.torrents.extend(gone.torrents);
        }
        let lifetime = i64::try_from(self.config.del_reason_lifetime).unwrap_or(i64::MAX);
        let old: Vec<_> = self
            .deleted
            .iter()
            .filter(|d| now.saturating_sub(d.at) >= lifetime)
            .map(|d| *d.key())
            .collect();
        for hash in old {
            self.deleted.remove(&hash);
            if !self.ids.contains_key(&hash) {
                self.members_remove_torrent(&Hash(hash));
            }
        }
    }
}
