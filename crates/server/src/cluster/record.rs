//! How a torrent's WebTorrent peers look in Redis (the UDP and HTTP peers travel in
//! [`super::feed`]'s bucket feeds), and the one script that publishes a node's changes to a
//! torrent and reads everyone's WebTorrent peers back.
//!
//! # Keys (Redis Cluster: one torrent, one slot)
//!
//! - `<prefix>:{<info hash hex>}:ws`: a hash, field = the peer id, value =
//!   `<expires, Unix seconds>:<1 seeder | 0>:<node>:` then the 20 bytes of its peer id.
//!   Every node writes its own peers' fields; a field whose expiry passed is dropped by
//!   whichever node reads it next, so a node that died (SIGKILL) vanishes from everyone's
//!   answers within the peer lifetime.
//! - `<prefix>:{<info hash hex>}:wsdone`: unused (the script serves a completed hash too).
//! - `<prefix>:nodes`: a hash, field = node, value = its last exchange (Unix seconds).
//! - `<prefix>:connection-id-key`: the UDP connection-id key every node uses.
//!
//! The `{...}` hash tag puts both keys of a torrent in one slot, so the script below may
//! touch both, and a node's whole exchange for a torrent is ONE command (EVALSHA).
//! WebTorrent swarms are small and their peers come and go with their connections, so
//! reading one back whole while it is active costs little.

use std::time::Duration;

use shoal_proto::{InfoHash, PeerId};

/// Keys of one torrent's WebTorrent peers (field: peer id) and an unused completed hash
/// (the same script serves both).
pub fn ws_keys(prefix: &str, info_hash: &InfoHash) -> [String; 2] {
    let hex = info_hash.to_hex();
    [
        format!("{prefix}:{{{hex}}}:ws"),
        format!("{prefix}:{{{hex}}}:wsdone"),
    ]
}

/// One peer as Redis holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// Unix seconds after which the peer is gone.
    pub expires: u64,
    pub seeder: bool,
    pub node: String,
    pub peer_id: PeerId,
}

impl Published {
    pub fn encode(&self) -> Vec<u8> {
        let mut v =
            format!("{}:{}:{}:", self.expires, u8::from(self.seeder), self.node).into_bytes();
        v.extend_from_slice(&self.peer_id.0);
        v
    }

    pub fn decode(value: &[u8]) -> Option<Self> {
        let id_at = value.len().checked_sub(20)?;
        let (text, peer_id) = value.split_at(id_at);
        let text = std::str::from_utf8(text).ok()?.strip_suffix(':')?;
        let mut parts = text.splitn(3, ':');
        let expires = parts.next()?.parse().ok()?;
        let seeder = match parts.next()? {
            "1" => true,
            "0" => false,
            _ => return None,
        };
        let node = parts.next()?.to_string();
        Some(Self {
            expires,
            seeder,
            node,
            peer_id: PeerId(peer_id.try_into().ok()?),
        })
    }
}

/// The exchange of one node for one torrent, in one round trip. KEYS: the peers hash and
/// the done hash. ARGV: now (Unix seconds), key lifetime (seconds), node, this node's
/// completed total or "" (unchanged), the number of fields to set, then field, value pairs,
/// then the fields to delete. Answers the live fields and values (expired ones are deleted
/// on the way) and the cluster's completed total.
pub const EXCHANGE_SCRIPT: &str = r#"
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local sets = tonumber(ARGV[5])
local i = 6
for _ = 1, sets do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  i = i + 1
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
local live = {}
local all = redis.call('HGETALL', KEYS[1])
for j = 1, #all, 2 do
  local expires = tonumber(string.match(all[j + 1], '^(%d+):'))
  if expires and expires >= now then
    live[#live + 1] = all[j]
    live[#live + 1] = all[j + 1]
  else
    redis.call('HDEL', KEYS[1], all[j])
  end
end
local done = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  done = done + (tonumber(v) or 0)
end
if #live > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return {live, done}
"#;

/// Rounds a torrent is read after this node's last local activity on it (an announce, a
/// stop, a scrape): a client's announce is answered from what the node knew, so the node
/// keeps reading the torrent for a few rounds after it, to have the other nodes' peers by
/// the client's next announce even if they arrived just after this one.
pub const WATCH_ROUNDS: u32 = 5;

/// Seconds a torrent's keys live after its last exchange with a live peer: the peer
/// lifetime, at least a minute.
pub fn key_lifetime(peer_ttl: Duration) -> u64 {
    peer_ttl.as_secs().max(60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_garbage_is_refused() {
        let p = Published {
            expires: 1_800_000_000,
            seeder: true,
            node: "node-a:with:colons".into(),
            peer_id: PeerId(*b"-qB4650-0123456789ab"),
        };
        assert_eq!(Published::decode(&p.encode()), Some(p.clone()));
        let leecher = Published { seeder: false, ..p };
        assert_eq!(Published::decode(&leecher.encode()), Some(leecher));
        for bad in [
            &b""[..],
            b"12:1:n:",
            b"x:1:n:01234567890123456789",
            b"1:2:n:01234567890123456789",
        ] {
            assert_eq!(Published::decode(bad), None, "{bad:?}");
        }
    }
}
