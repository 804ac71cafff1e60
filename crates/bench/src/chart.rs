//! SVG charts for the reports: throughput by load level and latency by load level, one
//! line per tracker.
//!
//! plotters with only its SVG backend: no system fonts or image libraries are needed, and
//! an SVG diffs and renders anywhere a Markdown report is read.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::report::median;
use crate::run::RunResult;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A named series of (level, value) points.
pub type Series = (String, Vec<(f64, f64)>);

/// A contender's runs grouped by load level.
pub type LevelRuns = (String, Vec<(usize, Vec<RunResult>)>);

fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> Result<()> {
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let (x_min, x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let y_max = ys.fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let (x_min, x_max) = if x_min.is_finite() {
        (x_min, x_max.max(x_min + 1.0))
    } else {
        (0.0, 1.0)
    };
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(80);
    if log_x {
        let mut chart = builder
            .build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max)
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| integer_tick(*x))
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(|e| anyhow!("{e}"))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| integer_tick(*x))
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(|e| anyhow!("{e}"))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// `138000` -> `138k`, `1500000` -> `1.5M`, `2.5` -> `2.5`.
fn short(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0}k", y / 1e3)
    } else if y >= 10.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.1}")
    }
}

/// Median responses per second by level, one line per contender.
pub fn throughput_by_level(
    path: &Path,
    title: &str,
    x_label: &str,
    contenders: &[LevelRuns],
) -> Result<()> {
    let series: Vec<Series> = contenders
        .iter()
        .map(|(name, levels)| {
            let pts = levels
                .iter()
                .map(|(level, runs)| {
                    let mut v: Vec<f64> = runs
                        .iter()
                        .map(|r| r.summary.responses_per_second)
                        .collect();
                    (*level as f64, median(&mut v))
                })
                .collect();
            (name.clone(), pts)
        })
        .collect();
    line_chart(path, title, x_label, "responses per second", &series, false)
}

/// Levels are whole numbers (workers, clients): label whole ticks only, so that a short
/// axis does not read "1 1 1 1 2 2".
fn integer_tick(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// p50 and p99 latency (ms) of announces by level, two lines per contender. The x axis is
/// the requests in flight; when every run had the same (a compare over load-generator
/// workers with a fixed number of connections), it is the load-generator workers instead.
pub fn latency_by_level(
    path: &Path,
    title: &str,
    x_label: &str,
    contenders: &[(String, Vec<RunResult>)],
) -> Result<()> {
    let all = || contenders.iter().flat_map(|c| c.1.iter());
    let by_workers = all()
        .map(|r| r.concurrency)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        <= 1;
    let x_of = |r: &RunResult| {
        if by_workers {
            r.workers.max(1) as f64
        } else {
            r.concurrency.max(1) as f64
        }
    };
    let x_label = if by_workers {
        "load-generator workers"
    } else {
        x_label
    };
    let mut series = Vec::new();
    for (name, runs) in contenders {
        for (q, pick) in [("p50", 0), ("p99", 1)] {
            let pts: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|r| {
                    let o = r.summary.main_op()?;
                    let v = if pick == 0 { o.p50 } else { o.p99 };
                    Some((x_of(r), v / 1000.0))
                })
                .collect();
            series.push((format!("{name} {q}"), pts));
        }
    }
    let log_x = all().map(|r| x_of(r) as usize).max().unwrap_or(1) > 16;
    line_chart(path, title, x_label, "latency (ms)", &series, log_x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_ticks_are_labelled() {
        assert_eq!(integer_tick(2.0), "2");
        assert_eq!(integer_tick(1.5), "");
        assert_eq!(integer_tick(128.0), "128");
    }

    #[test]
    fn writes_a_readable_svg() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let series = vec![
            (
                "shoal".to_string(),
                vec![(1.0, 100_000.0), (2.0, 180_000.0)],
            ),
            (
                "aquatic_udp".to_string(),
                vec![(1.0, 90_000.0), (2.0, 150_000.0)],
            ),
        ];
        line_chart(
            &path,
            "UDP throughput",
            "workers",
            "responses per second",
            &series,
            false,
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("UDP throughput") && svg.contains("aquatic_udp"));
        assert!(
            svg.contains("180k") || svg.contains("150k"),
            "y axis labels in k"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
