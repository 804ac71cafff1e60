//! The Markdown report of a comparison (seeds 000–003's tables: throughput by load level
//! with min / median / max, CPU use, latency by operation, the comparison with the
//! previous run) and its SVG charts.
//!
//! A pure function from [`Comparison`] to text, so that the layout is unit tested without
//! running anything, and `render` rewrites a report from its results.json. The sections
//! for other load generators, idle connections and noisy runs are in `report_other.rs`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::report;
use crate::run::RunResult;
use crate::units::thousands;

use crate::history::HistoryRun;

use super::args::ReportArgs;
use super::figures::generator_round_ratios;
use super::report_other as other;
use super::results::{describe, read_results, Comparison, Contender, Generator, Point};
use super::tier_report;

impl Comparison {
    /// The axis the charts run along: clients when several were run, else workers.
    fn by_clients(&self) -> bool {
        self.clients.len() > 1
    }

    fn x_label(&self) -> &'static str {
        match (self.by_clients(), self.protocol.as_str()) {
            (false, _) => "load-generator workers",
            (true, "udp") => "requests in flight per worker",
            (true, _) => "connections",
        }
    }

    fn x_of(&self, p: Point) -> usize {
        if self.by_clients() {
            p.clients.unwrap_or(0)
        } else {
            p.workers
        }
    }
}

fn runs_at(c: &Contender, point: Point) -> Vec<&RunResult> {
    c.runs
        .iter()
        .filter(|r| r.point == point)
        .map(|r| &r.result)
        .collect()
}

/// An earlier comparison's runs of `c` at the same load as `p`: the same point, or for a
/// comparison made without clients levels, the same workers and concurrency.
fn same_load(c: &Contender, p: Point, concurrency: usize) -> Vec<&RunResult> {
    c.runs
        .iter()
        .filter(|r| {
            r.point == p
                || (r.point.workers == p.workers
                    && r.point.tracker_workers == p.tracker_workers
                    && r.point.clients.is_none()
                    && r.result.concurrency == concurrency)
        })
        .map(|r| &r.result)
        .collect()
}

/// The charts' lines: one per contender, or per contender and worker count when both
/// vary, and per tier when there are several; each with its name and points.
fn lines(cmp: &Comparison) -> Vec<(&Contender, String, Vec<Point>)> {
    let mut out = Vec::new();
    for c in &cmp.contenders {
        for tier in cmp.tier_setups() {
            let n = tier.tracker_workers;
            let points: Vec<Point> = cmp
                .points()
                .into_iter()
                .filter(|p| p.tracker_workers == n)
                .collect();
            let tier_name = if cmp.several_tiers() {
                format!("{n} tracker workers")
            } else {
                String::new()
            };
            let named = |load: &str| match (tier_name.is_empty(), load.is_empty()) {
                (true, true) => c.name.clone(),
                (false, false) => format!("{} ({tier_name}, {load})", c.name),
                _ => format!("{} ({tier_name}{load})", c.name),
            };
            if cmp.by_clients() && cmp.levels.len() > 1 {
                for &w in &cmp.levels {
                    let at: Vec<Point> =
                        points.iter().copied().filter(|p| p.workers == w).collect();
                    out.push((c, named(&format!("{w} workers")), at));
                }
            } else {
                out.push((c, named(""), points));
            }
        }
    }
    out
}

/// Charts (SVG, and PNG if asked) and report.md into `out`, with the history given (all
/// runs of the output directory's history.jsonl, and the lines skipped there); returns
/// report.md's path.
pub fn write_report(
    comparison: &Comparison,
    args: &ReportArgs,
    out: &Path,
    history: (&[HistoryRun], &[String]),
) -> Result<PathBuf> {
    let baseline = args.baseline.as_deref().map(read_results).transpose()?;
    if comparison.idle.is_empty() {
        let mut charts = tier_report::write_charts(comparison, out)?;
        if comparison.generator == Generator::Shoal {
            charts.extend(write_charts(comparison, out)?);
        }
        args.charts.finish(&charts)?;
    }
    let path = out.join("report.md");
    let mut md = markdown(comparison, baseline.as_ref());
    if comparison.idle.is_empty() {
        md.push_str(&crate::history::section(history.0, history.1));
    }
    std::fs::write(&path, md)?;
    Ok(path)
}

/// Writes throughput.svg and latency.svg; returns their paths.
fn write_charts(cmp: &Comparison, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut throughput = Vec::new();
    let mut latency = Vec::new();
    for (c, name, points) in lines(cmp) {
        let at: Vec<(usize, Vec<&RunResult>)> = points
            .iter()
            .map(|&p| (cmp.x_of(p), runs_at(c, p)))
            .collect();
        throughput.push(crate::chart::throughput_series(&name, &at));
        let medians: Vec<(usize, &RunResult)> = at
            .iter()
            .filter_map(|(x, runs)| Some((*x, report::median_run(runs)?)))
            .collect();
        latency.extend(crate::chart::latency_series(&name, &medians));
    }
    let proto = cmp.protocol.to_uppercase();
    let x_label = cmp.x_label();
    let charts = [
        (
            "throughput.svg",
            "throughput",
            "responses per second",
            &throughput,
        ),
        (
            "latency.svg",
            "announce latency (median run)",
            "latency (ms)",
            &latency,
        ),
    ];
    let mut paths = Vec::new();
    for (file, what, y_label, series) in charts {
        let path = dir.join(file);
        let title = format!("{proto} {what} by {x_label}");
        crate::chart::line_chart(&path, &title, x_label, y_label, series)?;
        paths.push(path);
    }
    Ok(paths)
}

/// The Markdown report.
pub fn markdown(cmp: &Comparison, baseline: Option<&Comparison>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let points = cmp.points();
    let with_clients = !cmp.clients.is_empty();
    let tiers = cmp.several_tiers();
    let clients_head = if cmp.protocol == "udp" {
        "In flight per worker"
    } else {
        "Connections"
    };
    // The first cells of a row: the tier when there are several, workers, and clients
    // when they were set.
    let point_cells = |p: Point| {
        let load = match p.clients {
            Some(c) if with_clients => format!("{} | {c}", p.workers),
            _ => p.workers.to_string(),
        };
        if tiers {
            format!("{} | {load}", p.tracker_workers)
        } else {
            load
        }
    };
    let mut point_head = if with_clients {
        format!("Load workers | {clients_head}")
    } else {
        "Load workers".to_string()
    };
    let mut point_rule = if with_clients { "---|---" } else { "---" }.to_string();
    if tiers {
        point_head = format!("Tracker workers | {point_head}");
        point_rule = format!("---|{point_rule}");
    }
    let _ = writeln!(
        out,
        "# {} tracker comparison\n",
        cmp.protocol.to_uppercase()
    );
    if !cmp.date.is_empty() {
        let _ = write!(out, "Date: {}. ", cmp.date);
    }
    let pinning = if tiers {
        "Trackers pinned to the CPUs of their tier (below), load generator to the others"
            .to_string()
    } else {
        format!(
            "Trackers pinned to CPUs `{}`, load generator to `{}`",
            cmp.tracker_cpus, cmp.bench_cpus
        )
    };
    let _ = writeln!(
        out,
        "Machine: {}. {pinning}. {} rounds, contenders alternating; figures are min / \
         **median** / max over rounds.\n\n\
         Command: `{}`\n",
        cmp.machine, cmp.rounds, cmp.command_line
    );
    out.push_str("| Contender | Command |\n|---|---|\n");
    for c in &cmp.contenders {
        if tiers && !c.tiers.is_empty() {
            for t in &c.tiers {
                let _ = writeln!(
                    out,
                    "| {} ({} tracker workers) | `{}` |",
                    c.name, t.tracker_workers, t.command
                );
            }
        } else {
            let _ = writeln!(out, "| {} | `{}` |", c.name, c.command);
        }
    }
    if !cmp.idle.is_empty() {
        out.push_str(&other::idle_section(cmp));
        return out;
    }
    out.push_str(&tier_report::section(cmp));
    if cmp.generator != Generator::Shoal {
        out.push_str(&other::generator_section(cmp));
        out.push_str(&other::noise_section(cmp));
        return out;
    }
    out.push_str(&super::figures::ratio_section(cmp));
    let _ = write!(
        out,
        "\n## Throughput by {} (responses per second)\n\n| {point_head} |",
        cmp.x_label()
    );
    for c in &cmp.contenders {
        let _ = write!(out, " {} |", c.name);
    }
    let _ = write!(out, "\n|{point_rule}|");
    for _ in &cmp.contenders {
        out.push_str("---|");
    }
    out.push('\n');
    for &p in &points {
        let _ = write!(out, "| {} |", point_cells(p));
        for c in &cmp.contenders {
            let _ = write!(out, " {} |", report::min_median_max(&runs_at(c, p)));
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\n![throughput](throughput.svg)\n\n## CPU use (median run at each level)\n\n\
        | Contender | {point_head} | Responses/s | Tracker CPU | Responses per tracker CPU-second | Load generator CPU | Responses per load-generator CPU-second | Others' CPU | Errors |\n\
        |---|{point_rule}|---|---|---|---|---|---|---|\n"
    );
    for c in &cmp.contenders {
        for &p in &points {
            let Some(r) = report::median_run(&runs_at(c, p)) else {
                continue;
            };
            let pct = |x: Option<f64>| x.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.0}% | {} | {} | {:.2}% |",
                c.name,
                point_cells(p),
                thousands(r.summary.responses_per_second as u64),
                pct(r.cpu.tracker_percent),
                r.responses_per_tracker_cpu_second
                    .map(|v| thousands(v as u64))
                    .unwrap_or_else(|| "-".into()),
                r.cpu.generator_percent,
                thousands(r.responses_per_generator_cpu_second as u64),
                pct(r.cpu.others_percent),
                100.0 * r.summary.error_rate
            );
        }
    }
    out.push_str(&super::private::database_section(cmp));
    if !cmp.load_generators.is_empty() {
        let first = &cmp.contenders[0];
        out.push_str("\n## Load generators against the same tracker (one core each)\n\n\
            | Load generator | Responses/s (min / median / max) | Its CPU (median) | Responses per its CPU-second (median) |\n|---|---|---|---|\n");
        let ours = runs_at(first, points[0]);
        let mut cpu: Vec<f64> = ours.iter().map(|r| r.cpu.generator_percent).collect();
        let mut per: Vec<f64> = ours
            .iter()
            .map(|r| r.responses_per_generator_cpu_second)
            .collect();
        let ours_per = report::median(&mut per);
        let _ = writeln!(
            out,
            "| shoal-bench ({}) | {} | {:.0}% | {} |",
            describe(points[0]),
            report::min_median_max(&ours),
            report::median(&mut cpu),
            thousands(ours_per as u64)
        );
        let mut rps: Vec<f64> = cmp
            .load_generators
            .iter()
            .map(|g| g.responses_per_second)
            .collect();
        let mut gcpu: Vec<f64> = cmp.load_generators.iter().map(|g| g.cpu_percent).collect();
        let mut gper: Vec<f64> = cmp
            .load_generators
            .iter()
            .map(|g| 100.0 * g.responses_per_second / g.cpu_percent.max(1e-9))
            .collect();
        let m = report::median(&mut rps);
        let theirs_per = report::median(&mut gper);
        let _ = writeln!(
            out,
            "| aquatic_udp_load_test (1 worker) | {} / **{}** / {} | {:.0}% | {} |",
            thousands(rps[0] as u64),
            thousands(m as u64),
            thousands(rps[rps.len() - 1] as u64),
            report::median(&mut gcpu),
            thousands(theirs_per as u64)
        );
        if theirs_per > 0.0 {
            let _ = write!(
                out,
                "\nshoal-bench over aquatic_udp_load_test per generator CPU-second: medians \
                 **{:.3}**",
                ours_per / theirs_per
            );
            if let Some(rr) = generator_round_ratios(first, points[0], &cmp.load_generators) {
                let _ = write!(out, "; round by round {}", rr.describe());
            }
            out.push_str(".\n");
        }
        let _ = writeln!(
            out,
            "\nBoth against {} on CPUs `{}`, alternating each round. aquatic_udp_load_test's mix \
             is its default (50 connect : 50 announce : 1 scrape); shoal-bench's is the one on \
             the command line above.",
            first.name, cmp.tracker_cpus
        );
    }
    out.push_str("\n## Latency by operation (median run)\n");
    for c in &cmp.contenders {
        for &p in &points {
            let Some(r) = report::median_run(&runs_at(c, p)) else {
                continue;
            };
            let _ = writeln!(
                out,
                "\n### {} ({}, {} in flight)\n",
                c.name,
                describe(p),
                r.concurrency
            );
            out.push_str(&report::ops_table(&r.summary.ops));
        }
    }
    out.push_str("\n![latency](latency.svg)\n");
    out.push_str(&other::noise_section(cmp));
    if let Some(base) = baseline {
        out.push_str("\n## Comparison with the previous run\n");
        for c in &cmp.contenders {
            let Some(old) = base.contenders.iter().find(|b| b.name == c.name) else {
                continue;
            };
            // The heaviest point run both times (the same load: same workers and clients).
            let found = points.iter().rev().find_map(|&p| {
                let cur = report::median_run(&runs_at(c, p))?;
                let prev = report::median_run(&same_load(old, p, cur.concurrency))?;
                Some((p, prev, cur))
            });
            let Some((p, prev, cur)) = found else {
                continue;
            };
            let _ = writeln!(out, "\n### {} ({}, median runs)\n", c.name, describe(p));
            out.push_str(&report::baseline_table(prev, cur));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compare::results::{points, Run};
    use crate::report::tests::result;

    pub(crate) fn comparison(levels: Vec<usize>, clients: Vec<usize>) -> Comparison {
        let points = points(&levels, &clients);
        let contender = |name: &str, speed: u64| Contender {
            name: name.into(),
            command: format!("{name} --port 1"),
            runs: (0..3)
                .flat_map(|round| {
                    points.iter().map(move |&point| Run {
                        round,
                        point,
                        result: result(
                            point.clients.unwrap_or(64),
                            (speed * (round as u64 + 1), 0.0, 100.0, 300.0),
                            0,
                        ),
                    })
                })
                .collect(),
            generator_runs: Vec::new(),
            tiers: Vec::new(),
        };
        Comparison {
            protocol: "ws".into(),
            command_line: "shoal-bench compare ...".into(),
            date: "2026-11-23 12:00:00 UTC".into(),
            rounds: 3,
            levels,
            clients,
            tracker_cpus: "0".into(),
            bench_cpus: "1".into(),
            machine: "2 × test CPU".into(),
            generator: Generator::Shoal,
            tls: false,
            generator_command: None,
            tiers: Vec::new(),
            contenders: vec![contender("shoal", 2000), contender("aquatic_ws", 1000)],
            load_generators: Vec::new(),
            noise_limit_percent: Some(10.0),
            dropped: Vec::new(),
            idle: Vec::new(),
        }
    }

    #[test]
    fn report_by_clients_has_a_row_per_level_with_min_median_max() {
        let md = markdown(&comparison(vec![1], vec![16, 256]), None);
        assert!(md.contains("Date: 2026-11-23 12:00:00 UTC. Machine: 2 × test CPU"));
        assert!(md.contains("## Throughput by connections (responses per second)"));
        assert!(md.contains("| Load workers | Connections | shoal | aquatic_ws |"));
        // Rounds made 2000, 4000 and 6000 announces in 10 s: 200 / 400 / 600 per second.
        assert!(
            md.contains("| 1 | 16 | 200 / **400** / 600 | 100 / **200** / 300 |"),
            "{md}"
        );
        assert!(md.contains("| 1 | 256 | 200 / **400** / 600 |"));
        assert!(md.contains("### aquatic_ws (1 workers, 256 clients, 256 in flight)"));
        assert!(!md.contains("Comparison with the previous run"));
    }

    #[test]
    fn a_first_version_results_file_is_still_a_baseline() {
        // The first version wrote runs as [round, workers, result] and had no clients.
        let now = comparison(vec![1], vec![]);
        let mut old = serde_json::to_value(&now).unwrap();
        old.as_object_mut().unwrap().remove("clients");
        for c in old["contenders"].as_array_mut().unwrap() {
            for r in c["runs"].as_array_mut().unwrap() {
                let result = r["result"].clone();
                *r = serde_json::json!([r["round"], r["workers"], result]);
            }
        }
        let old: Comparison = serde_json::from_value(old).unwrap();
        assert_eq!(old.contenders[0].runs.len(), 3);
        assert_eq!(old.contenders[0].runs[2].point.workers, 1);
        let md = markdown(&comparison(vec![1], vec![]), Some(&old));
        assert!(md.contains("## Comparison with the previous run"));
        assert!(md.contains("### shoal (1 workers, median runs)"));
        assert!(
            md.contains("| Responses/s | 400 | 400 | No change |"),
            "{md}"
        );
    }

    #[test]
    fn a_baseline_without_clients_levels_is_matched_by_concurrency() {
        // Then: 64 connections (the load's default), no clients levels. Now: 16 and 64.
        let old = comparison(vec![1], vec![]);
        let md = markdown(&comparison(vec![1], vec![16, 64]), Some(&old));
        assert!(
            md.contains("### shoal (1 workers, 64 clients, median runs)"),
            "{md}"
        );
        // Nothing run at 256 then: no table rather than one against another load.
        let md = markdown(&comparison(vec![1], vec![256]), Some(&old));
        assert!(!md.contains("median runs)"), "{md}");
    }

    #[test]
    fn charts_run_along_clients_when_they_vary() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-cmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = write_charts(&comparison(vec![1, 2], vec![16, 256]), &dir).unwrap();
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(svg.contains("WS throughput by connections"));
        assert!(svg.contains("shoal (2 workers)") && svg.contains("aquatic_ws (1 workers)"));
        assert!(svg.contains(">\n256\n</text>"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn several_tiers_name_the_tier_of_each_row_and_each_command() {
        let cmp = crate::compare::tier_report::tests::tiered();
        let md = markdown(&cmp, None);
        assert!(
            md.contains("Trackers pinned to the CPUs of their tier (below)"),
            "{md}"
        );
        assert!(md.contains("| shoal (4 tracker workers) | `shoal 4` |"));
        assert!(md.contains("## By tracker workers"));
        assert!(
            md.contains(
                "| Tracker workers | Load workers | shoal | aquatic_ws |\n|---|---|---|---|\n"
            ),
            "{md}"
        );
        assert!(md.contains("| 4 | 2 | 900 / **1,800** / 2,700 |"), "{md}");
        assert!(md.contains("| shoal | 4 | 1 | 1,200 | 80% | 500 |"), "{md}");
        assert!(md.contains("### shoal (4 tracker workers, 2 workers, 64 in flight)"));
        // One tier: the tables are as they were.
        let md = markdown(&comparison(vec![1], vec![]), None);
        assert!(md.contains("| Load workers | shoal | aquatic_ws |\n|---|---|---|\n"));
        assert!(md.contains("Trackers pinned to CPUs `0`, load generator to `1`."));
    }

    #[test]
    fn the_written_report_has_the_tier_charts_and_the_history() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cmp = comparison(vec![1], vec![]);
        let run = crate::compare::figures::history_run(&cmp, Some("abc".into()));
        let args = ReportArgs {
            baseline: None,
            charts: crate::chart::ChartArgs { png: false },
        };
        let path = write_report(&cmp, &args, &dir, (&[run.clone(), run], &[])).unwrap();
        let md = std::fs::read_to_string(path).unwrap();
        assert!(md.contains("## By tracker workers") && md.contains("## History"));
        assert!(
            md.contains(
                "| shoal | 1 workers | 2026-11-23 12:00:00 UTC (`abc`) | 400 → 400 | No change |"
            ),
            "{md}"
        );
        for chart in [
            "tracker-workers.svg",
            "tracker-workers-per-cpu.svg",
            "throughput.svg",
        ] {
            assert!(dir.join(chart).is_file(), "{chart}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
