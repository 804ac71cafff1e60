//! Reading the site's rows: what NexusPHP's announce reads (`docs/nexusphp.md`, "Where
//! the values live"), in one transaction. Integers are read through `CAST(.. AS SIGNED)`,
//! flags (`enum('yes','no')`) as `col = 'yes'`, times as Unix seconds in the site's zone
//! (`UNIX_TIMESTAMP`, 0 for null). A row shoal cannot hold (an info hash not of 20 bytes, a
//! negative id) is left out with a warning by [`rows`].

use std::collections::HashMap;
use std::net::IpAddr;

use shoal_site::mysql::{id, rows};
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::Error;
use crate::agent::{ExceptionRow, FamilyRow};
use crate::model::{
    setting_names, GlobalPromotion, Peer, Settings, SiteData, SnatchState, Torrent, User,
};

/// Seconds since the epoch of a `datetime` column, 0 for null.
macro_rules! unix {
    ($col:literal) => {
        concat!("CAST(COALESCE(UNIX_TIMESTAMP(", $col, "), 0) AS SIGNED)")
    };
}

const USERS: &str = concat!(
    "SELECT CAST(id AS SIGNED) AS id, passkey, CAST(class AS SIGNED) AS class, \
     CAST(enabled = 'yes' AS SIGNED) AS enabled, CAST(parked = 'yes' AS SIGNED) AS parked, \
     CAST(downloadpos = 'yes' AS SIGNED) AS downloadpos, \
     CAST(uploaded AS UNSIGNED) AS uploaded, CAST(downloaded AS UNSIGNED) AS downloaded, \
     CAST(donor = 'yes' AS SIGNED) AS donor, ",
    unix!("donoruntil"),
    " AS donoruntil, CAST(clientselect AS SIGNED) AS clientselect, \
     CAST(showclienterror = 'yes' AS SIGNED) AS showclienterror, \
     CAST(tracker_url_id AS SIGNED) AS tracker_url_id \
     FROM users WHERE passkey <> '' ORDER BY id"
);

/// With its category's section (`A:178`); by id, so that of two rows with one hash the
/// older wins (the column is unique in NexusPHP's schema).
const TORRENTS: &str = concat!(
    "SELECT CAST(t.id AS SIGNED) AS id, t.info_hash, CAST(t.size AS UNSIGNED) AS size, \
     CAST(t.owner AS SIGNED) AS owner, CAST(t.sp_state AS SIGNED) AS sp_state, \
     CAST(t.promotion_time_type AS SIGNED) AS promotion_time_type, ",
    unix!("t.promotion_until"),
    " AS promotion_until, ",
    unix!("t.added"),
    " AS added, CAST(t.seeders AS SIGNED) AS seeders, \
     CAST(t.leechers AS SIGNED) AS leechers, \
     CAST(t.times_completed AS SIGNED) AS times_completed, \
     CAST(t.banned = 'yes' AS SIGNED) AS banned, CAST(t.hr AS SIGNED) AS hr, \
     CAST(t.approval_status AS SIGNED) AS approval_status, CAST(t.price AS SIGNED) AS price, \
     CAST(c.mode AS SIGNED) AS mode \
     FROM torrents t LEFT JOIN categories c ON c.id = t.category ORDER BY t.id"
);

const PEERS: &str = concat!(
    "SELECT CAST(torrent AS SIGNED) AS torrent, CAST(userid AS SIGNED) AS userid, peer_id, \
     ip, ipv4, ipv6, CAST(port AS SIGNED) AS port, CAST(uploaded AS UNSIGNED) AS uploaded, \
     CAST(downloaded AS UNSIGNED) AS downloaded, CAST(to_go AS UNSIGNED) AS to_go, \
     CAST(seeder = 'yes' AS SIGNED) AS seeder, ",
    unix!("started"),
    " AS started, ",
    unix!("last_action"),
    " AS last_action, ",
    unix!("prev_action"),
    " AS prev_action, agent, CAST(finishedat AS SIGNED) AS finishedat FROM peers"
);

const SNATCHED: &str = "SELECT CAST(s.userid AS SIGNED) AS userid, \
     CAST(s.torrentid AS SIGNED) AS torrentid, CAST(s.uploaded AS UNSIGNED) AS uploaded, \
     CAST(s.downloaded AS UNSIGNED) AS downloaded, \
     CAST(h.id IS NOT NULL AS SIGNED) AS hr \
     FROM snatched s LEFT JOIN hit_and_runs h ON h.uid = s.userid AND h.torrent_id = s.torrentid";

const PROMOTIONS: &str = concat!(
    "SELECT CAST(id AS SIGNED) AS id, CAST(global_sp_state AS SIGNED) AS state, ",
    unix!("begin"),
    " AS begin, ",
    unix!("deadline"),
    " AS deadline FROM torrents_state"
);

const FAMILIES: &str = "SELECT CAST(id AS SIGNED) AS id, family, start_name, \
     peer_id_pattern, CAST(peer_id_match_num AS SIGNED) AS peer_id_match_num, \
     CAST(peer_id_matchtype AS CHAR) AS peer_id_matchtype, peer_id_start, agent_pattern, \
     CAST(agent_match_num AS SIGNED) AS agent_match_num, \
     CAST(agent_matchtype AS CHAR) AS agent_matchtype, agent_start, \
     CAST(exception = 'yes' AS SIGNED) AS exception, \
     CAST(allowhttps = 'yes' AS SIGNED) AS allowhttps FROM agent_allowed_family ORDER BY id";

const EXCEPTIONS: &str = "SELECT CAST(id AS SIGNED) AS id, \
     CAST(family_id AS SIGNED) AS family_id, name, peer_id, agent, \
     COALESCE(comment, '') AS comment FROM agent_allowed_exception ORDER BY id";

const BOUGHT: &str = "SELECT DISTINCT CAST(uid AS SIGNED) AS uid, \
     CAST(torrent_id AS SIGNED) AS torrent_id FROM torrent_buy_logs";

fn flag(row: &MySqlRow, col: &str) -> Result<bool, Error> {
    Ok(row.try_get::<Option<i64>, _>(col)?.unwrap_or(0) != 0)
}

fn number(row: &MySqlRow, col: &str) -> Result<i64, Error> {
    Ok(row.try_get::<Option<i64>, _>(col)?.unwrap_or(0))
}

fn bytes(row: &MySqlRow, col: &str) -> Result<u64, Error> {
    Ok(row.try_get::<Option<u64>, _>(col)?.unwrap_or(0))
}

fn text(row: &MySqlRow, col: &str) -> Result<String, Error> {
    Ok(row.try_get::<Option<String>, _>(col)?.unwrap_or_default())
}

/// A time, `None` for null or the zero date.
fn time(row: &MySqlRow, col: &str) -> Result<Option<i64>, Error> {
    Ok(Some(number(row, col)?).filter(|t| *t > 0))
}

fn small(v: i64) -> u8 {
    u8::try_from(v.max(0)).unwrap_or(u8::MAX)
}

fn count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// A row keyed by its `id` column, made by `build`; none without an id.
fn by_id<T>(
    row: &MySqlRow,
    build: impl FnOnce(u32) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    id(row, "id")?.map(build).transpose()
}

fn user(row: &MySqlRow) -> Result<Option<User>, Error> {
    by_id(row, |id| {
        Ok(User {
            id,
            passkey: text(row, "passkey")?,
            class: small(number(row, "class")?),
            enabled: flag(row, "enabled")?,
            parked: flag(row, "parked")?,
            can_download: flag(row, "downloadpos")?,
            uploaded: bytes(row, "uploaded")?,
            downloaded: bytes(row, "downloaded")?,
            donor: flag(row, "donor")?,
            donor_until: time(row, "donoruntil")?,
            client_select: count(number(row, "clientselect")?),
            show_client_error: flag(row, "showclienterror")?,
            tracker_url_id: count(number(row, "tracker_url_id")?),
        })
    })
}

fn torrent(row: &MySqlRow) -> Result<Option<Torrent>, Error> {
    let Some(id) = id(row, "id")? else {
        return Ok(None);
    };
    let hash: Option<Vec<u8>> = row.try_get("info_hash")?;
    let Some(info_hash) = hash.and_then(|h| <[u8; 20]>::try_from(h.as_slice()).ok()) else {
        return Ok(None);
    };
    Ok(Some(Torrent {
        id,
        info_hash,
        size: bytes(row, "size")?,
        owner: count(number(row, "owner")?),
        sp_state: small(number(row, "sp_state")?),
        promotion_time_type: small(number(row, "promotion_time_type")?),
        promotion_until: time(row, "promotion_until")?,
        added: number(row, "added")?,
        seeders: count(number(row, "seeders")?),
        leechers: count(number(row, "leechers")?),
        times_completed: count(number(row, "times_completed")?),
        banned: flag(row, "banned")?,
        hr: number(row, "hr")? == 1,
        approval_status: i32::try_from(number(row, "approval_status")?).unwrap_or(0),
        price: number(row, "price")?,
        mode: row
            .try_get::<Option<i64>, _>("mode")?
            .and_then(|m| u32::try_from(m).ok()),
    }))
}

fn peer(row: &MySqlRow) -> Result<Option<(u32, Peer)>, Error> {
    let (Some(tid), Some(uid)) = (id(row, "torrent")?, id(row, "userid")?) else {
        return Ok(None);
    };
    let pid: Vec<u8> = row.try_get("peer_id")?;
    let Ok(peer_id) = <[u8; 20]>::try_from(pid.as_slice()) else {
        return Ok(None);
    };
    let (ipv4, ipv6) = (text(row, "ipv4")?, text(row, "ipv6")?);
    let Ok(ip) = text(row, "ip")?.parse::<IpAddr>() else {
        return Ok(None);
    };
    let Ok(port) = u16::try_from(number(row, "port")?) else {
        return Ok(None);
    };
    let last_action = number(row, "last_action")?;
    Ok(Some((
        tid,
        Peer {
            user_id: uid,
            peer_id,
            ip,
            ipv4: ipv4.parse().ok(),
            ipv6: ipv6.parse().ok(),
            port,
            uploaded: bytes(row, "uploaded")?,
            downloaded: bytes(row, "downloaded")?,
            left: bytes(row, "to_go")?,
            seeder: flag(row, "seeder")?,
            started: time(row, "started")?.unwrap_or(last_action),
            last_action,
            prev_action: time(row, "prev_action")?,
            agent: text(row, "agent")?,
            finished_at: number(row, "finishedat")?,
        },
    )))
}

fn family(row: &MySqlRow) -> Result<Option<FamilyRow>, Error> {
    by_id(row, |id| {
        Ok(FamilyRow {
            id,
            family: text(row, "family")?,
            start_name: text(row, "start_name")?,
            peer_id_pattern: text(row, "peer_id_pattern")?,
            peer_id_match_num: small(number(row, "peer_id_match_num")?),
            peer_id_matchtype: text(row, "peer_id_matchtype")?,
            peer_id_start: text(row, "peer_id_start")?,
            agent_pattern: text(row, "agent_pattern")?,
            agent_match_num: small(number(row, "agent_match_num")?),
            agent_matchtype: text(row, "agent_matchtype")?,
            agent_start: text(row, "agent_start")?,
            exception: flag(row, "exception")?,
            allow_https: flag(row, "allowhttps")?,
        })
    })
}

fn exception(row: &MySqlRow) -> Result<Option<ExceptionRow>, Error> {
    let (Some(id), Some(family_id)) = (id(row, "id")?, id(row, "family_id")?) else {
        return Ok(None);
    };
    Ok(Some(ExceptionRow {
        id,
        family_id,
        name: text(row, "name")?,
        peer_id: text(row, "peer_id")?,
        agent: text(row, "agent")?,
        comment: text(row, "comment")?,
    }))
}

/// The settings rows shoal reads (`autoload = 'yes'`, `app/Models/Setting.php:55-66`).
async fn settings(conn: &mut MySqlConnection) -> Result<Settings, Error> {
    let names = setting_names();
    let places = vec!["?"; names.len()].join(", ");
    let sql = format!(
        "SELECT name, COALESCE(value, '') AS value FROM settings \
         WHERE autoload = 'yes' AND name IN ({places})"
    );
    let mut query = sqlx::query(&sql);
    for n in &names {
        query = query.bind(n);
    }
    let mut pairs = Vec::new();
    for row in query.fetch_all(&mut *conn).await? {
        pairs.push((text(&row, "name")?, text(&row, "value")?));
    }
    Ok(Settings::from_rows(
        pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
    ))
}

/// What the announce reads; with `everything`, the clients and snatches too, and each
/// torrent's seeders and leechers counted from its clients (what shoal writes after).
pub(super) async fn read(conn: &mut MySqlConnection, everything: bool) -> Result<SiteData, Error> {
    let settings = settings(conn).await?;
    let users = rows(conn, "users", USERS, user).await?;
    let mut torrents = rows(conn, "torrents", TORRENTS, torrent).await?;
    let promotions = rows(conn, "torrents_state", PROMOTIONS, |row| {
        Ok(Some(GlobalPromotion {
            id: u64::try_from(number(row, "id")?).unwrap_or(0),
            state: small(number(row, "state")?),
            begin: time(row, "begin")?,
            deadline: time(row, "deadline")?,
        }))
    })
    .await?;
    let families = rows(conn, "agent_allowed_family", FAMILIES, family).await?;
    let exceptions = rows(conn, "agent_allowed_exception", EXCEPTIONS, exception).await?;
    let bought = rows(conn, "torrent_buy_logs", BOUGHT, |row| {
        Ok(id(row, "uid")?.zip(id(row, "torrent_id")?))
    })
    .await?;
    let (mut peers, mut snatches) = (Vec::new(), Vec::new());
    if everything {
        peers = rows(conn, "peers", PEERS, peer).await?;
        let mut counts: HashMap<u32, (u32, u32)> = HashMap::new();
        for (tid, p) in &peers {
            let c = counts.entry(*tid).or_default();
            if p.seeder {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        for t in &mut torrents {
            (t.seeders, t.leechers) = counts.get(&t.id).copied().unwrap_or_default();
        }
        snatches = rows(conn, "snatched", SNATCHED, |row| {
            let key = id(row, "userid")?.zip(id(row, "torrentid")?);
            Ok(key.map(|k| {
                let state = SnatchState {
                    exists: true,
                    uploaded: bytes(row, "uploaded").unwrap_or(0),
                    downloaded: bytes(row, "downloaded").unwrap_or(0),
                    hit_and_run: flag(row, "hr").unwrap_or(false),
                };
                (k, state)
            }))
        })
        .await?;
    }
    Ok(SiteData {
        settings,
        users,
        torrents,
        peers,
        promotions,
        families,
        exceptions,
        snatches,
        bought,
    })
}
