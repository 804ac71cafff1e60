//! The client's address behind a reverse proxy: sans-IO, the request's headers in, an
//! address out.
//!
//! A proxy in front of the tracker puts the client's address in a header it names
//! (`X-Forwarded-For`, `X-Real-IP`, ...). The header is only believed when the connection
//! comes from one of the configured proxy addresses: anyone else could write any address
//! in it. Each proxy in a chain appends the address it saw, so the trustworthy entry is
//! counted from the right (`hop` 1 = the last one appended). Several headers of the same
//! name count as one comma-separated list, in order.
//!
//! A trusted proxy that sends no header, or one whose chosen entry is not an address, gets
//! an error the client can read, never a fallback to the proxy's own address (which would
//! put the proxy into every swarm) and never a panic.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// The reverse-proxy rules: the header, the hop, the proxies trusted to set it.
#[derive(Clone, Debug, Default)]
pub struct ProxyRules {
    /// Lower-cased header name; `None` when no proxy is configured.
    header: Option<String>,
    /// Display form of the header name, for error messages.
    display: String,
    hop: usize,
    trusted: Vec<IpNet>,
}

/// Why the client's address could not be found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("missing {0} header from the proxy")]
    Missing(String),
    #[error("malformed {0} header from the proxy")]
    Malformed(String),
}

impl ProxyRules {
    /// Believes `header` (none: empty) from the `trusted` networks, its entry `hop` from
    /// the right.
    pub fn new(header: &str, hop: usize, trusted: Vec<IpNet>) -> Self {
        Self {
            header: (!header.is_empty()).then(|| header.to_ascii_lowercase()),
            display: header.to_owned(),
            hop: hop.max(1),
            trusted,
        }
    }

    /// The client's address for a request from `peer` with these headers.
    pub fn client_ip(
        &self,
        peer: IpAddr,
        headers: &[httparse::Header<'_>],
    ) -> Result<IpAddr, ProxyError> {
        let peer = peer.to_canonical();
        let Some(name) = &self.header else {
            return Ok(peer);
        };
        if !self.trusted.iter().any(|n| n.contains(&peer)) {
            return Ok(peer);
        }
        let mut seen_header = false;
        let mut from_right = 0;
        for h in headers.iter().rev() {
            if !h.name.eq_ignore_ascii_case(name) {
                continue;
            }
            seen_header = true;
            for entry in h.value.rsplit(|&b| b == b',') {
                from_right += 1;
                if from_right == self.hop {
                    return parse_entry(entry)
                        .map(|ip| ip.to_canonical())
                        .ok_or_else(|| ProxyError::Malformed(self.display.clone()));
                }
            }
        }
        Err(if seen_header {
            // Fewer entries than hops: the chain is not what the operator said.
            ProxyError::Malformed(self.display.clone())
        } else {
            ProxyError::Missing(self.display.clone())
        })
    }
}

/// One entry: an address, optionally with a port (`1.2.3.4:80`, `[::1]:80`), with spaces
/// around it.
fn parse_entry(raw: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(raw).ok()?.trim();
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    // `[::1]` without a port.
    s.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h<'a>(name: &'a str, value: &'a str) -> httparse::Header<'a> {
        httparse::Header {
            name,
            value: value.as_bytes(),
        }
    }

    fn rules(hop: usize) -> ProxyRules {
        let trusted = vec![
            "10.0.0.0/8".parse().unwrap(),
            IpNet::from("::1".parse::<IpAddr>().unwrap()),
        ];
        ProxyRules::new("X-Forwarded-For", hop, trusted)
    }

    const PROXY: &str = "10.0.0.1";

    /// The address a request from `peer` with one `X-Forwarded-For: value` comes to.
    fn forwarded(peer: &str, value: &str) -> Result<IpAddr, ProxyError> {
        rules(1).client_ip(peer.parse().unwrap(), &[h("X-Forwarded-For", value)])
    }

    fn ip(s: &str) -> Result<IpAddr, ProxyError> {
        Ok(s.parse().unwrap())
    }

    #[test]
    fn no_header_configured_means_the_connection_address() {
        let r = ProxyRules::new("", 1, Vec::new());
        let ip = r
            .client_ip(PROXY.parse().unwrap(), &[h("X-Forwarded-For", "1.1.1.1")])
            .unwrap();
        assert_eq!(ip, PROXY.parse::<IpAddr>().unwrap());
    }

    #[test]
    fn untrusted_peers_cannot_set_the_address() {
        assert_eq!(forwarded("8.8.8.8", "1.1.1.1"), ip("8.8.8.8"));
    }

    #[test]
    fn hops_count_from_the_right_across_repeated_headers() {
        let headers = [
            h("x-forwarded-for", "1.1.1.1, 2.2.2.2"),
            h("Other", "x"),
            h("X-FORWARDED-FOR", " [2001:db8::1]:443 ,3.3.3.3:80"),
        ];
        let peer = PROXY.parse().unwrap();
        let get = |hop| rules(hop).client_ip(peer, &headers);
        assert_eq!(get(1), Ok("3.3.3.3".parse().unwrap()));
        assert_eq!(get(2), Ok("2001:db8::1".parse().unwrap()));
        assert_eq!(get(3), Ok("2.2.2.2".parse().unwrap()));
        assert_eq!(get(4), Ok("1.1.1.1".parse().unwrap()));
        assert!(matches!(get(5), Err(ProxyError::Malformed(_))));
    }

    #[test]
    fn missing_and_malformed_headers_are_errors() {
        let peer: IpAddr = "::1".parse().unwrap();
        assert_eq!(
            rules(1).client_ip(peer, &[h("Host", "x")]),
            Err(ProxyError::Missing("X-Forwarded-For".into()))
        );
        for bad in ["", "unknown", "1.2.3", "1.1.1.1,", "\u{fffd}"] {
            assert!(
                matches!(forwarded("::1", bad), Err(ProxyError::Malformed(_))),
                "{bad:?}"
            );
        }
        let bytes = httparse::Header {
            name: "X-Forwarded-For",
            value: b"\xff\xfe",
        };
        assert!(rules(1).client_ip(peer, &[bytes]).is_err());
    }

    #[test]
    fn mapped_addresses_are_canonical() {
        assert_eq!(
            forwarded("::ffff:10.0.0.1", "::ffff:1.2.3.4"),
            ip("1.2.3.4")
        );
    }
}
