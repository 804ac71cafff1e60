//! Gazelle sites on shoal: what lets a Gazelle site (the PHP site of the music trackers
//! and their forks, on MariaDB or MySQL) point its tracker settings at shoal instead of
//! Ocelot, without changing a line of the site, and gives its users IPv6, UDP and
//! WebTorrent.
//!
//! - [`model`]: the site's rows as shoal holds them (users, torrents, tokens, the
//!   whitelist) and the rows each write adds.
//! - [`config`]: the knobs, with Ocelot's defaults.
//! - [`site`]: the site in memory ([`Site`]), as loaded and as the control calls change it.
//! - [`rules`]: Ocelot's announce rules, as the core's `SiteRules`.
//! - [`control`]: the site's control calls (`/<site password>/update?action=...`) and
//!   reports (`/<report password>/report?get=...`), transport-free.
//! - [`expiry`]: the call back to the site when a freeleech token is used up.
//! - [`db`]: the site's database: the check that Gazelle's tables are there, the load,
//!   the batched writes.
//! - [`schema`]: [`schema::GazelleSchema`], the site's tables behind the core's seam.
//! - [`batch`]: one write to the site's tables, from the ledger's sums and the site's
//!   pending changes; the reaper of silent clients.
//! - [`seam`]: the site on the seam the server holds ([`shoal_site::Site`]): [`open`].
//!
//! The arrows point down: `shoal-server` -> this crate -> `shoal-site`, `shoal-tracker`,
//! `shoal-accounts`.

#![forbid(unsafe_code)]

pub mod batch;
pub mod config;
pub mod control;
pub mod db;
pub mod expiry;
pub mod model;
pub mod rules;
pub mod schema;
pub mod seam;
pub mod site;

pub use config::GazelleConfig;
pub use seam::open;
pub use site::Site;
