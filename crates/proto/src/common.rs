//! The tracker's vocabulary, shared by the UDP, HTTP and WebTorrent codecs.
//!
//! Binary identifiers are fixed-size newtypes over byte arrays so that they can be cast
//! from packet bytes without copying (`bytemuck`), and compact peers are stored exactly in
//! their wire form (BEP 23 / BEP 15), so a response is a `memcpy` of what the store holds.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use bytemuck::{Pod, Zeroable};

macro_rules! hash20 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Pod, Zeroable)]
        #[repr(transparent)]
        pub struct $name(pub [u8; 20]);

        impl $name {
            /// Parses 40 hexadecimal digits (either case).
            pub fn from_hex(s: &str) -> Option<Self> {
                let s = s.as_bytes();
                if s.len() != 40 {
                    return None;
                }
                let mut out = [0u8; 20];
                for (i, pair) in s.chunks_exact(2).enumerate() {
                    out[i] = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
                }
                Some(Self(out))
            }

            /// Lower-case hexadecimal form (40 digits).
            pub fn to_hex(&self) -> String {
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                let mut s = String::with_capacity(40);
                for b in self.0 {
                    s.push(DIGITS[(b >> 4) as usize] as char);
                    s.push(DIGITS[(b & 15) as usize] as char);
                }
                s
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.to_hex())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }
    };
}

/// What a tracker request asks for, on every protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Announce,
    Scrape,
}

impl Action {
    /// Its name, as in a path (`/announce`) or a WebTorrent message's `action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Announce => "announce",
            Action::Scrape => "scrape",
        }
    }
}

/// The value of one hexadecimal digit (either case): for hex info hashes and for
/// percent-decoding.
#[inline]
pub(crate) fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

hash20!(
    /// The SHA-1 info hash that names a torrent (BEP 3), or a truncated v2 hash.
    InfoHash
);
hash20!(
    /// The 20-byte id a peer picks for itself.
    PeerId
);

/// What a peer says happened since its last announce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AnnounceEvent {
    /// A regular re-announce (no event).
    #[default]
    None,
    /// The peer finished downloading: it is now a seeder.
    Completed,
    /// The peer joined the swarm.
    Started,
    /// The peer left the swarm.
    Stopped,
}

/// An IPv4 peer in its 6-byte wire form: address then port, both big-endian (BEP 23).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
#[repr(transparent)]
pub struct CompactPeerV4(pub [u8; 6]);

/// An IPv6 peer in its 18-byte wire form: address then port, both big-endian (BEP 7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
#[repr(transparent)]
pub struct CompactPeerV6(pub [u8; 18]);

/// A compact peer's wire form: the address's `octets`, then the port, big-endian.
#[inline]
fn wire<const N: usize>(octets: &[u8], port: u16) -> [u8; N] {
    let mut b = [0u8; N];
    b[..N - 2].copy_from_slice(octets);
    b[N - 2..].copy_from_slice(&port.to_be_bytes());
    b
}

/// The port of a compact peer's wire form (its last two bytes).
#[inline]
fn wire_port<const N: usize>(b: &[u8; N]) -> u16 {
    u16::from_be_bytes([b[N - 2], b[N - 1]])
}

impl CompactPeerV4 {
    #[inline]
    pub fn new(ip: Ipv4Addr, port: u16) -> Self {
        Self(wire(&ip.octets(), port))
    }
    pub fn ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.0[0], self.0[1], self.0[2], self.0[3])
    }
    #[inline]
    pub fn port(&self) -> u16 {
        wire_port(&self.0)
    }
    pub fn addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ip(), self.port())
    }
}

impl CompactPeerV6 {
    #[inline]
    pub fn new(ip: Ipv6Addr, port: u16) -> Self {
        Self(wire(&ip.octets(), port))
    }
    pub fn ip(&self) -> Ipv6Addr {
        let mut o = [0u8; 16];
        o.copy_from_slice(&self.0[..16]);
        Ipv6Addr::from(o)
    }
    #[inline]
    pub fn port(&self) -> u16 {
        wire_port(&self.0)
    }
    pub fn addr(&self) -> SocketAddrV6 {
        SocketAddrV6::new(self.ip(), self.port(), 0, 0)
    }
}

impl fmt::Debug for CompactPeerV4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.addr())
    }
}

impl fmt::Debug for CompactPeerV6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.addr())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any event, for the codecs' round-trip property tests.
    pub(crate) fn arb_event() -> impl Strategy<Value = AnnounceEvent> {
        prop_oneof![
            Just(AnnounceEvent::None),
            Just(AnnounceEvent::Completed),
            Just(AnnounceEvent::Started),
            Just(AnnounceEvent::Stopped),
        ]
    }

    #[test]
    fn hex_round_trip_and_rejects_bad_input() {
        let h = InfoHash::from_hex("0123456789ABCDEFfedcba987654321000112233").unwrap();
        assert_eq!(h.to_hex(), "0123456789abcdeffedcba987654321000112233");
        assert!(InfoHash::from_hex("0123").is_none());
        assert!(InfoHash::from_hex("g123456789abcdeffedcba987654321000112233").is_none());
    }

    #[test]
    fn compact_peers_are_big_endian() {
        let p = CompactPeerV4::new(Ipv4Addr::new(10, 1, 2, 3), 6881);
        assert_eq!(p.0, [10, 1, 2, 3, 0x1a, 0xe1]);
        assert_eq!(p.port(), 6881);
        let p6 = CompactPeerV6::new(Ipv6Addr::LOCALHOST, 443);
        assert_eq!(&p6.0[15..], &[1, 1, 0xbb]);
        assert_eq!(p6.addr().to_string(), "[::1]:443");
    }
}
