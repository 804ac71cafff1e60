//! The `/stats` bodies that list torrents: the `tpbs` full scrape in each `format`, and the
//! `top10` and `top100` lists (`ot_fullscrape.c`, `ot_stats.c`).
//!
//! Info hashes are upper-case hex, as opentracker writes them. opentracker lists torrents
//! in the order of its buckets; these list them by info hash, which a bencoded dictionary
//! needs anyway and which keeps the output the same for the same swarms.

use std::fmt::Write;

/// One torrent's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Torrent {
    pub info_hash: [u8; 20],
    pub seeds: u64,
    /// Peers, seeders included (opentracker's `peer_count`).
    pub peers: u64,
    pub downloaded: u64,
}

impl Torrent {
    fn leechers(&self) -> u64 {
        self.peers.saturating_sub(self.seeds)
    }
}

/// Upper-case hex, as opentracker's `to_hex`.
pub fn hex_upper(bytes: &[u8], out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

fn sorted(torrents: &mut [Torrent]) {
    torrents.sort_unstable_by_key(|t| t.info_hash);
}

/// `format=txt`: `HASH:seeders:leechers` a line.
pub fn tpbs_txt(torrents: &mut [Torrent]) -> Vec<u8> {
    sorted(torrents);
    let mut out = String::with_capacity(torrents.len() * 56);
    for t in torrents.iter() {
        hex_upper(&t.info_hash, &mut out);
        let _ = writeln!(out, ":{}:{}", t.seeds, t.leechers());
    }
    out.into_bytes()
}

/// `format=txtp`: `HASH:seeders:leechers:downloaded` a line.
pub fn tpbs_txtp(torrents: &mut [Torrent]) -> Vec<u8> {
    sorted(torrents);
    let mut out = String::with_capacity(torrents.len() * 64);
    for t in torrents.iter() {
        hex_upper(&t.info_hash, &mut out);
        let _ = writeln!(out, ":{}:{}:{}", t.seeds, t.leechers(), t.downloaded);
    }
    out.into_bytes()
}

/// `format=ben`: the bencoded full scrape, `d5:filesd` ... `ee`.
pub fn tpbs_ben(torrents: &mut [Torrent]) -> Vec<u8> {
    sorted(torrents);
    let mut out = Vec::with_capacity(16 + torrents.len() * 80);
    out.extend_from_slice(b"d5:filesd");
    for t in torrents.iter() {
        out.extend_from_slice(b"20:");
        out.extend_from_slice(&t.info_hash);
        out.extend_from_slice(
            format!(
                "d8:completei{}e10:downloadedi{}e10:incompletei{}ee",
                t.seeds,
                t.downloaded,
                t.leechers()
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"ee");
    out
}

/// `format=bin`: the 20-byte info hash, then seeders and leechers as big-endian 32-bit
/// numbers (truncated to 32 bits, as there).
pub fn tpbs_bin(torrents: &mut [Torrent]) -> Vec<u8> {
    sorted(torrents);
    let mut out = Vec::with_capacity(torrents.len() * 28);
    for t in torrents.iter() {
        out.extend_from_slice(&t.info_hash);
        out.extend_from_slice(&(t.seeds as u32).to_be_bytes());
        out.extend_from_slice(&(t.leechers() as u32).to_be_bytes());
    }
    out
}

/// `top10` / `top100` (`amount`, at most 100): the torrents with the most peers, then those
/// with the most seeders, each as a tab, the count, a tab and the hex info hash. A torrent
/// with none is not listed (opentracker only takes counts above the lowest kept, which
/// starts at zero); equal counts are in info-hash order.
pub fn top(torrents: &[Torrent], amount: usize) -> String {
    let amount = amount.min(100);
    let mut out = String::new();
    for (title, key) in [
        ("peers", (|t: &Torrent| t.peers) as fn(&Torrent) -> u64),
        ("seeds", |t: &Torrent| t.seeds),
    ] {
        let mut ranked: Vec<&Torrent> = torrents.iter().filter(|t| key(t) > 0).collect();
        ranked.sort_unstable_by(|a, b| key(b).cmp(&key(a)).then(a.info_hash.cmp(&b.info_hash)));
        let _ = writeln!(out, "Top {amount} torrents by {title}:");
        for t in ranked.into_iter().take(amount) {
            let _ = write!(out, "\t{}\t", key(t));
            hex_upper(&t.info_hash, &mut out);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(b: u8, seeds: u64, peers: u64, downloaded: u64) -> Torrent {
        Torrent {
            info_hash: [b; 20],
            seeds,
            peers,
            downloaded,
        }
    }

    #[test]
    fn txt_lines_are_hex_seeders_leechers() {
        let mut list = [t(0xab, 1, 3, 9), t(0x01, 0, 2, 0)];
        let txt = String::from_utf8(tpbs_txt(&mut list)).unwrap();
        assert_eq!(
            txt,
            format!("{}:0:2\n{}:1:2\n", "01".repeat(20), "AB".repeat(20))
        );
        let txtp = String::from_utf8(tpbs_txtp(&mut list)).unwrap();
        assert!(txtp.ends_with(&format!("{}:1:2:9\n", "AB".repeat(20))));
    }

    #[test]
    fn ben_is_a_bencoded_scrape() {
        let mut list = [t(b'x', 1, 3, 9)];
        let ben = tpbs_ben(&mut list);
        let want = format!(
            "d5:filesd20:{}d8:completei1e10:downloadedi9e10:incompletei2eeee",
            "x".repeat(20)
        );
        assert_eq!(ben, want.as_bytes());
        assert_eq!(tpbs_ben(&mut []), b"d5:filesdee");
    }

    #[test]
    fn bin_is_28_bytes_a_torrent() {
        let bin = tpbs_bin(&mut [t(7, 1, 3, 0)]);
        assert_eq!(bin.len(), 28);
        assert_eq!(&bin[20..], &[0, 0, 0, 1, 0, 0, 0, 2]);
    }

    #[test]
    fn top_ranks_by_peers_then_by_seeds() {
        let list = [t(1, 0, 5, 0), t(2, 3, 3, 0), t(3, 0, 0, 0)];
        assert_eq!(
            top(&list, 10),
            format!(
                "Top 10 torrents by peers:\n\t5\t{}\n\t3\t{}\nTop 10 torrents by seeds:\n\t3\t{}\n",
                "01".repeat(20),
                "02".repeat(20),
                "02".repeat(20)
            )
        );
        assert!(top(&list, 1000).starts_with("Top 100 torrents by peers:\n"));
    }
}
