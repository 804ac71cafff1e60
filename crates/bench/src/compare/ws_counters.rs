//! shoal's own WebTorrent counters beside a load generator's figures: for a contender
//! whose command names an admin listener (`--admin ADDR`), its `shoal_ws_*` series are read
//! from `/metrics` when each round's load has stopped, kept with the round in
//! results.json, and tabled round by round: answers relayed and dropped, offers relayed,
//! dropped and shed, replies dropped, the failure reasons sent and the connections the
//! tracker closed. They are read when the round's window ends, with the load generator's
//! connections still open; the tracker is started fresh for every round, so each reading
//! is that round's totals from its start, warm-up included.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;

use anyhow::Result;

use crate::units::thousands;

use super::private::{flag_value, metrics_text};
use super::results::{describe, Comparison, GeneratorRun};

/// Disconnect reasons that mean the tracker closed the connection (`closed` and `error`
/// are the client's doing: a load tester closes its connections when it exits).
const CLOSED_BY_TRACKER: [&str; 6] = [
    "send_timeout",
    "idle",
    "misbehaved",
    "too_large",
    "rate_limited",
    "blocked",
];

/// The admin listener a contender's command names, if any.
pub fn admin_of(command: &str) -> Option<SocketAddr> {
    flag_value(command, "--admin")?.parse().ok()
}

/// The `shoal_ws_*` series of the tracker at `admin` now: series (name and labels) to value.
pub fn read(admin: SocketAddr) -> Result<BTreeMap<String, f64>> {
    Ok(ws_series(&metrics_text(admin)?))
}

fn ws_series(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| {
            l.starts_with("shoal_ws_") || l.starts_with("shoal_requests_total{protocol=\"ws\"")
        })
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the series of `name` whose labels include every `labels` pair.
fn sum(counters: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    counters
        .iter()
        .filter(|(series, _)| {
            series
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
                && labels.iter().all(|l| series.contains(l))
        })
        // From +0.0: an empty f64 sum is -0.0, which would print as "-0".
        .fold(0.0, |total, (_, v)| total + v)
}

/// The failure reasons a round's counters list, and those that counted. A build without
/// `shoal_ws_failures_total` lists none; what it refused is then read from
/// `shoal_requests_total{protocol="ws"}` (answers not relayed, invalid messages, refused
/// announces and scrapes), as `action/result`.
fn failures(counters: &BTreeMap<String, f64>) -> (usize, Vec<String>) {
    let mut listed = 0;
    let mut counted = Vec::new();
    for (series, v) in counters {
        let Some(labels) = series.strip_prefix("shoal_ws_failures_total{") else {
            continue;
        };
        listed += 1;
        if *v > 0.0 {
            let reason = labels
                .trim_start_matches("reason=\"")
                .trim_end_matches("\"}");
            counted.push(format!("{reason}: {}", thousands(*v as u64)));
        }
    }
    if listed == 0 {
        for (series, v) in counters {
            let Some(labels) = series.strip_prefix("shoal_requests_total{protocol=\"ws\",") else {
                continue;
            };
            let label = |key: &str| {
                let rest = labels.split(&format!("{key}=\"")).nth(1)?;
                rest.split('"').next()
            };
            let (Some(action), Some(result)) = (label("action"), label("result")) else {
                continue;
            };
            let refused = match action {
                "answer" => !matches!(result, "ok" | "dropped"),
                "invalid" => true,
                _ => result == "refused",
            };
            if refused && *v > 0.0 {
                counted.push(format!("{action}/{result}: {}", thousands(*v as u64)));
            }
        }
    }
    (listed, counted)
}

fn row(name: &str, r: &GeneratorRun) -> String {
    let c = &r.tracker_counters;
    let relayed = |message: &str, result: &str| {
        sum(
            c,
            "shoal_ws_relayed_total",
            &[
                &format!("message=\"{message}\""),
                &format!("result=\"{result}\""),
            ],
        )
    };
    let n = |x: f64| thousands(x.round() as u64);
    let (answers, dropped) = (relayed("answer", "ok"), relayed("answer", "dropped"));
    let share = if answers + dropped > 0.0 {
        format!("{:.2}%", 100.0 * dropped / (answers + dropped))
    } else {
        "-".into()
    };
    let (listed, counted) = failures(c);
    let sent = if counted.is_empty() {
        format!("none ({listed} reasons listed)")
    } else {
        counted.join(", ")
    };
    let closed: f64 = CLOSED_BY_TRACKER
        .iter()
        .map(|reason| {
            sum(
                c,
                "shoal_ws_disconnects_total",
                &[&format!("reason=\"{reason}\"")],
            )
        })
        .sum();
    format!(
        "| {name} | {} | {} | {} | {} | {} | {share} | {} | {} | {} | {} | {} | {sent} | {} |\n",
        describe(r.point),
        r.round + 1,
        r.rates
            .get("error")
            .map_or("-".into(), |e| format!("{e:.1}")),
        n(answers),
        n(dropped),
        n(relayed("offer", "ok")),
        n(relayed("offer", "dropped")),
        n(relayed("offer", "shed")),
        n(sum(c, "shoal_ws_replies_dropped_total", &[])),
        n(sum(c, "shoal_ws_replies_shed_total", &[])),
        n(closed),
    )
}

/// The section (empty when no run read any counter).
pub fn section(cmp: &Comparison) -> String {
    let mut rows = String::new();
    for c in &cmp.contenders {
        for r in c
            .generator_runs
            .iter()
            .filter(|r| !r.tracker_counters.is_empty())
        {
            rows.push_str(&row(&c.name, r));
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "\n### The tracker's own counts, round by round\n\n\
         Read from the tracker's `/metrics` when each round's window ended, the load \
         generator's connections still open (the tracker is started fresh for every round: \
         these are the round's totals from its start, warm-up included). \
         Error responses are the load generator's count per second over the window. \
         Answers and offers: `shoal_ws_relayed_total` by result (`ok` queued for the \
         recipient, `dropped` its queue was full, offers `shed` not relayed, the offerer \
         having no room left for their answers); replies dropped: `shoal_ws_replies_dropped_total`; \
         replies shed (announces none of whose offers could go): `shoal_ws_replies_shed_total`; \
         failure reasons: `shoal_ws_failures_total` by reason; closed by the tracker: \
         `shoal_ws_disconnects_total` for {} (the load generator's own closing when it \
         exits counts as `closed` or `error`).\n\n\
         | Contender | Load | Round | Error responses/s | Answers relayed | Answers dropped | \
         Answers dropped, share | Offers relayed | Offers dropped | Offers shed | \
         Replies dropped | Replies shed | Failure reasons sent | Connections closed by the tracker |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        CLOSED_BY_TRACKER.join(", ")
    );
    out.push_str(&rows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP shoal_ws_relayed_total relays\n\
        shoal_ws_relayed_total{message=\"answer\",result=\"ok\"} 990\n\
        shoal_ws_relayed_total{message=\"answer\",result=\"dropped\"} 10\n\
        shoal_ws_relayed_total{message=\"offer\",result=\"ok\"} 5000\n\
        shoal_ws_relayed_total{message=\"offer\",result=\"shed\"} 70\n\
        shoal_ws_replies_dropped_total 1234\n\
        shoal_ws_replies_shed_total 56\n\
        shoal_ws_failures_total{reason=\"malformed\"} 0\n\
        shoal_ws_failures_total{reason=\"no_such_offer\"} 3\n\
        shoal_ws_disconnects_total{reason=\"closed\"} 16\n\
        shoal_ws_disconnects_total{reason=\"send_timeout\"} 2\n\
        shoal_requests_total{protocol=\"ws\",action=\"announce\",result=\"ok\"} 1\n";

    #[test]
    fn only_the_ws_series_are_kept_and_a_round_reads_as_a_row() {
        let c = ws_series(METRICS);
        assert_eq!(c.len(), 11);
        assert_eq!(
            sum(&c, "shoal_ws_relayed_total", &["message=\"answer\""]),
            1000.0
        );
        assert_eq!(sum(&c, "shoal_ws_replies_dropped_total", &[]), 1234.0);
        let none = sum(&c, "shoal_ws_missing_total", &[]);
        assert!(none == 0.0 && none.is_sign_positive());
        let run = GeneratorRun {
            round: 2,
            tracker_counters: c,
            rates: [("error".to_string(), 0.0)].into(),
            ..Default::default()
        };
        let row = row("shoal", &run);
        assert!(
            row.starts_with(
                "| shoal | 0 workers | 3 | 0.0 | 990 | 10 | 1.00% | 5,000 | 0 | 70 | 1,234 | 56 | "
            ),
            "{row}"
        );
        assert!(row.ends_with("| no_such_offer: 3 | 2 |\n"), "{row}");
        assert_eq!(
            admin_of("shoal --https x --admin 127.0.0.1:3811"),
            Some("127.0.0.1:3811".parse().unwrap())
        );
        assert_eq!(admin_of("aquatic_ws -c x.toml"), None);
    }

    #[test]
    fn no_reason_counted_reads_none_with_the_number_listed() {
        let c = ws_series("shoal_ws_failures_total{reason=\"malformed\"} 0\n");
        assert_eq!(failures(&c), (1, vec![]));
        // A build without the counter: its refusals, from shoal_requests_total.
        let c = ws_series(
            "shoal_requests_total{protocol=\"ws\",action=\"answer\",result=\"ok\"} 9\n\
             shoal_requests_total{protocol=\"ws\",action=\"answer\",result=\"dropped\"} 9\n\
             shoal_requests_total{protocol=\"ws\",action=\"answer\",result=\"no_such_offer\"} 21\n\
             shoal_requests_total{protocol=\"ws\",action=\"announce\",result=\"ok\"} 9\n\
             shoal_requests_total{protocol=\"udp\",action=\"invalid\",result=\"error\"} 9\n",
        );
        assert_eq!(
            failures(&c),
            (0, vec!["answer/no_such_offer: 21".to_string()])
        );
    }
}
