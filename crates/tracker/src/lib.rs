//! shoal's tracker core: what every protocol's announce and scrape go through, with no I/O
//! of its own (no sockets, no async runtime, no database, no Redis).
//!
//! - [`Core`] ([`decide`]): one call per request kind. The front ends of `shoal-server`
//!   turn bytes into a [`PeerAnnounce`] or a [`ScrapeOf`]; the core asks the [`Policy`],
//!   changes the store and records the accounting, and hands back what to answer.
//! - [`policy`]: the rules asked before the store (block list, rate limit, access list,
//!   and in private mode the private rule), one step for every protocol.
//! - [`swarms`]: the swarm store as the tracker sees it, open or private.
//! - [`private`]: private mode's in-memory side: the members (users, torrents, client
//!   prefixes), the accounting rules ([`private::credit`]) and the ledger that keeps each
//!   client's record and the pending sums until the database side drains them.
//! - [`request`]: the types of the seam between the front ends and the policy.
//! - [`site`]: the seam for a site schema's own announce rules ([`site::SiteRules`]).
//! - [`connection_id`]: BEP 15 connection ids, issued and checked without a table.
//! - [`samples`]: the store's figures and largest torrents at one moment (the status page's).
//! - [`udp_counters`]: the UDP front end's per-worker request counters.
//!
//! The arrows point down: `shoal-server` -> this crate -> `shoal-swarm` -> `shoal-proto`.
//! Loading members from a site's database and writing the sums back is the server's (with
//! `shoal-accounts`); this crate only holds what they load and what they will write.

#![forbid(unsafe_code)]

pub mod connection_id;
pub mod decide;
pub mod fixed_counter;
pub mod full_scrape;
pub mod policy;
pub mod private;
pub mod request;
pub mod samples;
pub mod site;
pub mod swarms;
pub mod udp_counters;

pub use decide::{Answer, Core, PeerAnnounce, ScrapeOf, Stop};
pub use policy::Policy;
pub use request::{Action, Protocol, Verdict};
pub use swarms::Swarms;
