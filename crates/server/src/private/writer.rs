//! The accounting writer: a thread that flushes the ledger into the database every
//! `private.flush_interval` seconds, forgets silent clients' records, and at shutdown
//! writes once more and saves the ledger file.
//!
//! When the database is unreachable a flush fails after a bounded wait, its sums go back
//! into the ledger, and the next interval tries again with everything gathered since: no
//! announce waits, nothing is dropped (up to the ledger's bound, see
//! `LedgerConfig::max_pending`), and one transaction catches up once the database is back.
//! Failures are logged once per outage (and counted in `shoal_private_flushes_total`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use shoal_swarm::clock;

use super::accounts::Accounts;

/// The running writer.
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    accounts: Arc<Accounts>,
}

impl Writer {
    /// Starts flushing `accounts` every `every`.
    pub fn start(accounts: Arc<Accounts>, every: Duration) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (accounts, stop) = (accounts.clone(), stop.clone());
            std::thread::Builder::new()
                .name("accounting".into())
                .spawn(move || run(&accounts, &stop, every))
                .context("spawning the accounting writer")?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
            accounts,
        })
    }

    /// Stops the thread, then writes what is pending and saves the ledger file. Call after
    /// the front ends stopped, so that nothing is recorded after it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.accounts.close();
    }
}

fn run(accounts: &Accounts, stop: &AtomicBool, every: Duration) {
    let mut next = Instant::now() + every;
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        // Woken at once by `stop`.
        std::thread::park_timeout(Duration::from_millis(100).min(every));
        if Instant::now() < next {
            continue;
        }
        match accounts.flush() {
            Ok(f) => {
                if failing {
                    tracing::warn!("accounting database is back: {} sums written", f.accounts);
                    failing = false;
                }
                tracing::debug!("accounting flush: {f:?}");
            }
            Err(e) => {
                if !failing {
                    tracing::error!(
                        "accounting write failed, retrying every {every:?} (sums kept in \
                         memory): {e}"
                    );
                    failing = true;
                }
            }
        }
        accounts.ledger.expire(clock::now());
        next = Instant::now() + every;
    }
}
