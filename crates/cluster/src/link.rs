//! The connection to Redis, a cluster or one server, and the bound on every call.
//!
//! A Redis Cluster (the seeds answer `CLUSTER INFO`) goes through redis-rs's cluster client,
//! which follows the slot map and MOVED/ASK redirections; a single Redis through a
//! reconnecting connection manager. Every call is bounded by [`TIMEOUT`]: a master that is
//! down fails its slots' calls within the bound, and the caller keeps their writes for the
//! next call.

use std::io;
use std::time::{Duration, Instant};

use futures_util::future::{select_ok, FutureExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, FromRedisValue, RedisError, RedisResult, Script};
use tokio::sync::watch;

/// Connecting, and each call, give up after this long.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// A connection through which calls are in flight and none has landed for this long is
/// stuck, not slow. A call answers in about a millisecond (tens under load), and a round
/// sends 257 at once to every master: half a second of silence from all of them is not
/// Redis at work. What it is, measured with redis-rs 1.8's cluster client against a real
/// cluster: when a master dies or comes back, the client holds every call of the
/// connection while it rebuilds its slot map, and that rebuild did not end until the calls
/// were dropped, so each one waited out its own 2-s bound (`link::TIMEOUT`), the calls to
/// the masters that were fine too. Giving up the connection after half a second, then
/// retrying through a fresh one, costs a reconnect (a few milliseconds) when it is wrong.
pub const STALL: Duration = Duration::from_millis(500);

/// The connection, to a cluster or to one Redis. Cheap to clone: clones share it.
#[derive(Clone)]
pub enum RedisLink {
    Cluster(ClusterConnection),
    Single(ConnectionManager),
}

impl RedisLink {
    /// Connects through whichever seed answers first, within [`TIMEOUT`]. Every seed is
    /// tried at once, once: a seed that is down (a master killed, the first in the list as
    /// well as any other) neither holds up the others nor is waited for with a back-off,
    /// since the exchange tries again at its own pace.
    pub async fn connect(seeds: &[String]) -> RedisResult<RedisLink> {
        let tries = seeds.iter().map(|seed| Self::open(seed, seeds).boxed());
        let first = async {
            match select_ok(tries).await {
                Ok((link, _)) => Ok(link),
                Err(e) => Err(e),
            }
        };
        match tokio::time::timeout(TIMEOUT, first).await {
            Ok(r) => r,
            Err(_) => Err(timed_out("connecting timed out")),
        }
    }

    /// Connects through `seed`: a cluster client over every seed if it is a cluster node,
    /// a connection manager if it is one Redis.
    async fn open(seed: &str, seeds: &[String]) -> RedisResult<RedisLink> {
        let client = redis::Client::open(seed)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let mut probe = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
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
                Ok(RedisLink::Cluster(client.get_async_connection().await?))
            }
            // The seed did not answer: not a sign of anything.
            Err(e) if e.is_io_error() => Err(e),
            // "cluster support disabled": one Redis.
            Err(_) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(TIMEOUT))
                    .set_response_timeout(Some(TIMEOUT));
                Ok(RedisLink::Single(
                    ConnectionManager::new_with_config(client, config).await?,
                ))
            }
        }
    }

    /// One command, bounded by [`TIMEOUT`].
    pub async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        let call = async {
            match self {
                RedisLink::Cluster(c) => cmd.query_async(c).await,
                RedisLink::Single(c) => cmd.query_async(c).await,
            }
        };
        match tokio::time::timeout(TIMEOUT, call).await {
            Ok(r) => r,
            Err(_) => Err(timed_out("timed out")),
        }
    }

    /// A script call (EVALSHA, loading the script if Redis lacks it), bounded by
    /// [`TIMEOUT`].
    pub async fn script<T: FromRedisValue>(
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
        let call = async {
            match &mut self {
                RedisLink::Cluster(c) => inv.invoke_async(c).await,
                RedisLink::Single(c) => inv.invoke_async(c).await,
            }
        };
        match tokio::time::timeout(TIMEOUT, call).await {
            Ok(r) => r,
            Err(_) => Err(timed_out("timed out")),
        }
    }
}

fn timed_out(what: &'static str) -> RedisError {
    RedisError::from(io::Error::new(io::ErrorKind::TimedOut, what))
}

/// Whether a failed call waited out a timeout, here or in redis-rs: the connection itself may
/// be stuck (redis-rs's cluster client holds every call while it refreshes its slot map,
/// and that refresh can wait out a dead master's connection), so calls go through a fresh
/// one from then on. Errors that Redis answered (`CLUSTERDOWN` while a master restarts) or
/// refused connections come back at once and say nothing against the connection.
pub fn is_stuck(e: &RedisError) -> bool {
    e.is_timeout()
}

/// The connection in use: its number (a call's failure drops only the connection it used),
/// its flights, and what gives up those still in flight when it is dropped.
pub(crate) struct Held {
    id: u64,
    link: RedisLink,
    /// Flights sent through it that have not landed.
    in_flight: usize,
    /// The last landing through it, or the launch that found nothing in flight.
    quiet_since: Instant,
    /// Dropped with the connection: the calls still in flight through it land at once.
    _abandon: watch::Sender<()>,
    abandoned: watch::Receiver<()>,
}

impl Held {
    pub fn new(id: u64, link: RedisLink, now: Instant) -> Self {
        let (abandon, abandoned) = watch::channel(());
        Self {
            id,
            link,
            in_flight: 0,
            quiet_since: now,
            _abandon: abandon,
            abandoned,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// What a flight through it needs: the connection, and what says it was given up
    /// ([`unless_abandoned`]).
    pub fn for_flight(&self) -> (RedisLink, watch::Receiver<()>) {
        (self.link.clone(), self.abandoned.clone())
    }

    /// `n` flights went out through it at `now`.
    pub fn sent(&mut self, n: usize, now: Instant) {
        if self.in_flight == 0 {
            self.quiet_since = now;
        }
        self.in_flight += n;
    }

    /// One of its flights landed at `now`.
    pub fn landed(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.quiet_since = now;
    }

    /// When it counts as stuck if nothing lands before ([`STALL`]); `None`: nothing in
    /// flight.
    pub fn stalls_at(&self) -> Option<Instant> {
        (self.in_flight > 0).then(|| self.quiet_since + STALL)
    }
}

/// `call`, or an error as soon as `abandoned`'s connection is dropped. A connection found
/// stuck holds every call sent through it until each waits out its own timeout (those sent
/// a moment before the first one timed out, up to 2 s more); meanwhile their buckets would
/// sit out every retry. Given up, their writes go back to pending at once and the retry
/// goes through the fresh connection. (A call given up may have been carried out: as for
/// one that timed out, its bucket's version then moves by two, and the node writes what it
/// holds there again, [`crate::exchange::Exchange::check_own`].)
pub async fn unless_abandoned<T>(
    call: impl std::future::Future<Output = RedisResult<T>>,
    mut abandoned: watch::Receiver<()>,
) -> RedisResult<T> {
    tokio::select! {
        r = call => r,
        _ = abandoned.changed() => Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "given up: its connection was stuck",
        ))),
    }
}
