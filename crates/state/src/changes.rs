//! The change log beside the snapshot: `FILE.changes`, a run of change sections appended
//! between two whole snapshots, so that the file on disk stays current without the store
//! being written whole, and a stop writes only what changed since the last section.
//!
//! A section (`shoal_swarm::snapshot`'s format, with its base named in the header) holds,
//! for every torrent announced since the section before it (or since its base was begun),
//! the peers announced since and those that said `stopped` since (departures), and the
//! torrent's completed count; a restart reads the newest records first (the last section,
//! then the ones before, then the base): a peer read once keeps what it has, a departure
//! keeps older records from its address, the count comes from the newest record. The
//! state file's owner appends one every `state.changes_interval` seconds (sooner while
//! one takes longer than the writer's budget, `writer::next_gap`) and one, marked
//! final, at exit; a whole snapshot (every `state.snapshot_interval` seconds) starts the
//! chain over and removes the log.
//!
//! An append is written at the end of the log, synced, and only then counted: one that
//! fails is cut off again, and one torn by a crash fails its checksum at the next start,
//! which reads the sections before it and cuts it off before appending. Sections that name
//! another base (a crash between a whole snapshot's rename and the log's removal) are not
//! read.
//!
//! A torrent dropped from the store (empty past `store.torrent_ttl`) is in no later
//! section: its peers left (departures) or expired, so only its completed count could come
//! back from an older record. A chain whose last section is older than `torrent_ttl` is
//! written whole instead all the same (see [`Chain::stale`]), so no record outlives the
//! store's own memory of its torrent. Peers that expire need nothing: a restore leaves out
//! every peer whose saved lifetime ran out.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use shoal_proto::InfoHash;
use shoal_swarm::snapshot::{read_header, Gone, Merge, Take};
use shoal_swarm::{BaseId, SnapshotError, SnapshotHeader, SnapshotSummary};
use shoal_tracker::swarms::Swarms;

use crate::sink::Abortable;

pub(crate) use shoal_tracker::on_store;

/// `FILE.changes` for the snapshot `FILE`.
pub(crate) fn log_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".changes");
    PathBuf::from(s)
}

/// Where the file on disk stands for the process that appends to it: the whole snapshot
/// its sections apply to, the store second from which the next section must take
/// torrents, and how much of the log is whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) base: BaseId,
    /// Bytes of the whole snapshot.
    pub(crate) base_len: u64,
    pub(crate) since: u32,
    pub(crate) log_len: u64,
}

/// The log may grow to its base's size (and at least this) before the next periodic write
/// is a whole snapshot: a restart reads at most about twice the store, and keeps the
/// log's torrents in memory meanwhile; a store that grows is written whole each time it
/// has about doubled.
const LOG_FLOOR: u64 = 256 << 20;

impl Chain {
    /// Whether the log has grown enough that the next periodic write should be whole.
    pub(crate) fn full(&self) -> bool {
        self.log_len > self.base_len.max(LOG_FLOOR)
    }

    /// Whether a torrent announced at `since` could have been dropped from the store by
    /// now (`torrent_ttl` seconds empty): the next write must then be whole.
    pub(crate) fn stale(&self, now: u32, torrent_ttl: u32) -> bool {
        now.saturating_sub(self.since) >= torrent_ttl
    }
}

/// The identity of the whole snapshot at `path`: its header's writer and time, and the
/// checksum in its last four bytes (checked when the body is read).
pub(crate) fn base_id(path: &Path) -> io::Result<(BaseId, SnapshotHeader)> {
    base_id_of(&mut File::open(path)?)
}

/// [`base_id`] of an open file (left at its start), so that what is then read of it is
/// the snapshot the identity is of, even if another process renames a new one over it.
pub(crate) fn base_id_of(file: &mut File) -> io::Result<(BaseId, SnapshotHeader)> {
    file.seek(SeekFrom::Start(0))?;
    let header = read_header(BufReader::new(&mut *file)).map_err(io::Error::other)?;
    file.seek(SeekFrom::End(-4))?;
    let mut crc = [0u8; 4];
    file.read_exact(&mut crc)?;
    file.seek(SeekFrom::Start(0))?;
    let id = BaseId {
        writer: header.writer,
        written_unix: header.written_unix,
        crc: u32::from_le_bytes(crc),
    };
    Ok((id, header))
}

/// The header of the last section of the log at `log` for the base `base`, walking the
/// sections' frames only (no checksums: this runs before the front ends bind; the load
/// checks everything). `None` if the log is missing or holds no section of that base.
pub(crate) fn last_header(log: &Path, base: BaseId) -> Option<SnapshotHeader> {
    let file = File::open(log).ok()?;
    let end = file.metadata().ok()?.len();
    let mut r = BufReader::with_capacity(64 << 10, file);
    let mut last = None;
    let mut at = 0u64;
    while at < end {
        let header = read_header(&mut r).ok()?;
        if header.base != Some(base) {
            break;
        }
        // Blocks: len:u32 torrents:u32 crc:u32 body[len], until a len of 0; then the
        // trailer's counts (16 bytes) and checksum (4).
        loop {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).ok()?;
            match u32::from_le_bytes(len) {
                0 => break,
                len => {
                    r.seek_relative(8 + i64::from(len)).ok()?;
                }
            }
        }
        r.seek_relative(20).ok()?;
        at = r.stream_position().ok()?;
        if at > end {
            break;
        }
        last = Some(header);
    }
    last
}

/// A log as read: its whole sections for one base, in order.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) headers: Vec<SnapshotHeader>,
    /// Where each section begins.
    offsets: Vec<u64>,
    /// Bytes of the log that hold whole sections of this base (what follows is cut off
    /// before the next append).
    pub(crate) len: u64,
    /// For each torrent in some section, the last section that has it (sections count
    /// from 1): keyed by the info hash's first eight bytes (SHA-1 output: two torrents
    /// that share them are as likely as a collision of random 64-bit numbers), half the
    /// memory of whole hashes.
    newest: HashMap<u64, u32>,
}

fn key(info_hash: &InfoHash) -> u64 {
    u64::from_le_bytes(info_hash.0[..8].try_into().expect("8 bytes"))
}

impl Log {
    /// What to take of `info_hash`'s record in the base (0) or in section `index`: its
    /// peers, and its completed count only from the last record (each carries the
    /// torrent's total). Every section record merges (peers since, departures), none
    /// replaces: the older records are all read, after it.
    pub(crate) fn take(&self, info_hash: &InfoHash, index: u32) -> Take {
        match self.newest.get(&key(info_hash)) {
            Some(&last) if index != last => Take::Peers,
            _ => Take::Whole,
        }
    }

    /// The last section's header, if there is one.
    pub(crate) fn last(&self) -> Option<&SnapshotHeader> {
        self.headers.last()
    }
}

/// A reader that counts what went through it.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads the log at `log` for the base `base`, checking every section (checksums) without
/// merging any, into `store`'s type (nothing is inserted). A missing log is an empty one.
pub(crate) fn scan(log: &Path, base: BaseId, store: &Swarms) -> io::Result<Log> {
    let file = match File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Log::default()),
        Err(e) => return Err(e),
    };
    let end = file.metadata()?.len();
    let mut r = Counted {
        inner: BufReader::with_capacity(1 << 20, file),
        read: 0,
    };
    let mut out = Log::default();
    while r.read < end {
        let index = out.headers.len() as u32 + 1;
        let begins = r.read;
        let mut seen = Vec::new();
        let times = (0, 0, Merge::KeepHigher);
        let section = on_store!(store, s => s.restore_filtered(&mut r, times, &mut Gone::new(), |h, _| {
            seen.push(key(h));
            Take::Nothing
        }));
        match section {
            Ok(s) if s.header.base == Some(base) => {
                for k in seen {
                    out.newest.insert(k, index);
                }
                out.headers.push(s.header);
                out.offsets.push(begins);
                out.len = r.read;
            }
            Ok(_) => {
                tracing::warn!(
                    "{}: a change section for another snapshot (a stop between a snapshot's \
                     rename and the log's removal?): not read, cut off at the next append",
                    log.display()
                );
                break;
            }
            Err(e) => {
                tracing::warn!(
                    "{}: section {} cannot be read ({e}): the {} before it are, the rest is \
                     cut off at the next append",
                    log.display(),
                    index,
                    out.headers.len()
                );
                break;
            }
        }
    }
    Ok(out)
}

/// Which records a load merges once a stop is asked for: only those of torrents this
/// process heard of (the others stay in the file, which the final section then follows).
pub(crate) struct Narrowing<'a> {
    stop: &'a AtomicBool,
    store: &'a Swarms,
    heard: Option<HashSet<InfoHash>>,
}

impl<'a> Narrowing<'a> {
    pub(crate) fn new(stop: &'a AtomicBool, store: &'a Swarms) -> Self {
        Self {
            stop,
            store,
            heard: None,
        }
    }

    /// Whether the load should still merge `info_hash`'s record.
    pub(crate) fn wants(&mut self, info_hash: &InfoHash) -> bool {
        if self.heard.is_none() {
            if !self.stop.load(Ordering::Relaxed) {
                return true;
            }
            // The front ends have stopped: nothing is announced from here on.
            let heard = on_store!(self.store, s => s.announced_since(1));
            tracing::info!(
                "stopping during the load: merging the rest only for the {} torrents \
                 announced since the start",
                heard.len()
            );
            self.heard = Some(heard);
        }
        self.heard.as_ref().is_some_and(|h| h.contains(info_hash))
    }

    /// Whether the load was narrowed (a stop came before it was done).
    pub(crate) fn narrowed(&self) -> bool {
        self.heard.is_some()
    }
}

/// Merges the log's sections into `store`, the last first (before the base: a restore
/// reads the newest records first, see `Store::restore_filtered`), each record as
/// [`Log::take`] says and only where `wants` says so; `gone` gathers their departures.
pub(crate) fn merge(
    log_path: &Path,
    log: &Log,
    store: &Swarms,
    (times, gone): ((u32, u64, Merge), &mut Gone),
    mut wants: impl FnMut(&InfoHash) -> bool,
) -> Result<SnapshotSummary, SnapshotError> {
    let mut total = SnapshotSummary::default();
    let mut file = BufReader::with_capacity(1 << 20, File::open(log_path)?);
    for index in (1..=log.headers.len() as u32).rev() {
        let i = index as usize - 1;
        let end = log.offsets.get(i + 1).copied().unwrap_or(log.len);
        file.seek(SeekFrom::Start(log.offsets[i]))?;
        let mut r = (&mut file).take(end - log.offsets[i]);
        let s = on_store!(store, s => s.restore_filtered(&mut r, times, gone, |h, _| {
            match wants(h) {
                true => log.take(h, index),
                false => Take::Nothing,
            }
        }))?;
        total.torrents += s.torrents;
        total.torrents_skipped += s.torrents_skipped;
        total.peers += s.peers;
        total.peers_skipped += s.peers_skipped;
        total.peers_expired += s.peers_expired;
    }
    Ok(total)
}

/// Appends a change section of the torrents announced since `chain.since` to the log at
/// `log_path`: cut to `chain.log_len` first, the section written (given up once `abort`
/// is set) and synced; on error the log is cut back. Returns the section's summary and
/// the log.
pub(crate) fn append(
    log_path: &Path,
    chain: &Chain,
    header: &SnapshotHeader,
    store: &Swarms,
    (now, encoders): (u32, usize),
    abort: &AtomicBool,
) -> anyhow::Result<(SnapshotSummary, File)> {
    use anyhow::Context;
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let cut = |f: &File| f.set_len(chain.log_len);
    cut(&file).with_context(|| format!("cutting {}", log_path.display()))?;
    file.seek(SeekFrom::Start(chain.log_len))?;
    let keep = file.try_clone()?;
    let result = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, Abortable { inner: file, abort });
        let summary = on_store!(store, s => s.write_snapshot_since(&mut w, header, now, encoders, chain.since))?;
        io::Write::flush(&mut w)?;
        drop(w);
        keep.sync_all()?;
        io::Result::Ok(summary)
    })();
    match result {
        Ok(summary) => Ok((summary, keep)),
        Err(e) => {
            let _ = cut(&keep);
            Err(anyhow::Error::new(e).context(format!("appending to {}", log_path.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use shoal_proto::{AnnounceEvent, CompactPeerV4, InfoHash, PeerId};
    use shoal_swarm::{clock, Announce, Store, StoreConfig};
    use shoal_tracker::swarms::Swarms;

    use crate::file::{load, open, Restored, StateFile};

    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("shoal-changes-{name}-"))
            .tempdir()
            .unwrap()
    }

    fn store() -> Swarms {
        Swarms::Open(Store::new(StoreConfig::default()))
    }

    /// A directory, the state file's path in it, a live store and its state file.
    fn fixture(name: &str) -> (tempfile::TempDir, std::path::PathBuf, Swarms, StateFile) {
        let d = dir(name);
        let path = d.path().join("state");
        let st = StateFile::new(path.clone(), [7; 16]);
        (d, path, store(), st)
    }

    /// [`fixture`], where torrent 1 is in the whole snapshot and torrent 2 in a section.
    fn one_section(name: &str) -> (tempfile::TempDir, std::path::PathBuf, Swarms, StateFile) {
        let (d, path, live, st) = fixture(name);
        announce(&live, 1, 1, AnnounceEvent::Started);
        st.write(&live, false).unwrap();
        announce(&live, 2, 2, AnnounceEvent::Started);
        st.append_changes(&live, false).unwrap().unwrap();
        (d, path, live, st)
    }

    /// Peer `peer` (a seeder when even) announces `event` on torrent `torrent`.
    fn announce(store: &Swarms, torrent: u8, peer: u8, event: AnnounceEvent) {
        let addr = CompactPeerV4::new([127, 0, 0, peer].into(), 1000);
        announce_as(
            store,
            (torrent, PeerId([peer; 20]), addr),
            event,
            u64::from(peer % 2),
        );
    }

    fn announce_as(
        store: &Swarms,
        (torrent, peer_id, addr): (u8, PeerId, CompactPeerV4),
        event: AnnounceEvent,
        left: u64,
    ) {
        let ann = Announce {
            info_hash: InfoHash([torrent; 20]),
            peer_id,
            addr,
            event,
            left,
            numwant: 0,
        };
        let out = &mut Vec::<CompactPeerV4>::new();
        store.announce_accounted(&ann, clock::now(), out, None);
    }

    /// A torrent (its hash's byte), its completed count, its peers (id, address, seeder).
    type Row = (u8, u32, Vec<(PeerId, [u8; 6], bool)>);

    /// Each torrent's row, sorted.
    fn contents(store: &Swarms) -> Vec<Row> {
        (0..=u8::MAX)
            .filter_map(|t| {
                let p = store.torrent_peers(&InfoHash([t; 20]))?;
                let mut peers: Vec<_> =
                    p.v4.iter()
                        .map(|p| (p.peer_id, p.addr.0, p.seeder))
                        .collect();
                peers.sort();
                Some((t, p.stats.completed, peers))
            })
            .collect()
    }

    /// A new process's view of the file: opened, then loaded in full.
    fn reload(path: &std::path::Path) -> (Swarms, Restored, StateFile) {
        let opened = open(path);
        let again = store();
        let st = StateFile::new(path.to_path_buf(), [7; 16]);
        let loaded = load(&st, &again, &AtomicBool::new(false), true);
        assert!(matches!(loaded, Restored::Loaded(_)), "{loaded:?}");
        (again, opened, st)
    }

    #[test]
    fn sections_follow_the_whole_snapshot_and_a_restart_reads_each_torrent_from_the_newest() {
        let (_dir, path, live, st) = fixture("chain");
        assert!(
            st.append_changes(&live, false).unwrap().is_none(),
            "nothing to follow yet"
        );
        for peer in 1..=4 {
            announce(&live, 1, peer, AnnounceEvent::Started);
        }
        st.write(&live, false).unwrap();
        assert!(!st.log_path().exists());
        announce(&live, 2, 5, AnnounceEvent::Started);
        let first = st.append_changes(&live, false).unwrap().unwrap();
        assert!(first.torrents >= 1 && first.header.base.is_some());
        // After the first section: peer 1 leaves torrent 1, peer 2 completes it.
        announce(&live, 1, 1, AnnounceEvent::Stopped);
        announce(&live, 1, 3, AnnounceEvent::Completed);
        let last = st.append_changes(&live, true).unwrap().unwrap();
        assert!(last.header.is_final);

        let (again, opened, _) = reload(&path);
        let Restored::Loading(h) = &opened else {
            panic!("{opened:?}")
        };
        assert!(h.is_final, "the last section is the final word");
        assert_eq!(opened.key(), Some([7; 16]));
        assert_eq!(contents(&again), contents(&live));
        assert_eq!(
            contents(&again)[0].2.len(),
            3,
            "the stopped peer is not back"
        );
        assert_eq!(contents(&again)[0].1, 1, "the completion counted");
    }

    #[test]
    fn a_torn_section_is_cut_off_and_the_sections_before_it_are_read() {
        let (_dir, path, live, st) = one_section("torn");
        let whole = std::fs::metadata(st.log_path()).unwrap().len();
        // A second section, torn by a crash halfway.
        announce(&live, 3, 3, AnnounceEvent::Started);
        st.append_changes(&live, false).unwrap().unwrap();
        let before = std::fs::read(st.log_path()).unwrap();
        let torn = whole + (before.len() as u64 - whole) / 2;
        std::fs::write(st.log_path(), &before[..torn as usize]).unwrap();

        let (again, _, st2) = reload(&path);
        let torrents: Vec<u8> = contents(&again).iter().map(|c| c.0).collect();
        assert_eq!(torrents, [1, 2], "the whole section read, the torn one not");
        // The next section goes where the torn one began.
        announce(&again, 4, 4, AnnounceEvent::Started);
        st2.append_changes(&again, true).unwrap().unwrap();
        let (third, _, _) = reload(&path);
        assert_eq!(contents(&third), contents(&again));
        let after = std::fs::read(st2.log_path()).unwrap();
        assert_eq!(after[..whole as usize], before[..whole as usize]);
        assert_ne!(
            after[whole as usize..],
            before[whole as usize..torn as usize]
        );
    }

    #[test]
    fn a_large_swarm_is_written_to_a_section_as_its_recent_peers_and_merged_on_restore() {
        let (_dir, path, live, st) = fixture("large");
        let announce_n = |store: &Swarms, n: u32, event| {
            let [a, b, c, e] = n.to_be_bytes();
            let mut id = [0xAB; 20];
            id[..4].copy_from_slice(&n.to_be_bytes());
            let addr = CompactPeerV4::new([10 + a, b, c, e].into(), 1000);
            announce_as(store, (9, PeerId(id), addr), event, 1);
        };
        let large = 70_000;
        for n in 0..large {
            announce_n(&live, n, AnnounceEvent::Started);
        }
        // The whole snapshot a store second after the swarm's announces: the section
        // takes what was announced from that second on.
        let second = clock::now();
        while clock::now() == second {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        st.write(&live, false).unwrap();
        announce_n(&live, large, AnnounceEvent::Started);
        announce_n(&live, large + 1, AnnounceEvent::Completed);
        let section = st.append_changes(&live, true).unwrap().unwrap();
        assert_eq!(
            (section.torrents, section.peers),
            (2, 2),
            "the two new peers (a record for each chunk of 65,536 looked at), not the swarm"
        );
        let (again, _, _) = reload(&path);
        assert_eq!(contents(&again), contents(&live));
        assert_eq!(again.scrape(&InfoHash([9; 20])).completed, 1);
    }

    #[test]
    fn a_chain_older_than_the_torrent_ttl_is_stale() {
        let chain = super::Chain {
            base: Default::default(),
            base_len: 1 << 30,
            since: 5,
            log_len: 0,
        };
        assert!(!chain.stale(5 + 3599, 3600));
        assert!(chain.stale(5 + 3600, 3600));
        assert!(!chain.full());
        let grown = |log_len, base_len| super::Chain {
            log_len,
            base_len,
            ..chain
        };
        assert!(!grown(1 << 30, 1 << 30).full());
        assert!(grown((1 << 30) + 1, 1 << 30).full());
        assert!(
            !grown(256 << 20, 0).full(),
            "a small store's log may reach 256 MiB"
        );
    }

    #[test]
    fn a_log_that_follows_another_snapshot_is_not_read() {
        let (_dir, path, _, st) = one_section("other");
        let old_log = std::fs::read(st.log_path()).unwrap();
        // A new whole snapshot of another store, then the old log put back (as a stop
        // between the rename and the log's removal would leave it).
        let other = store();
        announce(&other, 9, 9, AnnounceEvent::Started);
        st.write(&other, false).unwrap();
        std::fs::write(st.log_path(), old_log).unwrap();
        let (again, opened, _) = reload(&path);
        assert!(matches!(&opened, Restored::Loading(h) if h.base.is_none()));
        assert_eq!(contents(&again), contents(&other));
    }

    #[test]
    fn a_stop_during_the_load_merges_the_rest_for_announced_torrents_only() {
        let (_dir, path, live, st) = fixture("narrow");
        for t in 1..=3 {
            for peer in 1..=3 {
                announce(&live, t, peer, AnnounceEvent::Started);
            }
        }
        st.write(&live, true).unwrap();
        // The next process: torrent 2 gains a peer, then the stop comes before the load.
        let next = store();
        announce(&next, 2, 7, AnnounceEvent::Started);
        let st2 = StateFile::new(path.clone(), [7; 16]);
        let stop = AtomicBool::new(true);
        assert!(matches!(
            load(&st2, &next, &stop, true),
            Restored::Loaded(_)
        ));
        let merged: Vec<u8> = contents(&next).iter().map(|c| c.0).collect();
        assert_eq!(merged, [2], "only the torrent announced since the start");
        let section = st2.append_changes(&next, true).unwrap().unwrap();
        assert_eq!((section.torrents, section.peers), (1, 4));
        // Nothing lost: the file's torrents and the new peer.
        let (again, _, _) = reload(&path);
        announce(&live, 2, 7, AnnounceEvent::Started);
        assert_eq!(contents(&again), contents(&live));
        assert!(stop.load(Ordering::Relaxed));
    }
}
