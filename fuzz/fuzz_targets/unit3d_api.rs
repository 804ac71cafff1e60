//! Fuzzes the UNIT3D site API (`shoal_unit3d::api`): any method, path and body must give an
//! answer, never a panic. The first byte picks a method and a route the site calls (so that
//! most inputs reach the body parsers), or takes the method and the path from the input;
//! the rest is the body. Every answer has one of the statuses the API gives, a change
//! applied answers no body, and every body is JSON.
#![forbid(unsafe_code)]
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use shoal_tracker::private::{Members, Roster};
use shoal_unit3d::api::{handle, route, serve};
use shoal_unit3d::model::SiteData;
use shoal_unit3d::{Site, Stats, Unit3dConfig};

const KEY: &str = "0123456789abcdefghijklmnopqrstuvwxyz";

const CALLS: [(&str, &str); 20] = [
    ("PUT", "/torrents"),
    ("DELETE", "/torrents"),
    ("GET", "/torrents/1"),
    ("PUT", "/users"),
    ("DELETE", "/users"),
    ("GET", "/users/1"),
    ("PUT", "/groups"),
    ("DELETE", "/groups"),
    ("PUT", "/blacklisted-agents"),
    ("DELETE", "/blacklisted-agents"),
    ("PUT", "/freeleech-tokens"),
    ("DELETE", "/freeleech-tokens"),
    ("PUT", "/personal-freeleech"),
    ("DELETE", "/personal-freeleech"),
    ("PUT", "/featured-torrents"),
    ("DELETE", "/featured-torrents"),
    ("GET", "/stats"),
    ("POST", "/torrents"),
    ("GET", "/torrents/"),
    ("GET", "/nothing"),
];

fn state() -> &'static (Site, Stats) {
    static STATE: OnceLock<(Site, Stats)> = OnceLock::new();
    STATE.get_or_init(|| {
        let members = Arc::new(Members::new(&Roster::default(), false));
        let site = Site::new(Unit3dConfig::default(), members, SiteData::default());
        (site, Stats::new())
    })
}

fuzz_target!(|data: &[u8]| {
    let (site, stats) = state();
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let reply = match CALLS.get(usize::from(pick)) {
        Some(&(method, path)) => handle(site, stats, method, path, rest),
        None => {
            // method \n path \n body, from the input itself.
            let mut parts = rest.splitn(3, |&b| b == b'\n');
            let method = String::from_utf8_lossy(parts.next().unwrap_or_default());
            let path = String::from_utf8_lossy(parts.next().unwrap_or_default());
            let body = parts.next().unwrap_or_default();
            // Also as a whole request path, with the key or another.
            if let Some((key, after)) = route(&path) {
                assert!(path.ends_with(after) && path.contains(key));
                if let Some(r) = serve(site, stats, KEY, &method, &path, body) {
                    assert_eq!(r.status == 403, key != KEY);
                }
            }
            handle(site, stats, &method, &path, body)
        }
    };
    assert!(
        matches!(reply.status, 200 | 400 | 404 | 405),
        "status {}",
        reply.status
    );
    assert_eq!(reply.allow.is_some(), reply.status == 405);
    if reply.body.is_empty() {
        assert_eq!(reply.status, 200, "only a change applied answers no body");
    } else {
        serde_json::from_slice::<serde_json::Value>(&reply.body).expect("the answer is JSON");
    }
});
