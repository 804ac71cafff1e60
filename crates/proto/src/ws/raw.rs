//! A request's fields as the JSON gives them, before the checks that make a [`Request`]
//! of them, read in one pass with a bound on the offers kept.
//!
//! The bound is the point of writing this visitor by hand rather than deriving it. An
//! announce carries up to `ws.max_offers` offers, each with a binary offer id whose JSON
//! string is full of escapes; parsing JSON was about a quarter of the WebTorrent front
//! end's CPU under `aquatic_ws_load_test` (`perf`, 2026-11-28), most of it in the offers.
//! The tracker relays only as many offers as the announcing connection has places for
//! their answers (`outbox`), often none under load: offers past that bound are skipped as
//! JSON values (still checked to be JSON) and only counted. Those kept are split into
//! their two fields as raw JSON, and an offer id is decoded only when the offer finds a
//! peer to go to (`UnreadOffer::read`). `cargo bench -p shoal-proto --bench ws_text`
//! gives, for a load-tester announce of ten offers: 3.73 µs with every offer decoded in
//! the parse (the derived parser before), 2.70 µs with all ten kept and none read, 0.14
//! to 0.21 µs more for each offer read, 2.18 µs with none kept.
//!
//! [`Request`]: super::Request

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::fields::{HashField, Number, OfferIdField, PeerIdField, ToPeerIdField};

/// One offer of an announce, its two fields as the JSON the client sent: the offer id is
/// decoded only if the offer is relayed (`UnreadOffer::read`), the SDP never.
#[derive(Deserialize, Debug, Clone, Copy)]
pub(super) struct RawOffer<'a> {
    #[serde(borrow)]
    pub(super) offer_id: &'a RawValue,
    #[serde(borrow)]
    pub(super) offer: &'a RawValue,
}

/// An announce's `offers`: the first ones, as the JSON values they are (read later, and
/// only those that find a target), and how many there were in all.
#[derive(Default)]
pub(super) struct Offers<'a> {
    pub(super) first: Vec<RawOffer<'a>>,
    pub(super) sent: usize,
}

/// Every field any request may carry. Unknown fields are ignored (clients add their
/// own); known fields with the wrong type, or given twice, are errors.
#[derive(Default)]
pub(super) struct RawRequest<'a> {
    pub(super) action: Option<Cow<'a, str>>,
    pub(super) info_hash: Option<HashField>,
    pub(super) peer_id: Option<PeerIdField>,
    pub(super) numwant: Option<Number>,
    pub(super) uploaded: Option<Number>,
    pub(super) downloaded: Option<Number>,
    pub(super) left: Option<Number>,
    pub(super) event: Option<Cow<'a, str>>,
    pub(super) offers: Option<Offers<'a>>,
    pub(super) answer: Option<&'a RawValue>,
    pub(super) to_peer_id: Option<ToPeerIdField>,
    pub(super) offer_id: Option<OfferIdField>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Action,
    InfoHash,
    PeerId,
    Numwant,
    Uploaded,
    Downloaded,
    Left,
    Event,
    Offers,
    Answer,
    ToPeerId,
    OfferId,
    #[serde(other)]
    Other,
}

/// Reads a request, keeping at most `max_offers()` of its offers (asked only of a
/// message with an `offers` field).
pub(super) struct RequestSeed<F> {
    pub(super) max_offers: F,
}

impl<'de, F: FnOnce() -> usize> DeserializeSeed<'de> for RequestSeed<F> {
    type Value = RawRequest<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: FnOnce() -> usize> Visitor<'de> for RequestSeed<F> {
    type Value = RawRequest<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a WebTorrent message (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut r = RawRequest::default();
        let mut max_offers = Some(self.max_offers);
        /// Sets `r.$field` from the next value, unless it was given already.
        macro_rules! once {
            ($field:ident, $value:expr) => {{
                if r.$field.is_some() {
                    return Err(de::Error::duplicate_field(stringify!($field)));
                }
                r.$field = $value;
            }};
        }
        while let Some(key) = map.next_key::<Field>()? {
            match key {
                Field::Action => once!(action, map.next_value::<Option<Name>>()?.map(|n| n.0)),
                Field::InfoHash => once!(info_hash, map.next_value()?),
                Field::PeerId => once!(peer_id, map.next_value()?),
                Field::Numwant => once!(numwant, map.next_value()?),
                Field::Uploaded => once!(uploaded, map.next_value()?),
                Field::Downloaded => once!(downloaded, map.next_value()?),
                Field::Left => once!(left, map.next_value()?),
                Field::Event => once!(event, map.next_value::<Option<Name>>()?.map(|n| n.0)),
                Field::Offers => {
                    // Given twice, the second is refused before it is read.
                    let max = max_offers.take().map_or(0, |f| f());
                    once!(offers, map.next_value_seed(OffersSeed(max))?)
                }
                Field::Answer => once!(answer, map.next_value()?),
                Field::ToPeerId => once!(to_peer_id, map.next_value()?),
                Field::OfferId => once!(offer_id, map.next_value()?),
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(r)
    }
}

/// A string borrowed from the message where it has no escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// `offers`: `null` or an array, of which the first `.0` are kept.
struct OffersSeed(usize);

impl<'de> DeserializeSeed<'de> for OffersSeed {
    type Value = Option<Offers<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OffersSeed {
    type Value = Option<Offers<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence of offers")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut offers = Offers::default();
        while offers.first.len() < self.0 {
            match seq.next_element()? {
                Some(o) => offers.first.push(o),
                None => break,
            }
        }
        offers.sent = offers.first.len();
        while seq.next_element::<IgnoredAny>()?.is_some() {
            offers.sent += 1;
        }
        Ok(Some(offers))
    }
}
