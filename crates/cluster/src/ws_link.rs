//! The WebTorrent front end's link to the cluster exchange: what the front end hands over
//! (its peers' announces and stops, and offers and answers for peers that another node
//! serves), and the names of those nodes behind the remote connection ids the WebTorrent
//! store lists their peers under (`shoal_swarm::webtorrent::REMOTE_CONNECTION`).
//!
//! The front end never waits: it appends to [`WsLink`]'s outbox under a mutex and goes on;
//! the exchange thread takes the outbox once per round, writes the peers into the bucket
//! feeds with every other protocol's ([`crate::exchange`]), and pushes each forwarded
//! message to the other node's inbox ([`crate::relay`]).

use std::collections::HashMap;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use shoal_proto::{InfoHash, PeerId};
use shoal_swarm::webtorrent::{ConnectionId, REMOTE_CONNECTION};

/// An offer or an answer on its way to a peer of another node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    /// `true`: an offer (the receiver must remember it); `false`: an answer.
    pub offer: bool,
    /// Hex info hash, peer ids and offer id (binary in WebTorrent's JSON).
    pub info_hash: String,
    pub to: String,
    pub from: String,
    pub offer_id: String,
    /// The node that sent it (where an answer to this offer must go).
    pub from_node: String,
    /// The message to deliver, as the receiving peer's connection must get it.
    pub body: String,
}

impl Forwarded {
    pub fn new(
        offer: bool,
        info_hash: &InfoHash,
        (to, from): (&PeerId, &PeerId),
        offer_id: &[u8],
        from_node: &str,
        body: String,
    ) -> Self {
        Self {
            offer,
            info_hash: info_hash.to_hex(),
            to: hex::encode(to.0),
            from: hex::encode(from.0),
            offer_id: hex::encode(offer_id),
            from_node: from_node.to_string(),
            body,
        }
    }

    /// The ids, decoded; `None` for a malformed message (dropped).
    pub fn ids(&self) -> Option<(InfoHash, PeerId, PeerId, Vec<u8>)> {
        let peer = |h: &str| -> Option<PeerId> {
            let mut b = [0u8; 20];
            hex::decode_to_slice(h, &mut b).ok()?;
            Some(PeerId(b))
        };
        Some((
            InfoHash::from_hex(&self.info_hash)?,
            peer(&self.to)?,
            peer(&self.from)?,
            hex::decode(&self.offer_id).ok()?,
        ))
    }
}

/// What the exchange takes from the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// A local peer announced (`stopped`: it left, or its connection closed).
    Peer {
        info_hash: InfoHash,
        peer_id: PeerId,
        seeder: bool,
        stopped: bool,
    },
    /// A message for the node `node` stands for.
    Forward {
        node: ConnectionId,
        message: Forwarded,
    },
}

/// The link between the WebTorrent front end and the cluster exchange.
pub struct WsLink {
    node: String,
    outbox: Mutex<Vec<Outgoing>>,
    /// Names of the other nodes, by index (the low bits of their remote connection id).
    names: RwLock<(Vec<String>, HashMap<String, ConnectionId>)>,
}

impl WsLink {
    /// The link of node `node` (this node's name).
    pub fn new(node: String) -> Self {
        Self {
            node,
            outbox: Mutex::new(Vec::new()),
            names: RwLock::new((Vec::new(), HashMap::new())),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Queues `item` for the next exchange.
    pub fn send(&self, item: Outgoing) {
        self.outbox.lock().push(item);
    }

    /// Everything queued since the last take.
    pub fn take(&self) -> Vec<Outgoing> {
        std::mem::take(&mut *self.outbox.lock())
    }

    /// The remote connection id standing for node `name` (assigned on first sight).
    pub fn connection_of(&self, name: &str) -> ConnectionId {
        if let Some(c) = self.names.read().1.get(name) {
            return *c;
        }
        let mut names = self.names.write();
        if let Some(c) = names.1.get(name) {
            return *c;
        }
        let c = REMOTE_CONNECTION | names.0.len() as u64;
        names.0.push(name.to_string());
        names.1.insert(name.to_string(), c);
        c
    }

    /// The node a remote connection id stands for.
    pub fn name_of(&self, conn: ConnectionId) -> Option<String> {
        let i = (conn & !REMOTE_CONNECTION) as usize;
        self.names.read().0.get(i).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_swarm::webtorrent::is_remote;

    #[test]
    fn node_names_map_to_remote_connections_and_back() {
        let link = WsLink::new("a".into());
        let b = link.connection_of("b");
        let c = link.connection_of("c");
        assert!(is_remote(b) && is_remote(c) && b != c);
        assert_eq!(link.connection_of("b"), b);
        assert_eq!(link.name_of(c).as_deref(), Some("c"));
        assert_eq!(link.name_of(REMOTE_CONNECTION | 99), None);
    }

    #[test]
    fn forwarded_messages_carry_their_ids() {
        let f = Forwarded::new(
            true,
            &InfoHash([1; 20]),
            (&PeerId([2; 20]), &PeerId([3; 20])),
            b"offer-1",
            "a",
            "{}".into(),
        );
        let back: Forwarded = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(
            back.ids(),
            Some((
                InfoHash([1; 20]),
                PeerId([2; 20]),
                PeerId([3; 20]),
                b"offer-1".to_vec()
            ))
        );
        let bad = Forwarded {
            to: "zz".into(),
            ..back
        };
        assert_eq!(bad.ids(), None);
    }
}
