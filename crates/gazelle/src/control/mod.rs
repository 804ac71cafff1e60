//! The site's control calls, as Ocelot answers them: `GET /<site password>/update?action=...`
//! changes the site in memory (from the next announce on) and answers `success`;
//! `GET /<report password>/report?get=...` answers figures. Every answer is a 200 (as
//! Ocelot's, whose site reads the body); a wrong password or a bad report query answers
//! a bencoded `failure reason`, as Ocelot does.
//!
//! It knows no transport: the HTTP front end hands it each request path whose shape is a
//! control call ([`Control::answer`]).
//!
//! | action | parameters | effect |
//! |---|---|---|
//! | `add_torrent` | info_hash, id, freetorrent | a new torrent, or a known one's leech type |
//! | `update_torrent` | info_hash, freetorrent | the leech type |
//! | `update_torrents` | info_hashes (back to back), freetorrent | the leech type of each |
//! | `delete_torrent` | info_hash, reason | gone; announces hear the reason for a while |
//! | `add_token`, `remove_token` | info_hash, userid | a freeleech token |
//! | `add_user` | passkey, id, visible | a user (visible=0: protected) |
//! | `update_user` | passkey, can_leech, visible | what they may do |
//! | `trace_user` | passkey, trace | their announces logged |
//! | `remove_user`, `remove_users` | passkey, passkeys (32 characters each, back to back) | gone |
//! | `change_passkey` | oldpasskey, newpasskey | the passkey |
//! | `add_whitelist`, `remove_whitelist`, `edit_whitelist` | peer_id, old_peer_id, new_peer_id | the whitelist |
//! | `update_announce_interval`, `update_announce_jitter` | new_announce_interval, new_announce_jitter | the interval |
//! | `info_torrent` | info_hash | `{"hash":..,"id":..,"free":..}` |

pub mod query;
mod report;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use subtle::ConstantTimeEq;

pub use query::{route, Action, Kind, ReportQuery};

use crate::model::{Torrent, User};
use crate::site::Site;

/// What to answer to one control call: always a 200.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub body: Vec<u8>,
    /// `application/json` for a report's JSON, `text/plain` otherwise.
    pub content_type: &'static str,
}

impl Reply {
    fn text(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            body: body.into(),
            content_type: "text/plain",
        }
    }

    fn json(body: String) -> Reply {
        Reply {
            body: body.into_bytes(),
            content_type: "application/json",
        }
    }

    /// A bencoded `failure reason`, with Ocelot's intervals.
    pub fn failure(message: &str) -> Reply {
        Reply::text(format!(
            "d14:failure reason{}:{message}12:min intervali5400e8:intervali5400ee",
            message.len()
        ))
    }
}

/// The site's control calls: the site and the two passwords.
pub struct Control {
    site: Arc<Site>,
    site_password: String,
    report_password: String,
}

impl Control {
    pub fn new(site: Arc<Site>, site_password: String, report_password: String) -> Self {
        Self {
            site,
            site_password,
            report_password,
        }
    }

    /// The site in memory.
    pub fn site(&self) -> &Arc<Site> {
        &self.site
    }

    /// The answer to a request for `path` (with its query), if the path is a control
    /// call's; `None` for anything else (announces, scrapes).
    pub fn answer(&self, path: &str) -> Option<Reply> {
        let (password, kind, query) = route(path)?;
        let c = &self.site.counters;
        c.control_calls.fetch_add(1, Ordering::Relaxed);
        let (expected, bad) = match kind {
            Kind::Update => (&self.site_password, &c.bad_site_password),
            Kind::Report => (&self.report_password, &c.bad_report_password),
        };
        if !bool::from(expected.as_bytes().ct_eq(password.as_bytes())) {
            bad.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("a control call with a wrong password");
            return Some(Reply::failure("Authentication failure"));
        }
        Some(match kind {
            Kind::Update => self.update(Action::parse(query)),
            Kind::Report => report::answer(&self.site, ReportQuery::parse(query)),
        })
    }

    /// Applies one `update` call.
    pub fn update(&self, action: Action) -> Reply {
        let site = &self.site;
        let missed = |what: &str| tracing::warn!("control call for an unknown {what}");
        match action {
            Action::ChangePasskey { old, new } => {
                if !site.change_passkey(&old, &new) {
                    missed("passkey");
                }
            }
            Action::AddTorrent { hash, id, leech } => match hash {
                Some(info_hash) => site.add_torrent(Torrent {
                    id,
                    info_hash,
                    leech_type: leech,
                    snatched: 0,
                }),
                None => missed("info hash"),
            },
            Action::UpdateTorrent { hash, leech } => {
                if !hash.is_some_and(|h| site.set_leech_type(&h, leech)) {
                    missed("torrent");
                }
            }
            Action::UpdateTorrents { hashes, leech } => {
                for h in hashes {
                    if !site.set_leech_type(&h, leech) {
                        missed("torrent");
                    }
                }
            }
            Action::AddToken { hash, user } | Action::RemoveToken { hash, user } => {
                let add = matches!(action, Action::AddToken { .. });
                if !hash.is_some_and(|h| site.edit_token(&h, user, add)) {
                    missed("torrent");
                }
            }
            Action::DeleteTorrent { hash, reason } => {
                if !hash.is_some_and(|h| site.delete_torrent(&h, reason)) {
                    missed("torrent");
                }
            }
            Action::AddUser {
                passkey,
                id,
                protected,
            } => match site.user_by_passkey(&passkey) {
                // As Ocelot: a known passkey keeps its user as they are.
                Some(_) => {}
                None => site.put_user(User {
                    id,
                    passkey,
                    can_leech: true,
                    protected,
                }),
            },
            Action::UpdateUser {
                passkey,
                can_leech,
                protected,
            } => {
                if !site.update_user(&passkey, can_leech, protected) {
                    missed("passkey");
                }
            }
            Action::TraceUser { passkey, traced } => {
                if !site.trace_user(&passkey, traced) {
                    missed("passkey");
                }
            }
            Action::RemoveUser { passkey } => {
                site.remove_user(&passkey);
            }
            Action::RemoveUsers { passkeys } => {
                for passkey in passkeys {
                    site.remove_user(&passkey);
                }
            }
            Action::AddWhitelist { prefix } => site.add_whitelist(&prefix),
            Action::EditWhitelist { old, new } => {
                site.remove_whitelist(&old);
                site.add_whitelist(&new);
            }
            Action::RemoveWhitelist { prefix } => {
                site.remove_whitelist(&prefix);
            }
            Action::AnnounceInterval(Some(s)) => site.set_interval(s),
            Action::AnnounceJitter(Some(s)) => site.set_jitter(s),
            Action::AnnounceInterval(None) | Action::AnnounceJitter(None) => {
                return Reply::failure("the new value is not a number of seconds");
            }
            Action::InfoTorrent { text, hash } => {
                return report::info_torrent(site, &text, hash);
            }
            Action::Other(name) => {
                tracing::warn!(action = %name.escape_debug(), "unknown control action");
            }
        }
        Reply::text("success")
    }
}
