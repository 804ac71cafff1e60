//! The file format the policy's lists share (the access list's info hashes, the block
//! list's networks): one entry per line, `#` starts a comment, blank lines are ignored;
//! and the admin API's edit of such a file, which keeps comments and the other lines.
//!
//! Its own file so that both lists use one reader and one writer without importing each
//! other.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The entries of a list file's text: each line's text before any `#`, trimmed, with its
/// line number (from 1); blank entries left out.
pub fn entries(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, entry(line)))
        .filter(|(_, e)| !e.is_empty())
}

/// One line's entry (empty for a blank or comment line).
fn entry(line: &str) -> &str {
    line.split('#').next().unwrap_or("").trim()
}

/// Adds (`add`) or removes the entry `text` in the list file at `path`, keeping comments
/// and other lines; `same` says whether a line's entry is that one. The new text is
/// checked by `parse` before anything is written, then written to a temporary file,
/// synced and renamed over the old one. Returns the parsed new list, or `None` when the
/// file already said so (nothing written). A missing file counts as empty.
pub fn edit<L>(
    path: &Path,
    text: &str,
    add: bool,
    same: impl Fn(&str) -> bool,
    parse: impl FnOnce(&str) -> anyhow::Result<L>,
) -> anyhow::Result<Option<L>> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let listed = |line: &str| same(entry(line));
    let present = old.lines().any(listed);
    let new_text = match (add, present) {
        (true, true) | (false, false) => return Ok(None),
        (true, false) => {
            let mut t = old;
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t.push_str(text);
            t.push('\n');
            t
        }
        (false, true) => old
            .lines()
            .filter(|l| !listed(l))
            .flat_map(|l| [l, "\n"])
            .collect(),
    };
    let list = parse(&new_text)?;
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
