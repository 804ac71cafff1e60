//! The full scrape's document (`/scrape` without `info_hash`): every torrent's figures in
//! one bencoded dictionary, built from the store as it is ([`build`]).
//!
//! It is kept in one form only: gzip when gzip is on (the default), about 22-26 bytes a
//! torrent against 70 plain, so at 5 million torrents 112 MB instead of the 490 MB that
//! both forms took. A client that does not take gzip is sent the plain form inflated as it
//! is written ([`Document::inflate`]). The build never holds the plain form either: it
//! collects the torrents in at most `MAX_PASSES` (16) passes over the store, each taking the
//! info hashes of one range of first bytes (so that each pass sorts a part, and the parts
//! follow each other in order), and writes each part into the compressor as it goes.
//! The server caches a build and rebuilds it on a thread of its own, while clients ask for
//! it.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use shoal_proto::bencode::{ScrapeFile, ScrapeWriter};
use shoal_proto::InfoHash;

use crate::decide::Core;

/// Torrents a pass of the build collects at most, about (32 bytes each): the build's
/// scratch memory beside the document.
const PER_PASS: usize = 1 << 20;
/// Passes of the build at most (a power of two, at most 256: one per first byte).
const MAX_PASSES: usize = 16;
/// Bytes handed to the compressor at a time, and inflated at a time for a plain reader.
pub const CHUNK: usize = 64 * 1024;

/// One build of the full-scrape document.
#[derive(Debug, Default)]
pub struct Document {
    /// The document, gzip-compressed if `gzip`.
    pub body: Vec<u8>,
    pub gzip: bool,
    /// Length of the plain (bencoded) document.
    pub plain_len: usize,
    pub torrents: usize,
}

impl Document {
    /// The bytes to send and their length, plain or gzip as the client asked (`gzip`) and
    /// the document holds: `None` where it must be inflated for a client that does not
    /// take gzip ([`Document::inflate`]).
    pub fn as_sent(&self, gzip: bool) -> Option<&[u8]> {
        (!self.gzip || gzip).then_some(&self.body[..])
    }

    /// The length of what is sent to a client that asked for gzip (`gzip`) or not.
    pub fn sent_len(&self, gzip: bool) -> usize {
        if gzip && self.gzip {
            self.body.len()
        } else {
            self.plain_len
        }
    }

    /// The plain document, inflated a chunk at a time from the gzip form.
    pub fn inflate(&self) -> Inflate<'_> {
        Inflate {
            dec: flate2::read::GzDecoder::new(&self.body[..]),
            buf: vec![0; CHUNK],
        }
    }
}

/// The plain form of a gzip [`Document`], a chunk at a time.
pub struct Inflate<'a> {
    dec: flate2::read::GzDecoder<&'a [u8]>,
    buf: Vec<u8>,
}

impl Inflate<'_> {
    /// The next chunk (empty at the end).
    pub fn next_chunk(&mut self) -> io::Result<&[u8]> {
        let n = self.dec.read(&mut self.buf)?;
        Ok(&self.buf[..n])
    }
}

/// Where the build writes: a compressor or the plain buffer.
enum Sink {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Plain(Vec<u8>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Gzip(z) => z.write(buf),
            Sink::Plain(v) => v.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How many passes a build over `torrents` torrents takes (a power of two).
fn passes(torrents: usize) -> usize {
    torrents
        .div_ceil(PER_PASS)
        .next_power_of_two()
        .min(MAX_PASSES)
}

/// Builds the document from the store as it is now, listing the torrents the policy lets
/// every client see (`Policy::lists`), in as many passes as `about` torrents take (the
/// last build's count). `None` if `stop` was set before the last pass began (the process
/// stops: its final snapshot should not wait for a rebuild, seconds at 10 million
/// torrents).
pub fn build(core: &Core, gzip: bool, about: usize, stop: &AtomicBool) -> Option<Document> {
    build_in(core, gzip, passes(about), stop)
}

/// [`build`] in `passes` passes (a power of two, at most 256).
fn build_in(core: &Core, gzip: bool, passes: usize, stop: &AtomicBool) -> Option<Document> {
    let (store, policy) = (core.swarms(), core.policy());
    let shift = 8 - passes.trailing_zeros();
    let mut sink = if gzip {
        Sink::Gzip(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ))
    } else {
        Sink::Plain(Vec::new())
    };
    let mut buf = Vec::with_capacity(CHUNK + 256);
    let mut w = ScrapeWriter::begin(&mut buf);
    let (mut plain_len, mut torrents) = (0, 0);
    let mut files: Vec<(InfoHash, ScrapeFile)> = Vec::new();
    for pass in 0..passes {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        files.clear();
        store.for_each_torrent(|h, t| {
            if passes > 1 && usize::from(h.0[0]) >> shift != pass || !policy.lists(h) {
                return;
            }
            let st = t.stats;
            files.push((
                *h,
                ScrapeFile {
                    complete: st.seeders,
                    downloaded: st.completed,
                    incomplete: st.leechers,
                },
            ));
        });
        files.sort_unstable_by_key(|f| f.0);
        files.dedup_by_key(|f| f.0);
        torrents += files.len();
        for (h, f) in &files {
            w.file(h, *f);
            if w.len() >= CHUNK {
                plain_len += w.len();
                // Writing into a Vec (plain, or through the compressor) cannot fail.
                let _ = w.drain_into(&mut sink);
            }
        }
    }
    w.end();
    plain_len += buf.len();
    let _ = sink.write_all(&buf);
    let body = match sink {
        Sink::Gzip(z) => z.finish().unwrap_or_default(),
        Sink::Plain(v) => v,
    };
    Some(Document {
        body,
        gzip,
        plain_len,
        torrents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::{CompactPeerV4, PeerId};
    use shoal_swarm::Peer;
    use std::net::Ipv4Addr;

    /// A core holding `n` torrents with hashes spread over every first byte, torrent `i`
    /// with `i % 3 + 1` peers, one of them a seeder.
    fn core_with(n: u32) -> Core {
        let core = Core::new(
            Default::default(),
            crate::swarms::Swarms::Open(shoal_swarm::Store::new(Default::default())),
            shoal_swarm::webtorrent::WebTorrentStore::new(Default::default()),
        );
        for i in 0..n {
            let mut h = [0u8; 20];
            h[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
            h[4..8].copy_from_slice(&i.to_le_bytes());
            for p in 0..(i % 3 + 1) {
                let peer = Peer {
                    peer_id: PeerId([p as u8; 20]),
                    addr: CompactPeerV4::new(Ipv4Addr::from(i), 1000 + p as u16),
                    expires: u32::MAX,
                    seeder: p == 0,
                };
                core.swarms().upsert_remote(&InfoHash(h), peer);
            }
        }
        core
    }

    fn plain_of(d: &Document) -> Vec<u8> {
        let mut all = Vec::new();
        let mut r = d.inflate();
        loop {
            let c = r.next_chunk().unwrap();
            if c.is_empty() {
                break;
            }
            all.extend_from_slice(c);
        }
        all
    }

    #[test]
    fn every_pass_count_writes_the_same_sorted_document_in_one_form() {
        let core = core_with(20_000);
        let go = AtomicBool::new(false);
        let one = build_in(&core, false, 1, &go).unwrap();
        assert_eq!(one.torrents, 20_000);
        assert_eq!(one.plain_len, one.body.len());
        assert_eq!(one.as_sent(true), Some(&one.body[..]));
        // The plain build is the document `write_scrape` writes of the same figures.
        let mut files = Vec::new();
        core.swarms().for_each_torrent(|h, t| {
            let f = ScrapeFile {
                complete: t.stats.seeders,
                downloaded: t.stats.completed,
                incomplete: t.stats.leechers,
            };
            files.push((*h, f));
        });
        let mut whole = Vec::new();
        shoal_proto::bencode::write_scrape(&mut whole, &mut files);
        assert_eq!(one.body, whole);
        assert!(shoal_proto::bencode::decode(&one.body)
            .unwrap()
            .is_canonical());
        for passes in [2, 16, 256] {
            let d = build_in(&core, true, passes, &go).unwrap();
            assert!(d.gzip);
            assert_eq!(d.torrents, 20_000);
            assert_eq!(d.plain_len, one.body.len(), "{passes} passes");
            // Its body is gzip, several times smaller than plain; a client without gzip gets
            // it inflated, chunk by chunk, to the same bytes.
            assert!(d.body.len() * 2 < d.plain_len);
            assert_eq!(d.as_sent(false), None);
            assert_eq!(d.sent_len(false), d.plain_len);
            assert_eq!(d.sent_len(true), d.body.len());
            assert_eq!(plain_of(&d), one.body, "{passes} passes");
        }
        let stopped = AtomicBool::new(true);
        assert!(build_in(&core, true, 4, &stopped).is_none(), "given up");
        assert_eq!(passes(0), 1);
        assert_eq!(passes(PER_PASS), 1);
        assert_eq!(passes(PER_PASS + 1), 2);
        assert_eq!(passes(5_050_672), 8);
        assert_eq!(passes(100_000_000), MAX_PASSES);
    }
}
