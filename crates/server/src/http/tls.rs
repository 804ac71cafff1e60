//! TLS for the HTTPS listeners (rustls), with certificates that reload without a restart.
//!
//! The rustls `ServerConfig` is built once and asks a resolver for the certificate at each
//! handshake; the resolver hands out whatever [`TlsCerts`] holds in an `ArcSwap`. A reload
//! (SIGHUP) reads and checks the new PEM files first and swaps them in only if they are
//! good, so a botched renewal keeps the old certificate serving instead of taking HTTPS
//! down. Connections already open keep the session they negotiated.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The HTTPS certificate, reloadable.
pub struct TlsCerts {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
}

impl fmt::Debug for TlsCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCerts")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading certificate {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing certificate {}", cert.display()))?;
    if chain.is_empty() {
        bail!("no certificate in {}", cert.display());
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading private key {}", key.display()))?;
    let signing = provider
        .key_provider
        .load_private_key(key_der)
        .with_context(|| format!("unsupported private key in {}", key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .with_context(|| format!("{} does not match {}", key.display(), cert.display()))?;
    Ok(certified)
}

impl TlsCerts {
    /// Loads the PEM certificate chain and key (any key type the provider supports).
    pub fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<Arc<Self>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = load(cert_path, key_path, &provider)?;
        Ok(Arc::new(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: ArcSwap::from_pointee(current),
        }))
    }

    /// Re-reads the files; on error the old certificate stays in use.
    pub fn reload(&self) -> anyhow::Result<()> {
        let new = load(&self.cert_path, &self.key_path, &self.provider)?;
        self.current.store(Arc::new(new));
        Ok(())
    }

    /// A server config that always uses the current certificate.
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for TlsCerts {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}
