//! One HTTP connection: read request heads, answer them, enforce the limits.
//!
//! The loop owns the bytes and the clock, nothing else: it reads into a fixed buffer of
//! `max_request_bytes`, lets `httparse` find a complete head (no copy, no allocation), asks
//! the [`Handler`] for the response, writes it, and keeps whatever the client pipelined
//! after the head for the next turn. Limits:
//!
//! - waiting for the first byte of a request is bounded by the idle timeout (then the
//!   connection closes quietly);
//! - once a request began, its whole head must arrive within the request timeout (a
//!   slowloris client gets `408` and a close);
//! - a head longer than the buffer, or with more than `max_headers` headers, or that is not
//!   HTTP at all, gets `400` and a close;
//! - writing a response is bounded by the request timeout too (a client that does not read
//!   cannot hold the task forever).
//!
//! It is generic over the stream, so plain TCP and TLS share it, and a WebSocket upgrade
//! hands the stream itself to the WebTorrent front end.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::error::Elapsed;
use tokio::time::{timeout, timeout_at, Instant};

use super::context::HttpContext;
use super::handler::{write_http_error, Handler, Next};
use super::site_call;
use crate::config::MAX_HTTP_HEADERS;

/// What one buffered request head came to.
pub(super) enum Head {
    /// A complete head of this many bytes; the handler's response head is in `out`.
    Complete(usize, Next),
    /// More bytes are needed.
    Partial,
    /// Not a request we take (malformed, too many headers): `out` holds the 400.
    Bad,
}

/// Parses the head at the start of `buf` and, when it is complete, has `handler` answer
/// it into `out`. Shared by the connection loop and the accept loop's fast path.
pub(super) fn answer_head(
    buf: &[u8],
    max_headers: usize,
    handler: &mut Handler,
    remote: SocketAddr,
    out: &mut Vec<u8>,
) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HTTP_HEADERS];
    let mut req = httparse::Request::new(&mut headers[..max_headers.min(MAX_HTTP_HEADERS)]);
    out.clear();
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => {
            let next = handler.handle(&req, remote, &buf[n..], out);
            Head::Complete(n, next)
        }
        Ok(httparse::Status::Partial) => Head::Partial,
        Err(e) => {
            let msg = match e {
                httparse::Error::TooManyHeaders => "too many headers",
                // Headers from trusted proxies were taken before (`proxy_protocol.rs`).
                _ if shoal_proto::proxy_header::looks_like_header(buf) => {
                    metrics::counter!("shoal_proxy_protocol_total", "result" => "untrusted")
                        .increment(1);
                    "PROXY header from an address not in http.proxy_trusted"
                }
                _ => "malformed HTTP request",
            };
            write_http_error(out, "400 Bad Request", msg);
            Head::Bad
        }
    }
}

/// Serves one connection until it closes, times out or is upgraded. `initial` holds bytes
/// already read from it (by the accept loop's fast path), nothing having been answered.
pub async fn serve<S>(mut stream: S, remote: SocketAddr, ctx: Arc<HttpContext>, initial: &[u8])
where
    S: AsyncRead + AsyncWrite + crate::ws::OverTcp + Unpin + Send + 'static,
{
    let settings = &ctx.settings;
    let mut buf = vec![0u8; settings.max_request_bytes];
    let mut filled = initial.len().min(buf.len());
    buf[..filled].copy_from_slice(&initial[..filled]);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let mut handler = Handler::new(ctx.clone());
    let idle = settings.idle_timeout;
    let request_timeout = settings.request_timeout;
    let max_headers = settings.max_headers.min(MAX_HTTP_HEADERS);

    loop {
        // Read until one complete head is buffered. The request timeout runs from the first
        // wait for more of a head already begun (the clock is read then, not per request).
        let mut deadline: Option<Instant> = None;
        let (mut head_len, next) = loop {
            if filled > 0 {
                match answer_head(&buf[..filled], max_headers, &mut handler, remote, &mut out) {
                    Head::Complete(n, next) => break (n, next),
                    Head::Partial => {}
                    Head::Bad => {
                        let _ = timeout(request_timeout, write_and_close(&mut stream, &out)).await;
                        return;
                    }
                }
                if filled == buf.len() {
                    out.clear();
                    write_http_error(&mut out, "400 Bad Request", "request head too long");
                    let _ = timeout(request_timeout, write_and_close(&mut stream, &out)).await;
                    return;
                }
            }
            let read = if filled > 0 {
                let d = *deadline.get_or_insert_with(|| Instant::now() + request_timeout);
                timeout_at(d, stream.read(&mut buf[filled..])).await
            } else {
                timeout_if_waiting(idle, stream.read(&mut buf[filled..])).await
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(n)) => filled += n,
                Err(_elapsed) => {
                    if filled > 0 {
                        out.clear();
                        write_http_error(&mut out, "408 Request Timeout", "request too slow");
                        let _ = timeout(request_timeout, write_and_close(&mut stream, &out)).await;
                    }
                    return;
                }
            }
        };

        let close = match next {
            Next::Upgrade(upgrade) => {
                crate::ws::serve_upgrade(stream, upgrade, ctx.ws.clone()).await;
                return;
            }
            Next::Close => {
                let _ = timeout(request_timeout, write_and_close(&mut stream, &out)).await;
                return;
            }
            Next::KeepAlive => {
                let send = async {
                    stream.write_all(&out).await?;
                    stream.flush().await
                };
                match timeout_if_waiting(request_timeout, send).await {
                    Ok(Ok(())) => {}
                    _ => return,
                }
                false
            }
            Next::SiteCall(call) => {
                // The body: what came with the head, then the rest from the stream.
                let in_buf = call.length.min(filled - head_len);
                let Some(body) = site_call_body(
                    &mut stream,
                    &buf[head_len..head_len + in_buf],
                    &call,
                    request_timeout,
                )
                .await
                else {
                    out.clear();
                    let reply = shoal_site::control::Reply::error(
                        413,
                        "the body is too long, or did not arrive in time",
                    );
                    site_call::write_reply(&mut out, &reply, true);
                    let _ = timeout(request_timeout, write_and_close(&mut stream, &out)).await;
                    return;
                };
                out.clear();
                site_call::write_reply(&mut out, &call.answer(&body), call.close);
                match timeout(request_timeout, async {
                    stream.write_all(&out).await?;
                    stream.flush().await
                })
                .await
                {
                    Ok(Ok(())) => {}
                    _ => return,
                }
                head_len += in_buf;
                call.close
            }
            Next::SendDocument { doc, gzip, close } => {
                let send = async {
                    stream.write_all(&out).await?;
                    match doc.as_sent(gzip) {
                        Some(body) => stream.write_all(body).await?,
                        None => {
                            let mut plain = doc.inflate();
                            loop {
                                let chunk = plain.next_chunk()?;
                                if chunk.is_empty() {
                                    break;
                                }
                                stream.write_all(chunk).await?;
                            }
                        }
                    }
                    stream.flush().await
                };
                // A big document to a slow reader: allow more than one request's time.
                match timeout(request_timeout * 4, send).await {
                    Ok(Ok(())) => {}
                    _ => return,
                }
                close
            }
        };
        if close {
            let _ = timeout(request_timeout, stream.shutdown()).await;
            return;
        }
        // Keep what the client pipelined after this head.
        buf.copy_within(head_len..filled, 0);
        filled -= head_len;
    }
}

/// `fut` bounded by `limit`, the way `tokio::time::timeout` bounds it, but with the clock
/// read and the timer set up only if `fut` is not done at its first poll: a response that
/// fits the socket's buffer, or a request already waiting, costs no clock read (they were
/// 2% of an HTTP worker's time, three a request).
async fn timeout_if_waiting<F: Future>(limit: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    if let Some(out) = (&mut fut).now_or_never() {
        return Ok(out);
    }
    timeout(limit, fut).await
}

/// A control call's body: `have` (what came with the head) and the rest read from
/// `stream`, within `limit`; `None` if it is longer than [`site_call::MAX_BODY`] or late.
async fn site_call_body<S: AsyncRead + Unpin>(
    stream: &mut S,
    have: &[u8],
    call: &site_call::SiteCall,
    limit: Duration,
) -> Option<Vec<u8>> {
    if call.length > site_call::MAX_BODY {
        return None;
    }
    let mut body = have.to_vec();
    body.resize(call.length, 0);
    let read = timeout(limit, stream.read_exact(&mut body[have.len()..])).await;
    matches!(read, Ok(Ok(_))).then_some(body)
}

async fn write_and_close<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn timeout_if_waiting_bounds_what_waits_and_passes_what_is_done() {
        runtime().block_on(async {
            // Done at the first poll.
            assert_eq!(
                timeout_if_waiting(Duration::from_millis(50), async { 7 })
                    .await
                    .ok(),
                Some(7)
            );
            // Done later, within the limit.
            let later = async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                8
            };
            assert_eq!(
                timeout_if_waiting(Duration::from_secs(5), later).await.ok(),
                Some(8)
            );
            // Never done: cut at the limit.
            let started = std::time::Instant::now();
            assert!(
                timeout_if_waiting(Duration::from_millis(50), std::future::pending::<()>())
                    .await
                    .is_err()
            );
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(5));
            // A write to a peer that does not read: it fills the pipe, then times out.
            let (mut ours, _theirs) = tokio::io::duplex(64);
            let write =
                timeout_if_waiting(Duration::from_millis(50), ours.write_all(&[0u8; 1024])).await;
            assert!(
                write.is_err(),
                "the write waited for a reader that never read"
            );
            // What fits is written at once.
            let (mut ours, mut theirs) = tokio::io::duplex(64);
            timeout_if_waiting(Duration::from_millis(50), ours.write_all(b"fits"))
                .await
                .unwrap()
                .unwrap();
            let mut got = [0u8; 4];
            theirs.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"fits");
        });
    }
}
