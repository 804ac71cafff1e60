//! One connection's outgoing messages, in three bounded queues, and the order the writer
//! takes them in: what a client that reads more slowly than it is sent to gets, and what
//! it loses.
//!
//! - **answers** relayed to this connection (each completes a WebRTC connection that this
//!   client started with an offer): never shed;
//! - **replies** to the client's own messages (announce and scrape replies, failures,
//!   pings, the closing frame);
//! - **offers** relayed to this connection from other peers.
//!
//! When the socket takes everything, the queues stay empty and every message goes out as
//! it comes. When it does not (the client reads more slowly than it is sent to), the
//! writer takes answers and offers in turn (one each while both wait), and a reply after
//! every `ws.offers_per_reply` of those relays; what does not fit is shed, in this order:
//!
//! 1. offers: a connection whose offer queue (`ws.outgoing_queue`) is full is not chosen
//!    as an offer's recipient (the offer goes to another peer of the swarm, or nowhere);
//!    and a connection's own offers are relayed only while it has room for their answers
//!    (see below);
//! 2. replies: past [`REPLY_BACKLOG`] waiting, a new one is dropped
//!    (`shoal_ws_replies_dropped_total`); the announce itself was served. And an
//!    announce none of whose offers could go (no places for their answers, or every peer
//!    that could take one has a full queue) is not answered at all
//!    (`shoal_ws_replies_shed_total`, in the handler): see "Why an overloaded announce
//!    gets no reply" below;
//! 3. answers, never while the client follows the protocol: every answer has its room
//!    before its offer is relayed.
//!
//! **Room for answers.** A connection's answers come from offers it made that other
//! clients have read, however fast those clients read and however slowly this one does,
//! so a queue that is merely large would still overflow. Instead each connection has
//! `ws.answer_queue` places: an offer of its client takes one when it is relayed, its
//! answer keeps it while it waits to be written, and it is given back when the answer is
//! written, dropped, or can no longer come (offers relayed more than `ws.offer_max_age`
//! ago are forgotten, in two windows of that length). An announce's offers are relayed
//! only into free places; the others are shed (`shoal_ws_relayed_total{message="offer",
//! result="shed"}`), not even read (`handler`).
//!
//! Why answers and offers take turns: every offer this client reads is an answer another
//! connection must be written, and every answer written here frees a place for one of
//! this client's offers; in the steady state each connection reads about as many of one
//! as of the other. Answers first, always, made a connection that had fallen behind read
//! nothing but answers while the offers for it waited, so that the answers for the others
//! stopped coming too.
//!
//! Why replies give way to relays: a client that reads one message for each it sends
//! (aquatic_ws_load_test's do) sends an answer for every offer it reads, and an answer has
//! no reply; every answer it is then sent needs a read that no message of its own paid for.
//! If every reply went out, answers could only be read in the place of offers, and the
//! offers read would fall until almost none were (each offer read is an answer to
//! deliver); the answers delivered are exactly the replies not delivered. A reply
//! carries the swarm's counts and the interval, which the client's next announce gets
//! again; an answer lost wastes an offer, the answering browser's ICE work and the
//! announce that carried the offer.
//!
//! Why an overloaded announce gets no reply: when the peers of a swarm are not reading
//! what they are sent, a client that announces again as soon as it reads anything
//! (aquatic_ws_load_test's do) and reads only replies turns the tracker into an
//! announce-and-reply loop with itself: each announce costs the parsing of its offers,
//! which go nowhere, and its reply is what prompts the next. Measured on 2 cores, one
//! tracker worker, 20-s runs: with those replies written, the load tester read 4,000 to
//! 7,000 offers per tracker CPU-second (88% of what it read were replies); with them shed,
//! 55,000 to 56,000 offers and 49,000 to 54,000 answers, and still 27,000 replies. A
//! browser loses nothing it needs: the reply carries the swarm's counts and the interval,
//! which its next announce gets again.
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
/// write before it reads again (one message read per message sent, with relayed messages
/// ahead of it in the TCP buffers), and a reader that stopped would bring back the wait on
/// each other. A client that does not read at all is still closed by `send_timeout`,
/// through the writer.
pub const REPLY_BACKLOG: usize = 256;

/// Bytes of answers one connection may have waiting, whatever `ws.answer_queue` says: an
/// answer is at most `ws.max_message_size`, and clients that answer a connection's offers
/// with large ones must not make it hold more than this.
const ANSWER_BYTES: usize = 8 << 20;

/// Bytes of offers one connection may have waiting, whatever `ws.outgoing_queue` says.
const OFFER_BYTES: usize = 4 << 20;

/// What became of a message pushed onto a connection's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The connection is gone (or closing).
    Gone,
    /// Its queue was full: the message was dropped, the connection kept.
    Dropped,
}

/// The bounds of one connection's queues.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// `ws.outgoing_queue`: offers waiting.
    pub offers: usize,
    /// `ws.answer_queue`: this connection's offers awaiting an answer plus answers waiting.
    pub answers: usize,
    /// `ws.offer_max_age`: after how long an unanswered offer gives its place back.
    pub offer_max_age: u32,
    /// `ws.offers_per_reply`: offers written for each reply while both wait.
    pub offers_per_reply: u8,
}

/// This connection's offers relayed and not yet answered, in two windows of
/// `offer_max_age` seconds (the current and the one before); older ones are forgotten.
#[derive(Default)]
struct Awaiting {
    window: u32,
    current: usize,
    previous: usize,
}

impl Awaiting {
    fn at(&mut self, now: u32, length: u32) -> &mut Self {
        let window = now / length.max(1);
        if window != self.window {
            self.previous = if window == self.window + 1 {
                self.current
            } else {
                0
            };
            self.current = 0;
            self.window = window;
        }
        self
    }

    fn count(&self) -> usize {
        self.current + self.previous
    }

    /// One offer answered (or no longer answerable).
    fn settle(&mut self) {
        if self.current > 0 {
            self.current -= 1;
        } else {
            self.previous = self.previous.saturating_sub(1);
        }
    }
}

#[derive(Default)]
struct Queues {
    answers: VecDeque<Text>,
    answer_bytes: usize,
    awaiting: Awaiting,
    replies: VecDeque<Message>,
    offers: VecDeque<Text>,
    offer_bytes: usize,
    /// Answers and offers written since the last reply.
    relays_in_a_row: u8,
    /// The last relay written was an answer (the next, if offers wait, is an offer).
    answer_was_last: bool,
    /// The reader has ended: relays are refused, the replies left are written.
    closed: bool,
}

/// A connection's outgoing queues (see the module's notes). Shared by its reader (replies,
/// its own offers' places), its writer (everything) and, through the registry, the
/// connections that relay to it.
pub struct Outbox {
    queues: Mutex<Queues>,
    /// Woken on every push.
    pub(super) ready: Notify,
    bounds: Bounds,
    closed: AtomicBool,
}

impl Outbox {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            queues: Mutex::default(),
            ready: Notify::new(),
            bounds: Bounds {
                offers: bounds.offers.max(1),
                answers: bounds.answers.max(1),
                ..bounds
            },
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

    /// Queues an answer relayed to this connection, in the place its offer took.
    pub fn answer(&self, t: Text, now: u32) -> Delivery {
        self.relay(t, Some(now))
    }

    /// Queues an offer relayed to this connection, unless `ws.outgoing_queue` wait.
    pub fn offer(&self, t: Text) -> Delivery {
        self.relay(t, None)
    }

    /// Queues a relayed answer (`answered` at that time: its offer's place is settled) or
    /// offer, each within its queue's bounds.
    fn relay(&self, t: Text, answered: Option<u32>) -> Delivery {
        let mut q = self.queues.lock();
        if q.closed {
            return Delivery::Gone;
        }
        let (queue, bytes, count, max_bytes) = match answered {
            Some(now) => {
                q.awaiting.at(now, self.bounds.offer_max_age).settle();
                // Full only if this connection's client answered offers that were not
                // relayed here (another node's), or with answers of megabytes.
                let q = &mut *q;
                (
                    &mut q.answers,
                    &mut q.answer_bytes,
                    self.bounds.answers,
                    ANSWER_BYTES,
                )
            }
            None => {
                let q = &mut *q;
                (
                    &mut q.offers,
                    &mut q.offer_bytes,
                    self.bounds.offers,
                    OFFER_BYTES,
                )
            }
        };
        if queue.len() >= count || *bytes + t.len() > max_bytes {
            return Delivery::Dropped;
        }
        *bytes += t.len();
        queue.push_back(t);
        drop(q);
        self.ready.notify_one();
        Delivery::Queued
    }

    /// Whether an offer pushed now would be queued: offers are sent only to such peers.
    pub fn takes_offers(&self) -> bool {
        let q = self.queues.lock();
        !q.closed && q.offers.len() < self.bounds.offers && q.offer_bytes < OFFER_BYTES
    }

    /// How many of this connection's own offers may be relayed now: the free places for
    /// their answers.
    pub fn answer_room(&self, now: u32) -> usize {
        let mut q = self.queues.lock();
        let taken = q.awaiting.at(now, self.bounds.offer_max_age).count() + q.answers.len();
        self.bounds.answers.saturating_sub(taken)
    }

    /// `n` of this connection's own offers are being relayed: each takes a place.
    pub fn offers_relayed(&self, n: usize, now: u32) {
        let mut q = self.queues.lock();
        q.awaiting.at(now, self.bounds.offer_max_age).current += n;
    }

    /// `n` offers counted by [`Outbox::offers_relayed`] were not queued: their places are
    /// free again.
    pub fn offers_not_relayed(&self, n: usize, now: u32) {
        let mut q = self.queues.lock();
        let awaiting = q.awaiting.at(now, self.bounds.offer_max_age);
        for _ in 0..n {
            awaiting.settle();
        }
    }

    /// The last message: queued after whatever replies wait; relays waiting are dropped
    /// and new ones refused, and the reader pushes nothing after.
    pub fn close_with(&self, last: Option<Message>) {
        let mut q = self.queues.lock();
        q.closed = true;
        q.answers = VecDeque::new();
        q.answer_bytes = 0;
        q.offers = VecDeque::new();
        q.offer_bytes = 0;
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
        let relays_wait = !q.answers.is_empty() || !q.offers.is_empty();
        if !q.replies.is_empty()
            && (!relays_wait || q.relays_in_a_row >= self.bounds.offers_per_reply)
        {
            q.relays_in_a_row = 0;
            let m = q.replies.pop_front();
            shrink(&mut q.replies);
            return m;
        }
        if !relays_wait {
            return None;
        }
        // Relays written while no reply waits earn the next reply no wait.
        q.relays_in_a_row = if q.replies.is_empty() {
            0
        } else {
            q.relays_in_a_row.saturating_add(1)
        };
        // Answers and offers in turn while both wait: each offer read here is an answer
        // to write elsewhere, each answer written here frees a place for an offer.
        let answer_now = !q.answers.is_empty() && (q.offers.is_empty() || !q.answer_was_last);
        if answer_now {
            let a = q.answers.pop_front()?;
            q.answer_bytes -= a.len();
            shrink(&mut q.answers);
            q.answer_was_last = true;
            Some(Message::text(a))
        } else {
            let o = q.offers.pop_front()?;
            q.offer_bytes -= o.len();
            shrink(&mut q.offers);
            q.answer_was_last = false;
            Some(Message::text(o))
        }
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

    fn outbox(offers: usize, answers: usize) -> Outbox {
        Outbox::new(Bounds {
            offers,
            answers,
            offer_max_age: 60,
            offers_per_reply: 2,
        })
    }

    fn text(m: Message) -> String {
        m.as_text().unwrap().to_owned()
    }

    fn drain(o: &Outbox) -> Vec<String> {
        std::iter::from_fn(|| o.pop()).map(text).collect()
    }

    #[test]
    fn answers_and_offers_take_turns_with_a_reply_after_each_few() {
        let o = outbox(8, 8);
        for i in 0..4 {
            assert_eq!(o.offer(format!("o{i}").into()), Delivery::Queued);
            assert_eq!(o.reply(Message::text(format!("r{i}"))), Delivery::Queued);
        }
        for i in 0..2 {
            assert_eq!(o.answer(format!("a{i}").into(), 0), Delivery::Queued);
        }
        // offers_per_reply 2: two relays, then a reply; answers and offers in turn.
        assert_eq!(
            drain(&o),
            ["a0", "o0", "r0", "a1", "o1", "r1", "o2", "o3", "r2", "r3"]
        );
        // Nothing waiting: nothing is held back either.
        assert_eq!(o.reply(Message::text("r4")), Delivery::Queued);
        assert_eq!(drain(&o), ["r4"]);
        assert_eq!(o.answer("a2".into(), 0), Delivery::Queued);
        assert_eq!(drain(&o), ["a2"]);
    }

    #[test]
    fn an_offer_takes_a_place_its_answer_keeps_until_written() {
        let o = outbox(8, 3);
        assert_eq!(o.answer_room(0), 3);
        o.offers_relayed(2, 0);
        assert_eq!(o.answer_room(0), 1);
        // An answer arrives: the place moves from the offer to the answer.
        assert_eq!(o.answer("a0".into(), 1), Delivery::Queued);
        assert_eq!(o.answer_room(1), 1);
        // Written: the place is free.
        assert_eq!(drain(&o), ["a0"]);
        assert_eq!(o.answer_room(1), 2);
        // The other offer is never answered: its place comes back once two windows of
        // offer_max_age have turned (60..119: still counted; from 120: forgotten).
        assert_eq!(o.answer_room(119), 2);
        o.offers_relayed(1, 119);
        assert_eq!(o.answer_room(120), 2);
        assert_eq!(o.answer_room(180), 3);
        // Long idle: both windows forgotten at once.
        o.offers_relayed(3, 200);
        assert_eq!(o.answer_room(1_000), 3);
    }

    #[test]
    fn each_queue_sheds_past_its_bound_and_a_closed_outbox_takes_no_relay() {
        let o = outbox(2, 2);
        assert!(o.takes_offers());
        for _ in 0..2 {
            assert_eq!(o.offer("o".into()), Delivery::Queued);
        }
        assert!(!o.takes_offers());
        assert_eq!(o.offer("o".into()), Delivery::Dropped);
        // A full offer queue leaves the answers their own room; past it (answers to
        // offers that took no place here), answers are dropped.
        assert_eq!(o.answer("a".into(), 0), Delivery::Queued);
        assert_eq!(o.answer("a".into(), 0), Delivery::Queued);
        assert_eq!(o.answer_room(0), 0);
        assert_eq!(o.answer("a".into(), 0), Delivery::Dropped);
        let big = "x".repeat(ANSWER_BYTES);
        for _ in 0..REPLY_BACKLOG {
            assert_eq!(o.reply(Message::text("r")), Delivery::Queued);
        }
        assert_eq!(o.reply(Message::text("x")), Delivery::Dropped);
        assert_eq!(drain(&o).len(), 2 + 2 + REPLY_BACKLOG);
        assert!(o.takes_offers());
        assert_eq!(o.answer_room(0), 2);
        // Eight megabytes of answers are all one connection holds.
        assert_eq!(o.answer(big.into(), 0), Delivery::Queued);
        assert_eq!(o.answer("a".into(), 0), Delivery::Dropped);
        assert_eq!(drain(&o).len(), 1);
        // And four of offers: then it takes no more.
        assert_eq!(o.offer("x".repeat(OFFER_BYTES).into()), Delivery::Queued);
        assert!(!o.takes_offers());
        assert_eq!(o.offer("o".into()), Delivery::Dropped);
        assert_eq!(drain(&o).len(), 1);

        o.offer("dropped at close".into());
        o.reply(Message::text("last reply"));
        o.close_with(Some(Message::close(None, "")));
        assert!(o.is_closed() && !o.takes_offers());
        assert_eq!(o.answer("a".into(), 0), Delivery::Gone);
        assert_eq!(o.offer("o".into()), Delivery::Gone);
        assert_eq!(o.reply(Message::text("late")), Delivery::Gone);
        assert_eq!(text(o.pop().unwrap()), "last reply");
        assert!(o.pop().unwrap().is_close());
        assert!(o.pop().is_none());
    }
}
