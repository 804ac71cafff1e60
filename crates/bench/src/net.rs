//! TCP connections for the HTTP and WebTorrent generators: spread over loopback source
//! addresses, optionally wrapped in TLS.
//!
//! One source address has ~28k ephemeral ports, and a close-per-request HTTP run leaves
//! each one in TIME_WAIT for a minute: seed 000's load tester died with "Cannot assign
//! requested address" that way. Binding connection `k` to 127.0.0.(1 + k mod n) multiplies
//! the ports available by n. TLS is rustls; by default the tracker's certificate is *not*
//! verified (benchmarks use self-signed certificates on loopback) unless `--ca-cert` is
//! given.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct as Signed, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};

/// A byte stream to the tracker, plain or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Where and how to connect, parsed from a `http://`, `https://`, `ws://` or `wss://` URL.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub addr: SocketAddr,
    /// Path and query of the URL (at least `/`).
    pub path: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Self> {
        let (scheme, rest) = url
            .split_once("://")
            .with_context(|| format!("{url:?} is not a URL (expected scheme://host:port/path)"))?;
        let (tls, default_port) = match scheme {
            "http" | "ws" => (false, 80),
            "https" | "wss" => (true, 443),
            other => bail!("unsupported scheme {other:?} in {url:?}"),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            let (h, p) = h.split_once(']').context("unclosed [ in host")?;
            (h.to_string(), p.strip_prefix(':').map(str::to_string))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p.to_string())),
                None => (authority.to_string(), None),
            }
        };
        let port: u16 = match port {
            Some(p) => p.parse().with_context(|| format!("bad port in {url:?}"))?,
            None => default_port,
        };
        let ip: IpAddr = if host == "localhost" {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.parse()
                .with_context(|| format!("host {host:?} must be an IP address or localhost"))?
        };
        Ok(Self {
            tls,
            host,
            addr: SocketAddr::new(ip, port),
            path: path.to_string(),
        })
    }
}

/// Source address for connection `k` (see the module doc).
pub fn source_ip(target: IpAddr, n: u32, k: u32) -> Option<IpAddr> {
    match target {
        IpAddr::V4(v4) if v4.is_loopback() && n > 0 => Some(IpAddr::V4(Ipv4Addr::from(
            u32::from(Ipv4Addr::new(127, 0, 0, 1)) + k % n,
        ))),
        _ => None,
    }
}

/// How a load opens its connections: where to, with what TLS, from which source
/// addresses.
pub struct Dialer {
    pub ep: Endpoint,
    tls: Option<Arc<ClientConfig>>,
    source_ips: u32,
}

impl Dialer {
    /// Connections to `url`, over TLS offering `alpn` if its scheme says so (checking the
    /// tracker's certificate against `ca` when given), spread over `source_ips` loopback
    /// addresses.
    pub fn new(url: &str, ca: Option<&Path>, alpn: &[&[u8]], source_ips: u32) -> Result<Self> {
        let ep = Endpoint::parse(url)?;
        let tls = if ep.tls {
            Some(tls_config(ca, alpn)?)
        } else {
            None
        };
        Ok(Self {
            ep,
            tls,
            source_ips,
        })
    }

    /// Opens connection number `k`.
    pub async fn connect(&self, k: usize) -> std::io::Result<Box<dyn Stream>> {
        connect(&self.ep, self.tls.as_ref(), self.source_ips, k as u32).await
    }
}

/// Opens connection number `k` to `ep`.
pub async fn connect(
    ep: &Endpoint,
    tls: Option<&Arc<ClientConfig>>,
    source_ips: u32,
    k: u32,
) -> std::io::Result<Box<dyn Stream>> {
    let socket = if ep.addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = source_ip(ep.addr.ip(), source_ips, k) {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    let tcp: TcpStream = socket.connect(ep.addr).await?;
    tcp.set_nodelay(true)?;
    match tls {
        None => Ok(Box::new(tcp)),
        Some(cfg) => {
            let name = ServerName::try_from(ep.host.clone())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            let stream = tokio_rustls::TlsConnector::from(cfg.clone())
                .connect(name, tcp)
                .await?;
            Ok(Box::new(stream))
        }
    }
}

/// Accepts any certificate: for benchmarks against self-signed trackers on loopback.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl AcceptAny {
    /// The algorithms handshake signatures are checked with.
    fn algorithms(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.0.signature_verification_algorithms
    }
}

/// What checking a handshake signature answers.
type Verdict = Result<HandshakeSignatureValid, rustls::Error>;

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    // The certificate is taken as it is, but the handshake is still checked against it.
    fn verify_tls12_signature(&self, msg: &[u8], cert: &CertificateDer, dss: &Signed) -> Verdict {
        rustls::crypto::verify_tls12_signature(msg, cert, dss, self.algorithms())
    }
    fn verify_tls13_signature(&self, msg: &[u8], cert: &CertificateDer, dss: &Signed) -> Verdict {
        rustls::crypto::verify_tls13_signature(msg, cert, dss, self.algorithms())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

/// The TLS client configuration: verifying against `ca` when given, else accepting any
/// certificate.
pub fn tls_config(ca: Option<&Path>, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let mut cfg = match ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("reading CA certificates from {}", path.display()))?
            {
                roots.add(cert.context("bad PEM certificate")?)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth(),
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

/// Percent-encodes binary data for a query string (unreserved bytes stay as they are).
pub fn percent_encode(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = Endpoint::parse("https://localhost:3000/announce").unwrap();
        assert!(e.tls);
        assert_eq!(e.addr.to_string(), "127.0.0.1:3000");
        assert_eq!(e.path, "/announce");
        let e = Endpoint::parse("ws://127.0.0.1:8080").unwrap();
        assert!(!e.tls && e.path == "/" && e.addr.port() == 8080);
        let e = Endpoint::parse("http://[::1]:81/a?b=c").unwrap();
        assert_eq!(e.addr.to_string(), "[::1]:81");
        assert_eq!(e.path, "/a?b=c");
        assert!(Endpoint::parse("udp://1.2.3.4:1").is_err());
        assert!(Endpoint::parse("http://example.com/").is_err());
    }

    #[test]
    fn percent_encoding_of_binary() {
        let mut s = String::new();
        percent_encode(&[0x00, b'a', 0xff, b'~', b' '], &mut s);
        assert_eq!(s, "%00a%FF~%20");
    }
}
