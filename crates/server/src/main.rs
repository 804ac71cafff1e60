//! The `shoal` binary: parse arguments, start the tracker, wait for signals.

#![forbid(unsafe_code)]

use std::io::Write;

use anyhow::Context;
use clap::Parser;
use shoal_server::cli::{Args, Command};
use shoal_server::config::LogFormat;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.print_config {
        std::io::stdout().write_all(shoal_server::cli::default_config_text().as_bytes())?;
        return Ok(());
    }
    if let Some(Command::CheckConfig { file }) = &args.command {
        let problems = shoal_server::config_check::report(file, &mut std::io::stdout())?;
        std::process::exit(i32::from(problems > 0));
    }
    if let Some(Command::ConvertConfig { file, .. }) = &args.command {
        let text = std::fs::read_to_string(file).context("reading the file to convert")?;
        let toml = shoal_opentracker::convert::to_toml(&text, &file.display().to_string());
        print!("{toml}");
        return Ok(());
    }
    let config = args.config()?;
    let json = config.log_format == LogFormat::Json;
    let logs = tracing_subscriber::fmt().with_env_filter(
        tracing_subscriber::EnvFilter::try_new(&config.log_level).context("invalid log level")?,
    );
    if json {
        logs.json().flatten_event(true).init();
    } else {
        logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init();
    }
    // Before the store allocates: its growing arrays in mappings of their own, so that
    // growing one leaves no hole behind (shoal_datagrams::malloc says what it saves).
    if !shoal_datagrams::malloc::map_blocks_from(shoal_datagrams::malloc::STORE_THRESHOLD) {
        tracing::debug!("the C library kept its own mmap threshold");
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM, SIGUSR1])?;
    let tracker = match shoal_server::Tracker::start(config) {
        Ok(tracker) => tracker,
        // A log shipper reads JSON lines only: the reason a start failed is one of them.
        Err(e) if json => {
            tracing::error!("cannot start: {e:#}");
            std::process::exit(1);
        }
        Err(e) => return Err(e),
    };
    for line in tracker.describe_listeners() {
        if json {
            tracing::info!("{line}");
        } else {
            println!("shoal: {line}");
        }
    }
    std::io::stdout().flush()?;
    for signal in signals.forever() {
        match signal {
            SIGHUP => {
                if let Err(e) = tracker.reload() {
                    tracing::error!("reload failed, keeping the old state: {e:#}");
                }
            }
            // As Ocelot: the site's users, torrents, tokens and whitelist read again.
            SIGUSR1 => {
                if let Err(e) = tracker.reload_site() {
                    tracing::error!("site reload failed, keeping the old state: {e:#}");
                }
            }
            _ => break,
        }
    }
    tracing::info!("shutting down");
    tracker.shutdown_for_exit();
    Ok(())
}
