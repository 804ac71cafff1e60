//! `shoal-bench compare`: several trackers under the same load, alternating and repeating,
//! and the Markdown report with SVG charts and JSON beside it; `render` rewrites a report
//! from its results.json and `headline` turns several into the README's numbers table.
//!
//! Fairness is the point (benchmarking.md): each tracker is started fresh pinned to its
//! CPU set with `taskset`, the load generator (shoal-bench itself, aquatic's load testers
//! or wrk) runs on the other CPUs, contenders alternate (A, B, A, B, ...) so that drift of
//! the machine hits all alike, the figures are min / median / max over rounds, and the CPU
//! of tracker, load generator and everything else is measured over the same window, so
//! that a run disturbed by other work is dropped and run again. Trackers are stopped by the
//! PID we started them with (SIGTERM, then SIGKILL).
//!
//! By job: [`args`] (the flags), [`session`] (the run loop), [`contender`] and [`tracker`]
//! (the contenders' commands, configs and processes), [`generator`] and
//! [`generator_output`] (other load generators), [`idle`] (idle-connection memory),
//! [`noise`] (the noisy-run rule), [`private`] (private-mode contenders: registering
//! their users and torrents, their database writes), [`results`] (results.json), [`report`] and
//! [`report_other`] (the Markdown), [`headline`] (the README's table), [`tiers`] (the
//! tiers of `--tracker-workers`: workers and CPU sets) and [`tier_report`] (their table
//! and charts), [`figures`] (a contender's figures at a point, for those and the history).

pub mod args;
pub mod contender;
pub mod figures;
pub mod generator;
pub mod generator_output;
pub mod headline;
pub mod idle;
pub mod noise;
pub mod private;
pub mod report;
pub mod report_other;
pub mod results;
pub mod session;
pub mod tier_report;
pub mod tiers;
pub mod tracker;
pub mod ws_counters;

pub use args::{CompareArgs, HeadlineArgs, RenderArgs};
pub use report::markdown;
pub use results::{Comparison, Generator};
pub use session::{render, run};
