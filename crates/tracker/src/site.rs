//! The seam for a site's own announce rules ([`SiteRules`]): what a site schema that
//! carries rules of its own (UNIT3D's groups, download slots, moderation statuses,
//! per-torrent factors...) decides about an announce the private rule has admitted, before
//! the store changes.
//!
//! The private rule ([`crate::policy`]) finds the user and the torrent; a site's rules then
//! see the announce with both ids and answer with an [`Admission`] (the factors credited,
//! whether the peer is listed and gets peers, a warning, the interval) or a [`Refusal`].
//! [`crate::Core`] applies the admission the same way for every protocol. Without site
//! rules (shoal's own schema) every admitted announce is listed, gets peers and is
//! credited with the member's and the torrent's factors.

use std::net::{IpAddr, SocketAddr};

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

use crate::request::Protocol;

/// An announce as a site's rules see it: its user and torrent found.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub protocol: Protocol,
    /// The client's address (after the HTTP proxy rules).
    pub source: IpAddr,
    pub user_id: u64,
    /// The registered torrent's id.
    pub torrent_id: u64,
    pub info_hash: &'a InfoHash,
    pub peer_id: PeerId,
    /// Where other peers reach it; `None` for a WebRTC peer.
    pub addr: Option<SocketAddr>,
    /// Its `User-Agent`, where the protocol carries one.
    pub agent: Option<&'a str>,
    pub uploaded: u64,
    pub downloaded: u64,
    /// `None` only for a WebTorrent announce that does not say.
    pub left: Option<u64>,
    pub event: AnnounceEvent,
    /// The store's coarse clock (seconds).
    pub now: u32,
}

/// What the site's rules grant an announce.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// The factors credited for this announce's bytes (they replace the member's and the
    /// torrent's product).
    pub download_factor: f64,
    pub upload_factor: f64,
    /// Whether other peers are given this one (false: kept out of the swarm, e.g. over
    /// the user's download slots; still accounted).
    pub listed: bool,
    /// Whether it is sent peers.
    pub gets_peers: bool,
    /// A `warning message` for the client.
    pub warning: Option<&'static str>,
    /// The interval to send, where the site draws its own.
    pub interval: Option<u32>,
    /// Addresses never to send it (the same user's other clients on this torrent).
    pub hide: Vec<SocketAddr>,
}

/// Why a site's rules refuse an announce: the reason the client is sent and the label of
/// `shoal_private_refused_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub label: &'static str,
}

/// A site's own announce rules, asked by [`crate::Core`] after the private rule.
pub trait SiteRules: Send + Sync {
    /// Decides `a` and, when admitted, records its client's new state (the site's own
    /// view of its peers).
    fn admit(&self, a: &Asked<'_>) -> Result<Admission, Refusal>;

    /// An announce by `user_id` of an info hash no registered torrent has.
    fn unregistered(&self, user_id: u64, info_hash: &InfoHash, now: u32);

    /// The text the site's clients know for one of the private rule's refusals
    /// ([`crate::policy::private_rule::REFUSALS`]); the rule's own by default.
    fn reason(&self, private_rule_reason: &'static str) -> &'static str {
        private_rule_reason
    }
}
