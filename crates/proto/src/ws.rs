//! WebTorrent tracker messages: the JSON that browser WebTorrent clients (and the
//! `bittorrent-tracker` npm client) exchange with a tracker over a WebSocket.
//!
//! Requests are parsed straight from a text frame's bytes into typed values
//! ([`parse_request`]); responses are typed values serialized to JSON text. The SDP
//! `offer` and `answer` objects are never interpreted: they are kept as raw JSON borrowed
//! from the request and copied verbatim into the relayed message, so relaying costs one
//! parse and one write, not a round trip through a JSON tree.
//!
//! Binary fields (info hash, peer id, offer id) are JSON strings whose code points are
//! U+0000..=U+00FF, one per byte (what JavaScript's `String.fromCharCode` of each byte
//! gives). A code point above U+00FF or a wrong length is refused with a message saying
//! which field was wrong, so that the tracker can answer with a `failure reason`.
//!
//! Like the rest of this crate: no sockets, no clocks, no panics on any input (fuzzed by
//! `fuzz/fuzz_targets/ws_message.rs`).

use std::borrow::Cow;
use std::fmt;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::common::{AnnounceEvent, InfoHash, PeerId};

mod fields;
mod json_out;
mod raw;

pub use fields::{decode_binary, encode_binary, OfferId, MAX_OFFER_ID_LEN, MAX_SCRAPE_HASHES};
use fields::{HashField, HashItem, Number, OfferIdField, PeerIdField, ToPeerIdField};
use raw::{RawOffer, RawRequest, RequestSeed};

/// A parsed request. Borrows the SDP objects from the message bytes.
#[derive(Debug)]
pub enum Request<'a> {
    Announce(Announce<'a>),
    Answer(Answer<'a>),
    Scrape(Scrape),
}

/// An `announce` (possibly carrying offers for other peers).
#[derive(Debug)]
pub struct Announce<'a> {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub event: AnnounceEvent,
    /// Bytes left; `None` when the client does not know yet (no metadata).
    pub left: Option<u64>,
    /// Bytes uploaded since the client started the torrent (0 when absent).
    pub uploaded: u64,
    /// Bytes downloaded since the client started the torrent (0 when absent).
    pub downloaded: u64,
    /// Peers wanted; `None` if not given.
    pub numwant: Option<u64>,
    /// The offers kept: the first ones of the message, as many as the parse was asked
    /// to keep (all of them by [`parse_request`] and [`parse_text`], which also check
    /// that each reads). Each is read when it is relayed ([`UnreadOffer::read`]).
    pub offers: Vec<UnreadOffer<'a>>,
    /// How many offers the message carried, those not kept included.
    pub offers_sent: usize,
}

impl Announce<'_> {
    /// Seeders have nothing left, or just said they completed ([`seeds`]).
    pub fn is_seeder(&self) -> bool {
        seeds(self.left, self.event)
    }
}

/// Whether a WebTorrent peer that says it has `left` bytes left (`None`: it did not say)
/// and announces `event` is a seeder: nothing left, or it just said it completed.
pub fn seeds(left: Option<u64>, event: AnnounceEvent) -> bool {
    left == Some(0) || event == AnnounceEvent::Completed
}

/// One offer of an announce, not read yet: its offer id and SDP as the JSON the client
/// sent. Under load most offers of an announce find no peer to go to, so the tracker
/// reads only those that do.
#[derive(Debug, Clone, Copy)]
pub struct UnreadOffer<'a>(RawOffer<'a>);

impl<'a> UnreadOffer<'a> {
    /// The offer's id and SDP, or why its offer id is not one.
    pub fn read(&self) -> Result<Offer<'a>, RequestError> {
        match fields::offer_id_of_literal(self.0.offer_id.get()) {
            Ok(offer_id) => Ok(Offer {
                offer_id,
                offer: self.0.offer,
            }),
            Err(e) => Err(RequestError::Json(e)),
        }
    }
}

/// One WebRTC offer to be relayed to some other peer of the swarm.
#[derive(Debug)]
pub struct Offer<'a> {
    pub offer_id: OfferId,
    pub offer: &'a RawValue,
}

/// An answer to an offer, to be relayed to the peer that made the offer.
#[derive(Debug)]
pub struct Answer<'a> {
    pub info_hash: InfoHash,
    /// The answering peer.
    pub peer_id: PeerId,
    /// The peer that made the offer.
    pub to_peer_id: PeerId,
    pub offer_id: OfferId,
    pub answer: &'a RawValue,
}

/// A scrape: no info hash means every torrent (if the server allows a full scrape).
#[derive(Debug, PartialEq, Eq)]
pub struct Scrape {
    pub info_hashes: Vec<InfoHash>,
}

/// Why a message was refused. The text goes back to the client as its `failure reason`.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("invalid message: {0}")]
    Json(String),
    #[error("missing field {0}")]
    Missing(&'static str),
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    #[error("unknown event {0:?}")]
    UnknownEvent(String),
    #[error("{0}")]
    Invalid(&'static str),
    /// A message over the server's size limit: its size and the limit, in bytes.
    #[error("message too large: {0} bytes, at most {1}")]
    TooLarge(usize, usize),
}

impl RequestError {
    /// A short label for metrics (bounded set of values).
    pub fn kind(&self) -> &'static str {
        match self {
            RequestError::Json(_) => "malformed",
            RequestError::Missing(_) => "missing_field",
            RequestError::UnknownAction(_) => "unknown_action",
            RequestError::UnknownEvent(_) => "unknown_event",
            RequestError::Invalid(_) => "invalid",
            RequestError::TooLarge(..) => "too_large",
        }
    }
}

/// What is known of a request that failed, so that the failure can be addressed the way
/// clients expect (`bittorrent-tracker` ignores announce replies for other torrents).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FailureContext {
    pub action: Option<Action>,
    pub info_hash: Option<InfoHash>,
}

/// The two actions of the protocol: the tracker's own, as on every protocol.
pub use crate::common::Action;

/// Parses one message given as bytes (a binary frame, whose UTF-8 nobody checked yet). On
/// error, also returns what could be read of the request.
pub fn parse_request(bytes: &[u8]) -> Result<Request<'_>, (RequestError, FailureContext)> {
    every_offer_reads(parse_request_within(bytes, || usize::MAX))
}

/// [`parse_request`], keeping at most `max_offers()` of an announce's offers, none of them
/// read yet ([`UnreadOffer`]): the others are checked to be JSON values and counted
/// ([`Announce::offers_sent`]) (see `raw`). `max_offers` is called only for a message
/// with an `offers` field.
pub fn parse_request_within(
    bytes: &[u8],
    max_offers: impl FnOnce() -> usize,
) -> Result<Request<'_>, (RequestError, FailureContext)> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    finish_request(read_request(&mut de, max_offers), bytes)
}

/// Parses one text frame's message, already checked as UTF-8 by the WebSocket layer: read
/// as a `str`, serde_json does not validate every string again (profiled under
/// aquatic_ws_load_test, whose offer ids are not ASCII, the second validation was 6.6% of
/// the tracker's CPU).
pub fn parse_text(text: &str) -> Result<Request<'_>, (RequestError, FailureContext)> {
    every_offer_reads(parse_text_within(text, || usize::MAX))
}

/// A parsed announce only if each of its offers reads; the failure of the first that
/// does not, addressed to the announce, otherwise.
fn every_offer_reads(
    parsed: Result<Request<'_>, (RequestError, FailureContext)>,
) -> Result<Request<'_>, (RequestError, FailureContext)> {
    if let Ok(Request::Announce(a)) = &parsed {
        if let Some(e) = a.offers.iter().find_map(|o| o.read().err()) {
            let context = FailureContext {
                action: Some(Action::Announce),
                info_hash: Some(a.info_hash),
            };
            return Err((e, context));
        }
    }
    parsed
}

/// [`parse_text`], keeping at most `max_offers()` of an announce's offers, unread (see
/// [`parse_request_within`]).
pub fn parse_text_within(
    text: &str,
    max_offers: impl FnOnce() -> usize,
) -> Result<Request<'_>, (RequestError, FailureContext)> {
    let mut de = serde_json::Deserializer::from_str(text);
    finish_request(read_request(&mut de, max_offers), text.as_bytes())
}

/// The whole message as one request: nothing but white space may follow it.
fn read_request<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    max_offers: impl FnOnce() -> usize,
) -> serde_json::Result<RawRequest<'de>> {
    use serde::de::DeserializeSeed;
    let raw = RequestSeed { max_offers }.deserialize(&mut *de)?;
    de.end()?;
    Ok(raw)
}

fn finish_request<'a>(
    raw: serde_json::Result<RawRequest<'a>>,
    bytes: &'a [u8],
) -> Result<Request<'a>, (RequestError, FailureContext)> {
    let raw: RawRequest<'_> = match raw {
        Ok(r) => r,
        Err(e) => {
            return Err((
                RequestError::Json(e.to_string()),
                peek_context(bytes).unwrap_or_default(),
            ))
        }
    };
    let action = match raw.action.as_deref() {
        Some("announce") => Action::Announce,
        Some("scrape") => Action::Scrape,
        Some(other) => {
            let mut name: String = other.chars().take(32).collect();
            if other.chars().nth(32).is_some() {
                name.push('…');
            }
            return Err((RequestError::UnknownAction(name), FailureContext::default()));
        }
        None => return Err((RequestError::Missing("action"), FailureContext::default())),
    };
    let single_hash = match &raw.info_hash {
        Some(HashField::One(h)) => Some(*h),
        _ => None,
    };
    let ctx = FailureContext {
        action: Some(action),
        info_hash: single_hash,
    };
    match action {
        Action::Scrape => Ok(Request::Scrape(Scrape {
            info_hashes: match raw.info_hash {
                None => Vec::new(),
                Some(HashField::One(h)) => vec![h],
                Some(HashField::Many(v)) => v,
            },
        })),
        Action::Announce => {
            let info_hash = match raw.info_hash {
                Some(HashField::One(h)) => h,
                Some(HashField::Many(_)) => {
                    return Err((
                        RequestError::Invalid("announce takes one info_hash, not an array"),
                        ctx,
                    ))
                }
                None => return Err((RequestError::Missing("info_hash"), ctx)),
            };
            let peer_id = match raw.peer_id {
                Some(PeerIdField(p)) => p,
                None => return Err((RequestError::Missing("peer_id"), ctx)),
            };
            if let Some(answer) = raw.answer {
                let to_peer_id = match raw.to_peer_id {
                    Some(ToPeerIdField(p)) => p,
                    None => return Err((RequestError::Missing("to_peer_id"), ctx)),
                };
                let offer_id = match raw.offer_id {
                    Some(OfferIdField(o)) => o,
                    None => return Err((RequestError::Missing("offer_id"), ctx)),
                };
                return Ok(Request::Answer(Answer {
                    info_hash,
                    peer_id,
                    to_peer_id,
                    offer_id,
                    answer,
                }));
            }
            let event = match raw.event.as_deref() {
                None | Some("") | Some("update") | Some("empty") => AnnounceEvent::None,
                Some("started") => AnnounceEvent::Started,
                Some("stopped") => AnnounceEvent::Stopped,
                Some("completed") => AnnounceEvent::Completed,
                Some(other) => {
                    let name: String = other.chars().take(32).collect();
                    return Err((RequestError::UnknownEvent(name), ctx));
                }
            };
            let (offers, offers_sent) = raw.offers.map_or((Vec::new(), 0), |o| (o.first, o.sent));
            Ok(Request::Announce(Announce {
                info_hash,
                peer_id,
                event,
                left: raw.left.map(|Number(n)| to_u64(n)),
                uploaded: raw.uploaded.map_or(0, |Number(n)| to_u64(n)),
                downloaded: raw.downloaded.map_or(0, |Number(n)| to_u64(n)),
                numwant: raw.numwant.map(|Number(n)| to_u64(n)),
                offers: offers.into_iter().map(UnreadOffer).collect(),
                offers_sent,
            }))
        }
    }
}

fn to_u64(n: f64) -> u64 {
    // `as` saturates and maps NaN to 0: exactly the leniency wanted here.
    n as u64
}

/// After a failed parse: the action and single info hash, if the message is JSON at all
/// and they can be read, so the failure reaches the right torrent on the client.
fn peek_context(bytes: &[u8]) -> Option<FailureContext> {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        action: Option<Cow<'a, str>>,
        info_hash: Option<&'a RawValue>,
    }
    let p: Peek<'_> = serde_json::from_slice(bytes).ok()?;
    let action = match p.action.as_deref() {
        Some("announce") => Some(Action::Announce),
        Some("scrape") => Some(Action::Scrape),
        _ => None,
    };
    let info_hash = p
        .info_hash
        .and_then(|raw| serde_json::from_str::<HashItem>(raw.get()).ok())
        .map(|HashItem(h)| h);
    Some(FailureContext { action, info_hash })
}

/// Serializes 20 bytes (or an offer id) as a binary string without an intermediate
/// `String`.
struct Binary<'a>(&'a [u8]);

impl Serialize for Binary<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&BinaryDisplay(self.0))
    }
}

struct BinaryDisplay<'a>(&'a [u8]);

impl fmt::Display for BinaryDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for &b in self.0 {
            f.write_char(char::from(b))?;
        }
        Ok(())
    }
}

/// The reply to an announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnounceResponse {
    pub info_hash: InfoHash,
    pub complete: u32,
    pub incomplete: u32,
    pub interval: u32,
}

impl Serialize for AnnounceResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("action", "announce")?;
        m.serialize_entry("info_hash", &Binary(&self.info_hash.0))?;
        m.serialize_entry("complete", &self.complete)?;
        m.serialize_entry("incomplete", &self.incomplete)?;
        m.serialize_entry("interval", &self.interval)?;
        m.end()
    }
}

/// An offer or an answer relayed from `peer_id`: an offer goes to another peer of the
/// swarm, an answer (`peer_id` is then the answering peer) to the peer that made the offer.
#[derive(Debug)]
pub struct Relayed<'a> {
    pub info_hash: InfoHash,
    pub peer_id: PeerId,
    pub offer_id: OfferId,
    pub sdp: Sdp<'a>,
}

/// What a relayed message carries, as the sending peer wrote it.
#[derive(Debug, Clone, Copy)]
pub enum Sdp<'a> {
    Offer(&'a RawValue),
    Answer(&'a RawValue),
}

impl<'a> Sdp<'a> {
    /// The message's key for it and its JSON.
    pub fn entry(self) -> (&'static str, &'a RawValue) {
        match self {
            Sdp::Offer(v) => ("offer", v),
            Sdp::Answer(v) => ("answer", v),
        }
    }
}

impl Serialize for Relayed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (key, sdp) = self.sdp.entry();
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("action", "announce")?;
        m.serialize_entry("info_hash", &Binary(&self.info_hash.0))?;
        m.serialize_entry("peer_id", &Binary(&self.peer_id.0))?;
        m.serialize_entry("offer_id", &Binary(self.offer_id.as_bytes()))?;
        m.serialize_entry(key, sdp)?;
        m.end()
    }
}

/// Figures of one torrent in a scrape reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrapeStats {
    pub complete: u32,
    pub incomplete: u32,
    pub downloaded: u32,
}

/// The reply to a scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeResponse {
    pub files: Vec<(InfoHash, ScrapeStats)>,
    /// Seconds clients should wait between scrapes, if the server says.
    pub min_request_interval: Option<u32>,
}

impl Serialize for ScrapeResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Files<'a>(&'a [(InfoHash, ScrapeStats)]);
        impl Serialize for Files<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (h, st) in self.0 {
                    m.serialize_entry(&Binary(&h.0), st)?;
                }
                m.end()
            }
        }
        struct Flags(u32);
        impl Serialize for Flags {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("min_request_interval", &self.0)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("action", "scrape")?;
        m.serialize_entry("files", &Files(&self.files))?;
        if let Some(i) = self.min_request_interval {
            m.serialize_entry("flags", &Flags(i))?;
        }
        m.end()
    }
}

/// A refusal (`failure reason`) or a notice (`warning message`), addressed to the
/// request's action and torrent when they are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice<'a> {
    pub failure: bool,
    pub text: &'a str,
    pub context: FailureContext,
}

impl Serialize for Notice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(a) = self.context.action {
            m.serialize_entry("action", a.as_str())?;
        }
        if let Some(h) = &self.context.info_hash {
            m.serialize_entry("info_hash", &Binary(&h.0))?;
        }
        let key = if self.failure {
            "failure reason"
        } else {
            "warning message"
        };
        m.serialize_entry(key, self.text)?;
        m.end()
    }
}

/// Serializes any response to JSON text.
pub fn to_json<T: Serialize>(value: &T) -> String {
    // Serializing these types cannot fail: map keys are strings and no value is a
    // non-finite float. Fall back to an empty object rather than panic regardless.
    serde_json::to_string(value).unwrap_or_else(|_| String::from("{}"))
}

#[cfg(test)]
mod tests;
