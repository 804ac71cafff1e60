//! `shoal-bench sweep`: the same load at a series of concurrency levels.
//!
//! It prints seed 004's table (clients, total messages, average/min/max latency,
//! throughput, throughput per client) or seed 003's (light/medium/heavy scenarios with P95
//! and error rate, then latency by operation for each), and can write the results as JSON
//! and the latency-by-concurrency chart as SVG (and PNG).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use crate::history::{self, Figure, HistoryRun};
use crate::load::Load;
use crate::report;
use crate::run::RunResult;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Table {
    /// Clients, total messages, avg/min/max latency, throughput, per client (seed 004).
    Clients,
    /// Light/medium/heavy scenarios with P95 and error rate (seed 003).
    Scenarios,
}

/// Flags of `shoal-bench sweep`.
#[derive(Args, Clone, Debug)]
pub struct SweepArgs {
    /// Concurrency levels (default 1,2,4,...,128 for `clients`, 10,100,1000 for `scenarios`).
    #[arg(long, value_delimiter = ',')]
    pub levels: Vec<usize>,
    /// Which table to print.
    #[arg(long, value_enum, default_value = "clients")]
    pub table: Table,
    /// Write all results as JSON here.
    #[arg(long)]
    pub out_json: Option<PathBuf>,
    /// Write a Markdown report (table and chart) to this directory.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub charts: crate::chart::ChartArgs,
    #[command(subcommand)]
    pub load: Load,
}

/// Runs the sweep, prints the table, returns the results in level order.
pub fn run(args: &SweepArgs) -> Result<Vec<RunResult>> {
    let levels = if args.levels.is_empty() {
        match args.table {
            Table::Clients => vec![1, 2, 4, 8, 16, 32, 64, 128],
            Table::Scenarios => vec![10, 100, 1000],
        }
    } else {
        args.levels.clone()
    };
    let date = report::utc_now();
    let command = report::command_line();
    let mut results = Vec::new();
    for &level in &levels {
        let mut load = args.load.clone();
        load.set_clients(level);
        let r = load
            .run()
            .with_context(|| format!("sweep level {level} against {}", load.target()))?;
        eprintln!(
            "{level} clients: {:.0} responses/s, {} errors",
            r.summary.responses_per_second,
            r.summary.total_errors()
        );
        results.push(r);
    }
    let table = match args.table {
        Table::Clients => report::clients_table(&results),
        Table::Scenarios => report::scenarios_report(&results),
    };
    println!("{table}");
    if let Some(path) = &args.out_json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir)?;
        let chart = dir.join("latency-by-clients.svg");
        let at: Vec<(usize, &RunResult)> = levels.iter().copied().zip(&results).collect();
        crate::chart::line_chart(
            &chart,
            &format!(
                "{} announce latency by concurrent clients",
                args.load.protocol()
            ),
            "concurrent clients",
            "latency (ms)",
            &crate::chart::latency_series(&args.load.target(), &at),
        )?;
        args.charts.finish(std::slice::from_ref(&chart))?;
        let run = history_run(&args.load, &levels, &results, date, command.clone());
        let (runs, skipped) = history::record(dir, &run);
        let md = format!(
            "# {} sweep against {}\n\nMeasured {} with:\n\n```sh\n{}\n```\n\n{table}\n\
             ![latency by clients](latency-by-clients.svg)\n{}",
            args.load.protocol(),
            args.load.target(),
            run.date,
            command,
            history::section(&runs, &skipped),
        );
        std::fs::write(dir.join("sweep.md"), md)?;
        std::fs::write(
            dir.join("sweep.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
    }
    Ok(results)
}

/// The sweep's line in the history: one figure per level, the target as the contender.
pub fn history_run(
    load: &Load,
    levels: &[usize],
    results: &[RunResult],
    date: String,
    command: String,
) -> HistoryRun {
    HistoryRun {
        date,
        commit: history::commit(),
        machine: crate::cpu::machine_description(),
        command,
        kind: "sweep".into(),
        protocol: load.protocol().into(),
        generator: format!("shoal-bench {}", load.protocol()),
        figures: levels
            .iter()
            .zip(results)
            .map(|(level, r)| Figure {
                contender: load.target(),
                load: format!("{level} clients"),
                tracker_workers: 0,
                runs: 1,
                responses_per_second: r.summary.responses_per_second,
                per_tracker_cpu_second: r.responses_per_tracker_cpu_second,
                error_rate: Some(r.summary.error_rate),
            })
            .collect(),
    }
}
