//! Private-mode contenders: a tracker that serves only registered users and torrents, and
//! writes its accounting to a database.
//!
//! Such a contender refuses the whole load unless the load's passkeys and the workload's
//! info hashes exist in its database, so after it starts (and before the first load)
//! they are registered through its admin API, as a site would: `PUT /api/users/<id>` for
//! each passkey and `PUT /api/torrents/<hex>` for each torrent. Its database writes are
//! what open mode does not do, so they are reported: shoal's `shoal_private_flushes_total`
//! (write transactions) and `shoal_private_deltas_written_total` (accounting rows written)
//! read from `/metrics` before and after each run.
//!
//! A contender is private when its command line has `--private` and `--admin ADDR`; the
//! `shoal-private` preset writes both, and the admin token [`ADMIN_TOKEN`] in its config.
//! The admin calls go over a few keep-alive connections on a small runtime of their own,
//! with the generators' response reader ([`crate::http::read_response`]).

use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::http::read_response;
use crate::passkeys::Passkeys;
use crate::report::median;
use crate::run::RunResult;
use crate::units::thousands;

use super::results::{describe, Comparison, Contender, Point};

/// The value of `flag` on a command line: the word after `flag`, or what follows
/// `flag=` (the first occurrence of either).
pub(super) fn flag_value<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.iter().enumerate().find_map(|(i, w)| {
        if *w == flag {
            words.get(i + 1).copied()
        } else {
            w.strip_prefix(flag)?.strip_prefix('=')
        }
    })
}

/// The admin token the `shoal-private` preset configures and the admin calls present.
pub const ADMIN_TOKEN: &str = "shoal-bench";

/// shoal's counter of write transactions of the accounting.
pub const FLUSHES: &str = "shoal_private_flushes_total";
/// shoal's counter of accounting rows (deltas) written.
pub const DELTAS: &str = "shoal_private_deltas_written_total";

/// Keys of a run's `extra` counts for what the database was sent over the run.
const EXTRA_FLUSHES: &str = "database_flushes";
const EXTRA_DELTAS: &str = "database_deltas_written";
const EXTRA_WINDOW_MS: &str = "database_window_ms";

/// Admin connections used at once to register users and torrents.
const REGISTER_CONNECTIONS: usize = 8;

/// A private contender's admin listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateTracker {
    pub admin: SocketAddr,
}

/// The database-write counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatabaseWrites {
    pub flushes: u64,
    pub deltas: u64,
}

impl PrivateTracker {
    /// The admin listener of a command line with `--private` and `--admin ADDR` (or
    /// `--admin=ADDR`); `None` for an open tracker.
    pub fn of_command(command: &str) -> Option<Self> {
        if !command.split_whitespace().any(|w| w == "--private") {
            return None;
        }
        let admin = flag_value(command, "--admin")?;
        Some(Self {
            admin: admin.parse().ok()?,
        })
    }

    /// Removes the state file a private contender's command names, and the ledger file
    /// shoal keeps beside it (`<state file>.ledger`), so that the round starts from empty
    /// swarms and no client records, as an open contender does (the `shoal` preset runs
    /// with no state file). The database stays: it holds the users and torrents registered
    /// in the first round. Without this, every round after the first restored the previous
    /// round's peers (bigger answers: 47 peers an announce against 45 in a 16-core run)
    /// and its client records.
    pub fn forget_state(command: &str) -> Result<()> {
        let Some(state) = flag_value(command, "--state-file").filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        for path in [state.to_string(), format!("{state}.ledger")] {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {path}"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Registers every passkey as a user (user ids 1, 2, ...) and torrents `0..torrents`
    /// of the workload, through the admin API.
    pub fn register(&self, passkeys: &Passkeys, torrents: usize) -> Result<()> {
        let mut calls: Vec<(String, String)> = passkeys
            .keys()
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let body = serde_json::json!({"passkey": key}).to_string();
                (format!("/api/users/{}", i + 1), body)
            })
            .collect();
        calls.extend((0..torrents as u32).map(|i| {
            let hash = crate::workload::info_hash(i).to_hex();
            (format!("/api/torrents/{hash}"), "{}".to_string())
        }));
        let started = Instant::now();
        let admin = self.admin;
        runtime()?.block_on(async move {
            let per = calls.len().div_ceil(REGISTER_CONNECTIONS).max(1);
            let mut tasks = Vec::new();
            while !calls.is_empty() {
                let mine: Vec<_> = calls.drain(..per.min(calls.len())).collect();
                tasks.push(tokio::spawn(async move {
                    let mut admin = AdminConnection::open(admin).await?;
                    for (path, body) in mine {
                        admin.call("PUT", &path, &body).await?;
                    }
                    anyhow::Ok(())
                }));
            }
            for t in tasks {
                t.await.context("an admin task panicked")??;
            }
            anyhow::Ok(())
        })?;
        eprintln!(
            "registered {} passkeys and {torrents} torrents at {} in {:.1}s",
            passkeys.keys().len(),
            self.admin,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The database-write counters now, from `/metrics` (0 for a counter not there yet).
    pub fn writes(&self) -> Result<DatabaseWrites> {
        let text = metrics_text(self.admin)?;
        Ok(DatabaseWrites {
            flushes: counter(&text, FLUSHES),
            deltas: counter(&text, DELTAS),
        })
    }

    /// Runs `load`, and records in its result what the database was sent meanwhile.
    pub fn measure(&self, load: impl FnOnce() -> Result<RunResult>) -> Result<RunResult> {
        let before = self.writes()?;
        let started = Instant::now();
        let mut result = load()?;
        let after = self.writes()?;
        record(&mut result, before, after, started.elapsed());
        Ok(result)
    }
}

/// The `/metrics` text of the admin listener at `admin`.
pub(super) fn metrics_text(admin: SocketAddr) -> Result<String> {
    runtime()?.block_on(async move {
        AdminConnection::open(admin)
            .await?
            .call("GET", "/metrics", "")
            .await
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The sum of a Prometheus counter's series (`name value` or `name{labels} value`) in a
/// `/metrics` text, but for those labelled `result="error"` (shoal counts failed writes
/// of the accounting under the flushes too); 0 when it has none.
pub fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("result=\"error\""))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            if !(rest.starts_with(' ') || rest.starts_with('{')) {
                return None;
            }
            let value = rest.rsplit(' ').next()?;
            value.parse::<f64>().ok().map(|v| v as u64)
        })
        .sum()
}

/// Writes what the database was sent between `before` and `after` into the run's counts.
fn record(result: &mut RunResult, before: DatabaseWrites, after: DatabaseWrites, took: Duration) {
    let extra = &mut result.summary.extra;
    extra.insert(
        EXTRA_FLUSHES.into(),
        after.flushes.saturating_sub(before.flushes),
    );
    extra.insert(
        EXTRA_DELTAS.into(),
        after.deltas.saturating_sub(before.deltas),
    );
    extra.insert(EXTRA_WINDOW_MS.into(), took.as_millis() as u64);
}

/// Write transactions and rows written per second over a run, if it recorded them.
fn per_second(r: &RunResult) -> Option<(f64, f64)> {
    let e = &r.summary.extra;
    let seconds = *e.get(EXTRA_WINDOW_MS)? as f64 / 1000.0;
    let rate = |k: &str| e.get(k).copied().unwrap_or(0) as f64 / seconds.max(1e-3);
    Some((rate(EXTRA_FLUSHES), rate(EXTRA_DELTAS)))
}

/// Median over `c`'s runs at `p` of `f`, where defined.
fn median_at(c: &Contender, p: Point, f: impl Fn(&RunResult) -> Option<f64>) -> Option<f64> {
    let mut v: Vec<f64> = c
        .runs
        .iter()
        .filter(|r| r.point == p)
        .filter_map(|r| f(&r.result))
        .collect();
    (!v.is_empty()).then(|| median(&mut v))
}

/// The report's section on private contenders (empty when there are none): their database
/// writes, and their responses per tracker CPU-second against the first open contender's
/// (the issue's bar for private mode is 0.9x open mode); medians over rounds.
pub fn database_section(cmp: &Comparison) -> String {
    let is_private = |c: &Contender| c.runs.iter().any(|r| per_second(&r.result).is_some());
    let open = cmp.contenders.iter().find(|c| !is_private(c));
    let per_cpu = |r: &RunResult| r.responses_per_tracker_cpu_second;
    let mut rows = String::new();
    for c in cmp.contenders.iter().filter(|c| is_private(c)) {
        for p in cmp.points() {
            let Some(flushes) = median_at(c, p, |r| per_second(r).map(|w| w.0)) else {
                continue;
            };
            let deltas = median_at(c, p, |r| per_second(r).map(|w| w.1)).unwrap_or(0.0);
            let ratio = open
                .and_then(|o| Some(median_at(c, p, per_cpu)? / median_at(o, p, per_cpu)?))
                .map_or("-".into(), |x| format!("{x:.3}x"));
            let _ = writeln!(
                rows,
                "| {} | {} | {flushes:.2} | {} | {ratio} |",
                c.name,
                describe(p),
                thousands(deltas.round() as u64)
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let open = open.map_or("an open contender".into(), |o| o.name.clone());
    format!(
        "\n## Private mode (median over rounds)\n\n\
         Database writes from the tracker's `{FLUSHES}` and `{DELTAS}` before and after each \
         run (warm-up included); responses per tracker CPU-second against {open}'s.\n\n\
         | Contender | Load | Write transactions/s | Accounting rows written/s | \
         Responses per tracker CPU-second vs {open} |\n|---|---|---|---|---|\n{rows}"
    )
}

/// One keep-alive connection to the admin listener.
struct AdminConnection {
    addr: SocketAddr,
    stream: TcpStream,
    buf: Vec<u8>,
}

impl AdminConnection {
    async fn open(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to the admin listener {addr}"))?;
        Ok(Self {
            addr,
            stream,
            buf: Vec::new(),
        })
    }

    /// One call; its body when the answer is 200, an error saying what came back if not.
    async fn call(&mut self, method: &str, path: &str, body: &str) -> Result<String> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let mut reopened = false;
        let resp = loop {
            let sent = self.stream.write_all(req.as_bytes()).await;
            let resp = match sent {
                Ok(()) => read_response(&mut self.stream, &mut self.buf).await,
                Err(e) => Err(e),
            };
            match resp {
                // The listener closed the idle connection: once more on a new one.
                Err(_) if !reopened && self.buf.is_empty() => {
                    reopened = true;
                    *self = Self::open(self.addr).await?;
                }
                r => break r.with_context(|| format!("{method} {path} at {}", self.addr))?,
            }
        };
        let text = String::from_utf8_lossy(&self.buf[resp.body.clone()]).into_owned();
        if resp.status != 200 {
            bail!("{method} {path} at {}: {} {text}", self.addr, resp.status);
        }
        if resp.close {
            *self = Self::open(self.addr).await?;
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::report::tests::comparison;

    #[test]
    fn private_contenders_are_told_by_private_and_admin() {
        let admin: SocketAddr = "127.0.0.1:3101".parse().unwrap();
        for (line, want) in [
            (
                "shoal --private --admin 127.0.0.1:3101 --udp x",
                Some(admin),
            ),
            ("shoal --admin=127.0.0.1:3101 --private", Some(admin)),
            ("shoal --admin 127.0.0.1:3101 --udp x", None),
            ("shoal --private --udp x", None),
            ("shoal --private --admin", None),
        ] {
            let got = PrivateTracker::of_command(line).map(|p| p.admin);
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn a_round_forgets_the_state_and_ledger_files_but_not_the_database() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-forget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (state, ledger, db) = (
            dir.join("p.state"),
            dir.join("p.state.ledger"),
            dir.join("p.db"),
        );
        for (form, sep) in [("--state-file=", ""), ("--state-file", " ")] {
            for f in [&state, &ledger, &db] {
                std::fs::write(f, b"x").unwrap();
            }
            let command = format!(
                "shoal --private {form}{sep}{} --database sqlite://{}",
                state.display(),
                db.display()
            );
            PrivateTracker::forget_state(&command).unwrap();
            assert!(!state.exists() && !ledger.exists(), "{command}");
            assert!(db.exists(), "{command}");
        }
        // Nothing to remove is no error, and no state file names none.
        PrivateTracker::forget_state(&format!("shoal --state-file={}", state.display())).unwrap();
        PrivateTracker::forget_state("shoal --private --state-file=").unwrap();
        assert!(db.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn counters_are_summed_over_their_series() {
        let text = "# HELP shoal_private_flushes_total flushes\n\
            # TYPE shoal_private_flushes_total counter\n\
            shoal_private_flushes_total{result=\"ok\"} 12\n\
            shoal_private_flushes_total{result=\"error\"} 4\n\
            shoal_private_flushes_total_other 99\n\
            shoal_private_deltas_written_total{database=\"sqlite\"} 300\n\
            shoal_private_deltas_written_total{database=\"x\"} 5\n";
        assert_eq!(counter(text, FLUSHES), 12);
        assert_eq!(counter(text, DELTAS), 305);
        assert_eq!(counter(text, "shoal_missing_total"), 0);
    }

    #[test]
    fn database_writes_are_per_second_of_the_run_and_reported() {
        let mut cmp = comparison(vec![1], vec![]);
        assert_eq!(database_section(&cmp), "");
        let run = &mut cmp.contenders[0].runs[0].result;
        let (before, after) = (
            DatabaseWrites {
                flushes: 1,
                deltas: 100,
            },
            DatabaseWrites {
                flushes: 5,
                deltas: 20_100,
            },
        );
        record(run, before, after, Duration::from_secs(2));
        assert_eq!(per_second(run), Some((2.0, 10_000.0)));
        // The private contender answers 0.9 times the responses per tracker CPU-second of
        // the open one (listed first), in every round.
        for (c, per_cpu) in cmp.contenders.iter_mut().zip([900.0, 1000.0]) {
            for r in &mut c.runs {
                r.result.responses_per_tracker_cpu_second = Some(per_cpu);
            }
        }
        cmp.contenders.swap(0, 1);
        let section = database_section(&cmp);
        assert!(
            section.contains("| shoal | 1 workers | 2.00 | 10,000 | 0.900x |"),
            "{section}"
        );
        assert!(section.contains("vs aquatic_ws"), "{section}");
    }

    /// The admin calls against a listener that answers like shoal's: the bearer token,
    /// the paths and bodies, keep-alive, and a refusal reported with its status.
    #[test]
    fn users_and_torrents_are_registered_through_the_admin_api() {
        use std::io::{BufRead, BufReader, Read, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut conn = BufReader::new(conn.unwrap());
                    loop {
                        let mut head = Vec::new();
                        let mut line = String::new();
                        while conn.read_line(&mut line).unwrap_or(0) > 2 {
                            head.push(line.trim_end().to_string());
                            line.clear();
                        }
                        if head.is_empty() {
                            return;
                        }
                        let len: usize = head
                            .iter()
                            .find_map(|h| h.strip_prefix("Content-Length: "))
                            .map_or(0, |v| v.parse().unwrap());
                        let mut body = vec![0; len];
                        conn.read_exact(&mut body).unwrap();
                        let authorized = head
                            .iter()
                            .any(|h| h == "Authorization: Bearer shoal-bench");
                        let refused = head[0].contains("/api/torrents/00000001");
                        log.lock()
                            .unwrap()
                            .push((head[0].clone(), String::from_utf8(body).unwrap()));
                        let (status, text) = match (authorized, refused) {
                            (false, _) => ("401 Unauthorized", "{}"),
                            (_, true) => ("400 Bad Request", "{\"error\":\"no\"}"),
                            _ if head[0].starts_with("GET /metrics") => {
                                ("200 OK", "shoal_private_flushes_total 3\nshoal_private_deltas_written_total 40\n")
                            }
                            _ => ("200 OK", "{}"),
                        };
                        let reply = format!(
                            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{text}",
                            text.len()
                        );
                        conn.get_mut().write_all(reply.as_bytes()).unwrap();
                    }
                });
            }
        });
        let tracker = PrivateTracker { admin };
        let keys = Passkeys::parse("aaa\nbbb\nccc\n").unwrap();
        tracker.register(&keys, 1).unwrap();
        let mut calls = seen.lock().unwrap().clone();
        calls.sort();
        let hash = crate::workload::info_hash(0).to_hex();
        assert_eq!(
            calls,
            [
                (
                    format!("PUT /api/torrents/{hash} HTTP/1.1"),
                    "{}".to_string()
                ),
                (
                    "PUT /api/users/1 HTTP/1.1".into(),
                    r#"{"passkey":"aaa"}"#.into()
                ),
                (
                    "PUT /api/users/2 HTTP/1.1".into(),
                    r#"{"passkey":"bbb"}"#.into()
                ),
                (
                    "PUT /api/users/3 HTTP/1.1".into(),
                    r#"{"passkey":"ccc"}"#.into()
                ),
            ]
        );
        assert_eq!(
            tracker.writes().unwrap(),
            DatabaseWrites {
                flushes: 3,
                deltas: 40
            }
        );
        let e = format!("{:#}", tracker.register(&keys, 2).unwrap_err());
        assert!(e.contains("400") && e.contains("no"), "{e}");
    }
}
