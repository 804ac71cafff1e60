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

/// Source address for socket `k`: spread over loopback as TCP connections are (see
/// [`crate::net`]), else the unspecified address of the target's family.
pub fn source_ip(target: IpAddr, n: u32, k: u32) -> IpAddr {
    crate::net::source_ip(target, n, k).unwrap_or(match target {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addresses_cycle_over_loopback() {
        let t: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(source_ip(t, 4, 0).to_string(), "127.0.0.1");
        assert_eq!(source_ip(t, 4, 5).to_string(), "127.0.0.2");
        assert_eq!(source_ip(t, 0, 5).to_string(), "0.0.0.0");
    }
}
