//! What the tracker's parts share beyond the store: the config in force, the UDP counters,
//! the WebTorrent state, the snapshot file, the admin token, the access-list file, reload,
//! and the samples the status page charts.
//!
//! It exists so that the admin listener (on its own thread) can act on the tracker without
//! owning it: [`crate::Tracker`] and the admin server hold the same `Arc<Shared>`, and a
//! reload from SIGHUP or from the admin API runs the same code.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use parking_lot::{Mutex, RwLock};
use shoal_proto::InfoHash;
use shoal_swarm::{AccessList, AccessMode, Store, TorrentStats};
use subtle::ConstantTimeEq;

use crate::config::Config;
use crate::state::StateFile;
use crate::udp::counters::{LocalCounters, WorkerCounters};
use crate::ws::WsContext;

/// A reload step added by a front end (for example TLS certificates); returns a line for
/// the log and the API's answer.
pub type ReloadHook = Box<dyn Fn() -> anyhow::Result<String> + Send + Sync>;

/// Most torrents kept in each sample's top list.
pub const TOP_IN_SAMPLE: usize = 20;

/// One torrent's line in a top list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopTorrent {
    pub info_hash: InfoHash,
    pub stats: TorrentStats,
}

impl TopTorrent {
    pub fn peers(&self) -> u64 {
        u64::from(self.stats.seeders) + u64::from(self.stats.leechers)
    }
}

/// The store's figures at one moment, and request rates since the sample before.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub unix: u64,
    pub torrents: u64,
    pub seeders: u64,
    pub leechers: u64,
    pub peers_v4: u64,
    pub peers_v6: u64,
    /// The WebTorrent store's figures (its peers are connections: no address family).
    pub ws_torrents: u64,
    pub ws_seeders: u64,
    pub ws_leechers: u64,
    /// Requests per second over the last interval, by protocol.
    pub udp_rps: f64,
    pub http_rps: f64,
    pub ws_rps: f64,
    pub top: Vec<TopTorrent>,
}

/// Figures of the whole store and its `n` largest torrents (by peers), from one walk over
/// the shards (each locked only for its own part).
pub fn survey(store: &Store, n: usize) -> (Sample, Vec<TopTorrent>) {
    let mut s = Sample::default();
    // A min-heap of the n largest: (peers, hash) ordered so the smallest is on top.
    let mut heap = std::collections::BinaryHeap::new();
    store.for_each_shard(|shard| {
        for (ih, t) in shard.torrents() {
            let st = t.stats();
            s.torrents += 1;
            s.seeders += u64::from(st.seeders);
            s.leechers += u64::from(st.leechers);
            let v6 = t.v6().map_or(0, |w| w.len() as u64);
            s.peers_v6 += v6;
            s.peers_v4 += t.v4().len() as u64;
            if n == 0 {
                continue;
            }
            let peers = u64::from(st.seeders) + u64::from(st.leechers);
            let entry = std::cmp::Reverse((peers, st.completed, *ih));
            if heap.len() < n {
                heap.push(entry);
            } else if heap.peek().is_some_and(|top| entry < *top) {
                heap.pop();
                heap.push(entry);
            }
        }
    });
    let mut top: Vec<_> = heap.into_iter().map(|r| r.0).collect();
    top.sort_by(|a, b| b.cmp(a));
    let top = top
        .into_iter()
        .filter_map(|(_, _, ih)| {
            store
                .with_torrent(&ih, |t| t.stats())
                .map(|stats| TopTorrent {
                    info_hash: ih,
                    stats,
                })
        })
        .collect();
    (s, top)
}

/// The shared part of a running tracker.
pub struct Shared {
    pub config: Config,
    pub store: Arc<Store>,
    pub udp_counters: Vec<Arc<WorkerCounters>>,
    /// The WebTorrent front end's state (its store and open connections).
    pub ws: Arc<WsContext>,
    pub state: Option<Arc<StateFile>>,
    pub handover_waiting: Arc<AtomicBool>,
    pub started: Instant,
    pub started_unix: u64,
    /// Admin API token (None: the API refuses everything).
    token: RwLock<Option<String>>,
    /// Serialises edits of the access-list file.
    access_edit: Mutex<()>,
    reload_hooks: Mutex<Vec<ReloadHook>>,
    samples: Mutex<VecDeque<Sample>>,
}

impl Shared {
    pub fn new(
        config: Config,
        store: Arc<Store>,
        udp_counters: Vec<Arc<WorkerCounters>>,
        ws: Arc<WsContext>,
        state: Option<Arc<StateFile>>,
        handover_waiting: Arc<AtomicBool>,
    ) -> anyhow::Result<Self> {
        let token = load_token(&config)?;
        Ok(Self {
            config,
            store,
            udp_counters,
            ws,
            state,
            handover_waiting,
            started: Instant::now(),
            started_unix: crate::state::unix_now(),
            token: RwLock::new(token),
            access_edit: Mutex::new(()),
            reload_hooks: Mutex::new(Vec::new()),
            samples: Mutex::new(VecDeque::new()),
        })
    }

    /// Request counters of the UDP front end, summed over workers.
    pub fn udp_totals(&self) -> LocalCounters {
        let mut total = LocalCounters::default();
        for c in &self.udp_counters {
            total += c.read();
        }
        total
    }

    pub fn handover_waiting(&self) -> bool {
        self.handover_waiting.load(Ordering::Relaxed)
    }

    /// Whether `presented` is the admin token (constant time). No token configured: never.
    pub fn token_matches(&self, presented: &str) -> bool {
        match &*self.token.read() {
            Some(t) => {
                t.len() == presented.len() && bool::from(t.as_bytes().ct_eq(presented.as_bytes()))
            }
            None => false,
        }
    }

    pub fn has_token(&self) -> bool {
        self.token.read().is_some()
    }

    pub fn add_reload_hook(&self, hook: ReloadHook) {
        self.reload_hooks.lock().push(hook);
    }

    /// Re-reads the access list, the admin token file, and runs the front ends' hooks. The
    /// first failure stops it; what was already reloaded stays.
    pub fn reload(&self) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        let list = AccessList::load(self.config.access_mode(), &self.config.access_list.path)?;
        done.push(format!(
            "access list reloaded: mode {:?}, {} info hashes",
            list.mode(),
            list.len()
        ));
        self.store.set_access_list(list);
        if !self.config.admin.token_file.as_os_str().is_empty() {
            *self.token.write() = load_token(&self.config)?;
            done.push("admin token reloaded".to_string());
        }
        for hook in self.reload_hooks.lock().iter() {
            done.push(hook()?);
        }
        Ok(done)
    }

    /// Adds (`add`) or removes an info hash of the access list, in its file first (so the
    /// change survives a restart and a reload), then in force. Comments and other lines of
    /// the file are kept.
    pub fn edit_access_list(&self, info_hash: InfoHash, add: bool) -> anyhow::Result<bool> {
        let mode = self.config.access_mode();
        if mode == AccessMode::Off {
            bail!("the access list is off (access_list.mode = \"off\")");
        }
        let _guard = self.access_edit.lock();
        let path = &self.config.access_list.path;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let listed = |line: &str| {
            InfoHash::from_hex(line.split('#').next().unwrap_or("").trim()) == Some(info_hash)
        };
        let present = text.lines().any(listed);
        let new_text = match (add, present) {
            (true, true) | (false, false) => None,
            (true, false) => {
                let mut t = text.clone();
                if !t.is_empty() && !t.ends_with('\n') {
                    t.push('\n');
                }
                t.push_str(&info_hash.to_hex());
                t.push('\n');
                Some(t)
            }
            (false, true) => Some(
                text.lines()
                    .filter(|l| !listed(l))
                    .flat_map(|l| [l, "\n"])
                    .collect(),
            ),
        };
        let Some(new_text) = new_text else {
            return Ok(false);
        };
        let list = AccessList::parse(mode, &new_text, &path.display().to_string())?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(new_text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })()
        .with_context(|| format!("writing {}", path.display()))?;
        self.store.set_access_list(list);
        Ok(true)
    }

    /// Takes a sample: walks the store, computes rates against the previous sample, and
    /// keeps an hour of them.
    pub fn take_sample(&self, previous: &mut Option<(Instant, u64, u64, u64)>) {
        let (mut s, top) = survey(&self.store, TOP_IN_SAMPLE);
        s.top = top;
        let w = self.ws.torrents.totals();
        (s.ws_torrents, s.ws_seeders, s.ws_leechers) = (w.torrents, w.seeders, w.leechers);
        s.unix = crate::state::unix_now();
        let c = self.udp_totals();
        let udp = c.connect + c.announce + c.scrape;
        let http = super::admin::metrics::TALLIES.http.load(Ordering::Relaxed);
        let ws = super::admin::metrics::TALLIES.ws.load(Ordering::Relaxed);
        let now = Instant::now();
        if let Some((at, u, h, w)) = *previous {
            let dt = now.duration_since(at).as_secs_f64().max(0.001);
            s.udp_rps = udp.saturating_sub(u) as f64 / dt;
            s.http_rps = http.saturating_sub(h) as f64 / dt;
            s.ws_rps = ws.saturating_sub(w) as f64 / dt;
        }
        *previous = Some((now, udp, http, ws));
        let keep = (3600 / self.config.admin.sample_interval.max(1)).max(2) as usize;
        let mut samples = self.samples.lock();
        while samples.len() >= keep {
            samples.pop_front();
        }
        samples.push_back(s);
    }

    /// The latest sample (zeros before the first).
    pub fn latest(&self) -> Sample {
        self.samples.lock().back().cloned().unwrap_or_default()
    }

    /// Every sample kept, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().iter().cloned().collect()
    }
}

fn load_token(config: &Config) -> anyhow::Result<Option<String>> {
    if !config.admin.token.is_empty() {
        return Ok(Some(config.admin.token.clone()));
    }
    if config.admin.token_file.as_os_str().is_empty() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&config.admin.token_file).with_context(|| {
        format!(
            "reading the admin token file {}",
            config.admin.token_file.display()
        )
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        bail!(
            "admin token file {} is empty",
            config.admin.token_file.display()
        );
    }
    Ok(Some(token))
}

/// Runs the sampler until `stop` is set.
pub fn run_sampler(shared: &Shared, stop: &AtomicBool) {
    let every = Duration::from_secs(shared.config.admin.sample_interval.max(1));
    let mut previous = None;
    shared.take_sample(&mut previous);
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(every));
        if Instant::now() < next {
            continue;
        }
        next += every;
        shared.take_sample(&mut previous);
        crate::admin::metrics::upkeep();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::{AnnounceEvent, CompactPeerV4, PeerId};
    use shoal_swarm::{Announce, StoreConfig};

    #[test]
    fn survey_counts_everything_and_ranks_the_largest() {
        let store = Store::new(StoreConfig::default());
        let mut out: Vec<CompactPeerV4> = Vec::new();
        for t in 1..=30u8 {
            for p in 0..t {
                store
                    .announce(
                        &Announce {
                            info_hash: InfoHash([t; 20]),
                            peer_id: PeerId([p; 20]),
                            addr: CompactPeerV4::new([10, 0, 0, p].into(), 1),
                            event: AnnounceEvent::Started,
                            left: u64::from(p % 2),
                            numwant: 0,
                            credential: None,
                        },
                        0,
                        &mut out,
                    )
                    .unwrap();
            }
        }
        let (s, top) = survey(&store, 5);
        assert_eq!(s.torrents, 30);
        assert_eq!(s.seeders + s.leechers, (1..=30u64).sum::<u64>());
        assert_eq!(s.peers_v4, s.seeders + s.leechers);
        let ranked: Vec<u8> = top.iter().map(|t| t.info_hash.0[0]).collect();
        assert_eq!(ranked, vec![30, 29, 28, 27, 26]);
        assert_eq!(top[0].peers(), 30);
        assert!(survey(&store, 0).1.is_empty());
    }
}
