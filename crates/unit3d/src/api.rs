//! The site's control API: the calls a UNIT3D site makes to its announce server, under
//! `/announce/<site key>/`, with UNIT3D-Announce's routes, bodies and answers, so that the
//! site's `Unit3dAnnounce` service works unchanged.
//!
//! It knows no transport: the HTTP front end finds the site's calls among its requests
//! ([`route`]), checks the key ([`key_matches`]) and hands the method, the rest of the path
//! and the body to [`handle`], which changes the [`Site`] and says what to answer
//! ([`ApiReply`]); [`serve`] does the three. Every change applies from the next announce.
//!
//! | call | body | answer |
//! |---|---|---|
//! | `PUT /torrents` | id, status (0-3), info_hash (hex), is_deleted, seeders, leechers, times_completed, download_factor, upload_factor | 200 |
//! | `DELETE /torrents` | id (info_hash ignored) | 200; 400 for an unknown id |
//! | `GET /torrents/<id>` | | the torrent ([`answers`]); 404 |
//! | `PUT /users` | id, group_id, passkey, new_passkey (optional), can_download, is_donor, is_lifetime, num_seeding, num_leeching | 200 |
//! | `DELETE /users` | id, passkey | 200 |
//! | `GET /users/<id>` | | the user; 404 |
//! | `PUT`/`DELETE /groups` | id, slug, download_slots, is_immune, is_freeleech, is_double_upload / id | 200 |
//! | `PUT`/`DELETE /blacklisted-agents` | peer_id_prefix | 200 |
//! | `PUT`/`DELETE /freeleech-tokens` | user_id, torrent_id | 200 |
//! | `PUT`/`DELETE /personal-freeleech` | user_id | 200 |
//! | `PUT`/`DELETE /featured-torrents` | torrent_id | 200 |
//! | `GET /stats` | | [`StatsAnswer`](crate::stats::StatsAnswer) |
//!
//! A change answers 200 with an empty body, as UNIT3D-Announce does (the site reads only
//! the status). Anything else answers JSON: a `GET`'s object, or `{"error": "..."}` that
//! says why: 400 for a body that is not what the site sends (serde_json's message, or the
//! field that is wrong), 404 for an unknown route or id, 405 for a method the route does
//! not take (with the methods it takes in [`ApiReply::allow`]), 403 for a wrong key.

mod answers;
mod bodies;

use serde::de::DeserializeOwned;
use serde::Serialize;
use subtle::ConstantTimeEq;

pub use bodies::{info_hash, PASSKEY_LEN};

use crate::site::Site;
use crate::stats::Stats;

/// The shortest site key taken (`site_api_key`).
pub const MIN_KEY_LEN: usize = 32;

/// The longest site key taken: far more than any site uses, short enough for any URL.
pub const MAX_KEY_LEN: usize = 256;

/// What to answer to one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiReply {
    /// The HTTP status.
    pub status: u16,
    /// JSON (`application/json`), or empty for a change applied.
    pub body: Vec<u8>,
    /// For a 405: the methods the route takes (the `Allow` header).
    pub allow: Option<&'static str>,
}

impl ApiReply {
    /// A change applied: 200, no body.
    fn done() -> Self {
        Self {
            status: 200,
            body: Vec::new(),
            allow: None,
        }
    }

    /// 200 with `value` as JSON.
    fn json<T: Serialize>(value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Self {
                status: 200,
                body,
                allow: None,
            },
            Err(e) => Self::error(500, &format!("the answer could not be written: {e}")),
        }
    }

    /// `status` with `{"error": message}`.
    pub fn error(status: u16, message: &str) -> Self {
        let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
            .unwrap_or_else(|_| b"{}".to_vec());
        Self {
            status,
            body,
            allow: None,
        }
    }

    /// The answer to a call whose key is not the site's: 403, nothing changed.
    pub fn wrong_key() -> Self {
        Self::error(
            403,
            "wrong site API key: nothing was changed (the key in the site's external \
             tracker settings must be shoal's site_api_key)",
        )
    }

    /// The `Content-Type` of the body, if there is one.
    pub fn content_type(&self) -> Option<&'static str> {
        (!self.body.is_empty()).then_some("application/json")
    }
}

/// Checks a site key (`site_api_key`): at least [`MIN_KEY_LEN`] characters, at most
/// [`MAX_KEY_LEN`], all of them characters a URL path carries unchanged (letters, digits
/// and `-._~!$&'()*+,;=:@`), since the site puts it in the path of every call.
pub fn check_key(key: &str) -> Result<(), String> {
    let len = key.chars().count();
    if len < MIN_KEY_LEN {
        return Err(format!(
            "the site API key has {len} characters: at least {MIN_KEY_LEN} are needed"
        ));
    }
    if len > MAX_KEY_LEN {
        return Err(format!(
            "the site API key has {len} characters: at most {MAX_KEY_LEN} are taken"
        ));
    }
    let path_safe = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c);
    if let Some(c) = key.chars().find(|&c| !path_safe(c)) {
        return Err(format!(
            "the site API key has {c:?}, which a URL path does not carry unchanged: use \
             letters, digits and -._~!$&'()*+,;=:@"
        ));
    }
    Ok(())
}

/// Whether `given` is the site's key, compared in constant time (for keys of one length).
pub fn key_matches(expected: &str, given: &str) -> bool {
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

/// Splits a request path of the site's API, `/announce/<key>/<rest>`, into the key and
/// `/<rest>`; `None` for any other path (`/announce/<passkey>` is an announce). A query
/// string must be cut off before.
pub fn route(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix("/announce/")?;
    let slash = after.find('/')?;
    Some((&after[..slash], &after[slash..]))
}

/// The site's call on `path` (a request path without its query), if it is one: the key
/// checked against `key` and the call handled. `None`: not a call of the site's API.
pub fn serve(
    site: &Site,
    stats: &Stats,
    key: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Option<ApiReply> {
    let (given, rest) = route(path)?;
    if !key_matches(key, given) {
        return Some(ApiReply::wrong_key());
    }
    Some(handle(site, stats, method, rest, body))
}

/// Whether `s` is one path segment (`/torrents/` and `/torrents/1/x` are no routes).
fn is_segment(s: &str) -> bool {
    !s.is_empty() && !s.contains('/')
}

/// The routes, as [`handle`] reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'a> {
    Torrents,
    Torrent(&'a str),
    Users,
    User(&'a str),
    Groups,
    BlacklistedAgents,
    FreeleechTokens,
    PersonalFreeleech,
    FeaturedTorrents,
    Stats,
}

impl<'a> Route<'a> {
    fn of(path: &'a str) -> Option<Self> {
        let rest = path.strip_prefix('/')?;
        let (first, id) = match rest.split_once('/') {
            Some((first, id)) => (first, Some(id)),
            None => (rest, None),
        };
        Some(match (first, id) {
            ("torrents", None) => Route::Torrents,
            ("torrents", Some(id)) if is_segment(id) => Route::Torrent(id),
            ("users", None) => Route::Users,
            ("users", Some(id)) if is_segment(id) => Route::User(id),
            ("groups", None) => Route::Groups,
            ("blacklisted-agents", None) => Route::BlacklistedAgents,
            ("freeleech-tokens", None) => Route::FreeleechTokens,
            ("personal-freeleech", None) => Route::PersonalFreeleech,
            ("featured-torrents", None) => Route::FeaturedTorrents,
            ("stats", None) => Route::Stats,
            _ => return None,
        })
    }

    /// The methods the route takes, as an `Allow` header.
    fn allow(self) -> &'static str {
        match self {
            Route::Torrent(_) | Route::User(_) | Route::Stats => "GET",
            _ => "PUT, DELETE",
        }
    }
}

/// Answers one call of the site: `method` on `path` (what follows `/announce/<key>`, such
/// as `/torrents` or `/users/12`), with the request's `body`. The key must have been
/// checked ([`serve`] does). Never panics, whatever the input.
pub fn handle(site: &Site, stats: &Stats, method: &str, path: &str, body: &[u8]) -> ApiReply {
    let Some(route) = Route::of(path) else {
        return ApiReply::error(404, &format!("no such route: {}", path.escape_debug()));
    };
    let reply = match (method, route) {
        ("GET", Route::Torrent(id)) => get_one("torrent", id, |id| {
            let torrent = site.torrent(id)?;
            Some(ApiReply::json(&answers::TorrentAnswer::from(&torrent)))
        }),
        ("GET", Route::User(id)) => get_one("user", id, |id| {
            let user = site.user(id)?;
            Some(ApiReply::json(&answers::UserAnswer::from(&user)))
        }),
        ("GET", Route::Stats) => ApiReply::json(&stats.answer()),
        ("PUT", Route::Torrents) => change(body, |t: bodies::PutTorrent| {
            site.put_torrent(t.into_torrent()?);
            Ok(())
        }),
        ("DELETE", Route::Torrents) => change(body, |t: bodies::DeleteTorrent| {
            match site.remove_torrent(t.id) {
                true => Ok(()),
                false => Err(format!("no torrent with id {}", t.id)),
            }
        }),
        ("PUT", Route::Users) => change(body, |u: bodies::PutUser| {
            site.put_user(u.into_user()?);
            Ok(())
        }),
        ("DELETE", Route::Users) => change(body, |u: bodies::DeleteUser| {
            site.remove_user(u.id()?);
            Ok(())
        }),
        ("PUT", Route::Groups) => change(body, |g: bodies::PutGroup| {
            site.put_group(g.into());
            Ok(())
        }),
        ("DELETE", Route::Groups) => change(body, |g: bodies::DeleteGroup| {
            site.remove_group(g.id);
            Ok(())
        }),
        (m @ ("PUT" | "DELETE"), Route::BlacklistedAgents) => {
            change(body, |a: bodies::BlacklistedAgent| {
                site.edit_blacklist(a.prefix()?, m == "PUT");
                Ok(())
            })
        }
        (m @ ("PUT" | "DELETE"), Route::FreeleechTokens) => {
            change(body, |t: bodies::FreeleechToken| {
                site.edit_token(t.user_id, t.torrent_id, m == "PUT");
                Ok(())
            })
        }
        (m @ ("PUT" | "DELETE"), Route::PersonalFreeleech) => {
            change(body, |p: bodies::PersonalFreeleech| {
                site.edit_personal_freeleech(p.user_id, m == "PUT");
                Ok(())
            })
        }
        (m @ ("PUT" | "DELETE"), Route::FeaturedTorrents) => {
            change(body, |f: bodies::FeaturedTorrent| {
                site.edit_featured(f.torrent_id, m == "PUT");
                Ok(())
            })
        }
        _ => ApiReply {
            allow: Some(route.allow()),
            ..ApiReply::error(
                405,
                &format!(
                    "{} takes {}, not {}",
                    path.escape_debug(),
                    route.allow(),
                    method.escape_debug()
                ),
            )
        },
    };
    if reply.status == 200 && method != "GET" {
        tracing::debug!(method, path, "site API change applied");
    }
    reply
}

/// Reads a body as `T` and applies it: 200 when `apply` did, 400 with the reason when the
/// body is not a `T` or `apply` refused it.
fn change<T: DeserializeOwned>(
    body: &[u8],
    apply: impl FnOnce(T) -> Result<(), String>,
) -> ApiReply {
    match serde_json::from_slice::<T>(body) {
        Ok(value) => match apply(value) {
            Ok(()) => ApiReply::done(),
            Err(why) => ApiReply::error(400, &why),
        },
        Err(e) => ApiReply::error(400, &e.to_string()),
    }
}

/// An id in a path: a `u32`, written in decimal.
fn path_id(what: &str, id: &str) -> Result<u32, ApiReply> {
    match id.parse::<u32>() {
        Ok(n) if !id.starts_with('+') => Ok(n),
        _ => Err(ApiReply::error(
            400,
            &format!(
                "`{}` is not a {what} id (a number from 0 to {})",
                id.escape_debug(),
                u32::MAX
            ),
        )),
    }
}

/// `GET /<what>s/<id>`: what `answer` shows of the one with that id, or 404 where it finds
/// none.
fn get_one(what: &str, id: &str, answer: impl FnOnce(u32) -> Option<ApiReply>) -> ApiReply {
    let id = match path_id(what, id) {
        Ok(id) => id,
        Err(reply) => return reply,
    };
    answer(id).unwrap_or_else(|| ApiReply::error(404, &format!("no {what} with id {id}")))
}

#[cfg(test)]
mod tests;
