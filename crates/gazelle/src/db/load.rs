//! Reading the site's rows, as Ocelot reads them at start and on SIGUSR1: enabled users
//! with their passkey, leech right and protection; torrents that have a leech statistics
//! row, with their leech type and snatches; the tokens not yet expired; the whitelist.
//! One transaction, so the four agree.
//!
//! Integers are read through `CAST(.. AS SIGNED)` and enums through `CAST(.. AS CHAR)`
//! (their labels), so that a site whose column types differ a little still loads. A row
//! shoal cannot hold (an id below zero, an info hash that is not 20 bytes, an empty
//! passkey) is left out and counted in a warning.

use shoal_site::mysql::{id, rows};
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::{Error, GazelleDb};
use crate::model::{LeechType, SiteData, Torrent, User};

const USERS: &str = "SELECT CAST(ID AS SIGNED) AS id, CAST(can_leech AS SIGNED) AS can_leech, \
     CAST(torrent_pass AS CHAR) AS passkey, \
     CAST((Visible = '0' OR IP = '127.0.0.1') AS SIGNED) AS protected \
     FROM users_main WHERE Enabled = '1' ORDER BY ID";

const TORRENTS: &str = "SELECT CAST(t.ID AS SIGNED) AS id, t.info_hash, \
     CAST(t.FreeTorrent AS CHAR) AS leech_type, CAST(tls.Snatched AS SIGNED) AS snatched \
     FROM torrents AS t JOIN torrents_leech_stats AS tls ON tls.TorrentID = t.ID ORDER BY t.ID";

const TOKENS: &str = "SELECT CAST(uf.UserID AS SIGNED) AS user_id, \
     CAST(uf.TorrentID AS SIGNED) AS torrent_id \
     FROM users_freeleeches AS uf JOIN torrents AS t ON t.ID = uf.TorrentID \
     WHERE uf.Expired = 0";

const WHITELIST: &str = "SELECT CAST(peer_id AS BINARY) AS prefix FROM xbt_client_whitelist \
     WHERE peer_id IS NOT NULL AND peer_id <> ''";

impl GazelleDb {
    /// Everything shoal keeps in memory.
    pub async fn load(&self) -> Result<SiteData, Error> {
        self.db.read(async |conn| read(conn).await).await
    }
}

async fn read(conn: &mut MySqlConnection) -> Result<SiteData, Error> {
    Ok(SiteData {
        users: rows(conn, "users_main", USERS, user).await?,
        torrents: rows(conn, "torrents", TORRENTS, torrent).await?,
        tokens: rows(conn, "users_freeleeches", TOKENS, |r| {
            Ok(id(r, "user_id")?.zip(id(r, "torrent_id")?))
        })
        .await?,
        whitelist: rows(conn, "xbt_client_whitelist", WHITELIST, |r| {
            Ok(Some(r.try_get::<Vec<u8>, _>("prefix")?))
        })
        .await?,
    })
}

/// A site id as the `u32` shoal holds; `None` if it is not one.
fn user(row: &MySqlRow) -> Result<Option<User>, Error> {
    let passkey: Option<String> = row.try_get("passkey")?;
    let (Some(id), Some(passkey)) = (id(row, "id")?, passkey.filter(|p| !p.is_empty())) else {
        return Ok(None);
    };
    let can_leech: i64 = row.try_get("can_leech")?;
    let protected: Option<i64> = row.try_get("protected")?;
    Ok(Some(User {
        id,
        passkey,
        can_leech: can_leech != 0,
        protected: protected.unwrap_or(0) != 0,
    }))
}

fn torrent(row: &MySqlRow) -> Result<Option<Torrent>, Error> {
    let Some(id) = id(row, "id")? else {
        return Ok(None);
    };
    let Ok(info_hash) = <[u8; 20]>::try_from(row.try_get::<Vec<u8>, _>("info_hash")?) else {
        return Ok(None);
    };
    let leech_type: Option<String> = row.try_get("leech_type")?;
    let snatched: i64 = row.try_get("snatched")?;
    Ok(Some(Torrent {
        id,
        info_hash,
        leech_type: LeechType::from_column(leech_type.as_deref().unwrap_or("0")),
        snatched: u32::try_from(snatched.max(0)).unwrap_or(u32::MAX),
    }))
}
