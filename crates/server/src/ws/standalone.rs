//! A minimal WebSocket-only listener: accepts TCP, reads the request head with
//! `httparse`, and hands `Upgrade: websocket` requests to [`super::serve_upgrade`].
//!
//! In the tracker, WebSocket arrives through the HTTP front end's connection loop; this
//! listener exists so that the WebTorrent front end can be tested (and driven by real
//! clients, see the `ws_only` example) on its own. It answers anything that is not a
//! WebSocket upgrade with `400`, and bounds the head's size and the time to read it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{serve_upgrade, UpgradeRequest, WsContext};

/// Largest request head read.
const MAX_HEAD: usize = 8 << 10;
/// Time a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections on `listener` forever, each in its own task, and runs the
/// WebTorrent store's cleaner every `clean_every`.
pub async fn serve(listener: TcpListener, ctx: Arc<WsContext>, clean_every: Duration) {
    let cleaner = ctx.clone();
    tokio::spawn(async move {
        let mut t = tokio::time::interval(clean_every);
        loop {
            t.tick().await;
            cleaner.clean(shoal_swarm::clock::now());
        }
    });
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            if let Ok(Some((stream, upgrade))) =
                tokio::time::timeout(HEAD_TIMEOUT, read_upgrade(stream, remote)).await
            {
                serve_upgrade(stream, upgrade, ctx).await;
            }
        });
    }
}

/// Reads a request head; returns the upgrade request, or answers `400` and `None`.
async fn read_upgrade(
    mut stream: TcpStream,
    remote: SocketAddr,
) -> Option<(TcpStream, UpgradeRequest)> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let header = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                };
                let upgrade =
                    header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
                let key = header("sec-websocket-key").map(str::to_owned);
                let path = req.path.unwrap_or("/").to_owned();
                match (upgrade, key) {
                    (true, Some(key)) => {
                        let leftover = buf[len..].to_vec();
                        return Some((
                            stream,
                            UpgradeRequest {
                                path,
                                sec_websocket_key: key,
                                remote,
                                leftover,
                            },
                        ));
                    }
                    _ => {
                        bad_request(&mut stream, "this listener serves WebSocket only").await;
                        return None;
                    }
                }
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                bad_request(&mut stream, "request head too large").await;
                return None;
            }
            Err(e) => {
                bad_request(&mut stream, &format!("bad request: {e}")).await;
                return None;
            }
        }
    }
}

async fn bad_request(stream: &mut TcpStream, text: &str) {
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}
