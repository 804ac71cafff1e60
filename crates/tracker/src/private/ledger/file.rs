//! The ledger's file: what carries the accounting over a restart. Written at shutdown beside
//! the state file (`<state file>.ledger`), read at the next start.
//!
//! It holds the per-peer records (each client's counters at its last announce, so that its
//! first announce after the restart is compared with them rather than taken as a new
//! baseline), the pending sums that the final database write could not commit (the
//! database was down at shutdown), and the batch whose write failed with its id (it may
//! have been committed: it is written again under the same id, which the database applies
//! at most once). The tracker deletes the file once what it restored is in the database,
//! so a crash after that cannot count it twice.
//!
//! A fixed little-endian layout of fixed-size records, written to a temporary file and
//! renamed into place: a million peers take 70 MB and a few hundred milliseconds, and a
//! truncated or foreign file is refused whole (the tracker then starts without it and
//! says so) rather than half-read.
//!
//! ```text
//! "SHOALLDG" | version u32 = 1 | saved at (Unix seconds) u64
//! peers u64   | per peer:  user u64, torrent u64, peer id [20], uploaded u64, downloaded u64,
//!             |            seconds since its last announce u32, flags u8 (1 seeding, 2 started)
//! pending u64 | per sum:   user u64, torrent u64, uploaded, downloaded, uploaded raw,
//!             |            downloaded raw, seed seconds, leech seconds (u64 each), completed u8,
//!             |            seconds since the snatch u32 (u32::MAX: none; not in version 1)
//! id length u8, id bytes (the unsure batch's; length 0: none) | its sums u64 | sums as above
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use shoal_proto::PeerId;

use crate::private::credit::{Delta, PeerRecord};
use crate::private::ledger::SavedPeer;

const MAGIC: &[u8; 8] = b"SHOALLDG";
const VERSION: u32 = 2;
const PEER_BYTES: usize = 8 + 8 + 20 + 8 + 8 + 4 + 1;
/// A sum's bytes in version 1 (the snatch's age came with version 2).
const DELTA_BYTES_V1: usize = 8 * 8 + 1;
const DELTA_BYTES: usize = DELTA_BYTES_V1 + 4;

/// What the file carries.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LedgerFile {
    pub peers: Vec<SavedPeer>,
    pub pending: Vec<Delta>,
    /// The batch whose write failed, under its id (`None`: there was none).
    pub unsure: Option<(String, Vec<Delta>)>,
}

/// The ledger file that goes with `state_file`.
pub fn path_for(state_file: &Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".ledger");
    PathBuf::from(name)
}

impl LedgerFile {
    /// Writes the file (atomically: a temporary file renamed over it). `now` is the coarse
    /// clock the records' `seen` times are on, `unix` the wall clock at the same moment.
    pub fn save(&self, path: &Path, now: u32, unix: u64) -> anyhow::Result<()> {
        let mut b = Vec::with_capacity(
            300 + self.peers.len() * PEER_BYTES + self.pending.len() * DELTA_BYTES,
        );
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&unix.to_le_bytes());
        b.extend_from_slice(&(self.peers.len() as u64).to_le_bytes());
        for p in &self.peers {
            let r = &p.record;
            for v in [p.user_id, p.torrent_id] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&p.peer_id.0);
            for v in [r.uploaded, r.downloaded] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&now.saturating_sub(r.seen).to_le_bytes());
            b.push(u8::from(r.seeding) | (u8::from(r.started) << 1));
        }
        write_sums(&mut b, &self.pending, now);
        let (id, unsure) = match &self.unsure {
            Some((id, sums)) => (id.as_bytes(), sums.as_slice()),
            None => (&b""[..], &[][..]),
        };
        b.push(u8::try_from(id.len()).context("a batch id over 255 bytes")?);
        b.extend_from_slice(id);
        write_sums(&mut b, unsure, now);
        let tmp = path.with_extension("ledger.tmp");
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(&b)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }

    /// Reads the file; `None` if there is none. `now` and `unix` as in [`LedgerFile::save`]:
    /// a peer's `seen` becomes `now` minus its age, downtime included.
    pub fn load(path: &Path, now: u32, unix: u64) -> anyhow::Result<Option<Self>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Self::parse(&bytes, now, unix).map(Some)
    }

    fn parse(bytes: &[u8], now: u32, unix: u64) -> anyhow::Result<Self> {
        let mut r = Reader(bytes);
        if r.take(8)? != MAGIC {
            bail!("not a shoal ledger file");
        }
        // Version 1's file (written by a build before the snatch's time was kept) is read
        // too, so that an upgrade keeps what the old process could not write.
        let version = r.u32()?;
        if !(1..=VERSION).contains(&version) {
            bail!("a shoal ledger file of version {version}, not 1 to {VERSION}");
        }
        let downtime = unix.saturating_sub(r.u64()?);
        let n = r.count(PEER_BYTES)?;
        let mut peers = Vec::with_capacity(n);
        for _ in 0..n {
            let (user_id, torrent_id) = (r.u64()?, r.u64()?);
            let peer_id = PeerId(r.take(20)?.try_into()?);
            let (uploaded, downloaded) = (r.u64()?, r.u64()?);
            let age = u64::from(r.u32()?).saturating_add(downtime);
            let flags = r.take(1)?[0];
            peers.push(SavedPeer {
                user_id,
                torrent_id,
                peer_id,
                record: PeerRecord {
                    uploaded,
                    downloaded,
                    seen: now.saturating_sub(u32::try_from(age).unwrap_or(u32::MAX)),
                    seeding: flags & 1 != 0,
                    started: flags & 2 != 0,
                },
            });
        }
        let sums_at = Sums {
            version,
            now,
            downtime,
        };
        let pending = read_sums(&mut r, &sums_at)?;
        let id_len = usize::from(r.take(1)?[0]);
        let id = std::str::from_utf8(r.take(id_len)?)?.to_string();
        let sums = read_sums(&mut r, &sums_at)?;
        let unsure = (!id.is_empty()).then_some((id, sums));
        if !r.0.is_empty() {
            bail!("{} bytes after the last record", r.0.len());
        }
        Ok(Self {
            peers,
            pending,
            unsure,
        })
    }
}

fn write_sums(b: &mut Vec<u8>, sums: &[Delta], now: u32) {
    b.extend_from_slice(&(sums.len() as u64).to_le_bytes());
    for d in sums {
        for v in [
            d.user_id,
            d.torrent_id,
            d.uploaded,
            d.downloaded,
            d.uploaded_raw,
            d.downloaded_raw,
            d.seed_seconds,
            d.leech_seconds,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(u8::from(d.completed));
        let age = d.completed_at.map_or(u32::MAX, |at| now.saturating_sub(at));
        b.extend_from_slice(&age.to_le_bytes());
    }
}

/// How the sums of a file read: its version, and the clocks to date a snatch by.
struct Sums {
    version: u32,
    now: u32,
    downtime: u64,
}

fn read_sums(r: &mut Reader<'_>, at: &Sums) -> anyhow::Result<Vec<Delta>> {
    let n = r.count(if at.version == 1 {
        DELTA_BYTES_V1
    } else {
        DELTA_BYTES
    })?;
    let mut sums = Vec::with_capacity(n);
    for _ in 0..n {
        let mut v = [0u64; 8];
        for x in &mut v {
            *x = r.u64()?;
        }
        sums.push(Delta {
            user_id: v[0],
            torrent_id: v[1],
            uploaded: v[2],
            downloaded: v[3],
            uploaded_raw: v[4],
            downloaded_raw: v[5],
            seed_seconds: v[6],
            leech_seconds: v[7],
            completed: r.take(1)?[0] != 0,
            completed_at: match at.version {
                1 => None,
                _ => match r.u32()? {
                    u32::MAX => None,
                    age => {
                        let age = u64::from(age).saturating_add(at.downtime);
                        Some(
                            at.now
                                .saturating_sub(u32::try_from(age).unwrap_or(u32::MAX)),
                        )
                    }
                },
            },
        });
    }
    Ok(sums)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if self.0.len() < n {
            bail!("the file is truncated");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }

    fn u64(&mut self) -> anyhow::Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }

    /// A record count, checked against the bytes left (so a corrupt count allocates nothing).
    fn count(&mut self, record: usize) -> anyhow::Result<usize> {
        let n = self.u64()?;
        if n > (self.0.len() / record) as u64 {
            bail!("the file is truncated");
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LedgerFile {
        LedgerFile {
            peers: vec![SavedPeer {
                user_id: 7,
                torrent_id: 9,
                peer_id: PeerId(*b"-qB4650-abcdefghijkl"),
                record: PeerRecord {
                    uploaded: 1 << 40,
                    downloaded: 12345,
                    seen: 90,
                    seeding: true,
                    started: false,
                },
            }],
            pending: vec![Delta {
                uploaded: 5,
                downloaded: 6,
                uploaded_raw: 7,
                downloaded_raw: 8,
                seed_seconds: 9,
                leech_seconds: 10,
                completed: true,
                completed_at: Some(95),
                ..Delta::new(7, 9)
            }],
            unsure: Some(("0123456789abcdef-1".into(), vec![Delta::new(8, 9)])),
        }
    }

    #[test]
    fn round_trips_with_ages_carried_over_the_downtime() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("shoal.state"));
        assert_eq!(LedgerFile::load(&path, 0, 0).unwrap(), None);
        let saved = sample();
        // Saved at coarse second 100 (the peer announced 10 s before), Unix second 5000.
        saved.save(&path, 100, 5_000).unwrap();
        // Loaded 30 s later by a process whose clock says 3: the peer is 40 s old, so its
        // record says it was seen at 0 (saturating), not in the future.
        let loaded = LedgerFile::load(&path, 3, 5_030).unwrap().unwrap();
        assert_eq!(loaded.unsure, saved.unsure);
        assert_eq!(loaded.peers[0].record.seen, 0);
        assert_eq!(loaded.pending[0].completed_at, Some(0));
        let loaded = LedgerFile::load(&path, 1_000, 5_030).unwrap().unwrap();
        let mut expected = saved.peers[0];
        expected.record.seen = 1_000 - 40;
        assert_eq!(loaded.peers, vec![expected]);
        // The snatch was 5 s old at the save, and 30 s went by.
        let mut pending = saved.pending.clone();
        pending[0].completed_at = Some(1_000 - 35);
        assert_eq!(loaded.pending, pending);
    }

    /// A file of version 1 (no snatch times), as the build before this one wrote it at
    /// shutdown, is read: an upgrade loses none of the sums it carries.
    #[test]
    fn a_version_1_file_is_read() {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&5_000u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        for v in [7u64, 9, 5, 6, 7, 8, 9, 10] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(1);
        b.push(0);
        b.extend_from_slice(&0u64.to_le_bytes());
        let file = LedgerFile::parse(&b, 100, 5_000).unwrap();
        let mut want = sample().pending;
        want[0].completed_at = None;
        assert_eq!((file.pending, file.unsure), (want, None));
    }

    #[test]
    fn truncated_or_foreign_files_are_refused_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ledger");
        sample().save(&path, 100, 5_000).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for cut in [0, 5, 20, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(LedgerFile::load(&path, 0, 0).is_err(), "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        std::fs::write(&path, &extra).unwrap();
        assert!(LedgerFile::load(&path, 0, 0).is_err());
        // A count far beyond the bytes left allocates nothing and fails.
        let mut huge = bytes[..20].to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&path, &huge).unwrap();
        assert!(LedgerFile::load(&path, 0, 0).is_err());
    }
}
