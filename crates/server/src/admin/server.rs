//! The admin listener itself: binding, the accept loop, and the router with its bearer-token
//! check.
//!
//! It is not a hot path, so it is the plainest thing that works: hyper's HTTP/1 server on
//! a single-threaded tokio runtime of its own thread, and every request answered by a
//! synchronous function on tokio's blocking pool (some answers walk the whole store or
//! write a snapshot, which must not stall the accept loop). The sockets are bound in
//! [`AdminServer::start`], before privileges are dropped, so a port below 1024 works.
//!
//! Metrics and the status page need no token (the listener defaults to loopback); every
//! `/api/` call needs `Authorization: Bearer <token>` and gets 401 without it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use http_body_util::{BodyExt, Limited};

use super::reply::{json, text, Body, Call, MAX_BODY};
use super::view::TrackerView;
use super::{api, metrics, page};

/// The running admin listener.
pub struct AdminServer {
    pub local_addrs: Vec<SocketAddr>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds every address, then serves on a thread of its own.
    pub fn start(listen: &[SocketAddr], view: Arc<TrackerView>) -> anyhow::Result<Self> {
        let mut listeners = Vec::new();
        let mut local_addrs = Vec::new();
        for addr in listen {
            let l = crate::listen::tcp(*addr, 128)
                .with_context(|| format!("binding the admin listener {addr}"))?;
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
                                view.clone(),
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

async fn accept_loop(
    listener: tokio::net::TcpListener,
    view: Arc<TrackerView>,
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
                let view = view.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let view = view.clone();
                        async move { Ok::<_, Infallible>(answer(req, view).await) }
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

async fn answer(req: Request<Incoming>, view: Arc<TrackerView>) -> Response<Body> {
    let (head, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over {MAX_BODY} bytes, or cut short\n"),
            )
        }
    };
    let call = Call {
        method: head.method.clone(),
        path: head.uri.path().to_string(),
        query: head.uri.query().unwrap_or("").to_string(),
        authorization: head
            .headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body,
    };
    match tokio::task::spawn_blocking(move || route(&call, &view)).await {
        Ok(r) => r,
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n"),
    }
}

/// Routes one call.
pub fn route(call: &Call, view: &TrackerView) -> Response<Body> {
    let path = call.path.as_str();
    if let Some(rest) = path.strip_prefix("/api/") {
        if !authorized(call, view) {
            let mut r = json(
                StatusCode::UNAUTHORIZED,
                &serde_json::json!({"error": if view.token.is_set() {
                    "missing or wrong bearer token"
                } else {
                    "no admin token is configured (admin.token or admin.token_file)"
                }}),
            );
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        return api::route(call, rest, view);
    }
    if call.method != Method::GET && call.method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match path {
        "/metrics" => {
            let mut r = text(StatusCode::OK, metrics::render(view));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        "/" | "/status" => page::html(),
        "/status.js" => page::script(),
        "/status.json" => page::data(view),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn authorized(call: &Call, view: &TrackerView) -> bool {
    call.authorization
        .as_deref()
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| view.token.matches(t.trim()))
}
