//! What one WebRTC peer was sent and may answer: the tags of the offers relayed to it
//! ([`Pending`]), kept with the peer in its torrent and checked by the offer relay.

use std::collections::VecDeque;

/// An offer relayed to a peer, waiting for its answer: a keyed hash of the offer's id and
/// the peer that made it (where the answer must go), and when it went out. A tag instead of
/// the 40 bytes it stands for keeps thousands of them per busy peer affordable. The key is
/// random per process and never leaves it, so an answerer has nothing to aim a forged pair
/// with: a match it was not sent is a guess, one in 2^64 per answer.
#[derive(Clone, Copy, Debug)]
struct PendingOffer {
    tag: u64,
    sent_at: u32,
}

/// The offers a peer was sent, oldest first (pushed in time order, so expired ones are at
/// the front).
#[derive(Debug, Default)]
pub(super) struct Pending(VecDeque<PendingOffer>);

impl Pending {
    /// Remembers one more offer, forgetting expired ones and, past `cap`, the oldest.
    pub(super) fn push(&mut self, tag: u64, now: u32, max_age: u32, cap: usize) {
        self.expire(now, max_age);
        if self.0.len() >= cap {
            self.0.pop_front();
        }
        self.0.push_back(PendingOffer { tag, sent_at: now });
    }

    /// Whether one more offer would push out one still answerable: `cap` are remembered
    /// and the oldest has not expired.
    pub(super) fn is_full(&self, now: u32, max_age: u32, cap: usize) -> bool {
        self.0.len() >= cap
            && self
                .0
                .front()
                .is_some_and(|o| now.saturating_sub(o.sent_at) <= max_age)
    }

    fn expire(&mut self, now: u32, max_age: u32) {
        while self
            .0
            .front()
            .is_some_and(|o| now.saturating_sub(o.sent_at) > max_age)
        {
            self.0.pop_front();
        }
    }

    /// Takes the offer with this tag out (one answer per offer); when it went out.
    pub(super) fn take(&mut self, tag: u64) -> Option<u32> {
        let at = self.0.iter().rposition(|o| o.tag == tag)?;
        self.0.remove(at).map(|o| o.sent_at)
    }

    /// After cleaning: gives back the memory of a list that emptied or shrank a lot.
    pub(super) fn clean(&mut self, now: u32, max_age: u32) {
        self.expire(now, max_age);
        if self.0.is_empty() {
            self.0 = VecDeque::new();
        } else if self.0.capacity() > 4 * self.0.len() + 64 {
            self.0.shrink_to_fit();
        }
    }
}
