//! Live connections by id: where a relayed offer or answer is handed over.
//!
//! Connections run as tasks on any runtime thread; one that relays a message to another
//! looks the recipient up here and pushes onto its bounded queue without waiting. A full
//! queue means the recipient is not reading fast enough: it is told to close (its task
//! sees the kick at once) instead of letting the queue, or a write buffer, grow. Sharded
//! like the stores, so relays between different connections rarely meet on a lock.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_swarm::webtorrent::ConnectionId;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Utf8Bytes;

const SHARDS: usize = 64;

/// How to reach one connection's task.
#[derive(Clone)]
pub struct Mailbox {
    pub queue: mpsc::Sender<Utf8Bytes>,
    /// Notified when the connection must close (its queue overflowed).
    pub kick: Arc<Notify>,
}

/// What became of a relayed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The connection is gone.
    Gone,
    /// The connection's queue was full: it has been told to close.
    Kicked,
}

/// The registry of live connections.
pub struct Registry {
    shards: Box<[Mutex<HashMap<ConnectionId, Mailbox>>]>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, id: ConnectionId) -> &Mutex<HashMap<ConnectionId, Mailbox>> {
        &self.shards[id as usize % SHARDS]
    }

    pub fn insert(&self, id: ConnectionId, mailbox: Mailbox) {
        self.shard(id).lock().insert(id, mailbox);
    }

    pub fn remove(&self, id: ConnectionId) {
        self.shard(id).lock().remove(&id);
    }

    /// Queues `message` for connection `id` without waiting.
    pub fn deliver(&self, id: ConnectionId, message: Utf8Bytes) -> Delivery {
        let shard = self.shard(id).lock();
        let Some(mailbox) = shard.get(&id) else {
            return Delivery::Gone;
        };
        match mailbox.queue.try_send(message) {
            Ok(()) => Delivery::Queued,
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Gone,
            Err(mpsc::error::TrySendError::Full(_)) => {
                mailbox.kick.notify_one();
                Delivery::Kicked
            }
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
    async fn a_full_queue_kicks_its_connection() {
        let r = Registry::new();
        let (tx, mut rx) = mpsc::channel(2);
        let kick = Arc::new(Notify::new());
        r.insert(
            7,
            Mailbox {
                queue: tx,
                kick: kick.clone(),
            },
        );
        assert_eq!(r.deliver(7, "a".into()), Delivery::Queued);
        assert_eq!(r.deliver(7, "b".into()), Delivery::Queued);
        assert_eq!(r.deliver(7, "c".into()), Delivery::Kicked);
        // The kick is remembered until the task looks.
        tokio::time::timeout(std::time::Duration::from_secs(1), kick.notified())
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap().as_str(), "a");
        assert_eq!(r.deliver(8, "x".into()), Delivery::Gone);
        r.remove(7);
        assert_eq!(r.deliver(7, "x".into()), Delivery::Gone);
        assert!(r.is_empty());
    }
}
