//! The report's section by tracker workers (seeds 000 to 002's main table): per tier and
//! contender, responses per second and per tracker CPU-second, min / median / max over
//! rounds, their charts, and how each contender was given its workers at each tier.
//!
//! Where a tier was run at several load levels, each cell is the contender's best level
//! in that tier (the highest median responses per second), as the seeds took the best
//! result per worker count, and the cell names that level. Both run kinds (shoal-bench's
//! own load and another generator's) go through [`super::figures`], so the section reads
//! the same whichever made the load.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::chart::Series;

use super::figures::{self, median_of, RunFigures};
use super::report_other::spread;
use super::results::{describe, Comparison, Contender, Point};

/// A contender's best load point in a tier and its runs there.
fn best_in_tier(cmp: &Comparison, c: &Contender, tier: usize) -> Option<(Point, Vec<RunFigures>)> {
    cmp.points()
        .into_iter()
        .filter(|p| p.tracker_workers == tier)
        .map(|p| (p, figures::at(c, p)))
        .filter_map(|(p, runs)| {
            Some((median_of(&runs, |r| Some(r.responses_per_second))?, p, runs))
        })
        // The first of equals (max_by keeps the last).
        .rev()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p, runs)| (p, runs))
}

/// The load levels of one tier (several: the cells name theirs).
fn loads_per_tier(cmp: &Comparison) -> usize {
    cmp.levels.len().max(1) * cmp.clients.len().max(1)
}

/// The load level of a point, without its tier.
fn load_of(p: Point) -> String {
    describe(Point {
        tracker_workers: 1,
        ..p
    })
}

/// A table's head: `first` columns, then one per contender.
fn header(out: &mut String, first: &[&str], cmp: &Comparison) {
    let names = first
        .iter()
        .copied()
        .chain(cmp.contenders.iter().map(|c| c.name.as_str()));
    let (mut head, mut rule) = (String::from("|"), String::from("|"));
    for name in names {
        let _ = write!(head, " {name} |");
        rule.push_str("---|");
    }
    let _ = write!(out, "{head}\n{rule}\n");
}

/// The section, Markdown.
pub fn section(cmp: &Comparison) -> String {
    let mut out = String::new();
    let tiers = cmp.tier_setups();
    let several_loads = loads_per_tier(cmp) > 1;
    let _ = write!(
        out,
        "\n## By tracker workers\n\nAt each tier every contender was started with that many \
         workers, pinned to the tier's tracker CPUs, with the load generator on the others \
         (seeds 000 to 002's tables). Min / **median** / max over rounds{}.\n",
        if several_loads {
            ", at the load level where the contender's median was highest in the tier (named \
             in each cell)"
        } else {
            ""
        }
    );
    type Column = fn(&RunFigures) -> Option<f64>;
    let tables: [(&str, Column, &str); 2] = [
        (
            "Responses per second",
            |r| Some(r.responses_per_second),
            "tracker-workers.svg",
        ),
        (
            "Responses per tracker CPU-second",
            |r| r.per_tracker_cpu_second,
            "tracker-workers-per-cpu.svg",
        ),
    ];
    for (title, column, chart) in tables {
        let _ = write!(out, "\n### {title}\n\n");
        header(&mut out, &["Tracker workers"], cmp);
        for t in &tiers {
            let _ = write!(out, "| {} |", t.tracker_workers);
            for c in &cmp.contenders {
                let cell = match best_in_tier(cmp, c, t.tracker_workers) {
                    Some((p, runs)) => {
                        let at = if several_loads {
                            format!(" (at {})", load_of(p))
                        } else {
                            String::new()
                        };
                        format!("{}{at}", spread(runs.iter().filter_map(column).collect()))
                    }
                    None => "-".into(),
                };
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
        let _ = writeln!(out, "\n![{title} by tracker workers]({chart})");
    }
    out.push_str("\n### Tiers\n\n");
    header(
        &mut out,
        &["Tracker workers", "Tracker CPUs", "Load generator CPUs"],
        cmp,
    );
    for t in &tiers {
        let _ = write!(
            out,
            "| {} | `{}` | `{}` |",
            t.tracker_workers, t.tracker_cpus, t.bench_cpus
        );
        for c in &cmp.contenders {
            let setting = c
                .tiers
                .iter()
                .find(|ct| ct.tracker_workers == t.tracker_workers)
                .map(|ct| ct.workers_setting.as_str())
                .unwrap_or("-");
            let _ = write!(out, " {setting} |");
        }
        out.push('\n');
    }
    out.push_str(
        "\nA contender \"as it comes\" has no worker setting and runs unchanged at every tier, \
         on the tier's CPUs (opentracker: as many threads as its build starts). At one \
         tracker worker aquatic_http's and aquatic_ws's socket and swarm workers share the \
         one CPU, as the presets always did; from two on they add up to the tier. \
         aquatic_udp has socket workers only.\n",
    );
    out
}

/// Writes tracker-workers.svg (responses per second) and tracker-workers-per-cpu.svg (per
/// tracker CPU-second): a line per contender over the tiers, at the median of its best
/// level in each. Returns their paths.
pub fn write_charts(cmp: &Comparison, dir: &Path) -> Result<Vec<PathBuf>> {
    let tiers = cmp.tier_setups();
    let series = |f: fn(&RunFigures) -> Option<f64>| -> Vec<Series> {
        cmp.contenders
            .iter()
            .map(|c| {
                let points = tiers
                    .iter()
                    .filter_map(|t| {
                        let (_, runs) = best_in_tier(cmp, c, t.tracker_workers)?;
                        Some((t.tracker_workers, median_of(&runs, f)?))
                    })
                    .collect();
                Series::new(c.name.clone(), points)
            })
            .collect()
    };
    let proto = cmp.protocol.to_uppercase();
    let charts = [
        (
            "tracker-workers.svg",
            "throughput",
            "responses per second",
            series(|r| Some(r.responses_per_second)),
        ),
        (
            "tracker-workers-per-cpu.svg",
            "responses per tracker CPU-second",
            "responses per tracker CPU-second",
            series(|r| r.per_tracker_cpu_second),
        ),
    ];
    let mut paths = Vec::new();
    for (file, what, y_label, lines) in charts {
        let path = dir.join(file);
        let title = format!("{proto} {what} by tracker workers");
        crate::chart::line_chart(&path, &title, "tracker workers", y_label, &lines)?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compare::report::tests::comparison;
    use crate::compare::results::{ContenderTier, Run, TierSetup};

    /// The synthetic comparison at tiers 1 and 4: at 4 workers each contender's runs are
    /// three times as fast (and the load generator 1 or 2 workers).
    pub(crate) fn tiered() -> Comparison {
        let mut cmp = comparison(vec![1, 2], vec![]);
        cmp.tiers = [(1, "0", "1-15"), (4, "0-3", "4-15")]
            .map(|(n, t, b)| TierSetup {
                tracker_workers: n,
                tracker_cpus: t.into(),
                bench_cpus: b.into(),
            })
            .to_vec();
        for c in &mut cmp.contenders {
            let faster: Vec<Run> = c
                .runs
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.point.tracker_workers = 4;
                    r.result.summary.responses_per_second *= 3.0;
                    // The second load level is the better one at 4 workers.
                    if r.point.workers == 2 {
                        r.result.summary.responses_per_second *= 1.5;
                    }
                    r
                })
                .collect();
            c.runs.extend(faster);
            for n in [1, 4] {
                let setting = if c.name == "shoal" {
                    format!("`--workers {n}`")
                } else {
                    "socket_workers = 1, swarm_workers = 1".into()
                };
                c.tiers.push(ContenderTier {
                    tracker_workers: n,
                    command: format!("{} {n}", c.name),
                    workers_setting: setting,
                });
            }
        }
        cmp
    }

    #[test]
    fn the_table_has_a_row_per_tier_at_each_contenders_best_level() {
        let md = section(&tiered());
        assert!(md.contains("### Responses per second\n\n| Tracker workers | shoal | aquatic_ws |\n|---|---|---|\n"), "{md}");
        // Tier 1: both levels alike, the first is kept. Tier 4: 2 workers, 3 × 1.5 faster.
        assert!(
            md.contains(
                "| 1 | 200 / **400** / 600 (at 1 workers) | 100 / **200** / 300 (at 1 workers) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 4 | 900 / **1,800** / 2,700 (at 2 workers) | 450 / **900** / 1,350 (at 2 workers) |"),
            "{md}"
        );
        // Per tracker CPU-second: 8 CPU-seconds in each 10-s run.
        assert!(md.contains("### Responses per tracker CPU-second"));
        assert!(
            md.contains("| 1 | 250 / **500** / 750 (at 1 workers) |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| 4 | `0-3` | `4-15` | `--workers 4` | socket_workers = 1, swarm_workers = 1 |"
            ),
            "{md}"
        );
        assert!(md.contains("![Responses per second by tracker workers](tracker-workers.svg)"));
    }

    #[test]
    fn one_tier_of_one_level_reads_like_the_seeds() {
        // A results.json from before tiers: one tier, no settings recorded.
        let md = section(&comparison(vec![1], vec![]));
        assert!(
            md.contains("| 1 | 200 / **400** / 600 | 100 / **200** / 300 |"),
            "{md}"
        );
        assert!(md.contains("| 1 | `0` | `1` | - | - |"), "{md}");
        assert!(!md.contains("(at "));
    }

    #[test]
    fn charts_run_along_the_tiers() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-tiers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = write_charts(&tiered(), &dir).unwrap();
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(svg.contains("WS throughput by tracker workers"));
        assert!(svg.contains(">\n4\n</text>") && svg.contains("aquatic_ws"));
        let svg = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(svg.contains("responses per tracker CPU-second by tracker workers"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
