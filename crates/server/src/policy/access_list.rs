//! The access list, the policy's first rule: which info hashes may be announced and
//! scraped.
//!
//! It is a plain set plus a mode, loaded from a file of hex info hashes; the policy swaps
//! it in whole (`arc_swap`) on reload so that workers read it without a lock. Edits from
//! the admin API rewrite the file ([`edit_file`]) before the new list is put in force.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use shoal_proto::InfoHash;
use thiserror::Error;

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
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let hash = InfoHash::from_hex(line).ok_or_else(|| AccessListError::BadLine {
                path: path.to_owned(),
                line: i + 1,
                text: line.to_owned(),
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
/// other lines, written to a temporary file, synced and renamed over the old one. Returns
/// the new list, or `None` when the file already said so (nothing written).
pub fn edit_file(
    mode: AccessMode,
    path: &Path,
    info_hash: InfoHash,
    add: bool,
) -> anyhow::Result<Option<AccessList>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let listed = |line: &str| {
        InfoHash::from_hex(line.split('#').next().unwrap_or("").trim()) == Some(info_hash)
    };
    let present = text.lines().any(listed);
    let new_text = match (add, present) {
        (true, true) | (false, false) => return Ok(None),
        (true, false) => {
            let mut t = text;
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t.push_str(&info_hash.to_hex());
            t.push('\n');
            t
        }
        (false, true) => text
            .lines()
            .filter(|l| !listed(l))
            .flat_map(|l| [l, "\n"])
            .collect(),
    };
    let list = AccessList::parse(mode, &new_text, &path.display().to_string())?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(new_text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })()
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(list))
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
