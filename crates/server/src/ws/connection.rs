//! One WebTorrent connection's task: frames in, replies and relayed messages out.
//!
//! A single task per connection waits on three things at once: a frame from the client,
//! a message another connection relayed into this one's bounded queue (when the queue is
//! full, relays are dropped, not the connection: see `registry`), and a timer for pings
//! and the idle timeout. Writes are batched (everything queued is written, then one
//! flush) and bounded in time, so a client that stops reading is closed, not buffered.
//! When the task ends for any reason, the connection's peers leave their swarms at once.
//!
//! WebSocket crate: tokio-tungstenite 0.28, chosen by measurement. One connection on one
//! thread, 200,000 masked 400-byte text frames in, one 150-byte text reply out per frame
//! over loopback TCP, three rounds (2-core VM, other jobs running):
//! tokio-tungstenite 217k / 196k / 159k msg/s, fastwebsockets 220k / 209k / 280k,
//! tokio-websockets 144k / 160k / 216k. fastwebsockets was ahead by ~10% at the median,
//! within this machine's noise; tokio-tungstenite gives message and frame size limits,
//! ping/pong/close handling, fragment reassembly and a Stream/Sink interface without
//! extra code, is the crate the tests use as a client, and takes a raw stream after our
//! own handshake (`from_partially_read`). Its per-connection read buffer (128 KiB by
//! default) is set to 4 KiB so that idle connections stay small.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use shoal_proto::ws::{FailureContext, RequestError};
use shoal_swarm::webtorrent::ConnectionId;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::context::WsContext;
use super::handler::{self, ConnState, Verdict};
use super::upgrade_request::UpgradeRequest;

/// Most queued messages written before one flush.
const WRITE_BATCH: usize = 64;

/// Why a connection ended (for logs and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Closed,
    SendTimeout,
    Idle,
    Misbehaved,
    TooLarge,
    Error,
    RateLimited,
    Blocked,
}

impl End {
    fn as_str(self) -> &'static str {
        match self {
            End::Closed => "closed",
            End::SendTimeout => "send_timeout",
            End::Idle => "idle",
            End::Misbehaved => "misbehaved",
            End::TooLarge => "too_large",
            End::Error => "error",
            End::RateLimited => "rate_limited",
            End::Blocked => "blocked",
        }
    }
}

/// Runs the connection on `stream` (the 101 response already written).
pub async fn run<S>(stream: S, upgrade: UpgradeRequest, ctx: &Arc<WsContext>, id: ConnectionId)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let s = &ctx.settings;
    // The passkey is read from the upgrade path once; every message of the connection
    // presents it.
    let passkey = upgrade.passkey().map(Box::from);
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(16 << 10)
        .max_message_size(Some(s.limits.max_message_size))
        .max_frame_size(Some(s.limits.max_frame_size));
    let mut ws =
        WebSocketStream::from_partially_read(stream, upgrade.leftover, Role::Server, Some(config))
            .await;
    let (queue, mut inbox) = mpsc::channel(s.limits.outgoing_queue.max(1));
    ctx.registry.insert(id, queue);
    let mut state = ConnState::new(id, upgrade.remote.ip().to_canonical(), passkey);
    let mut replies: Vec<Utf8Bytes> = Vec::new();
    let mut last_heard = Instant::now();
    let mut ticker = tokio::time::interval_at(Instant::now() + s.ping_interval, s.ping_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let end = loop {
        tokio::select! {
            biased;
            out = inbox.recv() => {
                // The registry holds a sender while we run, so `None` cannot happen;
                // treat it as a close all the same.
                let Some(first) = out else { break End::Closed };
                // A client that does not read at all is closed when a write has waited
                // `send_timeout`; one that reads slowly keeps its connection and loses the
                // relayed messages its full queue cannot take (see `registry`).
                let sent = timeout(s.send_timeout, async {
                    ws.feed(Message::Text(first)).await?;
                    for _ in 1..WRITE_BATCH {
                        match inbox.try_recv() {
                            Ok(m) => ws.feed(Message::Text(m)).await?,
                            Err(_) => break,
                        }
                    }
                    ws.flush().await
                })
                .await;
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break End::Error,
                    Err(_) => break End::SendTimeout,
                }
            }
            frame = ws.next() => {
                let verdict = match frame {
                    None => break End::Closed,
                    Some(Err(WsError::Capacity(e))) => {
                        // Over the size limits: say so, then close (the stream cannot be
                        // resynchronised after an oversized frame).
                        let err = RequestError::Json(format!("message too large: {e}"));
                        handler::misbehaved(ctx, &mut state, &err, FailureContext::default(), &mut replies);
                        let _ = send_all(&mut ws, &mut replies, s.send_timeout).await;
                        let _ = close(&mut ws, CloseCode::Size, "message too large", s.send_timeout).await;
                        break End::TooLarge;
                    }
                    Some(Err(_)) => break End::Error,
                    Some(Ok(msg)) => {
                        last_heard = Instant::now();
                        match msg {
                            Message::Text(t) => handler::handle_text(ctx, &mut state, t.as_str(), shoal_swarm::clock::now(), &mut replies),
                            Message::Binary(b) => handler::handle(ctx, &mut state, &b, shoal_swarm::clock::now(), &mut replies),
                            Message::Close(_) => {
                                // tungstenite has queued the closing reply: send it.
                                let _ = timeout(s.send_timeout, ws.flush()).await;
                                break End::Closed;
                            }
                            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Verdict::Continue,
                        }
                    }
                };
                match send_all(&mut ws, &mut replies, s.send_timeout).await {
                    Ok(()) => {}
                    Err(end) => break end,
                }
                let (reason, end) = match verdict {
                    Verdict::Continue => continue,
                    Verdict::Close => ("too many bad messages", End::Misbehaved),
                    Verdict::Limited => (crate::policy::RATE_LIMITED, End::RateLimited),
                    Verdict::Blocked => ("refused", End::Blocked),
                };
                let _ = close(&mut ws, CloseCode::Policy, reason, s.send_timeout).await;
                break end;
            }
            _ = ticker.tick() => {
                let quiet = last_heard.elapsed();
                if quiet >= s.idle_timeout {
                    break End::Idle;
                }
                if quiet >= s.ping_interval {
                    match timeout(s.send_timeout, ws.send(Message::Ping(Default::default()))).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break End::Error,
                        Err(_) => break End::SendTimeout,
                    }
                }
            }
        }
    };

    ctx.registry.remove(id);
    let removed = handler::leave(ctx, id, state.peers.drain());
    metrics::counter!("shoal_ws_disconnects_total", "reason" => end.as_str()).increment(1);
    tracing::debug!(
        "ws connection {id} from {} ({}) ended: {}, {removed} peers removed",
        upgrade.remote,
        upgrade.path,
        end.as_str()
    );
}

/// Writes the replies (in order) and flushes, within `limit`.
async fn send_all<S>(
    ws: &mut WebSocketStream<S>,
    replies: &mut Vec<Utf8Bytes>,
    limit: Duration,
) -> Result<(), End>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if replies.is_empty() {
        return Ok(());
    }
    let r = timeout(limit, async {
        for r in replies.drain(..) {
            ws.feed(Message::Text(r)).await?;
        }
        ws.flush().await
    })
    .await;
    replies.clear();
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::Error),
        Err(_) => Err(End::SendTimeout),
    }
}

async fn close<S>(
    ws: &mut WebSocketStream<S>,
    code: CloseCode,
    reason: &'static str,
    limit: Duration,
) -> Result<(), WsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    match timeout(limit, ws.close(Some(frame))).await {
        Ok(r) => r,
        Err(_) => Ok(()),
    }
}
