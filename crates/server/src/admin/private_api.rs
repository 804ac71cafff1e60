//! The private tracker's admin API: users, torrents, client prefixes, reload and flush.
//!
//! | call                                   | answer                                       |
//! |----------------------------------------|----------------------------------------------|
//! | `PUT /api/users/<id>`                  | adds or updates a user (JSON body)           |
//! | `GET /api/users/<id>`                  | totals and per-torrent rows (database)       |
//! | `DELETE /api/users/<id>`               | removes a user (their rows go with them)     |
//! | `PUT /api/torrents/<v1 hex>`           | registers or updates a torrent (JSON body)   |
//! | `DELETE /api/torrents/<v1 hex>`        | removes a torrent                            |
//! | `PUT`, `DELETE /api/clients/<prefix>`  | allows or disallows a peer-id prefix         |
//! | `POST /api/private/reload`             | everything again from the database           |
//! | `POST /api/private/flush`              | writes the pending accounting now            |
//!
//! Each change goes to the database first, then into force: it applies from the next
//! announce. A PUT's fields are optional except a new user's `passkey`: left out, they keep
//! the value in force (or the default for something new: enabled, may download, factors
//! 1). `GET /api/torrents/<hash>` stays the swarm view (see `api.rs`).
//!
//! Database failures answer 503 (unreachable, timed out) or 409 (a passkey or v2 hash
//! another entry holds) with `{"error": ...}`; the passkey itself is never logged.

use hyper::{Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use shoal_accounts::{ClientPrefix, Torrent, User, UserStats};
use shoal_proto::InfoHash;

use super::reply::{json, Body, Call};
use crate::private::Accounts;

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response<Body> {
    json(status, &json!({ "error": message.to_string() }))
}

fn db_error(e: shoal_accounts::Error) -> Response<Body> {
    use shoal_accounts::Error as E;
    let status = match e {
        E::Conflict(_) => StatusCode::CONFLICT,
        E::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, e)
}

/// The calls above, or `None` if `parts` names none of them (then `api.rs` goes on).
pub fn route(call: &Call, parts: &[&str], accounts: Option<&Accounts>) -> Option<Response<Body>> {
    let m = &call.method;
    let private_call = matches!(
        (parts, m),
        (["users", _] | ["clients", _], _)
            | (["torrents", _], &Method::PUT | &Method::DELETE)
            | (["private", _], _)
    );
    if !private_call {
        return None;
    }
    let Some(a) = accounts else {
        return Some(error(
            StatusCode::CONFLICT,
            "private mode is off (private.enabled = false)",
        ));
    };
    Some(match (parts, m) {
        (["users", id], _) => match id.parse::<i64>() {
            Ok(id) if id > 0 => user(call, id, a),
            _ => error(StatusCode::BAD_REQUEST, "a user id is a positive integer"),
        },
        (["torrents", hash], _) => match InfoHash::from_hex(hash) {
            Some(h) if m == Method::PUT => put_torrent(call, h, a),
            Some(h) => match a.delete_torrent(h) {
                Ok(true) => json(StatusCode::OK, &json!({ "deleted": hash })),
                Ok(false) => error(StatusCode::NOT_FOUND, "no such torrent"),
                Err(e) => db_error(e),
            },
            None => error(StatusCode::BAD_REQUEST, "an info hash is 40 hex digits"),
        },
        (["clients", prefix], &Method::PUT | &Method::DELETE) => client(m, prefix, a),
        (["private", "reload"], &Method::POST) => match a.reload() {
            Ok((users, torrents, clients)) => {
                tracing::info!("private tables reloaded (admin API): {users} users");
                json(
                    StatusCode::OK,
                    &json!({ "users": users, "torrents": torrents, "clients": clients }),
                )
            }
            Err(e) => db_error(e),
        },
        (["private", "flush"], &Method::POST) => match a.flush() {
            Ok(f) => json(
                StatusCode::OK,
                &json!({ "accounts": f.accounts, "written": f.written.applied,
                         "without_user": f.written.without_user,
                         "without_torrent": f.written.without_torrent,
                         "new_snatches": f.written.new_snatches }),
            ),
            Err(e) => db_error(e),
        },
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here"),
    })
}

/// A user as a PUT sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserBody {
    passkey: Option<String>,
    enabled: Option<bool>,
    can_download: Option<bool>,
    download_factor: Option<f64>,
    upload_factor: Option<f64>,
}

/// A torrent as a PUT sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TorrentBody {
    download_factor: Option<f64>,
    upload_factor: Option<f64>,
    v2: Option<String>,
}

/// The body as JSON of type `T` (an empty body is `{}`), or the 400 that says why not.
fn body<T: for<'de> Deserialize<'de>>(call: &Call) -> Result<T, Box<Response<Body>>> {
    let bytes: &[u8] = if call.body.is_empty() {
        b"{}"
    } else {
        &call.body
    };
    serde_json::from_slice(bytes).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("bad JSON body: {e}"),
        ))
    })
}

fn user(call: &Call, id: i64, a: &Accounts) -> Response<Body> {
    match call.method {
        Method::GET => match a.user_stats(id) {
            Ok(Some(stats)) => json(StatusCode::OK, &user_json(&stats)),
            Ok(None) => error(StatusCode::NOT_FOUND, "no such user"),
            Err(e) => db_error(e),
        },
        Method::DELETE => match a.delete_user(id) {
            Ok(true) => json(StatusCode::OK, &json!({ "deleted": id })),
            Ok(false) => error(StatusCode::NOT_FOUND, "no such user"),
            Err(e) => db_error(e),
        },
        Method::PUT => {
            let b: UserBody = match body(call) {
                Ok(b) => b,
                Err(r) => return *r,
            };
            let current = a.user(id);
            let Some(passkey) = b
                .passkey
                .or_else(|| current.as_ref().map(|(k, _)| k.clone()))
            else {
                return error(StatusCode::BAD_REQUEST, "a new user needs a passkey");
            };
            if !shoal_proto::path::is_passkey(passkey.as_bytes()) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "a passkey is 1 to 64 characters of A-Z a-z 0-9 - . _ ~",
                );
            }
            let old = current.map(|(_, m)| m);
            let user = User {
                id,
                passkey,
                enabled: given(b.enabled, old.map(|m| m.enabled), true),
                can_download: given(b.can_download, old.map(|m| m.can_download), true),
                download_factor: given(b.download_factor, old.map(|m| m.download_factor), 1.0),
                upload_factor: given(b.upload_factor, old.map(|m| m.upload_factor), 1.0),
            };
            let shown = json!({ "id": id, "enabled": user.enabled,
                "can_download": user.can_download, "download_factor": user.download_factor,
                "upload_factor": user.upload_factor });
            match a.put_user(user) {
                Ok(()) => json(StatusCode::OK, &json!({ "user": shown })),
                Err(e) => db_error(e),
            }
        }
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here"),
    }
}

/// What a PUT sets a field to: the body's value, else the record's current one, else
/// `default` (a new record).
fn given<T>(body: Option<T>, current: Option<T>, default: T) -> T {
    body.or(current).unwrap_or(default)
}

fn user_json(s: &UserStats) -> Value {
    let torrents: Vec<Value> = s
        .torrents
        .iter()
        .map(|t| {
            json!({ "torrent_id": t.torrent_id, "info_hash": hex::encode(t.info_hash),
                "uploaded": t.uploaded, "downloaded": t.downloaded,
                "seed_seconds": t.seed_seconds, "leech_seconds": t.leech_seconds,
                "completed_at": t.completed_at, "updated_at": t.updated_at })
        })
        .collect();
    json!({ "user_id": s.user_id, "uploaded": s.uploaded, "downloaded": s.downloaded,
        "completed": s.completed, "seed_seconds": s.seed_seconds,
        "leech_seconds": s.leech_seconds, "torrents": torrents })
}

fn put_torrent(call: &Call, info_hash: InfoHash, a: &Accounts) -> Response<Body> {
    let b: TorrentBody = match body(call) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let v2 = match b.v2.as_deref().map(InfoHash::from_hex) {
        Some(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "v2 is 40 hex digits (the SHA-256 info hash truncated to 20 bytes)",
            )
        }
        Some(Some(h)) => Some(h),
        None => None,
    };
    let old = a.torrent(&info_hash).filter(|t| t.swarm == info_hash);
    let torrent = Torrent {
        id: old.map(|t| t.id),
        info_hash: info_hash.0,
        info_hash_v2: v2.or(old.and_then(|t| t.v2)).map(|h| h.0),
        download_factor: given(b.download_factor, old.map(|t| t.download_factor), 1.0),
        upload_factor: given(b.upload_factor, old.map(|t| t.upload_factor), 1.0),
    };
    match a.put_torrent(torrent) {
        Ok(t) => json(
            StatusCode::OK,
            &json!({ "torrent": { "id": t.id, "info_hash": t.swarm.to_hex(),
                "v2": t.v2.map(|h| h.to_hex()), "download_factor": t.download_factor,
                "upload_factor": t.upload_factor } }),
        ),
        Err(e) => db_error(e),
    }
}

fn client(method: &Method, prefix: &str, a: &Accounts) -> Response<Body> {
    let prefix = match percent_encoding::percent_decode_str(prefix).decode_utf8() {
        Ok(p) if !p.is_empty() && p.len() <= 20 => p.into_owned(),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "a client prefix is 1 to 20 bytes of UTF-8 (percent-encoded in the path)",
            )
        }
    };
    let add = method == Method::PUT;
    match a.edit_client(ClientPrefix(prefix.clone()), add) {
        Ok(changed) => json(
            StatusCode::OK,
            &json!({ "client": prefix, "allowed": add, "changed": changed }),
        ),
        Err(e) => db_error(e),
    }
}
