//! The (torrent, peer id) pairs one WebTorrent connection has announced: what leaves the
//! swarms when the connection closes, and what bounds the connection's footprint.
//!
//! Past `ws.max_torrents_per_connection` pairs, a new torrent does not get an error: the
//! pair announced least recently leaves its swarm (as if it had said `stopped`) to make
//! room. A desktop client seeding more torrents than the bound over one connection keeps
//! its busiest ones served, a load tester spraying announces over thousands of torrents
//! sees no error, and memory per connection stays bounded either way. Announce order is
//! kept as a queue of (pair, sequence) with the latest sequence of each pair in a map:
//! a re-announce pushes a fresh entry and leaves the old one stale, stale entries are
//! skipped when evicting and swept when they outnumber the live ones, so every operation
//! is amortised O(1).

use std::collections::{HashMap, VecDeque};

use shoal_proto::{InfoHash, PeerId};

/// One announced pair.
pub type Pair = (InfoHash, PeerId);

/// A connection's announced pairs, oldest announce first.
#[derive(Debug, Default)]
pub struct ConnectionPeers {
    /// Each live pair's latest announce.
    latest: HashMap<Pair, u64>,
    /// Announces in order; an entry whose sequence is not its pair's latest is stale.
    order: VecDeque<(Pair, u64)>,
    next: u64,
}

impl ConnectionPeers {
    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    pub fn contains(&self, pair: &Pair) -> bool {
        self.latest.contains_key(pair)
    }

    /// Records an announce of `pair` (its first or a later one): it becomes the newest.
    pub fn touch(&mut self, pair: Pair) {
        let seq = self.next;
        self.next += 1;
        self.latest.insert(pair, seq);
        self.order.push_back((pair, seq));
        if self.order.len() > 2 * self.latest.len() + 64 {
            let latest = &self.latest;
            self.order.retain(|(p, s)| latest.get(p) == Some(s));
        }
    }

    /// Forgets `pair` (it left its swarm).
    pub fn remove(&mut self, pair: &Pair) {
        self.latest.remove(pair);
    }

    /// Takes out the pair announced least recently, to make room for a new one.
    pub fn pop_oldest(&mut self) -> Option<Pair> {
        while let Some((pair, seq)) = self.order.pop_front() {
            if self.latest.get(&pair) == Some(&seq) {
                self.latest.remove(&pair);
                return Some(pair);
            }
        }
        None
    }

    /// Takes out every pair (the connection closed).
    pub fn drain(&mut self) -> impl Iterator<Item = Pair> + '_ {
        self.order.clear();
        self.latest.drain().map(|(pair, _)| pair)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(n: u8) -> Pair {
        (InfoHash([n; 20]), PeerId([n; 20]))
    }

    #[test]
    fn the_least_recently_announced_goes_first_and_stale_entries_are_swept() {
        let mut c = ConnectionPeers::default();
        for n in 1..=3 {
            c.touch(pair(n));
        }
        // Re-announcing 1 makes 2 the oldest.
        c.touch(pair(1));
        assert_eq!(c.len(), 3);
        assert_eq!(c.pop_oldest(), Some(pair(2)));
        c.remove(&pair(3));
        assert_eq!(c.pop_oldest(), Some(pair(1)));
        assert_eq!(c.pop_oldest(), None);
        assert!(c.is_empty());
        // Thousands of re-announces of a few pairs keep the queue small.
        for i in 0..10_000u32 {
            c.touch(pair((i % 5) as u8));
        }
        assert_eq!(c.len(), 5);
        assert!(c.order.len() <= 2 * 5 + 64 + 1, "{}", c.order.len());
        assert_eq!(c.pop_oldest(), Some(pair(0)));
        let mut rest: Vec<_> = c.drain().collect();
        rest.sort();
        assert_eq!(rest, [pair(1), pair(2), pair(3), pair(4)]);
        assert!(c.is_empty() && c.order.is_empty());
    }
}
