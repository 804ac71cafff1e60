//! NexusPHP sites on shoal: what lets a NexusPHP site (the PHP site most private trackers
//! run, on MySQL or MariaDB) send its announces to shoal instead of its own
//! `public/announce.php`, on the same tables, without changing a line of the site. The
//! contract (every rule with its NexusPHP source at 1.10.3, the rows written, the texts,
//! switching, the differences) is `docs/nexusphp.md`.
//!
//! - [`model`]: the site's rows as shoal holds them: settings, members, torrents, clients,
//!   site-wide promotions.
//! - [`agent`]: the client allow list as NexusPHP judges it (its PHP patterns, version
//!   comparisons and banned builds).
//! - [`promotion`]: the promotion state in force and the factors credited.
//! - [`limits`]: the interval bands, the wait and slot rules, the cheater checks.
//! - [`site`]: the site in memory ([`Site`]) and what the announces leave to write
//!   ([`site::Batch`]).
//! - [`rules`]: NexusPHP's announce rules, as the core's `SiteRules`; `client`: the
//!   `peers` row an announce leaves.
//! - [`sync`]: the site in memory kept in step with the tables (polls, failed writes,
//!   silent clients).
//! - [`db`]: the site's tables (the start's check, the load, the batched writes).
//! - [`cleanup`]: the records NexusPHP's cleanup reads from the site's Redis (seeding
//!   bonus, seed and leech time), written after each batch's rows.
//! - [`schema`], [`seam`]: the site on the seam of `shoal-site` ([`open`]), its config
//!   section ([`NexusphpConfig`]), the poll of the site's changes.
//!
//! Not here yet: the tracker URL check (`public/announce.php:137-143`) and the allow
//! list's `allowhttps`, which need the request's scheme and host, and the `Cookie` /
//! `Accept-Language` rule, which needs the request's headers (the site seam of
//! `shoal-site` carries neither); the seed-box rules (their `seed_box_records` ranges); the
//! paid-torrent purchase, a job of the site's queue.
//!
//! The arrows point down: `shoal-server` -> this crate -> `shoal-site` -> `shoal-tracker`.

#![forbid(unsafe_code)]

pub mod agent;
pub mod cleanup;
mod client;
pub mod config;
pub mod db;
pub mod error;
pub mod limits;
pub mod model;
pub mod promotion;
pub mod rules;
pub mod schema;
pub mod seam;
pub mod site;
pub mod sync;
mod texts;

pub use config::NexusphpConfig;
pub use error::NexusError;
pub use seam::open;
pub use site::Site;
