//! The PROXY protocol header (HAProxy's, versions 1 and 2) that a load balancer sends
//! before a proxied connection's own bytes, naming the client's address.
//!
//! A small strict parser rather than a crate: the server needs only the source address and
//! the header's length (to consume exactly the header, so that what follows, an HTTP
//! request or a TLS handshake, is untouched), and strictness is what makes it safe on bytes
//! from the network:
//!
//! - v1 (text): `PROXY TCP4 <src> <dst> <sport> <dport>\r\n` (or `TCP6`, or `UNKNOWN` with
//!   anything up to the CRLF), at most 107 bytes, single spaces, addresses of the named
//!   family in their plain form, ports in decimal without sign or leading zero.
//! - v2 (binary): the 12-byte signature, version 2, command LOCAL or PROXY, a family and
//!   transport byte, a length, the addresses, then TLVs (skipped, not read). A header
//!   longer than [`MAX_V2_LEN`] bytes is refused rather than buffered.
//!
//! LOCAL (v2) and UNKNOWN (v1) headers, and v2 families other than IPv4 and IPv6, carry
//! no client address: the proxy speaks for itself (a health check), and the caller uses
//! the connection's own address.
//!
//! [`parse`] is sans-IO: give it the bytes received so far; it says how long the header is
//! and whom it names, that more bytes are needed, or why they are no PROXY header.
//! `fuzz/fuzz_targets/proxy_header.rs` feeds it arbitrary bytes and round-trips what
//! [`write_v1`] and [`write_v2`] produce.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The v2 signature: `\r\n\r\n\0\r\nQUIT\n`.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 header, CRLF included.
pub const V1_MAX_LEN: usize = 107;
/// The longest v2 header taken (16 fixed bytes and the addresses and TLVs after them).
pub const MAX_V2_LEN: usize = 1024;

/// A complete header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    /// Bytes of the header, from the start of the input.
    pub len: usize,
    /// The client's address; `None` when the header names none (LOCAL, UNKNOWN, or a
    /// family other than IPv4 and IPv6).
    pub source: Option<SocketAddr>,
    /// The address the client connected to, when the header names one.
    pub destination: Option<SocketAddr>,
}

/// Why bytes are not (yet) a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProxyHeaderError {
    /// What arrived so far is the start of a header: read more.
    #[error("incomplete PROXY header")]
    Incomplete,
    /// Not a PROXY header, or a malformed one.
    #[error("invalid PROXY header: {0}")]
    Invalid(&'static str),
}

use ProxyHeaderError::{Incomplete, Invalid};

/// Whether `buf` starts like a PROXY header of either version (as far as it goes), for
/// refusing one where none may come.
pub fn looks_like_header(buf: &[u8]) -> bool {
    let (v1, v2) = (buf.len().min(6), buf.len().min(12));
    !buf.is_empty() && (buf[..v1] == b"PROXY "[..v1] || buf[..v2] == V2_SIGNATURE[..v2])
}

/// Parses the header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
    let n = buf.len().min(12);
    if n == 0 {
        return Err(Incomplete);
    }
    if buf[..n] == V2_SIGNATURE[..n] {
        return if n < 12 {
            Err(Incomplete)
        } else {
            parse_v2(buf)
        };
    }
    let m = buf.len().min(6);
    if buf[..m] == b"PROXY "[..m] {
        return if m < 6 {
            Err(Incomplete)
        } else {
            parse_v1(buf)
        };
    }
    Err(Invalid("no PROXY signature"))
}

fn parse_v1(buf: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX_LEN {
            Err(Invalid("v1 header longer than 107 bytes"))
        } else if window.contains(&b'\n') {
            Err(Invalid("v1 header with a bare LF"))
        } else {
            Err(Incomplete)
        };
    };
    let line = &buf[6..end];
    if !line.iter().all(|&b| (b' '..=b'~').contains(&b)) {
        return Err(Invalid("v1 header not printable ASCII"));
    }
    let line = std::str::from_utf8(line).map_err(|_| Invalid("v1 header not ASCII"))?;
    let len = end + 2;
    if line == "UNKNOWN" || line.starts_with("UNKNOWN ") {
        return Ok(ProxyHeader {
            len,
            source: None,
            destination: None,
        });
    }
    let mut parts = line.split(' ');
    let (Some(proto), Some(src), Some(dst), Some(sport), Some(dport), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(Invalid("v1 header does not have six fields"));
    };
    let (src, dst) = match proto {
        "TCP4" => (v4(src)?, v4(dst)?),
        "TCP6" => (v6(src)?, v6(dst)?),
        _ => return Err(Invalid("v1 protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    Ok(ProxyHeader {
        len,
        source: Some(SocketAddr::new(src, port(sport)?)),
        destination: Some(SocketAddr::new(dst, port(dport)?)),
    })
}

fn v4(s: &str) -> Result<IpAddr, ProxyHeaderError> {
    s.parse::<Ipv4Addr>()
        .map(IpAddr::V4)
        .map_err(|_| Invalid("v1 address is not IPv4"))
}

fn v6(s: &str) -> Result<IpAddr, ProxyHeaderError> {
    s.parse::<Ipv6Addr>()
        .map(IpAddr::V6)
        .map_err(|_| Invalid("v1 address is not IPv6"))
}

fn port(s: &str) -> Result<u16, ProxyHeaderError> {
    let plain =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    plain
        .then(|| s.parse().ok())
        .flatten()
        .ok_or(Invalid("v1 port is not a number from 0 to 65535"))
}

fn parse_v2(buf: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
    let Some(fixed) = buf.get(..16) else {
        return match buf.get(12) {
            Some(b) if b >> 4 != 2 => Err(Invalid("v2 version is not 2")),
            _ => Err(Incomplete),
        };
    };
    let (version, command) = (fixed[12] >> 4, fixed[12] & 0x0f);
    if version != 2 {
        return Err(Invalid("v2 version is not 2"));
    }
    if command > 1 {
        return Err(Invalid("v2 command is neither LOCAL nor PROXY"));
    }
    let family = fixed[13];
    let body_len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    let len = 16 + body_len;
    if len > MAX_V2_LEN {
        return Err(Invalid("v2 header longer than shoal takes"));
    }
    let Some(body) = buf.get(16..len) else {
        return Err(Incomplete);
    };
    let addrs = match family >> 4 {
        1 if body_len < 12 => return Err(Invalid("v2 IPv4 addresses cut short")),
        2 if body_len < 36 => return Err(Invalid("v2 IPv6 addresses cut short")),
        0..=3 => addresses(family, body),
        _ => return Err(Invalid("v2 address family unknown")),
    };
    if family & 0x0f > 2 {
        return Err(Invalid("v2 transport unknown"));
    }
    let (source, destination) = match (command, addrs) {
        (1, Some((src, dst))) => (Some(src), Some(dst)),
        _ => (None, None),
    };
    Ok(ProxyHeader {
        len,
        source,
        destination,
    })
}

/// The (source, destination) of an IPv4 or IPv6 family's address block: both
/// addresses, then both ports.
fn addresses(family: u8, body: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let width = match family >> 4 {
        1 => 4,
        2 => 16,
        _ => return None,
    };
    let ip = |at: usize| -> Option<IpAddr> {
        let bytes = body.get(at..at + width)?;
        Some(match <[u8; 4]>::try_from(bytes) {
            Ok(v4) => IpAddr::from(v4),
            Err(_) => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        })
    };
    let port = |at: usize| Some(u16::from_be_bytes(body.get(at..at + 2)?.try_into().ok()?));
    let ports = 2 * width;
    Some((
        SocketAddr::new(ip(0)?, port(ports)?),
        SocketAddr::new(ip(width)?, port(ports + 2)?),
    ))
}

/// Appends a v1 header for a TCP connection from `src` to `dst` (of one family; `None`
/// writes `UNKNOWN`).
pub fn write_v1(addrs: Option<(SocketAddr, SocketAddr)>, out: &mut Vec<u8>) {
    let line = match addrs {
        Some((SocketAddr::V4(s), SocketAddr::V4(d))) => format!(
            "PROXY TCP4 {} {} {} {}\r\n",
            s.ip(),
            d.ip(),
            s.port(),
            d.port()
        ),
        Some((SocketAddr::V6(s), SocketAddr::V6(d))) => format!(
            "PROXY TCP6 {} {} {} {}\r\n",
            s.ip(),
            d.ip(),
            s.port(),
            d.port()
        ),
        _ => "PROXY UNKNOWN\r\n".to_string(),
    };
    out.extend_from_slice(line.as_bytes());
}

/// Appends a v2 header: PROXY for a TCP connection from `src` to `dst` (of one family)
/// followed by `tlvs` bytes, or LOCAL for `None`.
pub fn write_v2(addrs: Option<(SocketAddr, SocketAddr)>, tlvs: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&V2_SIGNATURE);
    let mut body = Vec::new();
    let (command, family) = match addrs {
        Some((s, d)) if s.is_ipv4() == d.is_ipv4() => {
            for ip in [s.ip(), d.ip()] {
                match ip {
                    IpAddr::V4(a) => body.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => body.extend_from_slice(&a.octets()),
                }
            }
            body.extend_from_slice(&s.port().to_be_bytes());
            body.extend_from_slice(&d.port().to_be_bytes());
            (0x21, if s.is_ipv4() { 0x11 } else { 0x21 })
        }
        _ => (0x20, 0x00),
    };
    body.extend_from_slice(tlvs);
    out.extend_from_slice(&[command, family]);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address, in the tests' own words.
    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    #[test]
    fn v1_headers_parse_strictly() {
        let text = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
        let h = parse(text).unwrap();
        assert_eq!(h.len, 45);
        assert_eq!(h.source, Some(addr("192.0.2.1:56324")));
        assert_eq!(h.destination, Some(addr("198.51.100.2:443")));
        let h = parse(b"PROXY TCP6 2001:db8::1 ::1 1 2\r\n").unwrap();
        assert_eq!(h.source, Some(addr("[2001:db8::1]:1")));
        let h = parse(b"PROXY UNKNOWN ffff::1 1 2 3\r\nx").unwrap();
        assert_eq!((h.len, h.source), (29, None));
        // Each line with its CRLF: what is wrong with it is in its own words.
        let bad = "TCP4 192.0.2.1 198.51.100.2 56324 443 9 (seven fields)\n\
                   TCP4 192.0.2.1  198.51.100.2 1 2\n\
                   TCP4 ::1 ::1 1 2\n\
                   TCP6 1.2.3.4 1.2.3.4 1 2\n\
                   TCP4 1.2.3.4 1.2.3.4 01 2\n\
                   TCP4 1.2.3.4 1.2.3.4 +1 2\n\
                   TCP4 1.2.3.4 1.2.3.4 65536 2\n\
                   TCP4 01.2.3.4 1.2.3.4 1 2\n\
                   UDP4 1.2.3.4 1.2.3.4 1 2\n\
                   UNKNOWN \r";
        for line in bad.lines() {
            let header = format!("PROXY {line}\r\n");
            assert!(
                matches!(parse(header.as_bytes()), Err(Invalid(_))),
                "{line}"
            );
        }
        for raw in [
            "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n",
            "PROXY UNKNOWN a\nb\r\n",
            "GET /\r\n",
        ] {
            assert!(matches!(parse(raw.as_bytes()), Err(Invalid(_))), "{raw:?}");
        }
        assert!(matches!(parse(&[b'x'; 200]), Err(Invalid(_))));
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(120, b'a');
        assert!(matches!(parse(&long), Err(Invalid(_))), "over 107 bytes");
    }

    #[test]
    fn every_prefix_of_a_header_is_incomplete() {
        let mut v1 = Vec::new();
        write_v1(Some((addr("10.0.0.1:1"), addr("10.0.0.2:2"))), &mut v1);
        let mut v2 = Vec::new();
        let v6 = (addr("[2001:db8::5]:7"), addr("[::1]:80"));
        write_v2(Some(v6), &[0x04, 0, 1, 0], &mut v2);
        for whole in [v1, v2] {
            for n in 0..whole.len() {
                assert_eq!(parse(&whole[..n]), Err(Incomplete), "{n} of {whole:?}");
                assert!(looks_like_header(&whole[..n]) || n == 0);
            }
            assert_eq!(parse(&whole).unwrap().len, whole.len());
        }
    }

    #[test]
    fn v2_headers_round_trip_and_local_names_nobody() {
        for (src, dst) in [
            ("192.0.2.9:40000", "127.0.0.1:6969"),
            ("[2001:db8::9]:40000", "[::1]:6969"),
        ] {
            let (src, dst) = (addr(src), addr(dst));
            let mut out = Vec::new();
            write_v2(Some((src, dst)), b"\x05\x00\x02id", &mut out);
            out.extend_from_slice(b"GET /");
            let h = parse(&out).unwrap();
            assert_eq!((h.source, h.destination), (Some(src), Some(dst)));
            assert_eq!(&out[h.len..], b"GET /");
            let mut text = Vec::new();
            write_v1(Some((src, dst)), &mut text);
            assert_eq!(parse(&text).unwrap().source, Some(src));
        }
        let mut local = Vec::new();
        write_v2(None, &[], &mut local);
        assert_eq!(parse(&local).unwrap().source, None);
    }

    #[test]
    fn bad_v2_headers_are_refused() {
        let mut good = Vec::new();
        write_v2(Some((addr("1.2.3.4:1"), addr("5.6.7.8:2"))), &[], &mut good);
        let with = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] = byte;
            parse(&b)
        };
        assert!(matches!(with(12, 0x11), Err(Invalid(_))), "version 1");
        assert!(matches!(with(12, 0x22), Err(Invalid(_))), "command 2");
        assert!(matches!(with(13, 0x41), Err(Invalid(_))), "family 4");
        assert!(matches!(with(13, 0x13), Err(Invalid(_))), "transport 3");
        assert!(
            matches!(with(15, 4), Err(Invalid(_))),
            "IPv4 block too short"
        );
        assert!(
            matches!(with(13, 0x21), Err(Invalid(_))),
            "IPv6 block too short"
        );
        let mut huge = good.clone();
        huge[14..16].copy_from_slice(&2000u16.to_be_bytes());
        assert!(matches!(parse(&huge), Err(Invalid(_))));
        // A Unix-socket family is taken, naming nobody.
        let mut unix = V2_SIGNATURE.to_vec();
        unix.extend_from_slice(&[0x21, 0x31, 0, 216]);
        unix.resize(16 + 216, 0);
        assert_eq!(parse(&unix).unwrap().source, None);
    }
}
