//! The access list, the policy's rule about torrents: which info hashes may be announced and
//! scraped.
//!
//! It is a plain set plus a mode, loaded from a file of hex info hashes; the policy swaps
//! it in whole (`arc_swap`) on reload so that workers read it without a lock. Edits from
//! the admin API rewrite the file ([`edit_file`], through the shared [`list_file`]) before
//! the new list is put in force.

use std::collections::HashSet;
use std::path::Path;

use shoal_proto::InfoHash;
use thiserror::Error;

use super::list_file;

/// How the list is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AccessMode {
    /// Every info hash is served.
    #[default]
    Off,
    /// Only listed info hashes are served (a whitelist).
    Allow,
    /// Listed info hashes are refused (a blacklist).
    Deny,
}

/// A loaded access list.
#[derive(Clone, Debug, Default)]
pub struct AccessList {
    mode: AccessMode,
    hashes: HashSet<InfoHash>,
}

#[derive(Debug, Error)]
pub enum AccessListError {
    #[error("reading access list {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("access list {path}, line {line}: not a 40-digit hex info hash: {text:?}")]
    BadLine {
        path: String,
        line: usize,
        text: String,
    },
}

impl AccessList {
    pub fn new(mode: AccessMode, hashes: impl IntoIterator<Item = InfoHash>) -> Self {
        Self {
            mode,
            hashes: hashes.into_iter().collect(),
        }
    }

    /// Parses the file format: one hex info hash per line; blank lines and `#` comments
    /// are ignored. A bad line is an error that names it, so a typo never silently opens
    /// or closes the tracker.
    pub fn parse(mode: AccessMode, text: &str, path: &str) -> Result<Self, AccessListError> {
        let mut hashes = HashSet::new();
        for (line, entry) in list_file::entries(text) {
            let hash = InfoHash::from_hex(entry).ok_or_else(|| AccessListError::BadLine {
                path: path.to_owned(),
                line,
                text: entry.to_owned(),
            })?;
            hashes.insert(hash);
        }
        Ok(Self { mode, hashes })
    }

    /// Loads the list from `path`. With mode `Off` the file is not read.
    pub fn load(mode: AccessMode, path: &Path) -> Result<Self, AccessListError> {
        if mode == AccessMode::Off {
            return Ok(Self::default());
        }
        let text = std::fs::read_to_string(path).map_err(|source| AccessListError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(mode, &text, &path.display().to_string())
    }

    pub fn mode(&self) -> AccessMode {
        self.mode
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn contains(&self, info_hash: &InfoHash) -> bool {
        self.hashes.contains(info_hash)
    }

    pub fn hashes(&self) -> impl Iterator<Item = &InfoHash> {
        self.hashes.iter()
    }

    /// Whether announces and scrapes of `info_hash` are served.
    #[inline]
    pub fn allows(&self, info_hash: &InfoHash) -> bool {
        match self.mode {
            AccessMode::Off => true,
            AccessMode::Allow => self.hashes.contains(info_hash),
            AccessMode::Deny => !self.hashes.contains(info_hash),
        }
    }
}

/// Adds (`add`) or removes `info_hash` in the list file at `path`, keeping comments and
/// other lines (see [`list_file::edit`]). Returns the new list, or `None` when the file
/// already said so (nothing written).
pub fn edit_file(
    mode: AccessMode,
    path: &Path,
    info_hash: InfoHash,
    add: bool,
) -> anyhow::Result<Option<AccessList>> {
    let same = |entry: &str| InfoHash::from_hex(entry) == Some(info_hash);
    let parse = |text: &str| Ok(AccessList::parse(mode, text, &path.display().to_string())?);
    list_file::edit(path, &info_hash.to_hex(), add, same, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_apply_as_named() {
        let a = InfoHash([1; 20]);
        let b = InfoHash([2; 20]);
        assert!(AccessList::new(AccessMode::Off, [a]).allows(&b));
        assert!(AccessList::new(AccessMode::Allow, [a]).allows(&a));
        assert!(!AccessList::new(AccessMode::Allow, [a]).allows(&b));
        assert!(!AccessList::new(AccessMode::Deny, [a]).allows(&a));
        assert!(AccessList::new(AccessMode::Deny, [a]).allows(&b));
    }

    #[test]
    fn parse_skips_comments_and_names_bad_lines() {
        let text = "# list\n\n0101010101010101010101010101010101010101  # one\n";
        let l = AccessList::parse(AccessMode::Allow, text, "f").unwrap();
        assert!(l.allows(&InfoHash([1; 20])));
        assert_eq!(l.len(), 1);
        let err = AccessList::parse(AccessMode::Allow, "abc\n", "f").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
