//! A WebTorrent-only tracker for driving the WebSocket front end with real clients
//! before (or without) the HTTP listener: `cargo run --example ws_only -- 127.0.0.1:8000`.
//!
//! It serves `ws://ADDR` with the embedded default configuration (or `--config FILE` as
//! the second argument), prints `listening on ADDR` once bound, and runs until killed.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use shoal_server::config::Config;
use shoal_server::policy::Policy;
use shoal_server::ws::{standalone, WsContext};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: std::net::SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:8000".into())
        .parse()
        .context("usage: ws_only [ADDR] [CONFIG]")?;
    let config = match args.next() {
        Some(path) => Config::load(path.as_ref())?,
        None => Config::default(),
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&config.log_level)?)
        .init();
    let ctx = Arc::new(WsContext::new(&config, Arc::new(Policy::default())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_count())
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("listening on {}", listener.local_addr()?);
        standalone::serve(
            listener,
            ctx,
            Duration::from_secs(config.store.clean_interval),
        )
        .await;
        Ok(())
    })
}
