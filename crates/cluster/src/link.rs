//! The connection to Redis, a cluster or one server, and the bound on every call.
//!
//! A Redis Cluster (the seeds answer `CLUSTER INFO`) goes through redis-rs's cluster client,
//! which follows the slot map and MOVED/ASK redirections; a single Redis through a
//! reconnecting connection manager. Every call is bounded by [`TIMEOUT`]: a master that is
//! down fails its slots' calls within the bound, and the caller keeps their writes for the
//! next round.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, RedisResult, Script};

/// Connecting, and each call, give up after this long.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// The connection, to a cluster or to one Redis. Cheap to clone: clones share it.
#[derive(Clone)]
pub enum RedisLink {
    Cluster(ClusterConnection),
    Single(ConnectionManager),
}

impl RedisLink {
    /// Connects to the seeds, within [`TIMEOUT`].
    pub async fn connect(seeds: &[String]) -> RedisResult<RedisLink> {
        match tokio::time::timeout(TIMEOUT, Self::open(seeds)).await {
            Ok(r) => r,
            Err(_) => Err(timed_out("connecting timed out")),
        }
    }

    async fn open(seeds: &[String]) -> RedisResult<RedisLink> {
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
                Ok(RedisLink::Cluster(client.get_async_connection().await?))
            }
            // "cluster support disabled": one Redis.
            Err(_) => Ok(RedisLink::Single(probe)),
        }
    }

    /// One command.
    pub async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            RedisLink::Cluster(c) => cmd.query_async(c).await,
            RedisLink::Single(c) => cmd.query_async(c).await,
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

fn timed_out(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, what))
}
