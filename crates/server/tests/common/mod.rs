//! Test support for the integration tests, one file per thing a test talks to: the `shoal`
//! binary as a process ([`shoal`]), the tracker over BEP 15 ([`udp`]), over WebSocket
//! ([`ws`]), the admin listener ([`admin`]), bencoded answers ([`bencode`]) and the store
//! behind an in-process tracker ([`store`]); what the site-schema tests share ([`site_schema`]); and where a test keeps its files ([`scratch`]).
//!
//! Each test binary compiles all of it and uses a part, hence the `allow`s. This file only
//! declares and re-exports, so that the siblings never reach back up into it.
#![allow(dead_code, unused_imports)]

pub mod admin;
pub mod bencode;
pub mod redis;
pub mod scratch;
pub mod shoal;
pub mod site_schema;
pub mod store;
pub mod udp;
pub mod ws;

pub use admin::{http, http_with_body, http_with_headers};
pub use scratch::{free_udp_port, temp_dir, wait_until};
pub use shoal::{private_config, refused_start, Shoal, Site, SHOAL};
pub use udp::{Ann, Client};
