//! The site in memory ([`Site`]): the settings, members, torrents with their clients, the
//! site-wide promotions and the allow list, as loaded and as the polls replace them; and
//! what the announces since the last batch have to write back ([`Pending`], taken as a
//! [`Batch`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};

use crate::agent::AllowList;
use crate::model::{GlobalPromotion, Peer, Settings, SiteData, SnatchState, Torrent, User};

/// The hasher of the maps an announce touches: foldhash, as the accounts batch and the swarm
/// store use. The keys are ids the site gave and peer ids of its members' clients, which a
/// stranger cannot choose, so SipHash's slower resistance to chosen keys buys nothing.
pub(crate) type Fast = foldhash::fast::RandomState;
pub(crate) type FastMap<K, V> = HashMap<K, V, Fast>;
pub(crate) type FastSet<K> = HashSet<K, Fast>;
pub(crate) type Shared<K, V> = DashMap<K, V, Fast>;

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A torrent and its clients, keyed by (member, peer id): one member's clients are a range.
#[derive(Clone, Debug, Default)]
pub struct TorrentState {
    pub torrent: Torrent,
    pub clients: BTreeMap<(u32, [u8; 20]), Peer>,
}

/// The Redis windows of one (member, torrent) (`public/announce.php:42-66`, `:631`): until
/// when a repeat is a re-announce (5 s), is too frequent (30 s), and needs no record for
/// the cleanup (`main.autoclean_interval_one`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Windows {
    pub(crate) repeat_until: i64,
    pub(crate) frequent_until: i64,
    pub(crate) recorded_until: i64,
}

/// What shoal holds of one (member, torrent): its windows and its `snatched` row, in one
/// entry, so that an announce finds both with one look-up (a site holds one per snatch,
/// millions on a large one, and each look-up is a miss of the processor's caches).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pair {
    pub(crate) windows: Windows,
    pub(crate) snatch: SnatchState,
}

/// What one (member, torrent) adds to its `snatched` row in one batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnatchWrite {
    pub user_id: u32,
    pub torrent_id: u32,
    /// No row yet: inserted with these (`ip`, `port`, the client's reported totals,
    /// `startdat`).
    pub insert: Option<SnatchInsert>,
    /// Added to `uploaded`, `downloaded` (actual bytes, no factor).
    pub uploaded: u64,
    pub downloaded: u64,
    /// Added to `seedtime`, `leechtime`, `leech_time_no_seeder`.
    pub seedtime: u64,
    pub leechtime: u64,
    pub leech_time_no_seeder: u64,
    /// Set: `to_go`, `last_action`.
    pub to_go: u64,
    pub last_action: i64,
    /// Set once: `completedat`, `finished = 'yes'`.
    pub completed_at: Option<i64>,
}

/// The values of a `snatched` row shoal inserts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnatchInsert {
    pub ip: IpAddr,
    pub port: u16,
    pub uploaded: u64,
    pub downloaded: u64,
    pub started: i64,
}

/// A torrent's figures now and what its row gains.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorrentWrite {
    pub torrent_id: u32,
    pub seeders: u32,
    pub leechers: u32,
    /// Added to `times_completed`.
    pub completed: u32,
    /// `last_action` (and `visible = 'yes'`).
    pub last_action: i64,
}

/// The columns of a member's row shoal sets (their byte totals go through the ledger).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserWrite {
    pub user_id: u32,
    pub last_announce_at: Option<i64>,
    pub client_select: Option<u32>,
    pub show_client_error: Option<bool>,
    /// `enabled = 'no'` (the cheater check).
    pub disable: bool,
    /// `downloadpos = 'no'` (a fake announce).
    pub revoke_download: bool,
}

/// A `cheaters` row to add, or a hit on this member's row of the last 24 h.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheaterWrite {
    pub user_id: u32,
    pub torrent_id: u32,
    pub at: i64,
    pub uploaded: u64,
    pub downloaded: u64,
    pub secs: u64,
    pub seeders: u32,
    pub leechers: u32,
    pub comment: &'static str,
    /// The disabling row (always added, never a hit).
    pub disabling: bool,
}

/// What the announces since the last batch write.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub(crate) peers: FastSet<(u32, u32, [u8; 20])>,
    pub(crate) gone: FastSet<(u32, u32, [u8; 20])>,
    pub(crate) snatches: FastMap<(u32, u32), SnatchWrite>,
    pub(crate) torrents: FastMap<u32, TorrentWrite>,
    pub(crate) users: FastMap<u32, UserWrite>,
    pub(crate) cheaters: Vec<CheaterWrite>,
    pub(crate) hit_and_runs: Vec<(u32, u32)>,
    /// (member, torrent) -> the time of the announce that asked for the cleanup's record.
    pub(crate) recorded: FastMap<(u32, u32), i64>,
}

impl Pending {
    /// An empty one with room for as many entries as `self` holds: the next batch is
    /// likely as large, and a map that grows from nothing rehashes every entry on the
    /// announce path as it doubles.
    fn sized_like(&self) -> Pending {
        Pending {
            peers: FastSet::with_capacity_and_hasher(self.peers.len(), Fast::default()),
            gone: FastSet::default(),
            snatches: FastMap::with_capacity_and_hasher(self.snatches.len(), Fast::default()),
            torrents: FastMap::with_capacity_and_hasher(self.torrents.len(), Fast::default()),
            users: FastMap::with_capacity_and_hasher(self.users.len(), Fast::default()),
            cheaters: Vec::new(),
            hit_and_runs: Vec::new(),
            recorded: FastMap::with_capacity_and_hasher(self.recorded.len(), Fast::default()),
        }
    }

    pub(crate) fn user(&mut self, user_id: u32) -> &mut UserWrite {
        self.users.entry(user_id).or_insert_with(|| UserWrite {
            user_id,
            ..UserWrite::default()
        })
    }
}

/// One write to the site's tables, in one transaction (and the Redis records after it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// `peers` rows upserted by (torrent, peer id, member), with their torrent id.
    pub peers: Vec<(u32, Peer)>,
    /// `peers` rows deleted: (torrent, member, peer id).
    pub peer_deletions: Vec<(u32, u32, [u8; 20])>,
    pub snatches: Vec<SnatchWrite>,
    pub torrents: Vec<TorrentWrite>,
    pub users: Vec<UserWrite>,
    pub cheaters: Vec<CheaterWrite>,
    /// (member, torrent): `hit_and_runs` rows to insert (then `snatched.hit_and_run_id`).
    pub hit_and_runs: Vec<(u32, u32)>,
    /// (member, torrent, announce time): to add to the cleanup's Redis batches
    /// ([`crate::cleanup`]), oldest first.
    pub recorded: Vec<(u32, u32, i64)>,
}

impl Batch {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A NexusPHP site in memory.
pub struct Site {
    pub(crate) settings: RwLock<Arc<Settings>>,
    pub(crate) promotions: RwLock<Vec<GlobalPromotion>>,
    pub(crate) allow: RwLock<Arc<AllowList>>,
    pub(crate) users: Shared<u32, User>,
    pub(crate) torrents: Shared<u32, TorrentState>,
    /// Each member's leeching clients over all torrents (the download slots).
    pub(crate) leeching: Shared<u32, u32>,
    /// Each (member, torrent)'s windows and snatch.
    pub(crate) pairs: Shared<(u32, u32), Pair>,
    pub(crate) bought: RwLock<FastSet<(u32, u32)>>,
    pub(crate) pending: Mutex<Pending>,
    pub(crate) texts: crate::texts::Texts,
    /// Unix seconds now ([`unix_now`]; a test sets its own).
    pub(crate) clock: fn() -> i64,
}

impl Site {
    /// The site as loaded.
    pub fn new(data: SiteData) -> Site {
        let site = Site {
            settings: RwLock::new(Arc::new(data.settings)),
            promotions: RwLock::new(data.promotions),
            allow: RwLock::new(Arc::new(AllowList::new(data.families, data.exceptions))),
            users: data.users.into_iter().map(|u| (u.id, u)).collect(),
            torrents: Shared::default(),
            leeching: Shared::default(),
            pairs: (data.snatches.into_iter())
                .map(|(key, snatch)| {
                    let pair = Pair {
                        snatch,
                        ..Pair::default()
                    };
                    (key, pair)
                })
                .collect(),
            bought: RwLock::new(data.bought.into_iter().collect()),
            pending: Mutex::new(Pending::default()),
            texts: crate::texts::Texts::default(),
            clock: unix_now,
        };
        for t in data.torrents {
            site.put_torrent(t);
        }
        for (tid, p) in data.peers {
            if let Some(mut t) = site.torrents.get_mut(&tid) {
                if !p.seeder {
                    *site.leeching.entry(p.user_id).or_default() += 1;
                }
                t.clients.insert((p.user_id, p.peer_id), p);
            }
        }
        site
    }

    /// The site with another clock (tests move time on).
    pub fn with_clock(mut self, clock: fn() -> i64) -> Site {
        self.clock = clock;
        self
    }

    /// Adds or replaces a torrent's row, keeping its clients and shoal's counts of them.
    pub fn put_torrent(&self, t: Torrent) {
        let mut state = self.torrents.entry(t.id).or_default();
        let had = !state.clients.is_empty() || state.torrent.id == t.id;
        let (seeders, leechers, completed) = (
            state.torrent.seeders,
            state.torrent.leechers,
            state.torrent.times_completed,
        );
        state.torrent = t;
        if had {
            // shoal's own counts stand until its batch writes them.
            state.torrent.seeders = seeders;
            state.torrent.leechers = leechers;
            state.torrent.times_completed = state.torrent.times_completed.max(completed);
        }
    }

    /// Adds or replaces a member's row (a poll found it changed).
    pub fn put_user(&self, u: User) {
        self.users.insert(u.id, u);
    }

    /// Replaces the settings (a poll read them).
    pub fn set_settings(&self, s: Settings) {
        *self.settings.write() = Arc::new(s);
    }

    /// Replaces the site-wide promotions.
    pub fn set_promotions(&self, rows: Vec<GlobalPromotion>) {
        *self.promotions.write() = rows;
    }

    /// Replaces the allow list.
    pub fn set_allow_list(&self, list: AllowList) {
        *self.allow.write() = Arc::new(list);
    }

    /// Marks torrents bought (`torrent_buy_logs`).
    pub fn add_bought(&self, pairs: impl IntoIterator<Item = (u32, u32)>) {
        self.bought.write().extend(pairs);
    }

    /// The settings in force.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.read().clone()
    }

    /// A member as held now.
    pub fn user(&self, id: u32) -> Option<User> {
        self.users.get(&id).map(|u| u.clone())
    }

    /// A member as the announce rules read them: every field but the passkey (left empty,
    /// so that the copy allocates nothing).
    pub(crate) fn member(&self, id: u32) -> Option<User> {
        self.users.get(&id).map(|u| User {
            passkey: String::new(),
            ..*u
        })
    }

    /// A torrent's row as held now.
    pub fn torrent(&self, id: u32) -> Option<Torrent> {
        self.torrents.get(&id).map(|t| t.torrent.clone())
    }

    /// Takes what the announces since the last batch have to write.
    pub fn take_batch(&self) -> Batch {
        let pending = {
            let mut guard = self.pending.lock();
            let next = guard.sized_like();
            std::mem::replace(&mut *guard, next)
        };
        // Every table's rows in the order of its key: each torrent looked up once here,
        // and the server's index pages written in order rather than at random.
        let mut keys: Vec<(u32, u32, [u8; 20])> = pending.peers.into_iter().collect();
        keys.sort_unstable();
        let mut peers = Vec::with_capacity(keys.len());
        for group in keys.chunk_by(|a, b| a.0 == b.0) {
            let tid = group[0].0;
            if let Some(t) = self.torrents.get(&tid) {
                for &(_, uid, pid) in group {
                    if let Some(p) = t.clients.get(&(uid, pid)) {
                        peers.push((tid, p.clone()));
                    }
                }
            }
        }
        let mut torrents: Vec<TorrentWrite> = pending.torrents.into_values().collect();
        torrents.sort_unstable_by_key(|w| w.torrent_id);
        for w in &mut torrents {
            if let Some(t) = self.torrents.get(&w.torrent_id) {
                (w.seeders, w.leechers) = (t.torrent.seeders, t.torrent.leechers);
            }
        }
        let mut snatches: Vec<SnatchWrite> = pending.snatches.into_values().collect();
        snatches.sort_unstable_by_key(|s| (s.torrent_id, s.user_id));
        let mut users: Vec<UserWrite> = pending.users.into_values().collect();
        users.sort_unstable_by_key(|u| u.user_id);
        let mut peer_deletions: Vec<(u32, u32, [u8; 20])> = pending.gone.into_iter().collect();
        peer_deletions.sort_unstable();
        let mut recorded: Vec<(u32, u32, i64)> = (pending.recorded.into_iter())
            .map(|((uid, tid), at)| (uid, tid, at))
            .collect();
        recorded.sort_unstable_by_key(|&(uid, tid, at)| (at, uid, tid));
        Batch {
            peers,
            peer_deletions,
            snatches,
            torrents,
            users,
            cheaters: pending.cheaters,
            hit_and_runs: pending.hit_and_runs,
            recorded,
        }
    }
}
