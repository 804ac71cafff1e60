//! The HTTP and HTTPS front end's listeners and workers: binding, the per-worker runtimes,
//! the accept loop with its connection limit, and handing each connection to its task.
//!
//! Worker-per-core, like the UDP front end: each worker thread runs its own
//! current-thread tokio runtime and owns its own `SO_REUSEPORT` listener on every address,
//! so the kernel spreads connections over the workers and a connection lives and dies on
//! one thread, with no work stealing and no cross-thread wakeups. All workers share one
//! [`HttpContext`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use shoal_datagrams::WatchedListener as Listener;
use std::os::unix::net::UnixListener;
use tokio::net::TcpStream;

use super::context::{refused, HttpContext, HttpSettings, OpenConnection};
use super::full_scrape::FullScrape;
use super::proxy_protocol::{self, ProxyProtocol};
use super::site_call::SiteApi;
use super::tls::TlsCerts;
use super::unix::{self, UnixSocket};
use super::{at_once, connection};
use crate::config::Config;
use crate::ws::WsContext;
use shoal_tracker::Core;

/// The running HTTP/HTTPS front end.
pub struct HttpFrontEnd {
    pub http_addrs: Vec<SocketAddr>,
    pub https_addrs: Vec<SocketAddr>,
    tls: Option<Arc<TlsCerts>>,
    ctx: Arc<HttpContext>,
    threads: Vec<JoinHandle<()>>,
    /// `[http] unix_socket`, its file removed when the front end goes.
    unix_socket: Option<UnixSocket>,
}

// `TCP_DEFER_ACCEPT`: the kernel completes `accept` only once the client has sent data (or
// after about the given seconds), so the request is already in the socket when the tracker
// first looks at it, and a client that connects and says nothing waits in the kernel rather
// than holding a file descriptor of ours. Neither socket2 nor nix names the option, so it is
// declared with nix's own macro: the `setsockopt` call stays inside nix.
use nix::{setsockopt_impl, sockopt_impl};
sockopt_impl!(
    TcpDeferAccept,
    SetOnly,
    libc::IPPROTO_TCP,
    libc::TCP_DEFER_ACCEPT,
    i32
);

fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let socket = crate::listen::tcp(addr, 1024).with_context(|| format!("binding TCP {addr}"))?;
    // Accept only once the request has arrived, so the accept loop's fast path finds it
    // (best effort: without it the general path reads it later).
    if let Err(e) = nix::sys::socket::setsockopt(&socket, TcpDeferAccept, &1) {
        tracing::debug!("TCP_DEFER_ACCEPT on {addr}: {e}");
    }
    Ok(socket)
}

/// Binds `workers` listeners on each address (the first may ask for port 0, the others
/// join the port it got). Returns the addresses and, per worker, its listeners.
fn bind_all(
    addrs: &[SocketAddr],
    workers: usize,
) -> anyhow::Result<(Vec<SocketAddr>, Vec<Vec<std::net::TcpListener>>)> {
    let mut actual = Vec::new();
    let mut per_worker: Vec<Vec<std::net::TcpListener>> = (0..workers).map(|_| vec![]).collect();
    for &addr in addrs {
        let first = bind(addr)?;
        let local = first.local_addr()?;
        actual.push(local);
        per_worker[0].push(first);
        for w in per_worker.iter_mut().skip(1) {
            w.push(bind(local)?);
        }
    }
    Ok((actual, per_worker))
}

impl HttpFrontEnd {
    /// Binds every listener (errors surface before anything runs), loads the certificate,
    /// and starts the workers. The returned handles include the full-scrape thread.
    pub fn start(
        config: &Config,
        core: Arc<Core>,
        ws: Arc<WsContext>,
        shutdown: Arc<AtomicBool>,
        site_api: Option<Arc<SiteApi>>,
        udp_counters: Vec<Arc<crate::udp::counters::WorkerCounters>>,
    ) -> anyhow::Result<Self> {
        let workers = config.worker_count().max(1);
        let tls = if config.https.listen.is_empty() {
            None
        } else {
            Some(TlsCerts::load(&config.https.cert, &config.https.key)?)
        };
        let acceptor = match &tls {
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(t.server_config()?)),
            None => None,
        };
        let (http_addrs, mut plain) = bind_all(&config.http.listen, workers)?;
        let mut unix_socket = match &config.http.unix_socket {
            p if p.as_os_str().is_empty() => None,
            p => Some(UnixSocket::bind(p)?),
        };
        let (https_addrs, mut secure) = bind_all(&config.https.listen, workers)?;

        let mut threads = Vec::new();
        let full_scrape = if config.http.full_scrape {
            let (fs, thread) = FullScrape::start(
                core.clone(),
                config.http.gzip,
                Duration::from_secs(config.http.full_scrape_interval),
                shutdown.clone(),
            )?;
            threads.push(thread);
            Some(fs)
        } else {
            None
        };
        let ctx = Arc::new(HttpContext {
            core,
            settings: HttpSettings::from_config(config),
            proxy: shoal_proto::forwarded::ProxyRules::new(
                &config.http.proxy_header,
                config.http.proxy_hop,
                config.http.proxy_trusted_nets()?,
            ),
            proxy_protocol: ProxyProtocol::from_config(config)?,
            full_scrape,
            ws,
            open: AtomicUsize::new(0),
            site_api,
            opentracker: Some(super::stats::Surface::new(config, udp_counters)),
        });

        for w in 0..workers {
            let plain = std::mem::take(&mut plain[w]);
            let secure = std::mem::take(&mut secure[w]);
            let ctx = ctx.clone();
            let shutdown = shutdown.clone();
            let acceptor = acceptor.clone();
            let unix = unix_socket.as_mut().and_then(UnixSocket::take);
            let thread = std::thread::Builder::new()
                .name(format!("http-{w}"))
                .spawn(move || run_worker((plain, unix), secure, acceptor, ctx, &shutdown))
                .context("spawning HTTP worker")?;
            threads.push(thread);
        }
        Ok(Self {
            http_addrs,
            https_addrs,
            tls,
            ctx,
            threads,
            unix_socket,
        })
    }

    /// The HTTPS certificate holder, to reload on SIGHUP (on error the old certificate
    /// stays in use). `None` without HTTPS listeners.
    pub fn tls_certs(&self) -> Option<Arc<TlsCerts>> {
        self.tls.clone()
    }

    /// Open connections right now (HTTP and HTTPS).
    pub fn open_connections(&self) -> usize {
        self.ctx.open.load(Ordering::Relaxed)
    }

    /// Waits for the workers to stop (after the shutdown flag was set), then removes the
    /// Unix socket's file.
    pub fn join(self) {
        for t in self.threads {
            // The full scrape's thread waits parked between its checks.
            t.thread().unpark();
            let _ = t.join();
        }
        drop(self.unix_socket);
    }
}

fn run_worker(
    (plain, unix): (Vec<std::net::TcpListener>, Option<UnixListener>),
    secure: Vec<std::net::TcpListener>,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    ctx: Arc<HttpContext>,
    shutdown: &AtomicBool,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("HTTP worker cannot start its runtime: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        for l in plain {
            match Listener::new(l) {
                Ok(l) => {
                    tokio::task::spawn_local(accept_loop(l, None, ctx.clone()));
                }
                Err(e) => tracing::error!("HTTP listener: {e}"),
            }
        }
        if let Some(l) = unix {
            tokio::task::spawn_local(unix::accept_loop(l, ctx.clone()));
        }
        for l in secure {
            match Listener::new(l) {
                Ok(l) => {
                    tokio::task::spawn_local(accept_loop(l, acceptor.clone(), ctx.clone()));
                }
                Err(e) => tracing::error!("HTTPS listener: {e}"),
            }
        }
        while !shutdown.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Dropping the LocalSet and the runtime ends every connection of this worker.
}

/// Whether an accept failed for want of a file descriptor (the process's limit, or the
/// system's).
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A file descriptor held back for turning a connection away when there are none left.
///
/// Without one, a connection the process has no descriptor for stays in the kernel's
/// queue, neither served nor refused, and the queue fills up unseen. With it, the accept
/// loop gives the spare back, accepts the connection into it, closes it at once (the
/// client sees it closed, as past `max_connections`) and counts it; then takes a spare
/// again. The spare is a duplicate of the listener's own descriptor, so it needs no file
/// (a chroot has no `/dev/null`).
struct Spare(Option<std::os::fd::OwnedFd>);

impl Spare {
    fn of(listener: &Listener) -> Self {
        use std::os::fd::AsFd;
        Self(listener.get_ref().as_fd().try_clone_to_owned().ok())
    }

    /// Turns away the connection waiting on `listener`; whether there was one to turn
    /// away. Waits for nothing: the accept is tried once (the listener is non-blocking).
    fn turn_away(&mut self, listener: &Listener) -> bool {
        if self.0.take().is_none() {
            // Taken by another thread the last time: try again.
            *self = Self::of(listener);
            return false;
        }
        let turned_away = listener.get_ref().accept().is_ok();
        *self = Self::of(listener);
        turned_away
    }
}

/// A connection handed on to a task: non-blocking and registered with tokio. (The accept
/// loop's listener gives std streams, registered nowhere: most are answered and closed in
/// [`at_once`] and never need the event loop.)
fn into_tokio(tcp: std::net::TcpStream) -> Option<TcpStream> {
    tcp.set_nonblocking(true).ok()?;
    TcpStream::from_std(tcp).ok()
}

async fn accept_loop(
    listener: Listener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    ctx: Arc<HttpContext>,
) {
    let mut fast = at_once::AtOnce::new(ctx.clone());
    let mut spare = Spare::of(&listener);
    let mut warned: Option<std::time::Instant> = None;
    loop {
        let (tcp, remote) = match listener.accept().await {
            Ok(c) => c,
            Err(e) if out_of_descriptors(&e) => {
                if warned.is_none_or(|w| w.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(
                        "HTTP accept failed: {e}: connections are turned away until \
                         descriptors are free (raise the open-file limit or lower \
                         http.max_connections)"
                    );
                    warned = Some(std::time::Instant::now());
                }
                if spare.turn_away(&listener) {
                    refused("descriptors");
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                continue;
            }
            Err(e) => {
                // The kernel out of memory and the like: back off instead of spinning.
                tracing::warn!("HTTP accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        shoal_opentracker::tally::HTTP.accepted();
        let Some(guard) = OpenConnection::admit(&ctx) else {
            drop(tcp);
            continue;
        };
        let proxied = ctx.proxy_protocol.as_ref();
        if proxied.is_some_and(|p| p.expects_header(remote.ip())) {
            // From a load balancer: its header first, then the usual general path.
            let Some(tcp) = into_tokio(tcp) else { continue };
            let (ctx, tls) = (ctx.clone(), tls.clone());
            tokio::task::spawn_local(async move {
                let _guard = guard;
                let mut tcp = tcp;
                let limit = ctx.settings.request_timeout;
                let Some(client) = proxy_protocol::take_header(&mut tcp, remote, limit).await
                else {
                    return;
                };
                let _ = tcp.set_nodelay(true);
                match tls {
                    None => connection::serve(tcp, client, ctx, &[]).await,
                    Some(acceptor) => serve_tls(tcp, client, acceptor, ctx).await,
                }
            });
            continue;
        }
        match &tls {
            None => match fast.try_answer(&tcp, remote) {
                at_once::Outcome::Done => drop(guard),
                // Everything handed on is latency-bound (keep-alive HTTP, WebSocket): no
                // Nagle. Set here, once, so that no outcome can miss it (a WebSocket
                // upgrade once did: 40 ms stalls); only `Done` saves the syscall.
                outcome => {
                    let _ = tcp.set_nodelay(true);
                    if let Some(tcp) = into_tokio(tcp) {
                        hand_on(tcp, remote, outcome, guard, &ctx);
                    }
                }
            },
            Some(acceptor) => {
                let _ = tcp.set_nodelay(true);
                let Some(tcp) = into_tokio(tcp) else { continue };
                let (ctx, acceptor) = (ctx.clone(), acceptor.clone());
                tokio::task::spawn_local(async move {
                    let _guard = guard;
                    serve_tls(tcp, remote, acceptor, ctx).await;
                });
            }
        }
    }
}

/// Serves an HTTPS connection: the TLS handshake (within the request timeout), then the
/// general path.
async fn serve_tls(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    ctx: Arc<HttpContext>,
) {
    let limit = ctx.settings.request_timeout;
    if let Ok(Ok(stream)) = tokio::time::timeout(limit, acceptor.accept(tcp)).await {
        connection::serve(stream, remote, ctx, &[]).await;
    }
}

/// A plain connection the accept loop's fast path did not finish (see [`at_once`]): served
/// by a task from here on, from what the fast path read and wrote.
fn hand_on(
    tcp: TcpStream,
    remote: SocketAddr,
    outcome: at_once::Outcome,
    guard: OpenConnection,
    ctx: &Arc<HttpContext>,
) {
    let ctx = ctx.clone();
    match outcome {
        at_once::Outcome::Done => drop(guard),
        at_once::Outcome::Serve(initial) => {
            tokio::task::spawn_local(async move {
                let _guard = guard;
                connection::serve(tcp, remote, ctx, &initial).await;
            });
        }
        at_once::Outcome::KeepAlive(leftover) => {
            tokio::task::spawn_local(async move {
                let _guard = guard;
                connection::serve(tcp, remote, ctx, &leftover).await;
            });
        }
        at_once::Outcome::Rest {
            rest,
            close,
            leftover,
        } => {
            tokio::task::spawn_local(async move {
                let _guard = guard;
                let mut tcp = tcp;
                let limit = ctx.settings.request_timeout * 4;
                let send = tokio::io::AsyncWriteExt::write_all(&mut tcp, &rest);
                if !matches!(tokio::time::timeout(limit, send).await, Ok(Ok(()))) {
                    return;
                }
                if close {
                    let shutdown = tokio::io::AsyncWriteExt::shutdown(&mut tcp);
                    let _ = tokio::time::timeout(limit, shutdown).await;
                } else {
                    connection::serve(tcp, remote, ctx, &leftover).await;
                }
            });
        }
        at_once::Outcome::Upgrade(upgrade) => {
            let ws = ctx.ws.clone();
            tokio::task::spawn_local(async move {
                let _guard = guard;
                crate::ws::serve_upgrade(tcp, upgrade, ws).await;
            });
        }
    }
}
