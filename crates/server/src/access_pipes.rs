//! The access-list pipes (`[access_list] fifo_add`, `fifo_delete`; opentracker's
//! `access.fifo_add`, `access.fifo_delete`): named pipes whose lines, one hex info hash each,
//! list or unlist a torrent in the list in force, without reading the list file again
//! (a list of millions takes seconds to read; a DMCA removal should not).
//!
//! Each pipe has a thread. The pipe is opened read-write and non-blocking: read-write so
//! that the open never waits for a writer and the last writer closing is no end of file
//! (writers come and go: `echo HASH > pipe`), non-blocking so that the thread wakes every
//! [`POLL`] to see the shutdown flag. The threads are started after privileges are
//! dropped, so a pipe they create belongs to the user the tracker runs as.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use shoal_opentracker::fifo::{parse_line, Line, Lines};
use shoal_proto::InfoHash;
use shoal_tracker::Core;

use crate::config::Config;

/// How often a pipe's thread looks at the shutdown flag.
const POLL: Duration = Duration::from_millis(250);

/// Longest line kept: an info hash and a comment. Only the start of a longer one is read.
const MAX_LINE: usize = 1024;

/// Creates the configured pipes that are missing and starts a thread reading each. The
/// threads end by themselves within [`POLL`] of `shutdown`.
pub fn start(config: &Config, core: &Arc<Core>, shutdown: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let list = &config.access_list;
    for (path, add) in [(&list.fifo_add, true), (&list.fifo_delete, false)] {
        if path.as_os_str().is_empty() {
            continue;
        }
        let file = open(path)?;
        let (core, shutdown, owned) = (core.clone(), shutdown.clone(), path.clone());
        std::thread::Builder::new()
            .name(if add { "fifo-add" } else { "fifo-delete" }.into())
            .spawn(move || read(file, &owned, add, &core, &shutdown))
            .context("spawning an access-list pipe's thread")?;
        tracing::info!(
            "access list: reading {} from the pipe {}",
            if add { "additions" } else { "removals" },
            path.display()
        );
    }
    Ok(())
}

/// Opens the pipe at `path`, creating it if there is nothing there.
fn open(path: &Path) -> anyhow::Result<std::fs::File> {
    match std::fs::metadata(path) {
        Ok(m) if !m.file_type().is_fifo() => {
            bail!(
                "{} is not a named pipe (remove it, or name another path)",
                path.display()
            )
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o620))
                .with_context(|| format!("creating the pipe {}", path.display()))?;
        }
        Err(e) => return Err(e).with_context(|| format!("looking at {}", path.display())),
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening the pipe {}", path.display()))
}

fn read(mut file: std::fs::File, path: &Path, add: bool, core: &Core, shutdown: &AtomicBool) {
    let (mut lines, mut buf) = (Lines::new(MAX_LINE), [0u8; 4096]);
    let timeout = PollTimeout::try_from(POLL).unwrap_or(PollTimeout::MAX);
    while !shutdown.load(Ordering::Relaxed) {
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, timeout).unwrap_or(0) == 0 {
            continue;
        }
        match file.read(&mut buf) {
            Ok(n) => lines.feed(&buf[..n], |line| apply(line, add, core, path)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => {
                let path = path.display();
                return tracing::error!(
                    "access list: reading the pipe {path}: {e}; no longer read"
                );
            }
        }
    }
}

fn apply(line: &[u8], add: bool, core: &Core, path: &Path) {
    let hash = match parse_line(line) {
        Line::Hash(h) => InfoHash(h),
        Line::Blank => return,
        Line::Bad => {
            tracing::warn!(
                "access list: pipe {}: skipped a line that is no hex info hash: {:?}",
                path.display(),
                String::from_utf8_lossy(&line[..line.len().min(80)])
            );
            return;
        }
    };
    match core.policy().change_access_list(hash, add) {
        Ok(changed) => tracing::info!(
            "access list: {} {hash} (pipe){}",
            if add { "added" } else { "removed" },
            if changed { "" } else { ", no change" }
        ),
        Err(e) => tracing::warn!("access list: pipe {}: {e:#}", path.display()),
    }
}
