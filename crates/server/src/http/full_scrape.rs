//! The full scrape (`/scrape` without `info_hash`), cached: on a big tracker its document is
//! megabytes, and building it visits every shard; doing that per request would let any
//! client make the tracker work hard. So one thread rebuilds the document
//! (`shoal_tracker::full_scrape`, kept in gzip only when gzip is on) every
//! `full_scrape_interval` seconds while clients ask for it, and requests are served from the
//! last build, shared through an `ArcSwap` so readers never wait. The rebuild locks one
//! shard at a time, like the cleaner.
//!
//! Only while asked: a tracker of 10 million torrents that nobody full-scrapes would spend
//! 3-4.5 s of CPU a minute on rebuilds (docs/benchmarks/opentracker-scale). After a quiet
//! spell the first request is served the last build and wakes the thread, which rebuilds
//! within 100 ms. A rebuild under way is given up when the process stops, so that the
//! final snapshot does not wait for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use shoal_tracker::full_scrape::build;
pub use shoal_tracker::full_scrape::Document;
use shoal_tracker::Core;

/// The cached document, kept fresh by a thread of its own.
pub struct FullScrape {
    doc: Arc<ArcSwap<Document>>,
    /// Set by every request, taken by the thread's next rebuild.
    asked: Arc<AtomicBool>,
}

impl FullScrape {
    /// Builds the first document now, then every `every` while asked for, on a thread of
    /// its own (returned, to be joined after the shutdown flag is set).
    pub fn start(
        core: Arc<Core>,
        gzip: bool,
        every: Duration,
        shutdown: Arc<AtomicBool>,
    ) -> anyhow::Result<(Self, JoinHandle<()>)> {
        let first = build(&core, gzip, 0, &shutdown).unwrap_or_default();
        let doc = Arc::new(ArcSwap::from_pointee(first));
        let asked = Arc::new(AtomicBool::new(false));
        let thread = {
            let (doc, asked) = (doc.clone(), asked.clone());
            std::thread::Builder::new()
                .name("full-scrape".into())
                .spawn(move || {
                    let mut next = Instant::now() + every;
                    while !shutdown.load(Ordering::Relaxed) {
                        // Woken at once by the front end's `join`.
                        std::thread::park_timeout(Duration::from_millis(100).min(every));
                        if Instant::now() < next || !asked.swap(false, Ordering::Relaxed) {
                            continue;
                        }
                        let started = Instant::now();
                        let Some(d) = build(&core, gzip, doc.load().torrents, &shutdown) else {
                            break;
                        };
                        tracing::debug!(
                            "full scrape rebuilt in {:?}: {} torrents, {} bytes",
                            started.elapsed(),
                            d.torrents,
                            d.body.len()
                        );
                        doc.store(Arc::new(d));
                        next = Instant::now() + every;
                    }
                })?
        };
        Ok((Self { doc, asked }, thread))
    }

    /// The last build (and a word to the thread that it is wanted).
    pub fn current(&self) -> Arc<Document> {
        if !self.asked.load(Ordering::Relaxed) {
            self.asked.store(true, Ordering::Relaxed);
        }
        self.doc.load_full()
    }
}
