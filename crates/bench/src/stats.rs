//! Counting what happened: responses and latency per operation, errors by kind, bytes.
//!
//! Each worker keeps its own [`Stats`] (no sharing on the hot path) and the run merges
//! them at the end. Latency goes into HDR histograms in nanoseconds with three significant
//! digits, so percentiles are exact to 0.1% from one microsecond to a minute, and two
//! histograms merge without loss. The [`Summary`] is what reports and JSON are made of.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The operations whose latency is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    #[default]
    Connect = 0,
    Announce = 1,
    Scrape = 2,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Connect, Op::Announce, Op::Scrape];

    pub fn name(self) -> &'static str {
        match self {
            Op::Connect => "connect",
            Op::Announce => "announce",
            Op::Scrape => "scrape",
        }
    }
}

/// What went wrong with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No answer within the timeout.
    Timeout = 0,
    /// The tracker answered with an error (BEP 15 action 3, HTTP `failure reason`, ...).
    ErrorResponse = 1,
    /// The answer was malformed or did not match its request (action, size, peer count).
    InvalidResponse = 2,
    /// An answer whose transaction id matches no outstanding request.
    UnknownTransaction = 3,
    /// Could not connect, or the connection broke.
    Connection = 4,
    /// A send failed.
    Send = 5,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Timeout,
        ErrorKind::ErrorResponse,
        ErrorKind::InvalidResponse,
        ErrorKind::UnknownTransaction,
        ErrorKind::Connection,
        ErrorKind::Send,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::ErrorResponse => "error_response",
            ErrorKind::InvalidResponse => "invalid_response",
            ErrorKind::UnknownTransaction => "unknown_transaction",
            ErrorKind::Connection => "connection",
            ErrorKind::Send => "send",
        }
    }
}

/// Latency histogram bounds: 1 ns to 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds")
}

/// One worker's counts.
#[derive(Clone, Debug)]
pub struct Stats {
    pub latency: [Histogram<u64>; 3],
    pub sent: [u64; 3],
    pub errors: [u64; 6],
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Peers received in announce responses.
    pub peers_received: u64,
    /// Requests sent again on a new connection because the server had closed the idle
    /// keep-alive connection they were first sent on (HTTP; not errors).
    pub reconnects: u64,
    /// Protocol-specific counts (WebTorrent offers relayed, answers sent, ...).
    pub extra: BTreeMap<&'static str, u64>,
    /// Whether `connect` answers are tracker responses (UDP) or just TCP/TLS/WebSocket
    /// set-up (HTTP, WebTorrent), timed but not counted as responses.
    pub connects_are_responses: bool,
    /// Open loop: how late each request left against its due time (ns), when a slot was
    /// free for it. Latency runs from the due time, so a generator that falls behind is
    /// charged to the tracker; this is how a report tells the two apart.
    pub send_lag: Histogram<u64>,
    /// Open loop: requests that left late because every slot was waiting for an answer
    /// (the in-flight window was full): late because of the tracker, not the sender.
    pub slot_waits: u64,
    /// Open loop: requests due by the end of the run that never left (the generator's
    /// backlog).
    pub unsent: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Self {
        Self {
            latency: [new_histogram(), new_histogram(), new_histogram()],
            sent: [0; 3],
            errors: [0; 6],
            bytes_in: 0,
            bytes_out: 0,
            peers_received: 0,
            reconnects: 0,
            extra: BTreeMap::new(),
            connects_are_responses: true,
            send_lag: new_histogram(),
            slot_waits: 0,
            unsent: 0,
        }
    }

    /// Stats for a TCP protocol (see `connects_are_responses`).
    pub fn for_tcp() -> Self {
        Self {
            connects_are_responses: false,
            ..Self::new()
        }
    }

    /// Records a valid response to `op` that took `nanos`.
    #[inline]
    pub fn record(&mut self, op: Op, nanos: u64) {
        self.latency[op as usize].saturating_record(nanos.max(1));
    }

    #[inline]
    pub fn error(&mut self, kind: ErrorKind) {
        self.errors[kind as usize] += 1;
    }

    pub fn add_extra(&mut self, name: &'static str, n: u64) {
        *self.extra.entry(name).or_insert(0) += n;
    }

    pub fn responses(&self, op: Op) -> u64 {
        self.latency[op as usize].len()
    }

    pub fn total_responses(&self) -> u64 {
        Op::ALL
            .iter()
            .filter(|&&o| o != Op::Connect || self.connects_are_responses)
            .map(|&o| self.responses(o))
            .sum()
    }

    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Forgets everything (end of warm-up).
    pub fn reset(&mut self) {
        let tcp = !self.connects_are_responses;
        *self = Self::new();
        self.connects_are_responses = !tcp;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Stats) {
        for i in 0..3 {
            self.latency[i]
                .add(&other.latency[i])
                .expect("histograms share bounds");
            self.sent[i] += other.sent[i];
        }
        for i in 0..self.errors.len() {
            self.errors[i] += other.errors[i];
        }
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.peers_received += other.peers_received;
        self.reconnects += other.reconnects;
        self.send_lag
            .add(&other.send_lag)
            .expect("histograms share bounds");
        self.unsent += other.unsent;
        self.slot_waits += other.slot_waits;
        for (k, v) in &other.extra {
            self.add_extra(k, *v);
        }
    }

    /// Adds the errors seen to a run's failure (a target that never answered), so the
    /// user sees why; the failure as it is when no error was counted.
    pub fn explain(&self, failure: anyhow::Error) -> anyhow::Error {
        let seen: Vec<String> = self
            .summary(1.0)
            .errors
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect();
        if seen.is_empty() {
            failure
        } else {
            failure.context(format!("errors seen: {}", seen.join(", ")))
        }
    }

    /// Figures over a measured window of `seconds`.
    pub fn summary(&self, seconds: f64) -> Summary {
        let seconds = seconds.max(1e-9);
        let mut ops = BTreeMap::new();
        for op in Op::ALL {
            let h = &self.latency[op as usize];
            if h.is_empty() && self.sent[op as usize] == 0 {
                continue;
            }
            ops.insert(op.name().to_string(), OpSummary::from_histogram(h, seconds));
        }
        let responses = self.total_responses();
        let errors: BTreeMap<String, u64> = ErrorKind::ALL
            .iter()
            .map(|&k| (k.name().to_string(), self.errors[k as usize]))
            .collect();
        let total_errors = self.total_errors();
        Summary {
            seconds,
            responses,
            responses_per_second: responses as f64 / seconds,
            requests_sent: self.sent[1..].iter().sum::<u64>()
                + if self.connects_are_responses {
                    self.sent[0]
                } else {
                    0
                },
            error_rate: if responses + total_errors == 0 {
                0.0
            } else {
                total_errors as f64 / (responses + total_errors) as f64
            },
            errors,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            peers_received: self.peers_received,
            reconnects: self.reconnects,
            extra: self
                .extra
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            ops,
            send_lag: (!self.send_lag.is_empty())
                .then(|| OpSummary::from_histogram(&self.send_lag, seconds)),
            unsent: self.unsent,
            slot_waits: self.slot_waits,
        }
    }
}

/// Latency figures of one operation, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpSummary {
    pub responses: u64,
    pub per_second: f64,
    pub min: f64,
    pub avg: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
    pub max: f64,
}

impl OpSummary {
    pub fn from_histogram(h: &Histogram<u64>, seconds: f64) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        if h.is_empty() {
            return Self {
                responses: 0,
                per_second: 0.0,
                min: 0.0,
                avg: 0.0,
                p50: 0.0,
                p95: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            };
        }
        Self {
            responses: h.len(),
            per_second: h.len() as f64 / seconds,
            min: us(h.min()),
            avg: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// The figures of one run, as written to JSON and reports.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Length of the measured window (warm-up excluded).
    pub seconds: f64,
    pub responses: u64,
    pub responses_per_second: f64,
    pub requests_sent: u64,
    /// Errors / (responses + errors).
    pub error_rate: f64,
    pub errors: BTreeMap<String, u64>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub peers_received: u64,
    /// Requests retried on a new connection after the server closed an idle keep-alive
    /// connection (absent from results written before it was counted).
    #[serde(default)]
    pub reconnects: u64,
    pub extra: BTreeMap<String, u64>,
    /// Per operation: `connect`, `announce`, `scrape`.
    pub ops: BTreeMap<String, OpSummary>,
    /// Open loop: how late requests left against their due times, µs (absent from closed
    /// loops and from results written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<OpSummary>,
    /// Open loop: requests due by the end that never left.
    #[serde(default)]
    pub unsent: u64,
    /// Open loop: requests that waited for a free slot (the in-flight window was full).
    #[serde(default)]
    pub slot_waits: u64,
}

impl Summary {
    pub fn total_errors(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Latency over all operations but connect (the operations a load is made of).
    pub fn main_op(&self) -> Option<&OpSummary> {
        self.ops.get("announce").or_else(|| self.ops.get("scrape"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_histograms_keeps_counts_and_percentiles() {
        let mut a = Stats::new();
        let mut b = Stats::new();
        // a: 1..=1000 us, b: 1001..=2000 us; together 1..=2000 us.
        for i in 1..=1000u64 {
            a.record(Op::Announce, i * 1000);
            b.record(Op::Announce, (i + 1000) * 1000);
        }
        a.error(ErrorKind::Timeout);
        b.error(ErrorKind::Timeout);
        b.error(ErrorKind::InvalidResponse);
        b.bytes_in = 5;
        a.reconnects = 1;
        b.reconnects = 2;
        b.add_extra("offers_received", 3);
        a.merge(&b);
        let s = a.summary(2.0);
        let op = &s.ops["announce"];
        assert_eq!(op.responses, 2000);
        assert_eq!(s.responses_per_second, 1000.0);
        assert!((op.p50 - 1000.0).abs() <= 1.0, "{}", op.p50);
        assert!((op.p99 - 1980.0).abs() <= 2.0, "{}", op.p99);
        assert!((op.min - 1.0).abs() < 0.01 && (op.max - 2000.0).abs() <= 2.0);
        assert!((op.avg - 1000.5).abs() <= 1.0, "{}", op.avg);
        assert_eq!(s.errors["timeout"], 2);
        assert_eq!(s.errors["invalid_response"], 1);
        assert_eq!(s.extra["offers_received"], 3);
        assert_eq!(s.bytes_in, 5);
        assert_eq!(s.reconnects, 3);
        assert!((s.error_rate - 3.0 / 2003.0).abs() < 1e-12);
    }

    #[test]
    fn reset_forgets_warmup() {
        let mut a = Stats::new();
        a.record(Op::Scrape, 10);
        a.sent[2] = 1;
        a.reconnects = 4;
        a.reset();
        assert_eq!(a.total_responses(), 0);
        assert_eq!(a.reconnects, 0);
        assert!(a.summary(1.0).ops.is_empty());
    }

    #[test]
    fn json_uses_microsecond_percentile_names() {
        let mut a = Stats::new();
        a.record(Op::Announce, 2_000_000);
        let json = serde_json::to_value(a.summary(1.0)).unwrap();
        let op = &json["ops"]["announce"];
        for key in ["p50", "p95", "p99", "p99.9", "min", "max", "avg"] {
            let v = op[key].as_f64().unwrap();
            assert!((v - 2000.0).abs() <= 2.0, "{key} = {v}");
        }
        assert_eq!(json["reconnects"], 0);
    }

    #[test]
    fn summaries_without_reconnects_still_parse() {
        let mut json = serde_json::to_value(Stats::new().summary(1.0)).unwrap();
        json.as_object_mut().unwrap().remove("reconnects");
        let s: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(s.reconnects, 0);
    }
}
