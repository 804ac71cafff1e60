//! The swarm store on disk: the snapshot file, restoring it at start, writing it
//! periodically and on exit, and the hand-over between an old and a new process during an
//! upgrade. A crate of its own (the server only starts and stops it) because it is the
//! store's durable side, not glue: the tracker core stays free of files and processes.
//!
//! The format lives in `shoal_swarm::snapshot`; this crate owns the file and the one
//! background task that writes it, [`Snapshots`]: [`Snapshots::start`] spawns the writer
//! thread, [`Snapshots::stop`] joins it and writes the final snapshot. A snapshot is
//! written to `FILE.tmp-<pid>`, synced, and renamed over `FILE`, so a reader (or a crash)
//! only ever sees a whole snapshot. A file that cannot be restored is moved aside to
//! `FILE.corrupt-<unix time>` and the tracker starts empty: refusing to start would turn a
//! damaged file into an outage.
//!
//! Between whole snapshots the file is kept current by a log of change sections
//! (`FILE.changes`, see `changes`): every `state.changes_interval` seconds what was
//! announced since the last section is appended (each announced torrent's new peers, its
//! departures, its count), and the final snapshot at exit is such a section, so a stop
//! writes seconds of announces rather than the store. A restart reads the newest records
//! first.
//!
//! Start-up does not wait for the snapshot: [`open`] reads only its header (the
//! connection-id key, the hand-over's writer), the tracker binds and serves on an empty
//! store, and the writer thread first [`load`]s the body into the live store (a peer heard
//! from meanwhile keeps its entry, completed counts are added). Until that load is done no
//! snapshot is written (it would replace the file with the part loaded so far); a stop
//! during the load merges the rest for the torrents announced since the start only, then
//! appends the final section (those torrents, whole), so neither the file's unloaded part
//! nor what was announced meanwhile is lost, and the stop does not wait for the load.
//!
//! Upgrade hand-over (see `docs/operations.md`): the new process starts beside the old one
//! on the same `SO_REUSEPORT` ports, restores the old one's latest periodic snapshot (which
//! carries the connection-id key, so clients' ids stay valid), and serves. While the old
//! process runs, the new one writes no snapshot of its own (both share the file); it
//! watches the file until the old process, stopped with SIGTERM, writes its *final*
//! snapshot (a section, or whole), merges the file and its log into its live store, and
//! from then on snapshots as usual. Only
//! peers that announced to the old process after its last periodic snapshot are in the
//! final one, and the merge adds them: no swarm is lost. If the predecessor is gone or the
//! wait exceeds `state.handover_timeout`, the new process carries on alone.

#![forbid(unsafe_code)]

mod changes;
mod file;
mod sink;
mod writer;

pub use file::{load, open, restore, Restored, StateFile};
pub use writer::{process_alive, Schedule, Snapshots};
