//! What the site sends: the JSON bodies of its `PUT` and `DELETE` calls, field for field as
//! UNIT3D's `Unit3dAnnounce` service writes them, read into the site's rows
//! ([`crate::model`]).
//!
//! A body is read in two steps: serde reads its shape (a missing field, a wrong type or
//! bad JSON is serde_json's own message, with line and column), then each value that
//! needs more than a type is checked (an info hash of 40 hex digits, a passkey of 32
//! characters an announce URL can carry) with a message that names the field. Fields the
//! site adds in a later version are ignored, as UNIT3D-Announce ignores them.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use shoal_proto::path::is_passkey;

use crate::model::{Group, InfoHash, Status, Torrent, User};

/// The length of a UNIT3D passkey (`users.passkey`, 32 characters).
pub const PASSKEY_LEN: usize = 32;

/// `PUT /torrents`.
#[derive(Deserialize)]
pub(super) struct PutTorrent {
    id: u32,
    /// `torrents.status` (0 pending, 1 approved, 2 rejected, 3 postponed).
    status: i16,
    info_hash: String,
    is_deleted: bool,
    seeders: u32,
    leechers: u32,
    times_completed: u32,
    download_factor: u8,
    upload_factor: u8,
}

impl PutTorrent {
    pub(super) fn into_torrent(self) -> Result<Torrent, String> {
        Ok(Torrent {
            id: self.id,
            info_hash: info_hash(&self.info_hash)?,
            status: Status::from_i16(self.status),
            is_deleted: self.is_deleted,
            seeders: self.seeders,
            leechers: self.leechers,
            times_completed: self.times_completed,
            download_factor: self.download_factor,
            upload_factor: self.upload_factor,
        })
    }
}

/// `DELETE /torrents`. The site also sends the info hash; the id decides.
#[derive(Deserialize)]
pub(super) struct DeleteTorrent {
    pub(super) id: u32,
}

/// `PUT /users`.
#[derive(Deserialize)]
pub(super) struct PutUser {
    id: u32,
    group_id: u32,
    passkey: String,
    /// A changed passkey (newer sites): the user announces with it from now on.
    #[serde(default)]
    new_passkey: Option<String>,
    can_download: bool,
    /// Sites older than the donor feature do not send these: false.
    #[serde(default)]
    is_donor: bool,
    #[serde(default)]
    is_lifetime: bool,
    num_seeding: u32,
    num_leeching: u32,
}

impl PutUser {
    pub(super) fn into_user(self) -> Result<User, String> {
        passkey("passkey", &self.passkey)?;
        let passkey_now = match self.new_passkey {
            Some(new) => {
                passkey("new_passkey", &new)?;
                new
            }
            None => self.passkey,
        };
        Ok(User {
            id: self.id,
            group_id: self.group_id,
            passkey: passkey_now,
            can_download: self.can_download,
            is_donor: self.is_donor,
            is_lifetime: self.is_lifetime,
            num_seeding: self.num_seeding,
            num_leeching: self.num_leeching,
        })
    }
}

/// `DELETE /users`.
#[derive(Deserialize)]
pub(super) struct DeleteUser {
    id: u32,
    passkey: String,
}

impl DeleteUser {
    /// The user's id, once the passkey is one.
    pub(super) fn id(&self) -> Result<u32, String> {
        passkey("passkey", &self.passkey)?;
        Ok(self.id)
    }
}

/// `PUT /groups`.
#[derive(Deserialize)]
pub(super) struct PutGroup {
    id: u32,
    slug: String,
    /// `null`: no limit.
    download_slots: Option<u32>,
    is_immune: bool,
    is_freeleech: bool,
    is_double_upload: bool,
}

impl From<PutGroup> for Group {
    fn from(g: PutGroup) -> Group {
        Group {
            id: g.id,
            slug: g.slug,
            download_slots: g.download_slots,
            is_immune: g.is_immune,
            is_freeleech: g.is_freeleech,
            is_double_upload: g.is_double_upload,
        }
    }
}

/// `DELETE /groups`.
#[derive(Deserialize)]
pub(super) struct DeleteGroup {
    pub(super) id: u32,
}

/// `PUT` and `DELETE /blacklisted-agents`: a peer-id prefix, as a string (what the site
/// sends: `blacklist_clients.peer_id_prefix`) or as an array of bytes.
#[derive(Deserialize)]
pub(super) struct BlacklistedAgent {
    #[serde(deserialize_with = "bytes")]
    peer_id_prefix: Vec<u8>,
}

impl BlacklistedAgent {
    /// The prefix, unless it is empty (it would refuse every client).
    pub(super) fn prefix(&self) -> Result<&[u8], String> {
        if self.peer_id_prefix.is_empty() {
            return Err("peer_id_prefix is empty: it would refuse every client".into());
        }
        Ok(&self.peer_id_prefix)
    }
}

/// `PUT` and `DELETE /freeleech-tokens`.
#[derive(Deserialize)]
pub(super) struct FreeleechToken {
    pub(super) user_id: u32,
    pub(super) torrent_id: u32,
}

/// `PUT` and `DELETE /personal-freeleech`.
#[derive(Deserialize)]
pub(super) struct PersonalFreeleech {
    pub(super) user_id: u32,
}

/// `PUT` and `DELETE /featured-torrents`.
#[derive(Deserialize)]
pub(super) struct FeaturedTorrent {
    pub(super) torrent_id: u32,
}

/// An info hash written as 40 hex digits (either case).
pub fn info_hash(hex_digits: &str) -> Result<InfoHash, String> {
    let mut out = [0u8; 20];
    match hex::decode_to_slice(hex_digits, &mut out) {
        Ok(()) => Ok(out),
        Err(e) => Err(format!(
            "info_hash `{}` is not 40 hex digits: {e}",
            hex_digits.escape_debug()
        )),
    }
}

/// Checks a passkey: [`PASSKEY_LEN`] characters of those an announce URL carries as they
/// are (`A-Z a-z 0-9 - . _ ~`; UNIT3D's are 32 hex digits).
fn passkey(field: &str, key: &str) -> Result<(), String> {
    if key.len() != PASSKEY_LEN {
        return Err(format!(
            "{field} is {} bytes long, not {PASSKEY_LEN}",
            key.len()
        ));
    }
    if !is_passkey(key.as_bytes()) {
        return Err(format!(
            "{field} `{}` has characters other than A-Z a-z 0-9 - . _ ~",
            key.escape_debug()
        ));
    }
    Ok(())
}

/// Reads bytes from a JSON string (its UTF-8) or from an array of numbers 0 to 255.
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct Bytes;

    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string or an array of bytes")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::new();
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }

    d.deserialize_any(Bytes)
}
