//! Private mode's database side: what connects the core's in-memory accounting
//! (`shoal_tracker::private`: members, ledger, the rules) to the site's database and to the
//! disk. [`accounts::Accounts`] loads the members and writes the drained sums through
//! `shoal-accounts`; [`writer::Writer`] is the thread that flushes them every
//! `private.flush_interval`; [`ledger_file`] carries the ledger's records and unwritten sums
//! over a restart. Everything here does I/O; nothing here is on the announce path.

pub mod accounts;
pub mod gazelle;
pub mod ledger_file;
pub mod unit3d;
pub mod writer;

pub use accounts::Accounts;
