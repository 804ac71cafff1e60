//! One setting of the C library's allocator, which Rust's global allocator is on Linux.
//!
//! glibc serves a block from the heap it grows with `brk` unless the block is at least
//! its mmap threshold (128 KiB at start), which it then gives a mapping of its own. It
//! also raises that threshold, up to 32 MiB, to the size of each mapped block that is
//! freed. A tracker's store is mostly arrays that grow by steps (each shard's torrents,
//! its hash table, a large swarm's peers): once the threshold has risen past them, each
//! step copies the array to a new place on the heap and leaves the old one as a hole that
//! stays resident until something smaller happens to fit in it. With the threshold fixed
//! low instead, those arrays sit in mappings of their own, grow with `mremap` (no copy,
//! no hole) and give their pages back when they shrink or go. Measured with the swarm
//! crate's `memory` example (a store without peer ids, shoal-bench's torrent spread):
//! 3 million peers over 1 million torrents offered took 122.6 MiB with glibc's own
//! setting and 99.1 with [`STORE_THRESHOLD`]; 30 million over 10 million, 1,103.1 and
//! 941.0.

/// The threshold the `shoal` binary sets at start (and the `memory` example with it):
/// 16 KiB measured the same, 64 KiB left part of the holes at 1 million torrents.
pub const STORE_THRESHOLD: usize = 32 * 1024;

/// Serves every allocation of `bytes` or more from a mapping of its own, and stops glibc
/// moving that threshold. Returns whether the allocator took the setting: false where
/// the C library is not glibc, or for a size it refuses.
pub fn map_blocks_from(bytes: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let Ok(bytes) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: mallopt reads two integers and changes a parameter of glibc's
        // allocator under its own lock; it touches no memory of the caller's, and blocks
        // already allocated keep the way they were allocated (each records it).
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = bytes;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_a_threshold_and_a_size_past_c_int_is_refused_here() {
        assert!(map_blocks_from(STORE_THRESHOLD));
        assert!(!map_blocks_from(usize::MAX));
        // A block past the threshold then works as any other, grown and shrunk.
        let mut v = vec![7u8; 64 * 1024];
        v.resize(1024 * 1024, 1);
        assert_eq!(
            v.iter().map(|&b| u64::from(b)).sum::<u64>(),
            7 * 64 * 1024 + 960 * 1024
        );
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(v, [7; 10]);
    }
}
