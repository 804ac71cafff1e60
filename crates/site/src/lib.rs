//! What every site that shoal serves has in common, so that a site is a crate of its own
//! and the server names none of them outside its registry.
//!
//! - [`Site`]: the one seam between the server and a site (UNIT3D, Gazelle, ...): the
//!   members it registered with the private rule, the rules it plugs into the core
//!   ([`SiteRules`]), the accounting it writes ([`Schema`]), its control calls
//!   ([`control::Control`]), its periodic work, the peers it resumes, its shutdown.
//! - [`SiteConfig`]: what the server asks of a site's config section (its check, and the
//!   announce settings the site's rules put in force).
//! - [`mysql`]: the MySQL/MariaDB plumbing the site crates share: the pool and its session
//!   (UTC), the bound on every operation, reads and writes in one transaction, the row
//!   reader, the table and column check at start, the look-up that prunes rows of members
//!   and torrents the site removed, one error type.
//!
//! The arrows point down: `shoal-server` -> a site crate -> this crate -> `shoal-tracker`,
//! `shoal-accounts`. Nothing here knows a site's tables.

#![forbid(unsafe_code)]

pub mod control;
pub mod mysql;
mod seam;

pub use seam::{
    connect_check_load, log_loaded, site_members, Keys, LastReport, ListedPeer, Opening, Parts,
    Site, SiteConfig, SiteSettings,
};
pub use shoal_accounts::Schema;
pub use shoal_tracker::site::{Refusal, SiteRules};

/// Declares a site's fixed refusals as constants (`NAME = "the text the client is sent",
/// "the metrics' label";`) and `REFUSALS`, every one of them (for the metrics' labels).
#[macro_export]
macro_rules! refusals {
    ($($name:ident = $reason:literal, $label:literal;)*) => {
        $(pub const $name: $crate::Refusal = $crate::Refusal { reason: $reason, label: $label };)*
        /// Every fixed refusal of these rules (for the metrics' labels).
        pub const REFUSALS: &[$crate::Refusal] = &[$($name),*];
    };
}
