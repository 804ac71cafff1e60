//! shoal-bench: loads a BitTorrent tracker over UDP, HTTP(S) or WebTorrent and reports
//! what it measured.
//!
//! The crate is a library with a thin `main.rs`, so that tests drive the same code as the
//! command line. Layers, bottom up: [`sys`] (the syscalls std lacks: batched UDP I/O,
//! rlimits), [`workload`] (what the simulated swarm asks for), [`stats`] and [`cpu`] (what
//! is counted), [`passkeys`] (the keys a load of a private tracker
//! carries), [`run`] (the measured window shared by all protocols), one generator per
//! protocol ([`udp`], [`http`], [`ws`]), and on top [`sweep`] and [`compare`], which run
//! series of loads and write the reports ([`report`], [`chart`]) and append to their
//! directory's [`history`]. It depends on
//! `shoal-proto` for the UDP wire format and for its bencode *reader* (the server only
//! writes bencode, so the reader is independent of what it checks); HTTP and WebTorrent
//! requests are built here, so that the bench does not trust the codecs it is meant to
//! check.

#![forbid(unsafe_code)]

pub mod chart;
pub mod compare;
pub mod convergence;
pub mod cpu;
pub mod history;
pub mod http;
pub mod load;
pub mod net;
pub mod passkeys;
pub mod report;
pub mod run;
pub mod scale;
pub mod stats;
pub mod sweep;
pub mod sys;
pub mod tcp_load;
pub mod udp;
pub mod workload;
pub mod ws;

/// A fresh, empty directory for one unit test's files, named after `tag` and this process.
#[cfg(test)]
pub(crate) fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
