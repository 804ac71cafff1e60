//! The site's control calls on the HTTP(S) listeners: whatever paths the site in force owns
//! (UNIT3D's `/announce/<site key>/...` with JSON bodies, Gazelle's
//! `/<site password>/update?...` GETs), reached through the seam's
//! [`Control`](shoal_site::control::Control). The handler asks the site whether a request
//! is one of its calls ([`SiteCall::of`]); the connection loop reads the body (at most
//! [`MAX_BODY`] bytes, within the request timeout) and writes the site's answer
//! ([`SiteCall::answer`]).

use std::sync::Arc;

use shoal_site::control::{Control, Reply};

/// The largest body a control call may carry (the site sends a few hundred bytes).
pub const MAX_BODY: usize = 1 << 20;

/// The site's control calls, as the HTTP context holds them.
pub type SiteApi = dyn Control;

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

impl SiteCall {
    /// The control call `method path` is, if the site owns it (`None`: an announce, a
    /// scrape or anything else the handler answers).
    pub fn of(
        api: &Arc<SiteApi>,
        method: &str,
        path: &str,
        headers: &[httparse::Header<'_>],
        close: bool,
    ) -> Option<SiteCall> {
        let content_length = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map(|h| h.value);
        let length = api.route(method, path, content_length)?;
        Some(SiteCall {
            api: api.clone(),
            method: method.to_owned(),
            path: path.to_owned(),
            length,
            close,
        })
    }

    /// The site's answer to this call with its `body`.
    pub fn answer(&self, body: &[u8]) -> Reply {
        self.api.answer(&self.method, &self.path, body)
    }
}

/// Appends `reply` as an HTTP response.
pub fn write_reply(out: &mut Vec<u8>, reply: &Reply, close: bool) {
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
    if let Some(t) = reply.content_type {
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
