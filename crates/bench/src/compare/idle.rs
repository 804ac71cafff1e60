//! Memory per idle WebSocket connection (`compare --idle-connections N`): each contender is
//! started fresh, N connections do the upgrade handshake and then send nothing, and the
//! tracker's RSS before and after gives KiB per connection, over ws and/or wss.
//!
//! The connections come from this process (pinned to the bench CPUs), 64 opening at a
//! time, spread over loopback source addresses so that ports do not run out. The
//! tracker's open file descriptors before and after show that it held them all; the count
//! of connections still open at the end shows that it did not close any.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cpu;
use crate::net::{self, Endpoint, Stream};

use super::args::CompareArgs;
use super::contender::{self, Cert, Setting};
use super::results::{Comparison, Contender, IdleConnections, IdleRun, Readings, TrackerReadings};
use super::tracker::{wait_port_free, Tracker};

/// Connections opening at once.
const OPENING_AT_ONCE: usize = 64;

/// Measures every contender over every mode of `--idle-modes`, into `cmp.idle`, with each
/// (contender, mode) as a contender of `cmp` for the report's command table.
pub fn measure(
    args: &CompareArgs,
    tracker_cpus: &str,
    out: &Path,
    target: &str,
    n: usize,
    cmp: &mut Comparison,
) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for mode in &args.idle.idle_modes {
        let tls = match mode.as_str() {
            "ws" => false,
            "wss" => true,
            m => bail!("unknown idle mode {m:?} (ws, wss)"),
        };
        let cert = tls.then(|| Cert::make(out)).transpose()?;
        let port = args.contenders.port;
        let url = target.replacen("wss://", "ws://", 1);
        let url = if tls {
            url.replacen("ws://", "wss://", 1)
        } else {
            url
        };
        let ep = Endpoint::parse(&url)?;
        let setting = Setting {
            protocol: "ws",
            port,
            tls: cert.as_ref(),
            keep_alive: true,
            dir: out,
            bins: &args.contenders.bin_dir,
            shoal_ws: &args.contenders.shoal_ws,
            workers: 1,
        };
        for spec in &args.contenders.trackers {
            let (name, words) = contender::resolve(spec, &setting)?;
            cmp.contenders.push(Contender {
                name: format!("{name} ({mode})"),
                command: words.join(" "),
                runs: Vec::new(),
                generator_runs: Vec::new(),
                tiers: Vec::new(),
            });
            wait_port_free(false, port)?;
            let log = out.join(format!("{name}-idle-{mode}.log"));
            let mut tracker = Tracker::start(tracker_cpus, &words, &log)?;
            tracker
                .wait_ready(false, port)
                .with_context(|| format!("{name} ({})", words.join(" ")))?;
            eprintln!("idle {mode}: {name}, {n} connections");
            let run = rt
                .block_on(one(&ep, tls, n, args.idle.idle_sources, tracker.pid()))
                .with_context(|| format!("idle connections to {name} over {mode}"))?;
            if let Some(status) = tracker.exited() {
                bail!("{name} exited during the idle measurement ({status})");
            }
            tracker.stop();
            cmp.idle.push(IdleRun {
                contender: name,
                mode: mode.clone(),
                ..run
            });
        }
    }
    Ok(())
}

/// One tracker: RSS before, open `n`, RSS after, count those still open, close, RSS again.
async fn one(ep: &Endpoint, tls: bool, n: usize, sources: u32, pid: u32) -> Result<IdleRun> {
    let tls = tls
        .then(|| net::tls_config(None, &[b"http/1.1"]))
        .transpose()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut rss_kib = Readings {
        before: Some(cpu::rss_kib(pid).context("reading the tracker's RSS")?),
        ..Default::default()
    };
    let mut fds = Readings {
        before: cpu::fd_count(pid),
        ..Default::default()
    };
    let t0 = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(OPENING_AT_ONCE));
    let mut opening = tokio::task::JoinSet::new();
    for k in 0..n {
        let (ep, tls, gate) = (ep.clone(), tls.clone(), gate.clone());
        opening.spawn(async move {
            let _permit = gate.acquire_owned().await;
            tokio::time::timeout(
                Duration::from_secs(15),
                upgrade(&ep, tls.as_ref(), sources, k as u32),
            )
            .await
            .unwrap_or_else(|_| Err("timed out".into()))
        });
    }
    let mut open: Vec<Box<dyn Stream>> = Vec::with_capacity(n);
    let mut failed: std::collections::BTreeMap<String, usize> = Default::default();
    while let Some(done) = opening.join_next().await {
        match done? {
            Ok(s) => open.push(s),
            Err(e) => *failed.entry(e).or_default() += 1,
        }
    }
    let open_seconds = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    rss_kib.after = cpu::rss_kib(pid);
    fds.after = cpu::fd_count(pid);
    let mut buf = [0u8; 256];
    let mut alive_at_end = 0;
    for s in open.iter_mut() {
        alive_at_end += match s.read(&mut buf).now_or_never() {
            None => 1,
            Some(Ok(got)) => usize::from(got > 0),
            Some(Err(_)) => 0,
        };
    }
    let opened = open.len();
    drop(open);
    tokio::time::sleep(Duration::from_secs(3)).await;
    rss_kib.closed = cpu::rss_kib(pid);
    fds.closed = cpu::fd_count(pid);
    Ok(IdleRun {
        contender: String::new(),
        mode: String::new(),
        connections: IdleConnections {
            asked: n,
            opened,
            failed,
            alive_at_end,
            open_seconds,
        },
        tracker: TrackerReadings { rss_kib, fds },
    })
}

/// Opens connection `k` and does the WebSocket upgrade; the stream is then left idle.
async fn upgrade(
    ep: &Endpoint,
    tls: Option<&Arc<rustls::ClientConfig>>,
    sources: u32,
    k: u32,
) -> Result<Box<dyn Stream>, String> {
    let mut s = net::connect(ep, tls, sources, k)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        ep.path,
        ep.host,
        ep.addr.port()
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing after the head may be read away (the tracker sends nothing).
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.map_err(|e| e.to_string())? == 0 {
            return Err("closed during the upgrade".into());
        }
        head.push(byte[0]);
        if head.len() > 8192 {
            return Err("upgrade response head too long".into());
        }
    }
    let status = String::from_utf8_lossy(&head);
    let line = status.lines().next().unwrap_or_default();
    if line.split_whitespace().nth(1) != Some("101") {
        return Err(line.to_string());
    }
    Ok(s)
}
