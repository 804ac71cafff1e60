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
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    // The admin listener answers with Content-Length, never chunked.
    (status, body.to_string())
}
