//! Fuzzes the bencode writer: arbitrary announce, scrape and failure responses are
//! written, decoded by shoal-proto's strict reader (canonical integers, no trailing bytes)
//! and checked for sorted unique keys, and every field must come back as it went in.
//!
//! The checks are the property tests' own (`crates/proto/tests/support/`), included by
//! path so that the two drivers can never check different things.
#![forbid(unsafe_code)]
#![no_main]

#[path = "../../crates/proto/tests/support/bencode_round_trip.rs"]
mod round_trip;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use shoal_proto::bencode::AnnounceResponse;

#[derive(Debug, Arbitrary)]
enum Input {
    Announce {
        interval: u32,
        min_interval: u32,
        complete: u32,
        incomplete: u32,
        downloaded: u32,
        form: u8,
        with_ids: bool,
        v4: Vec<([u8; 6], [u8; 20])>,
        v6: Vec<([u8; 18], [u8; 20])>,
    },
    Scrape(Vec<([u8; 20], u32, u32, u32)>),
    Failure(Vec<u8>),
}

fuzz_target!(|input: Input| {
    match input {
        Input::Announce {
            interval,
            min_interval,
            complete,
            incomplete,
            downloaded,
            form,
            with_ids,
            v4,
            v6,
        } => {
            let lists = round_trip::PeerLists::new(&v4, &v6);
            let peers = lists.peers(form, with_ids);
            round_trip::announce(&AnnounceResponse {
                interval,
                min_interval,
                complete,
                incomplete,
                downloaded,
                peers,
                warning: None,
            });
        }
        Input::Scrape(files) => round_trip::scrape(&files),
        Input::Failure(reason) => round_trip::failure(&reason),
    }
});
