//! One WebTorrent connection's two tasks: frames in, replies and relayed messages out.
//!
//! The reader waits on a frame from the client and on a timer for pings and the idle
//! timeout; it handles each message and hands the replies to the writer. The writer waits
//! on those replies and on the offers and answers other connections relayed, all in the
//! connection's bounded queues (when one is full, what it holds is dropped, not the
//! connection; which goes first is in `outbox`). Writes are batched (everything waiting is written, then one flush) and
//! bounded in time, so a client that stops reading is closed, not buffered; the reading
//! never waits on a write (see [`run`]). When the reader ends for any reason, the
//! connection's peers leave their swarms at once.
//!
//! WebSocket crate: tokio-websockets 0.13, chosen by measurement, twice. First (one
//! connection on one thread, 200,000 masked 400-byte text frames in, one 150-byte reply
//! out per frame, three rounds on the 2-core VM): tokio-tungstenite 217k / 196k / 159k
//! msg/s, fastwebsockets 220k / 209k / 280k, tokio-websockets 144k / 160k / 216k, all
//! within that machine's noise, and tokio-tungstenite was taken. Then under
//! `aquatic_ws_load_test`, whose announces carry WebTorrent's binary strings (1.6 KB with
//! a multi-byte character in every other place of those strings), 16.6% of the tracker's
//! samples were tungstenite's UTF-8 check of each text message (the standard library's
//! `str::from_utf8`, 2.04 µs per such announce), which it offers no way to replace;
//! tokio-websockets checks with simdutf8 (0.144 µs; `cargo bench -p shoal-proto --bench
//! ws_text`). Its read buffer is tokio-util's (8 KiB, allocated when the connection
//! starts).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{FutureExt, SinkExt, StreamExt};
use shoal_proto::ws::{FailureContext, RequestError};
use shoal_swarm::webtorrent::ConnectionId;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{timeout, Instant};
use tokio_websockets::{
    CloseCode, Error as WsError, Limits, Message, ServerBuilder, WebSocketStream,
};

use super::context::WsContext;
use super::handler::{self, ConnState, Verdict};
use super::outbox::{Bounds, Delivery, Outbox};
use super::upgrade_request::{Prefixed, UpgradeRequest};
use super::Text;

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
///
/// Reading and writing are two tasks: the reader handles the client's messages and hands
/// its replies to the writer, which also writes what other connections relay. So a write
/// that waits for the client to read never stops the reading. With one task doing both, a
/// client that reads one message for each it sends (aquatic_ws_load_test does) and this
/// task could each wait on a write to the other with both TCP buffers full, until
/// `send_timeout` closed a connection whose client was merely busy.
pub async fn run<S>(stream: S, mut upgrade: UpgradeRequest, ctx: &Arc<WsContext>, id: ConnectionId)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let s = &ctx.settings;
    // The passkey is read from the upgrade path once; every message of the connection
    // presents it.
    let passkey = upgrade.passkey().map(Box::from);
    // The crate has one limit, on a frame and on the message it makes: set past ours, so
    // that a message over `max_message_size` gets a failure reason before the close (see
    // below); past twice the larger of our two limits it closes at once (1009).
    let hard_limit = 2 * s.limits.max_message_size.max(s.limits.max_frame_size);
    // Bytes written to the client so far: what `send_timeout` watches.
    let written = Arc::new(AtomicU64::new(0));
    let ws = ServerBuilder::new()
        .limits(Limits::default().max_payload_len(Some(hard_limit)))
        .serve(Prefixed::new(
            std::mem::take(&mut upgrade.leftover),
            stream,
            written.clone(),
        ));
    let (sink, mut stream) = ws.split();
    let own = Arc::new(Outbox::new(Bounds {
        offers: s.limits.outgoing_queue,
        answers: s.limits.answer_queue,
        offer_max_age: s.limits.offer_max_age,
        offers_per_reply: s.limits.offers_per_reply,
    }));
    ctx.registry.insert(id, own.clone());
    let mut writer = tokio::spawn(write(sink, own.clone(), s.send_timeout, written));
    let mut state = ConnState::new(id, upgrade.remote.ip().to_canonical(), passkey);
    let mut replies: Vec<Text> = Vec::new();
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
                    // Past the crate's limit: it has queued the closing frame (1009).
                    Some(Err(WsError::PayloadTooLong { .. })) => break (End::TooLarge, None),
                    Some(Err(_)) => break (End::Error, None),
                    Some(Ok(msg)) if msg.as_payload().len() > s.limits.max_message_size => {
                        // Over the size limit: say so, then close.
                        let err = RequestError::TooLarge(msg.as_payload().len(), s.limits.max_message_size);
                        handler::misbehaved(ctx, &mut state, &err, FailureContext::default(), &mut replies);
                        hand_over(&own, &mut replies);
                        break (End::TooLarge, Some((CloseCode::MESSAGE_TOO_BIG, "message too large")));
                    }
                    Some(Ok(msg)) => {
                        last_heard = Instant::now();
                        if let Some(t) = msg.as_text() {
                            handler::handle_text(ctx, &mut state, t, shoal_swarm::clock::now(), &mut replies)
                        } else if msg.is_binary() {
                            handler::handle(ctx, &mut state, msg.as_payload(), shoal_swarm::clock::now(), &mut replies)
                        } else if msg.is_close() {
                            // The crate has queued the closing reply: the writer sends it
                            // when it finishes.
                            break (End::Closed, None);
                        } else {
                            // A ping (the crate answers it) or a pong.
                            Verdict::Continue
                        }
                    }
                };
                // If the writer has ended, the branch above says why next time round.
                hand_over(&own, &mut replies);
                let (reason, end) = match verdict {
                    Verdict::Continue => continue,
                    Verdict::Close => ("too many bad messages", End::Misbehaved),
                    Verdict::Limited => (shoal_tracker::policy::RATE_LIMITED, End::RateLimited),
                    Verdict::Blocked => ("refused", End::Blocked),
                };
                break (end, Some((CloseCode::POLICY_VIOLATION, reason)));
            }
            _ = ticker.tick() => {
                let quiet = last_heard.elapsed();
                if quiet >= s.idle_timeout {
                    break (End::Idle, None);
                }
                if quiet >= s.ping_interval {
                    // Skipped if replies are waiting: the client has not read them either.
                    own.reply(Message::ping(""));
                }
            }
        }
    };

    // The writer gets the replies left (and the close frame), relays stop, and the writer
    // has `send_timeout` to send them; the client's own peers leave at once.
    own.close_with(closing.map(|(code, reason)| Message::close(Some(code), reason)));
    ctx.registry.remove(id);
    let removed = handler::leave(ctx, id, state.peers.drain());
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

/// Hands the replies to the writer, in order, dropping those past
/// [`super::outbox::REPLY_BACKLOG`].
fn hand_over(own: &Outbox, replies: &mut Vec<Text>) {
    for r in replies.drain(..) {
        if own.reply(Message::text(r)) == Delivery::Dropped {
            shoal_tracker::fixed_counter!("shoal_ws_replies_dropped_total").increment(1);
        }
    }
}

/// The writer: what the connection's [`Outbox`] gives, in its order, up to
/// [`WRITE_BATCH`] messages, then one flush. A client that does not read at all is closed
/// when a write has made no progress for `send_timeout`; one that reads, however slowly,
/// keeps its connection and loses what its full queues cannot take (see `outbox`). Ends when the reader has closed
/// the outbox and its replies are all written (after a flush, which also sends the crate's
/// reply to a client's close), after a close frame, or on a failed or timed out write.
async fn write<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    own: Arc<Outbox>,
    limit: Duration,
    written: Arc<AtomicU64>,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let first = match own.pop() {
            Some(m) => m,
            None if own.is_closed() => {
                let _ = within(limit, &written, sink.flush()).await;
                return End::Closed;
            }
            None => {
                own.ready.notified().await;
                continue;
            }
        };
        let mut closing = first.is_close();
        let sent = within(limit, &written, async {
            sink.feed(first).await?;
            for _ in 1..WRITE_BATCH {
                if closing {
                    break;
                }
                let Some(next) = own.pop() else { break };
                closing = next.is_close();
                sink.feed(next).await?;
            }
            sink.flush().await
        })
        .await;
        match sent {
            Some(Ok(())) if closing => return End::Closed,
            Some(Ok(())) => {}
            Some(Err(_)) => return End::Error,
            None => return End::SendTimeout,
        }
    }
}

/// How often a write that waits is polled again, woken or not.
const WRITE_REPOLL: Duration = Duration::from_millis(50);

/// Runs `write` to its end unless it makes no progress for `limit` (`None`: no byte was
/// `written` for that long), polling it again every [`WRITE_REPOLL`] while it waits.
///
/// Progress, not the whole write: the socket's send buffer is bounded (`socket`), and a
/// client that reads a few hundred messages a second (aquatic_ws_load_test's executor
/// serves some of its connections so, at times) takes longer than `send_timeout` to read
/// a batch and what waits in the buffers before it, but is reading.
///
/// The connection's two tasks share one stream, and tokio-websockets lets the reading
/// half finish a flush the writing half began (each read first writes what is queued).
/// The socket keeps one waker for its write readiness: if the reader's is there instead of
/// the writer's (a TLS read with something to write registers it), the reader is woken,
/// finishes the writer's flush, and the writer, parked in it, is never woken: it sleeps
/// until `send_timeout` closes a connection that was only busy. tokio-tungstenite wakes
/// both tasks through proxies; here the writer looks again itself. Seen once in fourteen
/// 20-s rounds of aquatic_ws_load_test before this: 7 connections closed by `send_timeout`.
/// A write done at its first poll (the usual case) costs no clock read and no timer.
async fn within<F: std::future::Future>(
    limit: Duration,
    written: &AtomicU64,
    write: F,
) -> Option<F::Output> {
    tokio::pin!(write);
    if let Some(out) = (&mut write).now_or_never() {
        return Some(out);
    }
    let mut seen = written.load(Ordering::Relaxed);
    let mut deadline = Instant::now() + limit;
    loop {
        tokio::select! {
            biased;
            out = &mut write => return Some(out),
            _ = tokio::time::sleep(WRITE_REPOLL) => {
                let now = written.load(Ordering::Relaxed);
                if now != seen {
                    seen = now;
                    deadline = Instant::now() + limit;
                } else if Instant::now() >= deadline {
                    return None;
                }
            }
        }
    }
}
