//! One batch into the site's tables, as UNIT3D-Announce writes them: `peers` and `history`
//! upserted on their keys, `users` and `torrents` updated, `unregistered_info_hashes`
//! upserted, the forgotten peers deleted. All in the caller's transaction.
//!
//! Each table is written with multi-row statements ([`Statement`]: a thousand rows each, the
//! full chunk's statement prepared once). `users` and `torrents` are
//! updated through a join with the batch's rows (a derived table), never an upsert: an
//! upsert would insert an empty user or torrent where the site has removed one.
//!
//! The site may remove a user or a torrent while shoal holds rows for it. `peers`,
//! `history` and `unregistered_info_hashes` have foreign keys to them, and one row that
//! breaks a key fails the whole batch, again at every retry: so the batch's users and
//! torrents are looked up first, and the rows of those that are gone are left out
//! (counted in [`Written::skipped`]).
//!
//! Values are fitted to their columns before they are bound: agents cut to the column's
//! length, counts to `int`, times to what a `timestamp` holds, addresses to their 4 or 16
//! bytes. A strict `sql_mode` then has nothing to refuse.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use sqlx::mysql::MySqlConnection;

use shoal_site::binds;
#[cfg(test)]
use shoal_site::mysql::statement::ROWS_PER_STATEMENT;
use shoal_site::mysql::statement::{Query, Statement};

use super::{Error, Widths, Written};
use crate::model::{Batch, HistoryUpdate, Peer, TorrentUpdate, Unregistered, UserUpdate};

const DELETE_PEERS: Statement = Statement::any_of(
    "DELETE FROM peers WHERE ",
    "(user_id = ? AND torrent_id = ? AND peer_id = ?)",
);

/// `created_at` is written when the row is new and kept after.
const UPSERT_PEERS: Statement = Statement::values(
    "INSERT INTO peers (user_id, torrent_id, peer_id, ip, port, agent, uploaded, \
     downloaded, `left`, seeder, active, visible, connectable, created_at, updated_at) \
     VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?))",
    " ON DUPLICATE KEY UPDATE ip = VALUES(ip), port = VALUES(port), \
     agent = VALUES(agent), uploaded = VALUES(uploaded), \
     downloaded = VALUES(downloaded), `left` = VALUES(`left`), \
     seeder = VALUES(seeder), active = VALUES(active), visible = VALUES(visible), \
     connectable = VALUES(connectable), updated_at = VALUES(updated_at)",
);

/// The batch's bytes and seed time are added; the client's totals, the flags and the agent
/// replaced; a row stays immune only while its user is (UNIT3D-Announce's rule for the
/// hit-and-run job); `completed_at` is written once.
const UPSERT_HISTORY: Statement = Statement::values(
    "INSERT INTO history (user_id, torrent_id, agent, uploaded, actual_uploaded, \
     client_uploaded, downloaded, actual_downloaded, client_downloaded, seeder, active, \
     seedtime, immune, created_at, updated_at, completed_at) VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
     FROM_UNIXTIME(?), FROM_UNIXTIME(?), FROM_UNIXTIME(?))",
    " ON DUPLICATE KEY UPDATE agent = VALUES(agent), \
     uploaded = uploaded + VALUES(uploaded), \
     actual_uploaded = actual_uploaded + VALUES(actual_uploaded), \
     client_uploaded = VALUES(client_uploaded), \
     downloaded = downloaded + VALUES(downloaded), \
     actual_downloaded = actual_downloaded + VALUES(actual_downloaded), \
     client_downloaded = VALUES(client_downloaded), \
     seeder = VALUES(seeder), active = VALUES(active), \
     seedtime = seedtime + VALUES(seedtime), immune = immune AND VALUES(immune), \
     updated_at = VALUES(updated_at), \
     completed_at = COALESCE(completed_at, VALUES(completed_at))",
);

/// Each row of the derived table casts its values, so that every row has the column types
/// of an integer (a bare placeholder in a `SELECT` list may be typed as text).
const ADD_TO_USERS: Statement = Statement::union(
    "UPDATE users AS u JOIN (",
    "SELECT CAST(? AS UNSIGNED) AS id, CAST(? AS UNSIGNED) AS up, \
     CAST(? AS UNSIGNED) AS down",
    ") AS d ON u.id = d.id \
     SET u.uploaded = u.uploaded + d.up, u.downloaded = u.downloaded + d.down",
);

const UPDATE_TORRENTS: Statement = Statement::union(
    "UPDATE torrents AS t JOIN (",
    "SELECT CAST(? AS UNSIGNED) AS id, CAST(? AS SIGNED) AS seeders, \
     CAST(? AS SIGNED) AS leechers, CAST(? AS SIGNED) AS completed, \
     CAST(? AS SIGNED) AS balance",
    ") AS d ON t.id = d.id \
     SET t.seeders = d.seeders, t.leechers = d.leechers, \
     t.times_completed = d.completed, t.balance = COALESCE(t.balance, 0) + d.balance",
);

/// The first announce's time stays in `created_at`; the latest goes to `updated_at`.
const UPSERT_UNREGISTERED: Statement = Statement::values(
    "INSERT INTO unregistered_info_hashes (user_id, info_hash, created_at, updated_at) \
     VALUES ",
    "(?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?))",
    " ON DUPLICATE KEY UPDATE updated_at = VALUES(updated_at)",
);

/// Writes `batch` on `conn`, inside the caller's transaction. Deletions go first: a peer
/// both deleted and upserted in one batch ends up in the table.
pub(super) async fn run(
    conn: &mut MySqlConnection,
    batch: &Batch,
    widths: Widths,
) -> Result<Written, Error> {
    let mut written = Written::default();
    let users = existing(conn, "users", user_ids(batch), &mut written).await?;
    let torrents = existing(conn, "torrents", torrent_ids(batch), &mut written).await?;
    let known = |user: u32, torrent: u32| users.contains(&user) && torrents.contains(&torrent);

    written.peers_deleted = in_chunks(
        conn,
        &DELETE_PEERS,
        &batch.peer_deletions,
        &mut written,
        |q, d| binds!(q; d.0, d.1, d.2.to_vec()),
    )
    .await?;

    let mut peers: Vec<&Peer> = batch.peers.iter().collect();
    written.keep(&mut peers, |p| known(p.user_id, p.torrent_id));
    in_chunks(conn, &UPSERT_PEERS, &peers, &mut written, |q, p| {
        binds!(q; p.user_id, p.torrent_id, p.peer_id.to_vec(), address(p.ip), p.port,
            fitted(&p.agent, widths.peers_agent), p.uploaded, p.downloaded, p.left, p.seeder,
            p.active, p.visible, p.connectable, timestamp(p.created_at), timestamp(p.updated_at))
    })
    .await?;
    written.peers = peers.len();

    let mut history: Vec<&HistoryUpdate> = batch.history.iter().collect();
    written.keep(&mut history, |h| known(h.user_id, h.torrent_id));
    in_chunks(conn, &UPSERT_HISTORY, &history, &mut written, |q, h| {
        binds!(q; h.user_id, h.torrent_id, fitted(&h.agent, widths.history_agent),
            h.credited_uploaded, h.actual_uploaded, h.client_uploaded,
            h.credited_downloaded, h.actual_downloaded, h.client_downloaded,
            h.seeder, h.active, h.seedtime, h.immune,
            timestamp(h.updated_at), timestamp(h.updated_at), h.completed_at.map(timestamp))
    })
    .await?;
    written.history = history.len();

    let mut totals = user_totals(&batch.users);
    written.keep(&mut totals, |u| users.contains(&u.user_id));
    in_chunks(
        conn,
        &ADD_TO_USERS,
        &totals,
        &mut written,
        |q, u| binds!(q; u.user_id, u.uploaded, u.downloaded),
    )
    .await?;
    written.users = totals.len();

    let mut figures = torrent_figures(&batch.torrents);
    written.keep(&mut figures, |t| torrents.contains(&t.torrent_id));
    in_chunks(conn, &UPDATE_TORRENTS, &figures, &mut written, |q, t| {
        binds!(q; t.torrent_id, int(t.seeders), int(t.leechers), int(t.times_completed),
            t.balance)
    })
    .await?;
    written.torrents = figures.len();

    let mut unregistered: Vec<&Unregistered> = batch.unregistered.iter().collect();
    written.keep(&mut unregistered, |u| users.contains(&u.user_id));
    in_chunks(
        conn,
        &UPSERT_UNREGISTERED,
        &unregistered,
        &mut written,
        |q, u| binds!(q; u.user_id, u.info_hash.to_vec(), timestamp(u.at), timestamp(u.at)),
    )
    .await?;
    written.unregistered = unregistered.len();
    Ok(written)
}

impl Written {
    /// Keeps the `rows` whose user and torrent are still the site's (`keep`); those it
    /// leaves out are counted in `skipped`.
    fn keep<T>(&mut self, rows: &mut Vec<T>, keep: impl Fn(&T) -> bool) {
        let before = rows.len();
        rows.retain(keep);
        self.skipped += before - rows.len();
    }
}

/// Runs `statement` over `rows` ([`Statement::run`]), its statements counted in
/// `written`; answers the rows the server says it affected.
async fn in_chunks<T>(
    conn: &mut MySqlConnection,
    statement: &Statement,
    rows: &[T],
    written: &mut Written,
    bind: impl for<'q> Fn(Query<'q>, &T) -> Query<'q>,
) -> Result<u64, Error> {
    let (affected, statements) = statement.run(conn, rows, bind).await?;
    written.statements += statements;
    Ok(affected)
}

/// Which of `ids` are rows of `table` (`users` or `torrents`).
async fn existing(
    conn: &mut MySqlConnection,
    table: &str,
    ids: Vec<u32>,
    written: &mut Written,
) -> Result<HashSet<u32>, Error> {
    let (found, statements) = shoal_site::mysql::existing(conn, table, "id", &ids).await?;
    written.statements += statements;
    Ok(found)
}

fn user_ids(batch: &Batch) -> Vec<u32> {
    let ids: HashSet<u32> = (batch.peers.iter().map(|p| p.user_id))
        .chain(batch.history.iter().map(|h| h.user_id))
        .chain(batch.users.iter().map(|u| u.user_id))
        .chain(batch.unregistered.iter().map(|u| u.user_id))
        .collect();
    ids.into_iter().collect()
}

fn torrent_ids(batch: &Batch) -> Vec<u32> {
    let ids: HashSet<u32> = (batch.peers.iter().map(|p| p.torrent_id))
        .chain(batch.history.iter().map(|h| h.torrent_id))
        .chain(batch.torrents.iter().map(|t| t.torrent_id))
        .collect();
    ids.into_iter().collect()
}

/// One row per user, by id: a multi-table `UPDATE` changes a row once however many rows of
/// the derived table match it, so two rows of one user would lose one's bytes.
fn user_totals(updates: &[UserUpdate]) -> Vec<UserUpdate> {
    let mut totals: BTreeMap<u32, UserUpdate> = BTreeMap::new();
    for u in updates {
        let total = totals.entry(u.user_id).or_insert_with(|| UserUpdate {
            user_id: u.user_id,
            ..UserUpdate::default()
        });
        total.uploaded = total.uploaded.saturating_add(u.uploaded);
        total.downloaded = total.downloaded.saturating_add(u.downloaded);
    }
    totals.into_values().collect()
}

/// One row per torrent, by id: the latest figures, the balances summed.
fn torrent_figures(updates: &[TorrentUpdate]) -> Vec<TorrentUpdate> {
    let mut figures: BTreeMap<u32, TorrentUpdate> = BTreeMap::new();
    for t in updates {
        let balance = figures
            .get(&t.torrent_id)
            .map_or(0, |earlier| earlier.balance);
        figures.insert(
            t.torrent_id,
            TorrentUpdate {
                balance: balance.saturating_add(t.balance),
                ..t.clone()
            },
        );
    }
    figures.into_values().collect()
}

/// `text` cut to `width` characters (`varchar(64)` counts characters, not bytes).
fn fitted(text: &str, width: usize) -> String {
    if text.len() <= width {
        return text.to_owned();
    }
    text.chars().take(width).collect()
}

/// A Unix time as a `timestamp` column holds it (1970-01-01 00:00:01 to 2038-01-19).
fn timestamp(unix: i64) -> i64 {
    unix.clamp(1, i64::from(i32::MAX))
}

/// A count as an `int` column holds it.
fn int(count: u32) -> i32 {
    i32::try_from(count).unwrap_or(i32::MAX)
}

/// `peers.ip`: the 4 bytes of an IPv4 address (mapped into IPv6 or not), the 16 of an
/// IPv6 one.
fn address(ip: IpAddr) -> Vec<u8> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_repeat_their_row() {
        assert_eq!(
            DELETE_PEERS.sql(2),
            "DELETE FROM peers WHERE (user_id = ? AND torrent_id = ? AND peer_id = ?) OR \
             (user_id = ? AND torrent_id = ? AND peer_id = ?)"
        );
        let history = UPSERT_HISTORY.sql(ROWS_PER_STATEMENT);
        assert_eq!(history.matches('?').count(), ROWS_PER_STATEMENT * 16);
        assert_eq!(UPSERT_PEERS.sql(1).matches('?').count(), 15);
    }

    #[test]
    fn agents_are_cut_to_characters() {
        assert_eq!(fitted("qBittorrent/4.6.2", 64), "qBittorrent/4.6.2");
        assert_eq!(fitted("ééé", 2), "éé");
        assert_eq!(fitted(&"x".repeat(100), 64).len(), 64);
    }

    #[test]
    fn values_fit_their_columns() {
        assert_eq!(timestamp(0), 1);
        assert_eq!(timestamp(i64::MAX), 2_147_483_647);
        assert_eq!(int(u32::MAX), i32::MAX);
        assert_eq!(address("::ffff:10.1.2.3".parse().unwrap()), [10, 1, 2, 3]);
        assert_eq!(address("2001:db8::1".parse().unwrap()).len(), 16);
    }

    #[test]
    fn one_row_per_user_and_torrent() {
        let users = user_totals(&[
            UserUpdate {
                user_id: 2,
                uploaded: 5,
                downloaded: 1,
            },
            UserUpdate {
                user_id: 1,
                uploaded: 7,
                downloaded: 0,
            },
            UserUpdate {
                user_id: 2,
                uploaded: 3,
                downloaded: 4,
            },
        ]);
        assert_eq!(
            users,
            [
                UserUpdate {
                    user_id: 1,
                    uploaded: 7,
                    downloaded: 0
                },
                UserUpdate {
                    user_id: 2,
                    uploaded: 8,
                    downloaded: 5
                }
            ]
        );
        let torrents = torrent_figures(&[
            TorrentUpdate {
                torrent_id: 9,
                seeders: 1,
                leechers: 2,
                times_completed: 3,
                balance: -10,
            },
            TorrentUpdate {
                torrent_id: 9,
                seeders: 4,
                leechers: 0,
                times_completed: 4,
                balance: 25,
            },
        ]);
        assert_eq!(
            torrents,
            [TorrentUpdate {
                torrent_id: 9,
                seeders: 4,
                leechers: 0,
                times_completed: 4,
                balance: 15,
            }]
        );
    }
}
