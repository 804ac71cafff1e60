//! HTTP events opentracker counts and shoal's own metrics keep only inside the Prometheus
//! registry (or not at all): connections accepted, announces and scrapes answered, full
//! scrapes and their bytes, and the HTTP errors of opentracker's classes. The HTTP front
//! end bumps these as it goes (one relaxed atomic add each); `/stats` reads them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::stats::{Stats, Tcp};

/// The process's HTTP tallies (one tracker a process; tests that start several in one
/// process share them, which only their `/stats` would see).
pub static HTTP: HttpTally = HttpTally::new();

/// Counts of HTTP events, since start.
#[derive(Debug)]
pub struct HttpTally {
    accept: AtomicU64,
    announce: AtomicU64,
    scrape: AtomicU64,
    full_scrapes: AtomicU64,
    full_scrape_bytes: AtomicU64,
    errors: [AtomicU64; 9],
}

impl Default for HttpTally {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpTally {
    pub const fn new() -> Self {
        Self {
            accept: AtomicU64::new(0),
            announce: AtomicU64::new(0),
            scrape: AtomicU64::new(0),
            full_scrapes: AtomicU64::new(0),
            full_scrape_bytes: AtomicU64::new(0),
            errors: [const { AtomicU64::new(0) }; 9],
        }
    }

    /// A connection accepted.
    pub fn accepted(&self) {
        self.accept.fetch_add(1, Relaxed);
    }

    /// An announce (`announce`) or a scrape with info hashes answered.
    pub fn answered(&self, announce: bool) {
        let c = if announce {
            &self.announce
        } else {
            &self.scrape
        };
        c.fetch_add(1, Relaxed);
    }

    /// A full scrape of `bytes` sent.
    pub fn full_scrape(&self, bytes: usize) {
        self.full_scrapes.fetch_add(1, Relaxed);
        self.full_scrape_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// An error of class `index` ([`crate::stats::http_error`]).
    pub fn error(&self, index: usize) {
        if let Some(c) = self.errors.get(index) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Copies the counts into `stats`.
    pub fn fill(&self, stats: &mut Stats) {
        stats.tcp = Tcp {
            accept: self.accept.load(Relaxed),
            announce: self.announce.load(Relaxed),
            scrape: self.scrape.load(Relaxed),
        };
        stats.full_scrapes = self.full_scrapes.load(Relaxed);
        stats.full_scrape_bytes = self.full_scrape_bytes.load(Relaxed);
        for (to, from) in stats.http_errors.iter_mut().zip(&self.errors) {
            *to = from.load(Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_fields() {
        let t = HttpTally::new();
        t.accepted();
        t.accepted();
        t.answered(true);
        t.answered(false);
        t.full_scrape(100);
        t.error(crate::stats::http_error::NOT_FOUND);
        t.error(99);
        let mut s = Stats::default();
        t.fill(&mut s);
        assert_eq!((s.tcp.accept, s.tcp.announce, s.tcp.scrape), (2, 1, 1));
        assert_eq!((s.full_scrapes, s.full_scrape_bytes), (1, 100));
        assert_eq!(s.http_errors[7], 1);
    }
}
