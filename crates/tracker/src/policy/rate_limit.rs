//! Per-source rate limits: a token bucket per IPv4 address (or prefix) and per IPv6 prefix
//! (a /64 by default), asked before the store on every protocol.
//!
//! # A table whose size does not depend on the attackers
//!
//! The buckets live in one fixed array of `rate_limit.buckets` slots (65,536 by default,
//! 8 bytes each: 512 KiB), allocated at start and never grown. A source's slot is a keyed
//! hash (SipHash-1-3 under a random key drawn at start) of its prefix. Sources whose
//! prefixes hash to the same slot **share one bucket**: a collision can only make the
//! limit stricter for the sources involved, never looser, and with the key unknown to
//! clients an attacker cannot aim its collisions at a chosen victim. A million spoofed or
//! real source addresses cost exactly what one costs: no entry is ever created, so there
//! is nothing to evict and nothing to grow. The alternative, a bounded LRU map of exact
//! keys, gives collision-free accounting while it is not full, but it takes a lock (or a
//! sharded one) and allocates on every new source, and under a flood of many addresses it
//! evicts the honest sources' buckets first — that is, it resets their limits to full,
//! which is the same mistake made worse. The fixed table was chosen for the hot path: no
//! lock, no allocation, one cache line touched.
//!
//! # One word per bucket (GCRA)
//!
//! A slot holds the bucket's "theoretical arrival time" in nanoseconds since start (the
//! generic cell rate algorithm, which is a token bucket written as one number): each
//! admitted request moves it one interval (`1 / requests_per_second`) into the future, and
//! a request is refused when that would put it more than `burst` intervals ahead of now.
//! So a quiet source may send `burst` requests at once, then `requests_per_second`. An
//! admitted request is one compare-and-swap on the slot; a refused one is a load only, so
//! a flood from one source across every worker keeps the line shared, not bouncing.
//!
//! # What counts
//!
//! Every question the front ends ask [`super::Policy::check`] costs a token: an announce,
//! each info hash of a scrape (a scrape of 50 hashes costs the store 50 lookups). Requests
//! that never reach the policy (malformed datagrams, forged connection ids) cost none:
//! they are dropped before, at no more cost than a refusal.
//!
//! A UDP connect costs no token but is not answered while its source has none left
//! ([`RateLimit::has_tokens`]): its source address is not proven yet (the connection id is
//! the proof), and if connects took tokens anyone could spoof a victim's address and
//! drain the victim's bucket. So only requests from proven addresses (UDP announces and
//! scrapes with a valid connection id, HTTP and WebTorrent after the TCP handshake) spend
//! tokens, and a spoofed connect flood is answered one small datagram for one, never
//! amplified.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The rate limit's settings (the config's `[rate_limit]` without its switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Requests per second a source may keep up (its bucket's refill rate).
    pub requests_per_second: u32,
    /// Requests a source may send at once after a quiet spell (its bucket's size).
    pub burst: u32,
    /// Leading bits of an IPv4 address that make one source.
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that make one source.
    pub ipv6_prefix: u8,
    /// Buckets in the table (rounded up to a power of two).
    pub buckets: usize,
}

impl Limits {
    /// `requests_per_second` in bursts of `burst`, per IPv4 address and IPv6 /64, in 65,536
    /// buckets (the config's defaults).
    pub fn new(requests_per_second: u32, burst: u32) -> Self {
        Self {
            requests_per_second,
            burst,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            buckets: 1 << 16,
        }
    }
}

/// The reason an HTTP client over its limit is sent (with status 429).
pub const RATE_LIMITED: &str = "rate limit exceeded: slow down";

/// The token buckets of every source.
pub struct RateLimit {
    slots: Box<[AtomicU64]>,
    /// `slots.len() - 1` (the length is a power of two).
    mask: usize,
    hasher: RandomState,
    /// Nanoseconds between two requests at the sustained rate.
    interval: u64,
    /// How far (ns) a bucket's arrival time may run ahead of now: `burst` intervals.
    tolerance: u64,
    v4_mask: u32,
    v6_mask: u128,
    start: Instant,
}

impl RateLimit {
    /// The buckets `config` asks for (validated: rate, burst and sizes at least 1).
    pub fn new(config: &Limits) -> Self {
        let n = config.buckets.max(1).next_power_of_two();
        let interval = 1_000_000_000 / u64::from(config.requests_per_second.max(1));
        Self {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n - 1,
            hasher: RandomState::new(),
            interval,
            tolerance: interval.saturating_mul(u64::from(config.burst.max(1))),
            v4_mask: u32::MAX
                .checked_shl(32 - u32::from(config.ipv4_prefix.min(32)))
                .unwrap_or(0),
            v6_mask: u128::MAX
                .checked_shl(128 - u32::from(config.ipv6_prefix.min(128)))
                .unwrap_or(0),
            start: Instant::now(),
        }
    }

    /// The source `ip` counts as: its prefix, IPv4 (IPv4-mapped IPv6 included) in the
    /// IPv4-mapped form so that the families never meet.
    #[inline]
    pub fn source_key(&self, ip: IpAddr) -> u128 {
        match ip.to_canonical() {
            IpAddr::V4(v4) => (0xffff << 32) | u128::from(u32::from(v4) & self.v4_mask),
            IpAddr::V6(v6) => u128::from(v6) & self.v6_mask,
        }
    }

    /// Takes a token from `ip`'s bucket; `false` when it has none left.
    #[inline]
    pub fn admit(&self, ip: IpAddr) -> bool {
        let now = self.start.elapsed().as_nanos() as u64;
        self.admit_at(self.source_key(ip), now)
    }

    /// Whether `ip`'s bucket has a token left, without taking it (for requests whose source
    /// is not proven: see the module docs).
    #[inline]
    pub fn has_tokens(&self, ip: IpAddr) -> bool {
        let now = self.start.elapsed().as_nanos() as u64;
        self.has_tokens_at(self.source_key(ip), now)
    }

    #[inline]
    fn has_tokens_at(&self, key: u128, now: u64) -> bool {
        let slot = &self.slots[self.slot(key)];
        slot.load(Ordering::Relaxed).max(now) + self.interval - now <= self.tolerance
    }

    #[inline]
    fn slot(&self, key: u128) -> usize {
        self.hasher.hash_one(key) as usize & self.mask
    }

    /// [`RateLimit::admit`] for source `key` at `now` (ns since start).
    #[inline]
    fn admit_at(&self, key: u128, now: u64) -> bool {
        let slot = &self.slots[self.slot(key)];
        let mut seen = slot.load(Ordering::Relaxed);
        loop {
            let next = seen.max(now) + self.interval;
            if next - now > self.tolerance {
                return false;
            }
            match slot.compare_exchange_weak(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => seen = actual,
            }
        }
    }

    /// Slots in the table.
    pub fn buckets(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rps: u32, burst: u32, v4: u8, v6: u8) -> RateLimit {
        RateLimit::new(&Limits {
            requests_per_second: rps,
            burst,
            ipv4_prefix: v4,
            ipv6_prefix: v6,
            buckets: 1000,
        })
    }

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_burst_then_the_sustained_rate() {
        let l = limit(10, 5, 32, 64);
        let key = l.source_key("10.0.0.1".parse().unwrap());
        let t0 = 5 * SECOND;
        assert!((0..5).all(|_| l.admit_at(key, t0)), "the burst");
        assert!(!l.admit_at(key, t0), "over the burst");
        assert!(!l.admit_at(key, t0 + SECOND / 20), "half an interval later");
        assert!(l.admit_at(key, t0 + SECOND / 10), "one interval later");
        assert!(!l.admit_at(key, t0 + SECOND / 10));
        // After a quiet spell the whole burst is back, no more.
        assert!(!l.has_tokens_at(key, t0 + SECOND / 10));
        let later = t0 + 60 * SECOND;
        assert!(
            (0..20).all(|_| l.has_tokens_at(key, later)),
            "looking takes none"
        );
        assert_eq!((0..20).filter(|_| l.admit_at(key, later)).count(), 5);
        // Another source has its own bucket (1000 slots: rounded up to 1024).
        assert_eq!(l.buckets(), 1024);
        let other = l.source_key("10.0.0.2".parse().unwrap());
        assert!(l.admit_at(other, later));
    }

    #[test]
    fn prefixes_make_one_source_and_mapped_addresses_are_ipv4() {
        let l = limit(1, 1, 24, 64);
        let key = |s: &str| l.source_key(s.parse().unwrap());
        assert_eq!(key("10.0.0.1"), key("10.0.0.200"));
        assert_ne!(key("10.0.0.1"), key("10.0.1.1"));
        assert_eq!(key("::ffff:10.0.0.9"), key("10.0.0.1"));
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::2"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        // The IPv6 address ::10.0.0.1 is not the IPv4 address 10.0.0.1.
        let full = limit(1, 1, 32, 128);
        assert_ne!(
            full.source_key("::a00:1".parse().unwrap()),
            full.source_key("10.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn many_sources_cost_no_memory() {
        let l = limit(1, 1, 32, 64);
        let before = l.buckets();
        for i in 0..100_000u32 {
            l.admit(IpAddr::from(i.to_be_bytes()));
        }
        assert_eq!(l.buckets(), before);
    }
}
