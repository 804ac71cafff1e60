//! The full scrape (`/scrape` without `info_hash`): every torrent's figures in one
//! document.
//!
//! On a big tracker this is megabytes, and building it visits every shard; doing that per
//! request would let any client make the tracker work hard. So one thread rebuilds the
//! document every `full_scrape_interval` seconds (its plain and gzip forms), and requests
//! are served from the last build, shared through an `ArcSwap` so readers never wait. The
//! rebuild locks one shard at a time, like the cleaner.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use shoal_proto::bencode::{write_scrape, ScrapeFile};
use shoal_proto::InfoHash;

use shoal_tracker::Core;

/// One build of the full-scrape document.
#[derive(Debug, Default)]
pub struct Document {
    pub plain: Vec<u8>,
    /// Present when gzip is on.
    pub gzip: Option<Vec<u8>>,
    pub torrents: usize,
}

/// Builds the document from the store as it is now, listing the torrents the policy lets
/// every client see (`Policy::lists`).
pub fn build(core: &Core, gzip: bool) -> Document {
    let (store, policy) = (core.swarms(), core.policy());
    let mut files: Vec<(InfoHash, ScrapeFile)> = Vec::new();
    store.for_each_torrent(|h, t| {
        if !policy.lists(h) {
            return;
        }
        let st = t.stats;
        files.push((
            *h,
            ScrapeFile {
                complete: st.seeders,
                downloaded: st.completed,
                incomplete: st.leechers,
            },
        ));
    });
    let mut plain = Vec::with_capacity(16 + files.len() * 80);
    write_scrape(&mut plain, &mut files);
    let gzip = gzip.then(|| {
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(plain.len() / 2 + 64),
            flate2::Compression::fast(),
        );
        // Writing into a Vec cannot fail.
        let _ = enc.write_all(&plain);
        enc.finish().unwrap_or_default()
    });
    Document {
        plain,
        gzip,
        torrents: files.len(),
    }
}

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
        let doc = Arc::new(ArcSwap::from_pointee(build(&core, gzip)));
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
                        let d = build(&core, gzip);
                        tracing::debug!(
                            "full scrape rebuilt in {:?}: {} torrents, {} bytes",
                            started.elapsed(),
                            d.torrents,
                            d.plain.len()
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
