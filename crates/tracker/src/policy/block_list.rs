//! The block list: networks (CIDR ranges) whose requests are never served, on any protocol.
//!
//! Loaded from the file `block_list.path` (one network per line, `10.0.0.0/8`,
//! `2001:db8::/32`, or one address; `#` comments; the format the access list uses, read
//! by the shared [`list_file`]), swapped in whole on SIGHUP or an admin API edit like the
//! access list, so workers read it without a lock.
//!
//! A lookup is a binary search: the networks are turned into sorted, merged ranges of
//! integers per family, so a list of a hundred thousand networks costs about seventeen
//! comparisons. IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) are stored as the IPv4
//! networks they are, and every address is looked up in its canonical form.
//!
//! What a blocked client gets is decided by each front end (see `docs/abuse.md`): no
//! reply over UDP, a closed connection over HTTP (no status that would confirm a tracker
//! is there), a closed WebSocket.

use std::net::IpAddr;
use std::path::Path;

use anyhow::Context;
use ipnet::{IpNet, Ipv4Net};

use super::list_file;

/// A loaded block list.
#[derive(Clone, Debug, Default)]
pub struct BlockList {
    /// IPv4 ranges (as integers) ...
    v4: Vec<(u128, u128)>,
    /// ... and IPv6 ranges, sorted and merged.
    v6: Vec<(u128, u128)>,
    /// The networks as listed (canonical, host bits cleared), for the admin API.
    nets: Vec<IpNet>,
}

/// A network in canonical form: IPv4-mapped IPv6 networks as IPv4, host bits cleared.
pub fn canonical(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net {
        if let (Some(v4), true) = (v6.addr().to_ipv4_mapped(), v6.prefix_len() >= 96) {
            if let Ok(n) = Ipv4Net::new(v4, v6.prefix_len() - 96) {
                return IpNet::V4(n.trunc());
            }
        }
    }
    net.trunc()
}

/// Parses an entry of the file or the admin API: a network or one address, with `_` or
/// `%2F` accepted for the slash (a path segment cannot hold one).
pub fn parse_entry(text: &str) -> anyhow::Result<IpNet> {
    let text = text
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace('_', "/");
    Ok(canonical(parse_net(&text)?))
}

/// Parses a network (`address/prefix-length`) or one address (a network of one).
pub fn parse_net(s: &str) -> anyhow::Result<IpNet> {
    let s = s.trim();
    if s.contains('/') {
        s.parse().context("not an address/prefix-length network")
    } else {
        Ok(IpNet::from(
            s.parse::<IpAddr>().context("not an IP address")?,
        ))
    }
}

/// Sorts and merges ranges that touch or overlap.
fn merged(mut ranges: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    ranges.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Whether `x` is in one of the sorted, disjoint `ranges`.
fn within(ranges: &[(u128, u128)], x: u128) -> bool {
    // The last range starting at or before x.
    let i = ranges.partition_point(|&(lo, _)| lo <= x);
    i > 0 && x <= ranges[i - 1].1
}

impl BlockList {
    pub fn new(nets: impl IntoIterator<Item = IpNet>) -> Self {
        let mut nets: Vec<IpNet> = nets.into_iter().map(canonical).collect();
        nets.sort_unstable();
        nets.dedup();
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for net in &nets {
            match net {
                IpNet::V4(n) => v4.push((
                    u32::from(n.network()).into(),
                    u32::from(n.broadcast()).into(),
                )),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        Self {
            v4: merged(v4),
            v6: merged(v6),
            nets,
        }
    }

    /// Parses the file format; a bad line is an error that names it.
    pub fn parse(text: &str, path: &str) -> anyhow::Result<Self> {
        let nets = list_file::entries(text)
            .map(|(line, entry)| {
                parse_entry(entry)
                    .with_context(|| format!("block list {path}, line {line}: {entry:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self::new(nets))
    }

    /// Loads the list from `path`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading block list {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Whether requests from `ip` are refused.
    #[inline]
    pub fn blocks(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(v4) => !self.v4.is_empty() && within(&self.v4, u32::from(v4).into()),
            IpAddr::V6(v6) => !self.v6.is_empty() && within(&self.v6, u128::from(v6)),
        }
    }

    /// The networks as listed (canonical, sorted).
    pub fn nets(&self) -> &[IpNet] {
        &self.nets
    }

    pub fn len(&self) -> usize {
        self.nets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
}

/// Adds (`add`) or removes `net` in the block-list file at `path` (comments and other
/// lines kept). Returns the new list, or `None` when the file already said so.
pub fn edit_file(path: &Path, net: IpNet, add: bool) -> anyhow::Result<Option<BlockList>> {
    let net = canonical(net);
    let same = |entry: &str| parse_entry(entry).is_ok_and(|n| n == net);
    let parse = |text: &str| BlockList::parse(text, &path.display().to_string());
    list_file::edit(path, &net.to_string(), add, same, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_and_addresses_block_their_members_only() {
        let text = "# bad\n10.0.0.0/8\n192.168.1.7 # one\n2001:db8::/32\n::ffff:172.16.0.0/108\n";
        let l = BlockList::parse(text, "f").unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(l.len(), 4);
        for blocked in [
            "10.0.0.0",
            "10.255.255.255",
            "::ffff:10.1.2.3",
            "192.168.1.7",
            "2001:db8:ffff::1",
            "172.16.0.1",
        ] {
            assert!(l.blocks(ip(blocked)), "{blocked}");
        }
        for served in [
            "9.255.255.255",
            "11.0.0.0",
            "192.168.1.8",
            "2001:db9::1",
            "::1",
        ] {
            assert!(!l.blocks(ip(served)), "{served}");
        }
        assert_eq!(l.nets()[0].to_string(), "10.0.0.0/8");
        assert!(l.nets().iter().any(|n| n.to_string() == "172.16.0.0/12"));
        let err = BlockList::parse("10.0.0.0/8\nnope\n", "f").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
    }

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let nets = ["10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "0.0.0.0/1"];
        let l = BlockList::new(nets.iter().map(|n| n.parse().unwrap()));
        assert_eq!(l.v4, vec![(0, u128::from(u32::MAX >> 1))]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let all = BlockList::new(["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()]);
        assert!(all.blocks(ip("255.255.255.255")) && all.blocks(ip("ffff::1")));
        assert!(!BlockList::default().blocks(ip("1.2.3.4")));
    }

    #[test]
    fn api_entries_take_the_slash_in_any_spelling() {
        let want: IpNet = "10.1.0.0/16".parse().unwrap();
        for text in [
            "10.1.0.0/16",
            "10.1.0.0_16",
            "10.1.0.0%2F16",
            "10.1.2.3%2f16",
        ] {
            assert_eq!(parse_entry(text).unwrap(), want, "{text}");
        }
        assert_eq!(parse_entry("::1").unwrap().to_string(), "::1/128");
        assert!(parse_entry("10.0.0.0_33").is_err());
    }

    #[test]
    fn edits_keep_the_file_and_say_when_nothing_changed() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blocked");
        std::fs::write(&path, "# kept\n10.0.0.0/8\n").unwrap();
        let net = parse_entry("192.168.0.0_16").unwrap();
        let l = edit_file(&path, net, true).unwrap().unwrap();
        assert!(l.blocks(ip("192.168.3.4")));
        assert!(edit_file(&path, net, true).unwrap().is_none());
        let l = edit_file(&path, parse_entry("10.9.9.9/8").unwrap(), false)
            .unwrap()
            .unwrap();
        assert!(!l.blocks(ip("10.0.0.1")));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "# kept\n192.168.0.0/16\n");
    }
}
