//! Live connections by id: where a relayed offer or answer is handed over.
//!
//! Connections run as tasks on any runtime thread; one that relays a message to another
//! looks the recipient up here and pushes onto its bounded queue without waiting. A full
//! queue means the recipient is not reading as fast as offers arrive: the message is
//! dropped (and counted), never queued beyond the bound, and the connection stays open. A
//! busy client (a load tester, a desktop client seeding hundreds of torrents on one
//! connection) loses a few offers, which WebRTC peers shrug off (the offerer's next
//! announce makes new ones); disconnecting it would drop every one of its torrents from
//! their swarms. A client that stops reading altogether is closed by the connection's
//! `send_timeout` instead. Offers, which are many and each optional, are refused once the
//! queue is three quarters full, so that answers (one per accepted offer, completing a
//! connection someone already started) keep the last quarter. Sharded like the stores, so
//! relays between different connections rarely meet on a lock.

use std::collections::HashMap;

use parking_lot::Mutex;
use shoal_swarm::sharded::Hasher;
use shoal_swarm::webtorrent::ConnectionId;
use tokio::sync::mpsc;

use super::Text;

const SHARDS: usize = 64;

/// How to reach one connection's task: its bounded queue of messages to write.
pub type Mailbox = mpsc::Sender<Text>;

/// What became of a relayed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The connection is gone.
    Gone,
    /// The connection's queue was full (for an offer: three quarters full): the message
    /// was dropped.
    Dropped,
}

/// The registry of live connections.
pub struct Registry {
    shards: Box<[Mutex<HashMap<ConnectionId, Mailbox, Hasher>>]>,
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

    fn shard(&self, id: ConnectionId) -> &Mutex<HashMap<ConnectionId, Mailbox, Hasher>> {
        &self.shards[id as usize % SHARDS]
    }

    pub fn insert(&self, id: ConnectionId, mailbox: Mailbox) {
        self.shard(id).lock().insert(id, mailbox);
    }

    pub fn remove(&self, id: ConnectionId) {
        self.shard(id).lock().remove(&id);
    }

    /// Queues `message` (an answer, or anything but an offer) for connection `id` without
    /// waiting; dropped if the queue is full.
    pub fn deliver(&self, id: ConnectionId, message: Text) -> Delivery {
        self.push(id, message, false)
    }

    /// Queues a relayed offer for connection `id` without waiting; dropped if the queue is
    /// three quarters full (the rest is kept for answers).
    pub fn deliver_offer(&self, id: ConnectionId, message: Text) -> Delivery {
        self.push(id, message, true)
    }

    /// Whether an offer for connection `id` would be queued now (it is registered and its
    /// queue is less than three quarters full): offers are sent only to such peers.
    pub fn takes_offers(&self, id: ConnectionId) -> bool {
        self.shard(id)
            .lock()
            .get(&id)
            .is_some_and(|q| q.capacity() > q.max_capacity() / 4 && !q.is_closed())
    }

    fn push(&self, id: ConnectionId, message: Text, offer: bool) -> Delivery {
        let shard = self.shard(id).lock();
        let Some(queue) = shard.get(&id) else {
            return Delivery::Gone;
        };
        if offer && queue.capacity() <= queue.max_capacity() / 4 && !queue.is_closed() {
            return Delivery::Dropped;
        }
        match queue.try_send(message) {
            Ok(()) => Delivery::Queued,
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Gone,
            Err(mpsc::error::TrySendError::Full(_)) => Delivery::Dropped,
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
    use super::*;

    #[tokio::test]
    async fn a_full_queue_drops_offers_first_then_answers_and_keeps_the_connection() {
        let r = Registry::new();
        let (tx, mut rx) = mpsc::channel(8);
        r.insert(7, tx);
        // Offers fill the queue up to three quarters: six of eight.
        for i in 0..6 {
            assert_eq!(r.deliver_offer(7, format!("o{i}").into()), Delivery::Queued);
        }
        assert!(!r.takes_offers(7), "three quarters full");
        assert_eq!(r.deliver_offer(7, "o6".into()), Delivery::Dropped);
        // Answers still get the last quarter, then are dropped too.
        assert_eq!(r.deliver(7, "a0".into()), Delivery::Queued);
        assert_eq!(r.deliver(7, "a1".into()), Delivery::Queued);
        assert_eq!(r.deliver(7, "a2".into()), Delivery::Dropped);
        // Nothing was lost but what was dropped, in order, and the reader that catches up
        // is served again.
        let mut got = Vec::new();
        while let Ok(m) = rx.try_recv() {
            got.push(std::str::from_utf8(&m).unwrap().to_owned());
        }
        assert_eq!(got, ["o0", "o1", "o2", "o3", "o4", "o5", "a0", "a1"]);
        assert!(r.takes_offers(7) && !r.takes_offers(8));
        assert_eq!(r.deliver_offer(7, "o7".into()), Delivery::Queued);
        assert_eq!(r.deliver(8, "x".into()), Delivery::Gone);
        drop(rx);
        assert_eq!(r.deliver(7, "x".into()), Delivery::Gone);
        assert_eq!(r.deliver_offer(7, "x".into()), Delivery::Gone);
        r.remove(7);
        assert_eq!(r.deliver(7, "x".into()), Delivery::Gone);
        assert!(r.is_empty());
    }
}
