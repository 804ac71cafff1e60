//! Reload: what SIGHUP and the admin API's `POST /api/reload` both run.
//!
//! Each part that can change without a restart adds its own step at start (the policy's
//! access list, the admin token file, the HTTPS certificate), in that order; a reload runs
//! them in turn. The first failure stops it, and what was already reloaded stays.

use parking_lot::Mutex;

/// A reload step; returns a line for the log and the API's answer.
pub type ReloadHook = Box<dyn Fn() -> anyhow::Result<String> + Send + Sync>;

/// The reload steps of one tracker.
#[derive(Default)]
pub struct Reload {
    steps: Mutex<Vec<ReloadHook>>,
}

impl Reload {
    /// Adds a step, run after those added before it.
    pub fn add(&self, step: ReloadHook) {
        self.steps.lock().push(step);
    }

    /// Runs every step in order; returns their lines.
    pub fn run(&self) -> anyhow::Result<Vec<String>> {
        self.steps.lock().iter().map(|step| step()).collect()
    }
}
