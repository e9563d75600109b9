//! # pisadb-report: what an experiment leaves behind
//!
//! The experiment harness runs sweeps (a workload knob against throughput, abort rate,
//! passes per transaction, …) and leaves two files per experiment under `results/`:
//!
//! - a CSV table ([`write_csv`]), one row per measured point, for anyone who wants the numbers;
//! - an SVG figure ([`write_svg`]), a grid of [`Panel`]s, each a small line chart of
//!   [`Series`], for anyone who wants the picture.
//!
//! While a sweep runs, a [`Progress`] bar on stderr tells how far it got; it is hidden when
//! stderr is not a terminal, so logs and CI output stay clean.
//!
//! Charts are drawn with `plotters` and its SVG backend. Text is laid out with the DejaVu Sans
//! font embedded by the `dejavu` crate, registered once per process, so no system font is
//! needed. A series keeps its color across every panel of a figure (colors are assigned by name
//! in order of first appearance), so "P4DB" is the same line everywhere. Axis ranges come from
//! the data; the y axis starts at 0 unless some value is negative. Empty panels and empty
//! series draw empty axes rather than fail. Non-finite points are skipped.
//!
//! Every failure is a [`ReportError`] that names the file it concerns.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// One line of a chart: a name (shown in the legend) and its `(x, y)` points, drawn in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend label; series with the same name share a color across panels.
    pub name: String,
    /// The points, joined by a line in the order given.
    pub points: Vec<(f64, f64)>,
}

/// One chart of a figure: a title, axis labels and the lines it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The caption above the chart.
    pub title: String,
    /// The label of the horizontal axis.
    pub x_label: String,
    /// The label of the vertical axis.
    pub y_label: String,
    /// The lines drawn in this chart.
    pub series: Vec<Series>,
}

/// Why a report file could not be written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Creating a directory or the file itself failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file (or directory) concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The CSV writer failed (e.g. a row of another length than the header).
    #[error("cannot write CSV {}: {source}", path.display())]
    Csv {
        /// The CSV file concerned.
        path: PathBuf,
        /// The underlying error.
        source: csv::Error,
    },
    /// Drawing or saving a chart failed.
    #[error("cannot draw chart {}: {message}", path.display())]
    Chart {
        /// The SVG file concerned.
        path: PathBuf,
        /// What the drawing library reported.
        message: String,
    },
}

/// Writes a CSV file (header + rows) using the `csv` crate; creates parent directories.
///
/// Every row must have as many fields as the header.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<(), ReportError> {
    create_parent(path)?;
    let csv_err = |source| ReportError::Csv { path: path.to_path_buf(), source };
    let mut writer = csv::Writer::from_path(path).map_err(csv_err)?;
    writer.write_record(header).map_err(csv_err)?;
    for row in rows {
        writer.write_record(row).map_err(csv_err)?;
    }
    writer.flush().map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
}

/// Width and height of one panel, and the height of the figure title band, in pixels.
const PANEL_SIZE: (u32, u32) = (480, 360);
const TITLE_HEIGHT: u32 = 40;

/// Line colors, cycled when a figure has more series names than colors.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Writes an SVG with `panels` laid out in a grid of `columns` columns (rows as needed), a
/// figure title on top, a legend in each panel. Lines with point markers, distinct colors per
/// series name consistently across panels (same name = same color). Axis ranges from the data,
/// y starting at 0 unless data is negative. Empty panels/series must not panic.
///
/// Creates parent directories. `columns` is clamped to 1..=`panels.len()`.
pub fn write_svg(path: &Path, title: &str, columns: usize, panels: &[Panel]) -> Result<(), ReportError> {
    create_parent(path)?;
    register_font().map_err(|message| ReportError::Chart { path: path.to_path_buf(), message })?;
    draw(path, title, columns, panels)
        .map_err(|e| ReportError::Chart { path: path.to_path_buf(), message: e.to_string() })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(path: &Path, title: &str, columns: usize, panels: &[Panel]) -> DrawResult {
    let columns = columns.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(columns).max(1);
    let size = (PANEL_SIZE.0 * columns as u32, TITLE_HEIGHT + PANEL_SIZE.1 * rows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, ("sans-serif", 24))?;

    let mut colors = BTreeMap::new();
    for series in panels.iter().flat_map(|p| &p.series) {
        let next = PALETTE[colors.len() % PALETTE.len()];
        colors.entry(series.name.as_str()).or_insert(next);
    }
    for (panel, area) in panels.iter().zip(body.split_evenly((rows, columns))) {
        draw_panel(&area, panel, &colors)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    colors: &BTreeMap<&str, RGBColor>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let finite = |s: &Series| s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    let lines: Vec<(&Series, Vec<(f64, f64)>)> = panel.series.iter().map(|s| (s, finite(s))).collect();
    let all = lines.iter().flat_map(|(_, points)| points);
    let x_range = span(all.clone().map(|p| p.0), None);
    let y_range = span(all.map(|p| p.1), Some(0.0));

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(x_range, y_range)?;
    chart.configure_mesh().x_desc(&panel.x_label).y_desc(&panel.y_label).label_style(("sans-serif", 12)).draw()?;

    for (series, points) in lines {
        let color = colors.get(series.name.as_str()).copied().unwrap_or(BLACK);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))?
            .label(&series.name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if !panel.series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    Ok(())
}

/// The range covering `values` (and `include`, if given), with a 5% margin above the top (and
/// below a negative bottom); 0..1 when empty, widened around a single value.
fn span(values: impl Iterator<Item = f64>, include: Option<f64>) -> Range<f64> {
    let (lo, hi) = values.chain(include).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi || (lo == 0.0 && hi == 0.0) {
        0.0..1.0
    } else if lo == hi {
        lo - lo.abs() * 0.1..hi + hi.abs() * 0.1
    } else {
        let pad = (hi - lo) * 0.05;
        (if lo < 0.0 { lo - pad } else { lo })..hi + pad
    }
}

/// Registers the embedded DejaVu Sans as "sans-serif" once per process.
fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "the embedded DejaVu Sans font was rejected".to_string())
        })
        .clone()
}

fn create_parent(path: &Path) -> Result<(), ReportError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
        }
        _ => Ok(()),
    }
}

/// A progress bar over `total` steps with a message, drawn with indicatif to stderr, hidden when stderr is not a terminal.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Starts a bar of `total` steps labelled `message`.
    pub fn new(total: u64, message: &str) -> Self {
        let target =
            if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let style = ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total), target).with_style(style).with_prefix(message.to_string());
        Self { bar }
    }

    /// Counts one step done; `step_label` (e.g. the point just measured) is shown after the count.
    pub fn inc(&self, step_label: &str) {
        self.bar.set_message(step_label.to_string());
        self.bar.inc(1);
    }

    /// Ends the bar, leaving it on screen with `message` after the count.
    pub fn finish(&self, message: &str) {
        self.bar.finish_with_message(message.to_string());
    }

    /// Prints `line` on stdout, above the bar while it is drawn.
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            println!("{line}");
        } else {
            self.bar.suspend(|| println!("{line}"));
        }
    }

    /// Removes the bar from the screen.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty directory under the system temp dir for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pisadb-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn series(name: &str, scale: f64) -> Series {
        Series { name: name.to_string(), points: (0..5).map(|i| (f64::from(i), scale * f64::from(i * i))).collect() }
    }

    fn panel(title: &str, series: Vec<Series>) -> Panel {
        Panel { title: title.to_string(), x_label: "hot keys".to_string(), y_label: "txn/s".to_string(), series }
    }

    #[test]
    fn svg_grid_contains_title_and_every_series() {
        let dir = scratch("grid");
        let path = dir.join("figs/sweep.svg");
        let names = ["P4DB", "No-Switch", "LM-Switch"];
        let panels: Vec<Panel> = (0..3)
            .map(|p| panel(&format!("panel {p}"), names.iter().map(|n| series(n, f64::from(p + 1))).collect()))
            .collect();
        write_svg(&path, "Throughput sweep", 2, &panels).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("Throughput sweep"));
        for name in names.iter().chain(&["panel 0", "panel 1", "panel 2"]) {
            assert!(svg.contains(name), "{name} missing");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn svg_with_empty_or_odd_data_does_not_panic() {
        let dir = scratch("empty");
        let odd = Series { name: "odd".to_string(), points: vec![(1.0, -2.0), (f64::NAN, 1.0), (1.0, -2.0)] };
        let cases: Vec<Vec<Panel>> = vec![
            vec![],
            vec![panel("no series", vec![])],
            vec![panel("empty series", vec![Series { name: "none".to_string(), points: vec![] }])],
            vec![panel("one point", vec![series("a", 1.0)]), panel("odd", vec![odd])],
        ];
        for (i, panels) in cases.iter().enumerate() {
            for columns in [0, 1, 3] {
                let path = dir.join(format!("case{i}-{columns}.svg"));
                write_svg(&path, "empty", columns, panels).unwrap();
                assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
            }
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn csv_round_trip() {
        let dir = scratch("csv");
        let path = dir.join("nested/results.csv");
        let rows = vec![
            vec!["8".to_string(), "0.7843".to_string(), "declustered".to_string()],
            vec!["8".to_string(), "0.6371".to_string(), "random, seeded".to_string()],
        ];
        write_csv(&path, &["nodes", "single_pass", "layout"], &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "nodes,single_pass,layout\n8,0.7843,declustered\n8,0.6371,\"random, seeded\"\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unwritable_path_error_names_the_path() {
        let dir = scratch("unwritable");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plain-file");
        std::fs::write(&file, "not a directory").unwrap();
        let csv_path = file.join("sub/out.csv");
        let err = write_csv(&csv_path, &["a"], &[]).unwrap_err();
        assert!(matches!(err, ReportError::Io { .. }));
        assert!(err.to_string().contains(&csv_path.display().to_string()), "{err}");
        let svg_path = file.join("out.svg");
        let err = write_svg(&svg_path, "t", 1, &[]).unwrap_err();
        assert!(err.to_string().contains(&svg_path.display().to_string()), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn axis_ranges_come_from_the_data() {
        let close = |r: Range<f64>, lo: f64, hi: f64| (r.start - lo).abs() < 1e-9 && (r.end - hi).abs() < 1e-9;
        assert!(close(span([2.0, 4.0].into_iter(), Some(0.0)), 0.0, 4.2));
        assert!(close(span([2.0, 4.0].into_iter(), None), 2.0, 4.1));
        assert!(close(span([-2.0, 2.0].into_iter(), Some(0.0)), -2.2, 2.2));
        assert!(close(span(std::iter::empty(), Some(0.0)), 0.0, 1.0));
        assert!(close(span([5.0].into_iter(), None), 4.5, 5.5));
    }

    #[test]
    fn progress_runs_hidden() {
        let progress = Progress::new(3, "sweep");
        for step in ["a", "b", "c"] {
            progress.inc(step);
        }
        progress.finish("done");
    }
}
