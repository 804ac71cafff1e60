//! The status page's samples: the store's figures at one moment, its largest torrents, and
//! request rates, kept for an hour.
//!
//! [`survey`] walks the store one shard at a time; the sampler thread
//! (`admin::sampler`) takes a [`Sample`] every `admin.sample_interval` seconds into
//! [`Samples`], which the status page, `/metrics` and the API read.
//!
//! Here, in the core, because a survey is a walk over the store the core owns and a
//! sample is plain figures; the server's sampler thread and admin listener only read it.

use std::collections::VecDeque;

use parking_lot::Mutex;
use shoal_proto::InfoHash;
use shoal_swarm::TorrentStats;

use crate::swarms::Swarms;

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
pub fn survey(store: &Swarms, n: usize) -> (Sample, Vec<TopTorrent>) {
    let mut s = Sample::default();
    // A min-heap of the n largest: (peers, hash) ordered so the smallest is on top.
    let mut heap = std::collections::BinaryHeap::new();
    store.for_each_torrent(|ih, t| {
        let st = t.stats;
        s.torrents += 1;
        s.seeders += u64::from(st.seeders);
        s.leechers += u64::from(st.leechers);
        s.peers_v6 += t.peers_v6 as u64;
        s.peers_v4 += t.peers_v4 as u64;
        if n == 0 {
            return;
        }
        let peers = u64::from(st.seeders) + u64::from(st.leechers);
        let entry = std::cmp::Reverse((peers, st.completed, *ih));
        if heap.len() < n {
            heap.push(entry);
        } else if heap.peek().is_some_and(|top| entry < *top) {
            heap.pop();
            heap.push(entry);
        }
    });
    let mut top: Vec<_> = heap.into_iter().map(|r| r.0).collect();
    top.sort_by(|a, b| b.cmp(a));
    let top = top
        .into_iter()
        .filter_map(|(_, _, ih)| {
            store.torrent_figures(&ih).map(|t| TopTorrent {
                info_hash: ih,
                stats: t.stats,
            })
        })
        .collect();
    (s, top)
}

/// The samples kept: an hour's worth, oldest first.
pub struct Samples {
    kept: Mutex<VecDeque<Sample>>,
    keep: usize,
}

impl Samples {
    /// Room for an hour of samples taken every `interval` seconds (at least two).
    pub fn new(interval: u64) -> Self {
        Self {
            kept: Mutex::new(VecDeque::new()),
            keep: (3600 / interval.max(1)).max(2) as usize,
        }
    }

    /// Adds a sample, dropping the oldest past an hour.
    pub fn push(&self, s: Sample) {
        let mut kept = self.kept.lock();
        while kept.len() >= self.keep {
            kept.pop_front();
        }
        kept.push_back(s);
    }

    /// The latest sample (zeros before the first).
    pub fn latest(&self) -> Sample {
        self.kept.lock().back().cloned().unwrap_or_default()
    }

    /// Every sample kept, oldest first.
    pub fn all(&self) -> Vec<Sample> {
        self.kept.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::{AnnounceEvent, CompactPeerV4, PeerId};
    use shoal_swarm::{Announce, StoreConfig};

    #[test]
    fn survey_counts_everything_and_ranks_the_largest() {
        let store = Swarms::Open(shoal_swarm::Store::new(StoreConfig::default()));
        let mut out: Vec<CompactPeerV4> = Vec::new();
        for t in 1..=30u8 {
            for p in 0..t {
                store.announce_accounted(
                    &Announce {
                        info_hash: InfoHash([t; 20]),
                        peer_id: PeerId([p; 20]),
                        addr: CompactPeerV4::new([10, 0, 0, p].into(), 1),
                        event: AnnounceEvent::Started,
                        left: u64::from(p % 2),
                        numwant: 0,
                    },
                    0,
                    &mut out,
                    None,
                );
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
