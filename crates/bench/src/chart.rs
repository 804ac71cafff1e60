//! Charts for the reports: one line per tracker (throughput, or p50/p99 latency) over the
//! load levels of a comparison or sweep.
//!
//! plotters with only its SVG backend draws them: an SVG diffs and renders anywhere a
//! Markdown report is read, and needs no system fonts to write. Where a PNG is asked for,
//! resvg rasterizes that same SVG (so the two never disagree) with the system's fonts.
//!
//! Levels (workers, clients) are few whole numbers, usually powers of two: they are drawn
//! evenly spaced, each labelled with its value, rather than on a linear or log scale whose
//! automatic ticks would land between them (1, 2, 4 ... 128 on a linear axis squeezes the
//! first five into a corner; on a log axis plotters labels none of them).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;

use crate::report::median;
use crate::run::RunResult;

/// How charts are written, as `sweep`, `compare` and `render` take it.
#[derive(clap::Args, Clone, Debug)]
pub struct ChartArgs {
    /// Also write each chart as PNG (rasterized from the SVG with the system's fonts).
    #[arg(long)]
    pub png: bool,
}

impl ChartArgs {
    /// Writes the PNG of each SVG chart when asked to.
    pub fn finish(&self, svgs: &[PathBuf]) -> Result<()> {
        if self.png {
            for svg in svgs {
                png_from_svg(svg)?;
            }
        }
        Ok(())
    }
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A named line of (level, value) points. A dashed line takes the colour of the line
/// before it (p99 beside its p50); every other line takes the next colour.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(usize, f64)>,
    pub dashed: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(usize, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            dashed: false,
        }
    }
}

/// Draws `series` as lines over their levels and writes the SVG to `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<()> {
    let mut levels: Vec<usize> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    let slot = |level: usize| levels.binary_search(&level).unwrap_or(0) as f64;
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        // Headroom above the highest point for the legend, which sits in the top left.
        * 1.3;
    let last = levels.len().saturating_sub(1) as f64;
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());

    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.4..last + 0.4, 0.0..y_max)
        .map_err(|e| err(&e))?;
    let tick = |x: &f64| level_label(&levels, *x);
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        // As many labels as levels: plotters then puts its key points (and the bold grid
        // lines) on whole positions only.
        .x_labels(levels.len().max(2))
        // Minor lines between levels would suggest a continuous scale there is not.
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&tick)
        .y_label_formatter(&|y| short(*y))
        .draw()
        .map_err(|e| err(&e))?;
    let mut color = 0;
    for (i, line) in series.iter().enumerate() {
        if i > 0 && !line.dashed {
            color += 1;
        }
        let c = COLORS[color % COLORS.len()];
        let xy: Vec<(f64, f64)> = line.points.iter().map(|&(l, v)| (slot(l), v)).collect();
        let style = c.stroke_width(2);
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(xy.iter().copied(), 8, 5, style))
        } else {
            chart.draw_series(LineSeries::new(xy.iter().copied(), style))
        };
        let dashed = line.dashed;
        drawn
            .map_err(|e| err(&e))?
            .label(line.name.clone())
            .legend(move |(x, y)| {
                let end = if dashed { x + 9 } else { x + 20 };
                PathElement::new(vec![(x, y), (end, y)], style)
            });
        chart
            .draw_series(xy.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// The label of the tick at axis position `x`: the level drawn there, or nothing between
/// levels.
fn level_label(levels: &[usize], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    levels
        .get(i as usize)
        .map(|l| l.to_string())
        .unwrap_or_default()
}

/// `138000` -> `138k`, `1500000` -> `1.5M`, `2.5` -> `2.5`.
fn short(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0}k", y / 1e3)
    } else if y >= 10.0 || y.fract() == 0.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.1}")
    }
}

/// A contender's median responses per second at each level.
pub fn throughput_series(name: &str, levels: &[(usize, Vec<&RunResult>)]) -> Series {
    let pts = levels
        .iter()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(level, runs)| {
            let mut v: Vec<f64> = runs
                .iter()
                .map(|r| r.summary.responses_per_second)
                .collect();
            (*level, median(&mut v))
        })
        .collect();
    Series::new(name, pts)
}

/// A contender's p50 and p99 latency (ms) of its main operation (announce) at each level:
/// two lines.
pub fn latency_series(name: &str, runs: &[(usize, &RunResult)]) -> [Series; 2] {
    let pick = |q: fn(&crate::stats::OpSummary) -> f64| {
        runs.iter()
            .filter_map(|(level, r)| Some((*level, q(r.summary.main_op()?) / 1000.0)))
            .collect()
    };
    [
        Series::new(format!("{name} p50"), pick(|o| o.p50)),
        Series {
            dashed: true,
            ..Series::new(format!("{name} p99 (dashed)"), pick(|o| o.p99))
        },
    ]
}

/// Rasterizes the SVG at `svg` to a PNG beside it (same name, `.png`) with resvg, using
/// the system's fonts for the text; returns the PNG's path.
pub fn png_from_svg(svg: &Path) -> Result<PathBuf> {
    use resvg::{tiny_skia, usvg};
    let text =
        std::fs::read_to_string(svg).with_context(|| format!("reading {}", svg.display()))?;
    let mut opt = usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_system_fonts();
    // plotters asks for "sans-serif"; fontdb maps that to Arial unless told otherwise.
    if fonts.is_empty() {
        bail!("no fonts found for the PNG's text (install one, e.g. apt-get install fonts-dejavu-core)");
    }
    let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]
        .into_iter()
        .find(|f| {
            fonts
                .faces()
                .any(|face| face.families.iter().any(|(n, _)| n == f))
        });
    if let Some(f) = family {
        fonts.set_sans_serif_family(f);
    }
    let tree =
        usvg::Tree::from_str(&text, &opt).map_err(|e| anyhow!("parsing {}: {e}", svg.display()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .context("empty chart: nothing to rasterize")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let png = svg.with_extension("png");
    pixmap
        .save_png(&png)
        .map_err(|e| anyhow!("writing {}: {e}", png.display()))?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temp_dir;

    #[test]
    fn every_level_and_only_levels_are_labelled() {
        let levels = [1, 2, 4, 128];
        assert_eq!(level_label(&levels, 0.0), "1");
        assert_eq!(level_label(&levels, 3.0), "128");
        assert_eq!(level_label(&levels, 1.5), "");
        assert_eq!(level_label(&levels, -1.0), "");
        assert_eq!(level_label(&levels, 4.0), "");
    }

    #[test]
    fn writes_a_readable_svg_with_every_level_on_the_axis() {
        let dir = temp_dir("chart");
        let path = dir.join("t.svg");
        let series = vec![
            Series::new("shoal", vec![(1, 100_000.0), (64, 180_000.0)]),
            Series::new(
                "aquatic_udp",
                vec![(1, 90_000.0), (16, 120_000.0), (64, 150_000.0)],
            ),
        ];
        line_chart(
            &path,
            "UDP throughput",
            "clients",
            "responses per second",
            &series,
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("UDP throughput") && svg.contains("aquatic_udp"));
        assert!(
            svg.contains("180k") || svg.contains("150k"),
            "y axis labels in k"
        );
        for level in ["1", "16", "64"] {
            assert!(
                svg.contains(&format!(">\n{level}\n</text>")),
                "x axis labels level {level}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn png_is_the_svg_rasterized() {
        let dir = temp_dir("png");
        let path = dir.join("t.svg");
        let series = vec![Series::new("shoal", vec![(1, 1.0), (2, 2.0)])];
        line_chart(&path, "t", "x", "y", &series).unwrap();
        let png = png_from_svg(&path).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // Width and height from the IHDR chunk: the SVG's 900 x 520.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((w, h), (900, 520));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
