//! The `shoal-bench` command line: parses arguments and calls into the library.

#![forbid(unsafe_code)]

use anyhow::Result;
use clap::{Parser, Subcommand};

use shoal_bench::run::RunResult;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    version,
    about = "Load-test BitTorrent trackers and write the report"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load a UDP (BEP 15) tracker.
    Udp(shoal_bench::udp::UdpArgs),
    /// Load an HTTP or HTTPS tracker (announce and scrape).
    Http(shoal_bench::http::HttpArgs),
    /// Load a WebTorrent tracker over ws:// or wss:// (announces with offers, answers, scrapes).
    Ws(shoal_bench::ws::WsArgs),
    /// Run one load at a series of concurrency levels and print seed 004's or 003's table.
    Sweep(shoal_bench::sweep::SweepArgs),
    /// Start several trackers in turn, load each the same way, and write the report.
    Compare(Box<shoal_bench::compare::CompareArgs>),
    /// Write a comparison's report.md and charts again from its results.json (after a
    /// change to the report's layout, or to add PNG charts), without running anything.
    Render(shoal_bench::compare::RenderArgs),
    /// Print the README's numbers table (Markdown) from the results.json of several
    /// comparisons, one row each.
    Headline(shoal_bench::compare::HeadlineArgs),
    /// Time how long a cluster of shoal nodes takes to show, on one node, a seeder announced
    /// to another (p50, p99), and the Redis commands per announce the nodes' metrics show.
    Convergence(shoal_bench::convergence::ConvergenceArgs),
    /// Print the info hashes of the workload's torrents, one hex line each: the whitelist
    /// a whitelist-only tracker (Debian's opentracker) needs to take the same load.
    InfoHashes {
        /// Number of torrents, as given to the load (`--torrents`).
        #[arg(long)]
        torrents: u32,
    },
    /// Print passkeys for a test site, one a line (32 hex characters each, the same list
    /// for the same seed): a file for `--passkeys`.
    Passkeys {
        /// How many.
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// Seed of the list.
        #[arg(long, default_value_t = 0x5ea1)]
        seed: u64,
    },
}

fn print_and_save(result: &RunResult, json: Option<&std::path::Path>) -> Result<()> {
    print!("{}", shoal_bench::report::run_text(result));
    if let Some(path) = json {
        result.write_json(path)?;
    }
    Ok(())
}

/// Prints one line each, buffered (lists of thousands go to a file).
fn print_lines(lines: impl Iterator<Item = impl std::fmt::Display>) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Udp(args) => {
            let result = shoal_bench::udp::run(&args)?;
            print_and_save(&result, args.run.json.as_deref())
        }
        Command::Http(args) => {
            let result = shoal_bench::http::run(&args)?;
            print_and_save(&result, args.run.json.as_deref())
        }
        Command::Ws(args) => {
            let result = shoal_bench::ws::run(&args)?;
            print_and_save(&result, args.run.json.as_deref())
        }
        Command::Convergence(args) => shoal_bench::convergence::run(&args),
        Command::InfoHashes { torrents } => {
            print_lines((0..torrents).map(|i| shoal_bench::workload::info_hash(i).to_hex()))
        }
        Command::Passkeys { count, seed } => print_lines(
            shoal_bench::passkeys::Passkeys::generate(count, seed)
                .keys()
                .iter(),
        ),
        Command::Sweep(args) => {
            shoal_bench::sweep::run(&args)?;
            Ok(())
        }
        Command::Render(args) => {
            let path = shoal_bench::compare::render(&args)?;
            println!("report written to {}", path.display());
            Ok(())
        }
        Command::Headline(args) => {
            print!("{}", shoal_bench::compare::headline::table(&args)?);
            Ok(())
        }
        Command::Compare(args) => {
            let path = shoal_bench::compare::run(&args)?;
            println!("report written to {}", path.display());
            Ok(())
        }
    }
}
