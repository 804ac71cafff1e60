//! The Redis calls a round makes beside its flights' bookkeeping ([`crate::round`]): the
//! keys and arguments of one bucket's script call, and the heartbeat that says this node is
//! alive and counts the nodes that are.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use redis::RedisResult;

use crate::exchange::Call;
use crate::feed::{bucket_base, LOG_ROUNDS};
use crate::link::RedisLink;
use crate::view::ClusterView;
use crate::ClusterSettings;

/// The keys and arguments of one bucket's script call (see [`feed::FEED_SCRIPT`]).
pub(crate) fn feed_call(
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
pub(crate) fn heartbeat(
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
