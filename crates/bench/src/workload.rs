//! What the simulated swarm asks for: torrents, their popularity, peers, request mix.
//!
//! Every protocol's generator draws from the same [`Workload`], so a UDP run and an HTTP
//! run with the same flags load the tracker's store the same way. Popularity follows a
//! Pareto law with the same meaning as the `torrent_selection_pareto_shape` of aquatic's
//! load testers (the seeds' configs): draw `x ~ Pareto(scale 1, shape)`, and the torrent is
//! at fraction `min(x - 1, 100) / 100` of the list. With shape 2, half of all requests go
//! to the first 0.4% of torrents. Randomness is `fastrand` (a fast, seedable generator):
//! drawing requests must cost far less than sending them.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

/// Workload flags shared by every protocol.
#[derive(Args, Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadArgs {
    /// Number of torrents (distinct info hashes).
    #[arg(long, default_value_t = 10_000)]
    pub torrents: usize,
    /// Shape of the Pareto popularity of torrents (higher = more skewed towards the first).
    #[arg(long, default_value_t = 2.0)]
    pub pareto_shape: f64,
    /// Number of simulated peers (distinct peer_id and port).
    #[arg(long, default_value_t = 100_000)]
    pub peers: usize,
    /// Probability that a simulated peer is a seeder.
    #[arg(long, default_value_t = 0.25)]
    pub seeder_probability: f64,
    /// Relative weight of announce requests.
    #[arg(long, default_value_t = 10)]
    pub weight_announce: u32,
    /// Relative weight of scrape requests.
    #[arg(long, default_value_t = 1)]
    pub weight_scrape: u32,
    /// Relative weight of extra connect requests (UDP only; aquatic_udp_load_test uses 50
    /// connect to 50 announce). Connects needed to get a connection id always happen.
    #[arg(long, default_value_t = 0)]
    pub weight_connect: u32,
    /// Peers asked for in each announce.
    #[arg(long, default_value_t = 50)]
    pub numwant: u32,
    /// Info hashes per scrape request.
    #[arg(long, default_value_t = 5)]
    pub scrape_hashes: usize,
    /// Probability that a re-announce is `completed` (a leecher becoming a seeder).
    #[arg(long, default_value_t = 0.02)]
    pub completed_probability: f64,
    /// Probability that a re-announce is `stopped` (the peer leaves and later restarts).
    #[arg(long, default_value_t = 0.02)]
    pub stopped_probability: f64,
    /// Offers per WebTorrent announce.
    #[arg(long, default_value_t = 2)]
    pub offers: usize,
    /// Seed of the random generator (runs with the same seed ask the same things).
    #[arg(long, default_value_t = 0x5ea1)]
    pub seed: u64,
    /// Load a private tracker: a file of passkeys, one a line (blank lines and `#`
    /// comments ignored). Simulated peer i uses passkey i mod n for every request: HTTP in
    /// the path (`/<passkey>/announce`, `/<passkey>/scrape`), UDP in BEP 41 URL data
    /// (`/<passkey>/announce`), WebTorrent in the WebSocket URL (one passkey per
    /// connection: connection k uses passkey k mod n); --passkey-path moves the key. The
    /// target's own path is replaced.
    /// UDP scrapes cannot carry a passkey: with this flag the UDP mix has no scrapes.
    #[arg(long, value_name = "FILE")]
    #[serde(default)]
    pub passkeys: Option<PathBuf>,
    /// With --passkeys: where each request's path puts the key, a path with `{passkey}`
    /// in it once (default `/{passkey}/announce`; UNIT3D's sites hand out
    /// `/announce/{passkey}`), or a path and a query (NexusPHP's
    /// `/announce.php?passkey={passkey}`: the request's parameters follow with `&`).
    /// Scrapes use it with the last `announce` of its path turned into `scrape` (BEP 48:
    /// `/scrape.php?passkey=...`); UDP carries it, query and all, as BEP 41 URL data,
    /// WebTorrent as the URL's path and query.
    #[arg(long, value_name = "PATH")]
    #[serde(default)]
    pub passkey_path: Option<String>,
    /// Announce the simulated peers in turn (each connection's or socket's share in order,
    /// from its first again after its last) instead of at random, each on a torrent of
    /// its own among its key's peers: peer i, of key i mod k (k keys: --passkeys, else 1),
    /// on torrent (i mod k + i / k) mod --torrents, popularity even, for as long as it has
    /// not stopped. While --peers is at most k × --torrents no two peers of a key share a
    /// torrent, and while it is above the announces of the run every announce is a peer's
    /// first (`started`): the load of sites that refuse a member a second announce on a
    /// torrent within seconds (NexusPHP: 30 s, `Request too frequent`). HTTP and UDP.
    #[arg(long)]
    #[serde(default)]
    pub sweep: bool,
}

/// The kind of request a generator sends next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Connect,
    Announce,
    Scrape,
}

/// One simulated peer as it stands now: who it is and where it is in its torrent. Made on
/// demand from the peer's number and its one byte of state ([`Workload::peer`]).
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// Its number among all simulated peers (`0..--peers`), whichever worker holds it.
    pub index: u32,
    pub peer_id: PeerId,
    /// The port it announces (BEP 15 `port`, HTTP `port=`).
    pub port: u16,
    pub torrent: u32,
    pub seeder: bool,
    /// False until its first announce (`started`) and again after `stopped`.
    pub active: bool,
    pub key: u32,
}

/// What one announce says, drawn by [`Workload::announce`].
#[derive(Clone, Copy, Debug)]
pub struct AnnounceSpec {
    /// The announcing peer's number among all simulated peers ([`Peer::index`]).
    pub peer: u32,
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub port: u16,
    pub event: AnnounceEvent,
    pub left: u64,
    pub downloaded: u64,
    pub uploaded: u64,
    pub numwant: u32,
    pub key: u32,
}

/// Pareto-distributed index in `0..n` (see the module doc for the mapping).
pub fn pareto_index(rng: &mut fastrand::Rng, shape: f64, n: usize) -> usize {
    pareto_from_uniform(rng.f64(), shape, n)
}

/// The Pareto index in `0..n` of a uniform draw `u` in `[0, 1)`: the inverse transform,
/// `x = (1 - u)^(-1/shape)` with `x >= 1`, mapped as the module doc says.
pub fn pareto_from_uniform(u: f64, shape: f64, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let x = (1.0 - u).powf(-1.0 / shape);
    let fraction = ((x - 1.0).min(100.0)) / 100.0;
    ((fraction * n as f64) as usize).min(n - 1)
}

/// One splitmix64 step: cheap, and distinct inputs give distinct, well-mixed outputs.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in `[0, 1)` from the top 53 bits of `x`.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The info hash of torrent `i`: fixed per index (so all workers and all runs agree), and
/// spread over the whole hash space (so a tracker's sharding by hash sees real variety).
pub fn info_hash(i: u32) -> InfoHash {
    let mut h = [0u8; 20];
    let mut x = (i as u64) ^ 0x9e37_79b9_7f4a_7c15;
    for chunk in h.chunks_mut(8) {
        let b = mix(x).to_be_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    // Keep the index readable in the first bytes for debugging.
    h[..4].copy_from_slice(&i.to_be_bytes());
    InfoHash(h)
}

/// The peer id of simulated peer `i`: an Azureus-style client prefix and the index.
pub fn peer_id(i: u32, salt: u32) -> PeerId {
    let mut p = *b"-SB0001-000000000000";
    // Written digit by digit, not with `format!`: it runs once per announce.
    let mut put = |at: usize, mut v: u32| {
        for d in p[at..at + 6].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(8, salt % 1_000_000);
    put(14, i % 1_000_000);
    // Indices past a million still get distinct ids: fold the high part into the prefix.
    p[7] = b'A' + ((i / 1_000_000) % 26) as u8;
    PeerId(p)
}

/// A peer's byte of state: it has announced `started` (and not `stopped` since).
const ACTIVE: u8 = 0x80;
/// It was a leecher and announced `completed`: it seeds now.
const COMPLETED: u8 = 0x40;
/// How many times it stopped (modulo 64): each comeback joins another torrent.
const LIVES: u8 = 0x3f;

/// The workload of one generator worker: its share of peers and its random stream.
///
/// A simulated peer is not stored: its id, port, key and, for each of its lives (a life
/// ends with `stopped`), its torrent and whether it starts as a seeder are hashed from its
/// number and the seed when an announce needs them. What changes as it announces is one
/// byte ([`ACTIVE`], [`COMPLETED`], [`LIVES`]), in a zeroed vector whose pages the kernel
/// hands out on first touch. So 30 million peers cost 30 MB and no set-up time: the
/// stored `Peer` of 40 bytes each, drawn one by one before the run, took 1.2 GB and
/// seconds of set-up that an open-loop run counted as latency.
pub struct Workload {
    pub args: WorkloadArgs,
    pub rng: fastrand::Rng,
    worker: usize,
    workers: usize,
    state: Vec<u8>,
    weights: [u32; 3],
    weight_total: u32,
    /// The keys its peers' keys are taken from (`--sweep` spreads each key's peers over
    /// the torrents); 1 without passkeys.
    keys: u32,
    /// `--sweep`: the next of its peers to announce.
    cursor: usize,
}

impl Workload {
    /// Workload for worker `worker` of `workers`: peers `worker, worker + workers, ...`.
    pub fn new(args: &WorkloadArgs, worker: usize, workers: usize) -> Self {
        let rng = fastrand::Rng::with_seed(args.seed ^ (worker as u64).wrapping_mul(0x1000_0001));
        let workers = workers.max(1);
        let mine = (args.peers.max(workers) + workers - 1 - worker) / workers;
        let weights = [
            args.weight_connect,
            args.weight_announce,
            args.weight_scrape,
        ];
        let weight_total = weights.iter().sum::<u32>().max(1);
        Self {
            args: args.clone(),
            rng,
            worker,
            workers,
            state: vec![0; mine],
            weights,
            weight_total,
            keys: 1,
            cursor: 0,
        }
    }

    /// The same workload for peers whose keys are `keys` many (peer i has key i mod
    /// `keys`): what `--sweep` spreads over the torrents.
    pub fn with_keys(mut self, keys: usize) -> Self {
        self.keys = u32::try_from(keys.max(1)).unwrap_or(u32::MAX);
        self
    }

    /// How many simulated peers this worker holds.
    pub fn peer_count(&self) -> usize {
        self.state.len()
    }

    /// A hash of peer `index`'s life `life` and `what` (which property), under the seed.
    fn hash(&self, index: u32, life: u8, what: u64) -> u64 {
        mix(self.args.seed
            ^ mix((index as u64) << 8 | life as u64)
            ^ what.wrapping_mul(0xa076_1d64_78bd_642f))
    }

    /// Peer `p` (an index into this worker's share, `0..peer_count()`) as it stands now.
    pub fn peer(&self, p: usize) -> Peer {
        let index = (self.worker + p * self.workers) as u32;
        let state = self.state[p];
        let life = state & LIVES;
        let torrents = self.args.torrents.max(1) as u64;
        let torrent = if self.args.sweep && life == 0 {
            let (key, round) = (index % self.keys, index / self.keys);
            ((u64::from(key) + u64::from(round)) % torrents) as u32
        } else {
            pareto_from_uniform(
                unit(self.hash(index, life, 1)),
                self.args.pareto_shape,
                self.args.torrents,
            ) as u32
        };
        let seeder = state & COMPLETED != 0
            || unit(self.hash(index, life, 2)) < self.args.seeder_probability;
        Peer {
            index,
            peer_id: peer_id(index, self.args.seed as u32),
            port: 1024 + (index % 64_000) as u16,
            torrent,
            seeder,
            active: state & ACTIVE != 0,
            key: self.hash(index, 0, 3) as u32,
        }
    }

    /// Draws the kind of the next request by the configured weights.
    pub fn next_kind(&mut self) -> RequestKind {
        let mut r = self.rng.u32(..self.weight_total);
        for (i, w) in self.weights.iter().enumerate() {
            if r < *w {
                return [
                    RequestKind::Connect,
                    RequestKind::Announce,
                    RequestKind::Scrape,
                ][i];
            }
            r -= w;
        }
        RequestKind::Announce
    }

    /// A random torrent index by popularity.
    pub fn torrent(&mut self) -> u32 {
        pareto_index(&mut self.rng, self.args.pareto_shape, self.args.torrents) as u32
    }

    /// Next announce of peer `p` (an index into this worker's share), advancing its state:
    /// first `started`, then mostly plain re-announces, now and then `completed` or
    /// `stopped`.
    pub fn announce(&mut self, p: usize) -> AnnounceSpec {
        let peer = self.peer(p);
        let args = &self.args;
        let state = &mut self.state[p];
        let event = if !peer.active {
            *state |= ACTIVE;
            AnnounceEvent::Started
        } else {
            let r = self.rng.f64();
            if r < args.stopped_probability {
                // When it comes back it is in its next life: another torrent, as a fresh
                // leecher or seeder.
                let life = (*state & LIVES).wrapping_add(1) & LIVES;
                *state = life;
                AnnounceEvent::Stopped
            } else if !peer.seeder && r < args.stopped_probability + args.completed_probability {
                *state |= COMPLETED;
                AnnounceEvent::Completed
            } else {
                AnnounceEvent::None
            }
        };
        let seeder = peer.seeder || event == AnnounceEvent::Completed;
        AnnounceSpec {
            peer: peer.index,
            info_hash: info_hash(peer.torrent),
            peer_id: peer.peer_id,
            port: peer.port,
            event,
            left: if seeder { 0 } else { 1 << 20 },
            downloaded: if seeder { 1 << 20 } else { 0 },
            uploaded: 0,
            numwant: args.numwant,
            key: peer.key,
        }
    }

    /// The peer (an index into this worker's share) to announce next: at random, or with
    /// `--sweep` the next in turn.
    pub fn next_peer(&mut self) -> usize {
        if self.args.sweep {
            let p = self.cursor;
            self.cursor = (p + 1) % self.peer_count().max(1);
            p
        } else {
            self.rng.usize(..self.peer_count())
        }
    }

    /// Fills `out` with `scrape_hashes` popular info hashes.
    pub fn scrape(&mut self, out: &mut Vec<InfoHash>) {
        out.clear();
        for _ in 0..self.args.scrape_hashes.max(1) {
            let t = self.torrent();
            out.push(info_hash(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct W {
        #[command(flatten)]
        w: WorkloadArgs,
    }

    fn args(extra: &[&str]) -> WorkloadArgs {
        let mut v = vec!["t"];
        v.extend_from_slice(extra);
        W::parse_from(v).w
    }

    /// The share of draws below fraction `t` of the list follows the Pareto CDF
    /// 1 - (1 + 100 t)^-shape (the mapping in the module doc).
    #[test]
    fn pareto_popularity_has_the_expected_shape() {
        let mut rng = fastrand::Rng::with_seed(7);
        let n = 10_000;
        for shape in [1.0, 2.0, 4.0] {
            let mut counts = vec![0u32; n];
            let draws = 400_000;
            for _ in 0..draws {
                counts[pareto_index(&mut rng, shape, n)] += 1;
            }
            for t in [0.001, 0.01, 0.05, 0.2] {
                let below: u32 = counts[..(t * n as f64) as usize].iter().sum();
                let got = below as f64 / draws as f64;
                let want = 1.0 - (1.0 + 100.0 * t).powf(-shape);
                assert!(
                    (got - want).abs() < 0.01,
                    "shape {shape} t {t}: got {got:.4}, want {want:.4}"
                );
            }
            // Popularity falls with rank.
            assert!(counts[0] > counts[n / 10] && counts[n / 10] >= counts[n - 2]);
        }
    }

    #[test]
    fn higher_shape_is_more_skewed() {
        let mut rng = fastrand::Rng::with_seed(1);
        let top = |rng: &mut fastrand::Rng, shape| {
            (0..100_000)
                .filter(|_| pareto_index(rng, shape, 1000) < 10)
                .count()
        };
        let a = top(&mut rng, 1.0);
        let b = top(&mut rng, 3.0);
        assert!(b > a, "{b} <= {a}");
    }

    #[test]
    fn request_mix_follows_weights() {
        let a = args(&[
            "--weight-announce",
            "3",
            "--weight-scrape",
            "1",
            "--peers",
            "10",
        ]);
        let mut w = Workload::new(&a, 0, 1);
        let mut counts = [0; 3];
        for _ in 0..40_000 {
            counts[w.next_kind() as usize] += 1;
        }
        assert_eq!(counts[0], 0);
        let share = counts[2] as f64 / 40_000.0;
        assert!((share - 0.25).abs() < 0.01, "{share}");
    }

    #[test]
    fn peers_are_split_between_workers_without_overlap() {
        let a = args(&["--peers", "1001"]);
        let mut ids = std::collections::HashSet::new();
        let mut total = 0;
        for worker in 0..4 {
            let w = Workload::new(&a, worker, 4);
            total += w.peer_count();
            for p in (0..w.peer_count()).map(|p| w.peer(p)) {
                assert!(ids.insert((p.peer_id, p.port)));
            }
        }
        assert_eq!(total, 1001);
    }

    #[test]
    fn announces_start_then_reannounce() {
        let a = args(&[
            "--peers",
            "1",
            "--stopped-probability",
            "0",
            "--seeder-probability",
            "0",
        ]);
        let mut w = Workload::new(&a, 0, 1);
        assert_eq!(w.announce(0).event, AnnounceEvent::Started);
        let mut completed = 0;
        for _ in 0..1000 {
            let s = w.announce(0);
            assert_ne!(s.event, AnnounceEvent::Started);
            if s.event == AnnounceEvent::Completed {
                completed += 1;
                assert_eq!(s.left, 0);
            }
        }
        assert_eq!(completed, 1, "a leecher completes once, then seeds");
    }

    #[test]
    fn info_hashes_and_peer_ids_are_those_of_earlier_versions() {
        // Whitelists made with `shoal-bench info-hashes` before peers were derived lazily
        // (these two lines are its output then) still match the load.
        assert_eq!(
            info_hash(0).to_hex(),
            "00000000a1b965f406c45d188009454ff88bb8a8"
        );
        assert_eq!(
            info_hash(1).to_hex(),
            "00000001dbf682c9382ff84cb27281e96d1db36c"
        );
        assert_eq!(&peer_id(1_234_567, 0x5ea1).0, b"-SB0001B024225234567");
    }

    #[test]
    fn derived_peers_are_stable_and_follow_the_flags() {
        let a = args(&[
            "--peers",
            "200000",
            "--torrents",
            "1000",
            "--seeder-probability",
            "0.25",
        ]);
        let w = Workload::new(&a, 1, 2);
        assert_eq!(w.peer_count(), 100_000);
        let peers: Vec<Peer> = (0..w.peer_count()).map(|p| w.peer(p)).collect();
        // Worker 1 of 2 holds the odd peers; asking again gives the same peer.
        assert_eq!(peers[7].index, 15);
        assert_eq!(w.peer(7).torrent, peers[7].torrent);
        assert_eq!(w.peer(7).key, peers[7].key);
        assert!(peers.iter().all(|p| !p.active));
        let seeders = peers.iter().filter(|p| p.seeder).count() as f64 / 100_000.0;
        assert!((seeders - 0.25).abs() < 0.01, "{seeders}");
        // Popularity as pareto_index draws it: with shape 2, the first 1% of torrents
        // (fraction 0.01, Pareto x up to 2) get 1 - 2^-2 = 75% of the peers.
        let top = peers.iter().filter(|p| p.torrent < 10).count() as f64 / 100_000.0;
        assert!((top - 0.75).abs() < 0.01, "{top}");
    }

    #[test]
    fn a_sweep_announces_each_peer_once_in_turn_each_key_once_per_torrent() {
        // 3 keys, 10 torrents: 30 peers make every (key, torrent) pair once.
        let a = args(&["--peers", "30", "--torrents", "10", "--sweep"]);
        let mut pairs = std::collections::HashSet::new();
        let mut per_torrent = [0; 10];
        for worker in 0..4 {
            let mut w = Workload::new(&a, worker, 4).with_keys(3);
            let n = w.peer_count();
            for turn in 0..n {
                let p = w.next_peer();
                assert_eq!(p, turn, "in turn");
                let s = w.announce(p);
                assert_eq!(s.event, AnnounceEvent::Started, "each peer's first");
                let torrent = u32::from_be_bytes(s.info_hash.0[..4].try_into().unwrap());
                assert!(
                    pairs.insert((s.peer % 3, torrent)),
                    "{} on {torrent}",
                    s.peer
                );
                per_torrent[torrent as usize] += 1;
            }
            // Then from the first again: its second announce.
            assert_eq!(w.next_peer(), 0);
            assert_ne!(w.announce(0).event, AnnounceEvent::Started);
        }
        assert_eq!(pairs.len(), 30);
        assert_eq!(per_torrent, [3; 10], "popularity even");
        // Without --sweep, peers are drawn at random.
        let mut w = Workload::new(&args(&["--peers", "1000"]), 0, 1);
        assert!((0..10).map(|_| w.next_peer()).any(|p| p > 10));
    }

    #[test]
    fn a_stopped_peer_comes_back_in_another_torrent_with_the_same_identity() {
        let a = args(&[
            "--peers",
            "1",
            "--torrents",
            "1000000",
            "--stopped-probability",
            "1",
        ]);
        let mut w = Workload::new(&a, 0, 1);
        let first = w.peer(0);
        assert_eq!(w.announce(0).event, AnnounceEvent::Started);
        assert!(w.peer(0).active);
        assert_eq!(w.announce(0).event, AnnounceEvent::Stopped);
        let back = w.peer(0);
        assert!(!back.active);
        assert_ne!(back.torrent, first.torrent, "a new life, another torrent");
        assert_eq!(
            (back.peer_id, back.port, back.key),
            (first.peer_id, first.port, first.key)
        );
        let again = w.announce(0);
        assert_eq!(again.event, AnnounceEvent::Started);
        assert_eq!(again.info_hash, info_hash(back.torrent));
    }

    #[test]
    fn info_hashes_are_distinct() {
        let set: std::collections::HashSet<_> = (0..100_000).map(info_hash).collect();
        assert_eq!(set.len(), 100_000);
    }
}
