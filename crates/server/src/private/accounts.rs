//! The private tracker's side of the database: what is loaded at start, every change the
//! admin API makes, and the batched writes of the accounting (by the [`super::writer`]
//! thread, by `POST /api/private/flush`, and once more at shutdown).
//!
//! # Threads
//!
//! The database crate is async (sqlx); the tracker's callers are not (the admin API answers
//! on blocking threads, the writer is a thread of its own). So `Accounts` owns a small
//! tokio runtime (one worker, "accounts") that every database operation runs on, and
//! callers wait for the answer over a channel ([`Accounts::run`]). The announce path never
//! comes here: it reads [`Members`] and records into the [`Ledger`].
//!
//! # Order of an edit
//!
//! The database first, then the tables in force: an edit that the database refused
//! changes nothing, and one that succeeded survives a reload. Edits and reloads are
//! serialised (`editing`), so that a reload never loses an edit made while it read.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use shoal_accounts::{
    Accounting, ClientPrefix, Database, Loaded, PeerRow, Schema, Torrent, User, UserStats, Written,
};
use shoal_proto::InfoHash;
use shoal_site::{Opening, Site};
use shoal_swarm::clock;

use crate::config::Config;
use shoal_tracker::private::credit::Delta;
use shoal_tracker::private::ledger::file::{self as ledger_file, LedgerFile};
use shoal_tracker::private::ledger::{Ledger, LedgerConfig};
use shoal_tracker::private::members::{Member, Members, Registered, Roster};
use shoal_tracker::private::{PeerLog, PeerState};

/// The bound on one database operation: a write during an outage fails after this and is
/// retried at the next flush, rather than holding the writer.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);

/// What the announce path needs of a user row.
fn member(u: &User) -> Member {
    Member {
        id: u.id,
        enabled: u.enabled,
        can_download: u.can_download,
        download_factor: u.download_factor,
        upload_factor: u.upload_factor,
    }
}

/// What the announce path needs of a torrent row.
fn registered(t: &Torrent) -> Registered {
    Registered {
        id: t.id.unwrap_or_default(),
        swarm: InfoHash(t.info_hash),
        v2: t.info_hash_v2.map(InfoHash),
        download_factor: t.download_factor,
        upload_factor: t.upload_factor,
    }
}

/// The tables' share of what the database holds.
fn roster(loaded: &Loaded) -> Roster {
    Roster {
        users: loaded
            .users
            .iter()
            .map(|u| (u.passkey.as_str().into(), member(u)))
            .collect(),
        torrents: loaded.torrents.iter().map(registered).collect(),
        clients: loaded
            .clients
            .iter()
            .map(|c| c.0.as_bytes().into())
            .collect(),
    }
}

/// What one flush did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Accounts whose sums went into the batch.
    pub accounts: usize,
    /// What the database did with them.
    pub written: Written,
}

/// The database, the tables in force and the ledger, with everything that changes them.
pub struct Accounts {
    runtime: tokio::runtime::Runtime,
    /// shoal's own schema: the admin API's edits go here (none with a site's schema:
    /// the site's own control calls keep it current).
    db: Option<Database>,
    /// The site in force, with `[private] schema` naming a site (from the registry).
    site: Option<Arc<dyn Site>>,
    /// The schema in force, through the seam every site schema implements: the members are
    /// loaded and the accounting written through it.
    schema: Arc<dyn Schema>,
    /// Each client's latest state, when the schema keeps a row per client.
    peers: Option<Arc<PeerLog>>,
    pub members: Arc<Members>,
    pub ledger: Arc<Ledger>,
    editing: Mutex<()>,
    /// The batch whose last write failed, under its id: it may have been committed (a
    /// COMMIT whose answer was lost), so it is written again, alone and under the same id,
    /// before anything newer; the database applies an id at most once. Holding it also
    /// serialises flushes (the writer, the admin API and shutdown).
    unsure: Mutex<Option<(String, Vec<Delta>)>>,
    /// Sums taken from the ledger and not known to be written: the batch being written, or
    /// the unsure one. Kept apart from `unsure` so that a metrics scrape never waits for a
    /// write that holds that lock.
    held: AtomicUsize,
    /// The ledger file, when there is a state file to put it beside.
    ledger_file: Option<PathBuf>,
    /// A ledger file was read at start and must be deleted once what it restored is written.
    restored_file: AtomicBool,
}

impl Accounts {
    /// Connects to the configured database (creating an SQLite file and its schema on
    /// first start), loads users, torrents and client prefixes, and restores the ledger
    /// file if the last run left one.
    pub fn open(config: &Config) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("accounts")
            .enable_all()
            .build()
            .context("starting the accounts runtime")?;
        let url = config.private_database();
        let (db, site, schema, members) = match config.private.site() {
            Some(name) => {
                let keys = config.private.site_keys()?;
                let opening = Opening {
                    database_url: &url,
                    runtime: &runtime,
                    keys: &keys,
                };
                let site = (config.sites.open(name, &opening))
                    .with_context(|| format!("no site is registered as {name:?}"))??;
                let (schema, members) = (site.schema(), site.members());
                (None, Some(site), schema, members)
            }
            None => {
                let db = runtime
                    .block_on(Database::connect(&url))
                    .context("opening the private tracker's database")?
                    .with_operation_timeout(OPERATION_TIMEOUT);
                let schema: Arc<dyn Schema> = Arc::new(db.clone());
                let loaded = runtime
                    .block_on(schema.load())
                    .context("loading users, torrents and clients")?;
                let members = Arc::new(Members::new(
                    &roster(&loaded),
                    config.private.client_allow_list,
                ));
                (Some(db), None, schema, members)
            }
        };
        let ledger = Arc::new(Ledger::new(LedgerConfig {
            max_pending: config.private.max_pending_accounts,
            ..LedgerConfig::for_interval(config.announce.interval)
        }));
        if let Some(site) = &site {
            // The clients' last reports in the site's tables; the ledger file's records,
            // where there is one, replace them below (they are as new or newer).
            ledger.restore_peers(site.saved_peers(clock::now(), clock::unix_now()));
        }
        let ledger_file = config.state_file().map(ledger_file::path_for);
        let mut restored = false;
        let mut unsure = None;
        if let Some(path) = &ledger_file {
            match LedgerFile::load(path, clock::now(), clock::unix_now()) {
                Ok(Some(file)) => {
                    tracing::info!(
                        "ledger file {}: {} client records, {} unwritten sums restored",
                        path.display(),
                        file.peers.len(),
                        file.pending.len()
                    );
                    ledger.restore_peers(file.peers);
                    ledger.restore(file.pending);
                    unsure = file.unsure;
                    restored = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    "ignoring the ledger file {}: {e:#} (clients' next announces set new \
                     baselines)",
                    path.display()
                ),
            }
        }
        let held = unsure.as_ref().map_or(0, |(_, batch)| batch.len());
        let accounts = Self {
            runtime,
            db,
            site,
            peers: schema.keeps_peers().then(|| Arc::new(PeerLog::default())),
            schema,
            members,
            ledger,
            editing: Mutex::new(()),
            held: AtomicUsize::new(held),
            unsure: Mutex::new(unsure),
            ledger_file,
            restored_file: AtomicBool::new(restored),
        };
        accounts.publish_counts();
        Ok(accounts)
    }

    /// Runs a database operation on the accounts runtime and waits for it (from any thread
    /// that is not itself running async code).
    fn run<T: Send + 'static>(
        &self,
        operation: impl Future<Output = Result<T, shoal_accounts::Error>> + Send + 'static,
    ) -> Result<T, shoal_accounts::Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(operation.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(shoal_accounts::Error::Query(
                "the accounts runtime stopped".into(),
            ))
        })
    }

    fn publish_counts(&self) {
        let (users, torrents, clients) = self.members.counts();
        metrics::gauge!("shoal_private_users").set(users as f64);
        metrics::gauge!("shoal_private_torrents").set(torrents as f64);
        metrics::gauge!("shoal_private_clients").set(clients as f64);
    }

    /// The database URL, password masked (for logs and the status page).
    pub fn database_url(&self) -> String {
        match &self.db {
            Some(db) => db.url().to_string(),
            None => self.schema.name().to_string(),
        }
    }

    /// The site in force, with `[private] schema` naming one.
    pub fn site(&self) -> Option<&Arc<dyn Site>> {
        self.site.as_ref()
    }

    /// shoal's own database, for the admin API's edits; an error naming the schema in
    /// force when a site's schema keeps the members (the site's control calls edit them).
    fn own_db(&self) -> Result<Database, shoal_accounts::Error> {
        self.db.clone().ok_or_else(|| {
            shoal_accounts::Error::Invalid(format!(
                "the {} schema is edited through the site's own control calls",
                self.schema.name()
            ))
        })
    }

    /// Adds or updates a user: the database, then the tables in force.
    pub fn put_user(&self, user: User) -> Result<(), shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let db = self.own_db()?;
        let stored = user.clone();
        self.run(async move { db.put_user(&stored).await })?;
        self.members.put_user(&user.passkey, member(&user));
        self.publish_counts();
        Ok(())
    }

    /// A user's passkey and settings, as in force.
    pub fn user(&self, id: i64) -> Option<(String, Member)> {
        self.members.user_by_id(id)
    }

    /// Removes a user; whether there was one.
    pub fn delete_user(&self, id: i64) -> Result<bool, shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let db = self.own_db()?;
        let existed = self.run(async move { db.delete_user(id).await })?;
        let in_force = self.members.remove_user(id);
        self.publish_counts();
        Ok(existed || in_force)
    }

    /// The registered torrent announced as `info_hash`, as in force.
    pub fn torrent(&self, info_hash: &InfoHash) -> Option<Registered> {
        self.members.torrent(info_hash)
    }

    /// Registers a torrent or updates one; returns it as now in force.
    pub fn put_torrent(&self, torrent: Torrent) -> Result<Registered, shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let db = self.own_db()?;
        let stored = torrent.clone();
        let id = self.run(async move { db.put_torrent(&stored).await })?;
        let registered = registered(&Torrent {
            id: Some(id),
            ..torrent
        });
        self.members.put_torrent(registered);
        self.publish_counts();
        Ok(registered)
    }

    /// Removes the torrent with this v1 hash; whether there was one.
    pub fn delete_torrent(&self, info_hash: InfoHash) -> Result<bool, shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let db = self.own_db()?;
        let existed = self.run(async move { db.delete_torrent(&info_hash.0).await })?;
        let in_force = self.members.remove_torrent(&info_hash);
        self.publish_counts();
        Ok(existed || in_force)
    }

    /// Adds (`add`) or removes an allowed client prefix; whether anything changed in the
    /// database.
    pub fn edit_client(
        &self,
        prefix: ClientPrefix,
        add: bool,
    ) -> Result<bool, shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let db = self.own_db()?;
        let stored = prefix.clone();
        let changed = self.run(async move {
            if add {
                db.put_client(&stored).await.map(|()| true)
            } else {
                db.delete_client(&stored).await
            }
        })?;
        self.members.edit_client(prefix.0.as_bytes(), add);
        self.publish_counts();
        Ok(changed)
    }

    /// Loads everything from the database again and puts it in force at once.
    pub fn reload(&self) -> Result<(usize, usize, usize), shoal_accounts::Error> {
        let _guard = self.editing.lock();
        let schema = self.schema.clone();
        let loaded = self.run(async move { schema.load().await })?;
        self.members.replace(&roster(&loaded));
        self.publish_counts();
        Ok(self.members.counts())
    }

    /// A user's totals and per-torrent rows, from the database.
    pub fn user_stats(&self, id: i64) -> Result<Option<UserStats>, shoal_accounts::Error> {
        let db = self.own_db()?;
        self.run(async move { db.user_stats(id).await })
    }

    /// Writes every pending sum in one transaction, under a new batch id. If the write
    /// fails the batch is kept as it is, with its id, and the next flush writes it again
    /// before anything newer: so it counts exactly once, whether or not the failed attempt
    /// was committed after all.
    pub fn flush(&self) -> Result<Flushed, shoal_accounts::Error> {
        let mut unsure = self.unsure.lock();
        if let Some((id, batch)) = unsure.take() {
            match self.write(&id, &batch, &[]) {
                Ok(_) => self.held.store(0, Ordering::Relaxed),
                Err(e) => {
                    *unsure = Some((id, batch));
                    return Err(e);
                }
            }
        }
        if let Some(site) = &self.site {
            site.before_flush(clock::unix_now() as i64);
        }
        let batch = self.ledger.drain();
        self.held.store(batch.len(), Ordering::Relaxed);
        let peers = self
            .peers
            .as_ref()
            .map(|log| log.drain())
            .unwrap_or_default();
        let id = format!("{:016x}{:016x}", clock::unix_now(), fastrand::u64(..));
        let rows: Vec<PeerRow> = peers.iter().filter_map(|p| self.peer_row(p)).collect();
        match self.write(&id, &batch, &rows) {
            Ok(written) => {
                self.held.store(0, Ordering::Relaxed);
                if self.restored_file.swap(false, Ordering::Relaxed) {
                    if let Some(path) = &self.ledger_file {
                        let _ = std::fs::remove_file(path);
                    }
                }
                Ok(Flushed {
                    accounts: batch.len(),
                    written,
                })
            }
            Err(e) => {
                // The sums are written again alone, under their id; the clients' states go
                // back to the log (a newer state of a client wins) for the next batch.
                if let Some(log) = &self.peers {
                    log.restore(peers);
                }
                *unsure = Some((id, batch));
                Err(e)
            }
        }
    }

    /// One batch under its id, with the metrics of the attempt.
    fn write(
        &self,
        id: &str,
        batch: &[Delta],
        peers: &[PeerRow],
    ) -> Result<Written, shoal_accounts::Error> {
        let sums: Vec<Delta> = batch.iter().filter(|d| self.known(d)).copied().collect();
        let (schema, id, peers) = (self.schema.clone(), id.to_string(), peers.to_vec());
        let result = self.run(async move {
            let batch = Accounting {
                id: Some(&id),
                sums: &sums,
                peers: &peers,
            };
            schema.write(batch).await
        });
        let label = if result.is_ok() { "ok" } else { "error" };
        metrics::counter!("shoal_private_flushes_total", "result" => label).increment(1);
        if let Ok(written) = &result {
            metrics::counter!("shoal_private_deltas_written_total")
                .increment(written.applied as u64);
            metrics::gauge!("shoal_private_last_write_timestamp_seconds")
                .set(clock::unix_now() as f64);
        }
        result
    }

    /// Sets `shoal_private_pending_accounts` to every sum not yet written, wherever it
    /// waits: in the ledger's map, in swarm slots (a walk over the store, so called by the
    /// metrics scrape, not per announce), and in the batch being written or held after a
    /// failed write.
    pub fn publish_pending(&self) {
        let held = self.held.load(Ordering::Relaxed);
        metrics::gauge!("shoal_private_pending_accounts")
            .set((self.ledger.pending_accounts() + held) as f64);
    }

    /// Whether a ledger sum's torrent is registered (a ledger file from another database
    /// may hold ids this process never knew: their sums are dropped, and counted).
    fn known(&self, d: &Delta) -> bool {
        let known = self.members.torrent_hash(d.torrent_id as i64).is_some();
        if !known {
            metrics::counter!("shoal_private_sums_dropped_total").increment(1);
            tracing::warn!(
                "dropping accounting for unknown torrent id {} (user {})",
                d.torrent_id,
                d.user_id
            );
        }
        known
    }

    /// The database row of a client's latest state (`None` for an unknown torrent id).
    fn peer_row(&self, p: &PeerState) -> Option<PeerRow> {
        self.members.torrent_hash(p.torrent_id as i64)?;
        Some(PeerRow {
            user_id: p.user_id as i64,
            torrent_id: p.torrent_id,
            peer_id: p.peer_id.0,
            protocol: p.protocol.label(),
            addr: p.addr,
            agent: p.agent.as_deref().map(String::from),
            uploaded: p.uploaded,
            downloaded: p.downloaded,
            left: p.left,
            seeder: p.seeder,
            active: p.active,
            announced_at: clock::unix_of(p.announced),
            announces: p.announces,
        })
    }

    /// Each client's latest state, when the schema in force keeps a row per client (the
    /// core notes every private announce into it).
    pub fn peer_log(&self) -> Option<&Arc<PeerLog>> {
        self.peers.as_ref()
    }

    /// At shutdown, after the front ends stopped: one last flush, then the ledger file with
    /// every client's record and whatever the flush could not write, then the site's own
    /// shutdown.
    pub fn close(&self) {
        self.save();
        if let Some(site) = &self.site {
            site.shutdown();
        }
    }

    fn save(&self) {
        if let Err(e) = self.flush() {
            tracing::error!("final accounting write failed: {e}; the sums go to the ledger file");
        }
        let unsure = self.unsure.lock().take();
        let Some(path) = &self.ledger_file else {
            let lost = self.ledger.pending_accounts() + unsure.map_or(0, |(_, b)| b.len());
            if lost > 0 {
                tracing::error!("no state file: {lost} unwritten accounting sums are lost");
            }
            return;
        };
        let file = LedgerFile {
            peers: self.ledger.peer_records(),
            pending: self.ledger.drain(),
            unsure,
        };
        match file.save(path, clock::now(), clock::unix_now()) {
            Ok(()) => tracing::info!(
                "ledger file {}: {} client records, {} unwritten sums{}",
                path.display(),
                file.peers.len(),
                file.pending.len(),
                if file.unsure.is_some() {
                    ", one unsure batch"
                } else {
                    ""
                }
            ),
            Err(e) => tracing::error!("writing the ledger file failed: {e:#}"),
        }
    }
}
