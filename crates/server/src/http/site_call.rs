//! The site's control calls on the HTTP(S) listeners: a UNIT3D site's
//! `/announce/<site key>/...` (`[private] schema = "unit3d"`), the one kind of request on
//! these listeners that is not a GET and carries a body, and a Gazelle site's
//! `/<site password>/update?...` and `/<report password>/report?...` (`schema = "gazelle"`),
//! GETs answered by [`shoal_gazelle::control`]. The handler recognises the path
//! ([`SiteApi::call`]); the connection loop reads the body (at most [`MAX_BODY`] bytes, within
//! the request timeout; none for Gazelle's) and writes the answer ([`SiteApi::answer`]).

use std::sync::Arc;

use shoal_unit3d::api::{self, ApiReply};
use shoal_unit3d::Site;

/// The largest body a control call may carry (the site sends a few hundred bytes).
pub const MAX_BODY: usize = 1 << 20;

/// The site's control API: the site in memory and its key (UNIT3D), or the site's calls
/// with their passwords (Gazelle).
pub enum SiteApi {
    Unit3d { site: Arc<Site>, key: String },
    Gazelle(shoal_gazelle::control::Control),
}

/// One control call whose head was read: what the connection loop needs to finish it.
pub struct SiteCall {
    pub api: Arc<SiteApi>,
    pub method: String,
    pub path: String,
    /// The body's length (`Content-Length`; 0 without one).
    pub length: usize,
    pub close: bool,
}

impl std::fmt::Debug for SiteCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the path: it holds the site's key.
        f.debug_struct("SiteCall")
            .field("method", &self.method)
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

impl SiteApi {
    pub fn new(site: Arc<Site>, key: String) -> Self {
        Self::Unit3d { site, key }
    }

    /// The control call `method path` is, if it is one (`None`: an announce, a scrape or
    /// anything else the handler answers). A body without a `Content-Length` (chunked) is
    /// refused by the handler as every request body is.
    pub fn call(
        self: &Arc<Self>,
        method: &str,
        path: &str,
        headers: &[httparse::Header<'_>],
        close: bool,
    ) -> Option<SiteCall> {
        if let Self::Gazelle(_) = **self {
            // A GET without a body; the query is the call.
            shoal_gazelle::control::route(path).filter(|_| method == "GET")?;
            return Some(SiteCall {
                api: self.clone(),
                method: method.to_owned(),
                path: path.to_owned(),
                length: 0,
                close,
            });
        }
        let path = path.split('?').next().unwrap_or(path);
        api::route(path)?;
        let length = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map_or(Some(0), |h| {
                std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(usize::MAX);
        Some(SiteCall {
            api: self.clone(),
            method: method.to_owned(),
            path: path.to_owned(),
            length,
            close,
        })
    }

    /// The answer to `call` with its `body`.
    pub fn answer(&self, call: &SiteCall, body: &[u8]) -> ApiReply {
        let (site, key) = match self {
            Self::Unit3d { site, key } => (site, key),
            Self::Gazelle(control) => {
                return match control.answer(&call.path) {
                    Some(reply) => ApiReply {
                        status: 200,
                        body: reply.body,
                        allow: None,
                    },
                    None => ApiReply::error(404, "not a call of the site's API"),
                };
            }
        };
        site.stats.request();
        api::serve(site, &site.stats, key, &call.method, &call.path, body)
            .unwrap_or_else(|| ApiReply::error(404, "not a call of the site's API"))
    }
}

/// Appends `reply` as an HTTP response.
pub fn write_reply(out: &mut Vec<u8>, reply: &ApiReply, close: bool) {
    use std::io::Write;
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        _ => "Error",
    };
    let _ = write!(out, "HTTP/1.1 {} {reason}\r\n", reply.status);
    if let Some(t) = reply.content_type() {
        let _ = write!(out, "Content-Type: {t}\r\n");
    }
    if let Some(allow) = reply.allow {
        let _ = write!(out, "Allow: {allow}\r\n");
    }
    let connection = if close { "close" } else { "keep-alive" };
    let _ = write!(
        out,
        "Content-Length: {}\r\nConnection: {connection}\r\n\r\n",
        reply.body.len()
    );
    out.extend_from_slice(&reply.body);
}
