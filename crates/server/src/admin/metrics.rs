//! Prometheus metrics: one recorder for the whole process, rendered at `/metrics`.
//!
//! The HTTP and WebTorrent front ends count with the `metrics` facade
//! (`counter!("shoal_requests_total", "protocol" => .., "action" => .., "result" => ..)`);
//! [`install`] makes `metrics-exporter-prometheus` the global recorder before any front
//! end starts. The UDP front end keeps its own per-worker counters (a facade call per
//! datagram would cost more than answering it), so they, and the figures of both stores
//! (UDP/HTTP and WebTorrent, as of the sampler's last sample), are copied into the
//! recorder when `/metrics` is scraped. The copy goes through a reference to our recorder
//! (`with_local_recorder`), so it lands in the registry we render even if some other
//! recorder got installed globally first. The open WebSocket connections gauge
//! (`shoal_ws_connections`) is kept live by the WebTorrent front end as connections are
//! admitted and dropped.
//!
//! The recorder is wrapped to tally requests by protocol as they are counted
//! ([`super::tallies`]), which is what the status page's requests-per-second chart reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use super::tallies::TALLIES;
use super::view::TrackerView;

/// Buckets of the latency histograms, in seconds (10 µs to 1 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];

struct Installed {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();
fn installed() -> &'static Installed {
    INSTALLED.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".into()), LATENCY_BUCKETS)
            .expect("bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        let recorder = Arc::new(recorder);
        if metrics::set_global_recorder(TallyRecorder(recorder.clone())).is_err() {
            tracing::warn!(
                "another metrics recorder is installed: facade metrics will not appear \
                 at /metrics"
            );
        }
        describe(&*recorder);
        // Every WebTorrent failure reason, at zero until it counts.
        metrics::with_local_recorder(&*recorder, crate::ws::failures::register);
        shoal_tracker::fixed_counter::recorder_installed();
        Installed { recorder, handle }
    })
}

/// Installs the recorder (once per process; later calls do nothing).
pub fn install() {
    installed();
}

/// The Prometheus text exposition of every metric, after copying in the UDP counters and
/// the store's figures.
pub fn render(view: &TrackerView) -> String {
    let inst = installed();
    metrics::with_local_recorder(&*inst.recorder, || update(view));
    inst.handle.render()
}

/// The recorder's text exposition as it stands, without the copies `render` makes.
#[cfg(test)]
pub fn render_registry() -> String {
    installed().handle.render()
}

/// Housekeeping of the recorder (drains histogram samples). Called by the sampler, so
/// memory stays bounded even if nobody scrapes.
pub fn upkeep() {
    installed().handle.run_upkeep();
}

fn describe(r: &dyn Recorder) {
    let d = |name: &'static str, unit: Option<Unit>, text: &'static str, kind: u8| {
        let (k, t) = (KeyName::from_const_str(name), SharedString::const_str(text));
        match kind {
            0 => r.describe_counter(k, unit, t),
            1 => r.describe_gauge(k, unit, t),
            _ => r.describe_histogram(k, unit, t),
        }
    };
    d(
        "shoal_requests_total",
        None,
        "Requests answered, by protocol, action and result.",
        0,
    );
    d(
        "shoal_errors_total",
        None,
        "Requests not answered, by protocol and reason.",
        0,
    );
    d(
        "shoal_bytes_total",
        Some(Unit::Bytes),
        "Datagram payload bytes, by protocol and direction.",
        0,
    );
    d(
        "shoal_rate_limited_total",
        None,
        "Requests not served because their source was over its rate limit, by protocol.",
        0,
    );
    d(
        "shoal_blocked_total",
        None,
        "Requests not served because their source is in the block list, by protocol.",
        0,
    );
    d(
        "shoal_requests_by_family_total",
        None,
        "Requests received, by protocol and source address family (IPv4-mapped IPv6 is ipv4).",
        0,
    );
    d(
        "shoal_udp_connection_id_expired_total",
        None,
        "UDP requests dropped only because their connection id was older than \
         udp.connection_id_max_age + udp.connection_id_grace.",
        0,
    );
    d("shoal_torrents", None, "Torrents in the store.", 1);
    d(
        "shoal_peers",
        None,
        "Peers in the store, by kind (seeder, leecher).",
        1,
    );
    d(
        "shoal_peers_by_family",
        None,
        "Peers in the store, by address family.",
        1,
    );
    d(
        "shoal_ws_torrents",
        None,
        "Torrents in the WebTorrent store.",
        1,
    );
    d(
        "shoal_ws_peers",
        None,
        "Peers in the WebTorrent store, by kind (seeder, leecher).",
        1,
    );
    d(
        "shoal_ws_connections",
        None,
        "Open WebSocket connections (ws and wss).",
        1,
    );
    d(
        "shoal_ws_relayed_total",
        None,
        "WebTorrent offers and answers relayed to another connection, by message and result (offers shed: not relayed, the offerer having no room left for their answers).",
        0,
    );
    d(
        "shoal_ws_replies_dropped_total",
        None,
        "WebTorrent replies dropped because 256 were already waiting for a client that was not reading (answers to it go first).",
        0,
    );
    d(
        "shoal_ws_replies_shed_total",
        None,
        "WebTorrent announces not answered under overload: none of their offers could be relayed (no places left for their answers, or every peer that could take one had a full queue).",
        0,
    );
    d(
        "shoal_ws_failures_total",
        None,
        "WebTorrent failure reasons sent to clients, by reason (every reason listed, from zero).",
        0,
    );
    d(
        "shoal_ws_disconnects_total",
        None,
        "WebSocket connections ended, by reason.",
        0,
    );
    d(
        "shoal_ws_refused_total",
        None,
        "WebSocket upgrades refused, by reason.",
        0,
    );
    d(
        "shoal_http_connections_refused_total",
        None,
        "HTTP(S) connections closed as soon as accepted, by reason: max_connections \
         (http.max_connections were open) or descriptors (no file descriptor was left).",
        0,
    );
    d(
        "shoal_private_pending_accounts",
        None,
        "Accounting sums not yet written to the database, wherever they wait (the ledger, \
         swarm slots, a batch being written or held after a failed write).",
        1,
    );
    d(
        "shoal_snapshot_age_seconds",
        Some(Unit::Seconds),
        "Seconds since this process last wrote a snapshot (absent before the first).",
        1,
    );
    d(
        "shoal_snapshot_duration_seconds",
        Some(Unit::Seconds),
        "Time the last snapshot took to write.",
        1,
    );
    d(
        "shoal_handover_waiting",
        None,
        "1 while a new process waits for its predecessor's final snapshot.",
        1,
    );
    d(
        "shoal_uptime_seconds",
        Some(Unit::Seconds),
        "Seconds since the tracker started.",
        1,
    );
    d("shoal_announce_duration_seconds", Some(Unit::Seconds), "Announce latency. UDP: time to answer one received batch that held announces (receive to send), recorded once per batch.", 2);
}

fn update(view: &TrackerView) {
    use metrics::{counter, gauge};
    let c = view.udp_totals();
    let req = |action: &'static str, result: &'static str, v: u64| {
        counter!("shoal_requests_total", "protocol" => "udp", "action" => action, "result" => result)
            .absolute(v);
    };
    req("connect", "ok", c.connect);
    req(
        "announce",
        "ok",
        c.announce.saturating_sub(c.announce_errors),
    );
    req("announce", "error", c.announce_errors);
    req("scrape", "ok", c.scrape.saturating_sub(c.scrape_errors));
    req("scrape", "error", c.scrape_errors);
    req(
        "invalid",
        "error",
        c.errors.saturating_sub(c.announce_errors + c.scrape_errors),
    );
    counter!("shoal_errors_total", "protocol" => "udp", "kind" => "bad_connection_id")
        .absolute(c.bad_connection_id);
    counter!("shoal_errors_total", "protocol" => "udp", "kind" => "malformed").absolute(c.dropped);
    counter!("shoal_udp_connection_id_expired_total").absolute(c.expired_connection_id);
    counter!("shoal_rate_limited_total", "protocol" => "udp").absolute(c.rate_limited);
    counter!("shoal_blocked_total", "protocol" => "udp").absolute(c.blocked);
    for (family, v) in [("ipv4", c.ipv4), ("ipv6", c.ipv6)] {
        counter!("shoal_requests_by_family_total", "protocol" => "udp", "family" => family)
            .absolute(v);
    }
    counter!("shoal_bytes_total", "protocol" => "udp", "direction" => "in").absolute(c.bytes_in);
    counter!("shoal_bytes_total", "protocol" => "udp", "direction" => "out").absolute(c.bytes_out);

    let s = view.samples.latest();
    gauge!("shoal_torrents").set(s.torrents as f64);
    gauge!("shoal_peers", "kind" => "seeder").set(s.seeders as f64);
    gauge!("shoal_peers", "kind" => "leecher").set(s.leechers as f64);
    gauge!("shoal_peers_by_family", "family" => "ipv4").set(s.peers_v4 as f64);
    gauge!("shoal_peers_by_family", "family" => "ipv6").set(s.peers_v6 as f64);
    gauge!("shoal_ws_torrents").set(s.ws_torrents as f64);
    gauge!("shoal_ws_peers", "kind" => "seeder").set(s.ws_seeders as f64);
    gauge!("shoal_ws_peers", "kind" => "leecher").set(s.ws_leechers as f64);
    if let (Some(age), Some(state)) = (view.snapshot_age(), &view.snapshots) {
        gauge!("shoal_snapshot_age_seconds").set(age as f64);
        gauge!("shoal_snapshot_duration_seconds").set(state.last_duration().as_secs_f64());
    }
    if let Some(lag) = view.cluster_lag() {
        gauge!("shoal_cluster_exchange_lag_seconds").set(lag as f64);
    }
    gauge!("shoal_handover_waiting").set(if view.handover_waiting() { 1.0 } else { 0.0 });
    if let Some(accounts) = &view.accounts {
        accounts.publish_pending();
    }
    gauge!("shoal_uptime_seconds").set(view.started.elapsed().as_secs_f64());
}

/// The installed recorder: Prometheus, plus the per-protocol tallies.
struct TallyRecorder(Arc<PrometheusRecorder>);

struct Tallied {
    inner: Counter,
    slot: &'static AtomicU64,
}

impl CounterFn for Tallied {
    fn increment(&self, value: u64) {
        self.inner.increment(value);
        self.slot.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        self.inner.absolute(value);
        self.slot.fetch_max(value, Ordering::Relaxed);
    }
}

impl Recorder for TallyRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_counter(key, unit, description)
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_gauge(key, unit, description)
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.0.describe_histogram(key, unit, description)
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        let inner = self.0.register_counter(key, metadata);
        if key.name() == "shoal_requests_total" {
            let slot = key
                .labels()
                .find(|l| l.key() == "protocol")
                .and_then(|l| TALLIES.slot(l.value()));
            if let Some(slot) = slot {
                return Counter::from_arc(Arc::new(Tallied { inner, slot }));
            }
        }
        inner
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.0.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        self.0.register_histogram(key, metadata)
    }
}
