//! UNIT3D sites on shoal: what lets a UNIT3D site (a Laravel site on MariaDB or MySQL) point
//! its external-tracker settings at shoal instead of UNIT3D-Announce, without changing a
//! line of the site.
//!
//! - [`model`]: the site's rows as shoal holds them (groups, users, torrents, peers, the
//!   lists), as loaded at start and as the site's control calls send them.
//! - [`config`]: the knobs, with UNIT3D-Announce's defaults.
//! - [`db`]: the site's database (MariaDB or MySQL): the check that UNIT3D's tables are
//!   there, the load at start, the batched writes.
//!
//! The arrows point down: `shoal-server` -> this crate -> `shoal-tracker`, `shoal-accounts`.

#![forbid(unsafe_code)]

pub mod config;
pub mod db;
pub mod model;

pub use config::Unit3dConfig;
