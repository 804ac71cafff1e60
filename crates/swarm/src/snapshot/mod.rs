//! Snapshots: the store's state in a versioned binary file, so that a restart or an upgrade
//! loses no swarm.
//!
//! The format is a stream, written one shard at a time: the writer locks a shard only long
//! enough to encode its torrents into a buffer, then writes the buffer with the lock
//! released, so taking a snapshot never stops the world. Every part carries a CRC-32, and
//! the file ends with a trailer (counts and a CRC of the whole file), so a truncated or
//! damaged file is always detected; a file from another program fails on its magic, one
//! from a future shoal on its version.
//!
//! Peers are stored with their *remaining* lifetime, not their store-clock expiry: the store
//! clock restarts at zero in every process. On restore the time the tracker was down (from
//! the Unix time in the header) is subtracted, so a peer that would have expired during the
//! downtime is not brought back.
//!
//! A *change section* ([`SnapshotHeader::base`]) has the same layout and holds only the
//! torrents announced since a given second (see [`Store::write_snapshot_since`]); the
//! state crate appends such sections to a log beside a whole snapshot, its *base*, which
//! they name by [`BaseId`]. A torrent is written there as *merge records* (bit 31 of `n4`
//! set): the peers announced since the section's start and, as entries whose seeder flag
//! is 2, those that said `stopped` since (departures), which a restore applies on top of
//! the older records ([`Take`]): departures first, then the peers, the later expiry winning
//! ([`Swarm::restore`](crate::Swarm::restore)). A section's size follows the announces,
//! not the swarms' sizes.
//!
//! ```text
//! header   "SHOALSNP"  version:u16  flags:u16  writer:u32  written_unix:u64  key_len:u16
//!          key  [base_writer:u32 base_written_unix:u64 base_crc:u32]  crc32(header):u32
//!          (flags bit 0: final, written on exit; bit 1: a change section, whose base
//!          follows the key)
//! block*   len:u32 (> 0)  torrents:u32  crc32(body):u32  body[len]
//!            body = torrent*: info_hash[20] completed:u32 n4:u32 n6:u32 peer4[n4] peer6[n6]
//!            peer4 = peer_id[20] addr[6]  remaining:u32 seeder:u8
//!            peer6 = peer_id[20] addr[18] remaining:u32 seeder:u8
//! trailer  0:u32  torrents:u64  peers:u64  crc32(everything before this field):u32
//! ```
//!
//! All integers are little-endian. This module knows nothing of files: the server writes to
//! a temporary file and renames it, and decides what to do with a bad one.

use std::io::{self, Read};

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use thiserror::Error;

mod write;

use crate::journal::AnyAddr;
use crate::{Peer, PeerExt, Store};

/// The first bytes of every snapshot.
pub const MAGIC: [u8; 8] = *b"SHOALSNP";
/// The format version this code writes and reads.
pub const VERSION: u16 = 1;
/// Largest block accepted on restore: a shard's torrents are far below this; a larger length
/// can only be damage.
const MAX_BLOCK: u32 = 1 << 30;
/// Longest opaque key accepted (the connection-id key is 16 bytes).
const MAX_KEY: u16 = 1024;
/// Peers inserted per shard lock when restoring.
const RESTORE_CHUNK: usize = 1024;
/// Peers encoded per shard lock when writing a large torrent: a torrent over this many is
/// saved as one record per chunk, the completed count with the first (restoring merges
/// them, see `restore_snapshot_with`).
const WRITE_CHUNK: usize = crate::LOCK_CHUNK;
const PEER4_LEN: usize = 20 + 6 + 4 + 1;
const PEER6_LEN: usize = 20 + 18 + 4 + 1;

/// Why a snapshot could not be restored. The store may hold part of it: restore into a
/// fresh store and drop it on error.
#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("reading the snapshot: {0}")]
    Io(#[from] io::Error),
    #[error("not a shoal snapshot (bad magic bytes)")]
    Foreign,
    #[error("snapshot format version {0} is not supported (this shoal reads version {VERSION})")]
    Version(u16),
    #[error("snapshot is truncated (ends inside {0})")]
    Truncated(&'static str),
    #[error("snapshot is damaged: checksum mismatch in {0}")]
    Checksum(&'static str),
    #[error("snapshot is malformed: {0}")]
    Malformed(&'static str),
}

/// Which whole snapshot a change section applies to: its writer, its Unix second, and the
/// checksum that ends it (two snapshots by one process in one second still differ there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BaseId {
    pub writer: u32,
    pub written_unix: u64,
    pub crc: u32,
}

/// The header of a snapshot: who wrote it, when, and whether it was its writer's last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// Unix second the snapshot was written.
    pub written_unix: u64,
    /// Who wrote it (the server stores its process id), so that a process taking over
    /// can tell its predecessor's snapshot from its own.
    pub writer: u32,
    /// Written as the writer stopped: nothing it learnt after is missing.
    pub is_final: bool,
    /// An opaque key stored alongside (the server's connection-id key).
    pub key: Vec<u8>,
    /// For a change section, the whole snapshot it applies to; `None` for a whole one.
    pub base: Option<BaseId>,
}

const FLAG_FINAL: u16 = 1;
const FLAG_CHANGES: u16 = 2;

/// What a snapshot held (or what was written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    pub header: SnapshotHeader,
    /// Torrent records: one a torrent, or one for each chunk of a torrent of more than
    /// 65,536 peers (a few more than torrents where swarms are that large).
    pub torrents: u64,
    pub peers: u64,
    /// Peers in the file whose lifetime ran out while the tracker was down (restore only).
    pub peers_expired: u64,
    /// Torrent records read but not merged: the caller's filter left them out (restore
    /// only; counted in `torrents`, their peers in `peers` and `peers_skipped`).
    pub torrents_skipped: u64,
    pub peers_skipped: u64,
    /// The checksum that ends the file: with the header's writer and time, the identity a
    /// change section names its base by ([`BaseId`]).
    pub crc: u32,
}

impl SnapshotSummary {
    /// Torrent records and peers a restore merged: those read, less those its filter
    /// skipped and the peers that had expired.
    pub fn merged(&self) -> (u64, u64) {
        (
            self.torrents - self.torrents_skipped,
            self.peers - self.peers_skipped - self.peers_expired,
        )
    }

    /// The identity of the whole snapshot this summary is of.
    pub fn base_id(&self) -> BaseId {
        BaseId {
            writer: self.header.writer,
            written_unix: self.header.written_unix,
            crc: self.crc,
        }
    }
}

/// In a change section, the bit of a record's IPv4 count that marks a merge record.
const MERGE_RECORD: u32 = 1 << 31;
/// In a merge record, the seeder flag of an entry that is a departure: the peer at that
/// address said `stopped`, its lifetime what a peer announced then would have.
const DEPARTED: u8 = 2;

/// Departures read so far in a restore, newest first: peers that left, whom older records
/// must not bring back ([`Store::restore_filtered`]).
pub type Gone = std::collections::HashSet<(InfoHash, AnyAddr)>;

/// What a restore does with one torrent record ([`Store::restore_filtered`]'s filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Skip it (a newer record replaces it).
    Nothing,
    /// Merge its peers, not its completed count (a newer record carries the count).
    Peers,
    /// Merge its peers and its completed count.
    Whole,
}

/// How a restore merges a saved completed count into a torrent the store already holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completed {
    /// The larger of the two: the saved count already includes what the store counted
    /// (an upgrade's hand-over merges the final snapshot over the periodic one).
    AtLeast(u32),
    /// Both added: the store counted only completions since it started empty (a start
    /// that loads its snapshot in the background while serving).
    Plus(u32),
}

/// How [`Store::restore_snapshot_with`] merges into a store that may already hold peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Completed counts: the larger wins ([`Completed::AtLeast`]).
    KeepHigher,
    /// Completed counts: added ([`Completed::Plus`]).
    AddCompleted,
}

impl<X: PeerExt> Store<X> {
    /// Restores a snapshot written by [`Store::write_snapshot`] into this store (meant to
    /// be a fresh one). `now` and `unix_now` as for writing. Peer lifetimes are shortened by
    /// the time since the snapshot was written and capped at the configured peer TTL.
    ///
    /// On error the store may hold part of the snapshot; the caller should drop it.
    pub fn restore_snapshot(
        &self,
        r: impl Read,
        now: u32,
        unix_now: u64,
    ) -> Result<SnapshotSummary, SnapshotError> {
        self.restore_snapshot_with(r, now, unix_now, Merge::KeepHigher)
    }

    /// [`restore_snapshot`](Self::restore_snapshot) into a live store: a peer the store
    /// already holds at an address (heard from since) keeps its entry, and completed
    /// counts merge as `merge` says. Peers are inserted a bounded chunk per shard lock,
    /// so workers serving announces meanwhile wait at most one chunk. Each block is
    /// checked (CRC) before any of it is merged: on error, what was merged came from
    /// whole, checked blocks.
    pub fn restore_snapshot_with(
        &self,
        mut r: impl Read,
        now: u32,
        unix_now: u64,
        merge: Merge,
    ) -> Result<SnapshotSummary, SnapshotError> {
        let mut gone = Gone::new();
        let summary =
            self.restore_filtered(&mut r, (now, unix_now, merge), &mut gone, |_, _| {
                Take::Whole
            })?;
        let mut extra = [0u8; 1];
        if r.read(&mut extra)? != 0 {
            return Err(SnapshotError::Malformed("bytes after the trailer"));
        }
        Ok(summary)
    }

    /// [`restore_snapshot_with`](Self::restore_snapshot_with) of one snapshot or change
    /// section that `r` holds, perhaps followed by others (nothing after its trailer is
    /// read), each torrent record as `keep` says, given the info hash and whether it is a
    /// merge record (see the module's documentation): those it skips are checked and
    /// counted ([`SnapshotSummary::torrents_skipped`]), not decoded.
    ///
    /// Records are read newest first (a change log's last section first, the whole
    /// snapshot last): a peer already in the store stays as it is, and `gone` carries the
    /// departures from one record to the older ones (the addresses they must not fill).
    pub fn restore_filtered(
        &self,
        r: &mut impl Read,
        (now, unix_now, merge): (u32, u64, Merge),
        gone: &mut Gone,
        mut keep: impl FnMut(&InfoHash, bool) -> Take,
    ) -> Result<SnapshotSummary, SnapshotError> {
        let mut r = CrcReader {
            inner: r,
            crc: crc32fast::Hasher::new(),
        };
        let header = read_header_from(&mut r)?;
        let downtime = unix_now.saturating_sub(header.written_unix);
        let ttl = self.config.peer_ttl;
        let mut summary = SnapshotSummary {
            header,
            ..SnapshotSummary::default()
        };
        let mut body = Vec::new();
        loop {
            let mut len = [0u8; 4];
            r.exact(&mut len, "a block header")?;
            let len = u32::from_le_bytes(len);
            if len == 0 {
                break;
            }
            if len > MAX_BLOCK {
                return Err(SnapshotError::Malformed("block length out of range"));
            }
            let mut rest = [0u8; 8];
            r.exact(&mut rest, "a block header")?;
            let torrents = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
            let crc = u32::from_le_bytes(rest[4..].try_into().expect("4 bytes"));
            body.clear();
            // `take` + `read_to_end` grows the buffer only as bytes arrive, so a damaged
            // length cannot make us allocate a gigabyte for a short file.
            (&mut r)
                .take(u64::from(len))
                .read_to_end(&mut body)
                .map_err(SnapshotError::Io)?;
            if body.len() != len as usize {
                return Err(SnapshotError::Truncated("a block"));
            }
            if crc32fast::hash(&body) != crc {
                return Err(SnapshotError::Checksum("a block"));
            }
            let mut cur = Cursor(&body);
            for _ in 0..torrents {
                let info_hash = InfoHash(cur.array()?);
                let completed = cur.u32()?;
                let n4 = cur.u32()?;
                let merge_record = n4 & MERGE_RECORD != 0;
                if merge_record && summary.header.base.is_none() {
                    return Err(SnapshotError::Malformed(
                        "a merge record in a whole snapshot",
                    ));
                }
                let n4 = (n4 & !MERGE_RECORD) as usize;
                let n6 = cur.u32()? as usize;
                // Check the sizes before decoding, so a bad count cannot run past the block.
                let need = n4
                    .checked_mul(PEER4_LEN)
                    .and_then(|a| n6.checked_mul(PEER6_LEN).and_then(|b| a.checked_add(b)));
                let Some(need) = need.filter(|&n| n <= cur.0.len()) else {
                    return Err(SnapshotError::Malformed("peer count beyond its block"));
                };
                summary.torrents += 1;
                let take = keep(&info_hash, merge_record);
                if take == Take::Nothing {
                    summary.torrents_skipped += 1;
                    summary.peers += (n4 + n6) as u64;
                    summary.peers_skipped += (n4 + n6) as u64;
                    cur.0 = &cur.0[need..];
                    continue;
                }
                let expires = |remaining| {
                    lifetime(remaining, downtime, ttl).map(|left| now.saturating_add(left))
                };
                let (mut v4, left4) = cur.peers(n4, CompactPeerV4, expires, &mut summary)?;
                let (mut v6, left6) = cur.peers(n6, CompactPeerV6, expires, &mut summary)?;
                if !(left4.is_empty() && left6.is_empty() || merge_record) {
                    return Err(SnapshotError::Malformed(
                        "a departure outside a merge record",
                    ));
                }
                if !gone.is_empty() {
                    v4.retain(|p| !gone.contains(&(info_hash, AnyAddr::V4(p.addr))));
                    v6.retain(|p| !gone.contains(&(info_hash, AnyAddr::V6(p.addr))));
                }
                // In chunks: merging into a live store (a hand-over) must not hold a
                // shard's lock for a whole large swarm while workers wait on it.
                // The count goes in with the first chunk only: added twice it would be
                // counted twice.
                let mut count = Some(if take == Take::Whole { completed } else { 0 });
                let mut next = || match (merge, count.take()) {
                    (Merge::KeepHigher, n) => Completed::AtLeast(n.unwrap_or(0)),
                    (Merge::AddCompleted, n) => Completed::Plus(n.unwrap_or(0)),
                };
                if v4.is_empty() && v6.is_empty() {
                    self.restore_torrent(info_hash, next(), [], []);
                }
                for chunk in v4.chunks(RESTORE_CHUNK) {
                    self.restore_torrent(info_hash, next(), chunk.iter().copied(), []);
                }
                for chunk in v6.chunks(RESTORE_CHUNK) {
                    self.restore_torrent(info_hash, next(), [], chunk.iter().copied());
                }
                // After the record's peers (one that left and came back is among them): a
                // departure from an address nobody holds keeps older records from it.
                if !(left4.is_empty() && left6.is_empty()) {
                    let absent = self.absent(&info_hash, left4, left6);
                    gone.extend(absent.into_iter().map(|a| (info_hash, a)));
                }
            }
            if !cur.0.is_empty() {
                return Err(SnapshotError::Malformed("bytes left over in a block"));
            }
        }
        let mut counts = [0u8; 16];
        r.exact(&mut counts, "the trailer")?;
        let expected = r.crc.clone().finalize();
        let mut stored = [0u8; 4];
        r.inner
            .read_exact(&mut stored)
            .map_err(|e| eof_as(e, "the trailer"))?;
        if u32::from_le_bytes(stored) != expected {
            return Err(SnapshotError::Checksum("the file"));
        }
        let torrents = u64::from_le_bytes(counts[..8].try_into().expect("8 bytes"));
        let peers = u64::from_le_bytes(counts[8..].try_into().expect("8 bytes"));
        if torrents != summary.torrents || peers != summary.peers {
            return Err(SnapshotError::Malformed("trailer counts do not match"));
        }
        summary.crc = expected;
        Ok(summary)
    }
}

/// Reads only the header of a snapshot (to decide whether to restore it), checking its
/// magic, version and checksum.
pub fn read_header(r: impl Read) -> Result<SnapshotHeader, SnapshotError> {
    read_header_from(&mut CrcReader {
        inner: r,
        crc: crc32fast::Hasher::new(),
    })
}

fn read_header_from<R: Read>(r: &mut CrcReader<R>) -> Result<SnapshotHeader, SnapshotError> {
    let mut fixed = [0u8; 26];
    r.exact(&mut fixed, "the header")?;
    if fixed[..8] != MAGIC {
        return Err(SnapshotError::Foreign);
    }
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    if version != VERSION {
        return Err(SnapshotError::Version(version));
    }
    let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
    if flags & !(FLAG_FINAL | FLAG_CHANGES) != 0 {
        return Err(SnapshotError::Malformed("unknown header flags"));
    }
    let writer = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
    let written_unix = u64::from_le_bytes(fixed[16..24].try_into().expect("8 bytes"));
    let key_len = u16::from_le_bytes([fixed[24], fixed[25]]);
    if key_len > MAX_KEY {
        return Err(SnapshotError::Malformed("key too long"));
    }
    let mut key = vec![0u8; usize::from(key_len)];
    r.exact(&mut key, "the header")?;
    let mut header_crc = crc32fast::Hasher::new();
    header_crc.update(&fixed);
    header_crc.update(&key);
    let mut base = None;
    if flags & FLAG_CHANGES != 0 {
        let mut b = [0u8; BASE_ID_LEN];
        r.exact(&mut b, "the header")?;
        header_crc.update(&b);
        base = Some(BaseId::from_bytes(b));
    }
    let mut stored = [0u8; 4];
    r.exact(&mut stored, "the header")?;
    if u32::from_le_bytes(stored) != header_crc.finalize() {
        return Err(SnapshotError::Checksum("the header"));
    }
    Ok(SnapshotHeader {
        written_unix,
        writer,
        is_final: flags & FLAG_FINAL != 0,
        key,
        base,
    })
}

const BASE_ID_LEN: usize = 16;

impl BaseId {
    fn to_bytes(self) -> [u8; BASE_ID_LEN] {
        let mut b = [0u8; BASE_ID_LEN];
        b[..4].copy_from_slice(&self.writer.to_le_bytes());
        b[4..12].copy_from_slice(&self.written_unix.to_le_bytes());
        b[12..].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    fn from_bytes(b: [u8; BASE_ID_LEN]) -> Self {
        Self {
            writer: u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
            written_unix: u64::from_le_bytes(b[4..12].try_into().expect("8 bytes")),
            crc: u32::from_le_bytes(b[12..].try_into().expect("4 bytes")),
        }
    }
}

/// Seconds a restored peer has left, or `None` if it ran out while the tracker was down.
fn lifetime(remaining: u32, downtime: u64, ttl: u32) -> Option<u32> {
    let left = u64::from(remaining).checked_sub(downtime)?;
    (left > 0).then(|| left.min(u64::from(ttl)) as u32)
}

fn eof_as(e: io::Error, part: &'static str) -> SnapshotError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        SnapshotError::Truncated(part)
    } else {
        SnapshotError::Io(e)
    }
}

struct CrcReader<R> {
    inner: R,
    crc: crc32fast::Hasher,
}

impl<R: Read> CrcReader<R> {
    fn exact(&mut self, buf: &mut [u8], part: &'static str) -> Result<(), SnapshotError> {
        self.read_exact(buf).map_err(|e| eof_as(e, part))
    }
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
}

/// Bounds-checked reads from a block's body.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(SnapshotError::Malformed(
                "torrent record runs past its block",
            ))?;
        self.0 = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.array().map(u32::from_le_bytes)
    }

    /// Reads `n` peer records with `N`-byte addresses (counted in `summary`), and keeps
    /// those for which `expires` (given the remaining lifetime) still finds one: the peers,
    /// and the departures' addresses.
    fn peers<const N: usize, A>(
        &mut self,
        n: usize,
        addr: fn([u8; N]) -> A,
        expires: impl Fn(u32) -> Option<u32>,
        summary: &mut SnapshotSummary,
    ) -> Result<(Vec<Peer<A>>, Vec<A>), SnapshotError> {
        let mut peers = Vec::with_capacity(n);
        let mut gone = Vec::new();
        for _ in 0..n {
            let peer_id = PeerId(self.array()?);
            let wire = self.array()?;
            let remaining = self.u32()?;
            let flag = self.array::<1>()?[0];
            if flag > DEPARTED {
                return Err(SnapshotError::Malformed("seeder flag is not 0, 1 or 2"));
            }
            summary.peers += 1;
            match expires(remaining) {
                Some(_) if flag == DEPARTED => gone.push(addr(wire)),
                Some(expires) => peers.push(Peer {
                    peer_id,
                    addr: addr(wire),
                    expires,
                    seeder: flag == 1,
                }),
                None => summary.peers_expired += 1,
            }
        }
        Ok((peers, gone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Announce, StoreConfig};
    use shoal_proto::AnnounceEvent;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn filled() -> Store {
        let store = Store::new(StoreConfig {
            shards: 16,
            ..StoreConfig::default()
        });
        let mut out4: Vec<CompactPeerV4> = Vec::new();
        let mut out6: Vec<CompactPeerV6> = Vec::new();
        for t in 0..40u8 {
            for p in 0..(u16::from(t) * 3) {
                let [hi, lo] = p.to_be_bytes();
                let mut id = [t; 20];
                id[0] = hi;
                id[1] = lo;
                let event = if p % 5 == 0 {
                    AnnounceEvent::Completed
                } else {
                    AnnounceEvent::Started
                };
                let left = if p % 5 == 0 { 0 } else { 100 };
                store.announce(
                    &Announce {
                        info_hash: InfoHash([t; 20]),
                        peer_id: PeerId(id),
                        addr: CompactPeerV4::new(Ipv4Addr::new(10, t, hi, lo), 6881),
                        event,
                        left,
                        numwant: 0,
                    },
                    100,
                    &mut out4,
                );
                if p % 7 == 0 {
                    store.announce(
                        &Announce {
                            info_hash: InfoHash([t; 20]),
                            peer_id: PeerId(id),
                            addr: CompactPeerV6::new(
                                Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, u16::from(t), p),
                                6882,
                            ),
                            event: AnnounceEvent::Started,
                            left: 5,
                            numwant: 0,
                        },
                        100,
                        &mut out6,
                    );
                }
            }
        }
        store
    }

    type Row = (
        InfoHash,
        u32,
        Vec<(PeerId, [u8; 6], u32, bool)>,
        Vec<(PeerId, u32, bool)>,
    );

    fn contents(store: &Store) -> Vec<Row> {
        let mut rows = Vec::new();
        store.for_each_shard(|shard| {
            for (ih, t) in shard.torrents() {
                let mut v4: Vec<_> = t
                    .v4()
                    .peers()
                    .map(|p| (p.peer_id, p.addr.0, p.expires, p.seeder))
                    .collect();
                v4.sort_by_key(|p| p.0);
                let mut v6: Vec<_> = t
                    .v6()
                    .into_iter()
                    .flat_map(|s| s.peers())
                    .map(|p| (p.peer_id, p.expires, p.seeder))
                    .collect();
                v6.sort_by_key(|p| p.0);
                rows.push((*ih, t.stats().completed, v4, v6));
            }
        });
        rows.sort_by_key(|r| r.0);
        rows
    }

    fn snapshot(store: &Store, now: u32, unix: u64) -> Vec<u8> {
        snapshot_by(store, now, unix, 1)
    }

    /// A snapshot written by `encoders` threads.
    fn snapshot_by(store: &Store, now: u32, unix: u64, encoders: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        let header = SnapshotHeader {
            written_unix: unix,
            writer: 77,
            is_final: true,
            key: vec![9; 16],
            base: None,
        };
        store
            .write_snapshot(&mut bytes, &header, now, encoders)
            .unwrap();
        assert_eq!(read_header(&bytes[..]).unwrap(), header);
        bytes
    }

    #[test]
    fn several_encoders_write_what_one_does() {
        let store = filled();
        let one = snapshot_by(&store, 200, 1_000_000, 1);
        let four = snapshot_by(&store, 200, 1_000_000, 4);
        // The same blocks, perhaps in another order.
        assert_eq!(one.len(), four.len());
        let restore = |bytes: &[u8]| {
            let s = Store::new(StoreConfig::default());
            let summary = s.restore_snapshot(bytes, 200, 1_000_000).unwrap();
            (summary.torrents, summary.peers, contents(&s))
        };
        let (a, b) = (restore(&one), restore(&four));
        assert_eq!(a, b);
        assert_eq!(a.2, contents(&store));
        assert_eq!(a.0, 39, "every torrent that has peers");
    }

    #[test]
    fn a_snapshot_goes_into_a_store_without_peer_ids_and_back_with_zero_ids() {
        let store = filled();
        let bytes = snapshot(&store, 200, 1_000_000);
        let anonymous: Store<crate::Anonymous> = Store::with_extension(StoreConfig::default());
        let first = anonymous
            .restore_snapshot(&bytes[..], 200, 1_000_000)
            .unwrap();
        let mut again = Vec::new();
        let header = SnapshotHeader {
            written_unix: 1_000_000,
            ..SnapshotHeader::default()
        };
        anonymous
            .write_snapshot(&mut again, &header, 200, 1)
            .unwrap();
        let back = Store::new(StoreConfig::default());
        let second = back.restore_snapshot(&again[..], 200, 1_000_000).unwrap();
        assert_eq!(
            (first.torrents, first.peers),
            (second.torrents, second.peers)
        );
        let zeroed = |rows: Vec<Row>| -> Vec<Row> {
            rows.into_iter()
                .map(|(ih, completed, v4, v6)| {
                    let mut v4: Vec<_> = v4
                        .into_iter()
                        .map(|p| (PeerId([0; 20]), p.1, p.2, p.3))
                        .collect();
                    let mut v6: Vec<_> = v6
                        .into_iter()
                        .map(|p| (PeerId([0; 20]), p.1, p.2))
                        .collect();
                    v4.sort();
                    v6.sort();
                    (ih, completed, v4, v6)
                })
                .collect()
        };
        assert_eq!(zeroed(contents(&back)), zeroed(contents(&store)));
        assert!(contents(&back)
            .iter()
            .flat_map(|r| &r.2)
            .all(|p| p.0 == PeerId([0; 20])));
    }

    #[test]
    fn a_writer_that_fails_ends_a_write_by_several_encoders() {
        struct FailsAfter(usize);
        impl std::io::Write for FailsAfter {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.0 < buf.len() {
                    return Err(io::Error::other("disk full"));
                }
                self.0 -= buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let store = filled();
        let header = SnapshotHeader::default();
        for encoders in [1, 4] {
            let e = store
                .write_snapshot(FailsAfter(500), &header, 200, encoders)
                .unwrap_err();
            assert_eq!(e.to_string(), "disk full");
        }
    }

    #[test]
    fn merging_into_a_live_store_keeps_live_peers_and_adds_completed_counts() {
        let saved = filled();
        let bytes = snapshot(&saved, 200, 1_000_000);
        let t = InfoHash([10; 20]);
        let before = saved.scrape(&t);
        // 30 peers over IPv4, 5 of them also over IPv6.
        assert_eq!(
            (before.completed, before.seeders + before.leechers),
            (6, 35)
        );
        for (merge, completed) in [(Merge::AddCompleted, 7), (Merge::KeepHigher, 6)] {
            // Peer 1 of torrent 10 (a leecher in the file) completed since the start.
            let live = Store::new(StoreConfig::default());
            let mut id = [10u8; 20];
            (id[0], id[1]) = (0, 1);
            live.announce(
                &Announce {
                    info_hash: t,
                    peer_id: PeerId(id),
                    addr: CompactPeerV4::new(Ipv4Addr::new(10, 10, 0, 1), 6881),
                    event: AnnounceEvent::Completed,
                    left: 0,
                    numwant: 0,
                },
                5,
                &mut Vec::<CompactPeerV4>::new(),
            );
            live.restore_snapshot_with(&bytes[..], 5, 1_000_000, merge)
                .unwrap();
            let after = live.scrape(&t);
            assert_eq!(after.completed, completed, "{merge:?}");
            assert_eq!(after.seeders + after.leechers, 35, "every saved peer, once");
            assert_eq!(
                after.seeders,
                before.seeders + 1,
                "the live peer kept its state"
            );
            assert_eq!(contents(&live).len(), contents(&saved).len());
        }
    }

    /// One announce at store second 100, of either family.
    fn announce_at<A: crate::Family>(
        store: &Store,
        info_hash: InfoHash,
        peer_id: PeerId,
        addr: A,
        event: AnnounceEvent,
        left: u64,
    ) where
        Vec<A>: crate::PeerSink<A>,
    {
        let ann = Announce {
            info_hash,
            peer_id,
            addr,
            event,
            left,
            numwant: 0,
        };
        store.announce(&ann, 100, &mut Vec::<A>::new());
    }

    #[test]
    fn a_large_torrent_is_written_a_chunk_per_record_and_restored_whole() {
        let store = Store::new(StoreConfig::default());
        let big = InfoHash([1; 20]);
        let (n4, n6) = (2 * WRITE_CHUNK + 500, 3000u32);
        let announce = |info_hash, n: u32, v6: bool, event| {
            let mut id = [0u8; 20];
            id[..4].copy_from_slice(&n.to_be_bytes());
            id[4] = u8::from(v6);
            let done = event == AnnounceEvent::Completed;
            let (peer_id, left) = (PeerId(id), if done { 0 } else { u64::from(n % 3) });
            if v6 {
                let [a, b] = [(n >> 16) as u16, n as u16];
                let addr = CompactPeerV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, a, b), 6881);
                announce_at(&store, info_hash, peer_id, addr, event, left);
            } else {
                let addr = CompactPeerV4::new(Ipv4Addr::from(0x0a00_0000 + n), 6881);
                announce_at(&store, info_hash, peer_id, addr, event, left);
            }
        };
        for n in 0..n4 as u32 {
            announce(big, n, false, AnnounceEvent::Started);
        }
        for n in 0..n6 {
            announce(big, n, true, AnnounceEvent::Started);
        }
        for n in 0..3 {
            announce(big, n * 3 + 1, false, AnnounceEvent::Completed);
        }
        announce(InfoHash([2; 20]), 7, false, AnnounceEvent::Started);
        let bytes = snapshot_by(&store, 200, 1_000_000, 3);
        let restored = Store::new(StoreConfig::default());
        // Adding counts: a count saved with every chunk would be added three times.
        let s = restored
            .restore_snapshot_with(&bytes[..], 5, 1_000_000, Merge::AddCompleted)
            .unwrap();
        // The large torrent in three records (two full chunks of IPv4 peers, then the
        // rest of them with the IPv6 ones), the small one in one.
        assert_eq!((s.torrents, s.peers), (4, n4 as u64 + u64::from(n6) + 1));
        assert_eq!(restored.scrape(&big).completed, 3, "counted once");
        let (before, after) = (contents(&store), contents(&restored));
        assert_eq!(before.len(), 2);
        for (b, a) in before.iter().zip(&after) {
            assert_eq!((b.0, b.1), (a.0, a.1));
            let pb: Vec<_> = b.2.iter().map(|p| (p.0, p.1, p.3)).collect();
            let pa: Vec<_> = a.2.iter().map(|p| (p.0, p.1, p.3)).collect();
            assert!(pb == pa, "the same IPv4 peers, each once");
            let pb: Vec<_> = b.3.iter().map(|p| (p.0, p.2)).collect();
            let pa: Vec<_> = a.3.iter().map(|p| (p.0, p.2)).collect();
            assert!(pb == pa, "the same IPv6 peers, each once");
        }
    }

    #[test]
    fn a_change_section_holds_what_was_announced_and_what_left_since_and_merges_over_the_base() {
        let config = StoreConfig {
            shards: 16,
            ..StoreConfig::default()
        };
        // The base: written at store second 150, Unix 1,000, restored into a new process.
        let base = snapshot(&filled(), 150, 1_000);
        let live = Store::new(config.clone());
        let restored = live.restore_snapshot(&base[..], 150, 1_000).unwrap();
        assert_eq!(
            restored.crc,
            u32::from_le_bytes(base[base.len() - 4..].try_into().unwrap())
        );
        let header = |unix| SnapshotHeader {
            written_unix: unix,
            writer: 78,
            is_final: true,
            key: vec![],
            base: Some(restored.base_id()),
        };
        let section = |since, now, unix| {
            let mut bytes = Vec::new();
            let s = live
                .write_snapshot_since(&mut bytes, &header(unix), now, 1, since)
                .unwrap();
            (bytes, s)
        };
        // Restored and not announced since: in no section, even one from second 1.
        assert_eq!(section(1, 160, 1_010).1.torrents, 0);
        live.keep_departures_from(1);

        // At second 200 (Unix 1,050): a peer of torrent 5 stops, torrent 7 gains a peer,
        // torrent 200 is new.
        let gone = live
            .with_torrent(&InfoHash([5; 20]), |t| t.v4().peer(0))
            .unwrap();
        let at_200 = |ih: u8, id: u8, addr: CompactPeerV4, event| {
            let ann = Announce {
                info_hash: InfoHash([ih; 20]),
                peer_id: PeerId([id; 20]),
                addr,
                event,
                left: 1,
                numwant: 0,
            };
            live.announce(&ann, 200, &mut Vec::<CompactPeerV4>::new());
        };
        let new_peer = CompactPeerV4::new(Ipv4Addr::new(192, 0, 2, 1), 1);
        at_200(5, gone.peer_id.0[0], gone.addr, AnnounceEvent::Stopped);
        at_200(7, 250, new_peer, AnnounceEvent::Started);
        at_200(200, 251, new_peer, AnnounceEvent::Started);
        let (changes, s) = section(200, 200, 1_050);
        assert_eq!((s.torrents, s.header.base), (3, Some(restored.base_id())));
        assert_eq!(read_header(&changes[..]).unwrap(), s.header);

        // Newest first, as the state crate restores them: the section (its peers, then its
        // departures kept aside), then the base, whose records of the section's torrents
        // give their peers only (the section's record has the completed count), and never
        // a peer the section saw leave: what the live store holds.
        let again = Store::new(config);
        let times = (200, 1_050, Merge::AddCompleted);
        let mut departed = Gone::new();
        let mut newer = std::collections::HashSet::new();
        let from_section = again
            .restore_filtered(&mut &changes[..], times, &mut departed, |h, merged| {
                assert!(merged, "a section holds merge records");
                newer.insert(*h);
                Take::Whole
            })
            .unwrap();
        assert_eq!(
            (from_section.torrents, from_section.peers, departed.len()),
            (3, 3, 1),
            "the two new peers and a departure"
        );
        let from_base = again
            .restore_filtered(&mut &base[..], times, &mut departed, |h, merged| {
                assert!(!merged);
                if newer.contains(h) {
                    Take::Peers
                } else {
                    Take::Whole
                }
            })
            .unwrap();
        assert_eq!(from_base.torrents_skipped, 0);
        assert_eq!(contents(&again), contents(&live));
        let stopped = again.with_torrent(&InfoHash([5; 20]), |t| {
            t.v4().peers().any(|p| p.addr == gone.addr)
        });
        assert_eq!(stopped, Some(false), "the stopped peer is not brought back");
    }

    #[test]
    fn departures_are_kept_once_asked_for_and_dropped_a_peer_lifetime_later() {
        // The empty torrent outlives its peers' lifetime, so that sections still visit it.
        let store = Store::new(StoreConfig {
            torrent_ttl: 100_000,
            ..StoreConfig::default()
        });
        let ttl = store.config().peer_ttl;
        let header = SnapshotHeader {
            base: Some(BaseId::default()),
            ..SnapshotHeader::default()
        };
        let peer = |event| Announce {
            info_hash: InfoHash([3; 20]),
            peer_id: PeerId([3; 20]),
            addr: CompactPeerV4::new(Ipv4Addr::new(10, 0, 0, 3), 1),
            event,
            left: 1,
            numwant: 0,
        };
        let out = &mut Vec::<CompactPeerV4>::new();
        let section_at = |now| {
            let mut bytes = Vec::new();
            let s = store
                .write_snapshot_since(&mut bytes, &header, now, 1, 1)
                .unwrap();
            (s.torrents, s.peers)
        };
        // Not asked for: a stop leaves nothing behind.
        store.announce(&peer(AnnounceEvent::Started), 10, out);
        store.announce(&peer(AnnounceEvent::Stopped), 11, out);
        assert_eq!(section_at(12), (1, 0));
        // Asked for: the next stop is in the section, until the cleaner passes a peer
        // lifetime later.
        store.keep_departures_from(1);
        store.announce(&peer(AnnounceEvent::Started), 20, out);
        store.announce(&peer(AnnounceEvent::Stopped), 21, out);
        assert_eq!(section_at(22), (1, 1));
        store.clean(21 + ttl);
        assert_eq!(section_at(22), (1, 1), "not older than a lifetime yet");
        store.clean(22 + ttl);
        assert_eq!(section_at(22), (1, 0));
    }

    #[test]
    fn the_store_clock_never_reads_zero() {
        assert!(crate::clock::now() >= 1);
    }

    #[test]
    fn round_trip_keeps_peers_completed_counts_and_remaining_lifetimes() {
        let store = filled();
        // Written at store second 200 (peers expire at 100 + 3600 = 3700: 3500 left),
        // restored into a process whose clock reads 5 with no downtime.
        let bytes = snapshot(&store, 200, 1_000_000);
        let restored = Store::new(StoreConfig::default());
        let s = restored.restore_snapshot(&bytes[..], 5, 1_000_000).unwrap();
        assert_eq!(s.header.key, vec![9; 16]);
        assert_eq!(s.torrents, 39, "torrent 0 never had a peer");
        assert_eq!(s.peers_expired, 0);
        let before = contents(&store);
        let after = contents(&restored);
        assert_eq!(before.len(), after.len());
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(b.0, a.0);
            assert_eq!(b.1, a.1, "completed count");
            assert!(b.1 > 0);
            assert_eq!(b.2.len(), a.2.len());
            for (pb, pa) in b.2.iter().zip(&a.2) {
                assert_eq!((pb.0, pb.1, pb.3), (pa.0, pa.1, pa.3));
                assert_eq!(pb.2 - 200, pa.2 - 5, "remaining lifetime kept");
            }
            assert_eq!(b.3.len(), a.3.len());
        }
        assert_eq!(
            s.peers,
            before
                .iter()
                .map(|r| (r.2.len() + r.3.len()) as u64)
                .sum::<u64>()
        );
    }

    #[test]
    fn downtime_is_taken_off_lifetimes() {
        let store = filled();
        // 3500 seconds left at write; down for 3400: 100 left.
        let bytes = snapshot(&store, 200, 1_000_000);
        let restored = Store::new(StoreConfig::default());
        restored.restore_snapshot(&bytes[..], 0, 1_003_400).unwrap();
        for row in contents(&restored) {
            assert!(row.2.iter().all(|p| p.2 == 100));
        }
        // Down for longer than any peer had: torrents keep their completed counts only.
        let restored = Store::new(StoreConfig::default());
        let s = restored.restore_snapshot(&bytes[..], 0, 1_010_000).unwrap();
        assert_eq!(s.peers, s.peers_expired);
        assert!(contents(&restored)
            .iter()
            .all(|r| r.2.is_empty() && r.3.is_empty()));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_an_error_not_a_panic() {
        let store = Store::new(StoreConfig::default());
        let mut out: Vec<CompactPeerV4> = Vec::new();
        for p in 0..3u8 {
            store.announce(
                &Announce {
                    info_hash: InfoHash([p; 20]),
                    peer_id: PeerId([p; 20]),
                    addr: CompactPeerV4::new(Ipv4Addr::LOCALHOST, 1000),
                    event: AnnounceEvent::Completed,
                    left: 0,
                    numwant: 0,
                },
                1,
                &mut out,
            );
        }
        let bytes = snapshot(&store, 1, 50);
        for cut in 0..bytes.len() {
            let r = Store::new(StoreConfig::default()).restore_snapshot(&bytes[..cut], 1, 50);
            assert!(r.is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                let r = Store::new(StoreConfig::default()).restore_snapshot(&bad[..], 1, 50);
                assert!(r.is_err(), "flip at byte {i}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Store::new(StoreConfig::default())
            .restore_snapshot(&longer[..], 1, 50)
            .is_err());
    }

    #[test]
    fn foreign_and_future_files_are_named() {
        let r = Store::new(StoreConfig::default()).restore_snapshot(
            &b"hello world, this is not it"[..],
            0,
            0,
        );
        assert!(matches!(r, Err(SnapshotError::Foreign)), "{r:?}");
        let mut bytes = snapshot(&Store::new(StoreConfig::default()), 0, 0);
        bytes[8] = 2;
        let r = Store::new(StoreConfig::default()).restore_snapshot(&bytes[..], 0, 0);
        assert!(matches!(r, Err(SnapshotError::Version(2))), "{r:?}");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = Store::new(StoreConfig::default()).restore_snapshot(&bytes[..], 0, 0);
            let mut framed = MAGIC.to_vec();
            framed.extend_from_slice(&bytes);
            let _ = Store::new(StoreConfig::default()).restore_snapshot(&framed[..], 0, 0);
        }
    }
}
