//! The history of a report directory (seed 003's "Historical Results"): every `compare` and
//! `sweep` run appends its headline figures to `history.jsonl` in its output directory,
//! and the report shows all runs in that file, newest first, with the change of each
//! figure against the previous run of the same contender at the same load.
//!
//! One JSON object per line, so that a run only ever appends (nothing earlier is
//! rewritten, and two files concatenate), and a line cut short or edited by hand costs
//! that line only: it is skipped with a warning, never a panic or a lost history. The
//! figures are medians over rounds, the ones a reader compares across runs; the full
//! runs stay in results.json.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::report::change;
use crate::units::thousands;

/// The file name, in the output directory.
pub const FILE: &str = "history.jsonl";

/// One run's line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryRun {
    /// `YYYY-MM-DD HH:MM:SS UTC`, when the run started.
    pub date: String,
    /// `git describe`-like commit of the working tree (`abc1234`, `abc1234-dirty`), when
    /// run inside a git checkout.
    pub commit: Option<String>,
    pub machine: String,
    pub command: String,
    /// `compare` or `sweep`.
    pub kind: String,
    pub protocol: String,
    /// The load generator (`shoal-bench udp`, `aquatic_udp_load_test`).
    pub generator: String,
    pub figures: Vec<Figure>,
}

/// A contender's headline figures at one load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Figure {
    pub contender: String,
    /// The load in words (`1 workers`, `4 tracker workers, 1 workers`, `64 clients`).
    pub load: String,
    /// The tier; 0 where not known (a sweep loads a tracker it did not start).
    pub tracker_workers: usize,
    /// Runs the medians are over.
    pub runs: usize,
    /// Median responses per second.
    pub responses_per_second: f64,
    /// Median responses per tracker CPU-second, when the tracker's CPU was measured.
    pub per_tracker_cpu_second: Option<f64>,
    /// Median share of requests that failed (0.01 = 1%), when the generator counts them.
    pub error_rate: Option<f64>,
}

impl HistoryRun {
    /// Which earlier figures a figure of this run is compared with: the same kind of run,
    /// protocol, generator, contender and load.
    fn same(&self, a: &Figure, other: &HistoryRun, b: &Figure) -> bool {
        self.kind == other.kind
            && self.protocol == other.protocol
            && self.generator == other.generator
            && a.contender == b.contender
            && a.load == b.load
    }
}

/// The working tree's commit, short, with `-dirty` when it has changes; `None` outside a
/// git checkout or without git.
pub fn commit() -> Option<String> {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short=10", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// Appends `run` as one line to `dir`/history.jsonl (made if missing). A last line left
/// without its newline (a run killed while writing) is ended first, so that it alone is
/// lost.
pub fn append(dir: &Path, run: &HistoryRun) -> Result<()> {
    let path = dir.join(FILE);
    let ends_cut = std::fs::read(&path)
        .map(|b| b.last().is_some_and(|&c| c != b'\n'))
        .unwrap_or(false);
    let mut line = serde_json::to_string(run)?;
    line.push('\n');
    if ends_cut {
        line.insert(0, '\n');
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .with_context(|| format!("appending to {}", path.display()))
}

/// The runs in `dir`/history.jsonl in file order (oldest first), and a warning for each
/// line that could not be read (skipped). A missing file is an empty history.
pub fn read(dir: &Path) -> (Vec<HistoryRun>, Vec<String>) {
    let path = dir.join(FILE);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(e) => {
            return (
                Vec::new(),
                vec![format!("{}: not read: {e}", path.display())],
            )
        }
    };
    let mut runs = Vec::new();
    let mut warnings = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<HistoryRun>(line) {
            Ok(r) => runs.push(r),
            Err(e) => warnings.push(format!(
                "{} line {}: skipped, not a run ({e})",
                path.display(),
                i + 1
            )),
        }
    }
    (runs, warnings)
}

/// Appends `run` to the history in `dir` and reads the history back, printing a warning
/// for each line skipped; an error appending is a warning too (the report is still
/// written).
pub fn record(dir: &Path, run: &HistoryRun) -> (Vec<HistoryRun>, Vec<String>) {
    if let Err(e) = append(dir, run) {
        eprintln!("warning: {e:#}");
    }
    let (runs, warnings) = read(dir);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    (runs, warnings)
}

fn per_second(v: f64) -> String {
    thousands(v.round() as u64)
}

fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

fn rate(v: Option<f64>) -> String {
    or_dash(v.map(|e| format!("{:.2}%", 100.0 * e)))
}

/// The report's history: every run in the file, newest first, then the change of the
/// newest run's figures against the previous run of the same contender and load. Empty
/// when there is no run.
pub fn section(runs: &[HistoryRun], skipped: &[String]) -> String {
    let mut out = String::new();
    if runs.is_empty() && skipped.is_empty() {
        return out;
    }
    let _ = write!(
        out,
        "\n## History\n\nEvery run recorded in this directory's `{FILE}`, newest first \
         (medians over each run's rounds).\n\n\
         | Date | Commit | Run | Contender | Load | Responses/s | Per tracker CPU-second | Error rate |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for r in runs.iter().rev() {
        for f in &r.figures {
            let _ = writeln!(
                out,
                "| {} | {} | {} {} | {} | {} | {} | {} | {} |",
                r.date,
                or_dash(r.commit.as_ref().map(|c| format!("`{c}`"))),
                r.kind,
                r.generator,
                f.contender,
                f.load,
                per_second(f.responses_per_second),
                or_dash(f.per_tracker_cpu_second.map(per_second)),
                rate(f.error_rate)
            );
        }
    }
    out.push_str("\nCommands, newest first:\n\n");
    for r in runs.iter().rev() {
        let _ = writeln!(out, "- {}: `{}` on {}", r.date, r.command, r.machine);
    }
    if !skipped.is_empty() {
        let _ = write!(
            out,
            "\nLines skipped (not readable as a run):\n\n{}\n",
            skipped
                .iter()
                .map(|w| format!("- {w}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    out.push_str(&changes(runs));
    out
}

/// The newest run's figures against the previous run of the same contender and load.
fn changes(runs: &[HistoryRun]) -> String {
    let mut out = String::new();
    let Some((now, earlier)) = runs.split_last() else {
        return out;
    };
    let mut rows = String::new();
    for f in &now.figures {
        let previous = earlier
            .iter()
            .rev()
            .find_map(|r| r.figures.iter().find(|g| now.same(f, r, g)).map(|g| (r, g)));
        let Some((r, g)) = previous else { continue };
        let both = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        };
        let per_cpu = both(g.per_tracker_cpu_second, f.per_tracker_cpu_second);
        let _ = writeln!(
            rows,
            "| {} | {} | {}{} | {} → {} | {} | {} | {} | {} → {} |",
            f.contender,
            f.load,
            r.date,
            r.commit
                .as_ref()
                .map(|c| format!(" (`{c}`)"))
                .unwrap_or_default(),
            per_second(g.responses_per_second),
            per_second(f.responses_per_second),
            change(g.responses_per_second, f.responses_per_second),
            or_dash(per_cpu.map(|(a, b)| format!("{} → {}", per_second(a), per_second(b)))),
            or_dash(per_cpu.map(|(a, b)| change(a, b))),
            rate(g.error_rate),
            rate(f.error_rate)
        );
    }
    let _ = write!(
        out,
        "\n## Change against the previous run\n\nThis run ({}) against the newest earlier run \
         in the history of the same contender at the same load, with the same load \
         generator.\n\n",
        now.date
    );
    if rows.is_empty() {
        out.push_str("No earlier run of the same contender and load.\n");
    } else {
        out.push_str(
            "| Contender | Load | Previous run | Responses/s | Change | Per tracker CPU-second | Change | Error rate |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        out.push_str(&rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temp_dir;

    fn run(date: &str, commit: Option<&str>, shoal: f64, per_cpu: Option<f64>) -> HistoryRun {
        let figure = |contender: &str, rps: f64| Figure {
            contender: contender.into(),
            load: "1 workers".into(),
            tracker_workers: 1,
            runs: 3,
            responses_per_second: rps,
            per_tracker_cpu_second: per_cpu.map(|p| p * rps / shoal),
            error_rate: Some(0.0),
        };
        HistoryRun {
            date: date.into(),
            commit: commit.map(str::to_string),
            machine: "2 × test CPU".into(),
            command: "shoal-bench compare ...".into(),
            kind: "compare".into(),
            protocol: "udp".into(),
            generator: "shoal-bench udp".into(),
            figures: vec![figure("shoal", shoal), figure("aquatic_udp", shoal / 2.0)],
        }
    }

    #[test]
    fn appended_runs_read_back_in_order() {
        let dir = temp_dir("history");
        assert_eq!(read(&dir), (Vec::new(), Vec::new()));
        let a = run(
            "2026-11-23 10:00:00 UTC",
            Some("abc"),
            100_000.0,
            Some(120_000.0),
        );
        let b = run("2026-11-24 10:00:00 UTC", None, 110_000.0, None);
        append(&dir, &a).unwrap();
        append(&dir, &b).unwrap();
        assert_eq!(read(&dir), (vec![a, b], Vec::new()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_lines_are_skipped_with_a_warning() {
        let dir = temp_dir("history-bad");
        let a = run(
            "2026-11-23 10:00:00 UTC",
            Some("abc"),
            100_000.0,
            Some(120_000.0),
        );
        append(&dir, &a).unwrap();
        // A hand edit, then a run killed halfway through its line.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(FILE))
            .unwrap();
        f.write_all(b"not json\n\n[1, 2]\n{\"date\": \"2026-11-2")
            .unwrap();
        drop(f);
        let b = run(
            "2026-11-24 10:00:00 UTC",
            Some("def"),
            110_000.0,
            Some(130_000.0),
        );
        let (runs, warnings) = record(&dir, &b);
        assert_eq!(runs, vec![a, b]);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].ends_with(&format!(
            "{FILE} line 2: skipped, not a run (expected ident at line 1 column 2)"
        )));
        assert!(warnings[2].contains("line 5: skipped"), "{warnings:?}");
        let md = section(&runs, &warnings);
        assert!(md.contains("Lines skipped (not readable as a run):"));
        assert!(
            md.contains("| shoal | 1 workers | 2026-11-23 10:00:00 UTC (`abc`) |"),
            "{md}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_read_is_a_warning() {
        let dir = temp_dir("history-dir");
        std::fs::create_dir_all(dir.join(FILE)).unwrap();
        let (runs, warnings) = read(&dir);
        assert!(runs.is_empty());
        assert_eq!(warnings.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_table_is_newest_first_with_changes_against_the_previous_run() {
        let runs = vec![
            run(
                "2026-11-22 10:00:00 UTC",
                Some("aaa"),
                90_000.0,
                Some(100_000.0),
            ),
            run(
                "2026-11-23 10:00:00 UTC",
                Some("bbb"),
                100_000.0,
                Some(120_000.0),
            ),
            run("2026-11-24 10:00:00 UTC", None, 110_000.0, Some(132_000.0)),
        ];
        let md = section(&runs, &[]);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| 2026")).collect();
        assert_eq!(rows.len(), 6);
        assert_eq!(
            rows[0],
            "| 2026-11-24 10:00:00 UTC | - | compare shoal-bench udp | shoal | 1 workers | 110,000 | 132,000 | 0.00% |"
        );
        assert!(rows[5].starts_with("| 2026-11-22 10:00:00 UTC | `aaa` |"));
        assert!(md.contains("- 2026-11-24 10:00:00 UTC: `shoal-bench compare ...` on 2 × test CPU"));
        // Against the run before it, not the oldest.
        assert!(
            md.contains(
                "| shoal | 1 workers | 2026-11-23 10:00:00 UTC (`bbb`) | 100,000 → 110,000 | +10.0% | 120,000 → 132,000 | +10.0% | 0.00% → 0.00% |"
            ),
            "{md}"
        );
        assert!(md.contains("| aquatic_udp | 1 workers |"));
        // Another load or generator is not "the previous run".
        let mut other = runs[2].clone();
        other.generator = "aquatic_udp_load_test".into();
        let md = section(&[runs[0].clone(), other], &[]);
        assert!(md.contains("No earlier run of the same contender and load."));
        assert_eq!(section(&[], &[]), "");
    }
}
