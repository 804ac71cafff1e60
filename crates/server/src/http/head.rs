//! The head of the plain responses the HTTP front end writes itself (announces, scrapes,
//! errors, the stats page, the redirect): one place for the status line and the headers
//! every one of them carries.

use std::io::Write;

/// Appends a status line and headers for a body of `len` bytes.
pub fn write_head(out: &mut Vec<u8>, status: &str, len: usize, close: bool, extra: &str) {
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len}\r\n{extra}{}\r\n",
        if close {
            "Connection: close\r\n"
        } else {
            "Connection: keep-alive\r\n"
        }
    );
}
