//! A client's `peers` row as an announce leaves it: new from its first announce, changed in
//! place by the next ones (the agent copied only when it changed), and the copy of its last
//! state the rules read.

use std::net::IpAddr;

use shoal_tracker::site::Asked;

use crate::model::Peer;

/// What the client is: the announce's own view (`left == 0` seeds, `public/announce.php:111`).
pub(crate) fn seeding(a: &Asked<'_>) -> bool {
    a.left == Some(0)
}

/// What the rules read of a client's row before this announce (a copy without its agent,
/// so that reading it allocates nothing).
#[derive(Clone, Copy)]
pub(crate) struct Before {
    pub(crate) seeder: bool,
    pub(crate) uploaded: u64,
    pub(crate) downloaded: u64,
    pub(crate) last_action: i64,
    pub(crate) prev_action: Option<i64>,
}

impl Before {
    pub(crate) fn of(p: &Peer) -> Before {
        Before {
            seeder: p.seeder,
            uploaded: p.uploaded,
            downloaded: p.downloaded,
            last_action: p.last_action,
            prev_action: p.prev_action,
        }
    }
}

/// The user agent as `peers.agent` keeps it: its first 60 characters.
pub(crate) fn agent_of<'a>(a: &Asked<'a>) -> &'a str {
    let agent = a.agent.unwrap_or_default();
    match agent.char_indices().nth(60) {
        Some((end, _)) => &agent[..end],
        None => agent,
    }
}

/// A client's new row from announce `a`.
pub(crate) fn client_row(a: &Asked<'_>, now: i64) -> Peer {
    let mut p = Peer {
        user_id: a.user_id as u32,
        peer_id: a.peer_id.0,
        ip: a.source,
        ipv4: None,
        ipv6: None,
        port: 0,
        uploaded: 0,
        downloaded: 0,
        left: 0,
        seeder: false,
        started: now,
        last_action: now,
        prev_action: None,
        agent: agent_of(a).to_owned(),
        finished_at: 0,
    };
    report(&mut p, a);
    p
}

/// A known client's row after announce `a`, changed in place (its agent copied only when it
/// changed).
pub(crate) fn refresh(p: &mut Peer, a: &Asked<'_>, now: i64, completed: bool) {
    report(p, a);
    p.prev_action = Some(p.last_action);
    p.last_action = now;
    if completed {
        p.finished_at = now;
    }
    let agent = agent_of(a);
    if p.agent != agent {
        agent.clone_into(&mut p.agent);
    }
}

/// What announce `a` reports, into a client's row: address, port, bytes, what is left.
pub(crate) fn report(p: &mut Peer, a: &Asked<'_>) {
    let ip = a.addr.map_or(a.source, |s| s.ip());
    p.ip = ip;
    p.ipv4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    p.ipv6 = match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => Some(v6),
        _ => None,
    };
    p.port = a.addr.map_or(0, |s| s.port());
    p.uploaded = a.uploaded;
    p.downloaded = a.downloaded;
    p.left = a.left.unwrap_or(0);
    p.seeder = seeding(a);
}
