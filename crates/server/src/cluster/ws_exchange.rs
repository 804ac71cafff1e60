//! WebTorrent's side of the exchange, without the network: which of this node's WebTorrent
//! peers to publish (per torrent, in the `<prefix>:{<info hash>}:ws` hash, field = peer id,
//! value as for UDP/HTTP peers), which offers and answers to forward to which node, and
//! what to do with what comes back: other nodes' peers listed in the WebTorrent store under
//! their node's remote connection id, forwarded offers remembered and delivered, answers
//! delivered to the offerer.
//!
//! Forwarded messages travel through a list per node (`<prefix>:inbox:<node>`), pushed by
//! the sender's exchange and taken by the receiver's at its next round: an offer and its
//! answer cross in two exchange intervals at most, well inside WebTorrent's offer lifetime.

use std::collections::{HashMap, HashSet};

use shoal_proto::ws::OfferId;
use shoal_proto::{InfoHash, PeerId};
use shoal_swarm::clock;
use shoal_swarm::webtorrent::{is_remote, ConnectionId};

use super::record::{Published, WATCH_ROUNDS};
use crate::ws::cluster_link::{Forwarded, Outgoing};
use crate::ws::WsContext;

/// One torrent's WebTorrent writes, and the script's ARGV for them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WsCall {
    pub info_hash: InfoHash,
    pub set: HashMap<PeerId, Published>,
    pub delete: HashSet<PeerId>,
}

impl WsCall {
    /// ARGV after now, lifetime and node (see `record::EXCHANGE_SCRIPT`).
    pub fn args(&self) -> Vec<Vec<u8>> {
        let mut args = vec![Vec::new(), self.set.len().to_string().into_bytes()];
        for (peer, p) in &self.set {
            args.push(peer.0.to_vec());
            args.push(p.encode());
        }
        args.extend(self.delete.iter().map(|p| p.0.to_vec()));
        args
    }
}

/// The node's WebTorrent exchange state.
pub struct WsExchange {
    node: String,
    peer_ttl: u64,
    pending: HashMap<InfoHash, WsCall>,
    /// Torrents with local activity, and how many more rounds to read them (see
    /// [`WATCH_ROUNDS`](super::record::WATCH_ROUNDS)).
    wanted: HashMap<InfoHash, u32>,
    remote: HashMap<InfoHash, HashSet<PeerId>>,
}

impl WsExchange {
    pub fn new(node: String, peer_ttl: u64) -> Self {
        Self {
            node,
            peer_ttl,
            pending: HashMap::new(),
            wanted: HashMap::new(),
            remote: HashMap::new(),
        }
    }

    /// Folds the front end's outbox in; returns the messages to forward, by node.
    pub fn record(&mut self, items: Vec<Outgoing>, unix: u64) -> Vec<(ConnectionId, Forwarded)> {
        let mut forwards = Vec::new();
        for item in items {
            match item {
                Outgoing::Peer {
                    info_hash,
                    peer_id,
                    seeder,
                    stopped,
                } => {
                    let call = self.pending.entry(info_hash).or_insert_with(|| WsCall {
                        info_hash,
                        ..WsCall::default()
                    });
                    if stopped {
                        call.set.remove(&peer_id);
                        call.delete.insert(peer_id);
                    } else {
                        call.delete.remove(&peer_id);
                        call.set.insert(
                            peer_id,
                            Published {
                                expires: unix + self.peer_ttl,
                                seeder,
                                node: self.node.clone(),
                                peer_id,
                            },
                        );
                    }
                    self.wanted.insert(info_hash, WATCH_ROUNDS);
                }
                Outgoing::Scraped { info_hash } => {
                    self.wanted.insert(info_hash, WATCH_ROUNDS);
                }
                Outgoing::Forward { node, message } => forwards.push((node, message)),
            }
        }
        forwards
    }

    /// This round's calls (their writes leave the pending set).
    pub fn plan(&mut self) -> Vec<WsCall> {
        let mut calls = std::mem::take(&mut self.pending);
        self.wanted.retain(|info_hash, rounds| {
            let info_hash = *info_hash;
            calls.entry(info_hash).or_insert_with(|| WsCall {
                info_hash,
                ..WsCall::default()
            });
            *rounds -= 1;
            *rounds > 0
        });
        calls.into_values().collect()
    }

    /// A failed call's writes go back (newer ones win).
    pub fn retry(&mut self, call: WsCall) {
        let info_hash = call.info_hash;
        let w = self.pending.entry(info_hash).or_insert_with(|| WsCall {
            info_hash,
            ..WsCall::default()
        });
        for (peer, p) in call.set {
            if !w.delete.contains(&peer) {
                w.set.entry(peer).or_insert(p);
            }
        }
        for peer in call.delete {
            if !w.set.contains_key(&peer) {
                w.delete.insert(peer);
            }
        }
        self.wanted.insert(info_hash, WATCH_ROUNDS);
    }

    /// Lists other nodes' live WebTorrent peers of `info_hash` and unlists those that left.
    pub fn apply(&mut self, ws: &WsContext, info_hash: &InfoHash, live: &[Vec<u8>], unix: u64) {
        let Some(link) = &ws.cluster else { return };
        let now = clock::now();
        let mut seen = HashSet::new();
        for pair in live.chunks_exact(2) {
            let (Ok(peer), Some(p)) = (
                <[u8; 20]>::try_from(&pair[0][..]),
                Published::decode(&pair[1]),
            ) else {
                continue;
            };
            if p.node == self.node || p.expires < unix {
                continue;
            }
            let left = u32::try_from(p.expires - unix).unwrap_or(u32::MAX);
            let conn = link.connection_of(&p.node);
            ws.core.webtorrent().upsert_remote(
                info_hash,
                PeerId(peer),
                conn,
                p.seeder,
                now.saturating_add(left),
            );
            seen.insert(PeerId(peer));
        }
        let before = self.remote.insert(*info_hash, seen).unwrap_or_default();
        let now_seen = &self.remote[info_hash];
        for gone in before.difference(now_seen) {
            ws.core.webtorrent().remove_remote(info_hash, gone);
        }
        if now_seen.is_empty() {
            self.remote.remove(info_hash);
        }
    }
}

/// Delivers one message taken from this node's inbox; whether it reached a connection.
pub fn deliver(ws: &WsContext, message: &Forwarded) -> bool {
    let (Some(link), Some((info_hash, to, from, offer_id))) = (&ws.cluster, message.ids()) else {
        return false;
    };
    let conn = if message.offer {
        let Some(offer_id) = OfferId::new(&offer_id) else {
            return false;
        };
        let from_conn = link.connection_of(&message.from_node);
        ws.core.webtorrent().accept_remote_offer(
            &info_hash,
            &to,
            (&from, from_conn),
            offer_id,
            clock::now(),
        )
    } else {
        ws.core
            .webtorrent()
            .peer_connection(&info_hash, &to)
            .filter(|c| !is_remote(*c))
    };
    match conn {
        Some(conn) => {
            ws.registry.deliver(conn, message.body.clone().into());
            true
        }
        None => false,
    }
}
