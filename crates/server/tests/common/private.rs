//! A private-mode tracker for the in-process tests: its config (SQLite beside the state
//! file in the test's directory, an admin listener with a token) and that token.

use std::path::Path;

use shoal_server::Config;

/// The admin API's token in [`config`].
pub const TOKEN: &str = "private-mode-test-token";

/// Private mode on UDP and HTTP (one worker each, ports chosen by the system), the state
/// file and so the SQLite database in `dir`, the admin listener with [`TOKEN`]. The
/// accounting writer's interval is an hour: only the API's flush writes, so each test
/// decides when.
pub fn config(dir: &Path) -> Config {
    let mut c = Config::ephemeral();
    c.udp.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.http.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.workers = 1;
    c.state.file = dir.join("shoal.state");
    c.admin.listen = vec!["127.0.0.1:0".parse().unwrap()];
    c.admin.token = TOKEN.into();
    c.private.enabled = true;
    c.private.flush_interval = 3600;
    c
}
