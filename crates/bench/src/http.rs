//! The HTTP(S) load generator: announces and scrapes over many connections.
//!
//! Each connection is a tokio task that sends one request and waits for its answer
//! (HTTP/1.1 without pipelining, like BitTorrent clients). With keep-alive the connection
//! is reused; without, every request opens a new one (and its TCP and TLS handshake is
//! counted under `connect`, and in the request's latency, as a client would feel it).
//! Connections are spread over loopback source addresses (see [`crate::net`]).
//!
//! The request is written by hand, binary `info_hash` and `peer_id` percent-encoded, and
//! the response is read with `httparse` and checked with a strict bencode reader: status
//! 200, no `failure reason`, an `interval`, compact peers a whole number of 6-byte entries
//! and no more than `numwant`; a scrape must list only the hashes asked for.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::bencode::{self, Value};
use crate::net::{self, Endpoint, Stream};
use crate::run::{supervise, Control, RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};
use crate::workload::{RequestKind, Workload, WorkloadArgs};
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
        if stream.is_none() {
            let t = Instant::now();
            match tokio::time::timeout(
                timeout,
                net::connect(&sh.ep, sh.tls.as_ref(), args.source_ips, k as u32),
            )
            .await
            {
                Ok(Ok(s)) => {
                    stats.record(Op::Connect, t.elapsed().as_nanos() as u64);
                    stream = Some(s);
                }
                Ok(Err(_)) => {
                    stats.error(ErrorKind::Connection);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Err(_) => {
                    stats.error(ErrorKind::Timeout);
                    continue;
                }
            }
        }
        let (op, expect) = match workload.next_kind() {
            RequestKind::Scrape => {
                workload.scrape(&mut hashes);
                write_scrape(&mut req, &sh, &hashes);
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
                write_announce(&mut req, &sh, &a);
                (Op::Announce, Expect::Announce { numwant: a.numwant })
            }
        };
        stats.sent[op as usize] += 1;
        let s = stream.as_mut().expect("connected above");
        let exchange = async {
            s.write_all(req.as_bytes()).await?;
            read_response(s, &mut buf).await
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => {
                stats.error(ErrorKind::Timeout);
                stream = None;
            }
            Ok(Err(_)) => {
                stats.error(ErrorKind::Connection);
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

/// A response read off the wire; the body is `buf[body]`.
pub struct HttpResponse {
    pub status: u16,
    pub body: std::ops::Range<usize>,
    pub close: bool,
    pub wire_len: usize,
}

const MAX_RESPONSE: usize = 1 << 20;

/// Reads one HTTP/1.1 response (Content-Length, or until close).
pub async fn read_response<S: tokio::io::AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    buf.clear();
    let mut chunk = [0u8; 8192];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf).map_err(|_| bad("bad HTTP response head"))? {
            httparse::Status::Complete(head_len) => {
                let status = resp.code.unwrap_or(0);
                let mut length = None;
                let mut close = resp.version == Some(0);
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok());
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                        close = v.contains("close");
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        return Err(bad("chunked responses are not supported"));
                    }
                }
                match length {
                    Some(len) => {
                        if len > MAX_RESPONSE {
                            return Err(bad("response too large"));
                        }
                        while buf.len() < head_len + len {
                            let n = s.read(&mut chunk).await?;
                            if n == 0 {
                                return Err(bad("connection closed mid-body"));
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                        return Ok(HttpResponse {
                            status,
                            body: head_len..head_len + len,
                            close,
                            wire_len: head_len + len,
                        });
                    }
                    None => {
                        // No length: the body runs to the end of the connection.
                        loop {
                            let n = s.read(&mut chunk).await?;
                            if n == 0 {
                                break;
                            }
                            buf.extend_from_slice(&chunk[..n]);
                            if buf.len() > MAX_RESPONSE {
                                return Err(bad("response too large"));
                            }
                        }
                        return Ok(HttpResponse {
                            status,
                            body: head_len..buf.len(),
                            close: true,
                            wire_len: buf.len(),
                        });
                    }
                }
            }
            httparse::Status::Partial => {
                if buf.len() > 64 * 1024 {
                    return Err(bad("response head too large"));
                }
                let n = s.read(&mut chunk).await?;
                if n == 0 {
                    return Err(bad("connection closed before a response"));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Checks a response against its request; `Ok(peers received)`.
fn check(resp: &HttpResponse, body: &[u8], expect: &Expect) -> Result<usize, ErrorKind> {
    // aquatic_http ends its bodies with CRLF (inside Content-Length); clients accept that.
    let v = bencode::parse(body.trim_ascii_end());
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
