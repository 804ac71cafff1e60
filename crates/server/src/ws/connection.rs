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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use shoal_proto::ws::{FailureContext, RequestError};
use shoal_swarm::webtorrent::ConnectionId;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, Notify};
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

/// The replies (and pings and the closing frame) the reader hands the writer. A queue
/// that allocates only while replies wait, not a channel: a tokio channel allocates a
/// block of 32 slots when it is made (1.8 KiB of `Message`s), which every idle
/// connection would carry.
#[derive(Default)]
struct Replies {
    queue: parking_lot::Mutex<VecDeque<Message>>,
    ready: Notify,
    closed: AtomicBool,
}

impl Replies {
    /// Queues `m` unless [`REPLY_BACKLOG`] messages wait already (`false`: dropped).
    fn push(&self, m: Message) -> bool {
        let mut q = self.queue.lock();
        if q.len() >= REPLY_BACKLOG {
            return false;
        }
        q.push_back(m);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The last message: queued whatever is waiting; the reader hands over nothing after.
    fn close_with(&self, last: Option<Message>) {
        if let Some(m) = last {
            self.queue.lock().push_back(m);
        }
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    fn pop(&self) -> Option<Message> {
        let mut q = self.queue.lock();
        let m = q.pop_front();
        if q.is_empty() && q.capacity() > 16 {
            // A burst is over: an idle connection keeps no memory for it.
            *q = VecDeque::new();
        }
        m
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

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
    let own = Arc::new(Replies::default());
    let mut writer = tokio::spawn(write(sink, own.clone(), inbox, s.send_timeout));
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
                        hand_over(&own, &mut replies);
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
                // If the writer has ended, the branch above says why next time round.
                hand_over(&own, &mut replies);
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
                    own.push(Message::Ping(Default::default()));
                }
            }
        }
    };

    // The writer gets what is left (and the close frame) before the relays stop, and then
    // `send_timeout` to send it; the client's own peers leave at once.
    own.close_with(closing.map(|(code, reason)| {
        Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))
    }));
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

/// Hands the replies to the writer, in order, dropping those past [`REPLY_BACKLOG`].
fn hand_over(own: &Replies, replies: &mut Vec<Utf8Bytes>) {
    for r in replies.drain(..) {
        if !own.push(Message::Text(r)) {
            crate::fixed_counter::fixed_counter!("shoal_ws_replies_dropped_total").increment(1);
        }
    }
}

/// The writer: replies to the client's own messages first, then what other connections
/// relayed, up to [`WRITE_BATCH`] messages, then one flush. A client that does not read
/// at all is closed when a write has waited `send_timeout`; one that reads slowly keeps
/// its connection and loses the relayed messages its full queue cannot take (see
/// `registry`). Ends when the reader has closed the replies and they are all written
/// (after a flush, which also sends tungstenite's reply to a client's close), after a
/// close frame, or on a failed or timed out write.
async fn write<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    own: Arc<Replies>,
    mut inbox: mpsc::Receiver<Utf8Bytes>,
    limit: Duration,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut relays_open = true;
    loop {
        let first = match own.pop() {
            Some(m) => m,
            None if own.is_closed() => {
                let _ = timeout(limit, sink.flush()).await;
                return End::Closed;
            }
            None => tokio::select! {
                biased;
                _ = own.ready.notified() => continue,
                m = inbox.recv(), if relays_open => match m {
                    Some(t) => Message::Text(t),
                    // The registry let go: the reader is ending, and says so next.
                    None => {
                        relays_open = false;
                        continue;
                    }
                },
            },
        };
        let mut closing = matches!(first, Message::Close(_));
        let sent = timeout(limit, async {
            sink.feed(first).await?;
            for _ in 1..WRITE_BATCH {
                if closing {
                    break;
                }
                let next = match own.pop() {
                    Some(m) => m,
                    None => match inbox.try_recv() {
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
