//! Turning results into text: the terminal summary of one run and the Markdown tables of
//! the seed reports (seed 003's scenarios and latency-by-operation tables, seed 004's
//! sweep table, the throughput-by-workers and CPU tables of seeds 000–002, and the
//! "comparison with the previous run").
//!
//! Everything here is a pure function from results to `String`, so the tables are unit
//! tested without running a load, and the same code writes the terminal output and the
//! report files.

use std::fmt::Write;

use crate::run::RunResult;
use crate::stats::OpSummary;

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in microseconds, in the unit that reads best (`245µs`, `2.96ms`, `1.20s`).
pub fn latency(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

/// Relative change from `old` to `new`, e.g. `+3.9%`.
pub fn change(old: f64, new: f64) -> String {
    if old == 0.0 {
        if new == 0.0 {
            "No change".to_string()
        } else {
            "n/a".to_string()
        }
    } else {
        let c = 100.0 * (new - old) / old;
        if c.abs() < 0.05 {
            "No change".to_string()
        } else {
            format!("{c:+.1}%")
        }
    }
}

/// The terminal summary of one run.
pub fn run_text(r: &RunResult) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} ({} loop, {} workers, concurrency {}{}), measured {:.1}s",
        r.protocol,
        r.target,
        r.mode,
        r.workers,
        r.concurrency,
        r.offered_rate
            .map(|x| format!(", offered {x:.0}/s"))
            .unwrap_or_default(),
        s.seconds
    );
    let _ = writeln!(
        out,
        "responses: {} ({:.0}/s), sent {}, errors {} ({:.2}%)",
        thousands(s.responses),
        s.responses_per_second,
        thousands(s.requests_sent),
        thousands(s.total_errors()),
        100.0 * s.error_rate
    );
    out.push_str(&ops_table(&s.ops));
    let errs: Vec<String> = s
        .errors
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(out, "errors by kind: {}", errs.join(", "));
    }
    for (k, v) in &s.extra {
        let _ = writeln!(out, "{k}: {}", thousands(*v));
    }
    let _ = writeln!(
        out,
        "bytes in {} / out {}, peers received {}",
        thousands(s.bytes_in),
        thousands(s.bytes_out),
        thousands(s.peers_received)
    );
    let c = &r.cpu;
    let _ = write!(
        out,
        "cpu: load generator {:.0}% ({:.0} responses per CPU-second)",
        c.generator_percent, r.responses_per_generator_cpu_second
    );
    if let (Some(t), Some(per)) = (c.tracker_percent, r.responses_per_tracker_cpu_second) {
        let _ = write!(out, ", tracker {t:.0}% ({per:.0} responses per CPU-second)");
    }
    if let Some(o) = c.others_percent {
        let _ = write!(out, ", others {o:.0}%");
    }
    out.push('\n');
    out
}

/// Seed 003's "Latency by Operation" table.
pub fn ops_table(ops: &std::collections::BTreeMap<String, OpSummary>) -> String {
    let mut out = String::from(
        "| Operation | Count | Per second | Min | Avg | P50 | P95 | P99 | P99.9 | Max |\n\
         |-----------|-------|------------|-----|-----|-----|-----|-----|-------|-----|\n",
    );
    for name in ["connect", "announce", "scrape"] {
        let Some(o) = ops.get(name) else { continue };
        let mut title = name.to_string();
        title[..1].make_ascii_uppercase();
        let _ = writeln!(
            out,
            "| {title} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            thousands(o.responses),
            o.per_second,
            latency(o.min),
            latency(o.avg),
            latency(o.p50),
            latency(o.p95),
            latency(o.p99),
            latency(o.p999),
            latency(o.max)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_587_214), "1,587,214");
        assert_eq!(latency(245.0), "245µs");
        assert_eq!(latency(2960.0), "2.96ms");
        assert_eq!(latency(1_200_000.0), "1.20s");
        assert_eq!(change(50921.0, 52903.0), "+3.9%");
        assert_eq!(change(103.26, 29.02), "-71.9%");
        assert_eq!(change(0.0, 0.0), "No change");
    }
}
