//! Who may use a private tracker, in memory: users by passkey, registered torrents by info
//! hash (a hybrid torrent's v2 hash pointing at its v1 entry), and the allowed client
//! prefixes. This is what the announce path reads instead of the database.
//!
//! # Shape
//!
//! Every announce of every front end reads these tables, from every worker thread, while
//! the admin API edits them now and then. So the two tables the announce path reads (users
//! by passkey, torrents by info hash) are `papaya` maps, whose reads take no lock and write
//! no shared memory: a `DashMap` read takes its shard's read lock, a locked write to a cache
//! line that every worker's lookups share, so with several workers a lookup often waits for
//! that line to come over from another core. The price is one more dependent load (a
//! `papaya` entry is boxed). Measured against `DashMap`s, private mode's UDP announces per
//! tracker CPU-second: 1.02x medians (1.10x round by round) on 16 cores with 4 workers,
//! 1.06x (1.00x) on the 2-core VM with one
//! (`docs/benchmarks/private-udp/2026-11-26-16core-papaya/`). Edits of one user or torrent
//! never stop the others. The tables are held in one [`Tables`] behind an `ArcSwap` so that
//! a reload from the database replaces everything at once: announces see the old tables or
//! the new ones, never a half-loaded mix. Single edits change the tables in force in place.
//! Edits and reloads are serialised by the caller ([`super::accounts::Accounts`]) so that
//! an edit is never lost to a concurrent reload.
//!
//! Keys hash with the swarm store's seeded hasher: passkeys and info hashes are chosen by
//! clients, and a fixed hash would let them pile entries onto one bucket. Passkeys are kept
//! inline in their entry ([`PasskeyKey`]), not in a string of their own: comparing a boxed
//! key cost every announce one more cache miss (the heap string), seen in the private-mode
//! profile.
//!
//! # Ids
//!
//! The ledger counts per (user id, torrent id); the database writes per (user id, v1 info
//! hash). [`Members::torrent_hash`] maps an id back, and keeps mappings of torrents removed
//! since (deltas gathered before the removal are still written, to the user's totals).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use dashmap::DashMap;
use parking_lot::Mutex;
use shoal_proto::path::MAX_PASSKEY_LEN;
use shoal_proto::{InfoHash, PeerId};
use shoal_swarm::sharded::Hasher;

/// What the announce path needs of a user.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    pub id: i64,
    pub enabled: bool,
    pub can_download: bool,
    pub download_factor: f64,
    pub upload_factor: f64,
}

/// What the announce path needs of a registered torrent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Registered {
    /// The database's torrent id (the ledger's account key).
    pub id: i64,
    /// The v1 info hash: the swarm every announce of this torrent joins, under either hash.
    pub swarm: InfoHash,
    /// The truncated v2 info hash, for a hybrid or v2 torrent.
    pub v2: Option<InfoHash>,
    pub download_factor: f64,
    pub upload_factor: f64,
}

impl Member {
    /// A member of a site whose rules make every check themselves (a site schema's
    /// `SiteRules`): enabled, may download, factors 1.
    pub fn checked_by_site(id: i64) -> Member {
        Member {
            id,
            enabled: true,
            can_download: true,
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }
}

impl Registered {
    /// A v1 torrent of a site whose rules set the factors per announce: factors 1.
    pub fn v1_checked_by_site(id: i64, swarm: InfoHash) -> Registered {
        Registered {
            id,
            swarm,
            v2: None,
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }
}

/// A passkey as a table key: its bytes inline (passkeys are at most [`MAX_PASSKEY_LEN`]
/// bytes, checked where they are parsed and where they are registered), so that a look-up
/// compares in the table's own memory. It hashes and compares as the byte string it holds,
/// so the table is searched with a plain `&[u8]`.
#[derive(Clone, Copy)]
struct PasskeyKey {
    len: u8,
    bytes: [u8; MAX_PASSKEY_LEN],
}

impl PasskeyKey {
    /// The key of `passkey`; `None` if it is longer than any passkey can be.
    fn of(passkey: &str) -> Option<Self> {
        let b = passkey.as_bytes();
        let mut bytes = [0; MAX_PASSKEY_LEN];
        bytes.get_mut(..b.len())?.copy_from_slice(b);
        Some(Self {
            len: b.len() as u8,
            bytes,
        })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Borrow<[u8]> for PasskeyKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for PasskeyKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As the borrowed form hashes: the table is searched by `&[u8]`.
        self.as_bytes().hash(state);
    }
}

impl PartialEq for PasskeyKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for PasskeyKey {}

/// One generation of the user and torrent tables (replaced whole by a reload).
#[derive(Default)]
struct Tables {
    /// By passkey.
    users: papaya::HashMap<PasskeyKey, Member, Hasher>,
    /// Passkey by user id, to find a user's old key when it changes or the user goes.
    keys: DashMap<i64, Box<str>, Hasher>,
    /// By v1 hash and, for hybrid torrents, by v2 hash too. Changed only through
    /// [`Tables::insert_torrent_key`] and [`Tables::remove_torrent_key`], which keep
    /// `aliases` right.
    torrents: papaya::HashMap<InfoHash, Registered, Hasher>,
    /// Keys of `torrents` that are a torrent's v2 alias (not its swarm): the registered
    /// torrents are `torrents.len() - aliases`, counted without a walk over the table
    /// (the admin API publishes the count after every change: a walk made registering n
    /// torrents cost n² steps).
    aliases: AtomicUsize,
}

/// Allowed peer-id prefixes (bytes), sorted.
type Clients = Vec<Box<[u8]>>;

/// Everything the site's database holds for the tables, as its loader hands it over.
#[derive(Clone, Debug, Default)]
pub struct Roster {
    /// Users with their passkeys.
    pub users: Vec<(Box<str>, Member)>,
    pub torrents: Vec<Registered>,
    /// Allowed peer-id prefixes.
    pub clients: Vec<Box<[u8]>>,
}

fn clients_of(roster: &Roster) -> Clients {
    let mut clients: Clients = roster.clients.clone();
    clients.sort();
    clients
}

impl Tables {
    fn from_roster(loaded: &Roster) -> Self {
        // Sized up front: a reload of a million torrents then never copies a table while
        // it grows (hybrids add their v2 hash as one more key).
        let torrent_keys =
            loaded.torrents.len() + loaded.torrents.iter().filter(|t| t.v2.is_some()).count();
        let t = Tables {
            users: papaya::HashMap::with_capacity_and_hasher(loaded.users.len(), Hasher::default()),
            torrents: papaya::HashMap::with_capacity_and_hasher(torrent_keys, Hasher::default()),
            ..Tables::default()
        };
        for (passkey, member) in &loaded.users {
            t.put_user(passkey, *member);
        }
        for torrent in &loaded.torrents {
            t.put_torrent(*torrent);
        }
        t
    }

    fn put_user(&self, passkey: &str, member: Member) {
        if let Some(old) = self.keys.insert(member.id, passkey.into()) {
            if &*old != passkey {
                self.users.pin().remove(old.as_bytes());
            }
        }
        // A key longer than any announce can present (a site wrote it into the database
        // itself; the admin API refuses it) could never be matched: it is not kept.
        if let Some(key) = PasskeyKey::of(passkey) {
            self.users.pin().insert(key, member);
        }
    }

    fn remove_user(&self, id: i64) -> bool {
        match self.keys.remove(&id) {
            Some((_, key)) => {
                self.users.pin().remove(key.as_bytes());
                true
            }
            None => false,
        }
    }

    fn put_torrent(&self, t: Registered) {
        let old = self.torrents.pin().get(&t.swarm).copied();
        if let Some(old) = old {
            if let Some(old_v2) = old.v2.filter(|h| Some(*h) != t.v2) {
                self.remove_torrent_key(&old_v2);
            }
        }
        self.insert_torrent_key(t.swarm, t);
        if let Some(v2) = t.v2 {
            self.insert_torrent_key(v2, t);
        }
    }

    fn remove_torrent(&self, swarm: &InfoHash) -> bool {
        match self.remove_torrent_key(swarm) {
            Some(t) => {
                if let Some(v2) = t.v2 {
                    self.remove_torrent_key(&v2);
                }
                true
            }
            None => false,
        }
    }

    fn insert_torrent_key(&self, key: InfoHash, t: Registered) {
        let old = self.torrents.pin().insert(key, t).copied();
        if let Some(old) = old {
            if old.swarm != key {
                self.aliases.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if t.swarm != key {
            self.aliases.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn remove_torrent_key(&self, key: &InfoHash) -> Option<Registered> {
        let old = self.torrents.pin().remove(key).copied()?;
        if old.swarm != *key {
            self.aliases.fetch_sub(1, Ordering::Relaxed);
        }
        Some(old)
    }

    /// Registered torrents (v1 hashes, or v2 hashes of v2-only torrents).
    fn registered(&self) -> usize {
        self.torrents
            .len()
            .saturating_sub(self.aliases.load(Ordering::Relaxed))
    }
}

/// The users, torrents and client prefixes in force.
pub struct Members {
    tables: ArcSwap<Tables>,
    clients: ArcSwap<Clients>,
    /// Whether peer ids must start with a listed prefix (`private.client_allow_list`).
    client_allow_list: bool,
    /// v1 hash by torrent id, for every torrent registered since start (see the module docs).
    ids: Mutex<HashMap<i64, InfoHash>>,
}

impl Members {
    /// The tables for `loaded`.
    pub fn new(loaded: &Roster, client_allow_list: bool) -> Self {
        let m = Self {
            tables: ArcSwap::from_pointee(Tables::default()),
            clients: ArcSwap::from_pointee(Clients::new()),
            client_allow_list,
            ids: Mutex::new(HashMap::new()),
        };
        m.replace(loaded);
        m
    }

    /// Replaces every table with `loaded` (a reload from the database).
    pub fn replace(&self, loaded: &Roster) {
        self.remember_ids(loaded.torrents.iter().copied());
        self.tables.store(Arc::new(Tables::from_roster(loaded)));
        self.clients.store(Arc::new(clients_of(loaded)));
    }

    fn remember_ids(&self, torrents: impl Iterator<Item = Registered>) {
        let mut ids = self.ids.lock();
        for t in torrents {
            ids.insert(t.id, t.swarm);
        }
    }

    /// The user holding `passkey` and the registered torrent announced as `info_hash`, from
    /// one generation of the tables (one `ArcSwap` load for the announce path).
    #[inline]
    pub fn lookup(
        &self,
        passkey: &str,
        info_hash: &InfoHash,
    ) -> (Option<Member>, Option<Registered>) {
        let tables = self.tables.load();
        let user = tables.users.pin().get(passkey.as_bytes()).copied();
        let torrent = user.and_then(|_| tables.torrents.pin().get(info_hash).copied());
        (user, torrent)
    }

    /// The user holding `passkey`.
    #[inline]
    pub fn user(&self, passkey: &str) -> Option<Member> {
        self.tables
            .load()
            .users
            .pin()
            .get(passkey.as_bytes())
            .copied()
    }

    /// The registered torrent announced as `info_hash` (its v1 or its v2 hash).
    #[inline]
    pub fn torrent(&self, info_hash: &InfoHash) -> Option<Registered> {
        self.tables.load().torrents.pin().get(info_hash).copied()
    }

    /// Whether a client with this peer id may announce.
    #[inline]
    pub fn client_allowed(&self, peer_id: &PeerId) -> bool {
        !self.client_allow_list || self.clients.load().iter().any(|p| peer_id.0.starts_with(p))
    }

    /// The user with this id and their passkey, if registered.
    pub fn user_by_id(&self, id: i64) -> Option<(String, Member)> {
        let tables = self.tables.load();
        let key = tables.keys.get(&id)?.to_string();
        let member = tables.users.pin().get(key.as_bytes()).copied()?;
        Some((key, member))
    }

    /// Adds or replaces a user (a changed passkey replaces the old one).
    pub fn put_user(&self, passkey: &str, member: Member) {
        self.tables.load().put_user(passkey, member);
    }

    /// Removes a user; whether there was one.
    pub fn remove_user(&self, id: i64) -> bool {
        self.tables.load().remove_user(id)
    }

    /// Adds or replaces a torrent.
    pub fn put_torrent(&self, t: Registered) {
        self.remember_ids(std::iter::once(t));
        self.tables.load().put_torrent(t);
    }

    /// Removes the torrent whose v1 hash is `swarm`; whether there was one.
    pub fn remove_torrent(&self, swarm: &InfoHash) -> bool {
        self.tables.load().remove_torrent(swarm)
    }

    /// Adds (`add`) or removes an allowed client prefix.
    pub fn edit_client(&self, prefix: &[u8], add: bool) {
        let bytes: Box<[u8]> = prefix.into();
        self.clients.rcu(|old| {
            let mut clients: Clients = old.iter().filter(|p| **p != bytes).cloned().collect();
            if add {
                clients.push(bytes.clone());
                clients.sort();
            }
            clients
        });
    }

    /// The v1 hash of the torrent with this id (also of a torrent removed since start).
    pub fn torrent_hash(&self, id: i64) -> Option<InfoHash> {
        self.ids.lock().get(&id).copied()
    }

    /// Users, registered torrents (v1 hashes) and client prefixes in force.
    pub fn counts(&self) -> (usize, usize, usize) {
        let t = self.tables.load();
        (t.users.len(), t.registered(), self.clients.load().len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn torrent(id: u8, v2: Option<u8>) -> Registered {
        Registered {
            id: i64::from(id),
            swarm: InfoHash([id; 20]),
            v2: v2.map(|h| InfoHash([h; 20])),
            download_factor: 1.0,
            upload_factor: 1.0,
        }
    }

    proptest! {
        /// Whatever the puts and removes (hybrids, a v2 hash changed or dropped, a v2
        /// hash that is another torrent's v1), the kept count equals a walk of the table.
        #[test]
        fn the_registered_count_matches_a_walk(
            ops in proptest::collection::vec((any::<bool>(), 0u8..8, proptest::option::of(0u8..16)), 0..64)
        ) {
            let t = Tables::default();
            for (put, id, v2) in ops {
                if put {
                    t.put_torrent(torrent(id, v2));
                } else {
                    t.remove_torrent(&InfoHash([id; 20]));
                }
                let walked = t.torrents.pin().iter().filter(|(k, v)| **k == v.swarm).count();
                prop_assert_eq!(t.registered(), walked);
            }
        }
    }
}
