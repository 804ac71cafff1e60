//! The `shoal` binary: parse arguments, start the tracker, wait for signals.

use std::io::Write;

use anyhow::Context;
use clap::Parser;
use shoal_server::cli::Args;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.print_config {
        std::io::stdout().write_all(shoal_server::cli::default_config_text().as_bytes())?;
        return Ok(());
    }
    let config = args.config()?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&config.log_level)
                .context("invalid log level")?,
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM])?;
    let tracker = shoal_server::Tracker::start(config)?;
    for line in tracker.describe_listeners() {
        println!("shoal: {line}");
    }
    std::io::stdout().flush()?;
    for signal in signals.forever() {
        match signal {
            SIGHUP => {
                if let Err(e) = tracker.reload() {
                    tracing::error!("reload failed, keeping the old state: {e:#}");
                }
            }
            _ => break,
        }
    }
    tracing::info!("shutting down");
    tracker.shutdown();
    Ok(())
}
