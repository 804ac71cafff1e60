//! The snapshot writer: the thread that loads the snapshot found at start, waits for a
//! predecessor's final snapshot during an upgrade, writes one every `state.snapshot_interval`
//! seconds, and the final one at stop ([`Snapshots`]); and the plan it follows
//! ([`Schedule`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use shoal_swarm::clock::unix_now;
use shoal_swarm::SnapshotSummary;
use shoal_tracker::swarms::Swarms;
use shoal_tracker::Core;

use crate::file::{self, Restored, StateFile};

/// Whether process `pid` still exists (a zombie counts: its final snapshot is written).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        // EPERM: it exists, under another user.
        Err(_) => true,
    }
}

/// The state thread's plan: wait for a predecessor's final snapshot, then snapshot
/// periodically, with change sections in between.
pub struct Schedule {
    pub interval: Option<Duration>,
    /// Between two whole snapshots, a change section at most this far apart
    /// (`crate::changes`; sooner while sections are large, [`next_gap`]).
    pub changes: Option<Duration>,
    /// The process whose final snapshot we wait for, and until when.
    pub predecessor: Option<(u32, Instant)>,
}

impl Schedule {
    /// What to do after restoring `restored` at start: a whole snapshot every `interval`
    /// seconds and a change section every `changes` (0: none).
    pub fn after(
        restored: &Restored,
        (interval, changes): (u64, u64),
        handover_timeout: u64,
    ) -> Self {
        let me = std::process::id();
        let predecessor = match restored.header() {
            Some(h) if !h.is_final && h.writer != me && process_alive(h.writer) => Some((
                h.writer,
                Instant::now() + Duration::from_secs(handover_timeout),
            )),
            _ => None,
        };
        Self {
            interval: (interval > 0).then(|| Duration::from_secs(interval)),
            changes: (changes > 0).then(|| Duration::from_secs(changes)),
            predecessor,
        }
    }
}

/// The snapshot writer, from start to final snapshot.
pub struct Snapshots {
    file: Arc<StateFile>,
    core: Arc<Core>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Snapshots {
    /// Starts the writer thread for `file`: the hand-over if `restored` came from a live
    /// predecessor (waited for at most `handover_timeout` seconds), then a snapshot every
    /// `interval` seconds (0: only the final one) and a change section every `changes`
    /// seconds between them (0: none but the final one).
    pub fn start(
        file: Arc<StateFile>,
        core: Arc<Core>,
        restored: &Restored,
        (interval, changes, handover_timeout): (u64, u64, u64),
    ) -> anyhow::Result<Self> {
        let schedule = Schedule::after(restored, (interval, changes), handover_timeout);
        // From now on the store keeps its stops for the change sections.
        crate::changes::on_store!(core.swarms(), s => s.keep_departures_from(1));
        let stop = Arc::new(AtomicBool::new(false));
        let loading = matches!(restored, Restored::Loading(_));
        // Set before the thread starts, so nobody sees "not loading" before the load.
        file.loading.store(loading, Ordering::Relaxed);
        if let Restored::Loading(h) = restored {
            tracing::info!(
                "loading snapshot {} in the background (written {} s ago by process {}); \
                 serving meanwhile",
                file.path().display(),
                unix_now().saturating_sub(h.written_unix),
                h.writer
            );
        }
        let thread = {
            let (file, core, stop) = (file.clone(), core.clone(), stop.clone());
            std::thread::Builder::new()
                .name("snapshots".into())
                .spawn(move || {
                    let mut schedule = schedule;
                    if loading {
                        let started = Instant::now();
                        let follow = schedule.predecessor.is_none();
                        file::load(&file, core.swarms(), &stop, follow);
                        file.loading.store(false, Ordering::Relaxed);
                        // The hand-over's wait starts once the load is done.
                        if let Some((_, deadline)) = &mut schedule.predecessor {
                            *deadline += started.elapsed();
                        }
                    }
                    run(&file, core.swarms(), schedule, &stop)
                })
                .context("spawning the snapshot thread")?
        };
        Ok(Self {
            file,
            core,
            stop,
            thread,
        })
    }

    pub fn file(&self) -> &Arc<StateFile> {
        &self.file
    }

    /// Stops the writer thread, then writes the final change section, or the final whole
    /// snapshot where there is no base to follow (call it once the front ends have
    /// stopped, so it holds their last announces). A periodic write the thread is doing is
    /// given up at its next megabyte rather than finished.
    ///
    /// If the snapshot found at start is still loading, the rest of the load is merged for
    /// the torrents announced since the start only, and the final section holds those:
    /// the file's other torrents stay in it as they were, and nothing announced is lost.
    /// While waiting for a predecessor's final snapshot (an upgrade) the final snapshot is
    /// whole: the log is the predecessor's.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.file.stopping.store(true, Ordering::Relaxed);
        self.thread.thread().unpark();
        let _ = self.thread.join();
        let store = self.core.swarms();
        if self.file.handover_waiting() || !append_logged(&self.file, store, true) {
            write_logged(&self.file, store, true);
        }
    }
}

/// Runs until `stop` is set: hand-over, then periodic snapshots.
fn run(state: &StateFile, store: &Swarms, mut schedule: Schedule, stop: &AtomicBool) {
    let waiting = &state.handover_waiting;
    let tick = Duration::from_millis(100);
    waiting.store(schedule.predecessor.is_some(), Ordering::Relaxed);
    if let Some((pid, _)) = schedule.predecessor {
        tracing::info!(
            "process {pid} wrote the snapshot and is still running: serving beside it, \
             waiting for its final snapshot (stop it with SIGTERM)"
        );
    } else if !stop.load(Ordering::Relaxed) {
        // Persist at once (after the load: a snapshot written before would drop what
        // was not loaded yet), so a successor started right after us finds our key.
        write_logged(state, store, false);
    }
    let mut next = schedule.interval.map(|i| Instant::now() + i);
    // The first section comes soon and the gap doubles while sections are small: a burst
    // of announces right after the start is bounded as one later would be.
    let mut gap = schedule
        .changes
        .map_or(Duration::ZERO, |every| every.min(SHORTEST_GAP));
    let mut next_changes = schedule.changes.map(|_| Instant::now() + gap);
    while !stop.load(Ordering::Relaxed) {
        // Woken at once by `stop`.
        std::thread::park_timeout(tick);
        if let Some((pid, deadline)) = schedule.predecessor {
            match state.merge_final_of(store, pid) {
                Some(Ok(s)) => {
                    tracing::info!(
                        "merged the final snapshot of process {pid}: {} torrents, {} peers",
                        s.merged().0,
                        s.merged().1
                    );
                    store.clean(shoal_swarm::clock::now());
                }
                Some(Err(e)) => {
                    tracing::error!("final snapshot of process {pid} cannot be merged: {e}")
                }
                None if Instant::now() < deadline && process_alive(pid) => continue,
                None => tracing::warn!(
                    "no final snapshot from process {pid} (gone, or waited past \
                     state.handover_timeout): carrying on alone"
                ),
            }
            schedule.predecessor = None;
            waiting.store(false, Ordering::Relaxed);
            write_logged(state, store, false);
            next = schedule.interval.map(|i| Instant::now() + i);
            continue;
        }
        if let (Some(at), Some(every)) = (next, schedule.interval) {
            if Instant::now() >= at {
                write_logged(state, store, false);
                next = Some(Instant::now() + every);
                next_changes = schedule.changes.map(|_| Instant::now() + gap);
                continue;
            }
        }
        if let (Some(at), Some(every)) = (next_changes, schedule.changes) {
            if Instant::now() >= at {
                let started = Instant::now();
                if append_logged(state, store, false) {
                    gap = next_gap(every, gap, started.elapsed());
                } else {
                    write_logged(state, store, false);
                }
                next_changes = Some(Instant::now() + gap);
            }
        }
    }
}

/// About how long a change section may take to write. The final one, at `SIGTERM`, holds
/// what was announced since the last, so it takes about as long as the last did at the
/// same rate: the gap between sections shrinks until a section fits this (at 10 million
/// torrents a fill at 200,000 announces a second changed 1.77 million torrents in the
/// 60 s after a whole snapshot, and the final section took 2.34 s).
const SECTION_BUDGET: Duration = Duration::from_millis(400);

/// Sections come at most this often, however fast announces come.
const SHORTEST_GAP: Duration = Duration::from_secs(2);

/// The gap until the next change section, after one that took `took` at a gap of `gap`:
/// shorter in proportion while sections take longer than [`SECTION_BUDGET`], twice as
/// long (up to `every`, `state.changes_interval`) once one takes under half of it. Never
/// under four times what the last took: a section also reads every torrent's time of
/// last announce, which a shorter gap does not make quicker, and the writer should not
/// spend more than a fifth of a CPU on it.
fn next_gap(every: Duration, gap: Duration, took: Duration) -> Duration {
    if took > SECTION_BUDGET {
        let shorter = gap.mul_f64(SECTION_BUDGET.as_secs_f64() / took.as_secs_f64());
        shorter.max(SHORTEST_GAP).max(took * 4).min(every)
    } else if took < SECTION_BUDGET / 2 {
        (gap * 2).min(every)
    } else {
        gap.min(every)
    }
}

/// Appends a change section and logs the outcome (the final one at info level). False if
/// none could be (no base to follow, or it failed): write a whole snapshot instead.
fn append_logged(state: &StateFile, store: &Swarms, is_final: bool) -> bool {
    let what = if is_final {
        "final snapshot"
    } else {
        "change section"
    };
    let started = Instant::now();
    match state.append_changes(store, is_final) {
        Ok(Some(s)) => {
            // "final snapshot written to FILE.changes in …": the words scripts look for.
            let line = format!(
                "{what} written to {} in {:?}: {} torrents, {} peers (a change section: \
                 the torrents announced since the last one or the whole snapshot)",
                state.log_path().display(),
                started.elapsed(),
                s.torrents,
                s.peers
            );
            if is_final {
                tracing::info!("{line}");
            } else {
                tracing::debug!("{line}");
            }
            true
        }
        Ok(None) => false,
        Err(e) if StateFile::given_up(&e) => {
            tracing::info!("change section {}", crate::sink::GIVEN_UP);
            true
        }
        Err(e) => {
            tracing::error!("{what} as a change section failed: {e:#}; writing it whole");
            false
        }
    }
}

/// Writes a snapshot and logs the outcome (the final one at info level).
fn write_logged(state: &StateFile, store: &Swarms, is_final: bool) {
    let what = if is_final {
        "final snapshot"
    } else {
        "snapshot"
    };
    let line = |s: SnapshotSummary| {
        format!(
            "{what} written to {} in {:?} ({:?} of it syncing): {} torrents, {} peers",
            state.path().display(),
            state.last_duration(),
            state.last_sync(),
            s.torrents,
            s.peers
        )
    };
    match state.write(store, is_final) {
        Ok(s) if is_final => tracing::info!("{}", line(s)),
        Ok(s) => tracing::debug!("{}", line(s)),
        Err(e) if StateFile::given_up(&e) => tracing::info!("{what} {}", crate::sink::GIVEN_UP),
        Err(e) => tracing::error!("{what} failed: {e:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_gap_shrinks_while_sections_take_longer_than_the_budget() {
        // 2.34 s at a 60-s gap (the 10-million-torrent fill): about a sixth of it next.
        let gap = next_gap(MINUTE, MINUTE, Duration::from_millis(2340));
        assert!(
            gap > Duration::from_secs(10) && gap < Duration::from_secs(11),
            "{gap:?}"
        );
        // Never below the shortest gap, nor below four times the last section.
        let three = Duration::from_secs(3);
        assert_eq!(
            next_gap(MINUTE, SHORTEST_GAP, Duration::from_millis(450)),
            SHORTEST_GAP
        );
        assert_eq!(
            next_gap(MINUTE, three, Duration::from_secs(1)),
            Duration::from_secs(4)
        );
        assert_eq!(next_gap(MINUTE, gap, Duration::from_secs(30)), MINUTE);
    }

    #[test]
    fn the_gap_grows_back_to_the_interval_once_sections_are_small() {
        let mut gap = SHORTEST_GAP;
        for _ in 0..10 {
            gap = next_gap(MINUTE, gap, Duration::from_millis(20));
        }
        assert_eq!(gap, MINUTE);
        // Within the budget but over half of it: unchanged.
        let kept = next_gap(MINUTE, Duration::from_secs(8), Duration::from_millis(300));
        assert_eq!(kept, Duration::from_secs(8));
        // An interval set below the shortest gap is kept.
        let short = Duration::from_secs(1);
        assert_eq!(next_gap(short, short, Duration::from_secs(5)), short);
    }
}
