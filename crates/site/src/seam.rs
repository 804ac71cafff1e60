//! The seam itself: [`Site`], what the server does with the one site in force, and what a
//! site is opened with ([`Opening`]) and configured by ([`SiteConfig`]).
//!
//! The server opens the site named by `[private] schema` through its registry (one line
//! per site), then only ever speaks to it through this trait: at start (members, rules,
//! saved clients, peers to list), on every flush (the accounting through [`Schema`], the
//! periodic work before it), on every HTTP request whose path the site owns
//! ([`Control`]), and at shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use shoal_accounts::Schema;
use shoal_tracker::private::ledger::SavedPeer;
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
