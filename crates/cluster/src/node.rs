//! The exchange thread: every interval it takes what changed here (the swarm store's
//! journal, the WebTorrent front end's outbox, in private mode the ledger's client
//! records), sends one script call per bucket that writes it and reads what the other
//! nodes changed, and puts their changes into the stores. Nothing here is on a request's
//! path: the front ends answer from the stores, which are at most an interval or two
//! behind the other nodes.
//!
//! Calls of one round run concurrently (at most `IN_FLIGHT`), each bounded by the link's
//! timeout, and beside them the WebTorrent relay's list commands and the heartbeat: a
//! master that is down costs one wait a round, not three in a row. A failed call's writes
//! wait for the next round ([`Exchange::retry`]). Redis unreachable at start: the node
//! serves alone and keeps trying each round.
//!
//! The thread is started by [`ClusterNode::start`] and stopped by [`ClusterNode::stop`] (or
//! dropping it), after one last round that publishes the front ends' last changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;
use futures_util::stream::{self, StreamExt};
use redis::{RedisResult, Script};
use shoal_swarm::clock;
use shoal_tracker::private::Ledger;
use shoal_tracker::Core;
use tokio::sync::watch;

use crate::exchange::{Call, Exchange};
use crate::feed::{self, bucket_base, key_lifetime, FEED_SCRIPT, LOG_ROUNDS};
use crate::link::RedisLink;
use crate::relay::Relay;
use crate::remote::Stores;
use crate::ws_link::Outgoing;
use crate::{ClusterSettings, WebTorrentFrontEnd};

/// Calls of one round in flight at once.
const IN_FLIGHT: usize = 256;

/// What the status page and `/metrics` show of the cluster.
#[derive(Default)]
pub struct ClusterView {
    /// Nodes that exchanged within the last three intervals (this one included).
    pub nodes_seen: AtomicU64,
    /// Unix seconds of the last round that reached Redis (0: none yet).
    pub last_exchange_unix: AtomicU64,
    pub remote_peers: AtomicU64,
    pub errors: AtomicU64,
}

/// The running exchange.
pub struct ClusterNode {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    pub view: Arc<ClusterView>,
}

impl ClusterNode {
    /// Starts exchanging the changes of `core`'s stores (the swarm store's journal must be
    /// on) and of the WebTorrent front end; in private mode, of `ledger`'s client records.
    pub fn start(
        settings: ClusterSettings,
        core: Arc<Core>,
        front: WebTorrentFrontEnd,
        view: Arc<ClusterView>,
        ledger: Option<Arc<Ledger>>,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the cluster runtime")?;
        let mut exchange = Exchange::new(settings.node.clone(), u64::from(settings.peer_ttl));
        if let Some(ledger) = &ledger {
            ledger.share_records();
            exchange.keep_clients_for(u64::from(ledger.config().peer_ttl));
        }
        tracing::info!(
            "cluster: node {} exchanging with {} every {} ms",
            settings.node,
            settings.seeds.join(","),
            settings.every.as_millis()
        );
        let round = Round {
            lifetime: key_lifetime(settings.peer_ttl),
            relay: Relay::new(&settings.key_prefix, &settings.node),
            settings,
            exchange,
            core,
            front,
            ledger,
            view: view.clone(),
            script: Script::new(FEED_SCRIPT),
        };
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("cluster".into())
            .spawn(move || runtime.block_on(round.run(stopped)))
            .context("spawning the cluster exchange")?;
        Ok(Self {
            stop,
            thread: Some(thread),
            view,
        })
    }

    /// Stops the exchange thread (after one last round).
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The key of the cluster (hex in Redis, set by the first node to start); `own` if
    /// Redis cannot be reached now.
    pub fn connection_id_key(settings: &ClusterSettings, own: [u8; 16]) -> [u8; 16] {
        let run = || -> anyhow::Result<[u8; 16]> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut link = RedisLink::connect(&settings.seeds).await?;
                let key = format!("{}:connection-id-key", settings.key_prefix);
                let _: Option<String> = link
                    .query(redis::cmd("SET").arg(&key).arg(hex::encode(own)).arg("NX"))
                    .await?;
                let hex_key: String = link.query(redis::cmd("GET").arg(&key)).await?;
                let mut k = [0u8; 16];
                hex::decode_to_slice(hex_key.trim(), &mut k).context("a bad shared key")?;
                Ok(k)
            })
        };
        match run() {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(
                    "cluster: cannot read the shared connection-id key ({e:#}); this node's \
                     UDP connection ids are its own until restarted with Redis reachable"
                );
                own
            }
        }
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The exchange loop's state.
struct Round {
    settings: ClusterSettings,
    /// Seconds a node's bucket keys live after its last write.
    lifetime: u64,
    exchange: Exchange,
    /// WebTorrent messages for other nodes, and this node's inbox.
    relay: Relay,
    core: Arc<Core>,
    front: WebTorrentFrontEnd,
    /// Private mode: the accounting ledger, whose client records travel with the peers.
    ledger: Option<Arc<Ledger>>,
    view: Arc<ClusterView>,
    /// The bucket feed script ([`feed::FEED_SCRIPT`]).
    script: Script,
}

impl Round {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut link: Option<RedisLink> = None;
        let mut failing = false;
        loop {
            let started = Instant::now();
            let stopping = *stop.borrow_and_update();
            if link.is_none() {
                match RedisLink::connect(&self.settings.seeds).await {
                    Ok(l) => link = Some(l),
                    Err(e) => self.failed(&mut failing, e.to_string()),
                }
            }
            let unix = clock::unix_now();
            self.take_local(unix);
            if let Some(l) = &link {
                let ok = self.exchange_with(l.clone(), unix).await;
                self.adopt_clients(unix);
                if ok && failing {
                    tracing::warn!("cluster: Redis answers again");
                    failing = false;
                } else if !ok {
                    self.failed(&mut failing, "some calls failed".into());
                    // A cluster connection that lost a master can stay wedged after it is
                    // back (every call timing out): the next round connects afresh.
                    link = None;
                }
            }
            if stopping {
                return;
            }
            let rest = self.settings.every.saturating_sub(started.elapsed());
            tokio::select! {
                () = tokio::time::sleep(rest) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Takes what changed here since the last round: the swarm store's journal, the
    /// ledger's client records, the WebTorrent front end's peers and messages.
    fn take_local(&mut self, unix: u64) {
        self.exchange
            .record(&self.core.swarms().take_changes(), unix);
        if let Some(ledger) = &self.ledger {
            self.exchange
                .record_clients(&ledger.take_shared(), unix, clock::now());
        }
        let items = self.front.link.take();
        self.exchange.record_webtorrent(&items, unix);
        for item in items {
            if let Outgoing::Forward { node, message } = item {
                self.relay.queue(node, message);
            }
        }
    }

    /// Hands the other nodes' client records read this round to the ledger.
    fn adopt_clients(&mut self, unix: u64) {
        let Some(ledger) = &self.ledger else {
            return;
        };
        let adopted = self.exchange.take_adopted(unix, clock::now());
        let changed = adopted.iter().filter(|c| ledger.adopt(c)).count();
        metrics::counter!("shoal_cluster_client_records_adopted_total").increment(changed as u64);
    }

    fn failed(&self, failing: &mut bool, why: String) {
        self.view.errors.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("shoal_cluster_errors_total").increment(1);
        if !*failing {
            tracing::error!("cluster: Redis exchange failing ({why}); serving from memory");
            *failing = true;
        }
    }

    /// One round: every bucket's call, with the WebTorrent relay and the heartbeat beside
    /// them. Whether every call went through.
    async fn exchange_with(&mut self, link: RedisLink, unix: u64) -> bool {
        let calls = self.exchange.plan(unix);
        let n = calls.len();
        let Round {
            settings,
            lifetime,
            exchange,
            relay,
            core,
            front,
            view,
            script,
            ..
        } = self;
        let feeds = stream::iter(calls)
            .map(|call| {
                let (keys, args) = feed_call(settings, *lifetime, &call);
                let fut = link.clone().script(script, keys, args);
                async move { (call, fut.await) }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<(Call, RedisResult<redis::Value>)>>();
        let side = async {
            let relayed = relay.run(&link, core, front).await;
            relayed & heartbeat(link.clone(), settings, view, unix).await
        };
        let (results, side_ok) = tokio::join!(feeds, side);
        metrics::counter!("shoal_cluster_redis_commands_total").increment(n as u64);
        let stores = Stores {
            core,
            link: &front.link,
        };
        let mut all_ok = side_ok;
        for (call, result) in results {
            match result.map(feed::parse_answer) {
                Ok(Some((own, feeds))) => {
                    exchange.check_own(&call, own);
                    exchange.apply(&stores, call.bucket, feeds, unix);
                }
                Ok(None) => {
                    // Written, but the answer is not the script's: read it all again.
                    all_ok = false;
                    exchange.forget(call.bucket);
                    tracing::debug!("cluster: a malformed answer for bucket {}", call.bucket);
                }
                Err(_) => {
                    all_ok = false;
                    exchange.retry(call);
                }
            }
        }
        exchange.expire(&stores, unix);
        if all_ok {
            view.last_exchange_unix.store(unix, Ordering::Relaxed);
        }
        let remote = exchange.remote_peers() as u64;
        view.remote_peers.store(remote, Ordering::Relaxed);
        metrics::gauge!("shoal_cluster_remote_peers").set(remote as f64);
        metrics::gauge!("shoal_cluster_pending_torrents").set(exchange.pending_torrents() as f64);
        metrics::counter!("shoal_cluster_exchanges_total", "result" => if all_ok { "ok" } else { "error" })
            .increment(1);
        all_ok
    }
}

/// The keys and arguments of one bucket's script call (see [`feed::FEED_SCRIPT`]).
fn feed_call(
    settings: &ClusterSettings,
    lifetime: u64,
    call: &Call,
) -> (Vec<String>, Vec<Vec<u8>>) {
    let node = &settings.node;
    let base = bucket_base(&settings.key_prefix, call.bucket);
    let keys = vec![
        format!("{base}:versions"),
        format!("{base}:log:{node}"),
        format!("{base}:peers:{node}"),
    ];
    let mut args = Vec::with_capacity(5 + 2 * call.held.len());
    args.push(base.into_bytes());
    args.push(node.as_bytes().to_vec());
    args.push(lifetime.to_string().into_bytes());
    args.push(LOG_ROUNDS.to_string().into_bytes());
    args.push(call.entry());
    for (other, version) in &call.held {
        args.push(other.as_bytes().to_vec());
        args.push(version.to_string().into_bytes());
    }
    (keys, args)
}

/// Says this node is alive and counts the nodes that are.
async fn heartbeat(
    mut link: RedisLink,
    settings: &ClusterSettings,
    view: &ClusterView,
    unix: u64,
) -> bool {
    let key = format!("{}:nodes", settings.key_prefix);
    let node = &settings.node;
    let r: RedisResult<Vec<(String, u64)>> = async {
        link.query::<()>(redis::cmd("HSET").arg(&key).arg(node).arg(unix))
            .await?;
        link.query(redis::cmd("HGETALL").arg(&key)).await
    }
    .await;
    metrics::counter!("shoal_cluster_redis_commands_total").increment(2);
    match r {
        Ok(nodes) => {
            let window = 3 * settings.every.as_secs().max(1);
            let alive = nodes
                .iter()
                .filter(|(_, at)| unix.saturating_sub(*at) <= window)
                .count() as u64;
            view.nodes_seen.store(alive, Ordering::Relaxed);
            metrics::gauge!("shoal_cluster_nodes_seen").set(alive as f64);
            true
        }
        Err(_) => false,
    }
}
