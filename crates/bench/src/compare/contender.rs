//! Contenders: a preset name or `NAME=COMMAND` turned into the command line that starts the
//! tracker, with the config file the preset needs written beside the report.
//!
//! The presets give every tracker the same footing: one worker, listening on 127.0.0.1 at
//! the comparison's port, TLS with the same self-signed certificate when the load goes over
//! https:// or wss://, and keep-alive off when the load generator is wrk without
//! keep-alive (for the trackers that have the option). aquatic's configs start from what
//! the binary prints with `-p` (its defaults), with only those lines changed.
//!
//! `shoal-private` is the `shoal` preset in private mode: a fresh SQLite database in the
//! output directory (`shoal-private.db`, removed when the command is resolved, so every
//! comparison starts with an empty one), the admin listener on the comparison's port + 1
//! (for registering users and torrents and reading its database writes: see
//! [`super::private`]) and the admin token in its config. Its state file (which private
//! mode keeps its ledger file beside) is removed before every round, so that, like the
//! `shoal` preset, each round starts with empty swarms.
//!
//! `torrust` is torrust-tracker 3.x (UDP or HTTP): its config (schema 2.0.0) is named by the
//! `TORRUST_TRACKER_CONFIG_TOML_PATH` variable, so the command starts it through `env`. The
//! config holds only what the tracker requires or this comparison sets (public mode, one
//! listener at the comparison's port, the health-check listener it always starts moved to an
//! ephemeral port, its SQLite file in the temporary directory, errors-only logging, and usage
//! statistics off as in the benchmarking config torrust-tracker ships: on one core under
//! aquatic_udp_load_test it answered 52k requests a second with them, 140k without); the
//! rest is its default. Its workers are tokio's worker threads (`TOKIO_WORKER_THREADS`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::private::ADMIN_TOKEN;
use super::tiers::aquatic_workers;

/// The self-signed certificate and key given to every TLS contender.
#[derive(Clone, Debug)]
pub struct Cert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Cert {
    /// RSA-2048, PKCS#8 key, PEM, made with openssl once per output directory.
    pub fn make(dir: &Path) -> Result<Self> {
        let c = Self {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        if c.cert.is_file() && c.key.is_file() {
            return Ok(c);
        }
        let status = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
            .arg(&c.key)
            .arg("-out")
            .arg(&c.cert)
            .args(["-days", "30", "-subj", "/CN=localhost"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .context("running openssl to make a self-signed certificate")?;
        if !status.success() {
            bail!("openssl req -x509 failed ({status})");
        }
        Ok(c)
    }

    /// The openssl command, for the report.
    pub const COMMAND: &'static str = "openssl req -x509 -newkey rsa:2048 -nodes \
        -keyout key.pem -out cert.pem -days 30 -subj /CN=localhost";
}

/// What a preset needs to know to start its tracker for this comparison.
#[derive(Clone, Debug)]
pub struct Setting<'a> {
    /// `udp`, `http` or `ws`.
    pub protocol: &'static str,
    pub port: u16,
    /// The certificate, when the load goes over TLS.
    pub tls: Option<&'a Cert>,
    /// False when the load generator does not keep connections alive (wrk).
    pub keep_alive: bool,
    /// Where config files are written.
    pub dir: &'a Path,
    pub bins: &'a [PathBuf],
    /// Lines for shoal's `[ws]` section.
    pub shoal_ws: &'a [String],
    /// The tracker's workers (the tier of `--tracker-workers`).
    pub workers: usize,
}

/// A contender's name and its command line, placeholders filled in and config written.
pub fn resolve(spec: &str, s: &Setting) -> Result<(String, Vec<String>)> {
    let (name, template) = match spec.split_once('=') {
        Some((n, c)) => (n.to_string(), c.to_string()),
        None => (spec.to_string(), preset(spec, s)?),
    };
    let mut words: Vec<String> = template.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        bail!("empty command for {name}");
    }
    words[0] = find_binary(&words[0], s.bins);
    let tag = if s.tls.is_some() { "-tls" } else { "" };
    // One config per tier; tier 1's keeps the name it had before tiers.
    let tier = if s.workers == 1 {
        String::new()
    } else {
        format!("-{}w", s.workers)
    };
    let config = s.dir.join(format!("{name}{tag}{tier}.toml"));
    if template.contains("{config}") {
        let text = match name.as_str() {
            "shoal" => shoal_config(s, false),
            "shoal-private" => shoal_config(s, true),
            "torrust" => torrust_config(s)?,
            _ => aquatic_config(&words[0], s)?,
        };
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    }
    let (cert, key) = match s.tls {
        Some(c) => (c.cert.to_string_lossy(), c.key.to_string_lossy()),
        None => ("".into(), "".into()),
    };
    for w in &mut words {
        *w = w
            .replace("{config}", &config.to_string_lossy())
            .replace("{cert}", &cert)
            .replace("{key}", &key)
            .replace("{port}", &s.port.to_string())
            .replace("{workers}", &s.workers.to_string());
    }
    Ok((name, words))
}

/// The command template of a preset.
fn preset(spec: &str, s: &Setting) -> Result<String> {
    let t = match (spec, s.protocol) {
        ("shoal", _) => shoal_command(s, None)?,
        ("shoal-private", _) => shoal_command(s, Some(&private_database(s.dir)?))?,
        ("aquatic_udp", "udp") | ("aquatic_http", "http") | ("aquatic_ws", "ws") => {
            format!("{spec} -c {{config}}")
        }
        ("opentracker", "udp") => "opentracker -i 127.0.0.1 -P {port}".into(),
        ("opentracker", "http") => "opentracker -i 127.0.0.1 -p {port}".into(),
        ("torrust", "udp" | "http") => format!(
            "env TORRUST_TRACKER_CONFIG_TOML_PATH={{config}} TOKIO_WORKER_THREADS={{workers}} {}",
            find_binary("torrust-tracker", s.bins)
        ),
        ("io-limit", "udp") => format!("{} 127.0.0.1 {{port}}", io_limit_responder()?.display()),
        _ => bail!("no preset {spec:?} for {}; use NAME=COMMAND", s.protocol),
    };
    Ok(t)
}

/// The `shoal` preset, or with `database` the `shoal-private` one (whose database and
/// state files are removed first: each comparison starts with empty ones).
fn shoal_command(s: &Setting, database: Option<&Path>) -> Result<String> {
    // WebTorrent is served on the HTTP(S) listeners.
    let listener = match (s.protocol, s.tls.is_some()) {
        ("udp", _) => "udp",
        (_, false) => "http",
        (_, true) => "https",
    };
    let mut t = format!(
        "shoal --{listener} 127.0.0.1:{{port}} --workers {}",
        s.workers
    );
    let Some(db) = database else {
        t.push_str(" --state-file=");
        if s.tls.is_some() {
            t.push_str(" --tls-cert {cert} --tls-key {key}");
        }
        if !s.keep_alive || !s.shoal_ws.is_empty() {
            t.push_str(" --config {config}");
        }
        return Ok(t);
    };
    let state = db.with_extension("state");
    for file in ["", "-wal", "-shm", "-journal"] {
        remove_if_there(Path::new(&format!("{}{file}", db.display())))?;
    }
    remove_if_there(&state)?;
    t.push_str(&format!(
        " --state-file={} --private --database sqlite://{} --admin 127.0.0.1:{}",
        state.display(),
        db.display(),
        private_admin_port(s.port)
    ));
    if s.tls.is_some() {
        t.push_str(" --tls-cert {cert} --tls-key {key}");
    }
    t.push_str(" --config {config}");
    Ok(t)
}

fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The database file of the `shoal-private` preset: in the output directory, as an
/// absolute path (the tracker resolves a relative one from its own directory).
fn private_database(dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(dir).with_context(|| format!("{}", dir.display()))?;
    Ok(dir.join("shoal-private.db"))
}

/// The admin port of the `shoal-private` preset: the one after the trackers' port.
pub fn private_admin_port(port: u16) -> u16 {
    port.wrapping_add(1)
}

/// shoal's config, for what its flags do not cover: keep-alive, the `[ws]` lines, and
/// for a private contender the admin token.
fn shoal_config(s: &Setting, private: bool) -> String {
    let mut t = String::from(
        "# written by shoal-bench compare; everything not named here (or on the command \
         line) is shoal's default (shoal --print-config)\n",
    );
    if !s.keep_alive {
        t.push_str("\n[http]\nkeep_alive = false\n");
    }
    if !s.shoal_ws.is_empty() {
        t.push_str("\n[ws]\n");
        for kv in s.shoal_ws {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            t.push_str(&format!("{} = {}\n", k.trim(), v.trim()));
        }
    }
    if private {
        t.push_str(&format!("\n[admin]\ntoken = \"{ADMIN_TOKEN}\"\n"));
    }
    t
}

/// torrust-tracker's config: its mandatory keys (schema version, logging threshold, public
/// and unlisted), usage statistics off, one UDP or HTTP(S) listener, the health-check
/// listener on an ephemeral port (it has no off switch) and the SQLite file it creates at
/// start (unused with these settings) in the temporary directory, out of the report's,
/// removed first so every comparison starts with an empty one.
fn torrust_config(s: &Setting) -> Result<String> {
    let db = std::env::temp_dir().join(format!("shoal-bench-torrust-{}.db", s.port));
    remove_if_there(&db)?;
    let listener = if s.protocol == "udp" {
        "udp_trackers"
    } else {
        "http_trackers"
    };
    let mut lines = vec![
        "# written by shoal-bench compare; everything not named here is torrust-tracker's \
         default"
            .to_string(),
        "[metadata]".into(),
        "schema_version = \"2.0.0\"".into(),
        "[logging]".into(),
        "threshold = \"error\"".into(),
        "[core]".into(),
        "listed = false".into(),
        "private = false".into(),
        "tracker_usage_statistics = false".into(),
        "[core.database]".into(),
        "driver = \"sqlite3\"".into(),
        format!("path = \"{}\"", db.display()),
        "[health_check_api]".into(),
        "bind_address = \"127.0.0.1:0\"".into(),
        format!("[[{listener}]]"),
        format!("bind_address = \"127.0.0.1:{}\"", s.port),
    ];
    if let Some(c) = s.tls {
        lines.push("[http_trackers.tsl_config]".into());
        lines.push(format!("ssl_cert_path = \"{}\"", c.cert.display()));
        lines.push(format!("ssl_key_path = \"{}\"", c.key.display()));
    }
    Ok(lines.join("\n") + "\n")
}

/// aquatic's default config (`BIN -p`) with the listen address, the tier's workers (see
/// [`aquatic_workers`]), TLS and keep-alive set for this comparison.
fn aquatic_config(bin: &str, s: &Setting) -> Result<String> {
    let out = Command::new(bin)
        .arg("-p")
        .output()
        .with_context(|| format!("running {bin} -p"))?;
    aquatic_config_from(&String::from_utf8_lossy(&out.stdout), s)
        .with_context(|| format!("the output of {bin} -p"))
}

/// [`aquatic_config`] from the defaults the binary printed.
fn aquatic_config_from(defaults: &str, s: &Setting) -> Result<String> {
    let (socket, swarm) = aquatic_workers(s.protocol, s.workers);
    let mut set: Vec<(&str, String, bool)> = vec![
        ("address", format!("\"127.0.0.1:{}\"", s.port), true),
        // Required beyond one worker: a tier that did not set them would not be that tier.
        ("socket_workers", socket.to_string(), s.workers > 1),
        (
            "swarm_workers",
            swarm.unwrap_or(1).to_string(),
            s.workers > 1 && swarm.is_some(),
        ),
        ("log_level", "\"error\"".into(), false),
    ];
    if s.protocol == "http" {
        set.push(("keep_alive", s.keep_alive.to_string(), true));
    }
    if s.protocol != "udp" {
        let tls = s.tls.is_some();
        let path = |p: Option<&PathBuf>| {
            format!(
                "\"{}\"",
                p.map(|p| p.display().to_string()).unwrap_or_default()
            )
        };
        set.push(("enable_tls", tls.to_string(), tls));
        set.push(("tls_certificate_path", path(s.tls.map(|c| &c.cert)), tls));
        set.push(("tls_private_key_path", path(s.tls.map(|c| &c.key)), tls));
    }
    let pairs: Vec<(&str, &str, bool)> = set.iter().map(|(k, v, r)| (*k, v.as_str(), *r)).collect();
    set_toml_keys(defaults, &pairs)
}

/// Replaces the first `key = ...` line of each key; a required key that is missing is an
/// error (the binary is not the version the presets know).
pub fn set_toml_keys(text: &str, keys: &[(&str, &str, bool)]) -> Result<String> {
    let mut done = vec![false; keys.len()];
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let found = keys.iter().enumerate().find(|(i, (k, _, _))| {
            !done[*i]
                && line
                    .trim_start()
                    .strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
        });
        match found {
            Some((i, (k, v, _))) => {
                done[i] = true;
                out.push(format!("{k} = {v}"));
            }
            None => out.push(line.to_string()),
        }
    }
    for (i, (k, _, required)) in keys.iter().enumerate() {
        if *required && !done[i] {
            bail!("no `{k} = ` line");
        }
    }
    Ok(out.join("\n") + "\n")
}

/// `name` in the first of `bins` that has it, else `name` (for PATH).
pub fn find_binary(name: &str, bins: &[PathBuf]) -> String {
    if name.contains('/') {
        return name.to_string();
    }
    for d in bins {
        let p = d.join(name);
        if p.is_file() {
            return p.to_string_lossy().into_owned();
        }
    }
    name.to_string()
}

/// The I/O-limit responder (bench/io-limit/udp_responder.c), built with `cc -O2` into
/// target/bench/ when missing or older than its source.
fn io_limit_responder() -> Result<PathBuf> {
    let repo = [
        PathBuf::from("."),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    ]
    .into_iter()
    .find(|r| r.join("bench/io-limit/udp_responder.c").is_file())
    .context("bench/io-limit/udp_responder.c not found (run from the repository root)")?;
    let src = repo.join("bench/io-limit/udp_responder.c");
    let bin = repo.join("target/bench/udp_responder");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin).is_none() || modified(&bin) < modified(&src) {
        std::fs::create_dir_all(repo.join("target/bench"))?;
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        eprintln!(
            "building the io-limit responder: {cc} -O2 -o {}",
            bin.display()
        );
        let status = Command::new(&cc)
            .arg("-O2")
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .status()
            .with_context(|| format!("running {cc}"))?;
        if !status.success() {
            bail!("{cc} -O2 {} failed ({status})", src.display());
        }
    }
    Ok(bin.strip_prefix(".").map(Path::to_path_buf).unwrap_or(bin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting<'a>(protocol: &'static str, dir: &'a Path, tls: Option<&'a Cert>) -> Setting<'a> {
        Setting {
            protocol,
            port: 3200,
            tls,
            keep_alive: true,
            dir,
            bins: &[],
            shoal_ws: &[],
            workers: 1,
        }
    }

    #[test]
    fn shoal_presets_follow_protocol_tls_and_keep_alive() {
        let dir = std::env::temp_dir();
        let (_, w) = resolve("shoal", &setting("udp", &dir, None)).unwrap();
        assert_eq!(
            w.join(" "),
            "shoal --udp 127.0.0.1:3200 --workers 1 --state-file="
        );
        let cert = Cert {
            cert: "/c.pem".into(),
            key: "/k.pem".into(),
        };
        let (_, w) = resolve("shoal", &setting("ws", &dir, Some(&cert))).unwrap();
        assert_eq!(
            w.join(" "),
            "shoal --https 127.0.0.1:3200 --workers 1 --state-file= --tls-cert /c.pem --tls-key /k.pem"
        );
        let s = Setting {
            keep_alive: false,
            ..setting("http", &dir, None)
        };
        assert_eq!(
            shoal_config(&s, false).lines().last(),
            Some("keep_alive = false")
        );
        assert!(resolve("shoal", &s)
            .unwrap()
            .1
            .contains(&"--config".to_string()));
        assert!(resolve("io-limit", &setting("http", &dir, None)).is_err());
    }

    #[test]
    fn the_private_preset_has_a_fresh_database_an_admin_listener_and_its_token() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-preset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = [
            "shoal-private.db",
            "shoal-private.db-wal",
            "shoal-private.state",
        ];
        for file in old {
            std::fs::write(dir.join(file), "an old run's").unwrap();
        }
        let db = dir.join("shoal-private.db");
        let (name, w) = resolve("shoal-private", &setting("http", &dir, None)).unwrap();
        assert_eq!(name, "shoal-private");
        let config = dir.join("shoal-private.toml");
        assert_eq!(
            w.join(" "),
            format!(
                "shoal --http 127.0.0.1:3200 --workers 1 --state-file={} --private \
                 --database sqlite://{} --admin 127.0.0.1:3201 --config {}",
                dir.join("shoal-private.state").display(),
                db.display(),
                config.display()
            )
        );
        assert!(old.iter().all(|file| !dir.join(file).exists()));
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(
            text.ends_with("\n[admin]\ntoken = \"shoal-bench\"\n"),
            "{text}"
        );
        let private = super::super::private::PrivateTracker::of_command(&w.join(" ")).unwrap();
        assert_eq!(private.admin, "127.0.0.1:3201".parse().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_torrust_preset_names_its_config_and_threads_and_writes_one_listener() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-torrust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bins = [dir.clone()];
        std::fs::write(dir.join("torrust-tracker"), "").unwrap();
        let s = Setting {
            bins: &bins,
            workers: 2,
            ..setting("udp", &dir, None)
        };
        let (name, w) = resolve("torrust", &s).unwrap();
        let config = dir.join("torrust-2w.toml");
        assert_eq!(name, "torrust");
        assert_eq!(
            w.join(" "),
            format!(
                "env TORRUST_TRACKER_CONFIG_TOML_PATH={} TOKIO_WORKER_THREADS=2 {}",
                config.display(),
                dir.join("torrust-tracker").display()
            )
        );
        let text = std::fs::read_to_string(&config).unwrap();
        for line in [
            "schema_version = \"2.0.0\"",
            "threshold = \"error\"",
            "private = false",
            "listed = false",
            "tracker_usage_statistics = false",
            "[health_check_api]\nbind_address = \"127.0.0.1:0\"",
            "[[udp_trackers]]\nbind_address = \"127.0.0.1:3200\"\n",
        ] {
            assert!(text.contains(line), "{line:?} not in {text}");
        }
        assert!(!text.contains("http_trackers"), "{text}");
        let cert = Cert {
            cert: "/c.pem".into(),
            key: "/k.pem".into(),
        };
        resolve("torrust", &setting("http", &dir, Some(&cert))).unwrap();
        let text = std::fs::read_to_string(dir.join("torrust-tls.toml")).unwrap();
        assert!(
            text.ends_with(
                "[[http_trackers]]\nbind_address = \"127.0.0.1:3200\"\n\
                 [http_trackers.tsl_config]\nssl_cert_path = \"/c.pem\"\nssl_key_path = \"/k.pem\"\n"
            ),
            "{text}"
        );
        assert!(resolve("torrust", &setting("ws", &dir, None)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn aquatic_config_lines_are_replaced_and_required_ones_checked() {
        let text =
            "log_level = \"warn\"\n[network]\n  address = \"0.0.0.0:3000\"\nkeep_alive = true\n";
        let out = set_toml_keys(
            text,
            &[
                ("address", "\"127.0.0.1:1\"", true),
                ("keep_alive", "false", true),
                ("swarm_workers", "1", false),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "log_level = \"warn\"\n[network]\naddress = \"127.0.0.1:1\"\nkeep_alive = false\n"
        );
        assert!(set_toml_keys(text, &[("enable_tls", "true", true)]).is_err());
    }

    #[test]
    fn commands_and_configs_follow_the_tier() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-tier-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tier = |protocol, workers| Setting {
            workers,
            ..setting(protocol, &dir, None)
        };
        let (_, w) = resolve("shoal", &tier("udp", 4)).unwrap();
        assert_eq!(
            w.join(" "),
            "shoal --udp 127.0.0.1:3200 --workers 4 --state-file="
        );
        let (name, w) = resolve("mine=./t --threads {workers} -p {port}", &tier("udp", 8)).unwrap();
        assert_eq!(
            (name.as_str(), w.join(" ").as_str()),
            ("mine", "./t --threads 8 -p 3200")
        );
        let (_, w) = resolve("opentracker", &tier("udp", 4)).unwrap();
        assert_eq!(w.join(" "), "opentracker -i 127.0.0.1 -P 3200");
        // aquatic's config: the defaults with the tier's split.
        let ws = "socket_workers = 1\nswarm_workers = 1\n[network]\naddress = \"0.0.0.0:3000\"\n\
                  enable_tls = false\ntls_certificate_path = \"\"\ntls_private_key_path = \"\"\n";
        let text = aquatic_config_from(ws, &tier("ws", 12)).unwrap();
        assert!(
            text.starts_with("socket_workers = 10\nswarm_workers = 2\n"),
            "{text}"
        );
        let text = aquatic_config_from(ws, &tier("ws", 1)).unwrap();
        assert!(text.starts_with("socket_workers = 1\nswarm_workers = 1\n"));
        let udp = "socket_workers = 1\n[network]\naddress = \"0.0.0.0:3000\"\n";
        let text = aquatic_config_from(udp, &tier("udp", 4)).unwrap();
        assert!(text.starts_with("socket_workers = 4\n"), "{text}");
        assert!(!text.contains("swarm_workers"));
        // A version without the worker keys cannot give a tier its workers.
        let bare = "[network]\naddress = \"0.0.0.0:3000\"\n";
        assert!(aquatic_config_from(bare, &tier("udp", 4)).is_err());
        assert!(aquatic_config_from(bare, &tier("udp", 1)).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
