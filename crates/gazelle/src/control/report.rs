//! The site's reports (`report?get=...`) and `info_torrent`, as JSON the site decodes:
//! the tracker's figures (`stats`, each `{"type": .., "value": ..}` as Ocelot's), a
//! user's (`user`), a torrent's (`torrent`), and the Prometheus lines (`prom_stats`).

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use super::Reply;
use crate::control::ReportQuery;
use crate::model::InfoHash;
use crate::site::{unix_now, Site};

/// The answer to one report query.
pub fn answer(site: &Site, q: ReportQuery) -> Reply {
    match q {
        ReportQuery::Stats => Reply::json(format!("{}\n", stats(site))),
        ReportQuery::PromStats => Reply::text(prom_stats(site)),
        // shoal does not run on jemalloc: nothing to dump.
        ReportQuery::Jemalloc => Reply::text(""),
        ReportQuery::User { key } if key.is_empty() => Reply::failure("Announce key missing"),
        ReportQuery::User { key } => match site.user_by_passkey(&key) {
            Some(u) => Reply::json(format!(
                "{}\n",
                json!({
                    "id": u.user.id,
                    "leeching": u.leeching,
                    "seeding": u.seeding,
                    "deleted": u8::from(u.deleted),
                    "protected": u8::from(u.user.protected),
                    "can_leech": u8::from(u.user.can_leech),
                    "traced": u8::from(u.traced),
                })
            )),
            None => {
                site.counters
                    .bad_announce_key
                    .fetch_add(1, Ordering::Relaxed);
                Reply::failure("Announce key not found")
            }
        },
        ReportQuery::Torrent { hash } => match hash.and_then(|h| site.torrent(&h)) {
            Some(t) => {
                let mut seeders = Vec::new();
                let mut leechers = Vec::new();
                for ((user, _), c) in &t.clients {
                    if c.seeder {
                        seeders.push(*user);
                    } else {
                        leechers.push(*user);
                    }
                }
                let mut tokens: Vec<u32> = t.tokened.iter().copied().collect();
                tokens.sort_unstable();
                Reply::json(format!(
                    "{}\n",
                    json!({
                        "id": t.torrent.id,
                        "info_hash": hex::encode(t.torrent.info_hash),
                        "free": t.torrent.leech_type.number(),
                        "completed": t.torrent.snatched,
                        "seeders": t.seeders,
                        "leechers": t.leechers,
                        "last_flushed": t.last_flushed,
                        "fltoken_list": tokens,
                        "seeder_list": seeders,
                        "leecher_list": leechers,
                    })
                ))
            }
            None => Reply::failure("Torrent not found"),
        },
        ReportQuery::Other(_) => Reply::failure("unrecognized report query"),
    }
}

/// `info_torrent`: the hash as sent, and the torrent's id and leech type, or `"fail":1`.
pub fn info_torrent(site: &Site, text: &str, hash: Option<InfoHash>) -> Reply {
    let mut out = Map::new();
    out.insert("hash".into(), Value::from(text));
    match hash.and_then(|h| site.torrent(&h)) {
        Some(t) => {
            out.insert("id".into(), Value::from(t.torrent.id));
            out.insert("free".into(), Value::from(t.torrent.leech_type.number()));
        }
        None => {
            out.insert("fail".into(), Value::from(1));
        }
    }
    Reply::json(format!("{}\n", Value::Object(out)))
}

/// `get=stats`: Ocelot's labels, each with its type and value.
fn stats(site: &Site) -> Value {
    let c = &site.counters;
    let (_, torrents, _, seeders, leechers) = site.counts();
    let (interval, jitter) = site.interval();
    let announces = c.announces.load(Ordering::Relaxed);
    let served = c.served.load(Ordering::Relaxed);
    let item = |kind: &str, value: Value| json!({ "type": kind, "value": value });
    let mut m = Map::new();
    let mut put = |label: &str, kind: &str, value: Value| {
        m.insert(label.to_owned(), item(kind, value));
    };
    put(
        "version",
        "string",
        Value::from(format!("shoal {}", env!("CARGO_PKG_VERSION"))),
    );
    put("successful announcements", "number", served.into());
    put(
        "failed announcements",
        "number",
        announces.saturating_sub(served).into(),
    );
    put("torrents tracked", "number", torrents.into());
    put("leechers tracked", "number", leechers.into());
    put("seeders tracked", "number", seeders.into());
    let pending = site.pending.lock();
    put("items in user queue", "number", 0.into());
    put(
        "items in torrent queue",
        "number",
        pending.torrents.len().into(),
    );
    put(
        "items in peer queue",
        "number",
        (pending.peers.len() + pending.gone.len()).into(),
    );
    put(
        "items in snatch queue",
        "number",
        pending.snatches.len().into(),
    );
    put(
        "items in token queue",
        "number",
        pending.tokens.len().into(),
    );
    drop(pending);
    let counter = |a: &std::sync::atomic::AtomicU64| Value::from(a.load(Ordering::Relaxed));
    put(
        "bad tracker secret received",
        "number",
        counter(&c.bad_site_password),
    );
    put(
        "bad report secret received",
        "number",
        counter(&c.bad_report_password),
    );
    put(
        "bad announce key received",
        "number",
        counter(&c.bad_announce_key),
    );
    put("announce interval", "number", interval.into());
    put("announce jitter", "number", jitter.into());
    put(
        "uptime",
        "elapsed",
        unix_now().saturating_sub(site.started).into(),
    );
    Value::Object(m)
}

/// `get=prom_stats`: Ocelot's tracker lines (its jemalloc lines left out).
fn prom_stats(site: &Site) -> String {
    let c = &site.counters;
    let (_, _, _, seeders, leechers) = site.counts();
    format!(
        "ocelot_uptime {}\nocelot_succ_announcements {}\nocelot_total_announcements {}\n\
         ocelot_leechers {leechers}\nocelot_seeders {seeders}\n\
         ocelot_error{{kind=\"secret\"}} {}\nocelot_error{{kind=\"report\"}} {}\n\
         ocelot_error{{kind=\"announce\"}} {}\n#",
        unix_now().saturating_sub(site.started),
        c.served.load(Ordering::Relaxed),
        c.announces.load(Ordering::Relaxed),
        c.bad_site_password.load(Ordering::Relaxed),
        c.bad_report_password.load(Ordering::Relaxed),
        c.bad_announce_key.load(Ordering::Relaxed),
    )
}
