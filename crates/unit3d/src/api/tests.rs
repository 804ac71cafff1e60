//! Every route with the bodies the site sends (UNIT3D's `Unit3dAnnounce` service: its field
//! names and JSON types), the answers checked field by field against what the site
//! validates, the change seen through the [`Site`] (and the private rule's members)
//! afterwards, and every kind of bad call answered with its reason.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use serde_json::{json, Value};
use shoal_proto::InfoHash as Hash;
use shoal_tracker::private::{Members, Roster};

use super::*;
use crate::config::Unit3dConfig;
use crate::model::{Group, Peer, SiteData, Status, Torrent, User};

const KEY: &str = "0123456789abcdefghijklmnopqrstuvwxyz";
const PASSKEY: &str = "0123456789abcdef0123456789abcdef";
const HASH: &str = "c12fe1c06bba254a9dc9f519b335aa7c1367a88a";

struct Fixture {
    site: Site,
    members: Arc<Members>,
    stats: Stats,
}

impl Fixture {
    fn new() -> Self {
        Self::with(SiteData::default())
    }

    fn with(data: SiteData) -> Self {
        let members = Arc::new(Members::new(&Roster::default(), false));
        Fixture {
            site: Site::new(Unit3dConfig::default(), members.clone(), data),
            members,
            stats: Stats::new(),
        }
    }

    fn call(&self, method: &str, path: &str, body: Value) -> ApiReply {
        handle(
            &self.site,
            &self.stats,
            method,
            path,
            body.to_string().as_bytes(),
        )
    }

    fn call_raw(&self, method: &str, path: &str, body: &[u8]) -> ApiReply {
        handle(&self.site, &self.stats, method, path, body)
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let r = self.call_raw("GET", path, b"");
        let v = serde_json::from_slice(&r.body).expect("a GET answers JSON");
        (r.status, v)
    }
}

/// `addTorrent`'s body.
fn torrent_body(id: u32, status: i64, info_hash: &str) -> Value {
    json!({
        "id": id,
        "status": status,
        "info_hash": info_hash,
        "is_deleted": false,
        "seeders": 4,
        "leechers": 2,
        "times_completed": 9,
        "download_factor": 75,
        "upload_factor": 200,
    })
}

/// `addUser`'s body.
fn user_body(id: u32, passkey: &str) -> Value {
    json!({
        "id": id,
        "group_id": 3,
        "passkey": passkey,
        "can_download": true,
        "is_donor": true,
        "is_lifetime": false,
        "num_seeding": 1,
        "num_leeching": 2,
    })
}

fn ok(r: &ApiReply) {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body.is_empty(), "a change answers no body");
}

fn bad(r: &ApiReply, reason: &str) {
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let v: Value = serde_json::from_slice(&r.body).expect("an error is JSON");
    let msg = v["error"].as_str().expect("with an error message");
    assert!(msg.contains(reason), "{msg:?} should say {reason:?}");
}

fn hash(hex_digits: &str) -> [u8; 20] {
    info_hash(hex_digits).unwrap()
}

// ----- torrents -----

#[test]
fn put_torrent_adds_it_and_registers_its_hash() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/torrents", torrent_body(7, 1, HASH)));
    let t = f.site.torrent(7).expect("the torrent is there").torrent;
    assert_eq!(
        t,
        Torrent {
            id: 7,
            info_hash: hash(HASH),
            status: Status::Approved,
            is_deleted: false,
            seeders: 4,
            leechers: 2,
            times_completed: 9,
            download_factor: 75,
            upload_factor: 200,
        }
    );
    assert_eq!(f.members.torrent(&Hash(hash(HASH))).map(|r| r.id), Some(7));
    // Upper-case hex is the same hash.
    ok(&f.call("PUT", "/torrents", torrent_body(7, 0, &HASH.to_uppercase())));
    assert_eq!(f.site.torrent(7).unwrap().torrent.status, Status::Pending);
}

#[test]
fn put_torrent_reads_every_status_the_site_has() {
    let f = Fixture::new();
    for (value, status) in [
        (0, Status::Pending),
        (1, Status::Approved),
        (2, Status::Rejected),
        (3, Status::Postponed),
        (9, Status::Unknown),
        (-1, Status::Unknown),
    ] {
        ok(&f.call("PUT", "/torrents", torrent_body(1, value, HASH)));
        assert_eq!(f.site.torrent(1).unwrap().torrent.status, status, "{value}");
    }
}

#[test]
fn delete_torrent_marks_it_deleted_and_an_unknown_one_is_refused() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/torrents", torrent_body(7, 1, HASH)));
    // `removeTorrent` sends the id and the hash.
    ok(&f.call("DELETE", "/torrents", json!({"id": 7, "info_hash": HASH})));
    assert!(f.site.torrent(7).unwrap().torrent.is_deleted);
    bad(
        &f.call("DELETE", "/torrents", json!({"id": 8, "info_hash": HASH})),
        "no torrent with id 8",
    );
}

#[test]
fn get_torrent_answers_what_the_site_validates() {
    let peer = Peer {
        user_id: 5,
        torrent_id: 7,
        peer_id: *b"-qB4650-abcdefghijkl",
        ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
        port: 51413,
        agent: "qBittorrent/4.6.5".into(),
        uploaded: 1 << 40,
        downloaded: 123,
        left: 0,
        seeder: true,
        active: true,
        visible: true,
        connectable: true,
        created_at: 1_700_000_000,
        updated_at: 1_700_000_100,
    };
    let f = Fixture::with(SiteData {
        torrents: vec![Torrent {
            id: 7,
            info_hash: hash(HASH),
            status: Status::Postponed,
            is_deleted: false,
            seeders: 0,
            leechers: 0,
            times_completed: 3,
            download_factor: 0,
            upload_factor: 100,
        }],
        peers: vec![peer],
        ..SiteData::default()
    });
    let (status, v) = f.get("/torrents/7");
    assert_eq!(status, 200);
    assert_eq!(
        v,
        json!({
            "id": 7,
            "status": "Postponed",
            "is_deleted": false,
            "peers": {
                "5-2d7142343635302d6162636465666768696a6b6c": {
                    "ip_address": "192.0.2.10",
                    "user_id": 5,
                    "torrent_id": 7,
                    "port": 51413,
                    "is_seeder": true,
                    "is_active": true,
                    "is_visible": true,
                    "is_connectable": true,
                    "has_sent_completed": false,
                    "updated_at": 1_700_000_100,
                    "uploaded": 1u64 << 40,
                    "downloaded": 123,
                }
            },
            "seeders": 1,
            "leechers": 0,
            "times_completed": 3,
            "download_factor": 0,
            "upload_factor": 100,
        })
    );
    // The site's checks are on JSON types: integers stay integers, bools bools.
    let p = &v["peers"].as_object().unwrap().values().next().unwrap();
    assert!(p["updated_at"].is_i64() && p["port"].is_u64() && p["uploaded"].is_u64());
    assert!(v["status"].is_string() && v["is_deleted"].is_boolean());
}

#[test]
fn a_torrent_without_clients_has_an_empty_object_of_peers() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/torrents", torrent_body(2, 1, HASH)));
    let (status, v) = f.get("/torrents/2");
    assert_eq!(status, 200);
    assert_eq!(v["peers"], json!({}));
}

#[test]
fn get_an_unknown_torrent_or_user_is_404_and_a_bad_id_400() {
    let f = Fixture::new();
    assert_eq!(f.get("/torrents/99").0, 404);
    assert_eq!(f.get("/users/99").0, 404);
    for id in ["abc", "-1", "+1", "4294967296", "1.0"] {
        bad(
            &f.call_raw("GET", &format!("/torrents/{id}"), b""),
            "is not a torrent id",
        );
        bad(
            &f.call_raw("GET", &format!("/users/{id}"), b""),
            "is not a user id",
        );
    }
}

// ----- users -----

#[test]
fn put_user_adds_them_with_their_passkey() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/users", user_body(5, PASSKEY)));
    let u = f.site.user(5).expect("the user is there").user;
    assert_eq!(
        u,
        User {
            id: 5,
            group_id: 3,
            passkey: PASSKEY.into(),
            can_download: true,
            is_donor: true,
            is_lifetime: false,
            num_seeding: 1,
            num_leeching: 2,
        }
    );
    assert_eq!(f.members.user(PASSKEY).map(|m| m.id), Some(5));
}

#[test]
fn put_user_with_a_new_passkey_moves_them_to_it() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/users", user_body(5, PASSKEY)));
    let new = "fedcba9876543210fedcba9876543210";
    let mut body = user_body(5, PASSKEY);
    body["new_passkey"] = json!(new);
    ok(&f.call("PUT", "/users", body));
    assert_eq!(f.site.user(5).unwrap().user.passkey, new);
    assert_eq!(f.members.user(new).map(|m| m.id), Some(5));
    assert!(f.members.user(PASSKEY).is_none(), "the old passkey is gone");
    // `null` is no new passkey.
    let mut body = user_body(5, new);
    body["new_passkey"] = Value::Null;
    ok(&f.call("PUT", "/users", body));
    assert_eq!(f.site.user(5).unwrap().user.passkey, new);
}

#[test]
fn put_user_from_a_site_without_donors_reads_them_as_none() {
    let f = Fixture::new();
    let mut body = user_body(5, PASSKEY);
    let o = body.as_object_mut().unwrap();
    o.remove("is_donor");
    o.remove("is_lifetime");
    ok(&f.call("PUT", "/users", body));
    let u = f.site.user(5).unwrap().user;
    assert!(!u.is_donor && !u.is_lifetime);
}

#[test]
fn delete_user_removes_them_and_their_passkey() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/users", user_body(5, PASSKEY)));
    // `removeUser` sends the id and the passkey.
    ok(&f.call("DELETE", "/users", json!({"id": 5, "passkey": PASSKEY})));
    assert!(f.site.user(5).is_none());
    assert!(f.members.user(PASSKEY).is_none());
    // A user already gone is no error (the site may retry).
    ok(&f.call("DELETE", "/users", json!({"id": 5, "passkey": PASSKEY})));
}

#[test]
fn get_user_answers_what_the_site_validates() {
    let f = Fixture::new();
    ok(&f.call("PUT", "/users", user_body(5, PASSKEY)));
    let (status, v) = f.get("/users/5");
    assert_eq!(status, 200);
    let o = v.as_object().unwrap();
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "can_download",
            "group_id",
            "id",
            "is_donor",
            "is_lifetime",
            "num_leeching",
            "num_seeding",
            "passkey",
            "receive_leech_list_rates",
            "receive_seed_list_rates",
        ]
    );
    assert_eq!(v["id"], 5);
    assert_eq!(v["group_id"], 3);
    assert_eq!(v["passkey"], PASSKEY);
    assert_eq!(v["can_download"], true);
    assert_eq!(v["is_donor"], true);
    assert_eq!(v["is_lifetime"], false);
    assert_eq!(v["num_seeding"], 1);
    assert_eq!(v["num_leeching"], 2);
    for list in ["receive_seed_list_rates", "receive_leech_list_rates"] {
        let rates = v[list]["rates"].as_array().expect("rates is an array");
        // The default limits: a minute and an hour.
        assert_eq!(rates.len(), 2, "{list}");
        for rate in rates {
            for field in ["count", "max_count", "window", "updated_at"] {
                assert!(
                    rate[field].is_f64(),
                    "{list}.{field} must be a float: {rate}"
                );
            }
        }
        assert_eq!(rates[0]["window"], 60.0);
        assert_eq!(rates[0]["max_count"], 10.0);
    }
}

// ----- groups and the lists -----

#[test]
fn put_and_delete_group() {
    let f = Fixture::new();
    // `addGroup`: download_slots is null for no limit.
    let body = json!({
        "id": 4,
        "slug": "power-user",
        "download_slots": null,
        "is_immune": true,
        "is_freeleech": false,
        "is_double_upload": true,
    });
    ok(&f.call("PUT", "/groups", body));
    let expected = Group {
        id: 4,
        slug: "power-user".into(),
        download_slots: None,
        is_immune: true,
        is_freeleech: false,
        is_double_upload: true,
    };
    assert_eq!(f.site.groups.read().get(&4), Some(&expected));
    let body = json!({
        "id": 4, "slug": "power-user", "download_slots": 8,
        "is_immune": false, "is_freeleech": true, "is_double_upload": false,
    });
    ok(&f.call("PUT", "/groups", body));
    let g = f.site.groups.read().get(&4).cloned().unwrap();
    assert_eq!(g.download_slots, Some(8));
    assert!(g.is_freeleech && !g.is_immune);
    ok(&f.call("DELETE", "/groups", json!({"id": 4})));
    assert!(f.site.groups.read().get(&4).is_none());
}

#[test]
fn blacklisted_agents_are_added_and_removed() {
    let f = Fixture::new();
    ok(&f.call(
        "PUT",
        "/blacklisted-agents",
        json!({"peer_id_prefix": "-XL0"}),
    ));
    // The same prefix as bytes.
    ok(&f.call(
        "PUT",
        "/blacklisted-agents",
        json!({"peer_id_prefix": [45, 66, 67]}),
    ));
    let list = f.site.blacklist.read().clone();
    assert_eq!(list, vec![b"-XL0".to_vec(), b"-BC".to_vec()]);
    ok(&f.call(
        "DELETE",
        "/blacklisted-agents",
        json!({"peer_id_prefix": "-XL0"}),
    ));
    assert_eq!(*f.site.blacklist.read(), vec![b"-BC".to_vec()]);
    bad(
        &f.call("PUT", "/blacklisted-agents", json!({"peer_id_prefix": ""})),
        "would refuse every client",
    );
    bad(
        &f.call(
            "PUT",
            "/blacklisted-agents",
            json!({"peer_id_prefix": [256]}),
        ),
        "invalid value",
    );
}

#[test]
fn freeleech_tokens_personal_freeleech_and_featured_torrents() {
    let f = Fixture::new();
    ok(&f.call(
        "PUT",
        "/freeleech-tokens",
        json!({"user_id": 5, "torrent_id": 7}),
    ));
    assert!(f.site.tokens.contains(&(5, 7)));
    ok(&f.call(
        "DELETE",
        "/freeleech-tokens",
        json!({"user_id": 5, "torrent_id": 7}),
    ));
    assert!(!f.site.tokens.contains(&(5, 7)));

    ok(&f.call("PUT", "/personal-freeleech", json!({"user_id": 5})));
    assert!(f.site.personal.contains(&5));
    ok(&f.call("DELETE", "/personal-freeleech", json!({"user_id": 5})));
    assert!(!f.site.personal.contains(&5));

    ok(&f.call("PUT", "/featured-torrents", json!({"torrent_id": 7})));
    assert!(f.site.featured.contains(&7));
    ok(&f.call("DELETE", "/featured-torrents", json!({"torrent_id": 7})));
    assert!(!f.site.featured.contains(&7));
}

// ----- stats -----

#[test]
fn get_stats_answers_every_figure_as_a_float() {
    let f = Fixture::new();
    f.stats.request();
    f.stats.announce_response();
    let (status, v) = f.get("/stats");
    assert_eq!(status, 200);
    let o = v.as_object().unwrap();
    let fields = [
        "created_at",
        "last_request_at",
        "last_announce_response_at",
        "requests_per_1s",
        "requests_per_10s",
        "requests_per_60s",
        "requests_per_900s",
        "requests_per_7200s",
        "announce_responses_per_1s",
        "announce_responses_per_10s",
        "announce_responses_per_60s",
        "announce_responses_per_900s",
        "announce_responses_per_7200s",
    ];
    assert_eq!(o.len(), fields.len());
    for field in fields {
        assert!(o[field].is_f64(), "{field} must be a float: {}", o[field]);
    }
    assert!(o["requests_per_7200s"].as_f64().unwrap() > 0.0);
    assert!(o["announce_responses_per_7200s"].as_f64().unwrap() > 0.0);
}

// ----- bad calls -----

#[test]
fn a_malformed_body_is_400_with_serde_json_s_reason_and_changes_nothing() {
    let f = Fixture::new();
    let mut missing = torrent_body(7, 1, HASH);
    missing.as_object_mut().unwrap().remove("info_hash");
    bad(
        &f.call("PUT", "/torrents", missing),
        "missing field `info_hash`",
    );
    let mut wrong = torrent_body(7, 1, HASH);
    wrong["seeders"] = json!("4");
    bad(
        &f.call("PUT", "/torrents", wrong),
        "invalid type: string \"4\", expected u32",
    );
    let mut negative = torrent_body(7, 1, HASH);
    negative["id"] = json!(-7);
    bad(
        &f.call("PUT", "/torrents", negative),
        "invalid value: integer `-7`",
    );
    let mut big = torrent_body(7, 1, HASH);
    big["upload_factor"] = json!(300);
    bad(&f.call("PUT", "/torrents", big), "expected u8");
    bad(&f.call_raw("PUT", "/torrents", b""), "EOF while parsing");
    bad(
        &f.call_raw("PUT", "/torrents", b"{\"id\": 7,"),
        "EOF while parsing",
    );
    bad(
        &f.call_raw("PUT", "/torrents", b"[1, 2]"),
        "invalid length 2",
    );
    bad(
        &f.call_raw("PUT", "/torrents", b"\xff\xfe"),
        "expected value",
    );
    assert!(f.site.torrent(7).is_none(), "nothing was added");

    bad(&f.call("PUT", "/users", json!({"id": 5})), "missing field");
    let mut wrong = user_body(5, PASSKEY);
    wrong["can_download"] = json!(1);
    bad(&f.call("PUT", "/users", wrong), "expected a boolean");
    bad(
        &f.call("PUT", "/groups", json!({"id": 4, "slug": 4})),
        "expected a string",
    );
    bad(
        &f.call("DELETE", "/groups", json!({})),
        "missing field `id`",
    );
    bad(
        &f.call("PUT", "/freeleech-tokens", json!({"user_id": 5})),
        "missing field `torrent_id`",
    );
    bad(
        &f.call("PUT", "/personal-freeleech", json!({"user": 5})),
        "missing field `user_id`",
    );
    bad(
        &f.call("PUT", "/featured-torrents", json!(null)),
        "invalid type: null",
    );
    assert!(f.site.user(5).is_none());
}

#[test]
fn a_bad_info_hash_or_passkey_is_400_naming_the_field() {
    let f = Fixture::new();
    // Empty, a digit short, a byte long, a digit not hex, a character not ASCII.
    let cut = &HASH[..39];
    let hashes = [
        String::new(),
        cut.to_string(),
        format!("{HASH}00"),
        format!("g{}", &HASH[1..]),
        format!("{cut}é"),
    ];
    for h in &hashes {
        bad(
            &f.call("PUT", "/torrents", torrent_body(7, 1, h)),
            "info_hash",
        );
    }
    assert!(f.site.torrent(7).is_none());
    bad(
        &f.call("PUT", "/users", user_body(5, "short")),
        "passkey is 5 bytes long, not 32",
    );
    bad(
        &f.call(
            "PUT",
            "/users",
            user_body(5, "0123456789abcdef0123456789abcde/"),
        ),
        "has characters other than",
    );
    let mut body = user_body(5, PASSKEY);
    body["new_passkey"] = json!("x");
    bad(
        &f.call("PUT", "/users", body),
        "new_passkey is 1 bytes long",
    );
    assert!(f.site.user(5).is_none());
    bad(
        &f.call("DELETE", "/users", json!({"id": 5, "passkey": ""})),
        "passkey is 0 bytes",
    );
}

#[test]
fn unknown_routes_are_404_and_wrong_methods_405() {
    let f = Fixture::new();
    for path in [
        "",
        "/",
        "torrents",
        "/torrent",
        "/torrents/",
        "/torrents/1/peers",
        "/users//1",
        "/stats/1",
        "/groups/1",
        "/TORRENTS",
    ] {
        let r = f.call_raw("GET", path, b"");
        assert_eq!(r.status, 404, "{path:?}");
        assert!(String::from_utf8_lossy(&r.body).contains("no such route"));
    }
    for (method, path, allow) in [
        ("GET", "/torrents", "PUT, DELETE"),
        ("POST", "/users", "PUT, DELETE"),
        ("PATCH", "/groups", "PUT, DELETE"),
        ("GET", "/featured-torrents", "PUT, DELETE"),
        ("PUT", "/torrents/1", "GET"),
        ("DELETE", "/users/1", "GET"),
        ("POST", "/stats", "GET"),
        ("put", "/torrents", "PUT, DELETE"),
    ] {
        let r = f.call(method, path, torrent_body(1, 1, HASH));
        assert_eq!(r.status, 405, "{method} {path}");
        assert_eq!(r.allow, Some(allow));
    }
    assert!(f.site.torrent(1).is_none(), "nothing was added");
}

// ----- the key -----

#[test]
fn route_finds_the_site_s_calls_and_leaves_announces() {
    assert_eq!(
        route(&format!("/announce/{KEY}/torrents")),
        Some((KEY, "/torrents"))
    );
    assert_eq!(
        route(&format!("/announce/{KEY}/users/5")),
        Some((KEY, "/users/5"))
    );
    assert_eq!(route(&format!("/announce/{KEY}/")), Some((KEY, "/")));
    assert_eq!(route(&format!("/announce/{PASSKEY}")), None, "an announce");
    assert_eq!(route("/announce"), None);
    assert_eq!(route("/scrape/x/y"), None);
    assert_eq!(route("/announce//stats"), Some(("", "/stats")));
}

#[test]
fn a_wrong_key_changes_nothing_and_says_so() {
    let f = Fixture::new();
    let body = torrent_body(7, 1, HASH).to_string();
    let wrong = KEY.replace('0', "1");
    for key in [wrong.as_str(), "", &KEY[..31], &format!("{KEY}x")] {
        let path = format!("/announce/{key}/torrents");
        let r = serve(&f.site, &f.stats, KEY, "PUT", &path, body.as_bytes()).unwrap();
        assert_eq!(r.status, 403, "{key:?}");
        assert!(String::from_utf8_lossy(&r.body).contains("wrong site API key"));
    }
    assert!(f.site.torrent(7).is_none());
    let path = format!("/announce/{KEY}/torrents");
    ok(&serve(&f.site, &f.stats, KEY, "PUT", &path, body.as_bytes()).unwrap());
    assert!(f.site.torrent(7).is_some());
    // An announce is no call of the API.
    let announce = format!("/announce/{PASSKEY}");
    assert!(serve(&f.site, &f.stats, KEY, "GET", &announce, b"").is_none());
}

#[test]
fn key_matches_only_the_same_key() {
    assert!(key_matches(KEY, KEY));
    assert!(!key_matches(KEY, &KEY[1..]));
    assert!(!key_matches(KEY, &KEY.to_uppercase()));
    assert!(!key_matches(KEY, ""));
}

#[test]
fn check_key_wants_32_characters_a_path_carries() {
    assert!(check_key(KEY).is_ok());
    assert!(check_key("abcDEF0123456789-._~!$&'()*+,;=:@").is_ok());
    let short = check_key(&KEY[..31]).unwrap_err();
    assert!(short.contains("31 characters: at least 32"), "{short}");
    assert!(check_key("").is_err());
    assert!(check_key(&"k".repeat(257))
        .unwrap_err()
        .contains("at most 256"));
    for c in ['/', '?', '#', '%', ' ', 'é', '\n'] {
        let key = format!("{KEY}{c}");
        let e = check_key(&key).unwrap_err();
        assert!(e.contains("does not carry unchanged"), "{c:?}: {e}");
    }
}

#[test]
fn no_input_makes_it_panic() {
    // A sample of the fuzz target's inputs (fuzz/fuzz_targets/unit3d_api.rs runs many more).
    let f = Fixture::new();
    let methods = ["GET", "PUT", "DELETE", "", "\u{0}"];
    let paths = [
        "/torrents",
        "/users",
        "/torrents/\u{0}",
        "/users/99999999999999999999",
        "/é/",
    ];
    let bodies: [&[u8]; 6] = [
        b"",
        b"{}",
        b"{\"id\":1e400}",
        b"{\"peer_id_prefix\":\"\\ud800\"}",
        b"\"\\u0000\"",
        &[b'['; 200],
    ];
    for m in methods {
        for p in paths {
            for b in bodies {
                let r = f.call_raw(m, p, b);
                assert!(matches!(r.status, 200 | 400 | 404 | 405), "{m} {p} {b:?}");
            }
        }
    }
}
