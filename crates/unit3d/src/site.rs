//! The site as shoal holds it in memory ([`Site`]): groups, users, torrents with their
//! clients, the lists (blacklisted clients, freeleech tokens, personal freeleech, featured
//! torrents), and what waits to be written back. Loaded from the site's tables at start
//! ([`Site::new`]), changed by the site's control calls (the `put_*` and `remove_*`
//! methods, which also keep the private rule's [`Members`] in step), and by every
//! announce ([`crate::rules`]).
//!
//! # Shape
//!
//! Torrents, each with its clients, are a `DashMap` by id: an announce locks its torrent's
//! shard once, finds its client and changes the torrent's figures under that lock, as
//! UNIT3D-Announce does under its one torrent lock. Users are another `DashMap` (their
//! seeding and leeching counts change with their clients); groups and the lists change
//! rarely and are read under read locks. What the next write takes ([`Pending`]) is one
//! mutex held for a set insert.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use dashmap::{DashMap, DashSet};
use parking_lot::{Mutex, RwLock};
use shoal_proto::InfoHash as Hash;
use shoal_site::ListedPeer;
use shoal_tracker::private::{Member, Members, Registered};

use crate::config::Unit3dConfig;
use crate::model::{Group, InfoHash, Peer, SiteData, Torrent, User};
use crate::rates::Rates;
use crate::stats::Stats;

/// A user and what the rules count for them.
#[derive(Clone, Debug)]
pub struct UserState {
    pub user: User,
    /// Peer lists with seeders received (sent to the user's leechers).
    pub seed_lists: Rates,
    /// Peer lists with leechers received (sent to the user's seeders).
    pub leech_lists: Rates,
}

/// A client's key on its torrent: (user id, peer id).
pub type ClientKey = (u32, [u8; 20]);

/// A torrent and its clients, ordered by (user, peer id): a user's clients on the torrent
/// are one range (the rules look at them on every announce; a walk over all the torrent's
/// clients would cost a popular torrent's every announce its whole swarm).
#[derive(Clone, Debug)]
pub struct TorrentState {
    pub torrent: Torrent,
    pub clients: BTreeMap<ClientKey, Peer>,
    /// Clients that announced `completed` since they started (forgotten at their `stopped`
    /// and when they are forgotten): a client's first `completed` is exempt from the
    /// minimum interval, so that the new seeder is sent leechers (UNIT3D-Announce v0.3.1's
    /// `has_sent_completed`, empty at start as there).
    pub completed: BTreeSet<ClientKey>,
}

/// What the next write to the site's tables takes.
#[derive(Default)]
pub(crate) struct Pending {
    /// Clients whose row changed: (torrent, user, peer id).
    pub peers: HashSet<(u32, u32, [u8; 20])>,
    /// Clients forgotten: their rows go.
    pub deletions: HashSet<(u32, u32, [u8; 20])>,
    /// Torrents whose figures changed.
    pub torrents: HashSet<u32>,
    /// Announces of unknown or deleted info hashes, by (user, hash): the latest time.
    pub unregistered: HashMap<(u32, InfoHash), i64>,
}

/// The site in memory.
pub struct Site {
    pub(crate) config: Unit3dConfig,
    members: Arc<Members>,
    pub(crate) groups: RwLock<HashMap<u32, Group>>,
    pub(crate) users: DashMap<u32, UserState>,
    pub(crate) torrents: DashMap<u32, TorrentState>,
    /// Torrent id by info hash (deleted ones too: their announces are refused by name).
    pub(crate) ids: DashMap<InfoHash, u32>,
    pub(crate) blacklist: RwLock<Vec<Vec<u8>>>,
    pub(crate) tokens: DashSet<(u32, u32)>,
    pub(crate) personal: DashSet<u32>,
    pub(crate) featured: DashSet<u32>,
    pub(crate) pending: Mutex<Pending>,
    /// `You already have N peers on this torrent. Ignoring.`, with the configured N.
    pub(crate) peers_limit_reason: &'static str,
    /// When silent peers were last swept (Unix seconds).
    pub(crate) last_sweep: AtomicI64,
    /// Requests and announce responses per second, for the site's `GET /stats`.
    pub stats: Stats,
}

pub use shoal_site::mysql::unix_now;

/// The private rule's entry for a UNIT3D user: every check is the site's own
/// ([`crate::rules`]), so the member is always enabled, may download, factors 1.
fn member(id: u32) -> Member {
    Member::checked_by_site(i64::from(id))
}

/// The private rule's entry for a UNIT3D torrent (v1 only: UNIT3D keeps one hash).
fn registered(t: &Torrent) -> Registered {
    Registered::v1_checked_by_site(i64::from(t.id), Hash(t.info_hash))
}

impl Site {
    /// The site as `data` holds it; its users and torrents registered in `members`.
    pub fn new(config: Unit3dConfig, members: Arc<Members>, data: SiteData) -> Self {
        let limit = config.max_peers_per_torrent_per_user;
        let site = Site {
            peers_limit_reason: Box::leak(
                format!("You already have {limit} peers on this torrent. Ignoring.")
                    .into_boxed_str(),
            ),
            config,
            members,
            groups: RwLock::new(data.groups.into_iter().map(|g| (g.id, g)).collect()),
            users: DashMap::new(),
            torrents: DashMap::new(),
            ids: DashMap::new(),
            blacklist: RwLock::new(data.blacklisted_prefixes),
            tokens: data.freeleech_tokens.into_iter().collect(),
            personal: data.personal_freeleech.into_iter().collect(),
            featured: data.featured.into_iter().collect(),
            pending: Mutex::new(Pending::default()),
            last_sweep: AtomicI64::new(unix_now()),
            stats: Stats::new(),
        };
        for u in data.users {
            site.put_user(u);
        }
        for t in data.torrents {
            site.put_torrent(t);
        }
        site.restore_peers(data.peers);
        site
    }

    /// The site's knobs.
    pub fn config(&self) -> &Unit3dConfig {
        &self.config
    }

    /// Puts the peers read from the table back on their torrents, and counts them: the
    /// torrents' seeders and leechers and the users' seeding and leeching are what the
    /// active, visible clients make (a table left by another announce server may disagree
    /// with the torrents' columns; the clients are the truth).
    fn restore_peers(&self, peers: Vec<Peer>) {
        // The figures are counted here, not added to the columns' values.
        let loaded: HashMap<u32, (u32, u32)> = self
            .torrents
            .iter_mut()
            .map(|mut t| {
                let tt = &mut t.torrent;
                let was = (tt.seeders, tt.leechers);
                (tt.seeders, tt.leechers) = (0, 0);
                (tt.id, was)
            })
            .collect();
        let mut counts: HashMap<u32, (u32, u32)> = HashMap::new();
        for p in peers {
            let Some(mut t) = self.torrents.get_mut(&p.torrent_id) else {
                continue;
            };
            if p.active && p.visible {
                let c = counts.entry(p.user_id).or_default();
                if p.seeder {
                    t.torrent.seeders += 1;
                    c.0 += 1;
                } else {
                    t.torrent.leechers += 1;
                    c.1 += 1;
                }
            }
            t.clients.insert((p.user_id, p.peer_id), p);
        }
        for (user, (seeding, leeching)) in counts {
            if let Some(mut u) = self.users.get_mut(&user) {
                u.user.num_seeding = seeding;
                u.user.num_leeching = leeching;
            }
        }
        // Columns that disagree with the clients are corrected by the next write.
        let mut pending = self.pending.lock();
        for t in self.torrents.iter() {
            if loaded.get(&t.torrent.id) != Some(&(t.torrent.seeders, t.torrent.leechers)) {
                pending.torrents.insert(t.torrent.id);
            }
        }
    }

    /// Every client the site knows that others may be sent (active and visible, on a
    /// torrent not deleted), for the swarm store at start: (info hash, peer id, address,
    /// seeder).
    pub fn listed_peers(&self) -> Vec<ListedPeer> {
        let mut out = Vec::new();
        for t in self.torrents.iter().filter(|t| !t.torrent.is_deleted) {
            for ((_, peer_id), p) in &t.clients {
                if p.active && p.visible && p.port != 0 {
                    out.push(ListedPeer {
                        info_hash: t.torrent.info_hash,
                        peer_id: *peer_id,
                        addr: SocketAddr::new(p.ip, p.port),
                        seeder: p.seeder,
                    });
                }
            }
        }
        out
    }

    /// Every active client as the site knows it (its `peers` row at start), for the
    /// ledger: it compares each client's next announce with the totals reported here, so
    /// that a restart or a switch-over counts what the client moved since, neither from
    /// zero nor again.
    pub fn active_clients(&self) -> Vec<Peer> {
        let mut out = Vec::new();
        for t in self.torrents.iter() {
            out.extend(t.clients.values().filter(|p| p.active).cloned());
        }
        out
    }

    // ----- groups -----

    /// Adds or replaces a group.
    pub fn put_group(&self, g: Group) {
        self.groups.write().insert(g.id, g);
    }

    /// Removes a group; whether it was there.
    pub fn remove_group(&self, id: u32) -> bool {
        self.groups.write().remove(&id).is_some()
    }

    // ----- users -----

    /// Adds or replaces a user (a changed passkey replaces the old one at once).
    pub fn put_user(&self, user: User) {
        self.members.put_user(&user.passkey, member(user.id));
        match self.users.get_mut(&user.id) {
            Some(mut u) => u.user = user,
            None => {
                let state = UserState {
                    seed_lists: Rates::new(&self.config.seed_list_rate_limits),
                    leech_lists: Rates::new(&self.config.leech_list_rate_limits),
                    user,
                };
                self.users.insert(state.user.id, state);
            }
        }
    }

    /// Removes a user; whether they were there.
    pub fn remove_user(&self, id: u32) -> bool {
        self.members.remove_user(i64::from(id));
        self.users.remove(&id).is_some()
    }

    /// A user as the rules see them now.
    pub fn user(&self, id: u32) -> Option<UserState> {
        self.users.get(&id).map(|u| u.clone())
    }

    // ----- torrents -----

    /// Adds or replaces a torrent, keeping the clients it has.
    pub fn put_torrent(&self, t: Torrent) {
        // The hash names this torrent from now on; a torrent that had it before (a deleted
        // upload the site replaced) stays readable by id, with its clients.
        self.members.put_torrent(registered(&t));
        self.ids.insert(t.info_hash, t.id);
        match self.torrents.get_mut(&t.id) {
            Some(mut state) => {
                let (seeders, leechers) = (state.torrent.seeders, state.torrent.leechers);
                if state.torrent.info_hash != t.info_hash {
                    self.ids.remove(&state.torrent.info_hash);
                    self.members.remove_torrent(&Hash(state.torrent.info_hash));
                }
                // The figures are the tracker's: what its clients make.
                state.torrent = Torrent {
                    seeders,
                    leechers,
                    ..t
                };
            }
            None => {
                self.torrents.insert(
                    t.id,
                    TorrentState {
                        torrent: t,
                        clients: BTreeMap::new(),
                        completed: BTreeSet::new(),
                    },
                );
            }
        }
    }

    /// Marks a torrent deleted (its announces are refused as deleted and recorded as
    /// unregistered); whether it was there.
    pub fn remove_torrent(&self, id: u32) -> bool {
        match self.torrents.get_mut(&id) {
            Some(mut state) => {
                state.torrent.is_deleted = true;
                true
            }
            None => false,
        }
    }

    /// A torrent and its clients now.
    pub fn torrent(&self, id: u32) -> Option<TorrentState> {
        self.torrents.get(&id).map(|t| t.clone())
    }

    // ----- the lists -----

    /// Adds (`add`) or removes a blacklisted peer-id prefix; whether it changed anything.
    pub fn edit_blacklist(&self, prefix: &[u8], add: bool) -> bool {
        let mut list = self.blacklist.write();
        let at = list.iter().position(|p| p == prefix);
        match (at, add) {
            (None, true) => {
                list.push(prefix.to_vec());
                true
            }
            (Some(i), false) => {
                list.swap_remove(i);
                true
            }
            _ => false,
        }
    }

    /// A freeleech token of `user` on `torrent`, added or removed.
    pub fn edit_token(&self, user: u32, torrent: u32, add: bool) -> bool {
        if add {
            self.tokens.insert((user, torrent))
        } else {
            self.tokens.remove(&(user, torrent)).is_some()
        }
    }

    /// Personal freeleech of `user`, added or removed.
    pub fn edit_personal_freeleech(&self, user: u32, add: bool) -> bool {
        if add {
            self.personal.insert(user)
        } else {
            self.personal.remove(&user).is_some()
        }
    }

    /// `torrent` featured or not.
    pub fn edit_featured(&self, torrent: u32, add: bool) -> bool {
        if add {
            self.featured.insert(torrent)
        } else {
            self.featured.remove(&torrent).is_some()
        }
    }

    /// Counts: (groups, users, torrents, clients).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let clients = self.torrents.iter().map(|t| t.clients.len()).sum();
        (
            self.groups.read().len(),
            self.users.len(),
            self.torrents.len(),
            clients,
        )
    }
}
