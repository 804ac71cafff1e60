//! Live connections by id: where a relayed offer or answer is handed over.
//!
//! Connections run as tasks on any runtime thread; one that relays a message to another
//! looks the recipient up here and pushes onto its [`Outbox`] without waiting. A full
//! queue means the recipient is not reading as fast as messages arrive: the message is
//! dropped (and counted), never queued beyond the bound, and the connection stays open. A
//! busy client (a load tester, a desktop client seeding hundreds of torrents on one
//! connection) loses a few offers, which WebRTC peers shrug off (the offerer's next
//! announce makes new ones); disconnecting it would drop every one of its torrents from
//! their swarms. A client that stops reading altogether is closed by the connection's
//! `send_timeout` instead. Answers and offers wait in queues of their own, so offers never
//! take an answer's room (what is shed first is in `outbox`). Sharded like the stores, so
//! relays between different connections rarely meet on a lock.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_swarm::sharded::Hasher;
use shoal_swarm::webtorrent::ConnectionId;

pub use super::outbox::Delivery;
use super::outbox::Outbox;
use super::Text;

const SHARDS: usize = 64;

/// One shard of the registry.
type Shard = Mutex<HashMap<ConnectionId, Arc<Outbox>, Hasher>>;

/// The registry of live connections.
pub struct Registry {
    shards: Box<[Shard]>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
        }
    }

    fn shard(&self, id: ConnectionId) -> &Shard {
        &self.shards[id as usize % SHARDS]
    }

    pub fn insert(&self, id: ConnectionId, outbox: Arc<Outbox>) {
        self.shard(id).lock().insert(id, outbox);
    }

    pub fn remove(&self, id: ConnectionId) {
        self.shard(id).lock().remove(&id);
    }

    fn get(&self, id: ConnectionId) -> Option<Arc<Outbox>> {
        self.shard(id).lock().get(&id).cloned()
    }

    /// Queues an answer for connection `id` without waiting, in the place its offer took
    /// (see `outbox`).
    pub fn deliver(&self, id: ConnectionId, message: Text, now: u32) -> Delivery {
        self.get(id)
            .map_or(Delivery::Gone, |o| o.answer(message, now))
    }

    /// Queues a relayed offer for connection `id` without waiting; dropped if its offer
    /// queue is full.
    pub fn deliver_offer(&self, id: ConnectionId, message: Text) -> Delivery {
        self.get(id).map_or(Delivery::Gone, |o| o.offer(message))
    }

    /// Whether an offer for connection `id` would be queued now: offers are sent only to
    /// such peers.
    pub fn takes_offers(&self, id: ConnectionId) -> bool {
        self.shard(id)
            .lock()
            .get(&id)
            .is_some_and(|o| o.takes_offers())
    }

    /// How many of connection `id`'s own offers may be relayed now (see
    /// [`Outbox::answer_room`]); none for a connection not registered here.
    pub fn answer_room(&self, id: ConnectionId, now: u32) -> usize {
        self.get(id).map_or(0, |o| o.answer_room(now))
    }

    /// `n` of connection `id`'s own offers are being relayed (see
    /// [`Outbox::offers_relayed`]).
    pub fn offers_relayed(&self, id: ConnectionId, n: usize, now: u32) {
        if let Some(o) = self.get(id).filter(|_| n > 0) {
            o.offers_relayed(n, now);
        }
    }

    /// `n` of them were not queued after all (see [`Outbox::offers_not_relayed`]).
    pub fn offers_not_relayed(&self, id: ConnectionId, n: usize, now: u32) {
        if let Some(o) = self.get(id) {
            o.offers_not_relayed(n, now);
        }
    }

    /// Connections registered right now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::outbox::Bounds;
    use super::*;

    #[test]
    fn relays_reach_a_registered_connection_and_not_one_that_went() {
        let r = Registry::new();
        let outbox = Arc::new(Outbox::new(Bounds {
            offers: 2,
            answers: 4,
            offer_max_age: 60,
            offers_per_reply: 2,
        }));
        r.insert(7, outbox.clone());
        assert!(r.takes_offers(7) && !r.takes_offers(8));
        assert_eq!(r.deliver_offer(7, "o0".into()), Delivery::Queued);
        assert_eq!(r.deliver_offer(7, "o1".into()), Delivery::Queued);
        assert!(!r.takes_offers(7));
        assert_eq!(r.deliver_offer(7, "o2".into()), Delivery::Dropped);
        // The offers took none of the answers' room.
        assert_eq!(r.answer_room(7, 0), 4);
        r.offers_relayed(7, 1, 0);
        assert_eq!(r.answer_room(7, 0), 3);
        assert_eq!(r.deliver(7, "a0".into(), 0), Delivery::Queued);
        assert_eq!(r.deliver(8, "x".into(), 0), Delivery::Gone);
        assert_eq!(
            r.answer_room(8, 0),
            0,
            "not here: no offer of its is relayed"
        );
        let got: Vec<String> = std::iter::from_fn(|| outbox.pop())
            .map(|m| m.as_text().unwrap().to_owned())
            .collect();
        assert_eq!(got, ["a0", "o0", "o1"]);
        assert_eq!(r.answer_room(7, 0), 4);
        outbox.close_with(None);
        assert_eq!(r.deliver(7, "x".into(), 0), Delivery::Gone);
        assert_eq!(r.deliver_offer(7, "x".into()), Delivery::Gone);
        r.remove(7);
        assert_eq!(r.deliver(7, "x".into(), 0), Delivery::Gone);
        assert!(r.is_empty());
    }
}
