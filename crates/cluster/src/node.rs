//! The exchange thread: every interval it takes what changed here (the swarm store's
//! journal, the WebTorrent front end's outbox, in private mode the ledger's client
//! records), sends one script call per bucket that writes it and reads what the other
//! nodes changed, and puts their changes into the stores. Nothing here is on a request's
//! path: the front ends answer from the stores, which are at most an interval or two
//! behind the other nodes.
//!
//! The loop itself is `round.rs`: calls run concurrently, each bounded by the link's
//! timeout, beside the WebTorrent relay's list commands and the heartbeat, and no round
//! waits for a slow call. A failed call's writes wait for its retry ([`Exchange::retry`],
//! `pace.rs`). Redis unreachable at start: the node serves alone and keeps trying.
//!
//! The thread is started by [`ClusterNode::start`] and stopped by [`ClusterNode::stop`] (or
//! dropping it), after one last round that publishes the front ends' last changes.

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use shoal_tracker::private::Ledger;
use shoal_tracker::Core;
use tokio::sync::watch;

use crate::exchange::Exchange;
use crate::link::RedisLink;
use crate::round::Round;
pub use crate::view::ClusterView;
use crate::{ClusterSettings, WebTorrentFrontEnd};

/// The running exchange.
pub struct ClusterNode {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    pub view: Arc<ClusterView>,
}

impl ClusterNode {
    /// Starts exchanging the changes of `core`'s stores (the swarm store's journal must be
    /// on) and of the WebTorrent front end; in private mode, of `ledger`'s client records.
    pub fn start(
        settings: ClusterSettings,
        core: Arc<Core>,
        front: WebTorrentFrontEnd,
        view: Arc<ClusterView>,
        ledger: Option<Arc<Ledger>>,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the cluster runtime")?;
        let mut exchange = Exchange::new(settings.node.clone(), u64::from(settings.peer_ttl));
        if let Some(ledger) = &ledger {
            ledger.share_records();
            exchange.keep_clients_for(u64::from(ledger.config().peer_ttl));
        }
        tracing::info!(
            "cluster: node {} exchanging with {} every {} ms",
            settings.node,
            settings.seeds.join(","),
            settings.every.as_millis()
        );
        let round = Round::new(settings, exchange, core, front, ledger, view.clone());
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("cluster".into())
            .spawn(move || runtime.block_on(round.run(stopped)))
            .context("spawning the cluster exchange")?;
        Ok(Self {
            stop,
            thread: Some(thread),
            view,
        })
    }

    /// Stops the exchange thread (after one last round).
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The key of the cluster (hex in Redis, set by the first node to start); `own` if
    /// Redis cannot be reached now.
    pub fn connection_id_key(settings: &ClusterSettings, own: [u8; 16]) -> [u8; 16] {
        let run = || -> anyhow::Result<[u8; 16]> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut link = RedisLink::connect(&settings.seeds).await?;
                let key = format!("{}:connection-id-key", settings.key_prefix);
                let _: Option<String> = link
                    .query(redis::cmd("SET").arg(&key).arg(hex::encode(own)).arg("NX"))
                    .await?;
                let hex_key: String = link.query(redis::cmd("GET").arg(&key)).await?;
                let mut k = [0u8; 16];
                hex::decode_to_slice(hex_key.trim(), &mut k).context("a bad shared key")?;
                Ok(k)
            })
        };
        match run() {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(
                    "cluster: cannot read the shared connection-id key ({e:#}); this node's \
                     UDP connection ids are its own until restarted with Redis reachable"
                );
                own
            }
        }
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.finish();
    }
}
