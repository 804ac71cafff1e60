//! Private mode's database side: what connects the core's in-memory accounting
//! (`shoal_tracker::private`: members, ledger, the rules) to the site's database and to the
//! disk. [`accounts::Accounts`] loads the members and writes the drained sums through
//! `shoal-accounts`; [`writer::Writer`] is the thread that flushes them every
//! `private.flush_interval`; the ledger's file (`shoal_tracker::private::ledger::file`)
//! carries its records and unwritten sums over a restart. Everything here does I/O; nothing
//! here is on the announce path. The site in force, when `[private] schema` names one, is
//! reached through the site seam (`shoal_site::Site`, opened by [`crate::sites`]).

pub mod accounts;
pub mod writer;

pub use accounts::Accounts;
