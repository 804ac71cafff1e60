//! The door from HTTP to WebTorrent: [`serve_upgrade`] takes the upgrade request the HTTP
//! connection loop read, answers `101 Switching Protocols` (or refuses) and runs
//! the WebTorrent connection until it closes.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::connection;
use super::context::WsContext;
use super::socket::{size_send_buffer, OverTcp};
use super::upgrade_request::UpgradeRequest;

/// Answers a WebSocket upgrade request and runs the WebTorrent connection on `stream`
/// until it closes. Never panics on what the client sends; errors end the connection.
pub async fn serve_upgrade<S>(mut stream: S, upgrade: UpgradeRequest, ctx: Arc<WsContext>)
where
    S: AsyncRead + AsyncWrite + OverTcp + Unpin + Send + 'static,
{
    if upgrade.sec_websocket_key.trim().is_empty() {
        let _ = stream
            .write_all(&refusal(400, "missing Sec-WebSocket-Key"))
            .await;
        return;
    }
    let Some(admission) = ctx.admit() else {
        metrics::counter!("shoal_ws_refused_total", "reason" => "max_connections").increment(1);
        let _ = stream
            .write_all(&refusal(503, "too many connections"))
            .await;
        return;
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
        upgrade.sec_websocket_key.trim().as_bytes(),
    );
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    // From here on the socket carries WebSocket messages: its send buffer bounded (see
    // `socket`).
    if let Some(tcp) = stream.tcp() {
        size_send_buffer(tcp, ctx.settings.limits.send_buffer);
    }
    if stream.write_all(head.as_bytes()).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    connection::run(stream, upgrade, &ctx, admission.id).await;
    drop(admission);
}

fn refusal(status: u16, text: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}
