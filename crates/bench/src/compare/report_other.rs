//! The report's sections for what is not shoal-bench's own load: runs of another load
//! generator (aquatic's load testers, wrk), idle-connection memory, and the noisy runs
//! that were dropped.
//!
//! Apart from `report.rs` because their figures come from other programs' counters, not
//! from shoal-bench's histograms: no latency by operation, no charts by level.

use std::fmt::Write;

use crate::report::median;
use crate::units::thousands;

use super::contender::Cert;
use super::figures::round_ratios;
use super::results::{
    describe, generator_name, Comparison, Contender, Generator, GeneratorRun, Point,
};

/// The points a contender's generator runs were made at, in order.
fn generator_points(c: &Contender) -> Vec<Point> {
    let mut ps: Vec<Point> = Vec::new();
    for r in &c.generator_runs {
        if !ps.contains(&r.point) {
            ps.push(r.point);
        }
    }
    ps
}

/// Median over the runs at `p` of `f`, where defined.
pub fn median_of(runs: &[&GeneratorRun], f: impl Fn(&GeneratorRun) -> Option<f64>) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    (!v.is_empty()).then(|| median(&mut v))
}

/// The runs of `c` at point `p`.
pub fn runs_at(c: &Contender, p: Point) -> Vec<&GeneratorRun> {
    c.generator_runs.iter().filter(|r| r.point == p).collect()
}

/// `min / **median** / max`, or `-`.
pub fn spread(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = median(&mut v.clone());
    let t = |x: f64| thousands(x.round() as u64);
    format!("{} / **{}** / {}", t(v[0]), t(m), t(v[v.len() - 1]))
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into())
}

/// Throughput and CPU under another load generator, the ratios, its notes and its config.
pub fn generator_section(cmp: &Comparison) -> String {
    let mut out = String::new();
    let ws = cmp.protocol == "ws";
    let _ = write!(
        out,
        "\n## Under {} (responses per second and per tracker CPU-second)\n\n",
        generator_name(cmp)
    );
    let _ = writeln!(
        out,
        "Rates are the load generator's own counts{}; CPU is over the window after the \
         warm-up. Tracker CPU-seconds are what the tracker process used.\n",
        if cmp.generator == Generator::Wrk {
            " (wrk's Requests/sec, over the whole run: it has no warm-up)"
        } else {
            " (the mean of its 5-s reports after the warm-up)"
        }
    );
    out.push_str("| Contender | Load | Runs | Responses/s | Responses per tracker CPU-second |");
    if ws {
        // What the load tester's clients read besides announce responses: offers and
        // answers relayed to them, and error responses (a WebTorrent tracker's verdicts
        // on what it was sent).
        out.push_str(
            " Announces/s | Announces per tracker CPU-second | Offers relayed per tracker \
             CPU-second | Answers relayed per tracker CPU-second | Error responses/s |",
        );
    }
    let wrk = cmp.generator == Generator::Wrk;
    if wrk {
        out.push_str(" wrk p99 latency (ms) |");
    }
    out.push_str(" Tracker CPU | Load generator CPU | Others' CPU | Tracker RSS (MiB) |\n|---|---|---|---|---|");
    if ws {
        out.push_str("---|---|---|---|---|");
    }
    if wrk {
        out.push_str("---|");
    }
    out.push_str("---|---|---|---|\n");
    for c in &cmp.contenders {
        for p in generator_points(c) {
            let runs = runs_at(c, p);
            let col = |f: &dyn Fn(&GeneratorRun) -> Option<f64>| {
                runs.iter().filter_map(|r| f(r)).collect::<Vec<_>>()
            };
            let _ = write!(
                out,
                "| {} | {} | {} | {} | {} |",
                c.name,
                describe(p),
                runs.len(),
                spread(col(&|r| Some(r.responses_per_second))),
                spread(col(&|r| r.per_tracker_cpu_second(None)))
            );
            if ws {
                let _ = write!(
                    out,
                    " {} | {} | {} | {} | {} |",
                    spread(col(&|r| r.rates.get("announce").copied())),
                    spread(col(&|r| r.per_tracker_cpu_second(Some("announce")))),
                    spread(col(&|r| r.per_tracker_cpu_second(Some("offer")))),
                    spread(col(&|r| r.per_tracker_cpu_second(Some("answer")))),
                    spread(col(&|r| r.rates.get("error").copied()))
                );
            }
            if wrk {
                let p99 = median_of(&runs, |r| r.latency_ms.get("99").copied());
                let _ = write!(
                    out,
                    " {} |",
                    p99.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
                );
            }
            let _ = writeln!(
                out,
                " {} | {} | {} | {} |",
                pct(median_of(&runs, |r| r.cpu.tracker_percent)),
                pct(median_of(&runs, |r| Some(r.cpu.generator_percent))),
                pct(median_of(&runs, |r| r.cpu.others_percent)),
                median_of(&runs, |r| r.tracker_rss_kib.map(|k| k as f64 / 1024.0))
                    .map(|m| format!("{m:.1}"))
                    .unwrap_or_else(|| "-".into())
            );
        }
    }
    out.push_str(&ratios(cmp));
    out.push_str(&super::ws_counters::section(cmp));
    let notes: Vec<String> = cmp
        .contenders
        .iter()
        .flat_map(|c| {
            c.generator_runs
                .iter()
                .filter(|r| !r.notes.is_empty())
                .map(move |r| format!("- {} round {}: {}", c.name, r.round + 1, r.notes.join("; ")))
        })
        .collect();
    if !notes.is_empty() {
        let _ = write!(out, "\n### Notes\n\n{}\n", notes.join("\n"));
    }
    if let Some(cmd) = &cmp.generator_command {
        let (line, config) = cmd.split_once("\n\n").unwrap_or((cmd, ""));
        let _ = write!(out, "\n### Load generator\n\n`{line}`\n");
        if !config.is_empty() {
            let _ = write!(out, "\n```toml\n{}\n```\n", config.trim_end());
        }
    }
    if cmp.tls {
        let _ = write!(
            out,
            "\nTLS: a self-signed certificate, `{}`.\n",
            Cert::COMMAND
        );
    }
    out
}

/// The median of a contender's responses (or announces) per tracker CPU-second at its
/// heaviest point.
pub fn per_cpu_median(c: &Contender, kind: Option<&str>) -> Option<f64> {
    let p = *generator_points(c).last()?;
    median_of(&runs_at(c, p), |r| r.per_tracker_cpu_second(kind))
}

/// shoal (the first contender) against each other: ratio of median per-CPU figures.
fn ratios(cmp: &Comparison) -> String {
    let mut out = String::new();
    let Some(first) = cmp.contenders.first() else {
        return out;
    };
    let kinds: &[(Option<&str>, &str)] = if cmp.protocol == "ws" {
        &[
            (None, "responses"),
            (Some("announce"), "announces"),
            (Some("offer"), "offers relayed"),
            (Some("answer"), "answers relayed"),
        ]
    } else {
        &[(None, "responses")]
    };
    let points = generator_points(first);
    for other in &cmp.contenders[1..] {
        for &p in &points {
            // At one load point the line reads as before; at several (tiers of tracker
            // workers), one line per point.
            let at = if points.len() > 1 {
                format!(" at {}", describe(p))
            } else {
                String::new()
            };
            for (kind, label) in kinds {
                let median =
                    |c: &Contender| median_of(&runs_at(c, p), |r| r.per_tracker_cpu_second(*kind));
                if let (Some(a), Some(b)) = (median(first), median(other)) {
                    let by_round = round_ratios(first, other, p, *kind)
                        .map_or(String::new(), |r| {
                            format!("; round by round {}", r.describe())
                        });
                    let _ = writeln!(
                        out,
                        "- median {label} per tracker CPU-second{at}, {} / {}: **{:.3}**{by_round}",
                        first.name,
                        other.name,
                        a / b
                    );
                }
            }
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\n{out}")
    }
}

/// The idle-connection table.
pub fn idle_section(cmp: &Comparison) -> String {
    let mut out = String::new();
    let asked = cmp.idle.first().map(|r| r.connections.asked).unwrap_or(0);
    let _ = write!(
        out,
        "\n## Memory per idle WebSocket connection\n\n{} connections per tracker and mode, \
         opened 64 at a time from loopback source addresses; each does the upgrade \
         handshake and then sends nothing. RSS before: 2 s after the tracker answered; \
         after: 3 s after the last connection opened.\n\n\
         | Tracker | Mode | Opened (failed) | Still open at the end | RSS before (KiB) | RSS after (KiB) | KiB per connection | RSS after closing (KiB) | Tracker fds before / after |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        thousands(asked as u64)
    );
    let kib = |x: Option<u64>| x.map(thousands).unwrap_or_else(|| "-".into());
    let fds = |x: Option<usize>| x.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    for r in &cmp.idle {
        let c = &r.connections;
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} | {} | **{}** | {} | {} / {} |",
            r.contender,
            r.mode,
            thousands(c.opened as u64),
            c.failed_count(),
            thousands(c.alive_at_end as u64),
            kib(r.tracker.rss_kib.before),
            kib(r.tracker.rss_kib.after),
            r.kib_per_connection()
                .map(|k| format!("{k:.1}"))
                .unwrap_or_else(|| "-".into()),
            kib(r.tracker.rss_kib.closed),
            fds(r.tracker.fds.before),
            fds(r.tracker.fds.after)
        );
    }
    let failures: Vec<String> = cmp
        .idle
        .iter()
        .filter(|r| !r.connections.failed.is_empty())
        .map(|r| {
            let why: Vec<String> = r
                .connections
                .failed
                .iter()
                .map(|(e, n)| format!("{n} × {e}"))
                .collect();
            format!("- {} ({}): {}", r.contender, r.mode, why.join("; "))
        })
        .collect();
    if !failures.is_empty() {
        let _ = write!(out, "\nFailed connections:\n\n{}\n", failures.join("\n"));
    }
    out
}

/// Runs dropped (or kept after the last retry) because other processes were busy.
pub fn noise_section(cmp: &Comparison) -> String {
    let Some(limit) = cmp.noise_limit_percent else {
        return String::new();
    };
    let mut out = format!(
        "\n## Noisy runs\n\nA run during which other processes used more than {limit:.0}% of \
         one core is dropped and run again; when no retry is left it is kept and marked here.\n\n"
    );
    if cmp.dropped.is_empty() {
        out.push_str("None.\n");
        return out;
    }
    out.push_str("| Contender | Round | Load | Others' CPU | Outcome |\n|---|---|---|---|---|\n");
    for d in &cmp.dropped {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0}% | {} |",
            d.contender,
            d.round + 1,
            d.at,
            d.others_percent,
            if d.kept {
                "kept (no retry left)"
            } else {
                "dropped, run again"
            }
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compare::report::tests::comparison;
    use crate::compare::results::{
        DroppedRun, IdleConnections, IdleRun, Readings, TrackerReadings,
    };
    use crate::cpu::CpuUse;

    /// A generator run of `rps` responses/s where the tracker used `cpu` CPU-seconds in 10 s.
    pub(crate) fn generator_run(round: usize, rps: f64, announce: f64, cpu: f64) -> GeneratorRun {
        GeneratorRun {
            round,
            point: Point {
                workers: 1,
                ..Point::default()
            },
            responses_per_second: rps,
            rates: [
                ("announce".to_string(), announce),
                ("offer".to_string(), announce * 2.0),
            ]
            .into(),
            cpu: CpuUse {
                wall_seconds: 10.0,
                generator_percent: 90.0,
                tracker_cpu_seconds: Some(cpu),
                tracker_percent: Some(cpu * 10.0),
                others_percent: Some(1.0),
                ..Default::default()
            },
            tracker_rss_kib: Some(20480),
            ..Default::default()
        }
    }

    pub(crate) fn under_aquatic_ws() -> Comparison {
        let mut cmp = comparison(vec![1], vec![]);
        cmp.generator = Generator::Aquatic;
        cmp.tls = true;
        cmp.generator_command = Some("aquatic_ws_load_test -c x.toml\n\nnum_workers = 1".into());
        for (c, per) in cmp.contenders.iter_mut().zip([76_000.0, 60_000.0]) {
            c.runs.clear();
            // 10 s at `per` responses per CPU-second with 5 CPU-seconds (50%).
            c.generator_runs = (0..3)
                .map(|r| generator_run(r, per / 2.0 * (1.0 + r as f64 / 10.0), per / 20.0, 5.0))
                .collect();
        }
        cmp
    }

    #[test]
    fn generator_section_has_per_cpu_figures_ratios_and_config() {
        let md = crate::compare::report::markdown(&under_aquatic_ws(), None);
        assert!(md.contains("## Under aquatic_ws_load_test"), "{md}");
        assert!(md.contains("| Contender | Load | Runs | Responses/s | Responses per tracker CPU-second | Announces/s |"));
        // Medians: 38,000 × 1.1 = 41,800 responses/s; 76,000 × 1.1 per CPU-second.
        assert!(md.contains("| shoal | 1 workers | 3 | 38,000 / **41,800** / 45,600 | 76,000 / **83,600** / 91,200 |"), "{md}");
        assert!(
            md.contains("- median responses per tracker CPU-second, shoal / aquatic_ws: **1.267**"),
            "{md}"
        );
        assert!(
            md.contains("- median announces per tracker CPU-second, shoal / aquatic_ws: **1.267**")
        );
        assert!(
            md.contains(
                "- median offers relayed per tracker CPU-second, shoal / aquatic_ws: **1.267**"
            ),
            "{md}"
        );
        // 3,800 announces a second at 5 CPU-seconds in 10 s; offers twice that; answers and
        // errors not reported by the generator: "-", not a zero nobody measured.
        assert!(
            md.contains(
                "| 3,800 / **3,800** / 3,800 | 7,600 / **7,600** / 7,600 | 15,200 / **15,200** / \
                 15,200 | - | - |"
            ),
            "{md}"
        );
        assert!(md.contains("`aquatic_ws_load_test -c x.toml`\n\n```toml\nnum_workers = 1\n```"));
        assert!(md.contains("TLS: a self-signed certificate"));
        assert!(md.contains("## Noisy runs") && md.contains("None."));
        assert!(!md.contains("## Latency by operation"));
    }

    #[test]
    fn noisy_and_idle_sections() {
        let mut cmp = comparison(vec![1], vec![]);
        cmp.dropped.push(DroppedRun {
            contender: "shoal".into(),
            round: 1,
            at: "1 workers".into(),
            others_percent: 23.4,
            kept: false,
        });
        let md = crate::compare::report::markdown(&cmp, None);
        assert!(
            md.contains("| shoal | 2 | 1 workers | 23% | dropped, run again |"),
            "{md}"
        );
        cmp.idle.push(IdleRun {
            contender: "shoal".into(),
            mode: "ws".into(),
            connections: IdleConnections {
                asked: 1000,
                opened: 1000,
                alive_at_end: 1000,
                open_seconds: 1.0,
                ..Default::default()
            },
            tracker: TrackerReadings {
                rss_kib: Readings {
                    before: Some(10_000),
                    after: Some(27_600),
                    closed: Some(12_000),
                },
                fds: Readings {
                    before: Some(10),
                    after: Some(1010),
                    closed: None,
                },
            },
        });
        let md = crate::compare::report::markdown(&cmp, None);
        assert!(md.contains("| shoal | ws | 1,000 (0) | 1,000 | 10,000 | 27,600 | **17.6** | 12,000 | 10 / 1010 |"), "{md}");
        assert!(!md.contains("## Throughput"));
    }
}
