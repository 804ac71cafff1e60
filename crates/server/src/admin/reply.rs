//! What every admin answer is made of: the call as the handlers see it, and the plain-text
//! and JSON responses. Its own file so that the router, the API and the status page share
//! it without reaching into one another.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::Value;

/// A response body.
pub type Body = Full<Bytes>;

/// What a handler needs of a request (no body: no admin call takes one).
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    /// The request body (at most [`MAX_BODY`] bytes; the API's PUTs carry JSON).
    pub body: Bytes,
}

/// The largest request body the admin listener reads.
pub const MAX_BODY: usize = 64 * 1024;

/// A plain-text response.
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A JSON response.
pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    let mut r = Response::new(Body::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
