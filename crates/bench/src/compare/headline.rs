//! `shoal-bench headline DIR...`: the README's numbers table, one row per comparison,
//! from the results.json files that `bench/report.sh` just wrote (and the swarm memory
//! example's line), so that the README quotes exactly what the reports show.
//!
//! Each row is "shoal vs the best peer, median per tracker CPU-second": the first
//! contender is shoal, the best peer is the other contender with the highest median
//! (the I/O-limit responder is a bar, not a peer: it gets its own clause).

use std::fmt::Write;

use anyhow::{Context, Result};

use crate::report;
use crate::units::thousands;

use super::args::HeadlineArgs;
use super::report_other::per_cpu_median;
use super::results::{describe, generator_name, read_results, Comparison, Contender, Generator};

/// The table, header included.
pub fn table(args: &HeadlineArgs) -> Result<String> {
    let mut rows = Vec::new();
    let comparisons = args
        .dirs
        .iter()
        .map(|d| read_results(&d.join("results.json")))
        .collect::<Result<Vec<_>>>()?;
    for (i, cmp) in comparisons.iter().enumerate() {
        // The memory row sits after the first (UDP) row, as it always has.
        if i == 1 {
            rows.extend(args.swarm_memory.as_deref().map(memory_row).transpose()?);
        }
        rows.push(row(cmp).with_context(|| format!("{}", args.dirs[i].display()))?);
    }
    if comparisons.len() < 2 {
        rows.extend(args.swarm_memory.as_deref().map(memory_row).transpose()?);
    }
    Ok(format!(
        "| protocol, load | shoal vs the best peer, median per tracker CPU-second |\n|---|---|\n{}",
        rows.join("")
    ))
}

/// `392k`, `85.5k`, `13.3k`, `950`.
pub fn short(v: f64) -> String {
    match v {
        v if v >= 100_000.0 => format!("{:.0}k", v / 1000.0),
        v if v >= 1_000.0 => format!("{:.1}k", v / 1000.0),
        v => format!("{v:.0}"),
    }
}

/// A contender's median per tracker CPU-second: under another generator at its heaviest
/// point, or under shoal-bench at the comparison's heaviest point.
fn per_cpu(cmp: &Comparison, c: &Contender, kind: Option<&str>) -> Option<f64> {
    if cmp.generator != Generator::Shoal {
        return per_cpu_median(c, kind);
    }
    let p = *cmp.points().last()?;
    let mut v: Vec<f64> = c
        .runs
        .iter()
        .filter(|r| r.point == p)
        .filter_map(|r| r.result.responses_per_tracker_cpu_second)
        .collect();
    (!v.is_empty()).then(|| report::median(&mut v))
}

/// The row of one comparison.
pub fn row(cmp: &Comparison) -> Result<String> {
    if !cmp.idle.is_empty() {
        return Ok(idle_row(cmp));
    }
    let label = match (cmp.generator, cmp.protocol.as_str(), cmp.tls) {
        (Generator::Aquatic, "udp", _) => "UDP, `aquatic_udp_load_test`".to_string(),
        (Generator::Aquatic, "http", false) => "HTTP keep-alive, `aquatic_http_load_test`".into(),
        (Generator::Aquatic, "http", true) => {
            "HTTPS keep-alive, `aquatic_http_load_test` over TLS".into()
        }
        (Generator::Aquatic, _, _) => "WebTorrent over wss, `aquatic_ws_load_test`".into(),
        (Generator::Wrk, _, _) => "HTTP without keep-alive, `wrk -H 'Connection: close'`".into(),
        (Generator::Shoal, p, tls) => {
            let proto = match (p, tls) {
                ("udp", _) => "UDP",
                ("http", false) => "HTTP",
                ("http", true) => "HTTPS",
                (_, false) => "WebTorrent",
                (_, true) => "WebTorrent over wss",
            };
            let at = cmp
                .points()
                .last()
                .map(|&p| describe(p))
                .unwrap_or_default();
            format!("{proto}, `{}` at {at}", generator_name(cmp))
        }
    };
    let (shoal, peers) = cmp.contenders.split_first().context("no contenders")?;
    let mine = per_cpu(cmp, shoal, None).context("no runs of the first contender")?;
    let mut scored: Vec<(&Contender, f64)> = peers
        .iter()
        .filter(|c| c.name != "io-limit")
        .filter_map(|c| Some((c, per_cpu(cmp, c, None)?)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut cell = String::new();
    if let Some(((best, theirs), rest)) = scored.split_first() {
        let unit = if cmp.protocol == "udp" {
            "responses per CPU-s"
        } else {
            "per CPU-s"
        };
        let _ = write!(
            cell,
            "**{:.2}x {}**{} ({} vs {} {unit})",
            mine / theirs,
            best.name,
            if cmp.protocol == "ws" {
                " on the load tester's total"
            } else {
                ""
            },
            short(mine),
            short(*theirs)
        );
        if cmp.protocol == "ws" {
            let mut sep = "; ";
            for (rate, what) in [
                ("announce", "announce responses"),
                ("offer", "offers relayed"),
                ("answer", "answers relayed"),
            ] {
                if let (Some(a), Some(b)) = (
                    per_cpu(cmp, shoal, Some(rate)),
                    per_cpu(cmp, best, Some(rate)),
                ) {
                    if b > 0.0 {
                        let _ = write!(cell, "{sep}{:.2}x on {what}", a / b);
                        sep = ", ";
                    }
                }
            }
        }
        for (c, v) in rest {
            let _ = write!(cell, ", {:.2}x {}", mine / v, c.name);
        }
    }
    if let Some(bar) = peers
        .iter()
        .find(|c| c.name == "io-limit")
        .and_then(|c| per_cpu(cmp, c, None))
    {
        let sep = if cell.is_empty() { "" } else { "; " };
        let _ = write!(
            cell,
            "{sep}**{:.3}x** a stateless C responder (the kernel's I/O limit)",
            mine / bar
        );
    }
    if cell.is_empty() {
        let _ = write!(cell, "{} per CPU-s (no peer ran)", short(mine));
    }
    Ok(format!("| {label}, {} rounds | {cell} |\n", cmp.rounds))
}

/// Memory per idle WebSocket, per mode: shoal's KiB, the others' in brackets.
fn idle_row(cmp: &Comparison) -> String {
    let asked = cmp.idle.first().map(|r| r.connections.asked).unwrap_or(0);
    let mut modes: Vec<&str> = Vec::new();
    for r in &cmp.idle {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let shoal = cmp
        .idle
        .first()
        .map(|r| r.contender.clone())
        .unwrap_or_default();
    let cells: Vec<String> = modes
        .iter()
        .map(|m| {
            let kib = |name: &str| {
                cmp.idle
                    .iter()
                    .find(|r| r.mode == *m && r.contender == name)
                    .and_then(|r| r.kib_per_connection())
            };
            let others: Vec<String> = cmp
                .idle
                .iter()
                .filter(|r| r.mode == *m && r.contender != shoal)
                .filter_map(|r| Some(format!("{} {:.1}", r.contender, r.kib_per_connection()?)))
                .collect();
            let others = if others.is_empty() {
                String::new()
            } else {
                format!(" ({})", others.join(", "))
            };
            let mine = kib(&shoal).map(|k| format!("{k:.1}"));
            format!("{m}: {} KiB{others}", mine.unwrap_or_else(|| "-".into()))
        })
        .collect();
    format!(
        "| Memory per idle WebSocket, {} open | {} |\n",
        thousands(asked as u64),
        cells.join("; ")
    )
}

/// From the memory example's line `N peers over M torrents (kind): RSS +X MiB, Y bytes
/// per peer`.
fn memory_row(line: &str) -> Result<String> {
    let bad = || format!("not the memory example's line: {line:?}");
    let (peers, rest) = line.trim().split_once(" peers over ").with_context(bad)?;
    let (torrents, rest) = rest.split_once(" torrents").with_context(bad)?;
    let per = rest
        .rsplit_once(", ")
        .and_then(|(_, p)| p.strip_suffix(" bytes per peer"))
        .with_context(bad)?;
    let count = |s: &str| -> Result<String> {
        let n: u64 = s.trim().parse().with_context(bad)?;
        Ok(match n {
            n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
            n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
            n => thousands(n),
        })
    };
    Ok(format!(
        "| Memory, {} IPv4 peers over {} torrents | **{per} bytes per peer** (aquatic: ~60) |\n",
        count(peers)?,
        count(torrents)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::report_other::tests::{generator_run, under_aquatic_ws};

    #[test]
    fn rows_name_the_best_peer_and_the_io_limit() {
        let ws = under_aquatic_ws();
        assert_eq!(
            row(&ws).unwrap(),
            "| WebTorrent over wss, `aquatic_ws_load_test`, 3 rounds | **1.27x aquatic_ws** on the \
             load tester's total (83.6k vs 66.0k per CPU-s); 1.27x on announce responses, \
             1.27x on offers relayed |\n"
        );
        let mut udp = ws.clone();
        udp.protocol = "udp".into();
        udp.tls = false;
        let mut io = udp.contenders[0].clone();
        io.name = "io-limit".into();
        io.generator_runs = vec![generator_run(0, 450_000.0, 0.0, 10.0)];
        let mut opentracker = udp.contenders[1].clone();
        opentracker.name = "opentracker".into();
        opentracker.generator_runs = vec![generator_run(0, 10_000.0, 0.0, 5.0)];
        udp.contenders.extend([io, opentracker]);
        assert_eq!(
            row(&udp).unwrap(),
            "| UDP, `aquatic_udp_load_test`, 3 rounds | **1.27x aquatic_ws** (83.6k vs 66.0k \
             responses per CPU-s), 4.18x opentracker; **0.186x** a stateless C responder \
             (the kernel's I/O limit) |\n"
        );
    }

    #[test]
    fn the_table_has_the_memory_row_second() {
        assert_eq!(short(392_400.0), "392k");
        assert_eq!(short(85_540.0), "85.5k");
        assert_eq!(
            memory_row("1000000 peers over 100000 torrents (uniform): RSS +47.1 MiB, 49.4 bytes per peer").unwrap(),
            "| Memory, 1M IPv4 peers over 100k torrents | **49.4 bytes per peer** (aquatic: ~60) |\n"
        );
        assert!(memory_row("nothing").is_err());
        let dir = std::env::temp_dir().join(format!("shoal-bench-headline-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        for (d, cmp) in [(&a, under_aquatic_ws()), (&b, under_aquatic_ws())] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("results.json"), serde_json::to_string(&cmp).unwrap()).unwrap();
        }
        let t = table(&HeadlineArgs {
            dirs: vec![a, b],
            swarm_memory: Some(
                "10 peers over 2 torrents (uniform): RSS +0.1 MiB, 50.0 bytes per peer".into(),
            ),
        })
        .unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[2].starts_with("| WebTorrent over wss"));
        assert!(lines[3].starts_with("| Memory, 10 IPv4 peers over 2 torrents"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
