//! The bucket feeds: how a node's peer changes, of every protocol, travel through Redis so
//! that each round a node writes only what changed and reads only what the other nodes
//! changed since it last looked (never its own peers, never a peer it already holds
//! unchanged).
//!
//! # Layout (Redis Cluster: one bucket, one slot)
//!
//! Torrents fall into [`BUCKETS`] buckets by one byte of their info hash; a bucket's keys
//! share the hash tag `{b<xx>}`, so they live in one slot and one script may touch them
//! all. Per bucket:
//!
//! - `<prefix>:{b<xx>}:versions`: a hash, field = node, value = how many rounds of changes
//!   that node has written to the bucket (its version).
//! - `<prefix>:{b<xx>}:log:<node>`: a list, the node's last [`LOG_ROUNDS`] rounds of
//!   changes, one entry (a string of [`Record`]s) per round that had any.
//! - `<prefix>:{b<xx>}:peers:<node>`: a hash, the node's current view as the log built it:
//!   field = info hash (20 bytes) and the peer's [`Endpoint`] (a UDP/HTTP peer's wire
//!   address, 6 or 18 bytes; a WebTorrent peer's peer id, 20), value = expiry (Unix
//!   seconds, u32 big-endian), seeder (1 byte), peer id (20); field = info hash alone,
//!   value = the node's completed total (u32 big-endian); in private mode, field = torrent
//!   id, user id (u64 big-endian each) and peer id (36 bytes), value = the client's
//!   accounting record after its last announce to the node ([`ClientValue`], 21 bytes).
//!   Client records fall into the bucket of their torrent id ([`client_bucket`]).
//!
//! A reader sends the versions it holds; for each other node whose version moved, the script
//! answers the log entries it has not seen, or, if they are gone from the log (a reader far
//! behind, a restart), the node's whole hash. A node's keys live the peer lifetime after its
//! last write, and each value carries its expiry, so a node killed with SIGKILL vanishes
//! from everyone's answers within the peer lifetime even though nobody deletes its fields.
//!
//! The field lengths (20, 26, 36, 38, 40) tell the kinds of a hash's fields apart; a log
//! entry's records each start with a kind byte. The script is `feed.lua`, beside this file.

use shoal_proto::{CompactPeerV4, CompactPeerV6, InfoHash, PeerId};
use shoal_swarm::journal::AnyAddr;

/// A torrent's peer, as this node and the others know it.
pub type PeerKey = (InfoHash, Endpoint);
/// A private-mode client: torrent id, user id, peer id.
pub type ClientKey = (u64, u64, PeerId);

/// Buckets the torrents are spread over: one script call per bucket per round, whatever the
/// number of torrents; enough of them that a Redis Cluster's masters share them evenly.
pub const BUCKETS: usize = 256;

/// Rounds of changes a node's log keeps: a reader that missed fewer rounds (a master down
/// for a while) catches up from the log, one further behind reads the node's whole hash.
pub const LOG_ROUNDS: usize = 32;

/// Seconds a node's bucket keys live after its last write to them: the peer lifetime, at
/// least a minute.
pub fn key_lifetime(peer_ttl: u32) -> u64 {
    u64::from(peer_ttl).max(60)
}

/// The bucket of a torrent.
#[inline]
pub fn bucket_of(info_hash: &InfoHash) -> usize {
    // Info hashes are SHA-1 (or SHA-256) output: any byte is uniform.
    usize::from(info_hash.0[11]) % BUCKETS
}

/// The bucket of a private-mode client record: by torrent id (a hybrid torrent's two info
/// hashes share one id, so one record).
#[inline]
pub fn client_bucket(torrent_id: u64) -> usize {
    (torrent_id % BUCKETS as u64) as usize
}

/// The keys' common part for one bucket, `<prefix>:{b<xx>}`.
pub fn bucket_base(prefix: &str, bucket: usize) -> String {
    format!("{prefix}:{{b{bucket:02x}}}")
}

/// A key of the slot a torrent's bucket lives in (the versions hash).
pub fn versions_key(prefix: &str, info_hash: &InfoHash) -> String {
    format!("{}:versions", bucket_base(prefix, bucket_of(info_hash)))
}

/// How a peer is reached: a UDP or HTTP peer by its address, a WebTorrent peer through the
/// tracker that serves its connection, so by its peer id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    V4(CompactPeerV4),
    V6(CompactPeerV6),
    WebTorrent(PeerId),
}

impl From<AnyAddr> for Endpoint {
    fn from(addr: AnyAddr) -> Self {
        match addr {
            AnyAddr::V4(a) => Endpoint::V4(a),
            AnyAddr::V6(a) => Endpoint::V6(a),
        }
    }
}

/// What a node says of one of its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerValue {
    /// Unix seconds after which the peer is gone.
    pub expires: u32,
    pub seeder: bool,
    pub peer_id: PeerId,
}

/// What a node says of one private-mode client (one peer id of one user on one torrent):
/// its accounting record after its last announce there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientValue {
    /// The client's `uploaded` and `downloaded` as the record keeps them.
    pub uploaded: u64,
    pub downloaded: u64,
    /// When it announced (Unix seconds).
    pub seen: u32,
    pub seeding: bool,
    /// Its announce was `started`.
    pub started: bool,
    /// Its announce was `stopped`: the session ended.
    pub ended: bool,
}

/// One change in a node's log, or one field of its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A peer announced (`Some`) or left (`None`).
    Peer {
        info_hash: InfoHash,
        endpoint: Endpoint,
        value: Option<PeerValue>,
    },
    /// The node's completed total for a torrent.
    Completed { info_hash: InfoHash, total: u32 },
    /// A private-mode client's record (`Some`), or its field taken out of the node's hash
    /// (`None`: the record is old enough to be of no use).
    Client {
        torrent_id: u64,
        user_id: u64,
        peer_id: PeerId,
        value: Option<ClientValue>,
    },
}

// The kind byte each record of a log entry starts with (`feed.lua` reads the same numbers).
/// An IPv4 peer announced: its address (6 bytes), then a [`PeerValue`].
const SET_V4: u8 = 1;
/// An IPv6 peer announced: its address (18 bytes), then a [`PeerValue`].
const SET_V6: u8 = 2;
/// An IPv4 peer left: its address alone.
const DEL_V4: u8 = 3;
/// An IPv6 peer left: its address alone.
const DEL_V6: u8 = 4;
/// The node's completed total of a torrent: 4 bytes after the info hash.
const COMPLETED: u8 = 5;
/// A private-mode client's record: 36 bytes of field (no info hash), then a [`ClientValue`].
const SET_CLIENT: u8 = 6;
/// A client record taken out of the node's hash: its field alone.
const DEL_CLIENT: u8 = 7;
/// A WebTorrent peer announced: its peer id (20 bytes), then a [`PeerValue`].
const SET_WEBTORRENT: u8 = 8;
/// A WebTorrent peer left: its peer id alone.
const DEL_WEBTORRENT: u8 = 9;

/// A client field after the 20 bytes every field starts with (36 in all).
const CLIENT_FIELD_REST: usize = 16;

impl ClientValue {
    /// Bytes of the value as a hash holds it.
    const LEN: usize = 21;

    /// Appends the value as a hash holds it.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.uploaded.to_be_bytes());
        out.extend_from_slice(&self.downloaded.to_be_bytes());
        out.extend_from_slice(&self.seen.to_be_bytes());
        out.push(u8::from(self.seeding) | u8::from(self.started) << 1 | u8::from(self.ended) << 2);
    }

    fn read(v: &[u8]) -> Option<Self> {
        if v.len() != ClientValue::LEN || v[20] > 7 {
            return None;
        }
        Some(Self {
            uploaded: u64::from_be_bytes(v[..8].try_into().ok()?),
            downloaded: u64::from_be_bytes(v[8..16].try_into().ok()?),
            seen: u32::from_be_bytes(v[16..20].try_into().ok()?),
            seeding: v[20] & 1 != 0,
            started: v[20] & 2 != 0,
            ended: v[20] & 4 != 0,
        })
    }
}

impl PeerValue {
    /// Bytes of the value as a hash holds it.
    const LEN: usize = 25;

    /// Appends the value as a hash holds it.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.expires.to_be_bytes());
        out.push(u8::from(self.seeder));
        out.extend_from_slice(&self.peer_id.0);
    }

    fn read(v: &[u8]) -> Option<Self> {
        if v.len() != PeerValue::LEN {
            return None;
        }
        Some(Self {
            expires: u32::from_be_bytes(v[..4].try_into().ok()?),
            seeder: match v[4] {
                0 => false,
                1 => true,
                _ => return None,
            },
            peer_id: PeerId(v[5..].try_into().ok()?),
        })
    }
}

impl Record {
    /// Appends the record to a log entry: a kind byte, the field, the value.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Record::Peer {
                info_hash,
                endpoint,
                value,
            } => {
                let kind = match (endpoint, value) {
                    (Endpoint::V4(_), Some(_)) => SET_V4,
                    (Endpoint::V6(_), Some(_)) => SET_V6,
                    (Endpoint::WebTorrent(_), Some(_)) => SET_WEBTORRENT,
                    (Endpoint::V4(_), None) => DEL_V4,
                    (Endpoint::V6(_), None) => DEL_V6,
                    (Endpoint::WebTorrent(_), None) => DEL_WEBTORRENT,
                };
                out.push(kind);
                out.extend_from_slice(&info_hash.0);
                match endpoint {
                    Endpoint::V4(a) => out.extend_from_slice(&a.0),
                    Endpoint::V6(a) => out.extend_from_slice(&a.0),
                    Endpoint::WebTorrent(p) => out.extend_from_slice(&p.0),
                }
                if let Some(v) = value {
                    v.write(out);
                }
            }
            Record::Completed { info_hash, total } => {
                out.push(COMPLETED);
                out.extend_from_slice(&info_hash.0);
                out.extend_from_slice(&total.to_be_bytes());
            }
            Record::Client {
                torrent_id,
                user_id,
                peer_id,
                value,
            } => {
                out.push(if value.is_some() {
                    SET_CLIENT
                } else {
                    DEL_CLIENT
                });
                out.extend_from_slice(&torrent_id.to_be_bytes());
                out.extend_from_slice(&user_id.to_be_bytes());
                out.extend_from_slice(&peer_id.0);
                if let Some(v) = value {
                    v.write(out);
                }
            }
        }
    }

    /// Reads a log entry's records in order; `None` at the first malformed one.
    pub fn read_log(mut entry: &[u8], mut each: impl FnMut(Record)) -> Option<()> {
        while let Some((&kind, rest)) = entry.split_first() {
            let addr_len = match kind {
                SET_V4 | DEL_V4 => 6,
                SET_V6 | DEL_V6 => 18,
                SET_WEBTORRENT | DEL_WEBTORRENT => 20,
                COMPLETED => 0,
                SET_CLIENT | DEL_CLIENT => CLIENT_FIELD_REST,
                _ => return None,
            };
            let value_len = match kind {
                SET_V4 | SET_V6 | SET_WEBTORRENT => PeerValue::LEN,
                COMPLETED => 4,
                SET_CLIENT => ClientValue::LEN,
                _ => 0,
            };
            let end = 20 + addr_len + value_len;
            if rest.len() < end {
                return None;
            }
            let (field, value) = rest[..end].split_at(20 + addr_len);
            each(Self::from_field(field, (value_len > 0).then_some(value))?);
            entry = &rest[end..];
        }
        Some(())
    }

    /// One field of a node's hash and its value (`None`: a delete, in a log).
    pub fn from_field(field: &[u8], value: Option<&[u8]>) -> Option<Self> {
        if field.len() == 20 + CLIENT_FIELD_REST {
            return Some(Record::Client {
                torrent_id: u64::from_be_bytes(field[..8].try_into().ok()?),
                user_id: u64::from_be_bytes(field[8..16].try_into().ok()?),
                peer_id: PeerId(field[16..].try_into().ok()?),
                value: match value {
                    Some(v) => Some(ClientValue::read(v)?),
                    None => None,
                },
            });
        }
        let info_hash = InfoHash(field.get(..20)?.try_into().ok()?);
        let endpoint = match field.len() {
            20 => {
                let total = u32::from_be_bytes(value?.try_into().ok()?);
                return Some(Record::Completed { info_hash, total });
            }
            26 => Endpoint::V4(CompactPeerV4(field[20..].try_into().ok()?)),
            38 => Endpoint::V6(CompactPeerV6(field[20..].try_into().ok()?)),
            40 => Endpoint::WebTorrent(PeerId(field[20..].try_into().ok()?)),
            _ => return None,
        };
        Some(Record::Peer {
            info_hash,
            endpoint,
            value: match value {
                Some(v) => Some(PeerValue::read(v)?),
                None => None,
            },
        })
    }
}

/// One node's round for one bucket. KEYS: the versions hash, this node's log, this node's
/// hash. ARGV: the bucket's key base, node, key lifetime (seconds), log length, this
/// node's log entry for the round ("" if none), then (node, version) pairs this node holds.
/// Writes the entry (log and hash), then answers this node's own version (0: none), then,
/// for each other node whose version moved, `node, version, 0, {log entries}` or
/// `node, version, 1, {field, value, ...}` (its hash).
pub const FEED_SCRIPT: &str = include_str!("feed.lua");

/// What the script answered of one other node.
#[derive(Debug, PartialEq, Eq)]
pub struct NodeFeed {
    pub node: String,
    pub version: u64,
    pub news: News,
}

/// Another node's changes: log entries since the version held, or its whole hash.
#[derive(Debug, PartialEq, Eq)]
pub enum News {
    Log(Vec<Vec<u8>>),
    Whole(Vec<Vec<u8>>),
}

/// Parses the script's answer (this node's own version and the other nodes' news); `None`
/// if it is not shaped as the script makes it.
pub fn parse_answer(answer: redis::Value) -> Option<(u64, Vec<NodeFeed>)> {
    use redis::Value;
    let Value::Array(items) = answer else {
        return None;
    };
    let bytes = |v: Value| match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    };
    let int = |v: &Value| match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    };
    let mut out = Vec::with_capacity(items.len() / 4);
    let mut it = items.into_iter();
    let own = int(&it.next()?)?;
    while let Some(node) = it.next() {
        let node = String::from_utf8(bytes(node)?).ok()?;
        let version = int(&it.next()?)?;
        let whole = int(&it.next()?)? == 1;
        let Value::Array(list) = it.next()? else {
            return None;
        };
        let list = list.into_iter().map(bytes).collect::<Option<Vec<_>>>()?;
        out.push(NodeFeed {
            node,
            version,
            news: if whole {
                News::Whole(list)
            } else {
                News::Log(list)
            },
        });
    }
    Some((own, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(port: u16) -> Endpoint {
        Endpoint::V4(CompactPeerV4::new("10.1.2.3".parse().unwrap(), port))
    }

    #[test]
    fn records_round_trip_through_a_log_entry_and_a_hash() {
        let ih = InfoHash([0xab; 20]);
        let value = PeerValue {
            expires: 1_800_000_000,
            seeder: true,
            peer_id: PeerId(*b"-qB4650-0123456789ab"),
        };
        let v6 = Endpoint::V6(CompactPeerV6::new("2001:db8::1".parse().unwrap(), 51413));
        let records = [
            Record::Peer {
                info_hash: ih,
                endpoint: v4(6881),
                value: Some(value),
            },
            Record::Peer {
                info_hash: ih,
                endpoint: v6,
                value: Some(PeerValue {
                    seeder: false,
                    ..value
                }),
            },
            Record::Peer {
                info_hash: ih,
                endpoint: v4(1),
                value: None,
            },
            Record::Peer {
                info_hash: ih,
                endpoint: v6,
                value: None,
            },
            Record::Completed {
                info_hash: ih,
                total: 7,
            },
            Record::Client {
                torrent_id: 42,
                user_id: 7,
                peer_id: PeerId(*b"-TR4050-0123456789ab"),
                value: Some(ClientValue {
                    uploaded: 1 << 40,
                    downloaded: 12345,
                    seen: 1_800_000_000,
                    seeding: true,
                    started: false,
                    ended: true,
                }),
            },
            Record::Client {
                torrent_id: 42,
                user_id: 7,
                peer_id: PeerId(*b"-TR4050-0123456789ab"),
                value: None,
            },
            Record::Peer {
                info_hash: ih,
                endpoint: Endpoint::WebTorrent(value.peer_id),
                value: Some(value),
            },
            Record::Peer {
                info_hash: ih,
                endpoint: Endpoint::WebTorrent(value.peer_id),
                value: None,
            },
        ];
        let mut entry = Vec::new();
        for r in &records {
            r.write(&mut entry);
        }
        let mut back = Vec::new();
        assert_eq!(Record::read_log(&entry, |r| back.push(r)), Some(()));
        assert_eq!(back, records);
        // A hash field and value (as the script stores them) read back the same.
        let mut field = ih.0.to_vec();
        field.extend_from_slice(&CompactPeerV4::new("10.1.2.3".parse().unwrap(), 6881).0);
        let mut v = Vec::new();
        value.write(&mut v);
        assert_eq!(Record::from_field(&field, Some(&v)), Some(records[0]));
        assert_eq!(
            Record::from_field(&ih.0, Some(&7u32.to_be_bytes())),
            Some(records[4])
        );
        let mut client_field = 42u64.to_be_bytes().to_vec();
        client_field.extend_from_slice(&7u64.to_be_bytes());
        client_field.extend_from_slice(b"-TR4050-0123456789ab");
        let mut cv = Vec::new();
        if let Record::Client { value: Some(v), .. } = records[5] {
            v.write(&mut cv);
        }
        assert_eq!(
            Record::from_field(&client_field, Some(&cv)),
            Some(records[5])
        );
        let mut webtorrent_field = ih.0.to_vec();
        webtorrent_field.extend_from_slice(&value.peer_id.0);
        assert_eq!(
            Record::from_field(&webtorrent_field, Some(&v)),
            Some(records[7])
        );
        cv[20] = 8;
        assert_eq!(
            Record::from_field(&client_field, Some(&cv)),
            None,
            "unknown flags"
        );
        // Garbage is refused, not misread.
        assert_eq!(Record::read_log(&entry[..entry.len() - 1], |_| ()), None);
        assert_eq!(Record::read_log(&[9, 1, 2], |_| ()), None);
        assert_eq!(Record::from_field(b"short", None), None);
        assert_eq!(Record::from_field(&field, Some(b"bad")), None);
    }

    #[test]
    fn a_torrents_keys_share_its_buckets_hash_tag() {
        let ih = InfoHash([0x5c; 20]);
        assert_eq!(bucket_of(&ih), 0x5c);
        assert_eq!(versions_key("shoal", &ih), "shoal:{b5c}:versions");
    }
}
