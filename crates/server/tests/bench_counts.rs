//! shoal-bench's figures against the tracker's own: the responses the load generator
//! counted must equal what the tracker's counters (the ones `/metrics` exports) say it
//! answered, within 1%.

#![forbid(unsafe_code)]

use std::time::Duration;

use clap::Parser;
use shoal_server::{Config, Tracker};

#[derive(Parser)]
struct Udp {
    #[command(flatten)]
    args: shoal_bench::udp::UdpArgs,
}

#[test]
fn shoal_bench_counts_what_the_tracker_counts() {
    let mut c = Config::ephemeral();
    c.workers = 1;
    let tracker = Tracker::start(c).unwrap();
    let target = tracker.udp_addrs()[0].to_string();
    // No warm-up (the tracker counts from its start), few requests in flight (those
    // answered after the measured window are the only expected difference).
    let load = Udp::parse_from([
        "udp",
        "--target",
        &target,
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--inflight",
        "8",
        "--quiet",
    ]);
    let before = tracker.udp_counters();
    let result = shoal_bench::udp::run(&load.args).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let after = tracker.udp_counters();
    let answered = (after.connect + after.announce + after.scrape)
        - (before.connect + before.announce + before.scrape);
    let counted = result.summary.responses;
    assert!(counted > 1_000, "too little load to compare: {counted}");
    let gap = (answered as f64 - counted as f64).abs() / answered as f64;
    assert!(
        gap < 0.01,
        "shoal-bench counted {counted} responses, the tracker answered {answered} ({:.2}%)",
        gap * 100.0
    );
    assert_eq!(
        after.errors, before.errors,
        "a clean load gets no error replies"
    );
}
