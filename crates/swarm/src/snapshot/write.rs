//! Writing a snapshot: each shard's torrents encoded under its lock, written after it is
//! released.

use std::collections::HashSet;
use std::io::{self, Write};

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash};

use super::*;
use crate::journal::AnyAddr;
use crate::{Address, Peer, Swarm, Torrent};

/// A writer that keeps a running CRC of what went through it.
struct Crc<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Crc<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }

    /// One block of `torrents` records (none: nothing written).
    fn block(&mut self, body: &[u8], torrents: u32) -> io::Result<()> {
        match Framed::of(body, torrents)? {
            Some(f) => self.framed(&f, body),
            None => Ok(()),
        }
    }

    /// A block framed (and checksummed) beforehand, perhaps on another thread: only the
    /// checksums are combined here.
    fn framed(&mut self, f: &Framed, body: &[u8]) -> io::Result<()> {
        self.crc.combine(&f.crc);
        self.inner.write_all(&f.header)?;
        self.inner.write_all(body)
    }
}

/// A block's header and the checksum of header and body together.
struct Framed {
    header: [u8; 12],
    crc: crc32fast::Hasher,
}

impl Framed {
    /// `None` for a block of no records (not written).
    fn of(body: &[u8], torrents: u32) -> io::Result<Option<Self>> {
        if torrents == 0 {
            return Ok(None);
        }
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l <= MAX_BLOCK)
            .ok_or_else(|| io::Error::other("shard too large for one snapshot block"))?;
        let mut of_body = crc32fast::Hasher::new();
        of_body.update(body);
        let mut header = [0u8; 12];
        header[..4].copy_from_slice(&len.to_le_bytes());
        header[4..8].copy_from_slice(&torrents.to_le_bytes());
        header[8..].copy_from_slice(&of_body.clone().finalize().to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.combine(&of_body);
        Ok(Some(Self { header, crc }))
    }
}

/// An address's wire bytes, as stored in a snapshot.
trait WireBytes {
    fn wire(&self) -> &[u8];
}

impl WireBytes for CompactPeerV4 {
    fn wire(&self) -> &[u8] {
        &self.0
    }
}

impl WireBytes for CompactPeerV6 {
    fn wire(&self) -> &[u8] {
        &self.0
    }
}

fn encode_peer<A: WireBytes>(out: &mut Vec<u8>, p: &Peer<A>, now: u32) {
    // One copy from the stack, not four appends (`examples/pauses`, 6 million peers, with
    // `encode_torrent`'s one pass: 1.08-1.24 s before, 0.66-0.72 s after).
    let mut rec = [0u8; PEER6_LEN];
    let addr = p.addr.wire();
    let k = 20 + addr.len();
    rec[..20].copy_from_slice(&p.peer_id.0);
    rec[20..k].copy_from_slice(addr);
    rec[k..k + 4].copy_from_slice(&p.expires.saturating_sub(now).to_le_bytes());
    rec[k + 4] = u8::from(p.seeder);
    out.extend_from_slice(&rec[..k + 5]);
}

/// Which peers a record holds, and when it is written.
#[derive(Clone, Copy)]
struct Pick<'a> {
    now: u32,
    /// In a change section: only peers that expire at this second or later (announced
    /// since its start), as a merge record.
    recent: Option<u32>,
    /// In a change section: the torrent's departures (store second, address), with the
    /// first record of the torrent.
    departed: &'a [(u32, AnyAddr)],
    peer_ttl: u32,
}

/// Appends the peers of `swarm` at `positions` live at `now` (and recent, in a section);
/// returns how many.
fn encode_live<A: Address + WireBytes, X: PeerExt>(
    body: &mut Vec<u8>,
    swarm: &Swarm<A, X>,
    positions: std::ops::Range<usize>,
    pick: &Pick<'_>,
) -> u32 {
    let from = pick.now.max(pick.recent.unwrap_or(0));
    let live = positions
        .map(|i| swarm.peer(i))
        .filter(|p| p.expires >= from);
    live.map(|p| encode_peer(body, &p, pick.now)).count() as u32
}

/// Appends the departures of one family: an entry of no peer id whose lifetime is what a
/// peer announced when it left would have, and whose seeder flag is [`DEPARTED`].
fn encode_departed<A: WireBytes>(
    body: &mut Vec<u8>,
    pick: &Pick<'_>,
    of: impl Fn(&AnyAddr) -> Option<&A>,
) -> u32 {
    let mut n = 0;
    for (at, addr) in pick.departed {
        let Some(addr) = of(addr) else { continue };
        let expires = at.saturating_add(pick.peer_ttl);
        if expires <= pick.now {
            continue;
        }
        let mut rec = [0u8; PEER6_LEN];
        let wire = addr.wire();
        let k = 20 + wire.len();
        rec[20..k].copy_from_slice(wire);
        rec[k..k + 4].copy_from_slice(&(expires - pick.now).to_le_bytes());
        rec[k + 4] = DEPARTED;
        body.extend_from_slice(&rec[..k + 5]);
        n += 1;
    }
    n
}

/// Appends one torrent record to `body`: the peers of `t` at positions `from.0..` (IPv4)
/// and `from.1..` (IPv6), at most `limit` of them looked at, as `pick` says (in a change
/// section a merge record, with the departures it is given). Returns the entries written
/// and the positions after the last one looked at.
///
/// One pass over the peers: the counts are written as zero and filled in after.
fn encode_torrent<X: PeerExt>(
    body: &mut Vec<u8>,
    (info_hash, completed): (&InfoHash, u32),
    t: &Torrent<X>,
    from: (usize, usize),
    limit: usize,
    pick: &Pick<'_>,
) -> (u32, (usize, usize)) {
    let v4 = t.v4();
    let to4 = v4.len().min(from.0.saturating_add(limit));
    let left = limit - to4.saturating_sub(from.0);
    let to6 = t
        .v6()
        .map_or(from.1, |v6| v6.len().min(from.1.saturating_add(left)));
    body.reserve(
        44 + to4.saturating_sub(from.0) * PEER4_LEN + to6.saturating_sub(from.1) * PEER6_LEN,
    );
    body.extend_from_slice(&info_hash.0);
    body.extend_from_slice(&completed.to_le_bytes());
    let counts = body.len();
    body.extend_from_slice(&[0; 8]);
    let n4 = encode_live(body, v4, from.0..to4, pick)
        + encode_departed(body, pick, |a| match a {
            AnyAddr::V4(a) => Some(a),
            AnyAddr::V6(_) => None,
        });
    // IPv6 entries follow every IPv4 one.
    let n6 = t
        .v6()
        .map_or(0, |v6| encode_live(body, v6, from.1..to6, pick))
        + encode_departed(body, pick, |a| match a {
            AnyAddr::V6(a) => Some(a),
            AnyAddr::V4(_) => None,
        });
    let flag = if pick.recent.is_some() {
        MERGE_RECORD
    } else {
        0
    };
    body[counts..counts + 4].copy_from_slice(&(n4 | flag).to_le_bytes());
    body[counts + 4..counts + 8].copy_from_slice(&n6.to_le_bytes());
    (n4 + n6, (to4, to6))
}

/// One shard's torrents as encoded for a block (framed and checksummed by the encoder, so
/// that the writer only writes), and the large ones left for later.
struct Encoded {
    body: Vec<u8>,
    framed: io::Result<Option<Framed>>,
    torrents: u32,
    peers: u64,
    large: Vec<InfoHash>,
}

impl<X: PeerExt> Store<X> {
    /// Writes the whole store to `w`, one shard at a time, under `header`. `now` is the
    /// store clock ([`crate::clock::now`]), read once by the caller; `header.written_unix`
    /// must be the Unix time of the same moment. Peers already expired are left out.
    ///
    /// `encoders` threads encode shards at once (1: the calling thread alone, beside
    /// workers that serve; more for a final snapshot, written when nothing else runs).
    pub fn write_snapshot(
        &self,
        w: impl Write,
        header: &SnapshotHeader,
        now: u32,
        encoders: usize,
    ) -> io::Result<SnapshotSummary> {
        self.write_snapshot_since(w, header, now, encoders, 0)
    }

    /// Keeps the stops announced from store second `from` on for the change sections
    /// ([`Store::write_snapshot_since`]; before the first call none are kept).
    pub fn keep_departures_from(&self, from: u32) {
        self.departures.keep_from(from);
    }

    /// The torrents announced at or after store-clock second `since` (1: every torrent
    /// this process heard of, none only restored; see [`Store::write_snapshot_since`]).
    pub fn announced_since(&self, since: u32) -> HashSet<InfoHash> {
        let mut set = HashSet::new();
        for shard in self.torrents.lock_each() {
            set.extend(
                shard
                    .torrents()
                    .filter(|(_, t)| t.last_announce >= since)
                    .map(|(h, _)| *h),
            );
        }
        set
    }

    /// [`write_snapshot`](Self::write_snapshot) of the torrents announced at or after
    /// store-clock second `since` only (0: all of them): a change section, when `header`
    /// names its base. A torrent restored from a snapshot and not announced since counts
    /// as announced at 0 ([`crate::clock::now`] never reads 0), so `since` 1 selects what
    /// this process heard.
    pub fn write_snapshot_since(
        &self,
        w: impl Write,
        header: &SnapshotHeader,
        now: u32,
        encoders: usize,
        since: u32,
    ) -> io::Result<SnapshotSummary> {
        let key = &header.key;
        let key_len = u16::try_from(key.len())
            .ok()
            .filter(|&l| l <= MAX_KEY)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "key too long"))?;
        let mut w = Crc {
            inner: w,
            crc: crc32fast::Hasher::new(),
        };
        let mut bytes = Vec::with_capacity(32 + key.len());
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        let mut flags = if header.is_final { FLAG_FINAL } else { 0 };
        if header.base.is_some() {
            flags |= FLAG_CHANGES;
        }
        bytes.extend_from_slice(&flags.to_le_bytes());
        bytes.extend_from_slice(&header.writer.to_le_bytes());
        bytes.extend_from_slice(&header.written_unix.to_le_bytes());
        bytes.extend_from_slice(&key_len.to_le_bytes());
        bytes.extend_from_slice(key);
        if let Some(base) = header.base {
            bytes.extend_from_slice(&base.to_bytes());
        }
        let header_crc = crc32fast::hash(&bytes);
        w.put(&bytes)?;
        w.put(&header_crc.to_le_bytes())?;

        let mut summary = SnapshotSummary {
            header: header.clone(),
            ..SnapshotSummary::default()
        };
        // In a change section, each torrent's peers announced since `since` only (their
        // lifetime runs from their announce) and its departures since, as merge records.
        let section = header.base.is_some();
        let departed = match section {
            true => self.departures.since(since),
            false => Default::default(),
        };
        let pick = |info_hash: &InfoHash| Pick {
            now,
            recent: section.then(|| since.saturating_add(self.config.peer_ttl)),
            departed: departed.get(info_hash).map_or(&[], |d| d.as_slice()),
            peer_ttl: self.config.peer_ttl,
        };
        // Each shard's torrents are encoded under its lock (memory only), on `encoders`
        // threads, and written here with no lock held, as they come. The buffers go round:
        // at most twice `encoders` and one more are alive at once.
        let spare = parking_lot::Mutex::new(Vec::<Vec<u8>>::new());
        let mut large = Vec::new();
        let mut failed = None;
        self.torrents.visit_parallel(
            encoders,
            |shard| {
                let mut out = Encoded {
                    body: spare.lock().pop().unwrap_or_default(),
                    framed: Ok(None),
                    torrents: 0,
                    peers: 0,
                    large: Vec::new(),
                };
                out.body.clear();
                for (info_hash, t) in shard.torrents() {
                    if t.last_announce < since {
                        continue;
                    }
                    if t.len() > WRITE_CHUNK {
                        out.large.push(*info_hash);
                        continue;
                    }
                    let completed = t.stats().completed;
                    let (n, _) = encode_torrent(
                        &mut out.body,
                        (info_hash, completed),
                        t,
                        (0, 0),
                        usize::MAX,
                        &pick(info_hash),
                    );
                    out.torrents += 1;
                    out.peers += u64::from(n);
                }
                out.framed = Framed::of(&out.body, out.torrents);
                out
            },
            |out| {
                summary.torrents += u64::from(out.torrents);
                summary.peers += out.peers;
                large.extend(out.large);
                failed = match out.framed {
                    Ok(Some(f)) => w.framed(&f, &out.body).err(),
                    Ok(None) => None,
                    Err(e) => Some(e),
                };
                spare.lock().push(out.body);
                failed.is_none()
            },
        );
        let mut body = spare.into_inner().pop().unwrap_or_default();
        // The large torrents, a chunk of peers per lock, each chunk its own record. Peers
        // that move inside the swarm between two chunks (others leaving, a leecher turning
        // seeder) may be saved twice, which restoring merges, or missed, to be heard from
        // at their next announce.
        for info_hash in &large {
            let mut from = (0, 0);
            let mut first = true;
            // Bounded: a swarm that grows while it is written is written as it was seen
            // first, and a chunk more.
            let mut chunks_left = usize::MAX;
            while failed.is_none() && chunks_left > 0 {
                chunks_left -= 1;
                body.clear();
                let chunk = self.with_torrent(info_hash, |t| {
                    let completed = if first { t.stats().completed } else { 0 };
                    let total = (t.v4().len(), t.v6().map_or(0, |s| s.len()));
                    let mut pick = pick(info_hash);
                    if !first {
                        pick.departed = &[];
                    }
                    let (n, next) = encode_torrent(
                        &mut body,
                        (info_hash, completed),
                        t,
                        from,
                        WRITE_CHUNK,
                        &pick,
                    );
                    let chunks = (total.0 + total.1) / WRITE_CHUNK + 2;
                    (n, next, next.0 >= total.0 && next.1 >= total.1, chunks)
                });
                let Some((n, next, done, chunks)) = chunk else {
                    break;
                };
                if first {
                    chunks_left = chunks;
                }
                summary.torrents += 1;
                summary.peers += u64::from(n);
                failed = w.block(&body, 1).err();
                (from, first) = (next, false);
                if done {
                    break;
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        w.put(&0u32.to_le_bytes())?;
        w.put(&summary.torrents.to_le_bytes())?;
        w.put(&summary.peers.to_le_bytes())?;
        let total = w.crc.clone().finalize();
        w.inner.write_all(&total.to_le_bytes())?;
        w.inner.flush()?;
        summary.crc = total;
        Ok(summary)
    }
}
