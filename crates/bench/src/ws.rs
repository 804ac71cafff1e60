//! The WebTorrent (JSON over WebSocket) load generator.
//!
//! Each connection is a tokio task standing for one browser tab: its simulated peers
//! announce with WebRTC offers and scrape, one request in flight at a time, and while it
//! waits it does what a real client does with what the tracker relays to it: it answers
//! every offer (sending the answer back through the tracker to the offering peer) and
//! counts the answers that come back for its own offers. Latency is the time from sending
//! an announce or scrape to the tracker's own response to it (not the relayed messages).
//! The runtime, the connection tasks and their clock and counts are shared with the HTTP
//! generator ([`crate::tcp_load`]).
//!
//! Binary fields (info hash, peer id, offer id) are JSON strings of code points U+0000 to
//! U+00FF, one per byte, as real clients send them (see docs/real-clients.md).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::net::Dialer;
use crate::passkeys::{of_peer, Passkeys};
use crate::run::{RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};
use crate::tcp_load::{ConnectionRun, TcpArgs, TcpLoad};
use crate::workload::{RequestKind, Workload, WorkloadArgs};
use shoal_proto::path::Action;
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

/// Flags of `shoal-bench ws`.
#[derive(Args, Clone, Debug)]
pub struct WsArgs {
    #[command(flatten)]
    pub tcp: TcpArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Simulated peers per connection, as a browser tab holds a few torrents: each
    /// connection announces for at most this many of its share of `--peers` (so for at
    /// most this many torrents at once; shoal refuses more than 256 per connection by
    /// default, as a guard against one connection claiming whole swarms).
    #[arg(long, default_value_t = 64)]
    pub peers_per_connection: usize,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

/// A binary identifier as a JSON string of code points U+0000..U+00FF.
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| b as char).collect()
}

/// The inverse of [`latin1`]; `None` if a code point is above U+00FF or the length is wrong.
pub fn from_latin1<const N: usize>(s: &str) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut n = 0;
    for c in s.chars() {
        let c = u32::from(c);
        if c > 0xff || n == N {
            return None;
        }
        out[n] = c as u8;
        n += 1;
    }
    (n == N).then_some(out)
}

/// Runs `shoal-bench ws`.
pub fn run(args: &WsArgs) -> Result<RunResult> {
    let load = TcpLoad::new("ws", &args.tcp, &args.run)?;
    let dialer = args.tcp.dialer(&[])?;
    let shared = Shared {
        dialer,
        passkeys: Passkeys::from_args(&args.workload)?.map(|k| k.paths(Action::Announce)),
        args: args.clone(),
    };
    load.run(shared, connection)
}

struct Shared {
    dialer: Dialer,
    /// `--passkeys`: the URL path of connection k is the k-th key's `/<passkey>/announce`.
    passkeys: Option<Vec<String>>,
    args: WsArgs,
}

/// What the answer being waited for must be.
enum Waiting {
    Announce(InfoHash),
    Scrape(Vec<InfoHash>),
}

const FAKE_SDP: &str = "v=0\r\no=- 4215775240449105457 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:shoalbench\r\na=ice-pwd:shoalbenchshoalbenchsh\r\na=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\na=setup:actpass\r\na=mid:0\r\na=sctp-port:5000\r\n";

async fn connection(sh: Arc<Shared>, mut c: ConnectionRun) -> Stats {
    let args = &sh.args;
    let mut workload = Workload::new(&args.workload, c.k, c.n);
    let timeout = args.run.timeout;
    let path = match &sh.passkeys {
        Some(paths) => of_peer(paths, c.k as u32),
        None => &sh.dialer.ep.path,
    };
    let url = format!("ws://{}{path}", sh.dialer.ep.addr);
    // Which of our peers announced each torrent (answers go out under that peer id).
    let mut ours: HashMap<InfoHash, PeerId> = HashMap::new();
    let mut hashes = Vec::new();
    let mut acks = AnswerAcks::default();
    let mut ws = None;
    while c.next_round().is_some() {
        if ws.is_none() {
            let k = c.k;
            let opened = c
                .open(timeout, async {
                    let s = sh.dialer.connect(k).await?;
                    tokio_tungstenite::client_async(url.as_str(), s)
                        .await
                        .map_err(std::io::Error::other)
                })
                .await;
            let Some((s, _)) = opened else { continue };
            ws = Some(s);
        }
        let s = ws.as_mut().expect("connected above");
        let (op, msg, waiting) = match workload.next_kind() {
            RequestKind::Scrape => {
                workload.scrape(&mut hashes);
                let list: Vec<String> = hashes.iter().map(|h| latin1(&h.0)).collect();
                let msg = json!({"action": "scrape", "info_hash": list});
                (Op::Scrape, msg, Waiting::Scrape(hashes.clone()))
            }
            _ => {
                let p = workload
                    .rng
                    .usize(..workload.peer_count().min(args.peers_per_connection.max(1)));
                let a = workload.announce(p);
                // Like a real client, a connection keeps one peer id per torrent: the
                // tracker relays an answer only from the peer an offer was sent to, and
                // the offer does not say which of several ids that was.
                let peer_id = if a.event == AnnounceEvent::Stopped {
                    ours.remove(&a.info_hash).unwrap_or(a.peer_id)
                } else {
                    *ours.entry(a.info_hash).or_insert(a.peer_id)
                };
                let mut msg = json!({
                    "action": "announce",
                    "info_hash": latin1(&a.info_hash.0),
                    "peer_id": latin1(&peer_id.0),
                    "numwant": a.numwant,
                    "uploaded": a.uploaded,
                    "downloaded": a.downloaded,
                    "left": a.left,
                });
                let event = match a.event {
                    AnnounceEvent::Started => Some("started"),
                    AnnounceEvent::Completed => Some("completed"),
                    AnnounceEvent::Stopped => Some("stopped"),
                    AnnounceEvent::None => None,
                };
                if let Some(e) = event {
                    msg["event"] = json!(e);
                }
                if a.event != AnnounceEvent::Stopped {
                    let offers: Vec<Value> = (0..args.workload.offers.min(a.numwant as usize))
                        .map(|_| {
                            let id: [u8; 20] = std::array::from_fn(|_| workload.rng.u8(..));
                            json!({"offer": {"type": "offer", "sdp": FAKE_SDP}, "offer_id": latin1(&id)})
                        })
                        .collect();
                    msg["offers"] = Value::Array(offers);
                }
                (Op::Announce, msg, Waiting::Announce(a.info_hash))
            }
        };
        let mut acks_ahead = match &waiting {
            Waiting::Announce(ih) => acks.ahead_of_announce(ih),
            Waiting::Scrape(_) => 0,
        };
        let text = msg.to_string();
        c.stats.sent[op as usize] += 1;
        c.stats.bytes_out += text.len() as u64;
        let sent_at = Instant::now();
        let deadline = sent_at + timeout;
        if s.send(Message::Text(text.into())).await.is_err() {
            c.stats.error(ErrorKind::Connection);
            ws = None;
            continue;
        }
        // Read until our answer arrives, serving relayed offers and answers meanwhile.
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = match tokio::time::timeout(left, s.next()).await {
                Err(_) => {
                    c.stats.error(ErrorKind::Timeout);
                    break;
                }
                Ok(None) | Ok(Some(Err(_))) => {
                    c.stats.error(ErrorKind::Connection);
                    ws = None;
                    break;
                }
                Ok(Some(Ok(m))) => m,
            };
            let text = match next {
                Message::Text(t) => t,
                Message::Close(_) => {
                    c.stats.error(ErrorKind::Connection);
                    ws = None;
                    break;
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Binary(_) => {
                    c.stats.error(ErrorKind::InvalidResponse);
                    continue;
                }
            };
            c.stats.bytes_in += text.len() as u64;
            match classify(&text, &waiting, args.workload.numwant) {
                Incoming::Offer {
                    info_hash,
                    from,
                    offer_id,
                } => {
                    c.stats.add_extra("offers_received", 1);
                    // An offer for a torrent this tab has since stopped: a real client
                    // has nobody left to answer it with.
                    let Some(me) = ours.get(&info_hash).copied() else {
                        c.stats.add_extra("offers_ignored", 1);
                        continue;
                    };
                    let answer = json!({
                        "action": "announce",
                        "info_hash": latin1(&info_hash.0),
                        "peer_id": latin1(&me.0),
                        "to_peer_id": from,
                        "offer_id": offer_id,
                        "answer": {"type": "answer", "sdp": FAKE_SDP},
                    })
                    .to_string();
                    c.stats.bytes_out += answer.len() as u64;
                    if s.send(Message::Text(answer.into())).await.is_err() {
                        c.stats.error(ErrorKind::Connection);
                        ws = None;
                        break;
                    }
                    c.stats.add_extra("answers_sent", 1);
                    acks.answered(info_hash);
                }
                Incoming::Answer => c.stats.add_extra("answers_received", 1),
                Incoming::Refused => c.stats.add_extra("answers_refused", 1),
                Incoming::OtherAnnounce(ih) => {
                    if acks.unexpected(&ih) {
                        c.stats.add_extra("answer_acks", 1);
                    } else {
                        c.stats.add_extra("unmatched_messages", 1);
                    }
                }
                Incoming::Other => c.stats.add_extra("unmatched_messages", 1),
                Incoming::Mine(Ok(())) if acks_ahead > 0 => {
                    // The acknowledgement of an answer about this torrent sent before
                    // the announce, not its response (see AnswerAcks).
                    acks_ahead -= 1;
                    if let Waiting::Announce(ih) = &waiting {
                        acks.take(ih);
                    }
                    c.stats.add_extra("answer_acks", 1);
                }
                Incoming::Mine(Ok(())) => {
                    c.answered(op, sent_at);
                    break;
                }
                Incoming::Mine(Err(kind)) => {
                    c.stats.error(kind);
                    break;
                }
            }
        }
        if ws.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if let Some(mut s) = ws {
        let _ = tokio::time::timeout(Duration::from_millis(200), s.close(None)).await;
    }
    c.finish()
}

enum Incoming {
    /// An offer relayed from another peer: to be answered.
    Offer {
        info_hash: InfoHash,
        from: Value,
        offer_id: Value,
    },
    /// An answer relayed back for one of our offers.
    Answer,
    /// A failure that is not about the awaited request: the tracker refusing one of our
    /// answers (its offer expired, or the offering peer left). Trackers that drop such
    /// answers silently send nothing; this is not a failed request.
    Refused,
    /// The response to the request we are waiting for, checked.
    Mine(Result<(), ErrorKind>),
    /// An announce response for another torrent than the awaited one: a late response to
    /// a timed-out request, or a tracker's acknowledgement of an answer (see [`AnswerAcks`]).
    OtherAnnounce(InfoHash),
    /// Something else (a late response to an earlier, timed-out request).
    Other,
}

/// Sorts one message from the tracker and checks it if it is the awaited response.
fn classify(text: &str, waiting: &Waiting, numwant: u32) -> Incoming {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Incoming::Mine(Err(ErrorKind::InvalidResponse));
    };
    let hash = |v: &Value| v.as_str().and_then(from_latin1::<20>).map(InfoHash);
    if v.get("failure reason").is_some() {
        // A failure names the action and info hash it is about (where the tracker says):
        // one about another torrent than the awaited announce's, or an announce failure
        // while a scrape is awaited, answers one of our answers. (One about the same
        // torrent cannot be told apart and counts against the request.)
        let action = v.get("action").and_then(Value::as_str);
        let about = v.get("info_hash").and_then(hash);
        let other = match waiting {
            Waiting::Announce(ih) => about.is_some_and(|h| h != *ih),
            Waiting::Scrape(_) => action == Some("announce"),
        };
        return if other {
            Incoming::Refused
        } else {
            Incoming::Mine(Err(ErrorKind::ErrorResponse))
        };
    }
    match (v.get("action").and_then(Value::as_str), waiting) {
        (Some("announce"), _) if v.get("offer").is_some() => {
            match (
                v.get("info_hash").and_then(hash),
                v.get("peer_id"),
                v.get("offer_id"),
            ) {
                (Some(info_hash), Some(from), Some(offer_id)) => Incoming::Offer {
                    info_hash,
                    from: from.clone(),
                    offer_id: offer_id.clone(),
                },
                _ => Incoming::Mine(Err(ErrorKind::InvalidResponse)),
            }
        }
        (Some("announce"), _) if v.get("answer").is_some() => Incoming::Answer,
        (Some("announce"), Waiting::Announce(ih)) => {
            match v.get("info_hash").and_then(hash) {
                Some(h) if h == *ih => {}
                Some(h) => return Incoming::OtherAnnounce(h),
                None => return Incoming::Other,
            }
            let counts_ok = ["complete", "incomplete"]
                .iter()
                .all(|k| v.get(*k).map(|x| x.is_u64()).unwrap_or(true));
            let _ = numwant;
            if counts_ok && v.get("interval").map(Value::is_u64).unwrap_or(true) {
                Incoming::Mine(Ok(()))
            } else {
                Incoming::Mine(Err(ErrorKind::InvalidResponse))
            }
        }
        (Some("scrape"), Waiting::Scrape(asked)) => match v.get("files").and_then(Value::as_object)
        {
            Some(files) => {
                let ok = files.iter().all(|(k, f)| {
                    from_latin1::<20>(k).is_some_and(|h| asked.contains(&InfoHash(h)))
                        && f.get("complete").is_some_and(Value::is_u64)
                });
                Incoming::Mine(if ok {
                    Ok(())
                } else {
                    Err(ErrorKind::InvalidResponse)
                })
            }
            None => Incoming::Mine(Err(ErrorKind::InvalidResponse)),
        },
        (Some("announce"), Waiting::Scrape(_)) => match v.get("info_hash").and_then(hash) {
            Some(h) => Incoming::OtherAnnounce(h),
            None => Incoming::Other,
        },
        _ => Incoming::Other,
    }
}

/// Some trackers (aquatic_ws among them) answer an `answer` message with an announce
/// response for its torrent, as for any announce; others (shoal, bittorrent-tracker) send
/// nothing back. Such an acknowledgement for torrent X looks exactly like the response to
/// an announce for X, and counting it as one would record a response that came after a
/// few microseconds and leave the real one unmatched. A connection's messages keep their
/// order, and a tracker handles one connection's messages about one torrent in order, so
/// the acknowledgements of answers sent before an announce come before its response.
/// This remembers the answers sent and learns whether the tracker acknowledges them.
#[derive(Default)]
struct AnswerAcks {
    /// Torrents of the answers sent and not acknowledged, oldest first.
    sent: VecDeque<InfoHash>,
    /// Acknowledgements seen: unexpected announce responses for a torrent just answered.
    seen: u32,
}

impl AnswerAcks {
    /// Answers remembered at most (a tracker that never acknowledges leaves them all).
    const MAX: usize = 4096;
    /// Acknowledgements seen before the tracker counts as one that sends them (a late
    /// response to a timed-out announce looks like one too).
    const LEARNED: u32 = 8;

    fn answered(&mut self, ih: InfoHash) {
        if self.sent.len() == Self::MAX {
            self.sent.pop_front();
        }
        self.sent.push_back(ih);
    }

    fn take(&mut self, ih: &InfoHash) -> bool {
        match self.sent.iter().position(|h| h == ih) {
            Some(i) => {
                self.sent.remove(i);
                true
            }
            None => false,
        }
    }

    /// An announce response for `ih` while something else is awaited: an
    /// acknowledgement if an answer about `ih` is outstanding.
    fn unexpected(&mut self, ih: &InfoHash) -> bool {
        let ack = self.take(ih);
        if ack {
            self.seen = self.seen.saturating_add(1);
        }
        ack
    }

    /// How many acknowledgements about `ih` will come before the response to an announce
    /// for `ih` sent now.
    fn ahead_of_announce(&self, ih: &InfoHash) -> usize {
        if self.seen < Self::LEARNED {
            return 0;
        }
        self.sent.iter().filter(|h| *h == ih).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_round_trip() {
        let b: [u8; 20] = std::array::from_fn(|i| (i * 13) as u8 | 0x80);
        let s = latin1(&b);
        assert_eq!(from_latin1::<20>(&s), Some(b));
        assert_eq!(from_latin1::<20>("short"), None);
        assert_eq!(from_latin1::<2>("\u{100}a"), None);
    }

    #[test]
    fn acknowledgements_of_answers_are_learned_and_told_from_responses() {
        let (x, y) = (InfoHash([1; 20]), InfoHash([2; 20]));
        let mut acks = AnswerAcks::default();
        // Not learned yet: an announce for X after an answer about X expects its response
        // first (a tracker that never acknowledges must not lose responses).
        acks.answered(x);
        assert_eq!(acks.ahead_of_announce(&x), 0);
        // Acknowledgements arriving while something else is awaited teach it.
        assert!(acks.unexpected(&x));
        assert!(
            !acks.unexpected(&y),
            "nothing answered about Y: a late response"
        );
        for _ in 1..AnswerAcks::LEARNED {
            acks.answered(y);
            assert!(acks.unexpected(&y));
        }
        acks.answered(x);
        acks.answered(x);
        acks.answered(y);
        assert_eq!(acks.ahead_of_announce(&x), 2);
        assert_eq!(acks.ahead_of_announce(&y), 1);
        assert!(acks.take(&x));
        assert_eq!(acks.ahead_of_announce(&x), 1);
        // Bounded for trackers that never acknowledge.
        for _ in 0..2 * AnswerAcks::MAX {
            acks.answered(y);
        }
        assert_eq!(acks.sent.len(), AnswerAcks::MAX);
    }

    #[test]
    fn classifies_tracker_messages() {
        let ih = InfoHash([0xab; 20]);
        let w = Waiting::Announce(ih);
        let ihs = latin1(&ih.0);
        let resp = json!({"action": "announce", "info_hash": ihs, "complete": 1, "incomplete": 0, "interval": 120}).to_string();
        assert!(matches!(classify(&resp, &w, 5), Incoming::Mine(Ok(()))));
        let bad = json!({"action": "announce", "info_hash": ihs, "complete": "x"}).to_string();
        assert!(matches!(
            classify(&bad, &w, 5),
            Incoming::Mine(Err(ErrorKind::InvalidResponse))
        ));
        let offer = json!({"action": "announce", "info_hash": ihs, "peer_id": "p", "offer_id": "o", "offer": {"type": "offer", "sdp": ""}}).to_string();
        assert!(matches!(classify(&offer, &w, 5), Incoming::Offer { .. }));
        let fail = json!({"failure reason": "nope"}).to_string();
        assert!(matches!(
            classify(&fail, &w, 5),
            Incoming::Mine(Err(ErrorKind::ErrorResponse))
        ));
        // Failures about another torrent, or an announce failure while a scrape is
        // awaited, are refusals of our answers, not the awaited response.
        let same =
            json!({"failure reason": "nope", "action": "announce", "info_hash": ihs}).to_string();
        assert!(matches!(
            classify(&same, &w, 5),
            Incoming::Mine(Err(ErrorKind::ErrorResponse))
        ));
        let elsewhere = json!({"failure reason": "offer expired", "action": "announce", "info_hash": latin1(&[1; 20])}).to_string();
        assert!(matches!(classify(&elsewhere, &w, 5), Incoming::Refused));
        let scr = Waiting::Scrape(vec![ih]);
        assert!(matches!(classify(&same, &scr, 5), Incoming::Refused));
        // An announce response about another torrent carries its hash (an acknowledgement
        // of an answer, or a late response).
        let ack = json!({"action": "announce", "info_hash": latin1(&[1; 20]), "complete": 1, "incomplete": 0, "interval": 120}).to_string();
        assert!(
            matches!(classify(&ack, &w, 5), Incoming::OtherAnnounce(h) if h == InfoHash([1; 20]))
        );
        assert!(matches!(classify(&resp, &scr, 5), Incoming::OtherAnnounce(h) if h == ih));
        let files = json!({"action": "scrape", "files": {ihs.clone(): {"complete": 1, "incomplete": 2, "downloaded": 3}}}).to_string();
        assert!(matches!(classify(&files, &scr, 5), Incoming::Mine(Ok(()))));
        let other = Waiting::Scrape(vec![InfoHash([1; 20])]);
        assert!(matches!(
            classify(&files, &other, 5),
            Incoming::Mine(Err(_))
        ));
    }
}
