// The user look-up micro-benchmark of 2026-11-27 (see ../README.md, "Tried and not kept").
// A binary crate of its own: Cargo.toml [dependencies] papaya = "0.2", hashbrown = { version = "0.15",
// default-features = false, features = ["inline-more"] }, foldhash = "0.1", arc-swap = "1"; then
//   cargo run --release -- USERS THRASH_MB
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::Instant;
use arc_swap::ArcSwap;
type H = foldhash::fast::RandomState;

#[derive(Clone, Copy)]
struct PasskeyKey { len: u8, bytes: [u8; 64] }
impl PasskeyKey { fn as_bytes(&self) -> &[u8] { &self.bytes[..self.len as usize] } }
impl std::borrow::Borrow<[u8]> for PasskeyKey { fn borrow(&self) -> &[u8] { self.as_bytes() } }
impl Hash for PasskeyKey { fn hash<S: std::hash::Hasher>(&self, s: &mut S) { self.as_bytes().hash(s) } }
impl PartialEq for PasskeyKey { fn eq(&self, o: &Self) -> bool { self.as_bytes() == o.as_bytes() } }
impl Eq for PasskeyKey {}
#[derive(Clone, Copy, Debug, PartialEq)]
struct Member { id: i64, enabled: bool, can_download: bool, df: f64, uf: f64 }

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry { len: u8, enabled: bool, can_download: bool, id: i64, df: f64, uf: f64, head: [u8; 32], tail: [u8; 32] }
impl Entry {
    #[inline] fn matches(&self, k: &[u8]) -> bool {
        if k.len() != self.len as usize { return false; }
        let n = k.len().min(32);
        self.head[..n] == k[..n] && (k.len() <= 32 || self.tail[..k.len()-32] == k[32..])
    }
    #[inline] fn key(&self) -> Vec<u8> { let mut v = self.head.to_vec(); v.extend_from_slice(&self.tail); v.truncate(self.len as usize); v }
}
const SHARDS: usize = 256;
struct Cow { hasher: H, shards: Vec<ArcSwap<hashbrown::HashTable<Entry>>> }
impl Cow {
    #[inline] fn get(&self, k: &[u8]) -> Option<Member> {
        let h = self.hasher.hash_one(k);
        let t = self.shards[(h >> 56) as usize % SHARDS].load();
        t.find(h, |e| e.matches(k)).map(|e| Member { id: e.id, enabled: e.enabled, can_download: e.can_download, df: e.df, uf: e.uf })
    }
}
fn key(i: u64) -> Vec<u8> { format!("{:032x}", (i.wrapping_mul(0x9E3779B97F4A7C15)) as u128 * 7919).into_bytes()[..32].to_vec() }

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(10_000);
    let thrash_mb: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(32);
    let keys: Vec<Vec<u8>> = (0..n as u64).map(key).collect();
    let p: papaya::HashMap<PasskeyKey, Member, H> = papaya::HashMap::with_capacity_and_hasher(n, H::default());
    let hasher = H::default();
    let mut tables: Vec<hashbrown::HashTable<Entry>> = (0..SHARDS).map(|_| hashbrown::HashTable::new()).collect();
    for (i, k) in keys.iter().enumerate() {
        let m = Member { id: i as i64, enabled: true, can_download: true, df: 1.0, uf: 1.0 };
        let mut b = [0u8; 64]; b[..k.len()].copy_from_slice(k);
        p.pin().insert(PasskeyKey { len: k.len() as u8, bytes: b }, m);
        let mut head = [0u8; 32]; head.copy_from_slice(&k[..32]);
        let e = Entry { len: k.len() as u8, enabled: true, can_download: true, id: i as i64, df: 1.0, uf: 1.0, head, tail: [0; 32] };
        let h = hasher.hash_one(&k[..]);
        tables[(h >> 56) as usize % SHARDS].insert_unique(h, e, |e| hasher.hash_one(&e.key()[..]));
    }
    let cow = Cow { hasher, shards: tables.into_iter().map(ArcSwap::from_pointee).collect() };
    // random order, thrash buffer touched between lookups
    let mut order: Vec<usize> = (0..2_000_000).map(|i| (i as u64).wrapping_mul(0x9E3779B97F4A7C15) as usize % n).collect();
    let thrash = vec![1u64; thrash_mb * 1024 * 1024 / 8];
    let mut x = 0x1234567u64;
    let mut junk = 0u64;
    for round in 0..3 {
        for which in ["papaya", "cow", "none"] {
            let t = Instant::now();
            let mut found = 0u64;
            for &i in &order {
                for _ in 0..8 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; junk = junk.wrapping_add(thrash[(x as usize) % thrash.len()]); }
                let k = &keys[i][..];
                match which {
                    "papaya" => { if let Some(m) = p.pin().get(k) { found += m.id as u64; } }
                    "cow" => { if let Some(m) = cow.get(k) { found += m.id as u64; } }
                    _ => { found += k[0] as u64; }
                }
            }
            let ns = t.elapsed().as_nanos() as f64 / order.len() as f64;
            println!("round {round} n={n} {which:7} {ns:6.1} ns/op ({found})");
        }
        order.reverse();
    }
    println!("{junk}");
}
