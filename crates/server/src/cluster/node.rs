//! The exchange thread: every `exchange_interval_ms` it takes the store's journal, sends one
//! script call per torrent with activity (its own peers' changes, read back everyone's
//! peers), and puts the answers into the store. Nothing here is on a request's path: the
//! front ends answer from the store, which is at most one interval behind the others.
//!
//! # The link
//!
//! A Redis Cluster (the seeds answer `CLUSTER INFO`) goes through redis-rs's cluster client,
//! which follows the slot map and MOVED/ASK redirections; a single Redis through a
//! reconnecting connection manager. Calls of one round run concurrently (at most
//! [`IN_FLIGHT`]), each bounded by a timeout: a master that is down fails its slots' calls
//! within the bound, their writes are kept for the next round, and every other slot goes on.
//! Redis unreachable at start: the node serves alone and keeps trying each round.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::stream::{self, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{RedisResult, Script};
use shoal_swarm::clock;

use shoal_tracker::Core;

use super::exchange::{Call, Exchange};
use super::feed::{self, bucket_base, FEED_SCRIPT, LOG_ROUNDS};
use super::record::{key_lifetime, ws_keys, EXCHANGE_SCRIPT};
use super::ws_exchange::{self, WsCall, WsExchange};
use crate::config::ClusterConfig;
use crate::ws::cluster_link::Forwarded;
use crate::ws::WsContext;
use shoal_tracker::private::Ledger;

/// Calls of one round in flight at once.
const IN_FLIGHT: usize = 256;
/// Connecting, and each call, give up after this long.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The connection, to a cluster or to one Redis.
#[derive(Clone)]
enum Link {
    Cluster(ClusterConnection),
    Single(ConnectionManager),
}

impl Link {
    async fn connect(seeds: &[String]) -> RedisResult<Link> {
        let first = redis::Client::open(seeds[0].as_str())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let mut probe = ConnectionManager::new_with_config(first, config.clone()).await?;
        let info: RedisResult<String> = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut probe)
            .await;
        match info {
            Ok(_) => {
                let client = ClusterClient::builder(seeds.to_vec())
                    .connection_timeout(TIMEOUT)
                    .response_timeout(TIMEOUT)
                    .retries(2)
                    .min_retry_wait(50)
                    .max_retry_wait(500)
                    .build()?;
                Ok(Link::Cluster(client.get_async_connection().await?))
            }
            // "cluster support disabled": one Redis.
            Err(_) => Ok(Link::Single(probe)),
        }
    }

    async fn invoke<T: redis::FromRedisValue>(
        &mut self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        match self {
            Link::Cluster(c) => invocation.invoke_async(c).await,
            Link::Single(c) => invocation.invoke_async(c).await,
        }
    }

    async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            Link::Cluster(c) => cmd.query_async(c).await,
            Link::Single(c) => cmd.query_async(c).await,
        }
    }

    /// A script call, bounded by [`TIMEOUT`].
    async fn script<T: redis::FromRedisValue>(
        mut self,
        script: &Script,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    ) -> RedisResult<T> {
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(k);
        }
        for a in args {
            inv.arg(a);
        }
        match tokio::time::timeout(TIMEOUT, self.invoke(&inv)).await {
            Ok(r) => r,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "timed out"))),
        }
    }
}

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
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub view: Arc<ClusterView>,
}

impl ClusterNode {
    /// Starts exchanging `store`'s changes (its journal must be on).
    pub fn start(
        config: &ClusterConfig,
        (core, ws): (Arc<Core>, Arc<WsContext>),
        view: Arc<ClusterView>,
        peer_ttl: u32,
        ledger: Option<Arc<Ledger>>,
    ) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the cluster runtime")?;
        let mut exchange = Exchange::new(config.node_id(), u64::from(peer_ttl));
        if let Some(ledger) = &ledger {
            ledger.share_records();
            exchange.keep_clients_for(u64::from(ledger.config().peer_ttl));
        }
        let round = Round {
            ledger,
            seeds: config.redis.clone(),
            prefix: config.key_prefix.clone(),
            every: Duration::from_millis(config.exchange_interval_ms),
            lifetime: key_lifetime(Duration::from_secs(u64::from(peer_ttl))),
            exchange,
            core,
            view: view.clone(),
            script: Script::new(FEED_SCRIPT),
            side: Side {
                node: config.node_id(),
                prefix: config.key_prefix.clone(),
                every: Duration::from_millis(config.exchange_interval_ms),
                lifetime: key_lifetime(Duration::from_secs(u64::from(peer_ttl))),
                ws_exchange: WsExchange::new(config.node_id(), u64::from(peer_ttl)),
                forwards: Vec::new(),
                ws,
                view: view.clone(),
                ws_script: Script::new(EXCHANGE_SCRIPT),
            },
        };
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("cluster".into())
                .spawn(move || runtime.block_on(round.run(&stop)))
                .context("spawning the cluster exchange")?
        };
        tracing::info!(
            "cluster: node {} exchanging with {} every {} ms",
            config.node_id(),
            config.redis.join(","),
            config.exchange_interval_ms
        );
        Ok(Self {
            stop,
            thread: Some(thread),
            view,
        })
    }

    /// Stops the exchange thread (after one last round).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The key of the cluster (hex in Redis, set by the first node to start); `own` if
    /// Redis cannot be reached now.
    pub fn connection_id_key(config: &ClusterConfig, own: [u8; 16]) -> [u8; 16] {
        let run = || -> anyhow::Result<[u8; 16]> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut link = tokio::time::timeout(TIMEOUT, Link::connect(&config.redis))
                    .await
                    .context("timed out")??;
                let key = format!("{}:connection-id-key", config.key_prefix);
                let _: bool = link
                    .query(redis::cmd("SET").arg(&key).arg(hex::encode(own)).arg("NX"))
                    .await
                    .map(|r: Option<String>| r.is_some())?;
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
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the WebTorrent script answers for one torrent: the live fields and values, and the
/// cluster's completed count.
type Answer = (Vec<Vec<u8>>, u64);

/// The exchange loop's state.
struct Round {
    seeds: Vec<String>,
    prefix: String,
    every: Duration,
    lifetime: u64,
    exchange: Exchange,
    core: Arc<Core>,
    /// Private mode: the accounting ledger, whose client records travel with the peers.
    ledger: Option<Arc<Ledger>>,
    view: Arc<ClusterView>,
    /// The bucket feed script ([`feed::FEED_SCRIPT`]).
    script: Script,
    /// WebTorrent and the heartbeat, which run beside the feed calls.
    side: Side,
}

/// The calls of a round beside the bucket feeds: WebTorrent's and the heartbeat. Apart from
/// [`Round`] so that they run concurrently with the feed calls (a master down makes each
/// call wait for its timeout: one wait a round, not three in a row).
struct Side {
    node: String,
    prefix: String,
    every: Duration,
    lifetime: u64,
    ws_exchange: WsExchange,
    /// WebTorrent messages for other nodes, taken from the front end's outbox.
    forwards: Vec<(u64, Forwarded)>,
    ws: Arc<WsContext>,
    view: Arc<ClusterView>,
    /// The WebTorrent exchange script ([`EXCHANGE_SCRIPT`]).
    ws_script: Script,
}

impl Round {
    async fn run(mut self, stop: &AtomicBool) {
        let mut link: Option<Link> = None;
        let mut failing = false;
        loop {
            let started = Instant::now();
            let stopping = stop.load(Ordering::Relaxed);
            if link.is_none() {
                match tokio::time::timeout(TIMEOUT, Link::connect(&self.seeds)).await {
                    Ok(Ok(l)) => link = Some(l),
                    Ok(Err(e)) => self.failed(&mut failing, format!("{e}")),
                    Err(_) => self.failed(&mut failing, "connecting timed out".into()),
                }
            }
            let unix = clock::unix_now();
            self.exchange
                .record(&self.core.swarms().take_changes(), unix);
            if let Some(ledger) = &self.ledger {
                self.exchange
                    .record_clients(&ledger.take_shared(), unix, clock::now());
            }
            if let Some(link) = &self.side.ws.cluster {
                let forwards = self.side.ws_exchange.record(link.take(), unix);
                self.side.forwards.extend(forwards);
            }
            if let Some(l) = &link {
                let ok = self.round(l.clone(), unix).await;
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
            let rest = self.every.saturating_sub(started.elapsed());
            let until = Instant::now() + rest;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50).min(rest)).await;
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

    /// One round: every bucket's call, with WebTorrent's and the heartbeat beside them. Whether every call went through.
    async fn round(&mut self, link: Link, unix: u64) -> bool {
        let calls = self.exchange.plan(unix);
        let n = calls.len();
        let node = self.exchange.node().to_string();
        let (script, prefix, lifetime) = (&self.script, &self.prefix, self.lifetime);
        let feeds = stream::iter(calls)
            .map(|call| {
                let base = bucket_base(prefix, call.bucket);
                let keys = [
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
                let fut = link.clone().script(script, keys.into(), args);
                async move { (call, fut.await) }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<(Call, RedisResult<redis::Value>)>>();
        let side = &mut self.side;
        let (results, side_ok) = tokio::join!(feeds, side.run(link.clone(), unix));
        metrics::counter!("shoal_cluster_redis_commands_total").increment(n as u64);
        let failed = results.iter().filter(|(_, r)| r.is_err()).count();
        let mut all_ok = failed == 0;
        for (call, result) in results {
            match result.map(feed::parse_answer) {
                Ok(Some((own, feeds))) => {
                    self.exchange.check_own(&call, own);
                    self.exchange
                        .apply(self.core.swarms(), call.bucket, feeds, unix);
                }
                Ok(None) => {
                    // Written, but the answer is not the script's: read it all again.
                    all_ok = false;
                    self.exchange.forget(call.bucket);
                    tracing::debug!("cluster: a malformed answer for bucket {}", call.bucket);
                }
                Err(_) => self.exchange.retry(call),
            }
        }
        self.exchange.expire(self.core.swarms(), unix);
        all_ok &= side_ok;
        if all_ok {
            self.view.last_exchange_unix.store(unix, Ordering::Relaxed);
        }
        let remote = self.exchange.remote_peers() as u64;
        self.view.remote_peers.store(remote, Ordering::Relaxed);
        metrics::gauge!("shoal_cluster_remote_peers").set(remote as f64);
        metrics::gauge!("shoal_cluster_pending_torrents")
            .set(self.exchange.pending_torrents() as f64);
        metrics::counter!("shoal_cluster_exchanges_total", "result" => if all_ok { "ok" } else { "error" })
            .increment(1);
        all_ok
    }
}

impl Side {
    /// WebTorrent's calls (if on), then the heartbeat. Whether all went through.
    async fn run(&mut self, link: Link, unix: u64) -> bool {
        let mut ok = true;
        if self.ws.cluster.is_some() {
            ok &= self.ws_round(&link, unix).await;
        }
        ok & self.heartbeat(link, unix).await
    }

    /// WebTorrent: publish and read the peers of torrents with local activity, push the
    /// forwarded messages to their nodes' inboxes, deliver what this node's inbox holds.
    async fn ws_round(&mut self, link: &Link, unix: u64) -> bool {
        let calls = self.ws_exchange.plan();
        let mut commands = calls.len() as u64;
        let node = self.node.clone();
        let (script, prefix) = (&self.ws_script, &self.prefix);
        let head = [
            unix.to_string().into_bytes(),
            self.lifetime.to_string().into_bytes(),
            node.as_bytes().to_vec(),
        ];
        let results: Vec<(WsCall, RedisResult<Answer>)> = stream::iter(calls)
            .map(|call| {
                let keys = ws_keys(prefix, &call.info_hash);
                let mut args = head.to_vec();
                args.extend(call.args());
                let fut = link.clone().script(script, keys.into(), args);
                async move { (call, fut.await) }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut ok = true;
        for (call, result) in results {
            match result {
                Ok((live, _)) => self
                    .ws_exchange
                    .apply(&self.ws, &call.info_hash, &live, unix),
                Err(_) => {
                    ok = false;
                    self.ws_exchange.retry(call);
                }
            }
        }
        // Forwarded messages: one RPUSH per message, to the receiving node's inbox (an
        // offer that cannot be pushed now is dropped: the client makes new ones).
        let Some(ws_link) = self.ws.cluster.clone() else {
            return ok;
        };
        for (conn, message) in std::mem::take(&mut self.forwards) {
            let (Some(name), Ok(body)) = (ws_link.name_of(conn), serde_json::to_string(&message))
            else {
                continue;
            };
            let key = format!("{prefix}:inbox:{name}");
            let mut l = link.clone();
            let pushed: RedisResult<()> = async {
                l.query::<()>(redis::cmd("RPUSH").arg(&key).arg(body))
                    .await?;
                l.query::<()>(redis::cmd("EXPIRE").arg(&key).arg(60)).await
            }
            .await;
            commands += 2;
            let result = if pushed.is_ok() { "ok" } else { "error" };
            metrics::counter!("shoal_cluster_ws_forwarded_total", "result" => result).increment(1);
        }
        let inbox = format!("{prefix}:inbox:{node}");
        let taken: RedisResult<Option<Vec<String>>> = link
            .clone()
            .query(redis::cmd("LPOP").arg(&inbox).arg(1000))
            .await;
        commands += 1;
        metrics::counter!("shoal_cluster_redis_commands_total").increment(commands);
        match taken {
            Ok(messages) => {
                for m in messages.unwrap_or_default() {
                    let delivered = serde_json::from_str::<Forwarded>(&m)
                        .map(|f| ws_exchange::deliver(&self.ws, &f))
                        .unwrap_or(false);
                    let result = if delivered { "ok" } else { "gone" };
                    metrics::counter!("shoal_cluster_ws_received_total", "result" => result)
                        .increment(1);
                }
                ok
            }
            Err(_) => false,
        }
    }

    /// Says this node is alive and counts the nodes that are.
    async fn heartbeat(&self, mut link: Link, unix: u64) -> bool {
        let key = format!("{}:nodes", self.prefix);
        let node = &self.node;
        let r: RedisResult<Vec<(String, u64)>> = async {
            link.query::<()>(redis::cmd("HSET").arg(&key).arg(node).arg(unix))
                .await?;
            link.query(redis::cmd("HGETALL").arg(&key)).await
        }
        .await;
        metrics::counter!("shoal_cluster_redis_commands_total").increment(2);
        match r {
            Ok(nodes) => {
                let window = 3 * self.every.as_secs().max(1);
                let alive = nodes
                    .iter()
                    .filter(|(_, at)| unix.saturating_sub(*at) <= window)
                    .count() as u64;
                self.view.nodes_seen.store(alive, Ordering::Relaxed);
                metrics::gauge!("shoal_cluster_nodes_seen").set(alive as f64);
                true
            }
            Err(_) => false,
        }
    }
}
