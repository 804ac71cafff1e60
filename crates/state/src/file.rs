//! The snapshot file: what was restored at start ([`Restored`]), the file and its writes
//! ([`StateFile`]), the restore before serving ([`restore`]) and the load beside serving
//! ([`open`], then [`load`]).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use shoal_swarm::clock::unix_now;
use shoal_swarm::snapshot::{Gone, Merge, Take};
use shoal_swarm::{PeerExt, SnapshotError, SnapshotHeader, SnapshotSummary, Store, StoreConfig};

use shoal_tracker::swarms::Swarms;

use crate::changes::{self, on_store, Chain, Log, Narrowing};
use crate::sink::{Abortable, EarlyWriteback, GIVEN_UP};

/// What happened to the snapshot file at start.
#[derive(Debug)]
pub enum Restored {
    /// No file: a first start.
    Missing,
    /// The header was read (and its key taken); the body loads in the background while
    /// the tracker serves (see [`open`] and [`Snapshots::start`]).
    Loading(SnapshotHeader),
    /// Restored.
    Loaded(SnapshotSummary),
    /// Unreadable; moved to the path given (or left in place if moving failed).
    MovedAside {
        error: String,
        moved_to: Option<PathBuf>,
    },
}

impl Restored {
    /// The connection-id key the restored snapshot carries, if any.
    pub fn key(&self) -> Option<[u8; 16]> {
        <[u8; 16]>::try_from(self.header()?.key.as_slice()).ok()
    }

    /// The header of the snapshot found at start, if one was found and read.
    pub fn header(&self) -> Option<&SnapshotHeader> {
        match self {
            Restored::Loading(h) => Some(h),
            Restored::Loaded(s) => Some(&s.header),
            _ => None,
        }
    }
}

/// The snapshot file of one tracker.
pub struct StateFile {
    path: PathBuf,
    pid: u32,
    key: [u8; 16],
    /// Serialises writers (periodic thread, admin, shutdown).
    writing: Mutex<()>,
    last_written_unix: AtomicU64,
    last_duration_micros: AtomicU64,
    last_sync_micros: AtomicU64,
    /// Set while this process waits for its predecessor's final snapshot.
    pub(crate) handover_waiting: AtomicBool,
    /// Set while the snapshot found at start is still being loaded.
    pub(crate) loading: AtomicBool,
    /// Set when the process stops: a periodic snapshot being written gives up, since the
    /// final one follows at once and would otherwise wait for it (seconds at 30 million
    /// peers).
    pub(crate) stopping: AtomicBool,
    /// The whole snapshot this process's change sections follow, if it may append any
    /// (`crate::changes`): set by a whole snapshot it wrote or by a load it finished.
    chain: Mutex<Option<Chain>>,
}

impl StateFile {
    pub fn new(path: PathBuf, key: [u8; 16]) -> Self {
        Self {
            path,
            pid: std::process::id(),
            key,
            writing: Mutex::new(()),
            last_written_unix: AtomicU64::new(0),
            last_duration_micros: AtomicU64::new(0),
            last_sync_micros: AtomicU64::new(0),
            handover_waiting: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            chain: Mutex::new(None),
        }
    }

    /// `FILE.changes`, the log of change sections beside the file.
    pub fn log_path(&self) -> PathBuf {
        changes::log_path(&self.path)
    }

    /// Whether the snapshot found at start is still loading in the background (no
    /// snapshot is written until it has loaded).
    pub fn loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    /// Whether this process still waits for a predecessor's final snapshot.
    pub fn handover_waiting(&self) -> bool {
        self.handover_waiting.load(Ordering::Relaxed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unix second of the last snapshot this process wrote (0: none yet).
    pub fn last_written_unix(&self) -> u64 {
        self.last_written_unix.load(Ordering::Relaxed)
    }

    /// How long the last snapshot took to write.
    pub fn last_duration(&self) -> Duration {
        Duration::from_micros(self.last_duration_micros.load(Ordering::Relaxed))
    }

    /// Of [`last_duration`](Self::last_duration), the time its `fsync` took.
    pub fn last_sync(&self) -> Duration {
        Duration::from_micros(self.last_sync_micros.load(Ordering::Relaxed))
    }

    /// Whether a snapshot failed because it was given up for the final one (the process
    /// stops: see `stopping`).
    pub fn given_up(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.to_string().contains(GIVEN_UP))
    }

    /// Writes a snapshot of `store`: temporary file, fsync, rename. A periodic one (not
    /// `is_final`) is given up if the process starts stopping meanwhile.
    pub fn write(&self, store: &Swarms, is_final: bool) -> anyhow::Result<SnapshotSummary> {
        if self.loading() {
            // It would replace the file with the part loaded so far.
            anyhow::bail!(
                "the snapshot found at start is still loading: none is written until it has"
            );
        }
        let _guard = self.writing.lock();
        let started = Instant::now();
        let tmp = tmp_path(&self.path, self.pid);
        let header = SnapshotHeader {
            written_unix: unix_now(),
            writer: self.pid,
            is_final,
            key: self.key.to_vec(),
            base: None,
        };
        let now = shoal_swarm::clock::now();
        let never = AtomicBool::new(false);
        let abort = if is_final { &never } else { &self.stopping };
        // A periodic snapshot is encoded on this one thread, beside the workers that
        // serve; the final one, written once the front ends have stopped, on every core
        // (30 million peers on the 2-core VM: 1.4 s on both, 2.0 s on one;
        // docs/benchmarks/opentracker-scale).
        let encoders = if is_final {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            1
        };
        let result = (|| {
            let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            let file = EarlyWriteback::new(file);
            let mut w = BufWriter::with_capacity(1 << 20, Abortable { inner: file, abort });
            let summary = on_store!(store, s => s.write_snapshot(&mut w, &header, now, encoders))
                .with_context(|| format!("writing {}", tmp.display()))?;
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(|| format!("writing {}", tmp.display()))?
                .inner
                .into_file();
            let syncing = Instant::now();
            file.sync_all()
                .with_context(|| format!("syncing {}", tmp.display()))?;
            self.last_sync_micros
                .store(syncing.elapsed().as_micros() as u64, Ordering::Relaxed);
            std::fs::rename(&tmp, &self.path).with_context(|| {
                format!("renaming {} to {}", tmp.display(), self.path.display())
            })?;
            // The log followed the file just replaced: its sections name that one as their
            // base, so a stop before this removal leaves nothing a restart would read.
            match std::fs::remove_file(self.log_path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!("removing {}: {e}", self.log_path().display())
                }
                _ => {}
            }
            self.sync_dir();
            Ok(summary)
        })();
        match &result {
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
            }
            Ok(summary) => {
                on_store!(store, s => s.keep_departures_from(now));
                *self.chain.lock() = Some(Chain {
                    base: summary.base_id(),
                    base_len: std::fs::metadata(&self.path).map_or(0, |m| m.len()),
                    since: now,
                    log_len: 0,
                });
                self.last_written_unix
                    .store(header.written_unix, Ordering::Relaxed);
                self.last_duration_micros
                    .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        }
        result
    }

    /// Makes a rename or a new file in the file's directory durable (best effort: not
    /// every filesystem allows it).
    fn sync_dir(&self) {
        if let Some(dir) = self.path.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
    }

    /// Appends a change section to the log (`crate::changes`): the torrents announced
    /// since the last section or whole snapshot. `Ok(None)` when there is nothing to follow
    /// (no whole snapshot of this process's yet, a load still under way, or one so old
    /// that the sections could miss a dropped torrent): write a whole one instead. A
    /// periodic section is given up if the process starts stopping meanwhile.
    pub fn append_changes(
        &self,
        store: &Swarms,
        is_final: bool,
    ) -> anyhow::Result<Option<SnapshotSummary>> {
        if self.loading() {
            return Ok(None);
        }
        let _guard = self.writing.lock();
        let now = shoal_swarm::clock::now();
        let Some(chain) = *self.chain.lock() else {
            return Ok(None);
        };
        if chain.stale(now, store.config().torrent_ttl) || (!is_final && chain.full()) {
            return Ok(None);
        }
        let header = SnapshotHeader {
            written_unix: unix_now(),
            writer: self.pid,
            is_final,
            key: self.key.to_vec(),
            base: Some(chain.base),
        };
        let never = AtomicBool::new(false);
        let abort = if is_final { &never } else { &self.stopping };
        let encoders = if is_final {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            1
        };
        let new_log = chain.log_len == 0;
        let (summary, file) = changes::append(
            &self.log_path(),
            &chain,
            &header,
            store,
            (now, encoders),
            abort,
        )?;
        if new_log {
            self.sync_dir();
        }
        on_store!(store, s => s.keep_departures_from(now));
        *self.chain.lock() = Some(Chain {
            since: now,
            log_len: file.metadata()?.len(),
            ..chain
        });
        self.last_written_unix
            .store(header.written_unix, Ordering::Relaxed);
        Ok(Some(summary))
    }

    /// If the file now holds a *final* snapshot written by `predecessor`, merges it into
    /// `store` and returns what it held.
    pub fn merge_final_of(
        &self,
        store: &Swarms,
        predecessor: u32,
    ) -> Option<Result<SnapshotSummary, SnapshotError>> {
        let (base, header) = changes::base_id(&self.path).ok()?;
        let latest = changes::last_header(&self.log_path(), base).unwrap_or(header);
        if !latest.is_final || latest.writer != predecessor {
            return None;
        }
        let now = (shoal_swarm::clock::now(), unix_now(), Merge::KeepHigher);
        Some(load_chain(&self.path, store, now, |_| true).map(|(s, _)| s))
    }
}

/// Merges the whole snapshot at `path` and the sections of its log into `store`, each
/// torrent from the newest record there is of it, where `wants` says so. Returns what was
/// merged and the log as read.
fn load_chain(
    path: &Path,
    store: &Swarms,
    (now, unix, merge): (u32, u64, Merge),
    mut wants: impl FnMut(&shoal_proto::InfoHash) -> bool,
) -> Result<(SnapshotSummary, Log), SnapshotError> {
    let mut file = File::open(path)?;
    let (base, _) = changes::base_id_of(&mut file)?;
    let log_path = changes::log_path(path);
    let log = changes::scan(&log_path, base, store)?;
    // Newest first: the sections from the last, then the base.
    let mut gone = Gone::new();
    let times = (now, unix, merge);
    let sections = match log.headers.is_empty() {
        true => SnapshotSummary::default(),
        false => changes::merge(&log_path, &log, store, (times, &mut gone), &mut wants)?,
    };
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut summary = on_store!(store, s => s.restore_filtered(&mut r, times, &mut gone, |h, _| {
        match wants(h) {
            true => log.take(h, 0),
            false => Take::Nothing,
        }
    }))?;
    if r.read(&mut [0u8; 1])? != 0 {
        return Err(SnapshotError::Malformed("bytes after the trailer"));
    }
    summary.torrents += sections.torrents;
    summary.torrents_skipped += sections.torrents_skipped;
    summary.peers += sections.peers;
    summary.peers_skipped += sections.peers_skipped;
    summary.peers_expired += sections.peers_expired;
    if let Some(last) = log.last() {
        summary.header = last.clone();
    }
    Ok((summary, log))
}

fn tmp_path(path: &Path, pid: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".tmp-{pid}"));
    PathBuf::from(s)
}

/// Logs that the snapshot at `path` was restored (`how`, if not empty, says how: it
/// follows "in {elapsed}"), `unix` being the Unix time now.
fn log_restored(path: &Path, how: &str, started: Instant, summary: &SnapshotSummary, unix: u64) {
    tracing::info!(
        "restored snapshot {} in {:?}{how}: {} torrents, {} peers ({} expired while down), \
         written {} s ago by process {}{}",
        path.display(),
        started.elapsed(),
        summary.merged().0,
        summary.merged().1,
        summary.peers_expired,
        unix.saturating_sub(summary.header.written_unix),
        summary.header.writer,
        if summary.header.is_final {
            " on exit"
        } else {
            " (periodic)"
        },
    );
}

/// Restores the snapshot at `path` into a new store. Any failure leaves an empty store,
/// logs the reason and moves the file aside.
pub fn restore<X: PeerExt>(path: &Path, config: StoreConfig) -> (Store<X>, Restored) {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!("no snapshot at {}: starting empty", path.display());
            return (Store::with_extension(config), Restored::Missing);
        }
        Err(e) => {
            // Unreadable (permissions?): do not move what we cannot read, just say so.
            tracing::error!(
                "cannot open snapshot {}: {e}; starting empty",
                path.display()
            );
            return (
                Store::with_extension(config),
                Restored::MovedAside {
                    error: e.to_string(),
                    moved_to: None,
                },
            );
        }
    };
    let store = Store::with_extension(config.clone());
    let started = Instant::now();
    match store.restore_snapshot(
        BufReader::with_capacity(1 << 20, file),
        shoal_swarm::clock::now(),
        unix_now(),
    ) {
        Ok(summary) => {
            log_restored(path, "", started, &summary, unix_now());
            store.clean(shoal_swarm::clock::now());
            (store, Restored::Loaded(summary))
        }
        Err(e) => {
            drop(store);
            (
                Store::with_extension(config),
                move_aside(path, &e, "starting empty"),
            )
        }
    }
}

/// Moves a snapshot that cannot be restored to `FILE.corrupt-<unix time>` and says so.
fn move_aside(path: &Path, e: &dyn std::fmt::Display, then: &str) -> Restored {
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".corrupt-{}", unix_now()));
    let aside = PathBuf::from(aside);
    let moved_to = match std::fs::rename(path, &aside) {
        Ok(()) => Some(aside),
        Err(me) => {
            tracing::error!("could not move {} aside: {me}", path.display());
            None
        }
    };
    tracing::error!(
        "snapshot {} cannot be restored: {e}; moved to {}; {then}",
        path.display(),
        moved_to
            .as_ref()
            .map_or("(not moved)".to_string(), |p| p.display().to_string())
    );
    Restored::MovedAside {
        error: e.to_string(),
        moved_to,
    }
}

/// Opens the snapshot at `path` at start without loading it: reads only its header (for
/// the connection-id key and the hand-over), so the tracker can bind and serve at once
/// with an empty store; [`Snapshots::start`] then loads the body in the background
/// ([`load`]). A file whose header is damaged is moved aside here, as [`restore`] does.
pub fn open(path: &Path) -> Restored {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!("no snapshot at {}: starting empty", path.display());
            return Restored::Missing;
        }
        Err(e) => {
            tracing::error!(
                "cannot open snapshot {}: {e}; starting empty",
                path.display()
            );
            return Restored::MovedAside {
                error: e.to_string(),
                moved_to: None,
            };
        }
    };
    drop(file);
    match changes::base_id(path) {
        // The log's last section, if any, says who wrote last and whether it was a final
        // word (the key is the same in both).
        Ok((base, header)) => Restored::Loading(
            changes::last_header(&changes::log_path(path), base).unwrap_or(header),
        ),
        Err(e) => move_aside(path, &e, "starting empty"),
    }
}

/// Test hook: while the file this environment variable names does not exist, the
/// background load waits before reading the body (at most [`GATE_WAIT`], and not once a
/// stop is asked for), so a test can watch the tracker serve during a load that is
/// deterministically not finished. Unset in production.
pub const LOAD_GATE_ENV: &str = "SHOAL_TEST_LOAD_GATE";
const GATE_WAIT: Duration = Duration::from_secs(120);

/// Loads the snapshot at `file`'s path, and the change sections of its log, into the live
/// `store`, which has been serving since the start: a peer already heard from at an
/// address keeps its entry (it is newer than the file), completed counts are added (the
/// store counted only completions since it started empty), a bounded chunk of peers per
/// shard lock. On error the file is moved aside; what was merged until then came from
/// whole blocks that passed their checksum and stays (the store is live: it cannot be
/// dropped).
///
/// Once `stop` is set, the rest is merged only for the torrents announced since the start
/// (the others stay in the file as they are); with `follow`, the file then becomes the
/// base this process's change sections follow, so the final one holds exactly those.
pub fn load(file: &StateFile, store: &Swarms, stop: &AtomicBool, follow: bool) -> Restored {
    let path = file.path();
    if let Some(gate) = std::env::var_os(LOAD_GATE_ENV) {
        let until = Instant::now() + GATE_WAIT;
        while !Path::new(&gate).exists() && !stop.load(Ordering::Relaxed) && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let started = Instant::now();
    let (now, unix) = (shoal_swarm::clock::now(), unix_now());
    let mut narrowing = Narrowing::new(stop, store);
    let loaded = load_chain(path, store, (now, unix, Merge::AddCompleted), |h| {
        narrowing.wants(h)
    });
    match loaded {
        Ok((summary, log)) => {
            let how = if narrowing.narrowed() {
                " (in the background, serving meanwhile; stopped before the end: the rest \
                 only for torrents announced since the start)"
            } else {
                " (in the background, serving meanwhile)"
            };
            log_restored(path, how, started, &summary, unix);
            if follow {
                *file.chain.lock() = Some(Chain {
                    base: changes::base_id(path).map(|(b, _)| b).unwrap_or_default(),
                    base_len: std::fs::metadata(path).map_or(0, |m| m.len()),
                    since: 1,
                    log_len: log.len,
                });
            }
            if !narrowing.narrowed() {
                store.clean(shoal_swarm::clock::now());
            }
            Restored::Loaded(summary)
        }
        Err(e) => move_aside(path, &e, "serving what was loaded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::process_alive;
    use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
    use shoal_swarm::Announce;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("shoal-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn announce(store: &Swarms, peer: u8) {
        let mut out: Vec<CompactPeerV4> = Vec::new();
        store.announce_accounted(
            &Announce {
                info_hash: InfoHash([1; 20]),
                peer_id: PeerId([peer; 20]),
                addr: CompactPeerV4::new([127, 0, 0, peer].into(), 1000),
                event: AnnounceEvent::Started,
                left: 1,
                numwant: 0,
            },
            shoal_swarm::clock::now(),
            &mut out,
            None,
        );
    }

    /// A store where peers `peers` announced torrent 1.
    fn store_of(peers: &[u8]) -> Swarms {
        let store = Swarms::Open(Store::new(StoreConfig::default()));
        for &p in peers {
            announce(&store, p);
        }
        store
    }

    #[test]
    fn write_then_restore_and_nothing_left_behind() {
        let d = dir("rt");
        let path = d.join("state");
        let store = store_of(&[1, 2]);
        let state = StateFile::new(path.clone(), [5; 16]);
        state.write(&store, true).unwrap();
        assert!(state.last_written_unix() > 0);
        let (restored, how) = restore::<()>(&path, StoreConfig::default());
        match how {
            Restored::Loaded(s) => {
                assert_eq!(s.peers, 2);
                assert_eq!(s.header.key, vec![5; 16]);
                assert!(s.header.is_final);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(restored.scrape(&InfoHash([1; 20])).leechers, 2);
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["state"], "no temporary file left");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_periodic_snapshot_gives_way_to_the_final_one() {
        let d = dir("stop");
        let path = d.join("state");
        let store = store_of(&[1, 2, 3]);
        let state = StateFile::new(path.clone(), [1; 16]);
        state.write(&store, false).unwrap();
        state.stopping.store(true, Ordering::Relaxed);
        let e = state.write(&store_of(&[4]), false).unwrap_err();
        assert!(StateFile::given_up(&e), "{e:#}");
        // The file is the last whole snapshot, and no temporary file is left.
        let (restored, _) = restore::<()>(&path, StoreConfig::default());
        assert_eq!(restored.scrape(&InfoHash([1; 20])).leechers, 3);
        state.write(&store, true).unwrap();
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["state"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn damaged_file_is_moved_aside_and_the_store_is_empty() {
        let d = dir("bad");
        let path = d.join("state");
        std::fs::write(&path, b"SHOALSNP but then garbage").unwrap();
        let (store, how) = restore::<()>(&path, StoreConfig::default());
        let Restored::MovedAside { error, moved_to } = how else {
            panic!("{how:?}")
        };
        assert!(
            error.contains("version") || error.contains("truncated"),
            "{error}"
        );
        let moved_to = moved_to.unwrap();
        assert!(moved_to.to_string_lossy().contains("state.corrupt-"));
        assert_eq!(
            std::fs::read(&moved_to).unwrap(),
            b"SHOALSNP but then garbage"
        );
        assert!(!path.exists());
        assert_eq!(store.clean(0).torrents, 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn final_snapshot_of_the_predecessor_is_merged_not_another() {
        let d = dir("merge");
        let path = d.join("state");
        let old = store_of(&[1, 2]);
        let live = store_of(&[3]);
        let mut st = StateFile::new(path.clone(), [0; 16]);
        st.pid = 4242;
        st.write(&old, false).unwrap();
        assert!(st.merge_final_of(&live, 4242).is_none(), "not final yet");
        st.write(&old, true).unwrap();
        assert!(st.merge_final_of(&live, 999).is_none(), "someone else's");
        st.merge_final_of(&live, 4242).unwrap().unwrap();
        assert_eq!(live.scrape(&InfoHash([1; 20])).leechers, 3);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn open_reads_the_header_and_load_merges_under_the_live_store() {
        let d = dir("open");
        let path = d.join("state");
        let st = StateFile::new(path.clone(), [7; 16]);
        st.write(&store_of(&[1, 2]), true).unwrap();
        let opened = open(&path);
        assert!(matches!(opened, Restored::Loading(_)), "{opened:?}");
        assert_eq!(opened.key(), Some([7; 16]));
        // Peer 2 announced since the start, peer 3 is new: both kept, 1 and 2 once each.
        let live = store_of(&[2, 3]);
        st.loading.store(true, Ordering::Relaxed);
        assert!(st.write(&live, false).is_err(), "no snapshot while loading");
        let stop = AtomicBool::new(false);
        assert!(matches!(
            load(&st, &live, &stop, true),
            Restored::Loaded(s) if s.peers == 2
        ));
        assert_eq!(live.scrape(&InfoHash([1; 20])).leechers, 3);

        // A body damaged after a good header: moved aside by the load, the live store
        // keeps what it has.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(matches!(open(&path), Restored::Loading(_)));
        let Restored::MovedAside { moved_to, .. } = load(&st, &live, &stop, true) else {
            panic!("not moved aside")
        };
        assert!(moved_to.is_some() && !path.exists());
        assert_eq!(live.scrape(&InfoHash([1; 20])).leechers, 3);
        assert!(matches!(open(&path), Restored::Missing));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn liveness_of_processes() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(0));
        assert!(!process_alive(u32::MAX));
    }
}
