//! One WebTorrent connection's two tasks: frames in, replies and relayed messages out.
//!
//! The reader waits on a frame from the client and on a timer for pings and the idle
//! timeout; it handles each message and hands the replies to the writer. The writer waits
//! on those replies and on messages other connections relayed into this one's bounded
//! queue (when the queue is full, relays are dropped, not the connection: see
//! `registry`). Writes are batched (everything waiting is written, then one flush) and
//! bounded in time, so a client that stops reading is closed, not buffered; the reading
//! never waits on a write (see [`run`]). When the reader ends for any reason, the
//! connection's peers leave their swarms at once.
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

use futures_util::stream::SplitSink;
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

/// Replies to the client's own messages waiting for the writer. While the writer waits
/// for the client to read, the reader goes on reading; past this many waiting replies, new
/// ones are dropped (`shoal_ws_replies_dropped_total`) rather than the reading stopped:
/// the client may itself be waiting to write before it reads again (one message read per
/// message sent, with megabytes of relayed messages ahead of it in the TCP buffers), and
/// a reader that stopped would bring back the wait on each other. A client that does not
/// read at all is still closed by `send_timeout`, through the writer.
const REPLY_BACKLOG: usize = 256;

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
///
/// Reading and writing are two tasks: the reader handles the client's messages and hands
/// its replies to the writer, which also writes what other connections relay. So a write
/// that waits for the client to read never stops the reading. With one task doing both, a
/// client that reads one message for each it sends (aquatic_ws_load_test does) and this
/// task could each wait on a write to the other with both TCP buffers full, until
/// `send_timeout` closed a connection whose client was merely busy.
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
    let ws =
        WebSocketStream::from_partially_read(stream, upgrade.leftover, Role::Server, Some(config))
            .await;
    let (sink, mut stream) = ws.split();
    let (queue, inbox) = mpsc::channel(s.limits.outgoing_queue.max(1));
    ctx.registry.insert(id, queue);
    let (own, own_rx) = mpsc::channel(REPLY_BACKLOG);
    let mut writer = tokio::spawn(write(sink, own_rx, inbox, s.send_timeout));
    let mut state = ConnState::new(id, upgrade.remote.ip().to_canonical(), passkey);
    let mut replies: Vec<Utf8Bytes> = Vec::new();
    let mut last_heard = Instant::now();
    let mut ticker = tokio::time::interval_at(Instant::now() + s.ping_interval, s.ping_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let (end, closing) = loop {
        tokio::select! {
            biased;
            ended = &mut writer => {
                // The client stopped reading for `send_timeout`, or the socket failed.
                break (ended.unwrap_or(End::Error), None);
            }
            frame = stream.next() => {
                let verdict = match frame {
                    None => break (End::Closed, None),
                    Some(Err(WsError::Capacity(e))) => {
                        // Over the size limits: say so, then close (the stream cannot be
                        // resynchronised after an oversized frame).
                        let err = RequestError::Json(format!("message too large: {e}"));
                        handler::misbehaved(ctx, &mut state, &err, FailureContext::default(), &mut replies);
                        let _ = hand_over(&own, &mut replies);
                        break (End::TooLarge, Some((CloseCode::Size, "message too large")));
                    }
                    Some(Err(_)) => break (End::Error, None),
                    Some(Ok(msg)) => {
                        last_heard = Instant::now();
                        match msg {
                            Message::Text(t) => handler::handle_text(ctx, &mut state, t.as_str(), shoal_swarm::clock::now(), &mut replies),
                            Message::Binary(b) => handler::handle(ctx, &mut state, &b, shoal_swarm::clock::now(), &mut replies),
                            // tungstenite has queued the closing reply: the writer sends it
                            // when it finishes.
                            Message::Close(_) => break (End::Closed, None),
                            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Verdict::Continue,
                        }
                    }
                };
                if hand_over(&own, &mut replies).is_err() {
                    // The writer ended: its reason comes from the branch above.
                    continue;
                }
                let (reason, end) = match verdict {
                    Verdict::Continue => continue,
                    Verdict::Close => ("too many bad messages", End::Misbehaved),
                    Verdict::Limited => (crate::policy::RATE_LIMITED, End::RateLimited),
                    Verdict::Blocked => ("refused", End::Blocked),
                };
                break (end, Some((CloseCode::Policy, reason)));
            }
            _ = ticker.tick() => {
                let quiet = last_heard.elapsed();
                if quiet >= s.idle_timeout {
                    break (End::Idle, None);
                }
                if quiet >= s.ping_interval {
                    // Skipped if replies are waiting: the client has not read them either.
                    let _ = own.try_send(Message::Ping(Default::default()));
                }
            }
        }
    };

    // The client's own peers leave at once; the writer gets `send_timeout` to send what is
    // left (and the close frame), then it is stopped.
    ctx.registry.remove(id);
    let removed = handler::leave(ctx, id, state.peers.drain());
    if let Some((code, reason)) = closing {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = own.try_send(Message::Close(Some(frame)));
    }
    drop(own);
    if !writer.is_finished() && timeout(s.send_timeout, &mut writer).await.is_err() {
        writer.abort();
    }
    metrics::counter!("shoal_ws_disconnects_total", "reason" => end.as_str()).increment(1);
    tracing::debug!(
        "ws connection {id} from {} ({}) ended: {}, {removed} peers removed",
        upgrade.remote,
        upgrade.path,
        end.as_str()
    );
}

/// Hands the replies to the writer, in order, dropping those past [`REPLY_BACKLOG`];
/// `Err` if the writer has ended.
fn hand_over(own: &mpsc::Sender<Message>, replies: &mut Vec<Utf8Bytes>) -> Result<(), ()> {
    for r in replies.drain(..) {
        match own.try_send(Message::Text(r)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                crate::fixed_counter::fixed_counter!("shoal_ws_replies_dropped_total").increment(1);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(()),
        }
    }
    Ok(())
}

/// The writer: replies to the client's own messages first, then what other connections
/// relayed, up to [`WRITE_BATCH`] messages, then one flush. A client that does not read
/// at all is closed when a write has waited `send_timeout`; one that reads slowly keeps
/// its connection and loses the relayed messages its full queue cannot take (see
/// `registry`). Ends when the reader drops its sender (after a flush, which also sends
/// tungstenite's reply to a client's close), after a close frame, or on a failed or timed
/// out write.
async fn write<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut own: mpsc::Receiver<Message>,
    mut inbox: mpsc::Receiver<Utf8Bytes>,
    limit: Duration,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let first = tokio::select! {
            biased;
            m = own.recv() => m,
            // The registry holds a sender until the reader ends, and the reader's own
            // sender goes at the same time: `None` here means the end either way.
            m = inbox.recv() => m.map(Message::Text),
        };
        let Some(first) = first else {
            let _ = timeout(limit, sink.flush()).await;
            return End::Closed;
        };
        let mut closing = matches!(first, Message::Close(_));
        let sent = timeout(limit, async {
            sink.feed(first).await?;
            for _ in 1..WRITE_BATCH {
                if closing {
                    break;
                }
                let next = match own.try_recv() {
                    Ok(m) => m,
                    Err(_) => match inbox.try_recv() {
                        Ok(t) => Message::Text(t),
                        Err(_) => break,
                    },
                };
                closing = matches!(next, Message::Close(_));
                sink.feed(next).await?;
            }
            sink.flush().await
        })
        .await;
        match sent {
            Ok(Ok(())) if closing => return End::Closed,
            Ok(Ok(())) => {}
            Ok(Err(_)) => return End::Error,
            Err(_) => return End::SendTimeout,
        }
    }
}
