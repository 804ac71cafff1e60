//! Test support shared by the fake-tracker tests: a passkeys file for the load of a
//! private tracker.

use std::path::PathBuf;

/// The keys of the passkeys files these tests write, in file order: simulated peer i (or
/// connection i) uses key i mod 3.
pub const KEYS: [&str; 3] = ["key-zero", "key.one", "key_two"];

/// A passkeys file holding `text` in a fresh directory of its own, removed on drop.
pub struct PasskeysFile {
    dir: PathBuf,
    path: String,
}

impl PasskeysFile {
    pub fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("shoal-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("passkeys");
        std::fs::write(&file, text).unwrap();
        let path = file.display().to_string();
        Self { dir, path }
    }

    /// The file's path, for `--passkeys`.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl Drop for PasskeysFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
