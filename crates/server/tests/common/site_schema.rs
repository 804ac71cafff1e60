//! What the end-to-end tests of a site's schema (UNIT3D's, Gazelle's) share: an announce's
//! encoded parts, the admin's flush, and one member's client over UDP (the passkey in BEP 41
//! URL data) and from a browser over WebTorrent (the passkey in the WebSocket path).

use std::net::SocketAddr;

use shoal_proto::{AnnounceEvent, InfoHash, PeerId};
use shoal_server::Tracker;

use super::admin::http_with_body;
use super::udp::{Ann, Client};
use super::ws;

/// Every byte percent-encoded, as an info hash or a peer id travels in a query.
pub fn enc(b: &[u8]) -> String {
    b.iter().map(|x| format!("%{x:02x}")).collect()
}

/// The peer id of client `n`: qBittorrent's prefix, then `n` repeated.
pub fn pid(n: u8) -> PeerId {
    let mut p = [n; 20];
    p[..8].copy_from_slice(b"-qB4650-");
    PeerId(p)
}

/// Asks the tracker, through its admin listener, to write its accounting now.
pub fn flush(tracker: &Tracker, token: &str) {
    let admin = tracker.admin_addrs()[0];
    let (status, body) = http_with_body(admin, "POST", "/api/private/flush", Some(token), "");
    assert_eq!(status, 200, "{body}");
}

/// Client `peer` (port `port`) on torrent `info_hash` over UDP, the passkey in `url`: a
/// `started` with `left`, then a plain announce with `then_left` that reports `(uploaded,
/// downloaded)`. The (leechers, seeders) the first answer counted.
pub fn udp_session(
    addr: SocketAddr,
    url: &str,
    (info_hash, peer, port): ([u8; 20], u8, u16),
    (left, then_left): (u64, u64),
    (uploaded, downloaded): (u64, u64),
) -> (u32, u32) {
    let mut udp = Client::new(addr);
    udp.connect();
    let ann = Ann {
        info_hash: InfoHash(info_hash),
        peer_id: pid(peer),
        port,
        left,
        event: AnnounceEvent::Started,
        numwant: 50,
    };
    let (leechers, seeders, _) = udp
        .announce_reporting(&ann, 0, 0, Some(url))
        .expect("served over UDP");
    let ann = Ann {
        event: AnnounceEvent::None,
        left: then_left,
        ..ann
    };
    udp.announce_reporting(&ann, uploaded, downloaded, Some(url))
        .expect("served over UDP again");
    (leechers, seeders)
}

/// A browser seeding torrent `info_hash` over WebTorrent as client `peer`, the passkey in
/// the WebSocket `path`: served, and the torrent's only seeder.
pub fn browser_seeds(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    path: &str,
    info_hash: [u8; 20],
    peer: u8,
) {
    let reply = rt.block_on(async {
        let mut c = ws::connect_to(addr, path).await;
        ws::request(
            &mut c,
            ws::announce(info_hash, pid(peer).0, Some(0), "started"),
        )
        .await
    });
    assert!(reply["failure reason"].is_null(), "{reply}");
    assert_eq!(reply["complete"], 1, "{reply}");
}
