//! When each bucket's call goes out. Normally once a round (every exchange interval), for
//! every bucket at once. Two things break that rhythm, and this file holds the rules for both
//! as plain state, without the network:
//!
//! - **A call in flight is never doubled, and never waited for.** A bucket whose call has not
//!   landed yet (a master that does not answer, a connection waiting out its timeout) sits
//!   out the rounds until it lands; its writes stay pending and the next call carries them.
//!   The other buckets keep their rhythm: a round never queues behind a slow call.
//! - **A bucket whose call failed is called again soon, not at the next round** (after
//!   [`RETRY_EVERY`]), and so is a bucket that has just come back, for one interval after
//!   its first call that went through. Why: when a master returns, the nodes' writes kept
//!   during the outage, and a peer announced just then, land on it within moments of each
//!   other, each node as soon as its own retry goes through. A node that read the bucket
//!   a moment before another node's write would otherwise wait a whole interval to see it.
//!   Reading again at the retry pace for that one interval takes them in at once. Redis
//!   itself refuses writes on a master for two seconds after it restarts (`CLUSTERDOWN`,
//!   while it waits for the cluster to reconfigure it): with retries at the round pace, a
//!   peer announced when the rest of the cluster says `cluster_state:ok` waited for that,
//!   then up to an interval for its node's round, then up to an interval for the reader's.
//!
//! The cost: while a master is down, its buckets' calls go out every [`RETRY_EVERY`] after
//! each failure instead of once an interval (a refused call fails in well under that), and
//! for one interval after it returns, its buckets are read at that pace. In normal running
//! nothing changes: one call per bucket per interval.

use std::time::{Duration, Instant};

/// A failed call (or one of a bucket that just came back) goes out again this long after
/// it landed. Short next to the round (one second by default) and to the two seconds a
/// restarted master refuses writes, long next to a call on loopback or a LAN (about a
/// millisecond).
pub const RETRY_EVERY: Duration = Duration::from_millis(100);

/// The pace of each lane: one per bucket, and one for the relay and heartbeat.
pub struct Lanes {
    /// The exchange interval: how long a lane that came back is read at the retry pace.
    every: Duration,
    /// The retry pace: [`RETRY_EVERY`], or the interval if that is shorter.
    retry: Duration,
    lanes: Vec<Lane>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    /// A call is in flight.
    busy: bool,
    /// Its last call failed.
    failing: bool,
    /// Goes out again at this instant, before the next round.
    again: Option<Instant>,
    /// Came back from a failure: read at the retry pace until this instant.
    back_until: Option<Instant>,
}

impl Lanes {
    pub fn new(lanes: usize, every: Duration) -> Self {
        Self {
            every,
            retry: RETRY_EVERY.min(every),
            lanes: vec![Lane::default(); lanes],
        }
    }

    /// Whether lane `i` goes out now: at a round, if no call of it is in flight; between
    /// rounds, if it is also due for a retry, or will be within half the retry pace (so
    /// that the retries of calls that landed close together go out together, a few times
    /// a pace, not one by one).
    pub fn due(&self, i: usize, round: bool, now: Instant) -> bool {
        let l = &self.lanes[i];
        !l.busy && (round || l.again.is_some_and(|at| at <= now + self.retry / 2))
    }

    /// Lane `i`'s call went out.
    pub fn launched(&mut self, i: usize) {
        let l = &mut self.lanes[i];
        l.busy = true;
        l.again = None;
    }

    /// Lane `i`'s call landed at `now`, through (`ok`) or not.
    pub fn landed(&mut self, i: usize, ok: bool, now: Instant) {
        let (every, retry) = (self.every, self.retry);
        let l = &mut self.lanes[i];
        l.busy = false;
        if !ok {
            l.failing = true;
            l.back_until = None;
            l.again = Some(now + retry);
        } else if l.failing {
            l.failing = false;
            l.back_until = Some(now + every);
            l.again = Some(now + retry);
        } else if l.back_until.is_some_and(|until| now < until) {
            l.again = Some(now + retry);
        } else {
            l.back_until = None;
        }
    }

    /// Lane `i` could not go out for want of a connection: it goes out at `at`, or as soon
    /// as there is one. `failing`: because Redis could not be reached (not at start), so
    /// that it is read at the retry pace for an interval once it goes through.
    pub fn postpone(&mut self, i: usize, at: Instant, failing: bool) {
        let l = &mut self.lanes[i];
        if !l.busy {
            l.failing |= failing;
            l.again = Some(at);
        }
    }

    /// The earliest retry any lane waits for.
    pub fn next_retry(&self) -> Option<Instant> {
        self.lanes
            .iter()
            .filter(|l| !l.busy)
            .filter_map(|l| l.again)
            .min()
    }

    /// Lanes whose last call failed.
    pub fn failing(&self) -> usize {
        self.lanes.iter().filter(|l| l.failing).count()
    }

    /// Lanes with a call in flight.
    pub fn in_flight(&self) -> usize {
        self.lanes.iter().filter(|l| l.busy).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: Duration = Duration::from_secs(1);

    /// One lane whose first call failed at `t`.
    fn failed_once(t: Instant) -> Lanes {
        let mut lanes = Lanes::new(1, EVERY);
        lanes.launched(0);
        lanes.landed(0, false, t);
        lanes
    }

    #[test]
    fn every_lane_goes_out_at_a_round_and_none_between() {
        let t = Instant::now();
        let lanes = Lanes::new(3, EVERY);
        assert!((0..3).all(|i| lanes.due(i, true, t)));
        assert!((0..3).all(|i| !lanes.due(i, false, t + EVERY / 2)));
        assert_eq!(lanes.next_retry(), None);
    }

    #[test]
    fn a_call_in_flight_sits_out_the_rounds_until_it_lands() {
        let t = Instant::now();
        let mut lanes = Lanes::new(2, EVERY);
        lanes.launched(0);
        lanes.launched(1);
        lanes.landed(1, true, t);
        // Two rounds later lane 0's call is still waiting: it is not sent twice, lane 1 is.
        assert!(!lanes.due(0, true, t + 2 * EVERY));
        assert!(lanes.due(1, true, t + 2 * EVERY));
        assert_eq!(lanes.in_flight(), 1);
    }

    #[test]
    fn a_failed_call_goes_out_again_at_the_retry_pace_until_it_passes() {
        let t = Instant::now();
        let mut lanes = failed_once(t);
        assert_eq!(lanes.failing(), 1);
        assert_eq!(lanes.next_retry(), Some(t + RETRY_EVERY));
        assert!(!lanes.due(0, false, t + RETRY_EVERY / 3));
        assert!(lanes.due(0, false, t + RETRY_EVERY));
        for k in 1..5 {
            let now = t + k * RETRY_EVERY;
            lanes.launched(0);
            assert_eq!(lanes.next_retry(), None, "not while in flight");
            lanes.landed(0, false, now);
            assert!(lanes.due(0, false, now + RETRY_EVERY));
        }
    }

    #[test]
    fn a_lane_that_came_back_is_read_at_the_retry_pace_for_one_interval() {
        let t = Instant::now();
        let mut lanes = failed_once(t);
        lanes.launched(0);
        let back = t + RETRY_EVERY;
        lanes.landed(0, true, back);
        assert_eq!(lanes.failing(), 0);
        let mut now = back;
        let mut reads = 0;
        while let Some(at) = lanes.next_retry() {
            assert!(lanes.due(0, false, at));
            lanes.launched(0);
            now = at;
            lanes.landed(0, true, now);
            reads += 1;
            assert!(reads < 100, "the fast reads end");
        }
        // Reads every RETRY_EVERY up to one interval after it came back, then back to rounds.
        assert_eq!(
            reads,
            (EVERY.as_millis() / RETRY_EVERY.as_millis()) as usize
        );
        assert!(now >= back + EVERY && now < back + EVERY + RETRY_EVERY);
        assert!(!lanes.due(0, false, now + EVERY / 2));
        assert!(lanes.due(0, true, now + EVERY));
    }

    #[test]
    fn retries_due_close_together_go_out_together() {
        let t = Instant::now();
        let mut lanes = Lanes::new(3, EVERY);
        for (i, ms) in [(0, 0), (1, 30), (2, 80)] {
            lanes.launched(i);
            lanes.landed(i, false, t + Duration::from_millis(ms));
        }
        let first = lanes.next_retry().unwrap();
        assert_eq!(first, t + RETRY_EVERY);
        let due: Vec<bool> = (0..3).map(|i| lanes.due(i, false, first)).collect();
        assert_eq!(due, [true, true, false]);
    }

    #[test]
    fn a_short_interval_bounds_the_retry_pace() {
        let t = Instant::now();
        let every = Duration::from_millis(50);
        let mut lanes = Lanes::new(1, every);
        lanes.launched(0);
        lanes.landed(0, false, t);
        assert_eq!(lanes.next_retry(), Some(t + every));
    }

    #[test]
    fn a_lane_postponed_for_want_of_a_connection_fails_only_once_redis_did() {
        let t = Instant::now();
        let mut lanes = Lanes::new(2, EVERY);
        lanes.postpone(0, t, false);
        lanes.postpone(1, t, true);
        assert_eq!(lanes.failing(), 1);
        assert!(lanes.due(0, false, t) && lanes.due(1, false, t));
        lanes.launched(0);
        lanes.postpone(0, t + EVERY, true);
        assert!(!lanes.due(0, false, t + EVERY), "in flight: not postponed");
    }
}
