//! The admin listener: Prometheus metrics (`/metrics`), the status page (`/`), and the
//! token-protected JSON API (`/api/...`).
//!
//! It is not a hot path, so it is the plainest thing that works: hyper's HTTP/1 server on
//! a single-threaded tokio runtime of its own thread, and every request answered by a
//! synchronous function on tokio's blocking pool (some answers walk the whole store or
//! write a snapshot, which must not stall the accept loop). The sockets are bound in
//! [`AdminServer::start`], before privileges are dropped, so a port below 1024 works.
//!
//! Metrics and the status page need no token (the listener defaults to loopback); every
//! `/api/` call needs `Authorization: Bearer <token>` and gets 401 without it.

pub mod api;
pub mod metrics;
pub mod page;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::shared::Shared;

/// A response body.
pub type Body = Full<Bytes>;

/// The running admin listener.
pub struct AdminServer {
    pub local_addrs: Vec<SocketAddr>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds every address, then serves on a thread of its own.
    pub fn start(listen: &[SocketAddr], shared: Arc<Shared>) -> anyhow::Result<Self> {
        let mut listeners = Vec::new();
        let mut local_addrs = Vec::new();
        for addr in listen {
            let l = bind(*addr).with_context(|| format!("binding the admin listener {addr}"))?;
            local_addrs.push(l.local_addr()?);
            listeners.push(l);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(4)
            .thread_name("admin-blocking")
            .build()
            .context("starting the admin runtime")?;
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut tasks = Vec::new();
                    for l in listeners {
                        match tokio::net::TcpListener::from_std(l) {
                            Ok(l) => tasks.push(tokio::spawn(accept_loop(
                                l,
                                shared.clone(),
                                stop_rx.clone(),
                            ))),
                            Err(e) => tracing::error!("admin listener: {e}"),
                        }
                    }
                    for t in tasks {
                        let _ = t.await;
                    }
                });
                // In-flight requests get a moment, not forever.
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .context("spawning the admin thread")?;
        Ok(Self {
            local_addrs,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops accepting and waits (boundedly) for the thread.
    pub fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A listening socket with `SO_REUSEPORT`, so that during an upgrade the new process can
/// bind the admin address while the old one still holds it (the kernel splits new
/// connections between them until the old one exits).
fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    Ok(socket.into())
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors and the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(answer(req, shared).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(10))
                        .max_buf_size(64 * 1024)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            _ = stop.changed() => return,
        }
    }
}

/// What a handler needs of a request (no body: no admin call takes one).
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
}

async fn answer(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let call = Call {
        method: req.method().clone(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
        authorization: req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    match tokio::task::spawn_blocking(move || route(&call, &shared)).await {
        Ok(r) => r,
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n"),
    }
}

/// Routes one call.
pub fn route(call: &Call, shared: &Shared) -> Response<Body> {
    let path = call.path.as_str();
    if let Some(rest) = path.strip_prefix("/api/") {
        if !authorized(call, shared) {
            let mut r = api::json(
                StatusCode::UNAUTHORIZED,
                &serde_json::json!({"error": if shared.has_token() {
                    "missing or wrong bearer token"
                } else {
                    "no admin token is configured (admin.token or admin.token_file)"
                }}),
            );
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        return api::route(call, rest, shared);
    }
    if call.method != Method::GET && call.method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match path {
        "/metrics" => {
            let mut r = text(StatusCode::OK, metrics::render(shared));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        "/" | "/status" => page::html(),
        "/status.js" => page::script(),
        "/status.json" => page::data(shared),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn authorized(call: &Call, shared: &Shared) -> bool {
    call.authorization
        .as_deref()
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| shared.token_matches(t.trim()))
}

/// A plain-text response.
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
