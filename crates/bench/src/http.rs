//! The HTTP(S) load generator: announces and scrapes over many connections.
//!
//! Each connection is a tokio task that sends one request and waits for its answer
//! (HTTP/1.1 without pipelining, like BitTorrent clients). With keep-alive the connection
//! is reused; without, every request opens a new one (and its TCP and TLS handshake is
//! counted under `connect`, and in the request's latency, as a client would feel it).
//! Like hyper and curl, a request on a reused connection that the server had closed (EOF
//! or reset before any byte of the answer) is sent again, once, on a new connection and
//! counted under `reconnects`, not as an error: opentracker closes every connection after
//! its answer without saying `Connection: close`. Connections are spread over loopback
//! source addresses (see [`crate::net`]).
//!
//! The request is written by hand, binary `info_hash` and `peer_id` percent-encoded, and
//! the response (sized by `Content-Length`, chunked, or up to the close) is read with
//! `httparse` and checked with a strict bencode reader: status
//! 200, no `failure reason`, an `interval`, compact peers a whole number of 6-byte entries
//! and no more than `numwant`; a scrape must list only the hashes asked for.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::net::{self, Endpoint, Stream};
use crate::run::{supervise, Control, RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};
use crate::workload::{RequestKind, Workload, WorkloadArgs};
use shoal_proto::bencode::{self, Value};
use shoal_proto::{AnnounceEvent, InfoHash};

/// Flags of `shoal-bench http`.
#[derive(Args, Clone, Debug)]
pub struct HttpArgs {
    /// Announce URL, e.g. http://127.0.0.1:3000/announce or https://localhost:3443/announce.
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub run: RunArgs,
    /// Concurrent connections (each with one request in flight).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Close the connection after every request (`Connection: close`).
    #[arg(long)]
    pub no_keep_alive: bool,
    /// Scrape path (default: the announce path with `announce` replaced by `scrape`).
    #[arg(long)]
    pub scrape_path: Option<String>,
    /// Spread connections over this many loopback source addresses.
    #[arg(long, default_value_t = 16)]
    pub source_ips: u32,
    /// Verify the tracker's TLS certificate against this PEM file (default: accept any).
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

/// Runs `shoal-bench http`.
pub fn run(args: &HttpArgs) -> Result<RunResult> {
    if let Ok(limit) = crate::sys::raise_nofile_limit() {
        if (limit as usize) < args.connections + 64 {
            anyhow::bail!(
                "{} connections need more open files than the limit of {limit}",
                args.connections
            );
        }
    }
    let ep = Endpoint::parse(&args.target)?;
    let tls = if ep.tls {
        Some(net::tls_config(args.ca_cert.as_deref(), &[b"http/1.1"])?)
    } else {
        None
    };
    let (announce_path, scrape_path) = paths(&ep.path, args.scrape_path.as_deref());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.run.workers.max(1))
        .enable_all()
        .build()?;
    let ctl = Control::new(&args.run);
    let shared = Arc::new(Shared {
        ep,
        tls,
        announce_path,
        scrape_path,
        args: args.clone(),
        ctl: ctl.clone(),
    });
    let tasks: Vec<_> = (0..args.connections.max(1))
        .map(|k| rt.spawn(connection(shared.clone(), k)))
        .collect();
    let cpu = supervise(&ctl, &args.run, &format!("http {}", args.target));
    let mut stats = Stats::for_tcp();
    rt.block_on(async {
        for t in tasks {
            if let Ok(s) = t.await {
                stats.merge(&s);
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    let cpu = cpu.map_err(|e| with_errors(e, &stats))?;
    Ok(RunResult::new(
        "http",
        args.target.clone(),
        &args.run,
        args.connections,
        stats.summary(args.run.duration.as_secs_f64()),
        cpu,
    ))
}

/// Adds the errors seen to a "no response" error, so the user sees why.
pub fn with_errors(e: anyhow::Error, stats: &Stats) -> anyhow::Error {
    let s = stats.summary(1.0);
    let errs: Vec<String> = s
        .errors
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if errs.is_empty() {
        e
    } else {
        e.context(format!("errors seen: {}", errs.join(", ")))
    }
}

fn paths(announce: &str, scrape: Option<&str>) -> (String, String) {
    let announce = announce.split('?').next().unwrap_or("/").to_string();
    let scrape = match scrape {
        Some(s) => s.to_string(),
        None => match announce.rfind("announce") {
            Some(i) => format!("{}scrape{}", &announce[..i], &announce[i + 8..]),
            None => "/scrape".to_string(),
        },
    };
    (announce, scrape)
}

struct Shared {
    ep: Endpoint,
    tls: Option<Arc<ClientConfig>>,
    announce_path: String,
    scrape_path: String,
    args: HttpArgs,
    ctl: Arc<Control>,
}

/// What the answer to a request must look like.
enum Expect {
    Announce { numwant: u32 },
    Scrape { hashes: Vec<InfoHash> },
}

/// One connection's life: request, answer, check, repeat until the end of the run.
async fn connection(sh: Arc<Shared>, k: usize) -> Stats {
    let args = &sh.args;
    let n = args.connections.max(1);
    let mut workload = Workload::new(&args.workload, k, n);
    let mut stats = Stats::for_tcp();
    let mut measuring = false;
    let mut stream: Option<Box<dyn Stream>> = None;
    let mut buf = Vec::with_capacity(4096);
    let mut req = String::with_capacity(512);
    let mut hashes = Vec::new();
    // Open loop: this connection's share of the offered rate, due times from the start.
    let interval = args
        .run
        .rate
        .map(|r| Duration::from_secs_f64(n as f64 / r.max(1e-3)));
    // Spread the first due times so connections do not fire together.
    let mut due = sh.ctl.start
        + interval
            .map(|i| i.mul_f64(k as f64 / n as f64))
            .unwrap_or_default();
    let timeout = args.run.timeout;
    loop {
        if let Some(i) = interval {
            tokio::time::sleep_until(due.into()).await;
            due += i;
        }
        let now = Instant::now();
        if now >= sh.ctl.end || sh.ctl.stopped() {
            break;
        }
        if !measuring && now >= sh.ctl.measure_from {
            stats.reset();
            measuring = true;
        }
        let origin = if interval.is_some() {
            due - interval.unwrap_or_default()
        } else {
            now
        };
        let mut reused = stream.is_some();
        if !ensure_connected(&sh, k, &mut stream, &mut stats).await {
            continue;
        }
        let (op, expect) = next_request(&mut workload, &sh, &mut req, &mut hashes);
        stats.sent[op as usize] += 1;
        let result = loop {
            let s = stream.as_mut().expect("connected above");
            let result = tokio::time::timeout(timeout, exchange(s, req.as_bytes(), &mut buf)).await;
            if !(reused && closed_before_answer(&result, &buf)) {
                break Some(result);
            }
            // The server had closed the idle connection (opentracker does after every
            // answer without saying `Connection: close`): like HTTP clients, send the
            // request again, once, on a new connection. Its latency runs from `origin`.
            stats.reconnects += 1;
            stream = None;
            reused = false;
            if !ensure_connected(&sh, k, &mut stream, &mut stats).await {
                break None;
            }
        };
        // `None`: the new connection failed, and that failure was counted.
        let Some(result) = result else { continue };
        match result {
            Err(_) => {
                stats.error(ErrorKind::Timeout);
                stream = None;
            }
            Ok(Err(e)) => {
                stats.error(failure_kind(&e));
                stream = None;
            }
            Ok(Ok(resp)) => {
                stats.bytes_out += req.len() as u64;
                stats.bytes_in += resp.wire_len as u64;
                match check(&resp, &buf[resp.body.clone()], &expect) {
                    Ok(peers) => {
                        stats.peers_received += peers as u64;
                        stats.record(op, origin.elapsed().as_nanos() as u64);
                        sh.ctl.responses.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(kind) => stats.error(kind),
                }
                if resp.close || args.no_keep_alive {
                    stream = None;
                }
            }
        }
    }
    if !measuring {
        stats.reset();
    }
    stats
}

/// Connects `stream` unless it is connected; false (the failure counted) if that failed.
async fn ensure_connected(
    sh: &Shared,
    k: usize,
    stream: &mut Option<Box<dyn Stream>>,
    stats: &mut Stats,
) -> bool {
    if stream.is_some() {
        return true;
    }
    let t = Instant::now();
    let connect = net::connect(&sh.ep, sh.tls.as_ref(), sh.args.source_ips, k as u32);
    match tokio::time::timeout(sh.args.run.timeout, connect).await {
        Ok(Ok(s)) => {
            stats.record(Op::Connect, t.elapsed().as_nanos() as u64);
            *stream = Some(s);
            true
        }
        Ok(Err(_)) => {
            stats.error(ErrorKind::Connection);
            tokio::time::sleep(Duration::from_millis(10)).await;
            false
        }
        Err(_) => {
            stats.error(ErrorKind::Timeout);
            false
        }
    }
}

/// Draws the next request from the workload and writes it into `req`.
fn next_request(
    workload: &mut Workload,
    sh: &Shared,
    req: &mut String,
    hashes: &mut Vec<InfoHash>,
) -> (Op, Expect) {
    match workload.next_kind() {
        RequestKind::Scrape => {
            workload.scrape(hashes);
            write_scrape(req, sh, hashes);
            (
                Op::Scrape,
                Expect::Scrape {
                    hashes: hashes.clone(),
                },
            )
        }
        _ => {
            let p = workload.random_peer();
            let a = workload.announce(p);
            write_announce(req, sh, &a);
            (Op::Announce, Expect::Announce { numwant: a.numwant })
        }
    }
}

/// Sends `req` and reads its answer into `buf`, which stays empty until a byte of it
/// arrives.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &[u8],
    buf: &mut Vec<u8>,
) -> io::Result<HttpResponse> {
    buf.clear();
    s.write_all(req).await?;
    read_response(s, buf).await
}

/// Whether an exchange failed because the connection was closed or reset before any byte
/// of the answer arrived (`buf` empty): what a server closing an idle keep-alive
/// connection looks like to the next request.
fn closed_before_answer(
    result: &Result<io::Result<HttpResponse>, tokio::time::error::Elapsed>,
    buf: &[u8],
) -> bool {
    use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    let Ok(Err(e)) = result else {
        return false;
    };
    buf.is_empty()
        && matches!(
            e.kind(),
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
        )
}

/// The error a failed exchange counts as: bytes that are not a valid HTTP response are an
/// invalid response, anything else (closed, reset, ...) a broken connection.
fn failure_kind(e: &io::Error) -> ErrorKind {
    if e.kind() == io::ErrorKind::InvalidData {
        ErrorKind::InvalidResponse
    } else {
        ErrorKind::Connection
    }
}

fn write_announce(req: &mut String, sh: &Shared, a: &crate::workload::AnnounceSpec) {
    use std::fmt::Write;
    req.clear();
    req.push_str("GET ");
    req.push_str(&sh.announce_path);
    req.push_str("?info_hash=");
    net::percent_encode(&a.info_hash.0, req);
    req.push_str("&peer_id=");
    net::percent_encode(&a.peer_id.0, req);
    let _ = write!(
        req,
        "&port={}&uploaded={}&downloaded={}&left={}&numwant={}&key={:08x}&compact=1",
        a.port, a.uploaded, a.downloaded, a.left, a.numwant, a.key
    );
    match a.event {
        AnnounceEvent::Started => req.push_str("&event=started"),
        AnnounceEvent::Completed => req.push_str("&event=completed"),
        AnnounceEvent::Stopped => req.push_str("&event=stopped"),
        AnnounceEvent::None => {}
    }
    finish_request(req, sh);
}

fn write_scrape(req: &mut String, sh: &Shared, hashes: &[InfoHash]) {
    req.clear();
    req.push_str("GET ");
    req.push_str(&sh.scrape_path);
    for (i, h) in hashes.iter().enumerate() {
        req.push_str(if i == 0 { "?info_hash=" } else { "&info_hash=" });
        net::percent_encode(&h.0, req);
    }
    finish_request(req, sh);
}

fn finish_request(req: &mut String, sh: &Shared) {
    req.push_str(" HTTP/1.1\r\nHost: ");
    req.push_str(&sh.ep.host);
    req.push_str("\r\nUser-Agent: shoal-bench\r\nConnection: ");
    req.push_str(if sh.args.no_keep_alive {
        "close"
    } else {
        "keep-alive"
    });
    req.push_str("\r\n\r\n");
}

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
fn invalid(m: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// The connection closed before the response was whole: counted as a broken connection.
fn closed(m: &'static str) -> io::Error {
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

/// Checks a response against its request; `Ok(peers received)`.
fn check(resp: &HttpResponse, body: &[u8], expect: &Expect) -> Result<usize, ErrorKind> {
    // aquatic_http ends its bodies with CRLF (inside Content-Length); clients accept that.
    let v = bencode::decode(body.trim_ascii_end());
    if let Some(v) = &v {
        if v.get(b"failure reason").is_some() {
            return Err(ErrorKind::ErrorResponse);
        }
    }
    if resp.status != 200 {
        return Err(ErrorKind::ErrorResponse);
    }
    let v = v.ok_or(ErrorKind::InvalidResponse)?;
    match expect {
        Expect::Announce { numwant } => {
            v.get(b"interval")
                .and_then(Value::as_int)
                .filter(|i| *i > 0)
                .ok_or(ErrorKind::InvalidResponse)?;
            let peers = match v.get(b"peers") {
                Some(Value::Bytes(b)) if b.len() % 6 == 0 => b.len() / 6,
                Some(Value::List(l)) => l.len(),
                None => 0,
                _ => return Err(ErrorKind::InvalidResponse),
            };
            let peers6 = match v.get(b"peers6") {
                Some(Value::Bytes(b)) if b.len() % 18 == 0 => b.len() / 18,
                None => 0,
                _ => return Err(ErrorKind::InvalidResponse),
            };
            if peers + peers6 > *numwant as usize {
                return Err(ErrorKind::InvalidResponse);
            }
            Ok(peers + peers6)
        }
        Expect::Scrape { hashes } => match v.get(b"files") {
            Some(Value::Dict(files)) => {
                let asked = |k: &[u8]| hashes.iter().any(|h| h.0 == k);
                if files
                    .iter()
                    .all(|(k, f)| asked(k) && f.get(b"complete").is_some())
                {
                    Ok(0)
                } else {
                    Err(ErrorKind::InvalidResponse)
                }
            }
            _ => Err(ErrorKind::InvalidResponse),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape_path_follows_bep48() {
        assert_eq!(paths("/announce", None).1, "/scrape");
        assert_eq!(paths("/x/announce.php", None).1, "/x/scrape.php");
        assert_eq!(paths("/a", None).1, "/scrape");
        assert_eq!(
            paths("/announce?k=1", Some("/s")),
            ("/announce".into(), "/s".into())
        );
    }

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
        assert_eq!(chunk_size(b"1a\r\n").unwrap(), 26);
        assert_eq!(chunk_size(b"FF;a=b;c\r\n").unwrap(), 255);
        assert_eq!(chunk_size(b"0 \r\n").unwrap(), 0);
        for bad in [
            &b"\r\n"[..],
            b"zz\r\n",
            b"+5\r\n",
            b"-1\r\n",
            b" 5\r\n",
            b"0x5\r\n",
            b";ext\r\n",
            b"10000000000000000\r\n",
        ] {
            let e = chunk_size(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bad:?}");
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
    fn only_a_close_before_any_answer_byte_is_retried() {
        let err = |kind| Ok(Err(io::Error::from(kind)));
        assert!(closed_before_answer(
            &err(io::ErrorKind::UnexpectedEof),
            b""
        ));
        assert!(closed_before_answer(
            &err(io::ErrorKind::ConnectionReset),
            b""
        ));
        assert!(closed_before_answer(&err(io::ErrorKind::BrokenPipe), b""));
        assert!(!closed_before_answer(
            &err(io::ErrorKind::UnexpectedEof),
            b"HTTP/1.1"
        ));
        assert!(!closed_before_answer(&err(io::ErrorKind::InvalidData), b""));
        assert!(!closed_before_answer(&err(io::ErrorKind::TimedOut), b""));
        assert_eq!(failure_kind(&invalid("x")), ErrorKind::InvalidResponse);
        assert_eq!(failure_kind(&closed("x")), ErrorKind::Connection);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(failure_kind(&reset), ErrorKind::Connection);
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

    #[test]
    fn checks_announce_and_scrape_answers() {
        let ok = HttpResponse {
            status: 200,
            body: 0..0,
            close: false,
            wire_len: 0,
        };
        let ann = Expect::Announce { numwant: 1 };
        assert_eq!(check(&ok, b"d8:intervali60e5:peers6:abcdefe", &ann), Ok(1));
        assert_eq!(check(&ok, b"d8:intervali60e5:peers0:e\r\n", &ann), Ok(0));
        assert_eq!(
            check(&ok, b"d8:intervali60e5:peers12:abcdefabcdefe", &ann),
            Err(ErrorKind::InvalidResponse)
        );
        assert_eq!(
            check(&ok, b"d8:intervali60e5:peers5:abcdee", &ann),
            Err(ErrorKind::InvalidResponse)
        );
        assert_eq!(
            check(&ok, b"d14:failure reason3:nahe", &ann),
            Err(ErrorKind::ErrorResponse)
        );
        let h = InfoHash([7; 20]);
        let scr = Expect::Scrape { hashes: vec![h] };
        let mut body = b"d5:filesd20:".to_vec();
        body.extend_from_slice(&h.0);
        body.extend_from_slice(b"d8:completei1eeee");
        assert_eq!(check(&ok, &body, &scr), Ok(0));
        let other = Expect::Scrape {
            hashes: vec![InfoHash([8; 20])],
        };
        assert_eq!(check(&ok, &body, &other), Err(ErrorKind::InvalidResponse));
    }
}
