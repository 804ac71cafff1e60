//! What a load reports beyond the tracker's latency and throughput: the fill that came
//! before the measured window (`--fill`), what the load generator itself cost (memory, CPU
//! per response), and whether it kept up.
//!
//! A load generator that falls behind makes its own delay look like the tracker's: open
//! loop, latency runs from each request's due time, so requests that leave late are
//! charged to the tracker; closed loop, a generator out of CPU caps the throughput. At 30
//! million simulated peers shoal-bench once reported a p99 of 6.7 s against a tracker that
//! held nothing, all of it its own. So every run is judged here, and a run in which the
//! generator was behind says so and is marked not valid, in the text and in the JSON.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpu::CpuUse;
use crate::stats::{OpSummary, Summary};
use crate::units::{latency, thousands};

/// Share of its CPUs at which the generator counts as saturated.
pub const SATURATED: f64 = 0.90;

/// The fill: every simulated peer announced once, closed loop, before the measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Fill {
    /// Simulated peers whose announce was sent.
    pub peers: u64,
    /// Of the `--peers` asked for, so that a fill cut short by its timeout shows.
    pub peers_asked: u64,
    /// Valid answers to those announces.
    pub answered: u64,
    /// Errors by kind (timeouts, error responses, ...), those with a count only.
    pub errors: BTreeMap<String, u64>,
    /// Distinct torrents the announces named.
    pub torrents: u64,
    pub seconds: f64,
    /// Answers per second of the fill.
    pub per_second: f64,
    /// Whether every peer was announced and answered or timed out before `--fill-timeout`.
    pub complete: bool,
    /// CPU over the fill, as a run reports it: the generator's, the tracker's where its PID
    /// was given, and the rest of the machine's (a fill beside other work is slower).
    #[serde(default)]
    pub cpu: CpuUse,
    pub responses_per_tracker_cpu_second: Option<f64>,
    /// The tracker's resident memory right after the fill (`VmRSS`), KiB.
    pub tracker_rss_kib: Option<u64>,
    /// The generator's own resident memory right after the fill, KiB.
    pub generator_rss_kib: Option<u64>,
    /// Latency of the fill's announces.
    pub announce: Option<OpSummary>,
}

/// The load generator's own cost over the run, and whether it kept up.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Generator {
    /// Its resident memory at the end of the run (`VmRSS` of `/proc/self/status`), KiB;
    /// `None` where the generator is another program.
    pub rss_kib: Option<u64>,
    /// Its peak resident memory (`VmHWM`), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Generator CPU time per valid response, µs.
    pub cpu_us_per_response: Option<f64>,
    /// CPUs it could use: its workers, at most the CPUs it was allowed.
    pub cpus: usize,
    /// Why the generator, not the tracker, was behind; empty when it kept up.
    pub behind: Vec<String>,
    /// Open loop: why the load asked for did not reach the tracker though the generator
    /// kept up (its in-flight window was full: the tracker answered slower than the rate);
    /// such a run is not valid either, but the text does not blame the generator.
    #[serde(default)]
    pub undelivered: Vec<String>,
    /// What a reader should know that does not void the run.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Generator {
    /// Whether the run measured the tracker: the generator kept up.
    pub fn valid(&self) -> bool {
        self.behind.is_empty() && self.undelivered.is_empty()
    }
}

/// What a run's flags say of how it is to be judged: its pace, and how late its requests
/// may leave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Open loop: requests per second offered in total (`--rate`); `None`: closed loop.
    pub rate: Option<f64>,
    /// Open loop: the 99th percentile of send lag above which the generator was behind
    /// (`--max-send-lag`).
    pub max_send_lag: Duration,
}

/// Judges a run of this process, with `workers` worker threads, as the generator: its own
/// memory now, and [`judge`].
pub fn own(workers: usize, pace: &Pace, summary: &Summary, cpu: &CpuUse) -> Generator {
    let (rss_kib, peak_rss_kib) = crate::cpu::own_memory_kib();
    let allowed = crate::sys::allowed_cpus().map_or(0, |c| c.len());
    let cpus = workers.max(1).min(allowed.max(1));
    Generator {
        rss_kib,
        peak_rss_kib,
        ..judge(pace, summary, cpu, cpus)
    }
}

/// Whether the generator, using at most `cpus` CPUs, kept up with the run (`pace`) whose
/// figures are `summary` and `cpu`.
///
/// Open loop it was behind when requests that had a free slot left later than
/// `--max-send-lag` at the 99th percentile, when more than 1% of the requests due never
/// left, or when its CPU was saturated. Requests held back by a full in-flight window are
/// noted, not held against it: the window fills when the tracker is slow to answer. Closed loop, when its CPU was saturated and the tracker's was not (or is not
/// known): then the generator set the pace.
pub fn judge(pace: &Pace, summary: &Summary, cpu: &CpuUse, cpus: usize) -> Generator {
    let mut behind = Vec::new();
    let mut undelivered = Vec::new();
    let mut notes = Vec::new();
    let cpus = cpus.max(1);
    let saturated = cpu.generator_percent >= SATURATED * 100.0 * cpus as f64;
    let busy = format!(
        "generator CPU at {:.0}% of its {cpus} CPU{}",
        cpu.generator_percent,
        if cpus == 1 { "" } else { "s" }
    );
    match pace.rate {
        Some(rate) => {
            let max_lag_us = pace.max_send_lag.as_secs_f64() * 1e6;
            if let Some(lag) = summary.send_lag.as_ref().filter(|l| l.p99 > max_lag_us) {
                behind.push(format!(
                    "requests left late: send lag p99 {} (more than --max-send-lag {}), max {}",
                    latency(lag.p99),
                    latency(max_lag_us),
                    latency(lag.max)
                ));
            }
            let offered = rate * summary.seconds;
            if summary.unsent as f64 > 0.01 * offered {
                // Held back by a full window, the backlog is the tracker's slowness; with
                // slots free all along, the sender's.
                let to = if summary.slot_waits > 0 {
                    &mut undelivered
                } else {
                    &mut behind
                };
                to.push(format!(
                    "{} requests due never left (more than 1% of the {} offered): the tracker \
                     did not get the load asked for",
                    thousands(summary.unsent),
                    thousands(offered as u64)
                ));
            }
            if saturated {
                behind.push(busy);
            }
            if summary.slot_waits > 0 {
                notes.push(format!(
                    "{} requests ({:.2}%) left late because every slot was waiting for an \
                     answer (the in-flight window was full); their latency counts the wait",
                    thousands(summary.slot_waits),
                    100.0 * summary.slot_waits as f64 / offered.max(1.0)
                ));
            }
        }
        None => {
            if saturated && cpu.tracker_percent.is_none_or(|t| t < SATURATED * 100.0) {
                let tracker = cpu
                    .tracker_percent
                    .map_or("is not known (no --tracker-pid)".to_string(), |t| {
                        format!("was at {t:.0}%")
                    });
                behind.push(format!(
                    "{busy} while the tracker's CPU {tracker}: the generator set the pace"
                ));
            }
        }
    }
    Generator {
        rss_kib: None,
        peak_rss_kib: None,
        cpu_us_per_response: (summary.responses > 0)
            .then(|| 1e6 * cpu.generator_cpu_seconds / summary.responses as f64),
        cpus,
        behind,
        undelivered,
        notes,
    }
}

/// The default of `--max-send-lag`.
pub fn default_max_send_lag() -> Duration {
    Duration::from_millis(1)
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}

/// The fill's line of a run's text.
pub fn fill_text(f: &Fill) -> String {
    let mut out = format!(
        "fill: {} of {} peers announced ({} torrents) in {:.1}s, {} answers/s{}",
        thousands(f.peers),
        thousands(f.peers_asked),
        thousands(f.torrents),
        f.seconds,
        thousands(f.per_second as u64),
        if f.complete {
            ""
        } else {
            " (cut short by --fill-timeout)"
        }
    );
    let errors: Vec<String> = f
        .errors
        .iter()
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    if !errors.is_empty() {
        let _ = write!(out, "; errors: {}", errors.join(", "));
    }
    if let Some(a) = &f.announce {
        let _ = write!(out, "; p50 {}, p99 {}", latency(a.p50), latency(a.p99));
    }
    let _ = write!(
        out,
        "\nfill cpu: generator {:.1}s",
        f.cpu.generator_cpu_seconds
    );
    if let (Some(t), Some(per)) = (
        f.cpu.tracker_cpu_seconds,
        f.responses_per_tracker_cpu_second,
    ) {
        let _ = write!(
            out,
            ", tracker {t:.1}s ({} answers per tracker CPU-second)",
            thousands(per as u64)
        );
    }
    if let Some(o) = f.cpu.others_percent {
        let _ = write!(out, ", other processes {o:.0}% of a CPU");
    }
    if let Some(r) = f.tracker_rss_kib {
        let _ = write!(out, "; tracker RSS after the fill {}", mib(r));
    }
    if let Some(r) = f.generator_rss_kib {
        let _ = write!(out, "; generator RSS {}", mib(r));
    }
    out.push('\n');
    out
}

/// The generator's lines of a run's text: its cost, and the verdict.
pub fn generator_text(g: &Generator, summary: &Summary) -> String {
    let mut parts = Vec::new();
    if let (Some(r), Some(p)) = (g.rss_kib, g.peak_rss_kib) {
        parts.push(format!("RSS {} (peak {})", mib(r), mib(p)));
    }
    if let Some(us) = g.cpu_us_per_response {
        parts.push(format!("{us:.2} µs CPU per response"));
    }
    if let Some(l) = &summary.send_lag {
        parts.push(format!(
            "send lag p50 {}, p99 {}, max {}",
            latency(l.p50),
            latency(l.p99),
            latency(l.max)
        ));
    }
    if summary.send_lag.is_some() || summary.unsent > 0 {
        parts.push(format!("{} due but unsent", thousands(summary.unsent)));
    }
    let mut out = String::new();
    if !parts.is_empty() {
        let _ = writeln!(out, "generator: {}", parts.join(", "));
    }
    for note in &g.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if g.valid() {
        out.push_str("valid: the generator kept up\n");
    } else if !g.behind.is_empty() {
        let _ = writeln!(
            out,
            "NOT VALID: the generator, not the tracker, was behind: {}",
            g.behind.join("; ")
        );
    } else {
        let _ = writeln!(
            out,
            "NOT VALID: the tracker answered slower than the rate and the in-flight window \
             (sockets × --inflight) filled: {}",
            g.undelivered.join("; ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Op, Stats};

    fn args(rate: Option<f64>) -> Pace {
        Pace {
            rate,
            max_send_lag: default_max_send_lag(),
        }
    }

    fn cpu(generator: f64, tracker: Option<f64>) -> CpuUse {
        CpuUse {
            wall_seconds: 10.0,
            generator_cpu_seconds: generator / 10.0,
            generator_percent: generator,
            tracker_cpu_seconds: tracker.map(|t| t / 10.0),
            tracker_percent: tracker,
            others_percent: Some(0.0),
            ksoftirqd_percent: None,
        }
    }

    /// 10 s of open loop at 1,000/s: 10,000 answers of 50 µs, sent `lag_us` late each,
    /// and `unsent` never sent.
    fn open(lag_us: u64, unsent: u64) -> Summary {
        let mut st = Stats::new();
        for _ in 0..10_000 {
            st.record(Op::Announce, 50_000);
            st.send_lag.record(lag_us * 1000).unwrap();
        }
        st.unsent = unsent;
        st.summary(10.0)
    }

    #[test]
    fn an_open_loop_that_kept_its_schedule_is_valid() {
        let g = judge(&args(Some(1000.0)), &open(20, 4), &cpu(15.0, Some(30.0)), 1);
        assert!(g.valid(), "{:?}", g.behind);
        // 1.5 CPU-seconds over 10,000 answers.
        assert_eq!(g.cpu_us_per_response.map(|u| u.round()), Some(150.0));
    }

    #[test]
    fn late_sends_a_backlog_or_a_saturated_generator_make_an_open_loop_not_valid() {
        let a = args(Some(1000.0));
        let late = judge(&a, &open(5_000, 0), &cpu(15.0, None), 1);
        assert_eq!(late.behind.len(), 1);
        assert!(late.behind[0].contains("send lag p99 5.00ms"), "{late:?}");
        let backlog = judge(&a, &open(20, 101), &cpu(15.0, None), 1);
        assert!(backlog.behind[0].contains("101 requests due never left"));
        // The same backlog behind a full window is the tracker's: not valid, not blamed.
        let mut held = open(20, 101);
        held.slot_waits = 50;
        let g = judge(&a, &held, &cpu(15.0, None), 1);
        assert!(!g.valid() && g.behind.is_empty());
        assert!(g.undelivered[0].contains("101 requests due never left"));
        assert!(generator_text(&g, &held).contains("\nNOT VALID: the tracker answered slower"));
        assert!(judge(&a, &open(20, 100), &cpu(15.0, None), 1).valid());
        let mut waits = open(20, 0);
        waits.slot_waits = 500;
        let g = judge(&a, &waits, &cpu(15.0, None), 1);
        assert!(g.valid() && g.notes[0].starts_with("500 requests (5.00%) left late"));
        let busy = judge(&a, &open(20, 0), &cpu(95.0, None), 1);
        assert!(busy.behind[0].contains("generator CPU at 95% of its 1 CPU"));
        // Two CPUs at 95% of one: not saturated.
        assert!(judge(&a, &open(20, 0), &cpu(95.0, None), 2).valid());
    }

    #[test]
    fn a_closed_loop_is_behind_when_the_generator_and_not_the_tracker_ran_out() {
        let a = args(None);
        let s = open(0, 0);
        assert!(judge(&a, &s, &cpu(99.0, Some(100.0)), 1).valid());
        let g = judge(&a, &s, &cpu(99.0, Some(60.0)), 1);
        assert!(g.behind[0].contains("tracker's CPU was at 60%"), "{g:?}");
        assert!(!judge(&a, &s, &cpu(99.0, None), 1).valid());
        assert!(judge(&a, &s, &cpu(70.0, None), 1).valid());
    }

    #[test]
    fn texts_say_the_verdict_and_the_fill() {
        let s = open(5_000, 0);
        let g = judge(&args(Some(1000.0)), &s, &cpu(15.0, None), 1);
        let t = generator_text(&g, &s);
        assert!(t.contains("send lag p50 5.00ms"), "{t}");
        assert!(t.contains("\nNOT VALID: the generator, not the tracker, was behind: "));
        let f = Fill {
            peers: 3_000,
            peers_asked: 3_000,
            answered: 2_990,
            errors: [("timeout".to_string(), 10)].into(),
            torrents: 1_000,
            seconds: 2.0,
            per_second: 1_495.0,
            complete: true,
            tracker_rss_kib: Some(2048),
            ..Fill::default()
        };
        let t = fill_text(&f);
        assert!(
            t.starts_with(
                "fill: 3,000 of 3,000 peers announced (1,000 torrents) in 2.0s, 1,495 \
                 answers/s; errors: timeout 10\n"
            ),
            "{t}"
        );
        assert!(t.contains("tracker RSS after the fill 2 MiB"));
    }
}
