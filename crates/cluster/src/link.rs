//! The connection to Redis, a cluster or one server, and the bound on every call.
//!
//! A Redis Cluster (the seeds answer `CLUSTER INFO`) goes through redis-rs's cluster client,
//! which follows the slot map and MOVED/ASK redirections; a single Redis through a
//! reconnecting connection manager. Every call is bounded by [`TIMEOUT`]: a master that is
//! down fails its slots' calls within the bound, and the caller keeps their writes for the
//! next call.

use std::io;
use std::time::Duration;

use futures_util::future::{select_ok, FutureExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, FromRedisValue, RedisError, RedisResult, Script};

/// Connecting, and each call, give up after this long.
pub const TIMEOUT: Duration = Duration::from_secs(2);

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
