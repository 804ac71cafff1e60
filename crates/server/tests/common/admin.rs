//! One HTTP/1.1 request to the admin listener (metrics, status page, API), over a fresh
//! connection with a blocking socket: the admin listener always answers with
//! `Content-Length` and closes when asked.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// One HTTP/1.1 request over a fresh connection; returns (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    http_with_body(addr, method, path, token, "")
}

/// [`http`] with a request body (the API's JSON).
pub fn http_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let (status, body) = http_with_headers(addr, method, path, &auth, body.as_bytes());
    (status, String::from_utf8(body).unwrap())
}

/// One request with `headers` (whole lines, each ending in CRLF) and `body`, over a fresh
/// connection; returns (status, body bytes). The server answers with `Content-Length`
/// and closes when asked.
pub fn http_with_headers(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole response");
    let head = String::from_utf8_lossy(&raw[..at]);
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, raw[at + 4..].to_vec())
}
