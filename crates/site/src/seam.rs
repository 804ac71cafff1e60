//! The seam itself: [`Site`], what the server does with the one site in force, and what a
//! site is opened with ([`Opening`]) and configured by ([`SiteConfig`]).
//!
//! The server opens the site named by `[private] schema` through its registry (one line
//! per site), then only ever speaks to it through this trait: at start (members, rules,
//! saved clients, peers to list), on every flush (the accounting through [`Schema`], the
//! periodic work before it), on every HTTP request whose path the site owns
//! ([`Control`]), and at shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use shoal_accounts::Schema;
use shoal_proto::PeerId;
use shoal_tracker::private::credit::PeerRecord;
use shoal_tracker::private::ledger::SavedPeer;
use shoal_tracker::private::members::Roster;
use shoal_tracker::private::Members;
use shoal_tracker::site::SiteRules;

use crate::control::Control;

/// The keys of a site's control calls and calls back, from `[private]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    /// The site's API key (`site_api_key`, or the first line of `site_api_key_file`), if
    /// one is set.
    pub site_key: Option<String>,
    /// The passwords in the path of the site's calls and reports.
    pub site_password: String,
    pub report_password: String,
    /// The site's own URL, for calls back to it (empty: none).
    pub site_url: String,
}

/// What a site is opened with, beside its own config section.
pub struct Opening<'a> {
    /// The site's database (`[private] database`), password included.
    pub database_url: &'a str,
    /// The runtime its database work runs on (one worker, not on the announce path).
    pub runtime: &'a tokio::runtime::Runtime,
    pub keys: &'a Keys,
}

/// The announce settings a site's rules put in force over `[announce]` and `[private]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteSettings {
    /// Peers sent when the client does not say, and at most.
    pub default_numwant: usize,
    pub max_numwant: usize,
    /// The `min interval` and the interval (the site may draw the answer's own).
    pub min_interval: u32,
    pub interval: u32,
    /// Seconds between writes of the accounting.
    pub flush_interval: u64,
}

/// A site's own config section (`[unit3d]`, `[gazelle]`, ...), as the server checks it.
pub trait SiteConfig {
    /// Whether the section, with the `[private]` keys, can serve; the error names the key
    /// at fault.
    fn validate(&self, keys: &Keys) -> anyhow::Result<()>;

    /// The settings the site's rules put in force.
    fn settings(&self) -> SiteSettings;
}

/// One of the site's clients to list in the swarm store at start, so that a restart or a
/// switch-over from the site's former announce server resumes its swarms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedPeer {
    pub info_hash: [u8; 20],
    pub peer_id: [u8; 20],
    pub addr: SocketAddr,
    pub seeder: bool,
}

/// What every site hands the server at start: the same five things for every site, so a
/// site builds them once ([`Parts`]) and the trait's own methods read them.
pub struct Parts {
    /// Its `[private] schema` name (`unit3d`, `gazelle`).
    pub name: &'static str,
    /// The private rule's tables, kept current by the site (its loads and control calls).
    pub members: Arc<Members>,
    /// Its rules, asked by the core after the private rule.
    pub rules: Arc<dyn SiteRules>,
    /// Its tables: the reload (`load`) and the accounting writes (`write`).
    pub schema: Arc<dyn Schema>,
    /// Its control calls on the HTTP listeners, if it has any.
    pub control: Option<Arc<dyn Control>>,
}

impl Parts {
    /// The parts of the site `name` whose rules are `rules`.
    pub fn new(
        name: &'static str,
        members: Arc<Members>,
        rules: Arc<dyn SiteRules>,
        schema: Arc<dyn Schema>,
        control: Option<Arc<dyn Control>>,
    ) -> Parts {
        Parts {
            name,
            members,
            rules,
            schema,
            control,
        }
    }
}

/// The private rule's tables for a site whose own rules decide every announce: the rule
/// only finds the member and the torrent (no client allow-list of shoal's: the site's own
/// list applies). The site fills them as it loads and as it changes.
pub fn site_members() -> Arc<Members> {
    Arc::new(Members::new(&Roster::default(), false))
}

/// The start every site makes, each step's error naming the site: `connect` to its
/// database, `check` its tables, `load` what it keeps in memory (`what`, for the error).
pub async fn connect_check_load<D, T, E>(
    (site, what): (&str, &str),
    connect: impl Future<Output = Result<D, E>>,
    check: impl AsyncFnOnce(&mut D) -> Result<(), E>,
    load: impl AsyncFnOnce(&mut D) -> Result<T, E>,
) -> anyhow::Result<(D, T)>
where
    E: std::error::Error + Send + Sync + 'static,
{
    use anyhow::Context;
    let mut db = (connect.await).with_context(|| format!("opening the {site} site's database"))?;
    (check(&mut db).await).with_context(|| format!("checking the {site} site's tables"))?;
    let data =
        (load(&mut db).await).with_context(|| format!("loading the {site} site's {what}"))?;
    Ok((db, data))
}

/// Says what a site loaded at start: `counts` as (how many, of what).
pub fn log_loaded(site: &str, url: &str, counts: &[(usize, &str)]) {
    let counts: Vec<String> = counts
        .iter()
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    tracing::info!(site = url, "{site} site loaded: {}", counts.join(", "));
}

/// One of a site's clients as its tables last saw it (its totals, whether it seeded, when:
/// Unix seconds). As the ledger's record ([`LastReport::saved`]) its first announce after
/// the start is counted from there: a restart without a ledger file, or a switch-over from
/// the site's own announce server, loses nothing and counts nothing twice.
pub struct LastReport {
    pub user_id: u32,
    pub torrent_id: u32,
    pub peer_id: [u8; 20],
    pub uploaded: u64,
    pub downloaded: u64,
    pub seeder: bool,
    pub at: i64,
}

impl LastReport {
    /// The ledger's record of it, `now` being the coarse clock and `unix` the wall clock at
    /// the same moment.
    pub fn saved(&self, now: u32, unix: u64) -> SavedPeer {
        let age = unix.saturating_sub(u64::try_from(self.at).unwrap_or(0));
        SavedPeer {
            user_id: u64::from(self.user_id),
            torrent_id: u64::from(self.torrent_id),
            peer_id: PeerId(self.peer_id),
            record: PeerRecord {
                uploaded: self.uploaded,
                downloaded: self.downloaded,
                seen: now.saturating_sub(u32::try_from(age).unwrap_or(u32::MAX)),
                seeding: self.seeder,
                started: false,
            },
        }
    }
}

/// A site in force: everything the server does with it.
pub trait Site: Send + Sync {
    /// What it handed over at start.
    fn parts(&self) -> &Parts;

    fn name(&self) -> &'static str {
        self.parts().name
    }

    fn members(&self) -> Arc<Members> {
        self.parts().members.clone()
    }

    fn rules(&self) -> Arc<dyn SiteRules> {
        self.parts().rules.clone()
    }

    fn schema(&self) -> Arc<dyn Schema> {
        self.parts().schema.clone()
    }

    fn control(&self) -> Option<Arc<dyn Control>> {
        self.parts().control.clone()
    }

    /// Its clients' last reports as the ledger's records: their first announce after the
    /// start is counted from there. `now` is the coarse clock, `unix` the wall clock.
    fn saved_peers(&self, _now: u32, _unix: u64) -> Vec<SavedPeer> {
        Vec::new()
    }

    /// Its active, visible clients, to list in the swarm store at start.
    fn listed_peers(&self) -> Vec<ListedPeer> {
        Vec::new()
    }

    /// Periodic work, run before each write of the accounting (sweeps of silent clients).
    fn before_flush(&self, _unix_now: i64) {}

    /// Stops what the site runs of its own (threads calling the site back); after the last
    /// write.
    fn shutdown(&self) {}
}
