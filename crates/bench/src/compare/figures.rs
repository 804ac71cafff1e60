//! A contender's figures at one load point, whichever program made the load: responses
//! per second, per tracker CPU-second and error rate of each run, and the medians that
//! the tracker-workers table and the history take from them.
//!
//! shoal-bench's own runs ([`Run`]) and other generators' ([`GeneratorRun`]) carry these
//! figures in different shapes; the tier table and the history want the same three, so
//! they are read here once. Other generators do not count failed requests the same way,
//! so their error rate is left unknown rather than guessed.

use crate::history::{Figure, HistoryRun};
use crate::report::median;

use super::report_other::generator_name;
use super::results::{describe, Comparison, Contender, Point};

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
