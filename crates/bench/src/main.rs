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
    }
}
