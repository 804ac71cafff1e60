//! A contender's figures at one load point, whichever program made the load: responses
//! per second, per tracker CPU-second and error rate of each run, and the medians that
//! the tracker-workers table and the history take from them.
//!
//! shoal-bench's own runs ([`Run`](super::results::Run)) and other generators'
//! ([`GeneratorRun`](super::results::GeneratorRun)) carry these figures in different
//! shapes; the tier table and the history want the same three, so they are read here once.
//! Other generators do not count failed requests the same way, so their error rate is left
//! unknown rather than guessed.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::history::{Figure, HistoryRun};
use crate::report::median;
use crate::units::thousands;

use super::results::{describe, generator_name, Comparison, Contender, LoadGenRun, Point};

/// One run's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunFigures {
    pub responses_per_second: f64,
    pub per_tracker_cpu_second: Option<f64>,
    pub error_rate: Option<f64>,
}

/// The figures of each of `c`'s runs at `p` (under shoal-bench or another generator).
pub fn at(c: &Contender, p: Point) -> Vec<RunFigures> {
    let own = c.runs.iter().filter(|r| r.point == p).map(|r| RunFigures {
        responses_per_second: r.result.summary.responses_per_second,
        per_tracker_cpu_second: r.result.responses_per_tracker_cpu_second,
        error_rate: Some(r.result.summary.error_rate),
    });
    let other = c
        .generator_runs
        .iter()
        .filter(|r| r.point == p)
        .map(|r| RunFigures {
            responses_per_second: r.responses_per_second,
            per_tracker_cpu_second: r.per_tracker_cpu_second(None),
            error_rate: None,
        });
    own.chain(other).collect()
}

/// The median of the values `f` gives, where there are any.
pub fn median_of(runs: &[RunFigures], f: impl Fn(&RunFigures) -> Option<f64>) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(f).collect();
    (!v.is_empty()).then(|| median(&mut v))
}

/// One contender's figure over another's, round by round. The contenders take turns
/// within a round, so a ratio taken inside each round cancels what moves both (the
/// machine's slower stretches, which on a shared VM swing single runs by a third); the
/// ratio of the two medians does not, and can read a contender's one good round against
/// the other's bad one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundRatios {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// Rounds in which both contenders have the figure.
    pub rounds: usize,
}

/// `c`'s responses (or, under another generator, responses of `kind`) per tracker
/// CPU-second at `p`, by round.
fn per_cpu_by_round(c: &Contender, p: Point, kind: Option<&str>) -> BTreeMap<usize, f64> {
    let own = c
        .runs
        .iter()
        .filter(|r| r.point == p && kind.is_none())
        .filter_map(|r| Some((r.round, r.result.responses_per_tracker_cpu_second?)));
    let other = c
        .generator_runs
        .iter()
        .filter(|r| r.point == p)
        .filter_map(|r| Some((r.round, r.per_tracker_cpu_second(kind)?)));
    own.chain(other).collect()
}

/// `a` over `b` per tracker CPU-second at `p`, round by round (see [`RoundRatios`]).
pub fn round_ratios(
    a: &Contender,
    b: &Contender,
    p: Point,
    kind: Option<&str>,
) -> Option<RoundRatios> {
    let (a, b) = (per_cpu_by_round(a, p, kind), per_cpu_by_round(b, p, kind));
    ratios_of(
        a.iter()
            .filter_map(|(round, x)| Some(x / b.get(round).filter(|y| **y > 0.0)?))
            .collect(),
    )
}

/// shoal-bench (the runs of `c` at `p`) over another load generator (`others`, against
/// the same tracker in the same rounds), per generator CPU-second, round by round.
pub fn generator_round_ratios(
    c: &Contender,
    p: Point,
    others: &[LoadGenRun],
) -> Option<RoundRatios> {
    let ours: BTreeMap<usize, f64> = c
        .runs
        .iter()
        .filter(|r| r.point == p)
        .map(|r| (r.round, r.result.responses_per_generator_cpu_second))
        .collect();
    let theirs = others
        .iter()
        .filter(|g| g.cpu_percent > 0.0)
        .map(|g| (g.round, 100.0 * g.responses_per_second / g.cpu_percent));
    ratios_of(
        theirs
            .filter(|(_, y)| *y > 0.0)
            .filter_map(|(round, y)| Some(ours.get(&round)? / y))
            .collect(),
    )
}

/// Min / median / max of per-round ratios; `None` for no rounds.
fn ratios_of(mut r: Vec<f64>) -> Option<RoundRatios> {
    if r.is_empty() {
        return None;
    }
    let m = median(&mut r);
    Some(RoundRatios {
        min: r[0],
        median: m,
        max: r[r.len() - 1],
        rounds: r.len(),
    })
}

impl RoundRatios {
    /// `min / **median** / max (n rounds)`.
    pub fn describe(&self) -> String {
        format!(
            "{:.3} / **{:.3}** / {:.3} ({} rounds)",
            self.min, self.median, self.max, self.rounds
        )
    }
}

/// The first contender against each other one, per tracker CPU-second at every load:
/// the ratio of the medians and the ratio round by round.
pub fn ratio_section(cmp: &Comparison) -> String {
    let Some((first, others)) = cmp.contenders.split_first() else {
        return String::new();
    };
    let mut rows = String::new();
    for other in others {
        for p in cmp.points() {
            let (a, b) = (at(first, p), at(other, p));
            let medians = median_of(&a, |r| r.per_tracker_cpu_second)
                .zip(median_of(&b, |r| r.per_tracker_cpu_second));
            let (Some((ma, mb)), Some(rr)) = (medians, round_ratios(first, other, p, None)) else {
                continue;
            };
            let _ = writeln!(
                rows,
                "| {} | {} | {} / {} = **{:.3}** | {} |",
                other.name,
                describe(p),
                thousands(ma as u64),
                thousands(mb as u64),
                ma / mb,
                rr.describe()
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "\n## {} against each contender (responses per tracker CPU-second)\n\n\
         Medians over rounds, and the ratio taken within each round (the contenders take \
         turns, so what slows the machine for a while moves both): min / **median** / max.\n\n\
         | Against | Load | Medians | Round by round |\n|---|---|---|---|\n{rows}",
        first.name
    )
}

/// The comparison's line in the history: per contender and point, the medians.
pub fn history_run(cmp: &Comparison, commit: Option<String>) -> HistoryRun {
    let mut figures = Vec::new();
    for c in &cmp.contenders {
        for p in cmp.points() {
            let runs = at(c, p);
            let Some(rps) = median_of(&runs, |r| Some(r.responses_per_second)) else {
                continue;
            };
            figures.push(Figure {
                contender: c.name.clone(),
                load: describe(p),
                tracker_workers: p.tracker_workers,
                runs: runs.len(),
                responses_per_second: rps,
                per_tracker_cpu_second: median_of(&runs, |r| r.per_tracker_cpu_second),
                error_rate: median_of(&runs, |r| r.error_rate),
            });
        }
    }
    HistoryRun {
        date: cmp.date.clone(),
        commit,
        machine: cmp.machine.clone(),
        command: cmp.command_line.clone(),
        kind: "compare".into(),
        protocol: cmp.protocol.clone(),
        generator: generator_name(cmp),
        figures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::report::tests::comparison;
    use crate::compare::report_other::tests::under_aquatic_ws;

    #[test]
    fn ratios_are_taken_within_each_round_and_shown_beside_the_medians() {
        let mut cmp = comparison(vec![1], vec![]);
        // shoal's rounds 250 / 500 / 750, aquatic_ws's 125 / 250 / 375 per tracker
        // CPU-second: 2x in every round. One slow round of aquatic_ws's (its second, at a
        // third) makes the medians read 4x; round by round it moves that round only.
        let p = cmp.points()[0];
        let slow = &mut cmp.contenders[1].runs[1].result;
        let per = slow.responses_per_tracker_cpu_second.unwrap();
        slow.responses_per_tracker_cpu_second = Some(per / 3.0);
        let (a, b) = (&cmp.contenders[0], &cmp.contenders[1]);
        let rr = round_ratios(a, b, p, None).unwrap();
        assert_eq!(rr.rounds, 3);
        assert!((rr.min - 2.0).abs() < 1e-9 && (rr.median - 2.0).abs() < 1e-9);
        assert!((rr.max - 6.0).abs() < 1e-9, "{rr:?}");
        let md = ratio_section(&cmp);
        assert!(md.contains("## shoal against each contender"), "{md}");
        assert!(
            md.contains("| aquatic_ws | 1 workers | 500 / 125 = **4.000** | 2.000 / **2.000** / 6.000 (3 rounds) |"),
            "{md}"
        );
        // Another generator's figures by kind, paired the same way.
        let cmp = under_aquatic_ws();
        let p = cmp.points()[0];
        let rr = round_ratios(&cmp.contenders[0], &cmp.contenders[1], p, Some("offer")).unwrap();
        assert_eq!(rr.rounds, 3);
        assert!((rr.median - 76.0 / 60.0).abs() < 1e-9, "{rr:?}");
        // One contender alone: no section.
        let mut alone = comparison(vec![1], vec![]);
        alone.contenders.truncate(1);
        assert!(ratio_section(&alone).is_empty());
    }

    #[test]
    fn load_generators_are_compared_within_each_round() {
        let mut cmp = comparison(vec![1], vec![]);
        let p = cmp.points()[0];
        let ours: Vec<f64> = cmp.contenders[0]
            .runs
            .iter()
            .map(|r| r.result.responses_per_generator_cpu_second)
            .collect();
        assert_eq!(ours.len(), 3);
        // The other generator: half of shoal-bench's rate per its CPU-second in rounds 0 and
        // 2, a quarter in round 1 (at 50% of its core); round 7 has no shoal-bench run.
        let run = |round: usize, per_cpu: f64, cpu_percent: f64| LoadGenRun {
            name: "aquatic_udp_load_test".into(),
            round,
            responses_per_second: per_cpu * cpu_percent / 100.0,
            cpu_percent,
            tracker_cpu_percent: None,
        };
        cmp.load_generators = vec![
            run(0, ours[0] / 2.0, 100.0),
            run(1, ours[1] / 4.0, 50.0),
            run(2, ours[2] / 2.0, 100.0),
            run(7, 1.0, 100.0),
            run(3, 0.0, 0.0),
        ];
        let rr = generator_round_ratios(&cmp.contenders[0], p, &cmp.load_generators).unwrap();
        assert_eq!(rr.rounds, 3, "{rr:?}");
        assert!((rr.min - 2.0).abs() < 1e-9 && (rr.median - 2.0).abs() < 1e-9);
        assert!((rr.max - 4.0).abs() < 1e-9, "{rr:?}");
        assert!(generator_round_ratios(&cmp.contenders[0], p, &[]).is_none());
        let md = crate::compare::report::markdown(&cmp, None);
        assert!(
            md.contains("round by round 2.000 / **2.000** / 4.000 (3 rounds)."),
            "{md}"
        );
    }

    #[test]
    fn a_comparison_becomes_one_history_line_of_medians() {
        let h = history_run(&comparison(vec![1, 2], vec![]), Some("abc".into()));
        assert_eq!((h.kind.as_str(), h.protocol.as_str()), ("compare", "ws"));
        assert_eq!(h.generator, "shoal-bench ws");
        assert_eq!(h.commit.as_deref(), Some("abc"));
        let loads: Vec<(&str, &str)> = h
            .figures
            .iter()
            .map(|f| (f.contender.as_str(), f.load.as_str()))
            .collect();
        assert_eq!(
            loads,
            [
                ("shoal", "1 workers"),
                ("shoal", "2 workers"),
                ("aquatic_ws", "1 workers"),
                ("aquatic_ws", "2 workers")
            ]
        );
        // Rounds of 200, 400 and 600 responses/s, 8 tracker CPU-seconds in 10 s.
        let f = &h.figures[0];
        assert_eq!((f.runs, f.responses_per_second), (3, 400.0));
        assert_eq!(f.per_tracker_cpu_second, Some(500.0));
        assert_eq!(f.error_rate, Some(0.0));
        // Another generator's runs: no error rate.
        let h = history_run(&under_aquatic_ws(), None);
        assert_eq!(h.generator, "aquatic_ws_load_test");
        assert_eq!(h.figures[0].responses_per_second, 41_800.0);
        assert_eq!(h.figures[0].error_rate, None);
    }
}
