//! One batch into the site's tables, with Ocelot's statements: `users_leech_stats` and
//! `torrents_leech_stats` added to, `xbt_files_users` upserted per (peer id, torrent,
//! user), `xbt_snatched` inserted, `users_freeleeches` added to. All in the caller's
//! transaction, [`CHUNK`] rows a statement.
//!
//! Where Ocelot fails its sites, shoal does not:
//! - `users_freeleeches.Time` is required and has no default: Ocelot's upsert names no
//!   value for it and is refused under a strict `sql_mode` every time, so a token's saved
//!   download never reaches the site. shoal writes `NOW()` (kept for an existing row).
//! - Every value is fitted to its column before it is bound: the agent cut to
//!   `useragent`'s width (Ocelot's whole peer batch fails on one agent past 51
//!   characters, and every later one behind it), counters and times to `int`, an address
//!   whose text is wider than its column (an IPv6 address in `varchar(15)`) written empty.
//! - Rows of users or torrents the site has removed since are left out of the tables
//!   with foreign keys (`users_leech_stats`, `torrents_leech_stats`): one such row would
//!   fail the whole batch at every retry.

use std::collections::HashSet;
use std::net::IpAddr;

use sqlx::query_builder::Separated;
use sqlx::{MySql, MySqlConnection, QueryBuilder};

use shoal_site::mysql::existing;

use super::{Error, Widths};
use crate::model::{Batch, PeerRow, Snatch};

/// Rows in one statement: at most 15 values a row, 15,000 in all, well inside the 65,535
/// placeholders MariaDB and MySQL take.
pub const CHUNK: usize = 1000;

/// What one write wrote, in rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub users: usize,
    pub torrents: usize,
    pub peers: usize,
    pub snatches: usize,
    pub tokens: usize,
    /// Rows left out: their user or torrent is gone from the site.
    pub skipped: usize,
    /// Addresses written empty because their text is wider than the column.
    pub addresses_too_wide: usize,
}

/// The look-ups of which users and torrents the site still has.
/// A multi-row upsert: `head` VALUES (..), (..) `tail`.
struct Upsert {
    head: &'static str,
    tail: &'static str,
}

const USER_GAINS: Upsert = Upsert {
    head: "INSERT INTO users_leech_stats (UserID, Uploaded, Downloaded) ",
    tail: " ON DUPLICATE KEY UPDATE Uploaded = Uploaded + VALUES(Uploaded), \
         Downloaded = Downloaded + VALUES(Downloaded)",
};

const TORRENT_FIGURES: Upsert = Upsert {
    head: "INSERT INTO torrents_leech_stats (TorrentID, Seeders, Leechers, Snatched, Balance) ",
    tail: " ON DUPLICATE KEY UPDATE Seeders = VALUES(Seeders), Leechers = VALUES(Leechers), \
         Snatched = Snatched + VALUES(Snatched), Balance = Balance + VALUES(Balance), \
         last_action = IF(VALUES(Seeders) > 0, NOW(), last_action)",
};

const PEERS: Upsert = Upsert {
    head: "INSERT INTO xbt_files_users (uid, fid, peer_id, active, uploaded, downloaded, \
         upspeed, downspeed, remaining, corrupt, timespent, announced, ip, useragent, mtime) ",
    tail: " ON DUPLICATE KEY UPDATE active = VALUES(active), uploaded = VALUES(uploaded), \
         downloaded = VALUES(downloaded), upspeed = VALUES(upspeed), \
         downspeed = VALUES(downspeed), remaining = VALUES(remaining), \
         corrupt = VALUES(corrupt), timespent = VALUES(timespent), \
         announced = VALUES(announced), ip = VALUES(ip), useragent = VALUES(useragent), \
         mtime = VALUES(mtime)",
};

const SNATCHES: Upsert = Upsert {
    head: "INSERT INTO xbt_snatched (uid, fid, tstamp, IP) ",
    tail: "",
};

const TOKENS: Upsert = Upsert {
    head: "INSERT INTO users_freeleeches (UserID, TorrentID, Time, Downloaded) ",
    tail: " ON DUPLICATE KEY UPDATE Downloaded = Downloaded + VALUES(Downloaded)",
};

/// Pushes each value as the row's next bound column, in order.
macro_rules! pushes {
    ($row:expr; $($value:expr),+ $(,)?) => {
        $row$(.push_bind($value))+
    };
}

pub(super) async fn run(
    conn: &mut MySqlConnection,
    batch: &Batch,
    widths: Widths,
) -> Result<Written, Error> {
    let mut w = Written::default();
    let user_ids: Vec<u32> = batch.users.iter().map(|u| u.user_id).collect();
    let (users, _) = existing(conn, "users_main", "ID", &user_ids).await?;
    let torrent_ids: Vec<u32> = batch.torrents.iter().map(|t| t.torrent_id).collect();
    let (torrents, _) = existing(conn, "torrents_leech_stats", "TorrentID", &torrent_ids).await?;

    let gains = kept(&batch.users, |u| u.user_id, &users);
    w.users = gains.len();
    insert(conn, &USER_GAINS, &gains, |row, u| {
        pushes!(row; u.user_id, big(u.uploaded), big(u.downloaded));
    })
    .await?;

    let figures = kept(&batch.torrents, |t| t.torrent_id, &torrents);
    w.torrents = figures.len();
    insert(conn, &TORRENT_FIGURES, &figures, |row, t| {
        pushes!(row; t.torrent_id, int(u64::from(t.seeders)), int(u64::from(t.leechers)),
                int(u64::from(t.snatched)), t.balance);
    })
    .await?;
    w.skipped = (batch.users.len() - w.users) + (batch.torrents.len() - w.torrents);

    let too_wide = &mut w.addresses_too_wide;
    insert(conn, &PEERS, &batch.peers, |row, p: &PeerRow| {
        let ip = address(p.ip, widths.peer_ip, too_wide);
        pushes!(row; p.user_id, p.torrent_id, p.peer_id.to_vec(), p.active, big(p.uploaded),
                big(p.downloaded), int(p.upspeed), int(p.downspeed), big(p.remaining),
                big(p.corrupt), int(p.timespent), int(u64::from(p.announced)), ip,
                fitted(&p.useragent, widths.useragent),
                int(u64::try_from(p.mtime).unwrap_or(0)));
    })
    .await?;
    w.peers = batch.peers.len();

    insert(conn, &SNATCHES, &batch.snatches, |row, s: &Snatch| {
        let ip = address(s.ip, widths.snatch_ip, too_wide);
        pushes!(row; s.user_id, s.torrent_id, int(u64::try_from(s.at).unwrap_or(0)), ip);
    })
    .await?;
    w.snatches = batch.snatches.len();

    insert(conn, &TOKENS, &batch.tokens, |row, t| {
        row.push_bind(t.user_id)
            .push_bind(t.torrent_id)
            .push("NOW()")
            .push_bind(big(t.downloaded));
    })
    .await?;
    w.tokens = batch.tokens.len();
    Ok(w)
}

/// `rows` as `upsert` says, [`CHUNK`] rows a statement, each row's values
/// pushed by `bind`.
async fn insert<T>(
    conn: &mut MySqlConnection,
    upsert: &Upsert,
    rows: &[T],
    mut bind: impl FnMut(&mut Separated<'_, '_, MySql, &'static str>, &T),
) -> Result<(), Error> {
    for chunk in rows.chunks(CHUNK) {
        let mut q = QueryBuilder::<MySql>::new(upsert.head);
        q.push_values(chunk, |mut row, item| bind(&mut row, item));
        q.push(upsert.tail);
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// The rows of `rows` whose id (`id`) the site still has (`present`), in id order (the
/// order every writer takes the rows' locks in).
fn kept<'a, T>(rows: &'a [T], id: impl Fn(&T) -> u32, present: &HashSet<u32>) -> Vec<&'a T> {
    let mut kept: Vec<&T> = rows.iter().filter(|r| present.contains(&id(r))).collect();
    kept.sort_by_key(|r| id(r));
    kept
}

/// A byte count as a signed `bigint` holds it.
fn big(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A count as a signed `int` holds it.
fn int(v: u64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// `text` cut to `width` characters (a `varchar` counts characters, not bytes).
pub fn fitted(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

/// An address as its column holds it: its text, or empty when protected (`None`) or when
/// the text is wider than the column (counted in `too_wide`).
fn address(ip: Option<IpAddr>, width: usize, too_wide: &mut usize) -> String {
    let Some(ip) = ip else {
        return String::new();
    };
    let text = ip.to_canonical().to_string();
    if text.len() > width {
        *too_wide += 1;
        return String::new();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_fitted_to_their_columns() {
        assert_eq!(fitted(&"x".repeat(80), 51).len(), 51);
        assert_eq!(fitted("ééé", 2), "éé");
        assert_eq!(int(u64::MAX), i32::MAX);
        assert_eq!(big(u64::MAX), i64::MAX);
        let mut wide = 0;
        let v4: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(address(Some(v4), 15, &mut wide), "10.1.2.3");
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(address(Some(mapped), 15, &mut wide), "10.1.2.3");
        let short: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(address(Some(short), 15, &mut wide), "2001:db8::1");
        let long: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(address(Some(long), 15, &mut wide), "");
        assert_eq!(address(Some(long), 39, &mut wide), "2001:db8:1:2:3:4:5:6");
        assert_eq!(address(None, 15, &mut wide), "");
        assert_eq!(wide, 1);
    }
}
