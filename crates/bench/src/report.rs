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

/// This process's command line as a shell reads it back: a report's command can be pasted
/// as it is (a `--tracker` with its command in one argument keeps its quotes).
pub fn command_line() -> String {
    quoted(std::env::args())
}

fn quoted(args: impl Iterator<Item = String>) -> String {
    let args: Vec<String> = args.collect();
    shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "))
}

/// Now, as `YYYY-MM-DD HH:MM:SS UTC`: the date a report says it was measured.
pub fn utc_now() -> String {
    let rfc3339 = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    format!(
        "{} UTC",
        rfc3339.trim_end_matches('Z').replacen('T', " ", 1)
    )
}

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
    if let Some(f) = &r.fill {
        out.push_str(&crate::scale::fill_text(f));
    }
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
    if s.reconnects > 0 {
        let _ = writeln!(
            out,
            "server-closed keep-alive connections: {} (retried)",
            thousands(s.reconnects)
        );
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
    out.push_str(&crate::scale::generator_text(&r.generator, s));
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

/// Count, average, min and max latency (µs) over announces and scrapes together.
pub fn main_latency(r: &RunResult) -> (u64, f64, f64, f64) {
    let mut n = 0u64;
    let mut sum = 0.0;
    let mut min = f64::INFINITY;
    let mut max = 0.0f64;
    for name in ["announce", "scrape"] {
        if let Some(o) = r.summary.ops.get(name) {
            if o.responses == 0 {
                continue;
            }
            n += o.responses;
            sum += o.avg * o.responses as f64;
            min = min.min(o.min);
            max = max.max(o.max);
        }
    }
    if n == 0 {
        (0, 0.0, 0.0, 0.0)
    } else {
        (n, sum / n as f64, min, max)
    }
}

/// Seed 004's table: one row per concurrency level.
pub fn clients_table(results: &[RunResult]) -> String {
    let mut out = String::from(
        "| Number of Clients | Total Messages | Average Latency (ms) | Min Latency (ms) | Max Latency (ms) | Throughput (messages/sec) | Average Throughput per Client (messages/sec) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let (n, avg, min, max) = main_latency(r);
        let tput = n as f64 / r.summary.seconds;
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.concurrency,
            n,
            avg / 1000.0,
            min / 1000.0,
            max / 1000.0,
            tput,
            tput / r.concurrency.max(1) as f64
        );
    }
    out
}

fn scenario_name(i: usize, n: usize) -> &'static str {
    match (n, i) {
        (3, 0) => "Light Load",
        (3, 1) => "Medium Load",
        (3, 2) => "Heavy Load",
        _ => "Load",
    }
}

/// Seed 003's scenario table, then request statistics and latency by operation for each.
pub fn scenarios_report(results: &[RunResult]) -> String {
    let mut out = String::from(
        "| Scenario | Concurrency | Duration | RPS | P95 Latency | Error Rate |\n\
         |----------|-------------|----------|-----|-------------|------------|\n",
    );
    for (i, r) in results.iter().enumerate() {
        let s = &r.summary;
        let p95 = s
            .main_op()
            .map(|o| latency(o.p95))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| **{}** | {} clients | {:.0}s | {} | {} | {:.2}% |",
            scenario_name(i, results.len()),
            r.concurrency,
            s.seconds,
            thousands(s.responses_per_second as u64),
            p95,
            100.0 * s.error_rate
        );
    }
    for (i, r) in results.iter().enumerate() {
        let s = &r.summary;
        let total = s.responses + s.total_errors();
        let pct = |x: u64| 100.0 * x as f64 / total.max(1) as f64;
        let _ = write!(
            out,
            "\n### {} ({} clients)\n\n| Metric | Value |\n|--------|-------|\n\
             | Total Requests | {} |\n| Successful | {} ({:.2}%) |\n| Failed | {} ({:.2}%) |\n\
             | Requests/Second | {:.2} |\n\n",
            scenario_name(i, results.len()),
            r.concurrency,
            thousands(total),
            thousands(s.responses),
            pct(s.responses),
            thousands(s.total_errors()),
            pct(s.total_errors()),
            s.responses_per_second
        );
        out.push_str(&ops_table(&s.ops));
    }
    out
}

/// Median of a non-empty list (the lower middle for even lengths is not used: the mean of
/// the two middle values).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// min / median / max of the responses per second of `runs`, rounded to whole responses
/// (as the tracker-workers table and the history round them).
pub fn min_median_max(runs: &[&RunResult]) -> String {
    let mut v: Vec<f64> = runs
        .iter()
        .map(|r| r.summary.responses_per_second)
        .collect();
    if v.is_empty() {
        return "-".into();
    }
    let m = median(&mut v);
    format!(
        "{} / **{}** / {}",
        thousands(v[0].round() as u64),
        thousands(m.round() as u64),
        thousands(v[v.len() - 1].round() as u64)
    )
}

/// The run whose responses per second is the median of `runs` (for its latency table).
pub fn median_run<'a>(runs: &[&'a RunResult]) -> Option<&'a RunResult> {
    let mut v: Vec<&RunResult> = runs.to_vec();
    v.sort_by(|a, b| {
        a.summary
            .responses_per_second
            .total_cmp(&b.summary.responses_per_second)
    });
    v.get(v.len() / 2).copied()
}

/// Seed 003's "Comparison with Previous Run" table for one contender.
pub fn baseline_table(previous: &RunResult, current: &RunResult) -> String {
    let mut out = String::from(
        "| Metric | Previous | Current | Change |\n|--------|----------|---------|--------|\n",
    );
    let (p, c) = (&previous.summary, &current.summary);
    let row = |out: &mut String, name: &str, a: f64, b: f64, f: &dyn Fn(f64) -> String| {
        let _ = writeln!(out, "| {name} | {} | {} | {} |", f(a), f(b), change(a, b));
    };
    let count = |x: f64| thousands(x as u64);
    row(
        &mut out,
        "Total Responses",
        p.responses as f64,
        c.responses as f64,
        &count,
    );
    row(
        &mut out,
        "Responses/s",
        p.responses_per_second,
        c.responses_per_second,
        &count,
    );
    if let (Some(a), Some(b)) = (p.main_op(), c.main_op()) {
        row(&mut out, "Avg Announce Latency", a.avg, b.avg, &latency);
        row(&mut out, "P95 Announce Latency", a.p95, b.p95, &latency);
        row(&mut out, "P99 Announce Latency", a.p99, b.p99, &latency);
        row(&mut out, "Max Announce Latency", a.max, b.max, &latency);
    }
    if let (Some(a), Some(b)) = (previous.cpu.tracker_percent, current.cpu.tracker_percent) {
        row(&mut out, "Tracker CPU", a, b, &|x| format!("{x:.0}%"));
    }
    if let (Some(a), Some(b)) = (
        previous.responses_per_tracker_cpu_second,
        current.responses_per_tracker_cpu_second,
    ) {
        row(&mut out, "Responses per tracker CPU-second", a, b, &count);
    }
    let _ = writeln!(
        out,
        "| Error Rate | {:.2}% | {:.2}% | {} |",
        100.0 * p.error_rate,
        100.0 * c.error_rate,
        change(p.error_rate, c.error_rate)
    );
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_command_line_reads_back_as_the_same_arguments() {
        let args = [
            "shoal-bench",
            "compare",
            "--tracker",
            "shoal=target/release/shoal --https 127.0.0.1:{port} --state-file=",
            "--tracker",
            "aquatic_ws",
        ];
        let line = quoted(args.iter().map(|a| a.to_string()));
        assert_eq!(
            line,
            "shoal-bench compare --tracker 'shoal=target/release/shoal --https 127.0.0.1:{port} --state-file=' --tracker aquatic_ws"
        );
        assert_eq!(shlex::split(&line).unwrap(), args);
    }

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
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn run_text_shows_retried_keep_alive_closes_only_when_there_were_some() {
        let mut r = result(4, (10, 0.0, 100.0, 200.0), 0);
        assert!(!run_text(&r).contains("keep-alive"));
        r.summary.reconnects = 1234;
        assert!(
            run_text(&r).contains("\nserver-closed keep-alive connections: 1,234 (retried)\n"),
            "{}",
            run_text(&r)
        );
    }

    /// A ws run of `clients` connections: `ann.0` announces at latencies (µs) spread evenly
    /// from `ann.2` to `ann.3` over 10 s, and `errors` timeouts.
    pub(crate) fn result(clients: usize, ann: (u64, f64, f64, f64), errors: u64) -> RunResult {
        use crate::stats::{ErrorKind, Op, Stats};
        let mut st = Stats::for_tcp();
        // `ann.0` announces at latencies spread evenly from min to max.
        let (n, _, min, max) = ann;
        for i in 0..n {
            let us = min + (max - min) * i as f64 / (n - 1).max(1) as f64;
            st.record(Op::Announce, (us * 1000.0) as u64);
        }
        for _ in 0..errors {
            st.error(ErrorKind::Timeout);
        }
        let args = crate::run::RunArgs {
            duration: std::time::Duration::from_secs(10),
            warmup: std::time::Duration::ZERO,
            workers: 1,
            timeout: std::time::Duration::from_secs(1),
            rate: None,
            tracker_pid: None,
            json: None,
            quiet: true,
            max_send_lag: crate::scale::default_max_send_lag(),
        };
        let cpu = crate::cpu::CpuUse {
            wall_seconds: 10.0,
            generator_cpu_seconds: 5.0,
            generator_percent: 50.0,
            tracker_cpu_seconds: Some(8.0),
            tracker_percent: Some(80.0),
            others_percent: Some(1.0),
            ksoftirqd_percent: None,
        };
        RunResult::new("ws", "ws://x".into(), &args, clients, st.summary(10.0), cpu)
    }

    #[test]
    fn clients_table_has_seed_004_columns_and_figures() {
        let rs = vec![
            result(1, (1001, 0.0, 300.0, 500.0), 0),
            result(2, (2001, 0.0, 1000.0, 3000.0), 0),
        ];
        let t = clients_table(&rs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("| Number of Clients | Total Messages | Average Latency (ms)"));
        // 1001 messages in 10 s: 100.10/s; latency avg 0.40 ms, min 0.30, max 0.50.
        assert_eq!(
            lines[2],
            "| 1 | 1001 | 0.40 | 0.30 | 0.50 | 100.10 | 100.10 |"
        );
        assert_eq!(
            lines[3],
            "| 2 | 2001 | 2.00 | 1.00 | 3.00 | 200.10 | 100.05 |"
        );
    }

    #[test]
    fn scenarios_report_names_loads_and_rates_errors() {
        let rs = vec![
            result(10, (1000, 0.0, 100.0, 300.0), 0),
            result(100, (1000, 0.0, 1000.0, 3000.0), 10),
            result(1000, (1000, 0.0, 10000.0, 30000.0), 0),
        ];
        let t = scenarios_report(&rs);
        assert!(
            t.contains("| **Light Load** | 10 clients | 10s | 100 |"),
            "{t}"
        );
        assert!(
            t.contains("| **Medium Load** | 100 clients | 10s | 100 | 2.90ms | 0.99% |"),
            "{t}"
        );
        assert!(t.contains("| **Heavy Load** | 1000 clients |"));
        assert!(t.contains("| Failed | 10 (0.99%) |"), "{t}");
        assert_eq!(t.matches("| Operation |").count(), 3);
    }

    #[test]
    fn baseline_table_shows_changes() {
        let a = result(100, (1000, 0.0, 1000.0, 3000.0), 0);
        let b = result(100, (1100, 0.0, 1000.0, 2000.0), 0);
        let t = baseline_table(&a, &b);
        assert!(
            t.contains("| Total Responses | 1,000 | 1,100 | +10.0% |"),
            "{t}"
        );
        assert!(
            t.contains("| Max Announce Latency | 3.00ms | 2.00ms | -33.3% |"),
            "{t}"
        );
        assert!(
            t.contains("| Error Rate | 0.00% | 0.00% | No change |"),
            "{t}"
        );
    }
}
