//! Reading the tracker's bencoded answers: shoal-proto's strict reader (one value filling
//! the whole body, canonical integers), plus the rule shoal's writer keeps (dictionary
//! keys sorted and unique, BEP 3), and field lookups that fail the test with the whole
//! value in the message when a field is missing or of another type.

use shoal_proto::bencode::{decode, Value};

/// Decodes a whole body and asserts that it is canonical bencode.
pub fn bdecode(bytes: &[u8]) -> Value<'_> {
    let v = decode(bytes).unwrap_or_else(|| {
        panic!(
            "not one bencoded value: {:?}",
            String::from_utf8_lossy(bytes)
        )
    });
    assert!(v.is_canonical(), "keys not sorted and unique: {v:?}");
    v
}

/// Typed lookups in a bencoded dictionary, by key.
pub trait Fields<'a> {
    /// The integer at `key`.
    fn int(&self, key: &str) -> i64;
    /// The byte string at `key`.
    fn bytes(&self, key: &str) -> &'a [u8];
    /// The list at `key`.
    fn list(&self, key: &str) -> &[Value<'a>];
    /// The `failure reason`, if the answer is a refusal.
    fn failure(&self) -> Option<String>;
}

impl<'a> Fields<'a> for Value<'a> {
    fn int(&self, key: &str) -> i64 {
        let v = self.get(key.as_bytes());
        v.and_then(Value::as_int)
            .unwrap_or_else(|| panic!("{key}: {v:?} in {self:?}"))
    }
    fn bytes(&self, key: &str) -> &'a [u8] {
        let v = self.get(key.as_bytes());
        v.and_then(Value::as_bytes)
            .unwrap_or_else(|| panic!("{key}: {v:?} in {self:?}"))
    }
    fn list(&self, key: &str) -> &[Value<'a>] {
        let v = self.get(key.as_bytes());
        v.and_then(Value::as_list)
            .unwrap_or_else(|| panic!("{key}: {v:?} in {self:?}"))
    }
    fn failure(&self) -> Option<String> {
        self.get(b"failure reason")
            .and_then(Value::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}
