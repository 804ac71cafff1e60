//! The noisy-run rule: a run during which other processes used more than a limit of CPU
//! (10% of one core by default) measured the machine, not the tracker. It is dropped and
//! run again, a bounded number of times; when no retry is left the last one is kept,
//! marked noisy. Every dropped or kept-noisy run is recorded in results.json and listed in
//! the report.

use super::args::NoiseArgs;
use super::results::DroppedRun;

/// What to do with a run, given others' CPU over its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Quiet enough: use it.
    Keep,
    /// Noisy: drop it and run it again.
    Retry,
    /// Noisy, but no retry left: use it, marked noisy.
    KeepNoisy,
}

impl NoiseArgs {
    /// The verdict on attempt `attempt` (0 for the first run) whose window saw others use
    /// `others_percent` of a core (`None`: unknown, kept).
    pub fn judge(&self, others_percent: Option<f64>, attempt: usize) -> Verdict {
        match others_percent {
            Some(o) if o > self.noisy => {
                if attempt < self.noisy_retries {
                    Verdict::Retry
                } else {
                    Verdict::KeepNoisy
                }
            }
            _ => Verdict::Keep,
        }
    }

    /// Judges a run and records it in `dropped` when noisy; true when the run is to be
    /// used.
    pub fn settle(
        &self,
        dropped: &mut Vec<DroppedRun>,
        contender: &str,
        round: usize,
        at: String,
        others_percent: Option<f64>,
        attempt: usize,
    ) -> bool {
        let verdict = self.judge(others_percent, attempt);
        if verdict != Verdict::Keep {
            let others_percent = others_percent.unwrap_or_default();
            eprintln!(
                "{contender} round {} at {at}: other processes used {others_percent:.0}% of a core{}",
                round + 1,
                if verdict == Verdict::Retry { "; running it again" } else { "; no retry left, kept" }
            );
            dropped.push(DroppedRun {
                contender: contender.to_string(),
                round,
                at,
                others_percent,
                kept: verdict == Verdict::KeepNoisy,
            });
        }
        verdict != Verdict::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noisy_runs_are_retried_then_kept_and_recorded() {
        let rule = NoiseArgs {
            noisy: 10.0,
            noisy_retries: 2,
        };
        assert_eq!(rule.judge(Some(3.0), 0), Verdict::Keep);
        assert_eq!(rule.judge(Some(10.0), 0), Verdict::Keep);
        assert_eq!(rule.judge(None, 0), Verdict::Keep);
        assert_eq!(rule.judge(Some(10.5), 0), Verdict::Retry);
        assert_eq!(rule.judge(Some(50.0), 1), Verdict::Retry);
        assert_eq!(rule.judge(Some(50.0), 2), Verdict::KeepNoisy);

        let mut dropped = Vec::new();
        assert!(!rule.settle(&mut dropped, "shoal", 0, "1 workers".into(), Some(20.0), 0));
        assert!(rule.settle(&mut dropped, "shoal", 0, "1 workers".into(), Some(2.0), 1));
        assert_eq!(dropped.len(), 1);
        assert!(!dropped[0].kept);
        assert!(rule.settle(&mut dropped, "shoal", 1, "1 workers".into(), Some(20.0), 2));
        assert!(dropped[1].kept);
        assert_eq!(dropped[1].others_percent, 20.0);
    }
}
