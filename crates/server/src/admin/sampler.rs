//! The sampler: a thread that takes a status-page sample every `admin.sample_interval`
//! seconds (the store's figures, the WebTorrent store's, and request rates since the sample
//! before), and keeps the metrics recorder's memory bounded between scrapes.
//!
//! One start ([`Sampler::start`]) and one stop ([`Sampler::stop`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::samples::{survey, TOP_IN_SAMPLE};
use super::tallies::TALLIES;
use super::view::TrackerView;

/// Request totals at the previous sample: when, UDP, HTTP, WebTorrent.
type Previous = Option<(Instant, u64, u64, u64)>;

/// The running sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sampler {
    /// Takes a first sample now, then one every interval, on a thread of its own.
    pub fn start(view: Arc<TrackerView>) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("sampler".into())
                .spawn(move || run(&view, &stop))
                .context("spawning the sampler")?
        };
        Ok(Self { stop, thread })
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

fn run(view: &TrackerView, stop: &AtomicBool) {
    let every = Duration::from_secs(view.config.admin.sample_interval.max(1));
    let mut previous = None;
    take_sample(view, &mut previous);
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        // Woken at once by `stop`.
        std::thread::park_timeout(Duration::from_millis(100).min(every));
        if Instant::now() < next {
            continue;
        }
        next += every;
        take_sample(view, &mut previous);
        super::metrics::upkeep();
    }
}

/// Takes a sample: walks the store, computes rates against the previous sample, and
/// keeps it.
pub fn take_sample(view: &TrackerView, previous: &mut Previous) {
    let (mut s, top) = survey(view.core.swarms(), TOP_IN_SAMPLE);
    s.top = top;
    let w = view.core.webtorrent().totals();
    (s.ws_torrents, s.ws_seeders, s.ws_leechers) = (w.torrents, w.seeders, w.leechers);
    s.unix = shoal_swarm::clock::unix_now();
    let c = view.udp_totals();
    let udp = c.connect + c.announce + c.scrape;
    let http = TALLIES.http.load(Ordering::Relaxed);
    let ws = TALLIES.ws.load(Ordering::Relaxed);
    let now = Instant::now();
    if let Some((at, u, h, w)) = *previous {
        let dt = now.duration_since(at).as_secs_f64().max(0.001);
        s.udp_rps = udp.saturating_sub(u) as f64 / dt;
        s.http_rps = http.saturating_sub(h) as f64 / dt;
        s.ws_rps = ws.saturating_sub(w) as f64 / dt;
    }
    *previous = Some((now, udp, http, ws));
    view.samples.push(s);
}
