//! The full scrape (`/scrape` without `info_hash`), cached: on a big tracker its document is
//! megabytes, and building it visits every shard; doing that per request would let any
//! client make the tracker work hard. So one thread rebuilds the document
//! (`shoal_tracker::full_scrape`, kept in gzip only when gzip is on) every
//! `full_scrape_interval` seconds, and requests are served from the last build, shared
//! through an `ArcSwap` so readers never wait. The rebuild locks one shard at a time, like
//! the cleaner.

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
}

impl FullScrape {
    /// Builds the first document now, then every `every` on a thread of its own (returned,
    /// to be joined after the shutdown flag is set).
    pub fn start(
        core: Arc<Core>,
        gzip: bool,
        every: Duration,
        shutdown: Arc<AtomicBool>,
    ) -> anyhow::Result<(Self, JoinHandle<()>)> {
        let doc = Arc::new(ArcSwap::from_pointee(build(&core, gzip, 0)));
        let thread = {
            let doc = doc.clone();
            std::thread::Builder::new()
                .name("full-scrape".into())
                .spawn(move || {
                    let mut next = Instant::now() + every;
                    while !shutdown.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100).min(every));
                        if Instant::now() < next {
                            continue;
                        }
                        let started = Instant::now();
                        let d = build(&core, gzip, doc.load().torrents);
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
        Ok((Self { doc }, thread))
    }

    /// The last build.
    pub fn current(&self) -> Arc<Document> {
        self.doc.load_full()
    }
}
