//! The access list, the policy's rule about torrents: which info hashes may be announced and
//! scraped.
//!
//! It is a plain set plus a mode, loaded from a file of hex info hashes; the policy swaps
//! it in whole (`arc_swap`) on reload so that workers read it without a lock. Edits from
//! the admin API rewrite the file ([`edit_file`], through the shared [`list_file`]) before
//! the new list is put in force.
//!
//! The access-list pipes (`[access_list] fifo_add`, `fifo_delete`) change the list in force
//! one hash at a time without touching the file: [`AccessList::with_change`] keeps such
//! changes beside the file's set, which is shared, not copied, so a change to a list of
//! millions costs a small set's copy. A reload from the file drops them (the pipes'
//! writer is expected to have put them in the file by then, as with opentracker).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

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
    /// The file's hashes.
    hashes: Arc<HashSet<InfoHash>>,
    /// Listed since, though not in the file (the pipes).
    extra: HashSet<InfoHash>,
    /// In the file, but unlisted since (the pipes).
    gone: HashSet<InfoHash>,
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
            hashes: Arc::new(hashes.into_iter().collect()),
            extra: HashSet::new(),
            gone: HashSet::new(),
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
        Ok(Self::new(mode, hashes))
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
        self.hashes.len() - self.gone.len() + self.extra.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn contains(&self, info_hash: &InfoHash) -> bool {
        if self.extra.is_empty() && self.gone.is_empty() {
            return self.hashes.contains(info_hash);
        }
        self.extra.contains(info_hash)
            || (self.hashes.contains(info_hash) && !self.gone.contains(info_hash))
    }

    pub fn hashes(&self) -> impl Iterator<Item = &InfoHash> {
        self.hashes
            .iter()
            .filter(|h| !self.gone.contains(*h))
            .chain(self.extra.iter())
    }

    /// This list with `info_hash` listed (`listed`) or not, the file's set shared; `None`
    /// when it already is.
    pub fn with_change(&self, info_hash: InfoHash, listed: bool) -> Option<Self> {
        if self.contains(&info_hash) == listed {
            return None;
        }
        let mut next = self.clone();
        next.mark(info_hash, listed);
        Some(next)
    }

    fn mark(&mut self, info_hash: InfoHash, listed: bool) {
        let in_file = self.hashes.contains(&info_hash);
        if listed {
            self.gone.remove(&info_hash);
            if !in_file {
                self.extra.insert(info_hash);
            }
        } else {
            self.extra.remove(&info_hash);
            if in_file {
                self.gone.insert(info_hash);
            }
        }
    }

    /// Carries `old`'s changes not made through the file over to this list (fresh from
    /// the file), except for `edited`, which the file now decides.
    pub fn keep_changes_of(&mut self, old: &AccessList, edited: &InfoHash) {
        for h in old.extra.iter().filter(|h| *h != edited) {
            self.mark(*h, true);
        }
        for h in old.gone.iter().filter(|h| *h != edited) {
            self.mark(*h, false);
        }
    }

    /// Whether announces and scrapes of `info_hash` are served.
    #[inline]
    pub fn allows(&self, info_hash: &InfoHash) -> bool {
        match self.mode {
            AccessMode::Off => true,
            AccessMode::Allow => self.contains(info_hash),
            AccessMode::Deny => !self.contains(info_hash),
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
    fn changes_apply_over_the_files_set_and_carry_over_an_edit() {
        let (a, b, c) = (InfoHash([1; 20]), InfoHash([2; 20]), InfoHash([3; 20]));
        let file = AccessList::new(AccessMode::Allow, [a, b]);
        assert!(file.with_change(a, true).is_none(), "already listed");
        let l = file
            .with_change(c, true)
            .unwrap()
            .with_change(a, false)
            .unwrap();
        assert!(!l.allows(&a) && l.allows(&b) && l.allows(&c));
        assert_eq!(l.len(), 2);
        let mut listed: Vec<_> = l.hashes().copied().collect();
        listed.sort();
        assert_eq!(listed, [b, c]);
        assert!(
            Arc::ptr_eq(&file.hashes, &l.hashes),
            "the file's set is shared"
        );
        let back = l.with_change(a, true).unwrap();
        assert!(back.allows(&a) && back.gone.is_empty());
        // The admin API edits b in the file: the other changes stay, b is the file's.
        let mut fresh = AccessList::new(AccessMode::Allow, [a]);
        fresh.keep_changes_of(&l.with_change(b, false).unwrap(), &b);
        assert!(!fresh.allows(&a) && !fresh.allows(&b) && fresh.allows(&c));
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
