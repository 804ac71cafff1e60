//! The exchange loop. Every interval (a round) it takes what changed here and sends one
//! script call per bucket, with the WebTorrent relay and the heartbeat beside them; what
//! each call answers goes into the stores as soon as it lands.
//!
//! Calls are flights: the loop sends them and goes on, and handles each one when it lands.
//! Nothing waits for a slow call: a bucket whose call is still in flight sits out the
//! rounds until it lands, and the other buckets keep their rhythm ([`crate::pace`] has the
//! rules, with the retries of failed calls and the fast reads of buckets that came back).
//! Before, a round waited for its slowest call, and the relay and heartbeat ran one after
//! the other: a connection waiting out its 2-s timeout held the relay 2 s, then the
//! heartbeat 2 s, and the next round queued behind both, 4 s in all, while every other
//! bucket waited too.
//!
//! The connection is given up, with its calls in flight, when none of them has landed for
//! half a second ([`link::STALL`]) or one waited out its timeout ([`link::is_stuck`]), and made
//! afresh at once: the calls go again at the next retry, not at the next round. A
//! `CLUSTERDOWN` answer (a master that restarts refuses writes for two seconds) is no
//! reason to: the connection works, and redis-rs's cluster client follows the slot map
//! itself (MOVED, ASK).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{BoxFuture, FutureExt};
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::{RedisResult, Script};
use shoal_swarm::clock;
use shoal_tracker::private::Ledger;
use shoal_tracker::Core;
use tokio::sync::watch;

use crate::exchange::{Call, Exchange};
use crate::feed::{self, bucket_base, key_lifetime, BUCKETS, LOG_ROUNDS};
use crate::link::{self, unless_abandoned, Held, RedisLink, STALL};
use crate::pace::{Lanes, RETRY_EVERY};
use crate::relay::Relay;
use crate::remote::Stores;
use crate::view::ClusterView;
use crate::ws_link::Outgoing;
use crate::{ClusterSettings, WebTorrentFrontEnd};

/// The lane of the relay and the heartbeat (the buckets' are 0..BUCKETS).
const SIDE: usize = BUCKETS;

/// What landed.
enum Landed {
    /// A connection, or why there is none.
    Linked(RedisResult<RedisLink>),
    /// A bucket's call, sent through connection `link` in round `round` (`None`: a retry).
    Feed {
        link: u64,
        round: Option<u64>,
        call: Call,
        result: RedisResult<redis::Value>,
    },
    /// The relay and the heartbeat, sent through connection `link`.
    Side {
        link: u64,
        round: Option<u64>,
        ok: bool,
    },
}

/// A round's flights that have not landed yet.
struct Tally {
    id: u64,
    unix: u64,
    started: Instant,
    left: usize,
    ok: bool,
}

/// The exchange loop's state.
pub(crate) struct Round {
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
    script: Arc<Script>,
    /// When each bucket (and the side) goes out.
    lanes: Lanes,
    /// The connection in use.
    link: Option<Held>,
    links_made: u64,
    /// A connection is being made (since then).
    connecting: Option<Instant>,
    /// No connection is tried before this (one try per retry pace while Redis is away).
    connect_after: Instant,
    /// A round is due and waits for the connection.
    round_waits: bool,
    flights: FuturesUnordered<BoxFuture<'static, Landed>>,
    tallies: Vec<Tally>,
    rounds: u64,
    /// The failure was logged; "answers again" is logged when every lane goes through.
    failing: bool,
}

impl Round {
    pub fn new(
        settings: ClusterSettings,
        exchange: Exchange,
        core: Arc<Core>,
        front: WebTorrentFrontEnd,
        ledger: Option<Arc<Ledger>>,
        view: Arc<ClusterView>,
    ) -> Self {
        Self {
            relay: Relay::new(&settings.key_prefix, &settings.node),
            lanes: Lanes::new(BUCKETS + 1, settings.every),
            lifetime: key_lifetime(settings.peer_ttl),
            settings,
            exchange,
            core,
            front,
            ledger,
            view,
            script: Arc::new(Script::new(feed::FEED_SCRIPT)),
            link: None,
            links_made: 0,
            connecting: None,
            connect_after: Instant::now(),
            round_waits: false,
            flights: FuturesUnordered::new(),
            tallies: Vec::new(),
            rounds: 0,
            failing: false,
        }
    }

    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let every = self.settings.every;
        let mut next_round = Instant::now();
        loop {
            if *stop.borrow_and_update() {
                return self.last_round().await;
            }
            let now = Instant::now();
            self.unless_stalled(now);
            if now >= next_round {
                next_round += every;
                if next_round <= now {
                    next_round = now + every;
                }
                self.launch(true, now);
            } else if self.lanes.next_retry().is_some_and(|at| at <= now) {
                self.launch(false, now);
            }
            // While a connection is being made, retries wait for it (it lands, or the round).
            let mut wake = match self.lanes.next_retry() {
                Some(at) if self.connecting.is_none() => at.min(next_round),
                _ => next_round,
            };
            if let Some(at) = self.link.as_ref().and_then(Held::stalls_at) {
                wake = wake.min(at);
            }
            // Landings first: after a pause of this thread, the calls that answered meanwhile
            // count before the silence does.
            let landed = tokio::select! {
                biased;
                Some(landed) = self.flights.next(), if !self.flights.is_empty() => Some(landed),
                _ = stop.changed() => None,
                () = tokio::time::sleep_until(wake.into()) => None,
            };
            if let Some(landed) = landed {
                self.land(landed);
            }
        }
    }

    /// Stopping: the flights land (each is bounded), then one last round publishes the front
    /// ends' last changes.
    async fn last_round(mut self) {
        while let Some(landed) = self.flights.next().await {
            self.land(landed);
        }
        self.launch(true, Instant::now());
        while let Some(landed) = self.flights.next().await {
            self.land(landed);
        }
    }

    /// Sends the calls due now: at a round every lane without a call in flight, between
    /// rounds the retries due. Without a connection, one is made first.
    fn launch(&mut self, round: bool, now: Instant) {
        let unix = clock::unix_now();
        self.take_local(unix);
        if round {
            let stores = Stores {
                core: &self.core,
                link: &self.front.link,
            };
            self.exchange.expire(&stores, unix);
            self.gauges();
        }
        let Some((link_id, (link, abandoned))) =
            self.link.as_ref().map(|h| (h.id(), h.for_flight()))
        else {
            self.round_waits |= round;
            for lane in 0..=SIDE {
                if self.lanes.due(lane, round, now) {
                    self.lanes
                        .postpone(lane, now.max(self.connect_after), self.failing);
                }
            }
            if self.connecting.is_none() && now >= self.connect_after {
                self.connecting = Some(now);
                let seeds = self.settings.seeds.clone();
                self.flights
                    .push(async move { Landed::Linked(RedisLink::connect(&seeds).await) }.boxed());
            }
            return;
        };
        let round_id = round.then(|| {
            self.rounds += 1;
            self.rounds
        });
        let due: Vec<usize> = (0..BUCKETS)
            .filter(|&b| self.lanes.due(b, round, now))
            .collect();
        let calls = if round {
            self.exchange
                .plan_round(unix, |b| due.binary_search(&b).is_ok())
        } else {
            self.exchange.plan_some(|b| due.binary_search(&b).is_ok())
        };
        let mut sent = calls.len();
        metrics::counter!("shoal_cluster_redis_commands_total").increment(sent as u64);
        for call in calls {
            self.lanes.launched(call.bucket);
            let (keys, args) = feed_call(&self.settings, self.lifetime, &call);
            let (link, script) = (link.clone(), self.script.clone());
            let abandoned = abandoned.clone();
            self.flights.push(
                async move {
                    let sent = link.script(&script, keys, args);
                    let result = unless_abandoned(sent, abandoned).await;
                    Landed::Feed {
                        link: link_id,
                        round: round_id,
                        call,
                        result,
                    }
                }
                .boxed(),
            );
        }
        if self.lanes.due(SIDE, round, now) {
            self.lanes.launched(SIDE);
            sent += 1;
            let relayed = self
                .relay
                .flight(link.clone(), self.core.clone(), self.front.clone());
            let beat = heartbeat(link, &self.settings, self.view.clone(), unix);
            self.flights.push(
                async move {
                    let both = async { Ok(tokio::join!(relayed, beat)) };
                    let ok = matches!(unless_abandoned(both, abandoned).await, Ok((true, true)));
                    Landed::Side {
                        link: link_id,
                        round: round_id,
                        ok,
                    }
                }
                .boxed(),
            );
        }
        if let Some(h) = self.link.as_mut().filter(|_| sent > 0) {
            h.sent(sent, now);
        }
        if let Some(id) = round_id {
            if sent == 0 {
                self.round_counts(false, unix);
            } else {
                self.tallies.push(Tally {
                    id,
                    unix,
                    started: now,
                    left: sent,
                    ok: true,
                });
            }
        }
        tracing::debug!(
            "cluster {}: {} sent {sent} calls; {} lanes in flight, {} failing",
            self.settings.node,
            round_id.map_or("a retry".to_string(), |id| format!("round {id}")),
            self.lanes.in_flight(),
            self.lanes.failing()
        );
    }

    /// Handles what landed.
    fn land(&mut self, landed: Landed) {
        let now = Instant::now();
        match landed {
            Landed::Linked(Ok(link)) => {
                let took = self.connecting.take().map(|t| t.elapsed());
                tracing::debug!("cluster {}: connected in {took:?}", self.settings.node);
                self.links_made += 1;
                self.link = Some(Held::new(self.links_made, link, now));
                let round = std::mem::take(&mut self.round_waits);
                self.launch(round, now);
            }
            Landed::Linked(Err(e)) => {
                let took = self.connecting.take().map(|t| t.elapsed());
                tracing::debug!(
                    "cluster {}: no connection after {took:?}: {e}",
                    self.settings.node
                );
                self.connect_after = now + RETRY_EVERY.min(self.settings.every);
                self.trouble(&format!("cannot connect: {e}"));
                if std::mem::take(&mut self.round_waits) {
                    self.round_counts(false, clock::unix_now());
                }
            }
            Landed::Feed {
                link,
                round,
                call,
                result,
            } => {
                self.progress(link, now);
                let bucket = call.bucket;
                let ok = self.feed_landed(link, call, result);
                self.lanes.landed(bucket, ok, now);
                if let Some(id) = round {
                    self.tally(id, ok);
                }
                if !ok {
                    self.trouble("some calls failed");
                }
                self.adopt_clients(clock::unix_now());
            }
            Landed::Side { link, round, ok } => {
                self.progress(link, now);
                self.lanes.landed(SIDE, ok, now);
                if let Some(id) = round {
                    self.tally(id, ok);
                }
                if !ok {
                    self.trouble("the relay or the heartbeat failed");
                }
            }
        }
        if self.failing && self.lanes.failing() == 0 && self.link.is_some() {
            tracing::warn!("cluster: Redis answers again");
            self.failing = false;
            self.view
                .last_exchange_unix
                .store(clock::unix_now(), Ordering::Relaxed);
        }
    }

    /// A flight sent through connection `link` landed at `now`.
    fn progress(&mut self, link: u64, now: Instant) {
        if let Some(h) = self.link.as_mut().filter(|h| h.id() == link) {
            h.landed(now);
        }
    }

    /// Gives up the connection if it is stuck ([`link::STALL`]): its calls land at once as
    /// failures and are retried through a fresh one.
    fn unless_stalled(&mut self, now: Instant) {
        let stalled = self
            .link
            .as_ref()
            .and_then(Held::stalls_at)
            .is_some_and(|at| now >= at);
        if stalled {
            tracing::debug!(
                "cluster {}: no call landed for {STALL:?}; connecting afresh",
                self.settings.node
            );
            self.link = None;
            self.trouble("calls held by a stuck connection");
        }
    }

    /// A bucket's call landed: what it answered goes into the stores. Whether it went
    /// through.
    fn feed_landed(&mut self, link: u64, call: Call, result: RedisResult<redis::Value>) -> bool {
        let stores = Stores {
            core: &self.core,
            link: &self.front.link,
        };
        match result.map(feed::parse_answer) {
            Ok(Some((own, feeds))) => {
                self.exchange.check_own(&call, own);
                self.exchange
                    .apply(&stores, call.bucket, feeds, clock::unix_now());
                true
            }
            Ok(None) => {
                // Written, but the answer is not the script's: read it all again.
                self.exchange.forget(call.bucket);
                tracing::debug!("cluster: a malformed answer for bucket {}", call.bucket);
                false
            }
            Err(e) => {
                if link::is_stuck(&e) && self.link.as_ref().is_some_and(|h| h.id() == link) {
                    tracing::debug!(
                        "cluster {}: a call waited out its timeout ({e}); connecting afresh",
                        self.settings.node
                    );
                    self.link = None;
                }
                self.exchange.retry(call);
                false
            }
        }
    }

    /// One of round `id`'s flights landed; when the last does, the round counts.
    fn tally(&mut self, id: u64, ok: bool) {
        let Some(at) = self.tallies.iter().position(|t| t.id == id) else {
            return;
        };
        let t = &mut self.tallies[at];
        t.ok &= ok;
        t.left -= 1;
        if t.left > 0 {
            return;
        }
        let t = self.tallies.swap_remove(at);
        tracing::debug!(
            "cluster {}: round {id} landed in {:?}, ok {}",
            self.settings.node,
            t.started.elapsed(),
            t.ok
        );
        self.round_counts(t.ok, t.unix);
    }

    /// A round is over: every flight it sent landed, or it could send none (every lane still
    /// waiting for a call of an earlier round, or no connection to be had). A round that did
    /// not go through counts as an error.
    fn round_counts(&self, ok: bool, unix: u64) {
        let result = if ok { "ok" } else { "error" };
        metrics::counter!("shoal_cluster_exchanges_total", "result" => result).increment(1);
        if ok {
            self.view.last_exchange_unix.store(unix, Ordering::Relaxed);
        } else {
            self.view.errors.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("shoal_cluster_errors_total").increment(1);
        }
    }

    /// Logs the first failure of an outage.
    fn trouble(&mut self, why: &str) {
        if !self.failing {
            tracing::error!("cluster: Redis exchange failing ({why}); serving from memory");
            self.failing = true;
        }
    }

    fn gauges(&self) {
        let remote = self.exchange.remote_peers() as u64;
        self.view.remote_peers.store(remote, Ordering::Relaxed);
        metrics::gauge!("shoal_cluster_remote_peers").set(remote as f64);
        metrics::gauge!("shoal_cluster_pending_torrents")
            .set(self.exchange.pending_torrents() as f64);
    }

    /// Takes what changed here since the last launch: the swarm store's journal, the
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

    /// Hands the other nodes' client records read so far to the ledger.
    fn adopt_clients(&mut self, unix: u64) {
        let Some(ledger) = &self.ledger else {
            return;
        };
        let adopted = self.exchange.take_adopted(unix, clock::now());
        let changed = adopted.iter().filter(|c| ledger.adopt(c)).count();
        metrics::counter!("shoal_cluster_client_records_adopted_total").increment(changed as u64);
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
fn heartbeat(
    mut link: RedisLink,
    settings: &ClusterSettings,
    view: Arc<ClusterView>,
    unix: u64,
) -> impl std::future::Future<Output = bool> + Send + 'static {
    let key = format!("{}:nodes", settings.key_prefix);
    let node = settings.node.clone();
    let window = 3 * settings.every.as_secs().max(1);
    async move {
        let r: RedisResult<Vec<(String, u64)>> = async {
            link.query::<()>(redis::cmd("HSET").arg(&key).arg(&node).arg(unix))
                .await?;
            link.query(redis::cmd("HGETALL").arg(&key)).await
        }
        .await;
        metrics::counter!("shoal_cluster_redis_commands_total").increment(2);
        match r {
            Ok(nodes) => {
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
}
