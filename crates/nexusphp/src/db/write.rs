//! One batch into the site's tables, as NexusPHP's announce writes them
//! (`docs/nexusphp.md`, "What an announce writes"), in the caller's transaction:
//! `peers` deleted and upserted on their key (torrent, peer id, member), `snatched`
//! inserted where new then added to, `torrents` given shoal's counts, `users` credited
//! the ledger's sums and given their flags, `cheaters` and `hit_and_runs` added.
//!
//! The tables that every announce touches are written with multi-row statements
//! ([`Statement`]: a thousand rows each, the full chunk's statement prepared once), `snatched`,
//! `torrents` and `users` updated through a join with the batch's rows as a derived table,
//! never an upsert that would insert a row the site removed. NexusPHP's tables have no
//! foreign keys: a row of a member or torrent removed meanwhile changes nothing or leaves a
//! row the site's cleanup removes.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use shoal_site::binds;
use shoal_site::mysql::statement::Statement;
use sqlx::MySqlConnection;

use super::Error;
use crate::site::{Batch, CheaterWrite, SnatchWrite};

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

const DELETE_PEERS: Statement = Statement::any_of(
    "DELETE FROM peers WHERE ",
    "(torrent = ? AND userid = ? AND peer_id = ?)",
);

/// A client's row on its key (torrent, peer id, member): `started` is kept once written.
const UPSERT_PEERS: Statement = Statement::values(
    "INSERT INTO peers (torrent, peer_id, userid, ip, port, uploaded, downloaded, to_go, \
     seeder, started, last_action, prev_action, connectable, agent, finishedat, \
     downloadoffset, uploadoffset, passkey, ipv4, ipv6, is_seed_box) VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?), FROM_UNIXTIME(?), \
     'yes', ?, ?, ?, ?, ?, ?, ?, 0)",
    " ON DUPLICATE KEY UPDATE ip = VALUES(ip), port = VALUES(port), \
     uploaded = VALUES(uploaded), downloaded = VALUES(downloaded), \
     to_go = VALUES(to_go), seeder = VALUES(seeder), \
     last_action = VALUES(last_action), prev_action = VALUES(prev_action), \
     agent = VALUES(agent), finishedat = VALUES(finishedat), ipv4 = VALUES(ipv4), \
     ipv6 = VALUES(ipv6)",
);

/// A member's first `snatched` row for a torrent (`A:532-536`: the client's totals as
/// reported). A row the site holds and shoal did not know of keeps its totals and takes
/// what an update with nothing to add would set.
const INSERT_SNATCHES: Statement = Statement::values(
    "INSERT INTO snatched (torrentid, userid, ip, port, uploaded, downloaded, to_go, \
     startdat, last_action) VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?))",
    " ON DUPLICATE KEY UPDATE to_go = VALUES(to_go), last_action = VALUES(last_action)",
);

/// Each row of a derived table casts its values, so that every row has the column types
/// of an integer (a bare placeholder in a `SELECT` list may be typed as text).
const ADD_TO_SNATCHES: Statement = Statement::union(
    "UPDATE snatched s JOIN (",
    "SELECT CAST(? AS UNSIGNED) AS tid, CAST(? AS UNSIGNED) AS uid, \
     CAST(? AS UNSIGNED) AS up, CAST(? AS UNSIGNED) AS down, \
     CAST(? AS UNSIGNED) AS seed, CAST(? AS UNSIGNED) AS leech, \
     CAST(? AS UNSIGNED) AS noseed, CAST(? AS UNSIGNED) AS togo, \
     CAST(? AS SIGNED) AS la, CAST(? AS SIGNED) AS done",
    ") b ON s.torrentid = b.tid AND s.userid = b.uid SET \
     s.uploaded = s.uploaded + b.up, s.downloaded = s.downloaded + b.down, \
     s.seedtime = s.seedtime + b.seed, s.leechtime = s.leechtime + b.leech, \
     s.leech_time_no_seeder = s.leech_time_no_seeder + b.noseed, s.to_go = b.togo, \
     s.last_action = FROM_UNIXTIME(b.la), \
     s.completedat = IF(b.done > 0, FROM_UNIXTIME(b.done), s.completedat), \
     s.finished = IF(b.done > 0, 'yes', s.finished)",
);

const UPDATE_TORRENTS: Statement = Statement::union(
    "UPDATE torrents t JOIN (",
    "SELECT CAST(? AS UNSIGNED) AS id, CAST(? AS UNSIGNED) AS s, \
     CAST(? AS UNSIGNED) AS l, CAST(? AS UNSIGNED) AS c, CAST(? AS SIGNED) AS la",
    ") b ON t.id = b.id SET t.seeders = b.s, t.leechers = b.l, \
     t.times_completed = t.times_completed + b.c, t.visible = 'yes', \
     t.last_action = IF(b.la > 0, FROM_UNIXTIME(b.la), t.last_action)",
);

const UPDATE_USERS: Statement = Statement::union(
    "UPDATE users u JOIN (",
    "SELECT CAST(? AS UNSIGNED) AS id, CAST(? AS UNSIGNED) AS up, \
     CAST(? AS UNSIGNED) AS down, CAST(? AS SIGNED) AS la, CAST(? AS SIGNED) AS cs, \
     CAST(? AS SIGNED) AS sce, CAST(? AS SIGNED) AS dis, CAST(? AS SIGNED) AS rev",
    ") b ON u.id = b.id SET u.uploaded = u.uploaded + b.up, \
     u.downloaded = u.downloaded + b.down, \
     u.last_announce_at = IF(b.la > 0, FROM_UNIXTIME(b.la), u.last_announce_at), \
     u.clientselect = IF(b.cs >= 0, b.cs, u.clientselect), \
     u.showclienterror = CASE b.sce WHEN 1 THEN 'yes' WHEN 0 THEN 'no' \
     ELSE u.showclienterror END, \
     u.enabled = IF(b.dis > 0, 'no', u.enabled), \
     u.downloadpos = IF(b.rev > 0, 'no', u.downloadpos)",
);

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
    let (deleted, _) = DELETE_PEERS
        .run(
            conn,
            &batch.peer_deletions,
            |q, (tid, uid, pid)| binds!(q; *tid, *uid, pid.to_vec()),
        )
        .await?;
    w.peers_deleted += deleted;
    UPSERT_PEERS
        .run(conn, &batch.peers, |q, (tid, p)| {
            binds!(q; *tid, p.peer_id.to_vec(), p.user_id, address(p.ip), p.port, p.uploaded,
                p.downloaded, p.left, yes(p.seeder), p.started, p.last_action, p.prev_action,
                p.agent.clone(), p.finished_at, p.downloaded, p.uploaded,
                passkeys.get(&p.user_id).cloned().unwrap_or_default(), ip_text(p.ipv4),
                ip_text(p.ipv6))
        })
        .await?;
    w.peers += batch.peers.len();
    Ok(())
}

/// Whether a `snatched` write adds to the row after its insert: a row new in this batch
/// is inserted with its latest `to_go` and `last_action`, so only additions (bytes, times)
/// and a completion need the update (`A:496-507`).
fn adds(s: &SnatchWrite) -> bool {
    s.insert.is_none()
        || s.uploaded != 0
        || s.downloaded != 0
        || s.seedtime != 0
        || s.leechtime != 0
        || s.leech_time_no_seeder != 0
        || s.completed_at.is_some()
}

/// New rows first (`A:532-536`: the client's totals as reported), then the additions
/// (`A:496-507`).
async fn snatches(
    conn: &mut MySqlConnection,
    rows: &[SnatchWrite],
    w: &mut Written,
) -> Result<(), Error> {
    let new: Vec<(&SnatchWrite, &crate::site::SnatchInsert)> = (rows.iter())
        .filter_map(|s| s.insert.as_ref().map(|i| (s, i)))
        .collect();
    INSERT_SNATCHES
        .run(conn, &new, |q, (s, i)| {
            binds!(q; s.torrent_id, s.user_id, address(i.ip), i.port, i.uploaded, i.downloaded,
                s.to_go, i.started, s.last_action)
        })
        .await?;
    let added: Vec<&SnatchWrite> = rows.iter().filter(|s| adds(s)).collect();
    ADD_TO_SNATCHES
        .run(conn, &added, |q, s| {
            binds!(q; s.torrent_id, s.user_id, s.uploaded, s.downloaded, s.seedtime,
                s.leechtime, s.leech_time_no_seeder, s.to_go, s.last_action,
                s.completed_at.unwrap_or(0))
        })
        .await?;
    w.snatches += rows.len();
    Ok(())
}

async fn torrents(conn: &mut MySqlConnection, batch: &Batch, w: &mut Written) -> Result<(), Error> {
    UPDATE_TORRENTS
        .run(
            conn,
            &batch.torrents,
            |q, t| binds!(q; t.torrent_id, t.seeders, t.leechers, t.completed, t.last_action),
        )
        .await?;
    w.torrents += batch.torrents.len();
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
    let mut rows: BTreeMap<u32, UserRow> = BTreeMap::new();
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
    UPDATE_USERS
        .run(conn, &rows, |q, r| {
            binds!(q; r.id, r.up, r.down, r.last_announce, r.client_select,
                r.show_client_error, i64::from(r.disable), i64::from(r.revoke))
        })
        .await?;
    w.users += rows.len();
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
