//! Reading the site's rows at start: what UNIT3D-Announce loads, in one consistent snapshot
//! (one transaction), so that the users' slot counts agree with the peers read beside them.
//!
//! Rows are streamed, not collected first: a busy site has millions of `peers` rows. Every
//! integer is read through `CAST(.. AS SIGNED/UNSIGNED)`, so that a site whose column is
//! `int` where UNIT3D's is `int unsigned` (or the reverse) still loads. A row shoal cannot
//! hold (an address of 7 bytes, an id below zero) is left out and counted in a warning;
//! it does not stop the start.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use shoal_accounts::from_columns;
use shoal_site::mysql::{id, rows};
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::{Error, Unit3dDb};
use crate::model::{Group, Peer, SiteData, Status, Torrent, User};

const GROUPS: &str = "SELECT CAST(id AS SIGNED) AS id, slug, \
     CAST(download_slots AS SIGNED) AS download_slots, \
     is_immune, is_freeleech, is_double_upload FROM `groups` ORDER BY id";

const USERS: &str = "SELECT CAST(id AS SIGNED) AS id, CAST(group_id AS SIGNED) AS group_id, \
     passkey, can_download, is_donor, is_lifetime \
     FROM users WHERE deleted_at IS NULL ORDER BY id";

/// Every torrent, the deleted ones too (their announces are refused as deleted, not as
/// unknown); of those sharing an info hash one is kept ([`one_per_info_hash`]).
const TORRENTS: &str = "SELECT CAST(id AS SIGNED) AS id, info_hash, \
     CAST(status AS SIGNED) AS status, CAST(free AS SIGNED) AS free, doubleup, \
     CAST(seeders AS SIGNED) AS seeders, CAST(leechers AS SIGNED) AS leechers, \
     CAST(times_completed AS SIGNED) AS times_completed, \
     CAST(deleted_at IS NOT NULL AS SIGNED) AS deleted \
     FROM torrents ORDER BY id";

const PEERS: &str = "SELECT CAST(user_id AS SIGNED) AS user_id, \
     CAST(torrent_id AS SIGNED) AS torrent_id, peer_id, ip, CAST(port AS SIGNED) AS port, \
     agent, CAST(uploaded AS UNSIGNED) AS uploaded, \
     CAST(downloaded AS UNSIGNED) AS downloaded, CAST(`left` AS UNSIGNED) AS remaining, \
     seeder, active, visible, connectable, \
     CAST(COALESCE(UNIX_TIMESTAMP(created_at), UNIX_TIMESTAMP(updated_at), 0) AS SIGNED) \
     AS created, \
     CAST(COALESCE(UNIX_TIMESTAMP(updated_at), 0) AS SIGNED) AS updated \
     FROM peers";

const BLACKLIST: &str = "SELECT peer_id_prefix FROM blacklist_clients";

const TOKENS: &str = "SELECT CAST(user_id AS SIGNED) AS user_id, \
     CAST(torrent_id AS SIGNED) AS torrent_id FROM freeleech_tokens";

/// UNIT3D keeps a personal freeleech as a row until its scheduled job deletes it: the
/// table has no end time, so every row is in force.
const PERSONAL: &str = "SELECT CAST(user_id AS SIGNED) AS user_id FROM personal_freeleeches";

const FEATURED: &str = "SELECT CAST(torrent_id AS SIGNED) AS torrent_id FROM featured_torrents";

impl Unit3dDb {
    /// Everything shoal keeps in memory: groups, users (deleted ones left out, with their
    /// active visible seeding and leeching clients counted from `peers` as the site counts
    /// them), torrents (deleted ones too, one per info hash), every peer, the
    /// blacklisted peer-id prefixes, the freeleech tokens, personal freeleech and featured
    /// torrents.
    pub async fn load(&self) -> Result<SiteData, Error> {
        self.db.read(async |conn| read_all(conn).await).await
    }
}

async fn read_all(conn: &mut MySqlConnection) -> Result<SiteData, Error> {
    let groups = rows(conn, "groups", GROUPS, group).await?;
    let mut slots: HashMap<u32, (u32, u32)> = HashMap::new();
    let peers = rows(conn, "peers", PEERS, |row| {
        let Some(user_id) = id(row, "user_id")? else {
            return Ok(None);
        };
        if row.try_get("active")? && row.try_get("visible")? {
            let counts = slots.entry(user_id).or_default();
            if row.try_get("seeder")? {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
        peer(row, user_id)
    })
    .await?;
    let mut users = rows(conn, "users", USERS, user).await?;
    for user in &mut users {
        (user.num_seeding, user.num_leeching) = slots.get(&user.id).copied().unwrap_or_default();
    }
    let (torrents, duplicates) =
        one_per_info_hash(rows(conn, "torrents", TORRENTS, torrent).await?);
    if duplicates > 0 {
        tracing::warn!(
            duplicates,
            "torrents sharing an info hash with another were left out (as UNIT3D-Announce \
             does: one not deleted and approved is kept, else one not deleted, else a \
             deleted one, the oldest of its kind)"
        );
    }
    let blacklisted_prefixes = rows(conn, "blacklist_clients", BLACKLIST, |row| {
        let prefix: Vec<u8> = row.try_get("peer_id_prefix")?;
        // An empty prefix would refuse every client.
        Ok((!prefix.is_empty()).then_some(prefix))
    })
    .await?;
    let freeleech_tokens = rows(conn, "freeleech_tokens", TOKENS, |row| {
        Ok(id(row, "user_id")?.zip(id(row, "torrent_id")?))
    })
    .await?;
    let personal_freeleech = rows(conn, "personal_freeleeches", PERSONAL, |row| {
        id(row, "user_id")
    })
    .await?;
    let featured = rows(conn, "featured_torrents", FEATURED, |row| {
        id(row, "torrent_id")
    })
    .await?;
    Ok(SiteData {
        groups,
        users,
        torrents,
        peers,
        blacklisted_prefixes: sorted(blacklisted_prefixes),
        freeleech_tokens: sorted(freeleech_tokens),
        personal_freeleech: sorted(personal_freeleech),
        featured: sorted(featured),
    })
}

fn sorted<T: Ord>(mut values: Vec<T>) -> Vec<T> {
    values.sort_unstable();
    values.dedup();
    values
}

/// A count as a `u32`: below zero is 0, beyond it saturates.
fn count(row: &MySqlRow, column: &str) -> Result<u32, Error> {
    let value: i64 = row.try_get(column)?;
    Ok(u32::try_from(value.max(0)).unwrap_or(u32::MAX))
}

/// Text the site keeps in a character column, read as bytes (whatever its collation).
fn text(row: &MySqlRow, column: &str) -> Result<String, Error> {
    let bytes: Vec<u8> = row.try_get(column)?;
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
}

fn group(row: &MySqlRow) -> Result<Option<Group>, Error> {
    let Some(id) = id(row, "id")? else {
        return Ok(None);
    };
    let slots: Option<i64> = row.try_get("download_slots")?;
    Ok(Some(from_columns!(row => Group {
        is_immune, is_freeleech, is_double_upload;
        id,
        slug: text(row, "slug")?,
        // The site refuses a leech once the count reaches the slots: below zero is none.
        download_slots: slots.map(|s| u32::try_from(s.max(0)).unwrap_or(u32::MAX)),
    })))
}

fn user(row: &MySqlRow) -> Result<Option<User>, Error> {
    let (Some(id), Some(group_id)) = (id(row, "id")?, id(row, "group_id")?) else {
        return Ok(None);
    };
    Ok(Some(from_columns!(row => User {
        can_download, is_donor, is_lifetime;
        id,
        group_id,
        passkey: text(row, "passkey")?,
        num_seeding: 0,
        num_leeching: 0,
    })))
}

fn torrent(row: &MySqlRow) -> Result<Option<Torrent>, Error> {
    let Some(id) = id(row, "id")? else {
        return Ok(None);
    };
    let Ok(info_hash) = <[u8; 20]>::try_from(row.try_get::<Vec<u8>, _>("info_hash")?) else {
        return Ok(None);
    };
    let status: i64 = row.try_get("status")?;
    let free: i64 = row.try_get("free")?;
    let doubleup: bool = row.try_get("doubleup")?;
    let deleted: i64 = row.try_get("deleted")?;
    Ok(Some(Torrent {
        id,
        info_hash,
        status: i16::try_from(status).map_or(Status::Unknown, Status::from_i16),
        is_deleted: deleted != 0,
        seeders: count(row, "seeders")?,
        leechers: count(row, "leechers")?,
        times_completed: count(row, "times_completed")?,
        // `free` is the percentage freed: 100 - min(free, 100) is charged.
        download_factor: 100 - u8::try_from(free.clamp(0, 100)).unwrap_or(100),
        upload_factor: if doubleup { 200 } else { 100 },
    }))
}

/// Of the torrents sharing an info hash, the one UNIT3D-Announce v0.3.1 loads
/// (`src/store/torrent.rs`, `TorrentStore::from_db`, lines 27-52, and
/// `src/store/infohash2id.rs` lines 36-52): one not deleted and approved, else one not
/// deleted, else a deleted one; of its kind the oldest (lowest id). The torrents kept, by
/// id, and how many were left out.
fn one_per_info_hash(all: Vec<Torrent>) -> (Vec<Torrent>, usize) {
    // Among deleted ones the status does not count.
    let rank = |t: &Torrent| {
        let pending = !t.is_deleted && t.status != Status::Approved;
        (t.is_deleted, pending, t.id)
    };
    let total = all.len();
    let mut best: HashMap<[u8; 20], Torrent> = HashMap::with_capacity(total);
    for t in all {
        match best.entry(t.info_hash) {
            Entry::Vacant(v) => {
                v.insert(t);
            }
            Entry::Occupied(mut o) => {
                if rank(&t) < rank(o.get()) {
                    o.insert(t);
                }
            }
        }
    }
    let mut kept: Vec<Torrent> = best.into_values().collect();
    kept.sort_unstable_by_key(|t| t.id);
    let left_out = total - kept.len();
    (kept, left_out)
}

fn peer(row: &MySqlRow, user_id: u32) -> Result<Option<Peer>, Error> {
    let Some(torrent_id) = id(row, "torrent_id")? else {
        return Ok(None);
    };
    let Ok(peer_id) = <[u8; 20]>::try_from(row.try_get::<Vec<u8>, _>("peer_id")?) else {
        return Ok(None);
    };
    let Some(ip) = address(&row.try_get::<Vec<u8>, _>("ip")?) else {
        return Ok(None);
    };
    let port: i64 = row.try_get("port")?;
    let Ok(port) = u16::try_from(port) else {
        return Ok(None);
    };
    Ok(Some(from_columns!(row => Peer {
        uploaded, downloaded, seeder, active, visible, connectable;
        user_id,
        torrent_id,
        peer_id,
        ip,
        port,
        agent: text(row, "agent")?,
        left: row.try_get("remaining")?,
        created_at: row.try_get("created")?,
        updated_at: row.try_get("updated")?,
    })))
}

/// `peers.ip` as UNIT3D-Announce writes it: the address's 4 or 16 bytes (what MySQL's
/// `INET6_ATON` gives). An IPv4 address mapped into IPv6 is the IPv4 address.
pub(super) fn address(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)).to_canonical()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{address, one_per_info_hash};
    use crate::model::{Status, Torrent};
    use std::net::IpAddr;

    fn torrent(id: u32, hash: u8, status: Status, is_deleted: bool) -> Torrent {
        Torrent {
            id,
            info_hash: [hash; 20],
            status,
            is_deleted,
            seeders: 0,
            leechers: 0,
            times_completed: 0,
            download_factor: 100,
            upload_factor: 100,
        }
    }

    /// UNIT3D-Announce v0.3.1, `src/store/torrent.rs` lines 27-52 (`TorrentStore::from_db`):
    /// per info hash, not deleted and approved first, then not deleted, then deleted; the
    /// lowest id of the kind.
    #[test]
    fn one_torrent_per_info_hash_as_unit3d_announce_chooses() {
        let all = vec![
            // Hash 1: an older pending upload and a newer approved one: the approved.
            torrent(1, 1, Status::Pending, false),
            torrent(2, 1, Status::Approved, false),
            // Hash 2: a deleted approved one and a pending one not deleted: the pending.
            torrent(3, 2, Status::Approved, true),
            torrent(4, 2, Status::Pending, false),
            // Hash 3: only deleted ones: the oldest, whatever its status (refused by name at
            // its announces).
            torrent(6, 3, Status::Approved, true),
            torrent(5, 3, Status::Rejected, true),
            // Hash 4: two approved: the oldest.
            torrent(8, 4, Status::Approved, false),
            torrent(7, 4, Status::Approved, false),
            // Hash 5: alone and deleted: kept.
            torrent(9, 5, Status::Approved, true),
        ];
        let (kept, left_out) = one_per_info_hash(all);
        let ids: Vec<u32> = kept.iter().map(|t| t.id).collect();
        assert_eq!(ids, [2, 4, 5, 7, 9]);
        assert_eq!(left_out, 4);
        assert!(kept[2].is_deleted && kept[4].is_deleted);
    }

    #[test]
    fn addresses_are_four_or_sixteen_bytes() {
        assert_eq!(address(&[10, 0, 0, 1]), Some("10.0.0.1".parse().unwrap()));
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let IpAddr::V6(octets) = v6 else {
            unreachable!()
        };
        assert_eq!(address(&octets.octets()), Some(v6));
        let mapped: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
        let IpAddr::V6(mapped) = mapped else {
            unreachable!()
        };
        assert_eq!(address(&mapped.octets()), Some("10.0.0.2".parse().unwrap()));
        assert_eq!(address(&[1, 2, 3, 4, 5, 6, 7]), None);
        assert_eq!(address(&[]), None);
    }
}
