//! Every `failure reason` the WebTorrent front end can send, counted by reason in
//! `shoal_ws_failures_total{reason}`. Each reason is registered at zero when the metrics
//! recorder is installed ([`register`]), so an operator sees the whole list, and a rise of
//! any one, before the first failure.
//!
//! A failure goes to a client whose message was wrong (not JSON, a missing field), that
//! the policy refuses (a torrent not allowed, a passkey), whose answer the store cannot
//! relay, or whose scrape asks for more than the server gives. A client that follows the
//! protocol against a tracker at its defaults gets none: an answer to an offer it was sent
//! is relayed while the offerer is connected (an offerer that left is the one exception,
//! `offerer_gone`).

use shoal_proto::ws::RequestError;
use shoal_swarm::webtorrent::AnswerRefusal;
use shoal_tracker::policy::{self, private_rule};

/// Every label of `shoal_ws_failures_total`.
pub const REASONS: [&str; 20] = [
    // The message (RequestError::kind).
    "malformed",
    "too_large",
    "missing_field",
    "unknown_action",
    "unknown_event",
    "invalid",
    // The policy's refusals of an announce (policy_label).
    "not_allowed",
    "no_passkey",
    "unknown_passkey",
    "disabled",
    "unregistered_torrent",
    "client_not_allowed",
    "cannot_download",
    "refused",
    // Answers the store does not relay (AnswerRefusal::kind); `offerer_gone` also when
    // the offerer's connection closed after the store's check.
    "not_a_peer",
    "no_such_offer",
    "expired",
    "offerer_gone",
    // Scrapes.
    "too_many_hashes",
    "full_scrape_disabled",
];

/// Counts one failure sent, under `reason` (one of [`REASONS`]).
pub fn count(reason: &'static str) {
    debug_assert!(REASONS.contains(&reason), "{reason} is not in REASONS");
    metrics::counter!("shoal_ws_failures_total", "reason" => reason).increment(1);
}

/// Registers every reason at zero (with the recorder current when called).
pub fn register() {
    for reason in REASONS {
        metrics::counter!("shoal_ws_failures_total", "reason" => reason).increment(0);
    }
}

/// The label of a bad message.
pub fn of_request(err: &RequestError) -> &'static str {
    err.kind()
}

/// The label of an answer the store refused.
pub fn of_answer(refusal: AnswerRefusal) -> &'static str {
    refusal.kind()
}

/// The label of the policy's refusal `reason` (the text sent): the private rule's own
/// labels, `not_allowed` for the access list, `refused` for anything else.
pub fn of_policy(reason: &str) -> &'static str {
    if reason == policy::NOT_ALLOWED {
        return "not_allowed";
    }
    private_rule::REFUSALS
        .iter()
        .find(|(text, _)| *text == reason)
        .map_or("refused", |(_, label)| label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_the_front_end_can_give_is_in_the_list() {
        let requests = [
            RequestError::Json(String::new()),
            RequestError::Missing("x"),
            RequestError::UnknownAction(String::new()),
            RequestError::UnknownEvent(String::new()),
            RequestError::Invalid("x"),
            RequestError::TooLarge(2, 1),
        ];
        let answers = [
            AnswerRefusal::NotAPeer,
            AnswerRefusal::NoSuchOffer,
            AnswerRefusal::Expired,
            AnswerRefusal::OffererGone,
        ];
        let policies = private_rule::REFUSALS
            .iter()
            .map(|(text, _)| *text)
            .chain([policy::NOT_ALLOWED, policy::RATE_LIMITED]);
        let labels: Vec<&str> = requests
            .iter()
            .map(of_request)
            .chain(answers.into_iter().map(of_answer))
            .chain(policies.map(of_policy))
            .collect();
        for label in labels {
            assert!(REASONS.contains(&label), "{label}");
        }
        assert_eq!(of_policy(policy::NOT_ALLOWED), "not_allowed");
        assert_eq!(of_policy("something new"), "refused");
        let mut sorted = REASONS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), REASONS.len(), "no label twice");
    }
}
