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
//! the response (sized by `Content-Length`, chunked, or up to the close) is read by
//! [`read_response`] (its own module: a parser of network bytes with its own limits) and
//! checked here with a strict bencode reader: status 200, no `failure reason`, an
//! `interval`, compact peers a whole number of 6-byte entries and no more than `numwant`;
//! a scrape must list only the hashes asked for. The runtime, the connection tasks and
//! their clock and counts are shared with the WebTorrent generator ([`crate::tcp_load`]).

mod response;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::net::{self, Dialer, Stream};
use crate::passkeys::{of_peer, Passkeys};
use crate::run::{RunArgs, RunResult};
use crate::stats::{ErrorKind, Op, Stats};
use crate::tcp_load::{ConnectionRun, TcpArgs, TcpLoad};
use crate::workload::{RequestKind, Workload, WorkloadArgs};
pub use response::{read_response, HttpResponse};
use shoal_proto::bencode::{self, Value};
use shoal_proto::path::Action;
use shoal_proto::{AnnounceEvent, InfoHash};

/// Flags of `shoal-bench http`.
#[derive(Args, Clone, Debug)]
pub struct HttpArgs {
    #[command(flatten)]
    pub tcp: TcpArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Close the connection after every request (`Connection: close`).
    #[arg(long)]
    pub no_keep_alive: bool,
    /// Scrape path (default: the announce path with `announce` replaced by `scrape`).
    #[arg(long)]
    pub scrape_path: Option<String>,
    /// The `User-Agent` header of every request: private trackers refuse requests
    /// without a client's (UNIT3D-Announce refuses a missing one, and any that looks like
    /// a browser or a bot). 1 to 128 printable ASCII characters.
    #[arg(long, value_name = "STRING", default_value = DEFAULT_USER_AGENT,
          value_parser = user_agent_flag)]
    pub user_agent: String,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

/// Runs `shoal-bench http`.
pub fn run(args: &HttpArgs) -> Result<RunResult> {
    let load = TcpLoad::new("http", &args.tcp, &args.run)?;
    let dialer = args.tcp.dialer(&[b"http/1.1"])?;
    let (announce_path, scrape_path) = paths(&dialer.ep.path, args.scrape_path.as_deref());
    let shared = Shared {
        dialer,
        announce_path,
        scrape_path,
        passkeys: Passkeys::from_args(&args.workload)?.map(|k| PasskeyPaths {
            announce: k.paths(Action::Announce),
            scrape: k.paths(Action::Scrape),
            separator: k.path().separator(),
        }),
        args: args.clone(),
    };
    load.run(shared, connection)
}

/// The `User-Agent` sent when `--user-agent` is not given.
pub const DEFAULT_USER_AGENT: &str = "shoal-bench";

/// Checks `--user-agent`: what goes into the header line as is must be 1 to 128
/// printable ASCII characters (spaces inside allowed), so that no request is malformed.
fn user_agent_flag(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 128 {
        return Err(format!("{} characters: a user agent has 1 to 128", s.len()));
    }
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(format!(
            "{c:?} is not allowed: a user agent is printable ASCII (spaces inside allowed)"
        ));
    }
    if s.starts_with(' ') || s.ends_with(' ') {
        return Err("a user agent neither starts nor ends with a space".into());
    }
    Ok(s.to_string())
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
    dialer: Dialer,
    announce_path: String,
    scrape_path: String,
    /// `--passkeys`: the paths carry each peer's key (`/<passkey>/announce` and
    /// `/<passkey>/scrape`, or where `--passkey-path` puts it) instead.
    passkeys: Option<PasskeyPaths>,
    args: HttpArgs,
}

/// Every passkey's paths, written once: announce and scrape, and what joins the request's
/// parameters to them (`&` after a query of their own: `/announce.php?passkey=<key>`).
struct PasskeyPaths {
    announce: Vec<String>,
    scrape: Vec<String>,
    separator: char,
}

/// What the answer to a request must look like.
enum Expect {
    Announce { numwant: u32 },
    Scrape { hashes: Vec<InfoHash> },
}

/// One connection's life: request, answer, check, repeat until the end of the run.
async fn connection(sh: Arc<Shared>, mut c: ConnectionRun) -> Stats {
    let args = &sh.args;
    let (k, n) = (c.k, c.n);
    let keys = sh.passkeys.as_ref().map_or(1, |p| p.announce.len());
    let mut workload = Workload::new(&args.workload, k, n).with_keys(keys);
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
    let mut due = c.ctl.start
        + interval
            .map(|i| i.mul_f64(k as f64 / n as f64))
            .unwrap_or_default();
    let timeout = args.run.timeout;
    loop {
        if let Some(i) = interval {
            tokio::time::sleep_until(due.into()).await;
            due += i;
        }
        let Some(now) = c.next_round() else { break };
        let origin = if interval.is_some() {
            due - interval.unwrap_or_default()
        } else {
            now
        };
        let mut reused = stream.is_some();
        if !ensure_connected(&sh, &mut c, &mut stream).await {
            continue;
        }
        let (op, expect) = next_request(&mut workload, &sh, k as u32, &mut req, &mut hashes);
        c.stats.sent[op as usize] += 1;
        let result = loop {
            let s = stream.as_mut().expect("connected above");
            let result = tokio::time::timeout(timeout, exchange(s, req.as_bytes(), &mut buf)).await;
            if !(reused && closed_before_answer(&result, &buf)) {
                break Some(result);
            }
            // The server had closed the idle connection (opentracker does after every
            // answer without saying `Connection: close`): like HTTP clients, send the
            // request again, once, on a new connection. Its latency runs from `origin`.
            c.stats.reconnects += 1;
            stream = None;
            reused = false;
            if !ensure_connected(&sh, &mut c, &mut stream).await {
                break None;
            }
        };
        // `None`: the new connection failed, and that failure was counted.
        let Some(result) = result else { continue };
        match result {
            Err(_) => {
                c.stats.error(ErrorKind::Timeout);
                stream = None;
            }
            Ok(Err(e)) => {
                c.stats.error(failure_kind(&e));
                stream = None;
            }
            Ok(Ok(resp)) => {
                c.stats.bytes_out += req.len() as u64;
                c.stats.bytes_in += resp.wire_len as u64;
                match check(&resp, &buf[resp.body.clone()], &expect) {
                    Ok(peers) => {
                        c.stats.peers_received += peers as u64;
                        c.answered(op, origin);
                    }
                    Err(kind) => c.stats.error(kind),
                }
                if resp.close || args.no_keep_alive {
                    stream = None;
                }
            }
        }
    }
    c.finish()
}

/// Connects `stream` unless it is connected; false (the failure counted) if that failed.
async fn ensure_connected(
    sh: &Shared,
    c: &mut ConnectionRun,
    stream: &mut Option<Box<dyn Stream>>,
) -> bool {
    if stream.is_none() {
        let connect = sh.dialer.connect(c.k);
        *stream = c.open(sh.args.run.timeout, connect).await;
    }
    stream.is_some()
}

/// Draws the next request from the workload and writes it into `req`; a scrape made on
/// connection `k` carries the passkey of peer `k`.
fn next_request(
    workload: &mut Workload,
    sh: &Shared,
    k: u32,
    req: &mut String,
    hashes: &mut Vec<InfoHash>,
) -> (Op, Expect) {
    match workload.next_kind() {
        RequestKind::Scrape => {
            workload.scrape(hashes);
            write_scrape(req, sh, k, hashes);
            (
                Op::Scrape,
                Expect::Scrape {
                    hashes: hashes.clone(),
                },
            )
        }
        _ => {
            let p = workload.next_peer();
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
    let separator = push_path(req, sh, Action::Announce, a.peer);
    req.push(separator);
    req.push_str("info_hash=");
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

fn write_scrape(req: &mut String, sh: &Shared, peer: u32, hashes: &[InfoHash]) {
    req.clear();
    req.push_str("GET ");
    let separator = push_path(req, sh, Action::Scrape, peer);
    for (i, h) in hashes.iter().enumerate() {
        req.push(if i == 0 { separator } else { '&' });
        req.push_str("info_hash=");
        net::percent_encode(&h.0, req);
    }
    finish_request(req, sh);
}

/// The path of a request of `action`: the target's, or with `--passkeys` the one that
/// carries the passkey of simulated peer `peer`. Returns what joins the request's
/// parameters to it (`?`, or `&` after the passkey path's own query).
fn push_path(req: &mut String, sh: &Shared, action: Action, peer: u32) -> char {
    match (&sh.passkeys, action) {
        (Some(keys), Action::Announce) => req.push_str(of_peer(&keys.announce, peer)),
        (Some(keys), Action::Scrape) => req.push_str(of_peer(&keys.scrape, peer)),
        (None, Action::Announce) => req.push_str(&sh.announce_path),
        (None, Action::Scrape) => req.push_str(&sh.scrape_path),
    }
    sh.passkeys.as_ref().map_or('?', |k| k.separator)
}

fn finish_request(req: &mut String, sh: &Shared) {
    req.push_str(" HTTP/1.1\r\nHost: ");
    req.push_str(&sh.dialer.ep.host);
    req.push_str("\r\nUser-Agent: ");
    req.push_str(&sh.args.user_agent);
    req.push_str("\r\nConnection: ");
    req.push_str(if sh.args.no_keep_alive {
        "close"
    } else {
        "keep-alive"
    });
    req.push_str("\r\n\r\n");
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
    use super::response::{closed, invalid};
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

    #[test]
    fn a_user_agent_is_one_header_line_of_printable_ascii() {
        for ok in [
            "shoal-bench",
            "qBittorrent/4.6.5",
            "Deluge 2.1.1",
            "Transmission/4.0",
        ] {
            assert_eq!(user_agent_flag(ok).as_deref(), Ok(ok));
        }
        for (bad, says) in [
            ("", "0 characters"),
            ("a\r\nX-Evil: 1", "'\\r' is not allowed"),
            ("tab\there", "'\\t' is not allowed"),
            ("µTorrent", "'µ' is not allowed"),
            (" lead", "neither starts nor ends"),
        ] {
            let e = user_agent_flag(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        assert!(user_agent_flag(&"a".repeat(128)).is_ok());
        assert!(user_agent_flag(&"a".repeat(129)).is_err());
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
