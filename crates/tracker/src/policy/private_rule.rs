//! The private-tracker rule: every request carries a passkey of an enabled user, for a
//! registered torrent, from an allowed client; an admitted announce is recorded in the
//! accounting ledger on its way to the store.
//!
//! The checks, in order, each with the reason the client is sent (and the metrics label of
//! `shoal_private_refused_total`, never the passkey itself):
//!
//! | check | reason | label |
//! |---|---|---|
//! | a passkey was presented | `passkey required` | `no_passkey` |
//! | it is a user's | `unknown passkey` | `unknown_passkey` |
//! | the user is enabled | `account disabled` | `disabled` |
//! | the torrent is registered (v1 or v2 hash) | `torrent not registered` | `unregistered_torrent` |
//! | announces: the peer id has an allowed prefix (allow-list on) | `client not allowed` | `client_not_allowed` |
//! | announces of leechers: the user may download | `downloading not allowed` | `cannot_download` |
//!
//! A WebTorrent announce that does not say what it has left counts as a leecher's. A
//! user who may not download keeps seeding (and scraping).
//!
//! The cost on the announce path: two lock-free hash-map reads (passkey, info hash; see
//! [`crate::private::members`]) and an accounting ticket, which [`crate::Core`] records with
//! the store's change; no allocation, no I/O.

use std::sync::Arc;

use crate::private::{AccountedAnnounce, Members};
use crate::request::{Action, Request, Verdict};

pub const PASSKEY_REQUIRED: &str = "passkey required";
pub const UNKNOWN_PASSKEY: &str = "unknown passkey";
pub const ACCOUNT_DISABLED: &str = "account disabled";
pub const NOT_REGISTERED: &str = "torrent not registered";
pub const CLIENT_NOT_ALLOWED: &str = "client not allowed";
pub const CANNOT_DOWNLOAD: &str = "downloading not allowed";

/// Every refusal: its reason and its metrics label.
pub const REFUSALS: [(&str, &str); 6] = [
    (PASSKEY_REQUIRED, "no_passkey"),
    (UNKNOWN_PASSKEY, "unknown_passkey"),
    (ACCOUNT_DISABLED, "disabled"),
    (NOT_REGISTERED, "unregistered_torrent"),
    (CLIENT_NOT_ALLOWED, "client_not_allowed"),
    (CANNOT_DOWNLOAD, "cannot_download"),
];

/// The rule, over the tables it shares with the database side and the admin API.
pub struct PrivateRule {
    pub members: Arc<Members>,
}

impl PrivateRule {
    /// Decides `req`. An admitted announce's accounting ticket goes into `ticket`, for the
    /// core to record with the store's change.
    #[inline]
    pub fn check(&self, req: &Request<'_>, ticket: &mut Option<AccountedAnnounce>) -> Verdict {
        match self.decide(req, ticket) {
            Ok(verdict) => verdict,
            Err((reason, label)) => {
                metrics::counter!("shoal_private_refused_total",
                    "protocol" => req.protocol.label(), "reason" => label)
                .increment(1);
                Verdict::Refuse(reason)
            }
        }
    }

    #[inline]
    fn decide(
        &self,
        req: &Request<'_>,
        ticket: &mut Option<AccountedAnnounce>,
    ) -> Result<Verdict, (&'static str, &'static str)> {
        let [no_passkey, unknown, disabled, unregistered, client, cannot] = REFUSALS;
        let passkey = req.credential.ok_or(no_passkey)?;
        let (user, torrent) = self.members.lookup(passkey, req.info_hash);
        let user = user.ok_or(unknown)?;
        if !user.enabled {
            return Err(disabled);
        }
        let torrent = torrent.ok_or(unregistered)?;
        let verdict = if torrent.swarm == *req.info_hash {
            Verdict::Admit
        } else {
            Verdict::AdmitAs(torrent.swarm)
        };
        if req.action == Action::Scrape {
            return Ok(verdict);
        }
        if let Some(peer_id) = req.peer_id {
            if !self.members.client_allowed(peer_id) {
                return Err(client);
            }
        }
        let (Some(counters), Some(peer_id)) = (req.counters, req.peer_id) else {
            return Ok(verdict);
        };
        let left = counters.left.unwrap_or(u64::MAX);
        if left > 0 && !user.can_download {
            return Err(cannot);
        }
        *ticket = Some(AccountedAnnounce {
            user_id: user.id as u64,
            torrent_id: torrent.id as u64,
            peer_id: *peer_id,
            uploaded: counters.uploaded,
            downloaded: counters.downloaded,
            left,
            event: counters.event,
            now: counters.now,
            download_factor: user.download_factor * torrent.download_factor,
            upload_factor: user.upload_factor * torrent.upload_factor,
        });
        Ok(verdict)
    }
}
