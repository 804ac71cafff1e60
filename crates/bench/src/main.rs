//! The `shoal-bench` command line: parses arguments and calls into the library.

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
}

fn print_and_save(result: &RunResult, json: Option<&std::path::Path>) -> Result<()> {
    print!("{}", shoal_bench::report::run_text(result));
    if let Some(path) = json {
        result.write_json(path)?;
    }
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
    }
}
