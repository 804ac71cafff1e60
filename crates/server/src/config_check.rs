//! `shoal check-config FILE`: is this config good to start with? Like `nginx -t`, it reads
//! and validates the file and every file it names, binds nothing, and prints each problem
//! with the key path it belongs to (`https.cert: cannot read /x.pem: No such file ...`).
//!
//! It sits beside `config` rather than inside it because it asks the owners of the files a
//! config names to read them (the TLS certificates, the access list, the user database):
//! the same code that will read them at start, so a file that passes here loads there.
//! `config` itself stays a leaf that every other module may import.
//!
//! Syntax and type errors stop the check (there is no config to look further into); after
//! that every check runs and every problem is listed. Relative paths are resolved as the
//! tracker resolves them: against the chroot directory when one is set, else the working
//! directory, so run the check from the directory shoal runs in.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{AccessModeConfig, Config};
use crate::http::tls::TlsCerts;
use shoal_tracker::policy::{AccessList, AccessMode};

/// One thing wrong with a config: the key path it belongs to (empty for the file itself)
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

fn problem(key: &str, message: impl std::fmt::Display) -> Problem {
    Problem {
        key: key.to_string(),
        message: message.to_string(),
    }
}

/// Checks the config file at `path`; prints each problem and a summary line to `out`.
/// Returns how many problems there were.
pub fn report(path: &Path, out: &mut impl Write) -> std::io::Result<usize> {
    let problems = check_file(path);
    for p in &problems {
        writeln!(out, "{p}")?;
    }
    match problems.len() {
        0 => writeln!(out, "{}: ok", path.display())?,
        n => writeln!(
            out,
            "{}: {n} problem{}",
            path.display(),
            if n == 1 { "" } else { "s" }
        )?,
    }
    Ok(problems.len())
}

/// Every problem of the config file at `path`.
pub fn check_file(path: &Path) -> Vec<Problem> {
    match std::fs::read_to_string(path) {
        Ok(text) => check_text(&text),
        Err(e) => vec![problem(
            "",
            format_args!("cannot read {}: {e}", path.display()),
        )],
    }
}

/// Every problem of a config file's text.
pub fn check_text(text: &str) -> Vec<Problem> {
    let config = match Config::parse(text) {
        Ok(config) => config,
        // The message starts with the key path (see `Config::parse`).
        Err(e) => return vec![problem("", format_args!("{e:#}"))],
    };
    let mut problems = Vec::new();
    if let Err(e) = config.validate() {
        // `validate` names the key path at the start of its message.
        problems.push(problem("", format_args!("{e:#}")));
    }
    let base = if config.privileges.chroot.as_os_str().is_empty() {
        PathBuf::new()
    } else {
        config.privileges.chroot.clone()
    };
    let files = Files { base };
    check_log_level(&config, &mut problems);
    check_tls(&config, &files, &mut problems);
    check_access_list(&config, &files, &mut problems);
    files.readable_if_set("admin.token_file", &config.admin.token_file, &mut problems);
    if let Some(text) = files.read_if_set(&config.admin.token_file) {
        if text.lines().next().unwrap_or("").trim().is_empty() && config.admin.token.is_empty() {
            problems.push(problem("admin.token_file", "the first line is empty"));
        }
    }
    files.directory_exists("state.file", &config.state.file, &mut problems);
    files.directory_exists(
        "udp.connection_id_key_file",
        &config.udp.connection_id_key_file,
        &mut problems,
    );
    check_private(&config, &files, &mut problems);
    check_privileges(&config, &mut problems);
    check_addresses(&config, &mut problems);
    problems
}

/// Paths as the tracker will see them.
struct Files {
    base: PathBuf,
}

impl Files {
    fn resolve(&self, path: &Path) -> PathBuf {
        self.base.join(path)
    }

    fn read_if_set(&self, path: &Path) -> Option<String> {
        if path.as_os_str().is_empty() {
            return None;
        }
        std::fs::read_to_string(self.resolve(path)).ok()
    }

    fn readable_if_set(&self, key: &str, path: &Path, problems: &mut Vec<Problem>) {
        if path.as_os_str().is_empty() {
            return;
        }
        if let Err(e) = std::fs::read(self.resolve(path)) {
            problems.push(problem(
                key,
                format_args!("cannot read {}: {e}", path.display()),
            ));
        }
    }

    /// A file the tracker creates: its directory must exist.
    fn directory_exists(&self, key: &str, path: &Path, problems: &mut Vec<Problem>) {
        if path.as_os_str().is_empty() {
            return;
        }
        let dir = self.resolve(path).parent().map(Path::to_path_buf);
        let dir = dir.filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            if !dir.is_dir() {
                problems.push(problem(
                    key,
                    format_args!("the directory {} does not exist", dir.display()),
                ));
            }
        }
    }
}

fn check_log_level(config: &Config, problems: &mut Vec<Problem>) {
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&config.log_level) {
        problems.push(problem("log_level", format_args!("not a log level: {e}")));
    }
}

fn check_tls(config: &Config, files: &Files, problems: &mut Vec<Problem>) {
    let (cert, key) = (&config.https.cert, &config.https.key);
    let mut both_good = !cert.as_os_str().is_empty() && !key.as_os_str().is_empty();
    if !cert.as_os_str().is_empty() {
        let path = files.resolve(cert);
        let parsed = std::fs::read(&path)
            .map_err(|e| format!("cannot read {}: {e}", cert.display()))
            .and_then(|pem| {
                let chain: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
                match chain {
                    Ok(chain) if chain.is_empty() => {
                        Err(format!("no PEM certificate in {}", cert.display()))
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(format!("{} is not a PEM certificate: {e}", cert.display())),
                }
            });
        if let Err(message) = parsed {
            problems.push(problem("https.cert", message));
            both_good = false;
        }
    }
    if !key.as_os_str().is_empty() {
        let path = files.resolve(key);
        let parsed = std::fs::read(&path)
            .map_err(|e| format!("cannot read {}: {e}", key.display()))
            .and_then(|pem| {
                PrivateKeyDer::from_pem_slice(&pem)
                    .map(drop)
                    .map_err(|e| format!("{} is not a PEM private key: {e}", key.display()))
            });
        if let Err(message) = parsed {
            problems.push(problem("https.key", message));
            both_good = false;
        }
    }
    if both_good {
        // What the HTTPS listener will do at start: the key must suit the certificate.
        if let Err(e) = TlsCerts::load(&files.resolve(cert), &files.resolve(key)) {
            problems.push(problem("https.key", format_args!("{e:#}")));
        }
    }
}

fn check_access_list(config: &Config, files: &Files, problems: &mut Vec<Problem>) {
    let mode = match config.access_list.mode {
        AccessModeConfig::Off => return,
        AccessModeConfig::Allow => AccessMode::Allow,
        AccessModeConfig::Deny => AccessMode::Deny,
    };
    let path = &config.access_list.path;
    if path.as_os_str().is_empty() {
        return; // `validate` said so already
    }
    if let Err(e) = AccessList::load(mode, &files.resolve(path)) {
        problems.push(problem("access_list.path", e));
    }
}

fn check_private(config: &Config, files: &Files, problems: &mut Vec<Problem>) {
    if !config.private.enabled {
        return;
    }
    let url = config.private_database();
    match shoal_accounts::Dialect::of_url(&url) {
        Ok(shoal_accounts::Dialect::Sqlite) => {
            let path = url.trim_start_matches("sqlite://");
            let path = path.split('?').next().unwrap_or(path);
            files.directory_exists("private.database", Path::new(path), problems);
        }
        Ok(_) => {} // a server: reachable or not, shoal tells at start
        Err(e) => problems.push(problem("private.database", e)),
    }
}

fn check_privileges(config: &Config, problems: &mut Vec<Problem>) {
    let p = &config.privileges;
    if !p.user.is_empty() {
        if let Err(e) = crate::privileges::resolve_user(&p.user) {
            problems.push(problem("privileges.user", format_args!("{e:#}")));
        }
    }
    if !p.group.is_empty() {
        if let Err(e) = crate::privileges::resolve_group(&p.group) {
            problems.push(problem("privileges.group", format_args!("{e:#}")));
        }
    }
    if !p.chroot.as_os_str().is_empty() && !p.chroot.is_dir() {
        problems.push(problem(
            "privileges.chroot",
            format_args!("{} is not a directory", p.chroot.display()),
        ));
    }
}

/// Two listeners of one transport on one address and port would share it (every socket is
/// bound with `SO_REUSEPORT`) and split its clients between two different services.
fn check_addresses(config: &Config, problems: &mut Vec<Problem>) {
    let tcp = [
        ("http.listen", &config.http.listen),
        ("https.listen", &config.https.listen),
        ("admin.listen", &config.admin.listen),
    ];
    let udp = [("udp.listen", &config.udp.listen)];
    for listeners in [&tcp[..], &udp[..]] {
        let mut seen: HashMap<SocketAddr, String> = HashMap::new();
        for (key, addrs) in listeners {
            for (i, addr) in addrs.iter().enumerate() {
                let here = format!("{key}[{i}]");
                if addr.port() == 0 {
                    continue;
                }
                if let Some(first) = seen.get(addr) {
                    problems.push(problem(
                        &here,
                        format_args!("{addr} is already used by {first}"),
                    ));
                } else {
                    seen.insert(*addr, here);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_CONFIG_TOML;

    fn problems_of(text: &str) -> Vec<String> {
        check_text(text).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_printed_defaults_pass() {
        assert_eq!(problems_of(DEFAULT_CONFIG_TOML), Vec::<String>::new());
    }

    /// The Debian package's /etc/shoal/shoal.toml is the printed defaults with the state
    /// under /var/lib/shoal, nothing else: a new option reaches the package too.
    #[test]
    fn the_packaged_config_is_the_printed_defaults() {
        let packaged = include_str!("../../../deploy/debian/shoal.toml");
        let expected = DEFAULT_CONFIG_TOML.replace(
            "\nfile = \"shoal.state\"\n",
            "\nfile = \"/var/lib/shoal/shoal.state\"\n",
        );
        assert_ne!(expected, DEFAULT_CONFIG_TOML, "the state file line moved");
        assert_eq!(
            packaged, expected,
            "deploy/debian/shoal.toml: regenerate it from `shoal --print-config`"
        );
    }

    /// Each broken file names the key its problem belongs to.
    #[test]
    fn broken_files_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let unreadable = dir.path().join("a-directory.list");
        std::fs::create_dir(&unreadable).unwrap();
        let cases = [
            ("[udp]\nlisten = []\nbogus_key = 1\n", "udp.bogus_key: unknown field"),
            ("wrkers = 3\n", "wrkers: unknown field"),
            ("[unit3d]\nbogus = 1\n", "unit3d.bogus: unknown field"),
            ("[gazelle]\nannounce_interval = \"x\"\n", "gazelle.announce_interval: invalid type"),
            ("[udp]\nbatch_size = \"64\"\n", "udp.batch_size: invalid type"),
            (
                &format!(
                    "[https]\nlisten = [\"127.0.0.1:8443\"]\ncert = {missing:?}\nkey = {missing:?}\n"
                ),
                "https.cert: cannot read",
            ),
            (
                &format!("[access_list]\nmode = \"allow\"\npath = {unreadable:?}\n"),
                "access_list.path: ",
            ),
            (
                "[http]\nlisten = [\"127.0.0.1:6969\", \"nope:80\"]\n",
                "http.listen[1]: invalid socket address",
            ),
            (
                "[admin]\nlisten = [\"127.0.0.1:6969\"]\n[http]\nlisten = [\"127.0.0.1:6969\"]\n",
                "admin.listen[0]: 127.0.0.1:6969 is already used by http.listen[0]",
            ),
            ("[announce]\nmax_numwant = 5000\n", "announce.max_numwant"),
            ("log_format = \"xml\"\n", "log_format: unknown variant"),
        ];
        for (text, expected) in cases {
            let found = problems_of(text);
            assert!(
                found.iter().any(|p| p.starts_with(expected)),
                "{text:?}: expected a problem starting {expected:?}, got {found:?}"
            );
        }
        let key = problems_of(&format!(
            "[https]\nlisten = [\"127.0.0.1:8443\"]\ncert = {missing:?}\nkey = {missing:?}\n"
        ));
        assert_eq!(key.len(), 2, "both files named: {key:?}");
        assert!(key[1].starts_with("https.key: cannot read"), "{key:?}");
    }

    #[test]
    fn a_certificate_that_is_not_pem_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, "not a certificate\n").unwrap();
        let found = problems_of(&format!(
            "[https]\nlisten = [\"127.0.0.1:8443\"]\ncert = {cert:?}\nkey = {cert:?}\n"
        ));
        assert!(
            found[0].starts_with("https.cert: no PEM certificate"),
            "{found:?}"
        );
        assert!(found[1].starts_with("https.key: "), "{found:?}");
    }

    #[test]
    fn a_good_certificate_and_list_pass() {
        let dir = tempfile::tempdir().unwrap();
        let signed = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key, list) = (
            dir.path().join("c.pem"),
            dir.path().join("k.pem"),
            dir.path().join("allowed.list"),
        );
        std::fs::write(&cert, signed.cert.pem()).unwrap();
        std::fs::write(&key, signed.key_pair.serialize_pem()).unwrap();
        std::fs::write(&list, "# none yet\n").unwrap();
        let text = format!(
            "[https]\nlisten = [\"127.0.0.1:8443\"]\ncert = {cert:?}\nkey = {key:?}\n\
             [access_list]\nmode = \"allow\"\npath = {list:?}\n"
        );
        assert_eq!(problems_of(&text), Vec::<String>::new());
    }
}
