//! Reading one HTTP/1.1 response off a connection, as a BitTorrent client would: framed
//! by `Content-Length`, by `Transfer-Encoding: chunked` (de-chunked in place, extensions
//! and trailers dropped), or by the end of the connection.
//!
//! Kept apart from the generator because it is a parser of bytes from the network with
//! its own limits and failure kinds: bytes that are not a valid response are
//! `InvalidData` (counted as an invalid response), a connection that ends early is
//! `UnexpectedEof` (a broken connection). It reads with `httparse` and allocates nothing
//! per response beyond the connection's buffer.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// A response read off the wire; the body is `buf[body]` (de-chunked if it was chunked).
pub struct HttpResponse {
    pub status: u16,
    pub body: std::ops::Range<usize>,
    pub close: bool,
    /// Bytes of the response on the wire (head and body as sent, chunk framing included).
    pub wire_len: usize,
}

/// Longest body accepted.
const MAX_RESPONSE: usize = 1 << 20;
/// Longest response head, and longest trailer section of a chunked body.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size line (size and extensions) or trailer line.
const MAX_LINE: usize = 4096;

/// Bytes that are not a valid response: counted as an invalid response.
pub(crate) fn invalid(m: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// The connection closed before the response was whole: counted as a broken connection.
pub(crate) fn closed(m: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, m)
}

/// Appends what the next read brings to `buf`; 0 at the end of the stream.
async fn read_more<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    buf.reserve(8192);
    s.read_buf(buf).await
}

/// Reads one HTTP/1.1 response (Content-Length, chunked, or until close).
///
/// Errors of kind `InvalidData` are bytes that are not a valid response (or one over the
/// size limits); `UnexpectedEof` and the others are a connection that broke. `buf` is
/// empty as long as no byte of the response has arrived.
pub async fn read_response<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> io::Result<HttpResponse> {
    buf.clear();
    let head = loop {
        if let Some(head) = parse_head(buf)? {
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("response head too large"));
        }
        if read_more(s, buf).await? == 0 {
            return Err(closed(if buf.is_empty() {
                "connection closed before a response"
            } else {
                "connection closed mid-head"
            }));
        }
    };
    let (body, wire_len) = match head.framing {
        Framing::Length(len) => read_sized(s, buf, head.len, len).await?,
        Framing::Chunked => read_chunked(s, buf, head.len).await?,
        Framing::UntilClose => read_to_close(s, buf, head.len).await?,
    };
    Ok(HttpResponse {
        status: head.status,
        body,
        close: head.close || matches!(head.framing, Framing::UntilClose),
        wire_len,
    })
}

/// How the body of a response is delimited.
#[derive(Debug, PartialEq)]
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// What a response head says.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    /// Length of the head, blank line included.
    len: usize,
    close: bool,
    framing: Framing,
}

/// Parses the head at the start of `buf`; `None` until it has arrived whole.
fn parse_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(len) = resp
        .parse(buf)
        .map_err(|_| invalid("bad HTTP response head"))?
    else {
        return Ok(None);
    };
    let mut close = resp.version == Some(0);
    let mut length = None;
    let mut transfer_encoding = None;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| invalid("bad Content-Length"))?;
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = String::from_utf8_lossy(h.value)
                .to_ascii_lowercase()
                .contains("close");
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = Some(h.value);
        }
    }
    // Transfer-Encoding overrides Content-Length (RFC 9112, 6.3).
    let framing = match (transfer_encoding, length) {
        (Some(te), _) if ends_chunked(te) => Framing::Chunked,
        (Some(_), _) => return Err(invalid("unsupported transfer coding")),
        (None, Some(n)) => Framing::Length(n),
        (None, None) => Framing::UntilClose,
    };
    Ok(Some(Head {
        status: resp.code.unwrap_or(0),
        len,
        close,
        framing,
    }))
}

/// Whether the last coding of a `Transfer-Encoding` value is `chunked`.
fn ends_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// Reads a body of `len` bytes starting at `buf[start]`; its range and the wire length.
async fn read_sized<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
    start: usize,
    len: usize,
) -> io::Result<(std::ops::Range<usize>, usize)> {
    if len > MAX_RESPONSE {
        return Err(invalid("response too large"));
    }
    let end = start + len;
    while buf.len() < end {
        if read_more(s, buf).await? == 0 {
            return Err(closed("connection closed mid-body"));
        }
    }
    Ok((start..end, end))
}

/// Reads a body that runs to the end of the connection.
async fn read_to_close<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
    start: usize,
) -> io::Result<(std::ops::Range<usize>, usize)> {
    while read_more(s, buf).await? > 0 {
        if buf.len() - start > MAX_RESPONSE {
            return Err(invalid("response too large"));
        }
    }
    Ok((start..buf.len(), buf.len()))
}

/// Reads a chunked body starting at `buf[start]`, de-chunking it in place.
async fn read_chunked<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
    start: usize,
) -> io::Result<(std::ops::Range<usize>, usize)> {
    let mut body = Dechunker::new(start);
    loop {
        if let Some(done) = body.advance(buf)? {
            return Ok(done);
        }
        if read_more(s, buf).await? == 0 {
            return Err(closed("connection closed mid-body"));
        }
    }
}

/// Decodes a `Transfer-Encoding: chunked` body in place as its bytes arrive: the data of
/// the chunks is moved down to `buf[start..out]` and the framing (size lines with their
/// extensions, CRLFs, trailers) is dropped from `buf`.
#[derive(Debug)]
struct Dechunker {
    start: usize,
    /// End of the decoded data.
    out: usize,
    /// Next raw byte to decode.
    pos: usize,
    /// Raw bytes dropped from `buf` so far.
    dropped: usize,
    state: Chunk,
}

/// Where a chunked body's decoding stands.
#[derive(Clone, Copy, Debug)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// In a chunk's data, this many bytes to go.
    Data(usize),
    /// Expecting the CRLF that ends a chunk's data.
    DataEnd,
    /// After the last (empty) chunk: trailer lines, this many bytes so far, until a blank
    /// line.
    Trailers(usize),
}

impl Dechunker {
    fn new(start: usize) -> Self {
        Self {
            start,
            out: start,
            pos: start,
            dropped: 0,
            state: Chunk::Size,
        }
    }

    /// Decodes what has arrived in `buf`; once the body is whole, its range in `buf` and
    /// the response's length on the wire.
    fn advance(
        &mut self,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(std::ops::Range<usize>, usize)>> {
        let done = self.decode(buf)?;
        buf.drain(self.out..self.pos);
        self.dropped += self.pos - self.out;
        self.pos = self.out;
        Ok(done.then(|| (self.start..self.out, self.out + self.dropped)))
    }

    /// Decodes as far as `buf` goes; whether the body is complete.
    fn decode(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        loop {
            match self.state {
                Chunk::Size => {
                    let Some(line) = self.line(buf)? else {
                        return Ok(false);
                    };
                    let size = chunk_size(&buf[self.pos..self.pos + line])?;
                    if size > MAX_RESPONSE - (self.out - self.start) {
                        return Err(invalid("response too large"));
                    }
                    self.pos += line;
                    self.state = if size == 0 {
                        Chunk::Trailers(0)
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let n = left.min(buf.len() - self.pos);
                    buf.copy_within(self.pos..self.pos + n, self.out);
                    self.pos += n;
                    self.out += n;
                    if n < left {
                        self.state = Chunk::Data(left - n);
                        return Ok(false);
                    }
                    self.state = Chunk::DataEnd;
                }
                Chunk::DataEnd => {
                    let rest = &buf[self.pos..];
                    if rest.starts_with(b"\r\n") {
                        self.pos += 2;
                    } else if rest.starts_with(b"\n") {
                        self.pos += 1;
                    } else if rest.is_empty() || rest == b"\r" {
                        return Ok(false);
                    } else {
                        return Err(invalid("chunk data not followed by CRLF"));
                    }
                    self.state = Chunk::Size;
                }
                Chunk::Trailers(seen) => {
                    let Some(line) = self.line(buf)? else {
                        return Ok(false);
                    };
                    let blank = strip_eol(&buf[self.pos..self.pos + line]).is_empty();
                    self.pos += line;
                    if blank {
                        return Ok(true);
                    }
                    if seen + line > MAX_HEAD {
                        return Err(invalid("trailers too large"));
                    }
                    self.state = Chunk::Trailers(seen + line);
                }
            }
        }
    }

    /// Length of the line at `pos`, LF included; `None` until it has arrived whole.
    fn line(&self, buf: &[u8]) -> io::Result<Option<usize>> {
        let window = &buf[self.pos..buf.len().min(self.pos + MAX_LINE)];
        match window.iter().position(|&b| b == b'\n') {
            Some(i) => Ok(Some(i + 1)),
            None if window.len() == MAX_LINE => Err(invalid("chunk line too long")),
            None => Ok(None),
        }
    }
}

/// A line without its LF or CRLF.
fn strip_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The size on a chunk-size line: hex digits, then optional `;name=value` extensions.
fn chunk_size(line: &[u8]) -> io::Result<usize> {
    let line = strip_eol(line);
    let end = line.iter().position(|&b| b == b';').unwrap_or(line.len());
    let hex = line[..end].trim_ascii_end();
    if hex.is_empty() || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(invalid("bad chunk size"));
    }
    std::str::from_utf8(hex)
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .ok_or_else(|| invalid("chunk size too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_length_and_close_delimited_responses() {
        let mut buf = Vec::new();
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        let r = read_response(&mut &wire[..], &mut buf).await.unwrap();
        assert_eq!(&buf[r.body.clone()], b"hello");
        assert!(!r.close);
        let wire = b"HTTP/1.0 200 OK\r\n\r\nd1:ai1ee";
        let r = read_response(&mut &wire[..], &mut buf).await.unwrap();
        assert_eq!(&buf[r.body.clone()], b"d1:ai1ee");
        assert!(r.close);
    }

    const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

    /// A chunked response: head, then `body`.
    fn chunked(body: &[u8]) -> Vec<u8> {
        [CHUNKED_HEAD, body].concat()
    }

    #[tokio::test]
    async fn reads_chunked_responses_with_extensions_and_trailers() {
        let body =
            b"5;name=value\r\nhello\r\nA\r\n, chunked!\r\n1 ; x\r\n.\r\n0\r\nX-Sum: 1\r\n\r\n";
        let wire = [chunked(body), b"NEXT".to_vec()].concat();
        let mut buf = Vec::new();
        let r = read_response(&mut &wire[..], &mut buf).await.unwrap();
        assert_eq!(&buf[r.body.clone()], b"hello, chunked!.");
        assert_eq!(r.wire_len, wire.len() - 4);
        assert!(!r.close);
        // Bare LF line ends, uppercase hex.
        let wire = chunked(b"B\nhello world\n0\n\n");
        let r = read_response(&mut &wire[..], &mut buf).await.unwrap();
        assert_eq!(&buf[r.body.clone()], b"hello world");
        assert_eq!(r.wire_len, wire.len());
    }

    #[test]
    fn dechunks_bytes_arriving_one_at_a_time() {
        let body = b"3;ext\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: x\r\n\r\n";
        let mut buf = b"HEAD".to_vec();
        let mut d = Dechunker::new(4);
        for (i, &b) in body.iter().enumerate() {
            buf.push(b);
            let done = d.advance(&mut buf).unwrap();
            if i + 1 < body.len() {
                assert!(done.is_none(), "done early at byte {i}");
            } else {
                let (range, wire) = done.unwrap();
                assert_eq!(&buf[range], b"abc0123456789abcdef");
                assert_eq!(wire, 4 + body.len());
            }
        }
    }

    #[test]
    fn chunk_sizes_are_hex_with_optional_extensions() {
        // The size each line gives; `None`: not a chunk size (invalid data).
        let lines: [(&[u8], Option<usize>); 11] = [
            (b"1a\r\n", Some(26)),
            (b"FF;a=b;c\r\n", Some(255)),
            (b"0 \r\n", Some(0)),
            (b"\r\n", None),
            (b"zz\r\n", None),
            (b"+5\r\n", None),
            (b"-1\r\n", None),
            (b" 5\r\n", None),
            (b"0x5\r\n", None),
            (b";ext\r\n", None),
            (b"10000000000000000\r\n", None),
        ];
        for (line, size) in lines {
            let got = chunk_size(line).map_err(|e| e.kind());
            assert_eq!(got, size.ok_or(io::ErrorKind::InvalidData), "{line:?}");
        }
    }

    /// The error reading `wire` as a response ends with: its kind and message.
    async fn failure(wire: &[u8]) -> (io::ErrorKind, String) {
        let e = read_response(&mut &wire[..], &mut Vec::new()).await.err();
        let e = e.expect("an error");
        (e.kind(), e.to_string())
    }

    #[tokio::test]
    async fn malformed_chunked_bodies_are_invalid_data() {
        let long_line = [b"1;".as_slice(), &[b'x'; MAX_LINE]].concat();
        let too_large = format!("{:x}\r\n", MAX_RESPONSE + 1);
        let many_trailers = [
            b"5\r\nhello\r\n0\r\n".as_slice(),
            &b"X-Long: yes\r\n".repeat(MAX_HEAD / 10),
        ]
        .concat();
        let cases: [(&[u8], &str); 7] = [
            (b"zz\r\nhello\r\n0\r\n\r\n", "bad chunk size"),
            (b"\r\n", "bad chunk size"),
            (b"fffffffffffffffff\r\n", "chunk size too large"),
            (too_large.as_bytes(), "response too large"),
            (
                b"5\r\nhelloX\r\n0\r\n\r\n",
                "chunk data not followed by CRLF",
            ),
            (&long_line, "chunk line too long"),
            (&many_trailers, "trailers too large"),
        ];
        for (body, message) in cases {
            let got = failure(&chunked(body)).await;
            assert_eq!(got, (io::ErrorKind::InvalidData, message.to_string()));
        }
        let gzip = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx";
        assert_eq!(failure(gzip).await.0, io::ErrorKind::InvalidData);
        let bad_length = b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\nhello";
        assert_eq!(failure(bad_length).await.0, io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn truncated_responses_are_broken_connections() {
        let mut buf = Vec::new();
        for wire in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\nContent-Le",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
            &chunked(b"5\r\nhello\r\n"),
        ] {
            let e = read_response(&mut &wire[..], &mut buf).await.err();
            assert_eq!(e.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
            assert_eq!(buf.is_empty(), wire.is_empty());
        }
    }

    #[test]
    fn transfer_encoding_overrides_content_length() {
        let head = parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(head.framing, Framing::Chunked);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n").unwrap().is_none());
    }
}
