//! WebTorrent's offers and answers between nodes: a browser on node A offers to a peer that
//! node B serves, B's peer answers. The peers themselves travel in the bucket feeds with
//! every other protocol's; what cannot is a message for one connection, so each node has
//! an inbox, a list (`<prefix>:inbox:<node>`), that the sender's exchange pushes to and
//! the receiver's takes at its next round: an offer and its answer cross in two exchange
//! intervals at most, well inside WebTorrent's offer lifetime.
//!
//! The one-node rule holds across nodes: a forwarded offer is remembered for the receiving
//! peer exactly as a local one (`accept_remote_offer`), so an answer is relayed only if it
//! answers an offer made to that peer.

use std::future::Future;
use std::sync::Arc;

use redis::RedisResult;
use shoal_proto::ws::OfferId;
use shoal_swarm::clock;
use shoal_swarm::webtorrent::{is_remote, ConnectionId};
use shoal_tracker::Core;

use crate::link::RedisLink;
use crate::ws_link::Forwarded;
use crate::WebTorrentFrontEnd;

/// Messages taken from the inbox at most, a round.
const TAKE: usize = 1000;
/// Seconds an inbox outlives its last push (a node that is gone stops taking it).
const INBOX_LIFETIME: u64 = 60;

/// Messages for other nodes, waiting for the next round.
pub struct Relay {
    /// This node's inbox.
    inbox: String,
    prefix: String,
    outbox: Vec<(ConnectionId, Forwarded)>,
}

impl Relay {
    pub fn new(prefix: &str, node: &str) -> Self {
        Self {
            inbox: inbox(prefix, node),
            prefix: prefix.to_string(),
            outbox: Vec::new(),
        }
    }

    /// Queues `message` for the node that `node` (a remote connection id) stands for.
    pub fn queue(&mut self, node: ConnectionId, message: Forwarded) {
        self.outbox.push((node, message));
    }

    /// Pushes the queued messages to their nodes' inboxes, then takes this node's and
    /// delivers what it holds; resolves to whether the inbox could be read. The future owns
    /// what it needs (the queued messages leave the relay), so that the exchange can keep it
    /// in flight beside the bucket calls without waiting for it.
    pub fn flight(
        &mut self,
        link: RedisLink,
        core: Arc<Core>,
        front: WebTorrentFrontEnd,
    ) -> impl Future<Output = bool> + Send + 'static {
        let outbox = std::mem::take(&mut self.outbox);
        let (prefix, own) = (self.prefix.clone(), self.inbox.clone());
        async move {
            let mut commands = 0;
            // One RPUSH per message (an offer that cannot be pushed now is dropped: the
            // client makes new ones).
            for (conn, message) in outbox {
                let (Some(name), Ok(body)) =
                    (front.link.name_of(conn), serde_json::to_string(&message))
                else {
                    continue;
                };
                let key = inbox(&prefix, &name);
                let mut l = link.clone();
                let pushed: RedisResult<()> = async {
                    l.query::<()>(redis::cmd("RPUSH").arg(&key).arg(body))
                        .await?;
                    l.query::<()>(redis::cmd("EXPIRE").arg(&key).arg(INBOX_LIFETIME))
                        .await
                }
                .await;
                commands += 2;
                let result = if pushed.is_ok() { "ok" } else { "error" };
                metrics::counter!("shoal_cluster_ws_forwarded_total", "result" => result)
                    .increment(1);
            }
            let taken: RedisResult<Option<Vec<String>>> = link
                .clone()
                .query(redis::cmd("LPOP").arg(&own).arg(TAKE))
                .await;
            commands += 1;
            metrics::counter!("shoal_cluster_redis_commands_total").increment(commands);
            let Ok(messages) = taken else {
                return false;
            };
            for m in messages.unwrap_or_default() {
                let delivered = serde_json::from_str::<Forwarded>(&m)
                    .map(|f| deliver(&core, &front, &f))
                    .unwrap_or(false);
                let result = if delivered { "ok" } else { "gone" };
                metrics::counter!("shoal_cluster_ws_received_total", "result" => result)
                    .increment(1);
            }
            true
        }
    }
}

fn inbox(prefix: &str, node: &str) -> String {
    format!("{prefix}:inbox:{node}")
}

/// Delivers one message taken from this node's inbox; whether it reached a connection.
pub fn deliver(core: &Core, front: &WebTorrentFrontEnd, message: &Forwarded) -> bool {
    let Some((info_hash, to, from, offer_id)) = message.ids() else {
        return false;
    };
    let store = core.webtorrent();
    let conn = if message.offer {
        let Some(offer_id) = OfferId::new(&offer_id) else {
            return false;
        };
        let from_conn = front.link.connection_of(&message.from_node);
        store.accept_remote_offer(&info_hash, &to, (&from, from_conn), offer_id, clock::now())
    } else {
        store
            .peer_connection(&info_hash, &to)
            .filter(|c| !is_remote(*c))
    };
    match conn {
        Some(conn) => {
            front
                .delivery
                .deliver(conn, message.body.clone(), message.offer);
            true
        }
        None => false,
    }
}
