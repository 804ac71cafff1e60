//! How a UDP load spreads over its workers and sockets: how many requests each socket
//! keeps in flight, and which loopback source address each socket sends from.
//!
//! Apart from the socket loop because it is decided once, before the run, from the flags
//! alone (and tested so).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Slots per socket, per worker: `--inflight` on every socket, or `--concurrency` spread
/// over as many sockets as there are slots (so a concurrency of 1 is one request at a time).
pub fn slots(
    workers: usize,
    sockets_per_worker: usize,
    inflight: usize,
    concurrency: Option<usize>,
) -> Vec<Vec<usize>> {
    let spw = sockets_per_worker.max(1);
    match concurrency {
        None => vec![vec![inflight.clamp(1, 65_535); spw]; workers],
        Some(c) => {
            let c = c.max(1);
            let nsock = (workers * spw).min(c);
            let mut layout = vec![Vec::new(); workers];
            for s in 0..nsock {
                let slots = c / nsock + usize::from(s < c % nsock);
                layout[s % workers].push(slots.min(65_535));
            }
            layout
        }
    }
}

/// The simulated peers behind one socket of a worker: the worker's peers `first, first +
/// stride, ...`, `count` of them. Worked out, not listed: a list of 30 million peer numbers
/// cost 120 MB and a pass over all of them per socket before the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    first: u32,
    stride: u32,
    count: u32,
    /// Fewer peers than sockets: this socket borrows one peer of another socket, and leaves
    /// it to that socket to announce it in a fill.
    borrowed: bool,
}

impl Share {
    /// The share of socket `s` of `sockets`, over a worker's `peers` peers.
    pub fn of(s: usize, sockets: usize, peers: usize) -> Share {
        let sockets = sockets.max(1);
        if s < peers {
            Share {
                first: s as u32,
                stride: sockets as u32,
                count: peers.saturating_sub(s).div_ceil(sockets) as u32,
                borrowed: false,
            }
        } else {
            Share {
                first: (s % peers.max(1)) as u32,
                stride: 1,
                count: 1,
                borrowed: true,
            }
        }
    }

    /// How many peers announce through this socket (at least one).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The worker's index of the `k`th peer of the share (`k < len()`).
    pub fn nth(&self, k: u32) -> usize {
        (self.first + k * self.stride) as usize
    }

    /// How many of its peers a fill announces through this socket.
    pub fn fill_count(&self) -> u32 {
        if self.borrowed {
            0
        } else {
            self.count
        }
    }
}

/// Source address for socket `k`: spread over loopback as TCP connections are (see
/// [`crate::net`]), else the unspecified address of the target's family.
pub fn source_ip(target: IpAddr, n: u32, k: u32) -> IpAddr {
    crate::net::source_ip(target, n, k).unwrap_or(match target {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    })
}

/// The address simulated peer `peer` announces with `--peer-ips`: 10.0.0.0 plus its number,
/// distinct for every peer up to 4 billion (wire order, as BEP 15's IP field).
pub fn peer_ip(peer: u32) -> [u8; 4] {
    (u32::from(Ipv4Addr::new(10, 0, 0, 0)).wrapping_add(peer)).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_ips_are_the_peers_numbers_after_ten_nought() {
        assert_eq!(peer_ip(0), [10, 0, 0, 0]);
        assert_eq!(peer_ip(258), [10, 0, 1, 2]);
        assert_eq!(peer_ip(29_999_999), [11, 201, 195, 127]);
    }

    #[test]
    fn shares_cover_every_peer_once_and_borrow_when_peers_are_few() {
        for (sockets, peers) in [(4, 10), (4, 4), (3, 1_000), (1, 7)] {
            let mut seen = vec![0; peers];
            for s in 0..sockets {
                let share = Share::of(s, sockets, peers);
                assert_eq!(share.fill_count(), share.count());
                for k in 0..share.count() {
                    seen[share.nth(k)] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{sockets} {peers}: {seen:?}");
        }
        // Two peers, four sockets: sockets 2 and 3 borrow peers 0 and 1 and fill none.
        let shares: Vec<Share> = (0..4).map(|s| Share::of(s, 4, 2)).collect();
        let firsts: Vec<usize> = shares.iter().map(|s| s.nth(0)).collect();
        assert_eq!(firsts, [0, 1, 0, 1]);
        let fills: Vec<u32> = shares.iter().map(|s| s.fill_count()).collect();
        assert_eq!(fills, [1, 1, 0, 0]);
    }

    #[test]
    fn source_addresses_cycle_over_loopback() {
        let t: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(source_ip(t, 4, 0).to_string(), "127.0.0.1");
        assert_eq!(source_ip(t, 4, 5).to_string(), "127.0.0.2");
        assert_eq!(source_ip(t, 0, 5).to_string(), "0.0.0.0");
    }
}
