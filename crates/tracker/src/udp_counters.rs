//! Request counters of the UDP front end (`shoal-server`'s `udp` module), here so that
//! every reader (metrics, the status page, opentracker's `/stats`, shoal-bench's
//! cross-check) shares one definition with the workers that count.
//!
//! Each worker counts in plain integers ([`LocalCounters`]) and publishes them to its own
//! cache-line-aligned atomics once per batch, so counting costs nothing measurable on the
//! hot path; readers (metrics, tests, shoal-bench's cross-check) sum over workers.

use std::sync::atomic::{AtomicU64, Ordering};

/// Declares the counters once: [`LocalCounters`] (plain integers), [`WorkerCounters`] (the
/// published atomics, one cache-line-aligned set per worker), publishing, reading back and
/// summing them field by field.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// One worker's counts since it started, in plain integers.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct LocalCounters {
            $($(#[$doc])* pub $name: u64,)*
        }

        /// One worker's published counts.
        #[derive(Debug, Default)]
        #[repr(align(128))]
        pub struct WorkerCounters {
            $($name: AtomicU64,)*
        }

        impl WorkerCounters {
            /// Publishes a worker's running totals (the worker is the only writer).
            pub fn publish(&self, c: &LocalCounters) {
                $(self.$name.store(c.$name, Ordering::Relaxed);)*
            }

            pub fn read(&self) -> LocalCounters {
                LocalCounters {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }

        impl std::ops::AddAssign for LocalCounters {
            fn add_assign(&mut self, o: Self) {
                $(self.$name += o.$name;)*
            }
        }
    };
}

counters! {
    connect,
    announce,
    scrape,
    /// Replies that were BEP 15 errors.
    errors,
    /// Of those, answers to announces (e.g. a torrent not allowed) ...
    announce_errors,
    /// ... and to scrapes.
    scrape_errors,
    /// Announces, scrapes and malformed requests dropped for a bad connection id.
    bad_connection_id,
    /// Datagrams too short or malformed to answer at all.
    dropped,
    bytes_in,
    bytes_out,
    /// Requests (connects included) dropped because their source was over its rate limit.
    rate_limited,
    /// Requests dropped because their source is in the block list.
    blocked,
    /// Of `bad_connection_id`: ids that were ours but too old (see `IdCheck::Expired`).
    expired_connection_id,
    /// Datagrams from IPv4 sources (IPv4-mapped IPv6 included) ...
    ipv4,
    /// ... and from IPv6 sources.
    ipv6,
}

/// The sum of every worker's published counts.
pub fn total(workers: &[std::sync::Arc<WorkerCounters>]) -> LocalCounters {
    let mut total = LocalCounters::default();
    for c in workers {
        total += c.read();
    }
    total
}
