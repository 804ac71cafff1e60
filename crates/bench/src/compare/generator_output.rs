//! Reading what the other load generators print: aquatic's load testers (a report every
//! 5 s, then a summary) and wrk (one summary at the end).
//!
//! Pure functions from text to figures, so that each format is tested against a captured
//! sample without running anything.

use std::collections::BTreeMap;

/// The 5-s reports of an aquatic load tester, in order; each maps a figure to its value:
/// `requests` and `responses` (per second), each `- Kind responses:` line as `kind`
/// (lower case), `connections` (Active connections) and `peers_per_announce`. The summary
/// after `# aquatic load test report` is not a report.
pub fn aquatic_reports(text: &str) -> Vec<BTreeMap<String, f64>> {
    let mut reports: Vec<BTreeMap<String, f64>> = Vec::new();
    for line in text.lines() {
        let s = line.trim();
        if s.starts_with("# aquatic load test report") {
            break;
        }
        let per_second = |rest: &str| rest.trim().trim_end_matches("/second").parse::<f64>().ok();
        if let Some(rest) = s.strip_prefix("Requests out:") {
            let mut r = BTreeMap::new();
            if let Some(v) = per_second(rest) {
                r.insert("requests".to_string(), v);
            }
            reports.push(r);
            continue;
        }
        let Some(report) = reports.last_mut() else {
            continue;
        };
        let (key, value) = if let Some(rest) = s.strip_prefix("Responses in:") {
            ("responses".to_string(), per_second(rest))
        } else if let Some(rest) = s.strip_prefix("Active connections:") {
            ("connections".to_string(), rest.trim().parse().ok())
        } else if let Some(rest) = s.strip_prefix("Peers per announce response:") {
            ("peers_per_announce".to_string(), rest.trim().parse().ok())
        } else if let Some((kind, rest)) = s
            .strip_prefix("- ")
            .and_then(|k| k.split_once("responses:"))
        {
            (kind.trim().to_lowercase(), rest.trim().parse().ok())
        } else {
            continue;
        };
        if let Some(v) = value.filter(|v: &f64| v.is_finite()) {
            report.insert(key, v);
        }
    }
    reports
}

/// The mean of each figure over reports `first..last` (report k covers seconds
/// 5(k-1)..5k of the run).
pub fn window_means(
    reports: &[BTreeMap<String, f64>],
    first: usize,
    last: usize,
) -> BTreeMap<String, f64> {
    let window = &reports[first.min(reports.len())..last.min(reports.len())];
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for r in window {
        for (k, v) in r {
            *sums.entry(k.clone()).or_default() += v;
        }
    }
    let n = window.len().max(1) as f64;
    sums.into_iter().map(|(k, v)| (k, v / n)).collect()
}

/// Lines where a load tester reports one failed request: counted, not kept.
pub fn is_failure_line(line: &str) -> bool {
    line.contains("failure response:") || line.contains("received error response")
}

/// Tallies failure lines by what they say (the failure reason, where the line gives one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailureTally(BTreeMap<String, u64>);

impl FailureTally {
    pub fn add(&mut self, line: &str) {
        let said = line
            .split_once("reason: ")
            .map_or(line, |(_, reason)| reason)
            .trim();
        *self.0.entry(said.to_string()).or_default() += 1;
    }

    /// Every distinct line (most often first, then by text) with its count: `10 × invalid
    /// port 0; 1 × ...`, the first `max` of them.
    pub fn summary(&self, max: usize) -> String {
        let mut all: Vec<(&String, &u64)> = self.0.iter().collect();
        all.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut parts: Vec<String> = all
            .iter()
            .take(max)
            .map(|(said, n)| format!("{n} × {said}"))
            .collect();
        if all.len() > max {
            parts.push(format!("{} more", all.len() - max));
        }
        parts.join("; ")
    }
}

/// wrk's summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WrkSummary {
    /// Requests completed over the whole run.
    pub total: u64,
    pub seconds: f64,
    /// wrk's Requests/sec: over the whole run (it has no warm-up).
    pub requests_per_second: f64,
    pub non_2xx: u64,
    /// connect, read, write, timeout.
    pub socket_errors: [u64; 4],
    /// Latency percentiles (`50`, `75`, `90`, `99`) in ms, with `--latency`.
    pub latency_ms: BTreeMap<String, f64>,
}

/// `1.23ms`, `456.78us`, `2.00s`, `1m` in ms.
fn wrk_ms(s: &str) -> Option<f64> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
    let scale = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(num.parse::<f64>().ok()? * scale)
}

/// Parses wrk's output; `None` if it has no totals (wrk failed).
pub fn wrk_summary(text: &str) -> Option<WrkSummary> {
    let mut w = WrkSummary::default();
    let mut totals = false;
    for line in text.lines() {
        let s = line.trim();
        if let Some((n, rest)) = s.split_once(" requests in ") {
            w.total = n.trim().parse().ok()?;
            w.seconds = wrk_ms(rest.split(',').next()?.trim())? / 1000.0;
            totals = true;
        } else if let Some(v) = s.strip_prefix("Requests/sec:") {
            w.requests_per_second = v.trim().parse().ok()?;
        } else if let Some(v) = s.strip_prefix("Non-2xx or 3xx responses:") {
            w.non_2xx = v.trim().parse().ok()?;
        } else if let Some(v) = s.strip_prefix("Socket errors:") {
            for (i, part) in v.split(',').enumerate().take(4) {
                w.socket_errors[i] = part.split_whitespace().last()?.parse().ok()?;
            }
        } else if let Some((pct, value)) = s.split_once("%") {
            if let (Ok(p), Some(ms)) = (pct.parse::<u32>(), wrk_ms(value.trim())) {
                w.latency_ms.insert(p.to_string(), ms);
            }
        }
    }
    totals.then_some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// aquatic_udp_load_test 0.9.0 against shoal (captured by a smoke run of
    /// `compare --generator aquatic`): two reports and the summary.
    const AQUATIC_UDP: &str = "\
Requests out: 165889.33/second
Responses in: 149283.20/second
  - Connect responses:  73992.01
  - Announce responses: 73831.21
  - Scrape responses:   1459.98
  - Error responses:    0.00
Peers per announce response: 8.15

Requests out: 160816.30/second
Responses in: 145395.36/second
  - Connect responses:  71934.24
  - Announce responses: 72002.82
  - Scrape responses:   1458.30
  - Error responses:    0.00
Peers per announce response: 16.17

# aquatic load test report

Test ran for 10 seconds (only last 5 included in summary)
Average responses per second: 145395.36
";

    /// aquatic_http_load_test 0.9.0 over TLS against shoal (captured): two reports, with
    /// the failure lines it prints between them.
    const AQUATIC_HTTP: &str = "\
Requests out: 31476.00/second
Responses in: 31450.60/second
  - Announce responses: 31450.00
  - Scrape responses:   0.00
  - Failure responses:  0.60
Bandwidth out: 60.06Mbit/s
Bandwidth in:  89.79Mbit/s
failure response: reason: invalid port 0
failure response: reason: invalid port 0

Requests out: 33089.00/second
Responses in: 33089.00/second
  - Announce responses: 33088.60
  - Scrape responses:   0.00
  - Failure responses:  0.40
Bandwidth out: 63.13Mbit/s
Bandwidth in:  106.01Mbit/s

";

    /// aquatic_ws_load_test 0.9.0 over wss against shoal (captured): two reports.
    const AQUATIC_WS: &str = "\
Requests out: 56165.00/second
Responses in: 56142.60/second
  - Announce responses: 25336.60
  - Offer responses:    18583.80
  - Answer responses:   1081.40
  - Scrape responses:   0.00
  - Error responses:   11140.80
Active connections: 3

Requests out: 51710.40/second
Responses in: 51686.80/second
  - Announce responses: 25875.20
  - Offer responses:    15150.60
  - Answer responses:   1234.20
  - Scrape responses:   0.00
  - Error responses:   9426.80
Active connections: 7
";

    #[test]
    fn aquatic_udp_reports_and_the_summary_is_left_out() {
        let r = aquatic_reports(AQUATIC_UDP);
        assert_eq!(r.len(), 2);
        let first = [
            ("requests", 165889.33),
            ("responses", 149283.20),
            ("connect", 73992.01),
            ("scrape", 1459.98),
            ("error", 0.0),
            ("peers_per_announce", 8.15),
        ];
        for (figure, value) in first {
            assert_eq!(r[0][figure], value, "{figure}");
        }
        // The window after a 5-s warm-up is the second report, the summary's figure.
        let m = window_means(&r, 1, 2);
        assert_eq!(m["responses"], 145395.36);
        let both = window_means(&r, 0, 5);
        assert!((both["announce"] - (73831.21 + 72002.82) / 2.0).abs() < 1e-6);
        // NaN (no announces) is left out rather than poisoning the mean.
        let nan = aquatic_reports("Requests out: 1.00/second\nPeers per announce response: NaN\n");
        assert!(!nan[0].contains_key("peers_per_announce"));
    }

    #[test]
    fn aquatic_http_and_ws_reports() {
        let h = aquatic_reports(AQUATIC_HTTP);
        assert_eq!(h.len(), 2);
        for (report, figure, value) in [
            (1, "responses", 33089.00),
            (1, "announce", 33088.60),
            (0, "failure", 0.60),
        ] {
            assert_eq!(h[report][figure], value, "{figure}");
        }
        assert_eq!(
            AQUATIC_HTTP.lines().filter(|l| is_failure_line(l)).count(),
            2
        );
        let w = aquatic_reports(AQUATIC_WS);
        assert_eq!(w.len(), 2);
        for (figure, value) in [
            ("offer", 15150.60),
            ("answer", 1234.20),
            ("error", 9426.80),
            ("connections", 7.0),
        ] {
            assert_eq!(w[1][figure], value, "{figure}");
        }
        assert!(is_failure_line(
            "failure response: reason: unknown info hash"
        ));
        assert!(is_failure_line(
            "[WARN] received error response: InfoHashNotAllowed"
        ));
        assert!(!is_failure_line("Responses in: 1/second"));
        let mut tally = FailureTally::default();
        for line in AQUATIC_HTTP.lines().filter(|l| is_failure_line(l)) {
            tally.add(line);
        }
        tally.add("failure response: reason: unknown info hash");
        tally.add("received error response: ErrorResponse { .. }");
        assert_eq!(
            tally.summary(2),
            "2 × invalid port 0; 1 × received error response: ErrorResponse { .. }; \
             1 more"
        );
    }

    /// wrk -t1 -c16 -d4s --latency -H 'Connection: close' against opentracker (captured by
    /// a smoke run of `compare --generator wrk`; opentracker closes without a length, which
    /// wrk counts as read errors).
    const WRK: &str = "\
Running 4s test @ http://127.0.0.1:3700/announce?info_hash=%00%00%00%00%A1%B9e%F4%06%C4%5D%18%80%09EO%F8%8B%B8%A8&peer_id=-SB0001A000000000000&port=6881&uploaded=0&downloaded=0&left=0&compact=1
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     0.97ms    1.44ms   8.94ms   83.78%
    Req/Sec    15.57k     1.29k   19.28k    65.00%
  Latency Distribution
     50%  195.00us
     75%    1.55ms
     90%    3.25ms
     99%    5.80ms
  62325 requests in 4.02s, 9.69MB read
  Socket errors: connect 0, read 62309, write 0, timeout 0
Requests/sec:  15497.84
Transfer/sec:      2.41MB
";

    #[test]
    fn wrk_summary_with_errors_and_percentiles() {
        let w = wrk_summary(WRK).unwrap();
        assert_eq!(w.total, 62325);
        assert_eq!(w.seconds, 4.02);
        assert_eq!(w.requests_per_second, 15497.84);
        assert_eq!(w.non_2xx, 0);
        assert_eq!(w.socket_errors, [0, 62309, 0, 0]);
        assert_eq!(w.latency_ms["50"], 0.195);
        assert_eq!(w.latency_ms["99"], 5.80);
        assert_eq!(w.latency_ms.len(), 4);
        let non2xx = format!("{WRK}  Non-2xx or 3xx responses: 3\n");
        assert_eq!(wrk_summary(&non2xx).unwrap().non_2xx, 3);
        assert!(wrk_summary("unable to connect to 127.0.0.1:3200 Connection refused").is_none());
    }
}
