//! Stateless BEP 15 connection ids.
//!
//! An id is the second it was issued (32 bits of Unix time) and a 32-bit keyed MAC
//! (SipHash-1-3 under a 128-bit secret) of that second and the client's IP. Checking one
//! needs no table: recompute the MAC, compare in constant time, and check the age. The age
//! limit is the configured maximum plus a grace period, because real clients keep using
//! an id for minutes. The port is left out of the MAC on purpose: NATs rewrite it between
//! a client's packets.
//!
//! The key can be kept in a file so that a restart (or an upgrade handing over to a new
//! process) does not invalidate every client's id at once.
//!
//! Here, in the core, rather than in the UDP front end: it is the tracker's rule about
//! which requests are a client's, and it needs neither a socket nor the config.

use std::hash::Hasher;
use std::net::IpAddr;
use std::path::Path;

use anyhow::{bail, Context};
use shoal_proto::udp::ConnectionId;
use siphasher::sip::SipHasher13;
use subtle::ConstantTimeEq;

/// What a connection id turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdCheck {
    Valid,
    /// Issued by us to this address, but older than the accepted age (max age plus
    /// grace), or dated in the future: what `shoal_udp_connection_id_expired_total`
    /// counts, so that an operator sees what a shorter age costs real clients.
    Expired,
    /// Not issued by us to this address (forged, another key, another address).
    Forged,
}

/// Issues and checks connection ids.
#[derive(Clone)]
pub struct ConnectionIds {
    key: [u8; 16],
    max_age: u32,
}

impl ConnectionIds {
    pub fn new(key: [u8; 16], max_age: u32) -> Self {
        Self { key, max_age }
    }

    /// Ids valid for `max_age` seconds, under the key from `key_file` if given, else
    /// `snapshot_key` (so that clients' ids survive a restart or a hand-over), else a new
    /// one.
    pub fn with_key_from(
        key_file: Option<&Path>,
        snapshot_key: Option<[u8; 16]>,
        max_age: u32,
    ) -> anyhow::Result<Self> {
        let key = match (key_file, snapshot_key) {
            (Some(file), _) => Self::load_or_create_key(file)?,
            (None, Some(k)) => k,
            (None, None) => Self::random_key(),
        };
        Ok(Self::new(key, max_age))
    }

    /// The key ids are issued under (kept in snapshots).
    pub fn key(&self) -> [u8; 16] {
        self.key
    }

    /// A fresh random key.
    pub fn random_key() -> [u8; 16] {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&fastrand::u64(..).to_le_bytes());
        key[8..].copy_from_slice(&fastrand::u64(..).to_le_bytes());
        // fastrand's seed is not meant for secrets: mix in std's hasher keys, which come
        // from the OS's random source.
        let extra =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
        for (k, b) in key.iter_mut().zip(extra.to_le_bytes()) {
            *k ^= b;
        }
        key
    }

    /// Reads the key from `path` (32 hex digits), or writes a new random one there.
    pub fn load_or_create_key(path: &Path) -> anyhow::Result<[u8; 16]> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = hex::decode(text.trim())
                    .with_context(|| format!("connection id key file {}", path.display()))?;
                let Ok(key) = <[u8; 16]>::try_from(bytes.as_slice()) else {
                    bail!(
                        "connection id key file {} must hold 32 hex digits",
                        path.display()
                    );
                };
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::random_key();
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, hex::encode(key) + "\n")
                    .and_then(|()| std::fs::rename(&tmp, path))
                    .with_context(|| {
                        format!("writing connection id key file {}", path.display())
                    })?;
                Ok(key)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    #[inline]
    fn mac(&self, ip: IpAddr, issued: u32) -> u32 {
        let mut h = SipHasher13::new_with_key(&self.key);
        match ip.to_canonical() {
            IpAddr::V4(v4) => h.write(&v4.octets()),
            IpAddr::V6(v6) => h.write(&v6.octets()),
        }
        h.write_u32(issued);
        h.finish() as u32
    }

    /// The id for a client at `ip`, issued at Unix second `now`.
    #[inline]
    pub fn issue(&self, ip: IpAddr, now: u32) -> ConnectionId {
        ConnectionId((u64::from(now) << 32) | u64::from(self.mac(ip, now)))
    }

    /// Whether `id` was issued by us to `ip` no more than `max_age` seconds before `now`
    /// (and not in the future, beyond a second of clock skew between workers).
    #[inline]
    pub fn check(&self, id: ConnectionId, ip: IpAddr, now: u32) -> bool {
        self.judge(id, ip, now) == IdCheck::Valid
    }

    /// What `id` is for `ip` at `now`: valid, ours but too old (or from the future), or
    /// not ours. The MAC is computed and compared in constant time either way.
    #[inline]
    pub fn judge(&self, id: ConnectionId, ip: IpAddr, now: u32) -> IdCheck {
        let issued = (id.0 >> 32) as u32;
        let mac = id.0 as u32;
        let fresh = issued <= now.saturating_add(1) && now.saturating_sub(issued) <= self.max_age;
        let authentic: bool = self.mac(ip, issued).ct_eq(&mac).into();
        match (authentic, fresh) {
            (true, true) => IdCheck::Valid,
            (true, false) => IdCheck::Expired,
            (false, _) => IdCheck::Forged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> ConnectionIds {
        ConnectionIds::new([7; 16], 300)
    }

    #[test]
    fn issued_ids_check_out_for_their_address_and_age() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let id = ids().issue(ip, 1_000_000);
        assert!(ids().check(id, ip, 1_000_000));
        assert!(ids().check(id, ip, 1_000_300));
        assert!(!ids().check(id, ip, 1_000_301), "too old");
        assert_eq!(ids().judge(id, ip, 1_000_301), IdCheck::Expired);
        assert_eq!(ids().judge(id, ip, 1_000_300), IdCheck::Valid);
        assert!(!ids().check(id, ip, 999_990), "from the future");
        assert!(!ids().check(id, "10.0.0.2".parse().unwrap(), 1_000_000));
        assert!(
            !ConnectionIds::new([8; 16], 300).check(id, ip, 1_000_000),
            "other key"
        );
    }

    #[test]
    fn forged_ids_fail() {
        let ip: IpAddr = "::1".parse().unwrap();
        let id = ids().issue(ip, 5000);
        for bit in 0..64 {
            let forged = ConnectionId(id.0 ^ (1 << bit));
            // Flipping a bit of the time may land within the age; the MAC must still fail.
            assert!(!ids().check(forged, ip, 5000), "bit {bit}");
            assert_ne!(ids().judge(forged, ip, 5000), IdCheck::Valid, "bit {bit}");
        }
    }

    #[test]
    fn v4_mapped_addresses_are_the_same_client() {
        let id = ids().issue("127.0.0.1".parse().unwrap(), 10);
        assert!(ids().check(id, "::ffff:127.0.0.1".parse().unwrap(), 10));
    }

    #[test]
    fn key_file_is_created_then_reused() {
        let dir = std::env::temp_dir().join(format!("shoal-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        let _ = std::fs::remove_file(&path);
        let a = ConnectionIds::load_or_create_key(&path).unwrap();
        let b = ConnectionIds::load_or_create_key(&path).unwrap();
        assert_eq!(a, b);
        std::fs::write(&path, "zz").unwrap();
        assert!(ConnectionIds::load_or_create_key(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
