//! Tiers of tracker workers (`compare --tracker-workers 1,2,4`): for each tier, how many
//! workers each contender gets and how, and which CPUs tracker and load generator get.
//!
//! Seeds 000 to 002 compare trackers by their worker count: the tracker limited to CPUs
//! 0..N-1, the load tester on the others. So a tier of N workers pins the tracker to the
//! first N CPUs this process may use and the load generator to the rest; a tier that
//! leaves the generator nothing is refused before anything starts, since a generator
//! sharing the tracker's CPUs measures neither. aquatic's workers are split between
//! socket and swarm workers as the seeds' best splits per total were (see
//! [`aquatic_workers`]). Pure functions, so that the split and the rules are unit tested.

use anyhow::{bail, Result};

use crate::sys::{format_cpu_list, parse_cpu_list};

use super::results::TierSetup;

/// The CPU sets of every tier in `tiers`, from the CPUs this process may use (`allowed`)
/// and the `--tracker-cpus` / `--bench-cpus` flags, which when given hold at every tier.
pub fn plan(
    tiers: &[usize],
    allowed: &[usize],
    tracker_cpus: Option<&str>,
    bench_cpus: Option<&str>,
) -> Result<Vec<TierSetup>> {
    if tiers.is_empty() {
        bail!("--tracker-workers needs at least one worker count");
    }
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for &n in tiers {
        if n == 0 {
            bail!("--tracker-workers: a tier of 0 workers runs nothing");
        }
        if seen.contains(&n) {
            bail!("--tracker-workers: tier {n} is given twice");
        }
        seen.push(n);
        let tracker: Vec<usize> = match tracker_cpus {
            Some(list) => cpu_list(list, "--tracker-cpus")?,
            None => {
                if n >= allowed.len() {
                    bail!(
                        "tier {n} leaves the load generator no CPU: this run may use {} CPU{} \
                         ({}), and a tier of N tracker workers takes N of them, leaving the \
                         rest to the generator, so tiers up to {} fit here; drop this tier or \
                         run on a bigger machine",
                        allowed.len(),
                        if allowed.len() == 1 { "" } else { "s" },
                        format_cpu_list(allowed),
                        allowed.len().saturating_sub(1),
                    );
                }
                allowed[..n].to_vec()
            }
        };
        let bench: Vec<usize> = match bench_cpus {
            Some(list) => cpu_list(list, "--bench-cpus")?,
            None => allowed
                .iter()
                .copied()
                .filter(|c| !tracker.contains(c))
                .collect(),
        };
        if bench.is_empty() {
            bail!(
                "tier {n}: the tracker's CPUs ({}) leave the load generator none; give \
                 --bench-cpus",
                format_cpu_list(&tracker)
            );
        }
        out.push(TierSetup {
            tracker_workers: n,
            tracker_cpus: format_cpu_list(&tracker),
            bench_cpus: format_cpu_list(&bench),
        });
    }
    Ok(out)
}

fn cpu_list(list: &str, flag: &str) -> Result<Vec<usize>> {
    match parse_cpu_list(list) {
        Some(cpus) => Ok(cpus),
        None => bail!("{flag} {list:?} is not a CPU list (like 0, 0-3 or 0,2)"),
    }
}

/// aquatic's socket and swarm workers for a tier of `n` tracker workers (`None`: the
/// tracker has no swarm workers to set).
///
/// One tracker worker is today's preset: one socket and one swarm worker sharing the one
/// CPU (aquatic cannot run with fewer). From two on, the workers add up to `n`, split as
/// the seeds' best results per total were: aquatic_ws (seed 000) one swarm worker up to
/// 10 in total, two up to 16, three beyond; aquatic_http (seed 002) one swarm ("request")
/// worker at every size. aquatic_udp 0.9 has socket workers only (the swarm is shared
/// between them; seed 001's request workers belong to an older version), so it gets `n`.
pub fn aquatic_workers(protocol: &str, n: usize) -> (usize, Option<usize>) {
    let swarm = match (protocol, n) {
        ("udp", _) => return (n.max(1), None),
        (_, 0 | 1) => return (1, Some(1)),
        ("ws", 2..=10) | ("http", _) => 1,
        ("ws", 11..=16) => 2,
        _ => 3,
    };
    (n - swarm, Some(swarm))
}

/// How a contender (a preset name or `NAME=COMMAND`) gets `n` workers, in words for the
/// report.
pub fn workers_setting(spec: &str, protocol: &str, n: usize) -> String {
    if let Some((_, command)) = spec.split_once('=') {
        return if command.contains("{workers}") {
            format!("`{{workers}}` = {n}")
        } else {
            "as it comes (no `{workers}` in its command)".into()
        };
    }
    match spec {
        "shoal" | "shoal-private" => format!("`--workers {n}`"),
        "aquatic_udp" | "aquatic_http" | "aquatic_ws" => match aquatic_workers(protocol, n) {
            (socket, Some(swarm)) => format!("socket_workers = {socket}, swarm_workers = {swarm}"),
            (socket, None) => format!("socket_workers = {socket}"),
        },
        "torrust" => format!("`TOKIO_WORKER_THREADS={n}` (tokio's worker threads)"),
        "opentracker" => "as it comes (no worker setting)".into(),
        "io-limit" => "as it comes (one thread)".into(),
        _ => "as it comes".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(t: &[TierSetup]) -> Vec<(usize, &str, &str)> {
        t.iter()
            .map(|t| {
                (
                    t.tracker_workers,
                    t.tracker_cpus.as_str(),
                    t.bench_cpus.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn the_tracker_gets_the_first_n_cpus_and_the_generator_the_rest() {
        let sixteen: Vec<usize> = (0..16).collect();
        let t = plan(&[1, 2, 4, 8], &sixteen, None, None).unwrap();
        assert_eq!(
            sets(&t),
            [
                (1, "0", "1-15"),
                (2, "0-1", "2-15"),
                (4, "0-3", "4-15"),
                (8, "0-7", "8-15")
            ]
        );
        // On this project's 2-core machine, tier 1 is today's default pinning.
        assert_eq!(
            sets(&plan(&[1], &[0, 1], None, None).unwrap()),
            [(1, "0", "1")]
        );
        // A narrowed affinity mask (taskset around the run) is what is split.
        assert_eq!(
            sets(&plan(&[2], &[4, 5, 6, 9], None, None).unwrap()),
            [(2, "4-5", "6,9")]
        );
    }

    #[test]
    fn a_tier_that_leaves_the_generator_no_cpu_is_refused() {
        let e = plan(&[1, 2], &[0, 1], None, None).unwrap_err().to_string();
        assert!(
            e.starts_with("tier 2 leaves the load generator no CPU: this run may use 2 CPUs (0-1)"),
            "{e}"
        );
        assert!(e.contains("so tiers up to 1 fit here"), "{e}");
        assert!(plan(&[0], &[0, 1], None, None).is_err());
        assert!(plan(&[1, 1], &[0, 1, 2], None, None).is_err());
        assert!(plan(&[], &[0, 1], None, None).is_err());
    }

    #[test]
    fn explicit_cpu_sets_hold_at_every_tier() {
        let t = plan(&[1, 2], &[0, 1], Some("0"), Some("1")).unwrap();
        assert_eq!(sets(&t), [(1, "0", "1"), (2, "0", "1")]);
        // The generator gets what the given tracker set leaves.
        let t = plan(&[1], &[0, 1, 2, 3], Some("0,2"), None).unwrap();
        assert_eq!(sets(&t), [(1, "0,2", "1,3")]);
        assert!(plan(&[1], &[0, 1], Some("0-1"), None).is_err());
        assert!(plan(&[1], &[0, 1], Some("zero"), None).is_err());
    }

    #[test]
    fn aquatic_splits_follow_the_seeds_best_per_total() {
        assert_eq!(aquatic_workers("ws", 1), (1, Some(1)));
        assert_eq!(aquatic_workers("ws", 2), (1, Some(1)));
        assert_eq!(aquatic_workers("ws", 8), (7, Some(1)));
        assert_eq!(aquatic_workers("ws", 10), (9, Some(1)));
        assert_eq!(aquatic_workers("ws", 12), (10, Some(2)));
        assert_eq!(aquatic_workers("ws", 16), (14, Some(2)));
        assert_eq!(aquatic_workers("ws", 24), (21, Some(3)));
        assert_eq!(aquatic_workers("http", 16), (15, Some(1)));
        assert_eq!(aquatic_workers("http", 1), (1, Some(1)));
        assert_eq!(aquatic_workers("udp", 1), (1, None));
        assert_eq!(aquatic_workers("udp", 8), (8, None));
    }

    #[test]
    fn workers_settings_in_words() {
        let cases = [
            ("shoal", "udp", 4, "`--workers 4`"),
            (
                "aquatic_ws",
                "ws",
                12,
                "socket_workers = 10, swarm_workers = 2",
            ),
            ("aquatic_udp", "udp", 2, "socket_workers = 2"),
            ("opentracker", "udp", 4, "as it comes (no worker setting)"),
            (
                "torrust",
                "http",
                2,
                "`TOKIO_WORKER_THREADS=2` (tokio's worker threads)",
            ),
            ("x=x --threads {workers}", "udp", 4, "`{workers}` = 4"),
            (
                "x=x --port {port}",
                "udp",
                4,
                "as it comes (no `{workers}` in its command)",
            ),
        ];
        for (spec, protocol, n, words) in cases {
            assert_eq!(workers_setting(spec, protocol, n), words, "{spec}");
        }
    }
}
