//! The PROXY protocol (HAProxy's v1 and v2) on the HTTP and HTTPS listeners: behind a TCP
//! load balancer, the client's address comes in a header before the connection's own
//! bytes (before the TLS handshake on HTTPS).
//!
//! With `http.proxy_protocol` on, a connection from an address in `http.proxy_trusted` must
//! begin with a PROXY header, and its source address is the client's from then on (peer
//! lists, policy, rate limits); a trusted connection without one is closed. A connection
//! from any other address is served as itself, and one that begins with a PROXY header
//! anyway is refused with a 400 by the connection loop (`connection.rs`): nobody else may
//! say where a client is. LOCAL and UNKNOWN headers (a proxy's own health checks) leave the
//! connection's address as it is.
//!
//! The header is parsed by `shoal_proto::proxy_header` (sans-IO, fuzzed) from bytes peeked
//! at, then exactly its length is read off the socket, so the request or handshake after
//! it reaches the usual paths untouched. Reading it is bounded by `http.request_timeout_ms`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use shoal_proto::proxy_header::{self, ProxyHeaderError, MAX_V2_LEN};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout_at, Instant};

use crate::config::{parse_net, Config};

/// Which connections carry a PROXY header.
#[derive(Clone, Debug)]
pub struct ProxyProtocol {
    trusted: Vec<IpNet>,
}

impl ProxyProtocol {
    /// The rule `config` asks for; `None` when `http.proxy_protocol` is off.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Self>> {
        if !config.http.proxy_protocol {
            return Ok(None);
        }
        let trusted = config
            .http
            .proxy_trusted
            .iter()
            .map(|t| parse_net(t))
            .collect::<anyhow::Result<_>>()?;
        Ok(Some(Self { trusted }))
    }

    /// Whether a connection from `peer` must begin with a PROXY header.
    pub fn expects_header(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.trusted.iter().any(|n| n.contains(&peer))
    }
}

/// Counts a connection by what became of its PROXY header.
fn count(result: &'static str) {
    metrics::counter!("shoal_proxy_protocol_total", "result" => result).increment(1);
}

/// Reads the PROXY header at the start of `tcp` (from `remote`, a trusted proxy) within
/// `limit`: the client's address, or `remote` for a header that names none. `None` when
/// there is no valid header in time: the connection is to be closed.
pub async fn take_header(
    tcp: &mut TcpStream,
    remote: SocketAddr,
    limit: Duration,
) -> Option<SocketAddr> {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; MAX_V2_LEN];
    let header = loop {
        let n = match timeout_at(deadline, tcp.peek(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            Ok(_) => {
                count("closed");
                return None;
            }
            Err(_) => {
                count("timeout");
                return None;
            }
        };
        match proxy_header::parse(&buf[..n]) {
            Ok(header) => break header,
            // The rest is on its way: peek again shortly (a peek returns at once while
            // any byte is waiting, so it is paced; proxies send the header in one piece).
            Err(ProxyHeaderError::Incomplete) if Instant::now() < deadline => {
                sleep(Duration::from_millis(5)).await
            }
            Err(e) => {
                tracing::debug!("connection from {remote}: {e}");
                count(if matches!(e, ProxyHeaderError::Incomplete) {
                    "timeout"
                } else {
                    "invalid"
                });
                return None;
            }
        }
    };
    // Consume exactly the header: what follows is the client's.
    match timeout_at(deadline, tcp.read_exact(&mut buf[..header.len])).await {
        Ok(Ok(_)) => {}
        _ => {
            count("closed");
            return None;
        }
    }
    count(if header.source.is_some() {
        "proxied"
    } else {
        "local"
    });
    Some(
        header
            .source
            .map_or(remote, |s| SocketAddr::new(s.ip().to_canonical(), s.port())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn rule(trusted: &[&str]) -> ProxyProtocol {
        let mut c = Config::default();
        c.http.proxy_protocol = true;
        c.http.proxy_trusted = trusted.iter().map(|s| s.to_string()).collect();
        ProxyProtocol::from_config(&c).unwrap().unwrap()
    }

    #[test]
    fn only_trusted_networks_send_headers() {
        let r = rule(&["10.0.0.0/8", "::1"]);
        assert!(r.expects_header("10.1.2.3".parse().unwrap()));
        assert!(r.expects_header("::ffff:10.1.2.3".parse().unwrap()));
        assert!(r.expects_header("::1".parse().unwrap()));
        assert!(!r.expects_header("127.0.0.1".parse().unwrap()));
        assert!(ProxyProtocol::from_config(&Config::default())
            .unwrap()
            .is_none());
    }

    /// What `take_header` makes of a connection that sends `bytes` (in two pieces, the
    /// second after a pause), and the bytes left for the HTTP side.
    async fn taken(bytes: Vec<u8>, split: usize) -> (Option<SocketAddr>, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(&bytes[..split]).await.unwrap();
            sleep(Duration::from_millis(30)).await;
            c.write_all(&bytes[split..]).await.unwrap();
            c.shutdown().await.unwrap();
        });
        let (mut tcp, remote) = listener.accept().await.unwrap();
        let got = take_header(&mut tcp, remote, Duration::from_millis(500)).await;
        let mut rest = Vec::new();
        if got.is_some() {
            tcp.read_to_end(&mut rest).await.unwrap();
        }
        client.await.unwrap();
        (got, rest)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn headers_are_consumed_exactly_and_name_the_client() {
        let src: SocketAddr = "[::ffff:192.0.2.7]:4000".parse().unwrap();
        let dst: SocketAddr = "[::1]:80".parse().unwrap();
        let mut bytes = Vec::new();
        proxy_header::write_v2(Some((src, dst)), b"\x04\x00\x01\x00", &mut bytes);
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let (got, rest) = taken(bytes, 10).await;
        assert_eq!(got, Some("192.0.2.7:4000".parse().unwrap()), "canonical");
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
        let (got, rest) = taken(b"PROXY UNKNOWN\r\nhello".to_vec(), 3).await;
        assert_eq!(got.map(|a| a.ip()), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(rest, b"hello");
        let (got, _) = taken(b"GET / HTTP/1.1\r\n\r\n".to_vec(), 18).await;
        assert_eq!(got, None, "a trusted proxy must send a header");
        let (got, _) = taken(b"PROXY TCP4 1.2.3.4".to_vec(), 5).await;
        assert_eq!(got, None, "cut short");
    }
}
