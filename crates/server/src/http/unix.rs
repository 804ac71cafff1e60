//! The HTTP listener on a Unix socket (`[http] unix_socket`), for sites whose nginx
//! proxies to a socket file (`proxy_pass http://unix:/run/shoal/http.sock;`), as
//! UNIT3D-Announce can listen. Plain HTTP only (TLS ends at the proxy), served by the same
//! connection loop as TCP.
//!
//! A Unix socket has no peer address: a connection on it counts as from the loopback
//! address (`127.0.0.1`, port 0), a proxy on this machine, so the client's address comes
//! from `[http] proxy_header` under the usual `proxy_trusted` rules (loopback is trusted
//! by default). The socket file is made anew at start (a stale one from a previous run is
//! removed, anything else at the path is an error) with mode 0666, for the proxy's user;
//! it is removed at shutdown.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use super::connection;
use super::context::{HttpContext, OpenConnection};

/// The address a Unix-socket connection is served as.
pub const UNIX_PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// A bound Unix socket, its file removed when dropped.
pub struct UnixSocket {
    listener: Option<std::os::unix::net::UnixListener>,
    path: PathBuf,
}

impl UnixSocket {
    /// Binds `path` (removing a stale socket left there).
    pub fn bind(path: &Path) -> anyhow::Result<UnixSocket> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                bail!(
                    "http.unix_socket {}: something else is there",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale socket {}", path.display()))?;
        }
        let listener = std::os::unix::net::UnixListener::bind(path)
            .with_context(|| format!("binding http.unix_socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
            .with_context(|| format!("opening {} to the proxy's user", path.display()))?;
        listener.set_nonblocking(true)?;
        Ok(UnixSocket {
            listener: Some(listener),
            path: path.to_path_buf(),
        })
    }

    /// The listener, for the worker that accepts on it (once).
    pub fn take(&mut self) -> Option<std::os::unix::net::UnixListener> {
        self.listener.take()
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Accepts connections on `listener` and serves each on a task of this worker.
pub async fn accept_loop(listener: std::os::unix::net::UnixListener, ctx: Arc<HttpContext>) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("HTTP Unix socket: {e}");
            return;
        }
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let Some(guard) = OpenConnection::admit(&ctx) else {
                    continue;
                };
                let ctx = ctx.clone();
                tokio::task::spawn_local(async move {
                    let _guard = guard;
                    connection::serve(stream, UNIX_PEER, ctx, &[]).await;
                });
            }
            Err(e) => {
                tracing::warn!("HTTP Unix socket accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}
