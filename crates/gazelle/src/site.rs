//! The site as shoal holds it in memory ([`Site`]): users by id and passkey, torrents by id
//! and info hash with their clients, seeder and leecher counts and freeleech tokens, the
//! deletion reasons of recently deleted torrents, the client whitelist, the interval, and
//! what waits to be written back. Loaded from the site's tables at start ([`Site::new`])
//! and on a reload ([`Site::reload`]), changed by the site's control calls (the methods
//! below, which also keep the private rule's [`Members`] in step) and by every announce
//! ([`crate::rules`]).
//!
//! # Shape
//!
//! Torrents, each with its clients, are a `DashMap` by id: an announce locks its torrent's
//! shard once, finds its client and changes the torrent's figures under that lock (Ocelot
//! holds one lock over every torrent). A torrent's clients are ordered by (user, peer id),
//! so a user's own clients are one range. What the next write takes ([`Pending`]) is one
//! mutex held for a few inserts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use shoal_proto::InfoHash as Hash;
use shoal_tracker::private::{Member, Members, Registered};

use crate::config::GazelleConfig;
use crate::model::{InfoHash, LeechType, PeerRow, SiteData, Snatch, Torrent, User};

pub use shoal_site::mysql::unix_now;

/// A user and their live counts.
#[derive(Clone, Debug)]
pub struct UserState {
    pub user: User,
    pub seeding: u32,
    pub leeching: u32,
    /// Removed by the site (`remove_user`) while clients of theirs were still listed.
    pub deleted: bool,
    /// The site asked for their announces to be logged (`trace_user`).
    pub traced: bool,
}

/// One client of one user on one torrent, as the rules keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// Announces since its first, and when the first and the last came (Unix seconds).
    pub announces: u32,
    pub first_announced: i64,
    pub last_announced: i64,
    /// Left to download at its last announce: 0 for a seeder.
    pub left: u64,
    pub seeder: bool,
    /// Whether others are sent it (a leecher whose user may not leech is not).
    pub visible: bool,
    /// Its reported totals at its last announce, and the speeds they make.
    pub uploaded: u64,
    pub upspeed: u64,
    pub downloaded: u64,
    pub downspeed: u64,
    /// Where it is reached (port 0 for a WebRTC peer) and what it calls itself.
    pub ip: IpAddr,
    pub port: u16,
    pub agent: String,
}

/// A torrent, its figures and its clients (by user, then peer id: a user's own clients
/// are one range).
#[derive(Clone, Debug)]
pub struct TorrentState {
    pub torrent: Torrent,
    pub seeders: u32,
    pub leechers: u32,
    /// When its figures were last handed to a write (Unix seconds).
    pub last_flushed: i64,
    /// Users holding a freeleech token for it.
    pub tokened: HashSet<u32>,
    pub clients: BTreeMap<(u32, [u8; 20]), Client>,
}

/// Why a torrent was deleted, for the announces that follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub torrent_id: u32,
    /// Gazelle's reason code (`reason=`), if one was given.
    pub reason: Option<i32>,
    pub at: i64,
}

/// What the next write to the site's tables takes.
#[derive(Default)]
pub(crate) struct Pending {
    /// Clients whose row changed: (torrent, user, peer id).
    pub peers: HashSet<(u32, u32, [u8; 20])>,
    /// Rows of clients no longer on their torrent (stopped, silent, their torrent
    /// deleted): written inactive.
    pub gone: HashMap<(u32, u32, [u8; 20]), PeerRow>,
    /// Torrents whose figures changed.
    pub torrents: HashSet<u32>,
    /// Snatches per torrent, and each one's row.
    pub snatched: HashMap<u32, u32>,
    pub snatches: Vec<Snatch>,
    /// What tokens saved, by (user, torrent).
    pub tokens: HashMap<(u32, u32), u64>,
}

/// Counters for the site's `report?get=stats`.
#[derive(Default)]
pub struct Counters {
    pub announces: AtomicU64,
    pub served: AtomicU64,
    pub bad_site_password: AtomicU64,
    pub bad_report_password: AtomicU64,
    pub bad_announce_key: AtomicU64,
    pub control_calls: AtomicU64,
}

/// The site in memory.
pub struct Site {
    pub(crate) config: GazelleConfig,
    members: Arc<Members>,
    pub(crate) users: DashMap<u32, UserState>,
    pub(crate) passkeys: DashMap<String, u32>,
    pub(crate) torrents: DashMap<u32, TorrentState>,
    pub(crate) ids: DashMap<InfoHash, u32>,
    pub(crate) deleted: DashMap<InfoHash, Deletion>,
    pub(crate) whitelist: RwLock<Vec<Vec<u8>>>,
    pub(crate) interval: AtomicU32,
    pub(crate) jitter: AtomicU32,
    pub(crate) pending: Mutex<Pending>,
    /// Tokens used up, "user:torrent", for the call back to the site.
    pub(crate) expired_tokens: Mutex<Vec<(u32, u32)>>,
    pub(crate) last_reap: AtomicI64,
    pub(crate) started: i64,
    pub counters: Counters,
}

/// The private rule's entry for a Gazelle user: every check is the site's own.
fn member(id: u32) -> Member {
    Member::checked_by_site(i64::from(id))
}

/// The private rule's entry for a Gazelle torrent (v1 only).
fn registered(id: u32, info_hash: InfoHash) -> Registered {
    Registered::v1_checked_by_site(i64::from(id), Hash(info_hash))
}

impl Site {
    /// The site as `data` holds it; its users and torrents registered in `members`.
    pub fn new(config: GazelleConfig, members: Arc<Members>, data: SiteData) -> Self {
        let site = Site {
            interval: AtomicU32::new(config.announce_interval),
            jitter: AtomicU32::new(config.announce_jitter),
            config,
            members,
            users: DashMap::new(),
            passkeys: DashMap::new(),
            torrents: DashMap::new(),
            ids: DashMap::new(),
            deleted: DashMap::new(),
            whitelist: RwLock::new(Vec::new()),
            pending: Mutex::new(Pending::default()),
            expired_tokens: Mutex::new(Vec::new()),
            last_reap: AtomicI64::new(unix_now()),
            started: unix_now(),
            counters: Counters::default(),
        };
        site.reload(data);
        site
    }

    /// The site's knobs.
    pub fn config(&self) -> &GazelleConfig {
        &self.config
    }

    /// Puts `data` in force as Ocelot's reload does: users and torrents not in it are
    /// removed (with their clients), the others keep their clients and counts, tokens
    /// and the whitelist are replaced.
    pub fn reload(&self, data: SiteData) {
        let users: HashSet<u32> = data.users.iter().map(|u| u.id).collect();
        let gone_users: Vec<String> = self
            .passkeys
            .iter()
            .filter(|e| !users.contains(e.value()))
            .map(|e| e.key().clone())
            .collect();
        for passkey in gone_users {
            self.remove_user(&passkey);
        }
        for u in data.users {
            self.put_user(u);
        }
        let torrents: HashSet<u32> = data.torrents.iter().map(|t| t.id).collect();
        let gone: Vec<InfoHash> = self
            .torrents
            .iter()
            .filter(|t| !torrents.contains(&t.torrent.id))
            .map(|t| t.torrent.info_hash)
            .collect();
        for hash in gone {
            self.remove_torrent(&hash);
        }
        for t in data.torrents {
            self.add_torrent(t);
        }
        for mut t in self.torrents.iter_mut() {
            t.tokened.clear();
        }
        for (user, torrent) in data.tokens {
            if let Some(mut t) = self.torrents.get_mut(&torrent) {
                t.tokened.insert(user);
            }
        }
        *self.whitelist.write() = data.whitelist;
    }

    // ----- users -----

    /// Adds a user, or updates the one with that passkey.
    pub fn put_user(&self, user: User) {
        self.members.put_user(&user.passkey, member(user.id));
        self.passkeys.insert(user.passkey.clone(), user.id);
        match self.users.get_mut(&user.id) {
            Some(mut u) => {
                u.user = user;
                u.deleted = false;
            }
            None => {
                self.users.insert(
                    user.id,
                    UserState {
                        user,
                        seeding: 0,
                        leeching: 0,
                        deleted: false,
                        traced: false,
                    },
                );
            }
        }
    }

    /// The user holding `passkey`.
    pub fn user_by_passkey(&self, passkey: &str) -> Option<UserState> {
        let id = *self.passkeys.get(passkey)?;
        self.users.get(&id).map(|u| u.clone())
    }

    /// A user by id.
    pub fn user(&self, id: u32) -> Option<UserState> {
        self.users.get(&id).map(|u| u.clone())
    }

    /// Changes what the user holding `passkey` may do; whether there is one.
    pub fn update_user(&self, passkey: &str, can_leech: bool, protected: bool) -> bool {
        let Some(id) = self.passkeys.get(passkey).map(|e| *e) else {
            return false;
        };
        match self.users.get_mut(&id) {
            Some(mut u) => {
                u.user.can_leech = can_leech;
                u.user.protected = protected;
                true
            }
            None => false,
        }
    }

    /// Marks the user holding `passkey` traced or not; whether there is one.
    pub fn trace_user(&self, passkey: &str, traced: bool) -> bool {
        let Some(id) = self.passkeys.get(passkey).map(|e| *e) else {
            return false;
        };
        self.users
            .get_mut(&id)
            .map(|mut u| u.traced = traced)
            .is_some()
    }

    /// Removes the user holding `passkey`: their announces are refused from now on and
    /// their clients are no longer sent to others. Whether there was one.
    pub fn remove_user(&self, passkey: &str) -> bool {
        let Some((_, id)) = self.passkeys.remove(passkey) else {
            return false;
        };
        self.members.remove_user(i64::from(id));
        if let Some(mut u) = self.users.get_mut(&id) {
            u.deleted = true;
        }
        true
    }

    /// Moves a user to a new passkey; whether the old one was known.
    pub fn change_passkey(&self, old: &str, new: &str) -> bool {
        let Some((_, id)) = self.passkeys.remove(old) else {
            return false;
        };
        let Some(mut u) = self.users.get_mut(&id) else {
            return false;
        };
        self.members.remove_user(i64::from(id));
        self.members.put_user(new, member(id));
        u.user.passkey = new.to_owned();
        self.passkeys.insert(new.to_owned(), id);
        true
    }

    // ----- torrents -----

    /// Adds a torrent, or changes the leech type of the one with that hash (as Ocelot's
    /// `add_torrent`, which keeps a known torrent's id).
    pub fn add_torrent(&self, t: Torrent) {
        self.deleted.remove(&t.info_hash);
        if let Some(id) = self.ids.get(&t.info_hash).map(|e| *e) {
            if let Some(mut state) = self.torrents.get_mut(&id) {
                state.torrent.leech_type = t.leech_type;
                return;
            }
        }
        self.members.put_torrent(registered(t.id, t.info_hash));
        self.ids.insert(t.info_hash, t.id);
        self.torrents.insert(
            t.id,
            TorrentState {
                torrent: t,
                clients: BTreeMap::new(),
                seeders: 0,
                leechers: 0,
                tokened: HashSet::new(),
                last_flushed: 0,
            },
        );
    }

    /// Changes a torrent's leech type; whether it is known.
    pub fn set_leech_type(&self, info_hash: &InfoHash, leech_type: LeechType) -> bool {
        let Some(id) = self.ids.get(info_hash).map(|e| *e) else {
            return false;
        };
        self.torrents
            .get_mut(&id)
            .map(|mut t| t.torrent.leech_type = leech_type)
            .is_some()
    }

    /// A freeleech token of `user` on the torrent, added or removed; whether the torrent
    /// is known.
    pub fn edit_token(&self, info_hash: &InfoHash, user: u32, add: bool) -> bool {
        let Some(id) = self.ids.get(info_hash).map(|e| *e) else {
            return false;
        };
        let Some(mut t) = self.torrents.get_mut(&id) else {
            return false;
        };
        if add {
            t.tokened.insert(user);
        } else {
            t.tokened.remove(&user);
        }
        true
    }

    /// Deletes a torrent: its clients go (their rows written inactive, their users'
    /// counts down), and announces of its hash hear `reason` for `del_reason_lifetime`.
    /// Whether it was known.
    pub fn delete_torrent(&self, info_hash: &InfoHash, reason: Option<i32>) -> bool {
        let Some(id) = self.remove_torrent(info_hash) else {
            return false;
        };
        self.deleted.insert(
            *info_hash,
            Deletion {
                torrent_id: id,
                reason,
                at: unix_now(),
            },
        );
        // Kept registered, so that the rules see its announces and name the reason.
        self.members.put_torrent(registered(id, *info_hash));
        true
    }

    /// Removes a torrent and its clients; its id if it was known.
    fn remove_torrent(&self, info_hash: &InfoHash) -> Option<u32> {
        let (_, id) = self.ids.remove(info_hash)?;
        self.members.remove_torrent(&Hash(*info_hash));
        let (_, state) = self.torrents.remove(&id)?;
        let now = unix_now();
        let mut pending = self.pending.lock();
        for ((user, peer_id), c) in &state.clients {
            self.count_user(*user, c.seeder, -1);
            let row = self.row(id, *user, *peer_id, c, false, now);
            pending.peers.remove(&(id, *user, *peer_id));
            pending.gone.insert((id, *user, *peer_id), row);
        }
        Some(id)
    }

    /// A torrent and its clients now.
    pub fn torrent(&self, info_hash: &InfoHash) -> Option<TorrentState> {
        let id = *self.ids.get(info_hash)?;
        self.torrents.get(&id).map(|t| t.clone())
    }

    // ----- the whitelist and the interval -----

    /// Adds a peer-id prefix to the whitelist.
    pub fn add_whitelist(&self, prefix: &[u8]) {
        self.whitelist.write().push(prefix.to_vec());
    }

    /// Removes a peer-id prefix from the whitelist (its first entry); whether it was there.
    pub fn remove_whitelist(&self, prefix: &[u8]) -> bool {
        let mut list = self.whitelist.write();
        match list.iter().position(|p| p == prefix) {
            Some(i) => {
                list.remove(i);
                true
            }
            None => false,
        }
    }

    /// The whitelist now.
    pub fn whitelist(&self) -> Vec<Vec<u8>> {
        self.whitelist.read().clone()
    }

    /// Sets the announce interval (seconds).
    pub fn set_interval(&self, seconds: u32) {
        self.interval.store(seconds, Ordering::Relaxed);
    }

    /// Sets the announce jitter (seconds).
    pub fn set_jitter(&self, seconds: u32) {
        self.jitter.store(seconds, Ordering::Relaxed);
    }

    /// (interval, jitter) now.
    pub fn interval(&self) -> (u32, u32) {
        (
            self.interval.load(Ordering::Relaxed),
            self.jitter.load(Ordering::Relaxed),
        )
    }

    // ----- helpers of the rules and the writes -----

    /// Moves a user's seeding or leeching count by `by`.
    pub(crate) fn count_user(&self, user: u32, seeder: bool, by: i32) {
        if let Some(mut u) = self.users.get_mut(&user) {
            let count = if seeder {
                &mut u.seeding
            } else {
                &mut u.leeching
            };
            *count = count.saturating_add_signed(by);
        }
    }

    /// A client's `xbt_files_users` row.
    pub(crate) fn row(
        &self,
        torrent_id: u32,
        user_id: u32,
        peer_id: [u8; 20],
        c: &Client,
        active: bool,
        now: i64,
    ) -> PeerRow {
        let protected = self.users.get(&user_id).is_none_or(|u| u.user.protected);
        PeerRow {
            user_id,
            torrent_id,
            peer_id,
            active,
            uploaded: c.uploaded,
            downloaded: c.downloaded,
            remaining: c.left,
            corrupt: 0,
            upspeed: c.upspeed,
            downspeed: c.downspeed,
            timespent: u64::try_from(c.last_announced.max(now) - c.first_announced).unwrap_or(0),
            announced: c.announces,
            ip: (!protected).then_some(c.ip),
            useragent: c.agent.clone(),
            mtime: c.last_announced,
        }
    }

    /// Counts: (users, torrents, clients, seeders, leechers).
    pub fn counts(&self) -> (usize, usize, usize, u64, u64) {
        let (mut clients, mut seeders, mut leechers) = (0, 0u64, 0u64);
        for t in self.torrents.iter() {
            clients += t.clients.len();
            seeders += u64::from(t.seeders);
            leechers += u64::from(t.leechers);
        }
        (
            self.passkeys.len(),
            self.torrents.len(),
            clients,
            seeders,
            leechers,
        )
    }

    /// Unregisters a deleted torrent whose reason is forgotten.
    pub(crate) fn members_remove_torrent(&self, hash: &Hash) {
        self.members.remove_torrent(hash);
    }

    /// Every user and torrent the private rule should know (deleted torrents whose reason
    /// is still told included), as shoal's own model names them.
    pub fn loaded(&self) -> shoal_accounts::Loaded {
        let users = self
            .passkeys
            .iter()
            .map(|e| shoal_accounts::User::new(i64::from(*e.value()), e.key().clone()))
            .collect();
        let live = self.ids.iter().map(|e| (*e.value(), *e.key()));
        let deleted = self.deleted.iter().map(|d| (d.torrent_id, *d.key()));
        let torrents = live
            .chain(deleted)
            .map(|(id, hash)| shoal_accounts::Torrent::new(Some(i64::from(id)), hash))
            .collect();
        shoal_accounts::Loaded {
            users,
            torrents,
            clients: Vec::new(),
        }
    }

    /// Takes the tokens used up since the last call (for the call back to the site).
    pub fn take_expired_tokens(&self) -> Vec<(u32, u32)> {
        std::mem::take(&mut *self.expired_tokens.lock())
    }
}
