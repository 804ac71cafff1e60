//! One connection's outgoing messages, in three bounded queues, and the order the writer
//! takes them in: what a client that reads more slowly than it is sent to gets, and what
//! it loses.
//!
//! - **answers** relayed to this connection (each completes a WebRTC connection that this
//!   client started with an offer): written first, always;
//! - **replies** to the client's own messages (announce and scrape replies, failures,
//!   pings, the closing frame);
//! - **offers** relayed to this connection from other peers.
//!
//! When the socket takes everything, the queues stay empty and every message goes out as
//! it comes. When it does not (the client reads more slowly than it is sent to), the
//! writer takes every waiting answer, then replies and offers in turn, [`OFFERS_PER_REPLY`]
//! offers for each reply, and what does not fit is shed, in this order:
//!
//! 1. offers: a connection whose offer queue is full is not chosen as an offer's
//!    recipient (the offer goes to another peer of the swarm, or nowhere), and a connection
//!    with answers waiting does not have its own offers relayed (they would bring more
//!    answers than it reads; see [`Outbox::takes_answers`]);
//! 2. replies: past [`REPLY_BACKLOG`] waiting, a new one is dropped
//!    (`shoal_ws_replies_dropped_total`); the announce itself was served;
//! 3. answers, last: only past `ws.outgoing_queue` waiting, which the first rule keeps
//!    them from reaching.
//!
//! Why replies give way to answers: a client that reads one message for each it sends
//! (aquatic_ws_load_test's do) sends an answer for every offer it reads, and an answer has
//! no reply; every answer it is then sent needs a read that no message of its own paid for.
//! If every reply went out, answers could only be read in the place of offers, and the
//! offers read would fall until almost none were (each offer read is an answer to
//! deliver); the answers delivered are exactly the replies not delivered. A reply
//! carries the swarm's counts and the interval, which the client's next announce gets
//! again; an answer lost wastes an offer, the answering browser's ICE work and the
//! announce that carried the offer.
//!
//! One lock per connection, held for a push or a pop; no allocation while idle (the
//! queues allocate when messages wait and give the memory back when a burst is over).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_websockets::Message;

use super::Text;

/// Replies waiting for the writer past which new ones are dropped. While the writer waits
/// for the client to read, the reader goes on reading: the client may itself be waiting to
/// write before it reads again (one message read per message sent, with megabytes of
/// relayed messages ahead of it in the TCP buffers), and a reader that stopped would bring
/// back the wait on each other. A client that does not read at all is still closed by
/// `send_timeout`, through the writer.
pub const REPLY_BACKLOG: usize = 256;

/// Offers written for each reply while both wait (see the module's notes).
pub const OFFERS_PER_REPLY: u8 = 2;

/// What became of a message pushed onto a connection's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The connection is gone (or closing).
    Gone,
    /// Its queue was full: the message was dropped, the connection kept.
    Dropped,
}

#[derive(Default)]
struct Queues {
    answers: VecDeque<Text>,
    replies: VecDeque<Message>,
    offers: VecDeque<Text>,
    /// Offers written since the last reply.
    offers_in_a_row: u8,
    /// The reader has ended: relays are refused, the replies left are written.
    closed: bool,
}

/// A connection's outgoing queues (see the module's notes). Shared by its reader (replies),
/// its writer (everything) and, through the registry, the connections that relay to it.
pub struct Outbox {
    queues: Mutex<Queues>,
    /// Woken on every push.
    pub(super) ready: Notify,
    /// `ws.outgoing_queue`: the bound on answers, and on offers.
    relay_bound: usize,
    closed: AtomicBool,
}

impl Outbox {
    pub fn new(relay_bound: usize) -> Self {
        Self {
            queues: Mutex::default(),
            ready: Notify::new(),
            relay_bound: relay_bound.max(1),
            closed: AtomicBool::new(false),
        }
    }

    /// Queues a reply to the client's own message unless [`REPLY_BACKLOG`] wait already.
    pub fn reply(&self, m: Message) -> Delivery {
        let mut q = self.queues.lock();
        if q.closed {
            return Delivery::Gone;
        }
        if q.replies.len() >= REPLY_BACKLOG {
            return Delivery::Dropped;
        }
        q.replies.push_back(m);
        drop(q);
        self.ready.notify_one();
        Delivery::Queued
    }

    /// Queues an answer relayed to this connection, unless `ws.outgoing_queue` wait.
    pub fn answer(&self, t: Text) -> Delivery {
        self.relay(t, |q| &mut q.answers)
    }

    /// Queues an offer relayed to this connection, unless `ws.outgoing_queue` wait.
    pub fn offer(&self, t: Text) -> Delivery {
        self.relay(t, |q| &mut q.offers)
    }

    fn relay(&self, t: Text, queue: impl Fn(&mut Queues) -> &mut VecDeque<Text>) -> Delivery {
        let mut q = self.queues.lock();
        if q.closed {
            return Delivery::Gone;
        }
        let bound = self.relay_bound;
        let queue = queue(&mut q);
        if queue.len() >= bound {
            return Delivery::Dropped;
        }
        queue.push_back(t);
        drop(q);
        self.ready.notify_one();
        Delivery::Queued
    }

    /// Whether an offer pushed now would be queued: offers are sent only to such peers.
    pub fn takes_offers(&self) -> bool {
        let q = self.queues.lock();
        !q.closed && q.offers.len() < self.relay_bound
    }

    /// Whether this connection's own offers may be relayed now: fewer than half of
    /// `ws.outgoing_queue` answers wait for it. Past that, the answers its offers would
    /// bring back could outrun what it reads, and answers are the last thing shed.
    pub fn takes_answers(&self) -> bool {
        let q = self.queues.lock();
        !q.closed && q.answers.len() < self.relay_bound.div_ceil(2)
    }

    /// The last message: queued after whatever replies wait; relays waiting are dropped
    /// and new ones refused, and the reader pushes nothing after.
    pub fn close_with(&self, last: Option<Message>) {
        let mut q = self.queues.lock();
        q.closed = true;
        q.answers = VecDeque::new();
        q.offers = VecDeque::new();
        if let Some(m) = last {
            q.replies.push_back(m);
        }
        drop(q);
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    /// Whether [`Outbox::close_with`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The next message to write, in the order of the module's notes.
    pub fn pop(&self) -> Option<Message> {
        let mut q = self.queues.lock();
        let q = &mut *q;
        let m = if let Some(a) = q.answers.pop_front() {
            shrink(&mut q.answers);
            Message::text(a)
        } else if !q.replies.is_empty()
            && (q.offers.is_empty() || q.offers_in_a_row >= OFFERS_PER_REPLY)
        {
            q.offers_in_a_row = 0;
            let m = q.replies.pop_front();
            shrink(&mut q.replies);
            m?
        } else {
            let o = q.offers.pop_front()?;
            shrink(&mut q.offers);
            q.offers_in_a_row = q.offers_in_a_row.saturating_add(1);
            Message::text(o)
        };
        Some(m)
    }
}

/// A queue that emptied after a burst keeps no memory for it (an idle connection holds
/// none).
fn shrink<T>(q: &mut VecDeque<T>) {
    if q.is_empty() && q.capacity() > 16 {
        *q = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: Message) -> String {
        m.as_text().unwrap().to_owned()
    }

    fn drain(o: &Outbox) -> Vec<String> {
        std::iter::from_fn(|| o.pop()).map(text).collect()
    }

    #[test]
    fn answers_go_first_then_two_offers_for_each_reply() {
        let o = Outbox::new(8);
        for i in 0..4 {
            assert_eq!(o.offer(format!("o{i}").into()), Delivery::Queued);
            assert_eq!(o.reply(Message::text(format!("r{i}"))), Delivery::Queued);
        }
        assert_eq!(o.answer("a0".into()), Delivery::Queued);
        assert_eq!(
            drain(&o),
            ["a0", "o0", "o1", "r0", "o2", "o3", "r1", "r2", "r3"]
        );
        // Nothing waiting: nothing is held back either.
        assert_eq!(o.reply(Message::text("r4")), Delivery::Queued);
        assert_eq!(drain(&o), ["r4"]);
    }

    #[test]
    fn each_queue_sheds_past_its_bound_and_a_closed_outbox_takes_no_relay() {
        let o = Outbox::new(2);
        assert!(o.takes_offers() && o.takes_answers());
        for _ in 0..2 {
            assert_eq!(o.offer("o".into()), Delivery::Queued);
        }
        assert!(!o.takes_offers());
        assert_eq!(o.offer("o".into()), Delivery::Dropped);
        // A full offer queue leaves the answers their own room.
        assert_eq!(o.answer("a".into()), Delivery::Queued);
        assert!(!o.takes_answers(), "half of 2 answers wait");
        assert_eq!(o.answer("a".into()), Delivery::Queued);
        assert_eq!(o.answer("a".into()), Delivery::Dropped);
        for i in 0..REPLY_BACKLOG {
            assert_eq!(o.reply(Message::text(format!("{i}"))), Delivery::Queued);
        }
        assert_eq!(o.reply(Message::text("x")), Delivery::Dropped);
        assert_eq!(drain(&o).len(), 2 + 2 + REPLY_BACKLOG);
        assert!(o.takes_offers() && o.takes_answers());

        o.offer("dropped at close".into());
        o.reply(Message::text("last reply"));
        o.close_with(Some(Message::close(None, "")));
        assert!(o.is_closed() && !o.takes_offers() && !o.takes_answers());
        assert_eq!(o.answer("a".into()), Delivery::Gone);
        assert_eq!(o.offer("o".into()), Delivery::Gone);
        assert_eq!(o.reply(Message::text("late")), Delivery::Gone);
        assert_eq!(text(o.pop().unwrap()), "last reply");
        assert!(o.pop().unwrap().is_close());
        assert!(o.pop().is_none());
    }
}
