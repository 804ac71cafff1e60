//! Property tests of the bencode writer's round trip: arbitrary announce, scrape and
//! failure responses come back field for field through the strict reader. The checks
//! themselves live in `support/bencode_round_trip.rs`, shared with the fuzz target.

#![forbid(unsafe_code)]

#[path = "support/bencode_round_trip.rs"]
mod round_trip;

use std::net::Ipv6Addr;

use proptest::prelude::*;
use shoal_proto::bencode::{AnnounceResponse, Peers, Value};
use shoal_proto::{CompactPeerV6, PeerId};

#[test]
fn dict_peers_carry_ids_unless_told_not_to() {
    let id = PeerId(*b"-TR3000-abcdefghijkl");
    let peers = [(CompactPeerV6::new(Ipv6Addr::LOCALHOST, 6881), id)];
    for with_ids in [true, false] {
        let mut out = Vec::new();
        AnnounceResponse {
            interval: 1,
            min_interval: 1,
            complete: 0,
            incomplete: 1,
            downloaded: 0,
            peers: Peers::DictV6 {
                peers: &peers,
                with_ids,
            },
            warning: None,
        }
        .write(&mut out);
        let v = round_trip::decode_canonical(&out);
        let Value::List(list) = round_trip::get(&v, b"peers") else {
            panic!()
        };
        assert_eq!(round_trip::get(&list[0], b"ip"), &Value::Bytes(b"::1"));
        assert_eq!(round_trip::get(&list[0], b"port"), &Value::Int(6881));
        let has_id = list[0].get(b"peer id").is_some();
        assert_eq!(has_id, with_ids);
    }
}

proptest! {
    #[test]
    fn announce_round_trips_through_the_strict_reader(
        interval in any::<u32>(), min_interval in any::<u32>(),
        complete in any::<u32>(), incomplete in any::<u32>(), downloaded in any::<u32>(),
        v4 in proptest::collection::vec(any::<([u8; 6], [u8; 20])>(), 0..20),
        v6 in proptest::collection::vec(any::<([u8; 18], [u8; 20])>(), 0..20),
        form in 0u8..4, with_ids in any::<bool>(),
    ) {
        let lists = round_trip::PeerLists::new(&v4, &v6);
        let peers = lists.peers(form, with_ids);
        round_trip::announce(&AnnounceResponse {
            interval, min_interval, complete, incomplete, downloaded, peers, warning: None,
        });
    }

    #[test]
    fn scrape_round_trips_through_the_strict_reader(
        mut files in proptest::collection::vec(any::<([u8; 20], u32, u32, u32)>(), 0..30),
        dup in any::<bool>(),
    ) {
        if dup && !files.is_empty() {
            files.push(files[0]);
        }
        round_trip::scrape(&files);
    }

    #[test]
    fn failure_round_trips_through_the_strict_reader(
        reason in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        round_trip::failure(&reason);
    }
}
