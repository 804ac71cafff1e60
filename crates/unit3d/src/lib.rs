//! UNIT3D sites on shoal: what lets a UNIT3D site (a Laravel site on MariaDB or MySQL) point
//! its external-tracker settings at shoal instead of UNIT3D-Announce, without changing a
//! line of the site.
//!
//! - [`model`]: the site's rows as shoal holds them (groups, users, torrents, peers, the
//!   lists), as loaded at start and as the site's control calls send them.
//! - [`config`]: the knobs, with UNIT3D-Announce's defaults.
//! - [`site`]: the site in memory ([`Site`]), as loaded and as the control calls change it.
//! - [`rates`]: how often a user received peer lists (decaying counts).
//! - [`api`]: the site's control calls under `/announce/<site key>/` (UNIT3D-Announce's
//!   routes and bodies), transport-free: the HTTP front end hands each call to it.
//! - [`stats`]: requests and announce responses per second, as the site's `GET /stats` reads them.
//! - [`rules`]: UNIT3D's announce rules, as the core's `SiteRules`.
//! - [`db`]: the site's database (MariaDB or MySQL): the check that UNIT3D's tables are
//!   there, the load at start, the batched writes.
//! - [`schema`]: [`schema::Unit3dSchema`], the site's tables behind the core's seam.
//! - [`batch`]: one write to the site's tables, from the ledger's sums and the site's
//!   pending changes.
//! - [`seam`]: the site on the seam the server holds ([`shoal_site::Site`]): [`open`].
//!
//! The arrows point down: `shoal-server` -> this crate -> `shoal-site`, `shoal-tracker`,
//! `shoal-accounts`.

#![forbid(unsafe_code)]

pub mod api;
pub mod batch;
pub mod config;
pub mod db;
pub mod model;
pub mod rates;
pub mod rules;
pub mod schema;
pub mod seam;
pub mod site;
pub mod stats;

pub use config::Unit3dConfig;
pub use seam::open;
pub use site::Site;
pub use stats::Stats;
