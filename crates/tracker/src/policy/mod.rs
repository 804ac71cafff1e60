//! The policy step: which requests are served, decided once for every protocol, before the
//! swarm store is asked.
//!
//! # The seam
//!
//! Each front end parses a request its own way (a BEP 15 datagram, an HTTP query string, a
//! WebTorrent JSON message), then asks [`Policy::check`] with what it parsed, as a
//! [`Request`]: the protocol, the action (announce or scrape), the client's source address
//! (after the HTTP proxy rules; the datagram's address for UDP, never an address the client
//! claims), the info hash, the peer id and the bytes left (announces only), and the
//! passkey the client presented on any protocol (HTTP's path, UDP's BEP 41 URL data, the
//! WebSocket upgrade path; see [`Request::credential`]). A scrape asks once per info
//! hash. The answer is a [`Verdict`]:
//!
//! - [`Verdict::Admit`]: go on to the store.
//! - [`Verdict::Refuse`]: answer with the reason, per protocol: a BEP 15 error datagram,
//!   a bencoded `failure reason`, or a WebTorrent `failure reason` message. A refused
//!   hash in a WebTorrent scrape is left out of the answer instead (the client learns
//!   nothing about it), as before the seam.
//! - [`Verdict::Drop`]: no answer at all (a UDP datagram is ignored, an HTTP connection is
//!   closed without a response, a WebTorrent message gets no reply), for clients not worth
//!   a reply.
//!
//! - [`Verdict::Limited`] and [`Verdict::Blocked`]: the source is over its rate limit, or
//!   in the block list; each front end answers them its own way (`docs/abuse.md`).
//!
//! Rules are asked in a fixed order and the first verdict other than `Admit` wins. First
//! the rules about the source alone, [`Policy::source`]: the block list ([`block_list`]),
//! then the rate limit ([`rate_limit`]). They come before the access list so that a
//! blocked or flooding source gets no answer at all (not even "torrent not allowed") and
//! so that requests for unlisted torrents count against the limit too; and before the
//! private rule, so that a flood is cut before any passkey lookup. Then the access list
//! ([`access_list`]), then, in private mode, the private rule ([`private_rule`]: passkey,
//! user, registered torrent, client prefix, and the accounting of an admitted announce).
//! A UDP connect, which names no torrent and whose address is not proven yet, asks
//! [`Policy::unproven_source`]: the block list, and whether the source has tokens left,
//! without spending one (so that spoofed connects cannot drain a victim's bucket). An admitted request
//! may be served from another swarm than the hash it named ([`Verdict::AdmitAs`]: a
//! hybrid torrent's v2 hash joins its v1 swarm). Documents built for no client in
//! particular (the cached HTTP full scrape) ask [`Policy::lists`], the rules about the
//! torrent alone; private mode turns the full scrape off.
//!
//! # Cost
//!
//! `check` is on the UDP hot path: it is `#[inline]`, allocates nothing and, in open mode,
//! takes no lock;
//! the access list in force is one `ArcSwap` load (the list is swapped whole on reload or
//! edit, so readers never wait), exactly what the store's own check cost before the seam.
//! A rule that is off costs one branch on an `Option`; the block list in force is one more
//! `ArcSwap` load and a binary search, the rate limit a keyed hash, a clock read and one
//! compare-and-swap (`benches/udp_handler.rs` measures the handler with both on).
//!
//! # Changing it
//!
//! [`Policy::reload`] re-reads the access-list and block-list files (SIGHUP and the admin
//! API's reload); [`Policy::edit_access_list`] adds or removes a hash in the file, then in
//! force, and [`Policy::edit_block_list`] a network (the admin API). On error the list in
//! force stays. [`Policy::change_access_list`] changes the list in force only (the
//! access-list pipes); a reload drops such changes, an edit of the file keeps them.

pub mod access_list;
pub mod block_list;
mod list_file;
pub mod private_rule;
pub mod rate_limit;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use shoal_proto::InfoHash;

pub use crate::request::{Action, Counters, Protocol, Request, Verdict};
pub use access_list::{AccessList, AccessListError, AccessMode};
pub use block_list::BlockList;
pub use private_rule::PrivateRule;
pub use rate_limit::{Limits, RateLimit, RATE_LIMITED};

/// The reason sent for a torrent the access list refuses.
pub const NOT_ALLOWED: &str = "torrent not allowed";

/// The rules in force. One per tracker, shared by every front end.
pub struct Policy {
    access: ArcSwap<AccessList>,
    mode: AccessMode,
    access_file: PathBuf,
    /// Serialises edits of the access-list file.
    editing: Mutex<()>,
    /// Private mode's rule (passkeys, registered torrents, accounting); `None` when open.
    private: Option<PrivateRule>,
    /// The block list in force and its file; `None` when `block_list.path` is empty.
    block_list: Option<(ArcSwap<BlockList>, PathBuf)>,
    /// Per-source token buckets; `None` unless `rate_limit.enabled`.
    rate_limit: Option<RateLimit>,
}

impl Default for Policy {
    /// A policy that admits everything (no access list).
    fn default() -> Self {
        Self::new(AccessList::default(), PathBuf::new())
    }
}

impl Policy {
    /// The policy with `list` in force; `access_file` is where reloads and edits go.
    pub fn new(list: AccessList, access_file: PathBuf) -> Self {
        Self {
            mode: list.mode(),
            access: ArcSwap::from_pointee(list),
            access_file,
            editing: Mutex::new(()),
            private: None,
            block_list: None,
            rate_limit: None,
        }
    }

    /// This policy with the block list `list` (from `path`) before the other rules.
    pub fn with_block_list(self, list: BlockList, path: PathBuf) -> Self {
        Self {
            block_list: Some((ArcSwap::from_pointee(list), path)),
            ..self
        }
    }

    /// This policy with per-source rate limits before the rules about torrents.
    pub fn with_rate_limit(self, limit: RateLimit) -> Self {
        Self {
            rate_limit: Some(limit),
            ..self
        }
    }

    /// This policy with private mode's rule after the access list.
    pub fn with_private(self, rule: PrivateRule) -> Self {
        Self {
            private: Some(rule),
            ..self
        }
    }

    /// Whether private mode is on.
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// Decides one request, dropping an admitted private announce's accounting ticket:
    /// for this crate's tests of the rules only (the core calls [`Policy::decide`]).
    #[cfg(test)]
    fn check(&self, req: &Request<'_>) -> Verdict {
        self.decide(req, &mut None)
    }

    /// Decides one request, and leaves an admitted private announce's accounting ticket in
    /// `ticket`, for [`crate::Core`] to record with the store's change. Records nothing.
    #[inline]
    pub fn decide(
        &self,
        req: &Request<'_>,
        ticket: &mut Option<crate::private::AccountedAnnounce>,
    ) -> Verdict {
        #[cfg(any(test, feature = "record-requests"))]
        seen::record(req);
        let verdict = self.source(req.source);
        if verdict != Verdict::Admit {
            return verdict;
        }
        if !self.lists(req.info_hash) {
            return Verdict::Refuse(NOT_ALLOWED);
        }
        match &self.private {
            Some(rule) => rule.check(req, ticket),
            None => Verdict::Admit,
        }
    }

    /// The rules about the source alone (block list, then rate limit, which takes a token):
    /// `Admit`, `Blocked` or `Limited`. Every [`Policy::check`] asks it first.
    #[inline]
    pub fn source(&self, source: IpAddr) -> Verdict {
        self.source_rules(source, true)
    }

    /// The source rules for a request whose source address is not proven (a UDP connect):
    /// the block list, then whether the source has tokens left, without taking one.
    #[inline]
    pub fn unproven_source(&self, source: IpAddr) -> Verdict {
        self.source_rules(source, false)
    }

    #[inline]
    fn source_rules(&self, source: IpAddr, spend: bool) -> Verdict {
        if let Some((list, _)) = &self.block_list {
            if list.load().blocks(source) {
                return Verdict::Blocked;
            }
        }
        let Some(limit) = &self.rate_limit else {
            return Verdict::Admit;
        };
        let admitted = if spend {
            limit.admit(source)
        } else {
            limit.has_tokens(source)
        };
        if admitted {
            Verdict::Admit
        } else {
            Verdict::Limited
        }
    }

    /// The rules about the torrent alone: whether a document built for every client (the
    /// full scrape) may show it.
    #[inline]
    pub fn lists(&self, info_hash: &InfoHash) -> bool {
        self.access.load().allows(info_hash)
    }

    /// The access list in force.
    pub fn access_list(&self) -> Arc<AccessList> {
        self.access.load_full()
    }

    /// How the access list is applied (as configured).
    pub fn access_mode(&self) -> AccessMode {
        self.mode
    }

    /// The access-list file.
    pub fn access_file(&self) -> &Path {
        &self.access_file
    }

    /// Replaces the access list in force.
    pub fn set_access_list(&self, list: AccessList) {
        self.access.store(Arc::new(list));
    }

    /// Re-reads the access-list file, then the block-list file; returns a line for the
    /// log. On error the list in force stays (each list is read whole before it is put in
    /// force).
    pub fn reload(&self) -> anyhow::Result<String> {
        let list = AccessList::load(self.mode, &self.access_file)?;
        let mut line = format!(
            "access list reloaded: mode {:?}, {} info hashes",
            list.mode(),
            list.len()
        );
        self.set_access_list(list);
        if let Some((in_force, path)) = &self.block_list {
            let blocks = BlockList::load(path)?;
            line += &format!("; block list reloaded: {} networks", blocks.len());
            in_force.store(Arc::new(blocks));
        }
        Ok(line)
    }

    /// The block list in force and its file; `None` when there is none.
    pub fn block_list(&self) -> Option<(Arc<BlockList>, &Path)> {
        let (list, path) = self.block_list.as_ref()?;
        Some((list.load_full(), path))
    }

    /// Adds (`add`) or removes a network of the block list, in its file first, then in
    /// force. Returns whether anything changed.
    pub fn edit_block_list(&self, net: ipnet::IpNet, add: bool) -> anyhow::Result<bool> {
        let Some((in_force, path)) = &self.block_list else {
            bail!("there is no block list (block_list.path is empty)");
        };
        let _guard = self.editing.lock();
        match block_list::edit_file(path, net, add)? {
            Some(list) => {
                in_force.store(Arc::new(list));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Whether per-source rate limits are on.
    pub fn rate_limited(&self) -> bool {
        self.rate_limit.is_some()
    }

    /// Adds (`add`) or removes an info hash of the access list, in its file first (so the
    /// change survives a restart and a reload), then in force. Comments and other lines of
    /// the file are kept. Returns whether anything changed.
    pub fn edit_access_list(&self, info_hash: InfoHash, add: bool) -> anyhow::Result<bool> {
        if self.mode == AccessMode::Off {
            bail!("the access list is off (access_list.mode = \"off\")");
        }
        let _guard = self.editing.lock();
        match access_list::edit_file(self.mode, &self.access_file, info_hash, add)? {
            Some(mut list) => {
                // The pipes' changes outlive an edit of the file (not a reload).
                list.keep_changes_of(&self.access.load(), &info_hash);
                self.set_access_list(list);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Lists (`add`) or unlists an info hash in the list in force only, the file left as
    /// it is (the access-list pipes): a reload drops the change. Returns whether anything
    /// changed.
    pub fn change_access_list(&self, info_hash: InfoHash, add: bool) -> anyhow::Result<bool> {
        if self.mode == AccessMode::Off {
            bail!("the access list is off (access_list.mode = \"off\")");
        }
        let _guard = self.editing.lock();
        match self.access.load().with_change(info_hash, add) {
            Some(list) => {
                self.set_access_list(list);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The abuse controls the front ends' unit tests run under: 10.0.0.0/8 blocked, and
/// `requests_per_second` in bursts of `burst` per source.
#[cfg(any(test, feature = "record-requests"))]
impl Policy {
    pub fn guarded(self, requests_per_second: u32, burst: u32) -> Self {
        let limit = Limits::new(requests_per_second, burst);
        self.with_block_list(
            BlockList::new(["10.0.0.0/8".parse().expect("a network")]),
            PathBuf::new(),
        )
        .with_rate_limit(RateLimit::new(&limit))
    }
}

/// What [`Policy::decide`] was asked, recorded in unit tests only (this crate's, and the
/// server's through the `record-requests` feature, which only its dev-dependency turns on;
/// every other build compiles it out, so it costs the hot path nothing): the front ends'
/// handler tests read it to see which credential and `left` each protocol hands over.
/// Per thread, as each test runs on its own and the handlers answer on the caller's thread.
#[cfg(any(test, feature = "record-requests"))]
pub mod seen {
    use std::cell::RefCell;

    use crate::request::{Action, Protocol, Request};

    /// One request as the policy saw it (owned).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Seen {
        pub protocol: Protocol,
        pub action: Action,
        pub credential: Option<String>,
        pub left: Option<u64>,
    }

    thread_local! {
        static SEEN: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn record(req: &Request<'_>) {
        SEEN.with_borrow_mut(|seen| {
            seen.push(Seen {
                protocol: req.protocol,
                action: req.action,
                credential: req.credential.map(String::from),
                left: req.left(),
            })
        });
    }

    /// Everything this thread's policy checks saw since the last call.
    pub fn take() -> Vec<Seen> {
        SEEN.with_borrow_mut(std::mem::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ih(n: u8) -> InfoHash {
        InfoHash([n; 20])
    }

    fn check(policy: &Policy, protocol: Protocol, action: Action, n: u8) -> Verdict {
        policy.check(&Request {
            protocol,
            action,
            source: "127.0.0.1".parse().unwrap(),
            info_hash: &ih(n),
            peer_id: None,
            credential: None,
            counters: None,
        })
    }

    /// What the store's own check did before the seam (announce and scrape refused off
    /// the list, the list swapped whole), now for every protocol.
    #[test]
    fn access_list_applies_to_announce_and_scrape() {
        let refused = Verdict::Refuse(NOT_ALLOWED);
        let policy = Policy::new(AccessList::new(AccessMode::Allow, [ih(1)]), PathBuf::new());
        for protocol in [Protocol::Udp, Protocol::Http, Protocol::Ws] {
            assert_eq!(
                check(&policy, protocol, Action::Announce, 1),
                Verdict::Admit
            );
            assert_eq!(check(&policy, protocol, Action::Announce, 2), refused);
            assert_eq!(check(&policy, protocol, Action::Scrape, 2), refused);
        }
        policy.set_access_list(AccessList::new(AccessMode::Deny, [ih(1)]));
        assert_eq!(check(&policy, Protocol::Udp, Action::Scrape, 1), refused);
        assert_eq!(
            check(&policy, Protocol::Udp, Action::Scrape, 2),
            Verdict::Admit
        );
        assert!(!policy.lists(&ih(1)) && policy.lists(&ih(2)));
        assert_eq!(
            check(&Policy::default(), Protocol::Ws, Action::Announce, 9),
            Verdict::Admit
        );
    }

    /// The source rules come before the rules about torrents: a blocked or flooding source
    /// gets its own verdict, never "torrent not allowed", and unlisted torrents cost tokens.
    #[test]
    fn block_list_then_rate_limit_then_the_torrent_rules() {
        let policy =
            Policy::new(AccessList::new(AccessMode::Allow, [ih(1)]), PathBuf::new()).guarded(1, 2);
        let ask = |source: &str, n: u8| {
            policy.check(&Request {
                protocol: Protocol::Http,
                action: Action::Announce,
                source: source.parse().unwrap(),
                info_hash: &ih(n),
                peer_id: None,
                credential: None,
                counters: None,
            })
        };
        assert_eq!(ask("10.1.2.3", 1), Verdict::Blocked);
        assert_eq!(ask("::ffff:10.1.2.3", 2), Verdict::Blocked);
        assert_eq!(ask("127.0.0.1", 2), Verdict::Refuse(NOT_ALLOWED));
        assert_eq!(ask("127.0.0.1", 1), Verdict::Admit);
        assert_eq!(ask("127.0.0.1", 1), Verdict::Limited);
        assert_eq!(ask("127.0.0.1", 2), Verdict::Limited);
        // Another source has its own bucket; a blocked one spent none.
        assert_eq!(ask("127.0.0.2", 1), Verdict::Admit);
        assert_eq!(policy.source("127.0.0.2".parse().unwrap()), Verdict::Admit);
        assert_eq!(
            policy.source("127.0.0.2".parse().unwrap()),
            Verdict::Limited
        );
        assert!(policy.rate_limited() && !Policy::default().rate_limited());
        assert!(Policy::default()
            .edit_block_list("1.2.3.4/32".parse().unwrap(), true)
            .is_err());
    }

    #[test]
    fn edits_go_to_the_file_then_in_force_and_off_refuses_them() {
        let dir = std::env::temp_dir().join(format!("shoal-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("list");
        std::fs::write(&path, "# kept\n").unwrap();
        let policy = Policy::new(AccessList::new(AccessMode::Allow, []), path.clone());
        assert!(policy.edit_access_list(ih(3), true).unwrap());
        assert!(!policy.edit_access_list(ih(3), true).unwrap(), "no change");
        assert!(policy.lists(&ih(3)));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("# kept\n{}\n", ih(3).to_hex()));
        assert!(policy.edit_access_list(ih(3), false).unwrap());
        assert!(!policy.lists(&ih(3)));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# kept\n");
        assert!(policy.reload().unwrap().contains("0 info hashes"));
        let err = Policy::default().edit_access_list(ih(3), true).unwrap_err();
        assert!(err.to_string().contains("off"), "{err}");
        // A pipe's change: in force only, kept by an edit of the file, dropped by a reload.
        assert!(policy.change_access_list(ih(4), true).unwrap());
        assert!(
            !policy.change_access_list(ih(4), true).unwrap(),
            "no change"
        );
        assert!(policy.lists(&ih(4)));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# kept\n");
        assert!(policy.edit_access_list(ih(5), true).unwrap());
        assert!(policy.lists(&ih(4)) && policy.lists(&ih(5)));
        policy.reload().unwrap();
        assert!(!policy.lists(&ih(4)) && policy.lists(&ih(5)));
        assert!(Policy::default().change_access_list(ih(4), true).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
