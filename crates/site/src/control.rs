//! A site's control calls on the HTTP(S) listeners (UNIT3D's `/announce/<key>/...`,
//! Gazelle's `/<password>/update?...`): transport-free, so that the HTTP front end only
//! asks [`Control::route`] whether a request is one, reads its body, and writes the
//! [`Reply`] of [`Control::answer`].

/// The answer to a control call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    /// The body's `Content-Type` (`None` with no body).
    pub content_type: Option<&'static str>,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
}

impl Reply {
    /// `status` with `body` of `content_type`.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Reply {
        let body = body.into();
        Reply {
            status,
            content_type: (!body.is_empty()).then_some(content_type),
            body,
            allow: None,
        }
    }

    /// `status` with `{"error": message}`: what the server answers a call it cannot hand
    /// to the site (too large, too slow, not a route), in the form the sites' own
    /// errors take.
    pub fn error(status: u16, message: &str) -> Reply {
        let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
            .unwrap_or_else(|_| b"{}".to_vec());
        Reply::new(status, "application/json", body)
    }
}

/// What the HTTP front end needs of a site's control calls.
pub trait Control: Send + Sync {
    /// Whether `method path` is one of the site's calls (`None`: an announce, a scrape or
    /// anything else); if it is, how many body bytes to read (`usize::MAX` for a
    /// `Content-Length` that does not parse: refused as too large).
    fn route(&self, method: &str, path: &str, content_length: Option<&[u8]>) -> Option<usize>;

    /// The answer to a call `route` accepted, with its body.
    fn answer(&self, method: &str, path: &str, body: &[u8]) -> Reply;
}

#[cfg(test)]
mod tests {
    use super::Reply;

    #[test]
    fn an_error_is_json_with_its_message_escaped() {
        let r = Reply::error(403, "bad \"key\"\n");
        assert_eq!(r.body, br#"{"error":"bad \"key\"\n"}"#.to_vec());
        assert_eq!(r.content_type, Some("application/json"));
        assert_eq!(Reply::new(200, "text/plain", "").content_type, None);
    }
}
