//! What a snapshot is written through, between its `BufWriter` and the file: a periodic
//! snapshot given up when the process stops ([`Abortable`]), and the file's writeback
//! started as it goes ([`EarlyWriteback`]).

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};

/// A writer that fails once `abort` is set (checked at each write it is handed: a
/// snapshot's `BufWriter` hands one a megabyte).
pub(crate) struct Abortable<'a, W> {
    pub(crate) inner: W,
    pub(crate) abort: &'a AtomicBool,
}

/// What a periodic snapshot given up for the final one fails with.
pub(crate) const GIVEN_UP: &str = "given up: the process stops and writes its final snapshot";

impl<W: Write> Write for Abortable<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.abort.load(Ordering::Relaxed) {
            return Err(io::Error::other(GIVEN_UP));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Bytes written between two hand-overs to the kernel's writeback.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// A file whose written pages are handed to the kernel's writeback every 32 MiB, without
/// waiting for it, so that the `fsync` closing a snapshot waits for the last part only
/// rather than for the whole file at once (930 MB at 30 million peers: 0.5 s of `fsync`
/// on this project's VM, on the path of every SIGTERM).
pub(crate) struct EarlyWriteback {
    file: File,
    written: u64,
    handed: u64,
}

impl EarlyWriteback {
    pub(crate) fn new(file: File) -> Self {
        Self {
            file,
            written: 0,
            handed: 0,
        }
    }

    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

impl Write for EarlyWriteback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.handed >= WRITEBACK_EVERY {
            // On Linux, DONTNEED starts writeback of the range's dirty pages (not waiting
            // for it) and drops those already clean: the pages just written stay cached.
            // Advice only: an error changes nothing but the fsync's share.
            let _ = posix_fadvise(
                &self.file,
                self.handed as i64,
                (self.written - self.handed) as i64,
                PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
            self.handed = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}
