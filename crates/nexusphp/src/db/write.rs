//! One batch into the site's tables, as NexusPHP's announce writes them
//! (`docs/nexusphp.md`, "What an announce writes"), in the caller's transaction:
//! `peers` deleted and upserted on their key (torrent, peer id, member), `snatched`
//! inserted where new then added to, `torrents` given shoal's counts, `users` credited
//! the ledger's sums and given their flags, `cheaters` and `hit_and_runs` added.
//!
//! The tables that every announce touches are written with multi-row statements of at
//! most [`ROWS_PER_STATEMENT`] rows (`snatched`, `torrents` and `users` updated through a
//! join with the batch's rows as a derived table, never an upsert that would insert a row
//! the site removed). NexusPHP's tables have no foreign keys: a row of a member or torrent
//! removed meanwhile changes nothing or leaves a row the site's cleanup removes.

use std::collections::HashMap;
use std::net::IpAddr;

use sqlx::{MySql, MySqlConnection, QueryBuilder};

use super::Error;
use crate::site::{Batch, CheaterWrite, SnatchWrite};

/// Rows in one multi-row statement: 21 placeholders a row at most (`peers`).
const ROWS_PER_STATEMENT: usize = 1000;

const _: () = assert!(ROWS_PER_STATEMENT * 21 <= 65_535);

/// The ledger's credit per member: (uploaded, downloaded), factors applied.
pub type Sums = HashMap<u32, (u64, u64)>;

/// What one write did, in rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub peers: usize,
    pub peers_deleted: u64,
    pub snatches: usize,
    pub torrents: usize,
    pub users: usize,
    pub cheaters: usize,
    pub hit_and_runs: usize,
}

/// A derived table of `rows`, one `SELECT` per row joined by `UNION ALL`; `row` pushes a
/// row's columns (`CAST(? AS ...) AS name, ...`).
fn derived<T>(
    qb: &mut QueryBuilder<'_, MySql>,
    rows: &[T],
    mut row: impl FnMut(&mut QueryBuilder<'_, MySql>, &T),
) {
    for (i, r) in rows.iter().enumerate() {
        qb.push(if i == 0 {
            "SELECT "
        } else {
            " UNION ALL SELECT "
        });
        row(qb, r);
    }
}

/// `UPDATE <target> JOIN (<the rows as a derived table>) b ON <on_set>`, a statement per
/// `ROWS_PER_STATEMENT` rows, each counted in `written` once run.
async fn update_joined<T>(
    conn: &mut MySqlConnection,
    target: &str,
    rows: &[T],
    mut row: impl FnMut(&mut QueryBuilder<'_, MySql>, &T),
    on_set: &str,
    written: &mut usize,
) -> Result<(), Error> {
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut qb = QueryBuilder::<MySql>::new(format!("UPDATE {target} JOIN ("));
        derived(&mut qb, chunk, &mut row);
        qb.push(") b ON ").push(on_set);
        qb.build().execute(&mut *conn).await?;
        *written += chunk.len();
    }
    Ok(())
}

/// `CAST(? AS <ty>) AS <name>` for each value, comma separated.
macro_rules! columns {
    ($qb:expr; $($value:expr => $ty:literal $name:literal),+ $(,)?) => {{
        let mut first = true;
        $(
            if !first {
                $qb.push(", ");
            }
            first = false;
            $qb.push("CAST(").push_bind($value).push(concat!(" AS ", $ty, ") AS ", $name));
        )+
        let _ = first;
    }};
}

fn ip_text(ip: Option<impl ToString>) -> String {
    ip.map(|i| i.to_string()).unwrap_or_default()
}

/// The address as NexusPHP writes it (`peers.ip`): an IPv4-mapped address as IPv4.
fn address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        v4 => v4.to_string(),
    }
}

fn yes(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

async fn peers(
    conn: &mut MySqlConnection,
    batch: &Batch,
    passkeys: &HashMap<u32, String>,
    w: &mut Written,
) -> Result<(), Error> {
    for chunk in batch.peer_deletions.chunks(ROWS_PER_STATEMENT) {
        let mut qb = QueryBuilder::<MySql>::new("DELETE FROM peers WHERE ");
        for (i, (tid, uid, pid)) in chunk.iter().enumerate() {
            qb.push(if i == 0 { "(" } else { " OR (" });
            qb.push("torrent = ").push_bind(*tid);
            qb.push(" AND userid = ").push_bind(*uid);
            qb.push(" AND peer_id = ").push_bind(pid.to_vec()).push(")");
        }
        w.peers_deleted += qb.build().execute(&mut *conn).await?.rows_affected();
    }
    for chunk in batch.peers.chunks(ROWS_PER_STATEMENT) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO peers (torrent, peer_id, userid, ip, port, uploaded, downloaded, \
             to_go, seeder, started, last_action, prev_action, connectable, agent, finishedat, \
             downloadoffset, uploadoffset, passkey, ipv4, ipv6, is_seed_box) ",
        );
        qb.push_values(chunk, |mut b, (tid, p)| {
            b.push_bind(*tid)
                .push_bind(p.peer_id.to_vec())
                .push_bind(p.user_id)
                .push_bind(address(p.ip))
                .push_bind(p.port)
                .push_bind(p.uploaded)
                .push_bind(p.downloaded)
                .push_bind(p.left)
                .push_bind(yes(p.seeder))
                .push("FROM_UNIXTIME(")
                .push_bind_unseparated(p.started)
                .push_unseparated(")")
                .push("FROM_UNIXTIME(")
                .push_bind_unseparated(p.last_action)
                .push_unseparated(")")
                .push("FROM_UNIXTIME(")
                .push_bind_unseparated(p.prev_action)
                .push_unseparated(")")
                .push("'yes'")
                .push_bind(p.agent.clone())
                .push_bind(p.finished_at)
                .push_bind(p.downloaded)
                .push_bind(p.uploaded)
                .push_bind(passkeys.get(&p.user_id).cloned().unwrap_or_default())
                .push_bind(ip_text(p.ipv4))
                .push_bind(ip_text(p.ipv6))
                .push("0");
        });
        qb.push(
            " ON DUPLICATE KEY UPDATE ip = VALUES(ip), port = VALUES(port), \
             uploaded = VALUES(uploaded), downloaded = VALUES(downloaded), \
             to_go = VALUES(to_go), seeder = VALUES(seeder), \
             last_action = VALUES(last_action), prev_action = VALUES(prev_action), \
             agent = VALUES(agent), finishedat = VALUES(finishedat), ipv4 = VALUES(ipv4), \
             ipv6 = VALUES(ipv6)",
        );
        qb.build().execute(&mut *conn).await?;
        w.peers += chunk.len();
    }
    Ok(())
}

/// New rows first (`A:532-536`: the client's totals as reported), then every row's
/// additions (`A:496-507`).
async fn snatches(
    conn: &mut MySqlConnection,
    rows: &[SnatchWrite],
    w: &mut Written,
) -> Result<(), Error> {
    let new: Vec<&SnatchWrite> = rows.iter().filter(|s| s.insert.is_some()).collect();
    for chunk in new.chunks(ROWS_PER_STATEMENT) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO snatched (torrentid, userid, ip, port, uploaded, downloaded, to_go, \
             startdat, last_action) ",
        );
        qb.push_values(chunk, |mut b, s| {
            let Some(i) = &s.insert else { return };
            b.push_bind(s.torrent_id)
                .push_bind(s.user_id)
                .push_bind(address(i.ip))
                .push_bind(i.port)
                .push_bind(i.uploaded)
                .push_bind(i.downloaded)
                .push_bind(s.to_go)
                .push("FROM_UNIXTIME(")
                .push_bind_unseparated(i.started)
                .push_unseparated(")")
                .push("FROM_UNIXTIME(")
                .push_bind_unseparated(s.last_action)
                .push_unseparated(")");
        });
        qb.push(" ON DUPLICATE KEY UPDATE last_action = VALUES(last_action)");
        qb.build().execute(&mut *conn).await?;
    }
    update_joined(
        conn,
        "snatched s",
        rows,
        |qb, s| {
            columns!(qb;
                s.torrent_id => "UNSIGNED" "tid",
                s.user_id => "UNSIGNED" "uid",
                s.uploaded => "UNSIGNED" "up",
                s.downloaded => "UNSIGNED" "down",
                s.seedtime => "UNSIGNED" "seed",
                s.leechtime => "UNSIGNED" "leech",
                s.leech_time_no_seeder => "UNSIGNED" "noseed",
                s.to_go => "UNSIGNED" "togo",
                s.last_action => "SIGNED" "la",
                s.completed_at.unwrap_or(0) => "SIGNED" "done",
            );
        },
        "s.torrentid = b.tid AND s.userid = b.uid SET \
         s.uploaded = s.uploaded + b.up, s.downloaded = s.downloaded + b.down, \
         s.seedtime = s.seedtime + b.seed, s.leechtime = s.leechtime + b.leech, \
         s.leech_time_no_seeder = s.leech_time_no_seeder + b.noseed, s.to_go = b.togo, \
         s.last_action = FROM_UNIXTIME(b.la), \
         s.completedat = IF(b.done > 0, FROM_UNIXTIME(b.done), s.completedat), \
         s.finished = IF(b.done > 0, 'yes', s.finished)",
        &mut w.snatches,
    )
    .await?;
    Ok(())
}

async fn torrents(conn: &mut MySqlConnection, batch: &Batch, w: &mut Written) -> Result<(), Error> {
    update_joined(
        conn,
        "torrents t",
        &batch.torrents,
        |qb, t| {
            columns!(qb;
                t.torrent_id => "UNSIGNED" "id",
                t.seeders => "UNSIGNED" "s",
                t.leechers => "UNSIGNED" "l",
                t.completed => "UNSIGNED" "c",
                t.last_action => "SIGNED" "la",
            );
        },
        "t.id = b.id SET t.seeders = b.s, t.leechers = b.l, \
         t.times_completed = t.times_completed + b.c, t.visible = 'yes', \
         t.last_action = IF(b.la > 0, FROM_UNIXTIME(b.la), t.last_action)",
        &mut w.torrents,
    )
    .await?;
    Ok(())
}

/// One member's row: the credit and the columns the announces set.
#[derive(Clone, Copy, Default)]
struct UserRow {
    id: u32,
    up: u64,
    down: u64,
    last_announce: i64,
    /// -1: unchanged.
    client_select: i64,
    show_client_error: i64,
    disable: bool,
    revoke: bool,
}

async fn users(
    conn: &mut MySqlConnection,
    batch: &Batch,
    sums: &Sums,
    w: &mut Written,
) -> Result<(), Error> {
    let mut rows: HashMap<u32, UserRow> = HashMap::new();
    let blank = |id| UserRow {
        id,
        client_select: -1,
        show_client_error: -1,
        ..UserRow::default()
    };
    for (&id, &(up, down)) in sums {
        let r = rows.entry(id).or_insert_with(|| blank(id));
        (r.up, r.down) = (up, down);
    }
    for u in &batch.users {
        let r = rows.entry(u.user_id).or_insert_with(|| blank(u.user_id));
        r.last_announce = u.last_announce_at.unwrap_or(0);
        r.client_select = u.client_select.map_or(-1, i64::from);
        r.show_client_error = u.show_client_error.map_or(-1, i64::from);
        (r.disable, r.revoke) = (u.disable, u.revoke_download);
    }
    let rows: Vec<UserRow> = rows.into_values().collect();
    update_joined(
        conn,
        "users u",
        &rows,
        |qb, r| {
            columns!(qb;
                r.id => "UNSIGNED" "id",
                r.up => "UNSIGNED" "up",
                r.down => "UNSIGNED" "down",
                r.last_announce => "SIGNED" "la",
                r.client_select => "SIGNED" "cs",
                r.show_client_error => "SIGNED" "sce",
                i64::from(r.disable) => "SIGNED" "dis",
                i64::from(r.revoke) => "SIGNED" "rev",
            );
        },
        "u.id = b.id SET u.uploaded = u.uploaded + b.up, \
         u.downloaded = u.downloaded + b.down, \
         u.last_announce_at = IF(b.la > 0, FROM_UNIXTIME(b.la), u.last_announce_at), \
         u.clientselect = IF(b.cs >= 0, b.cs, u.clientselect), \
         u.showclienterror = CASE b.sce WHEN 1 THEN 'yes' WHEN 0 THEN 'no' \
         ELSE u.showclienterror END, \
         u.enabled = IF(b.dis > 0, 'no', u.enabled), \
         u.downloadpos = IF(b.rev > 0, 'no', u.downloadpos)",
        &mut w.users,
    )
    .await?;
    Ok(())
}

/// A suspect adds a hit to this member's row for the torrent of the last 24 h, or a new
/// row (`include/functions_announce.php:112-190`); a disabling row is always new.
async fn cheater(conn: &mut MySqlConnection, c: &CheaterWrite) -> Result<(), Error> {
    if !c.disabling {
        let hit = sqlx::query(
            "UPDATE cheaters SET hit = hit + 1 WHERE userid = ? AND torrentid = ? \
             AND added > FROM_UNIXTIME(?) ORDER BY id DESC LIMIT 1",
        )
        .bind(c.user_id)
        .bind(c.torrent_id)
        .bind(c.at - 86_400)
        .execute(&mut *conn)
        .await?;
        if hit.rows_affected() > 0 {
            return Ok(());
        }
    }
    sqlx::query(
        "INSERT INTO cheaters (added, userid, torrentid, uploaded, downloaded, anctime, \
         seeders, leechers, hit, comment) VALUES (FROM_UNIXTIME(?), ?, ?, ?, ?, ?, ?, ?, 1, ?)",
    )
    .bind(c.at)
    .bind(c.user_id)
    .bind(c.torrent_id)
    .bind(c.uploaded)
    .bind(c.downloaded)
    .bind(c.secs.min(16_777_215))
    .bind(c.seeders)
    .bind(c.leechers)
    .bind(c.comment)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A hit-and-run row for (member, torrent) on its snatch, then the snatch's link to it
/// (`public/announce.php:575-590`).
async fn hit_and_run(conn: &mut MySqlConnection, uid: u32, tid: u32) -> Result<(), Error> {
    sqlx::query(
        "INSERT INTO hit_and_runs (uid, torrent_id, snatched_id, created_at, updated_at) \
         SELECT userid, torrentid, id, NOW(), NOW() FROM snatched \
         WHERE userid = ? AND torrentid = ? \
         ON DUPLICATE KEY UPDATE updated_at = NOW()",
    )
    .bind(uid)
    .bind(tid)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE snatched s JOIN hit_and_runs h ON h.uid = s.userid AND h.torrent_id = s.torrentid \
         SET s.hit_and_run_id = h.id WHERE s.userid = ? AND s.torrentid = ?",
    )
    .bind(uid)
    .bind(tid)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The whole batch, in the caller's transaction.
pub(super) async fn run(
    conn: &mut MySqlConnection,
    batch: &Batch,
    sums: &Sums,
    passkeys: &HashMap<u32, String>,
) -> Result<Written, Error> {
    let mut w = Written::default();
    peers(conn, batch, passkeys, &mut w).await?;
    snatches(conn, &batch.snatches, &mut w).await?;
    torrents(conn, batch, &mut w).await?;
    users(conn, batch, sums, &mut w).await?;
    for c in &batch.cheaters {
        cheater(conn, c).await?;
        w.cheaters += 1;
    }
    for &(uid, tid) in &batch.hit_and_runs {
        hit_and_run(conn, uid, tid).await?;
        w.hit_and_runs += 1;
    }
    Ok(w)
}
