//! Request counters of the UDP front end.
//!
//! Each worker counts in plain integers ([`LocalCounters`]) and publishes them to its own
//! cache-line-aligned atomics once per batch, so counting costs nothing measurable on the
//! hot path; readers (metrics, tests, shoal-bench's cross-check) sum over workers.

use std::sync::atomic::{AtomicU64, Ordering};

/// One worker's counts since it started, in plain integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalCounters {
    pub connect: u64,
    pub announce: u64,
    pub scrape: u64,
    /// Replies that were BEP 15 errors.
    pub errors: u64,
    /// Of those, answers to announces (e.g. a torrent not allowed) ...
    pub announce_errors: u64,
    /// ... and to scrapes.
    pub scrape_errors: u64,
    /// Announces, scrapes and malformed requests dropped for a bad connection id.
    pub bad_connection_id: u64,
    /// Datagrams too short or malformed to answer at all.
    pub dropped: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Requests (connects included) dropped because their source was over its rate limit.
    pub rate_limited: u64,
    /// Requests dropped because their source is in the block list.
    pub blocked: u64,
    /// Of `bad_connection_id`: ids that were ours but too old (see `IdCheck::Expired`).
    pub expired_connection_id: u64,
    /// Datagrams from IPv4 sources (IPv4-mapped IPv6 included) ...
    pub ipv4: u64,
    /// ... and from IPv6 sources.
    pub ipv6: u64,
}

/// One worker's published counts.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerCounters {
    connect: AtomicU64,
    announce: AtomicU64,
    scrape: AtomicU64,
    errors: AtomicU64,
    announce_errors: AtomicU64,
    scrape_errors: AtomicU64,
    bad_connection_id: AtomicU64,
    dropped: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    rate_limited: AtomicU64,
    blocked: AtomicU64,
    expired_connection_id: AtomicU64,
    ipv4: AtomicU64,
    ipv6: AtomicU64,
}

impl WorkerCounters {
    /// Publishes a worker's running totals (the worker is the only writer).
    pub fn publish(&self, c: &LocalCounters) {
        self.connect.store(c.connect, Ordering::Relaxed);
        self.announce.store(c.announce, Ordering::Relaxed);
        self.scrape.store(c.scrape, Ordering::Relaxed);
        self.errors.store(c.errors, Ordering::Relaxed);
        self.announce_errors
            .store(c.announce_errors, Ordering::Relaxed);
        self.scrape_errors.store(c.scrape_errors, Ordering::Relaxed);
        self.bad_connection_id
            .store(c.bad_connection_id, Ordering::Relaxed);
        self.dropped.store(c.dropped, Ordering::Relaxed);
        self.bytes_in.store(c.bytes_in, Ordering::Relaxed);
        self.bytes_out.store(c.bytes_out, Ordering::Relaxed);
        self.rate_limited.store(c.rate_limited, Ordering::Relaxed);
        self.blocked.store(c.blocked, Ordering::Relaxed);
        self.expired_connection_id
            .store(c.expired_connection_id, Ordering::Relaxed);
        self.ipv4.store(c.ipv4, Ordering::Relaxed);
        self.ipv6.store(c.ipv6, Ordering::Relaxed);
    }

    pub fn read(&self) -> LocalCounters {
        LocalCounters {
            connect: self.connect.load(Ordering::Relaxed),
            announce: self.announce.load(Ordering::Relaxed),
            scrape: self.scrape.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            announce_errors: self.announce_errors.load(Ordering::Relaxed),
            scrape_errors: self.scrape_errors.load(Ordering::Relaxed),
            bad_connection_id: self.bad_connection_id.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            blocked: self.blocked.load(Ordering::Relaxed),
            expired_connection_id: self.expired_connection_id.load(Ordering::Relaxed),
            ipv4: self.ipv4.load(Ordering::Relaxed),
            ipv6: self.ipv6.load(Ordering::Relaxed),
        }
    }
}

impl std::ops::AddAssign for LocalCounters {
    fn add_assign(&mut self, o: Self) {
        self.connect += o.connect;
        self.announce += o.announce;
        self.scrape += o.scrape;
        self.errors += o.errors;
        self.announce_errors += o.announce_errors;
        self.scrape_errors += o.scrape_errors;
        self.bad_connection_id += o.bad_connection_id;
        self.dropped += o.dropped;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.rate_limited += o.rate_limited;
        self.blocked += o.blocked;
        self.expired_connection_id += o.expired_connection_id;
        self.ipv4 += o.ipv4;
        self.ipv6 += o.ipv6;
    }
}

/// The sum of every worker's published counts.
pub fn total(workers: &[std::sync::Arc<WorkerCounters>]) -> LocalCounters {
    let mut total = LocalCounters::default();
    for c in workers {
        total += c.read();
    }
    total
}
