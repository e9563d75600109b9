//! # pisadb-report: what an experiment leaves behind
//!
//! The experiment harness runs sweeps (a workload knob against throughput, abort rate,
//! passes per transaction, …) and leaves two files per experiment under `results/`:
//!
//! - a CSV table ([`write_csv`]), one row per measured point, for anyone who wants the numbers;
//! - an SVG figure ([`write_svg`], the `chart` module), a grid of [`Panel`]s, each a small
//!   line chart of [`Series`] (bars where every point sits at one x), for anyone who wants
//!   the picture.
//!
//! While a sweep runs, a [`Progress`] bar on stderr tells how far it got; it is hidden when
//! stderr is not a terminal, so logs and CI output stay clean. (The thread pool that advances
//! it is `pisadb_harness::pool`, the one every sweep, reproduction and fuzz campaign uses.)
//!
//! Charts are drawn with `plotters` and its SVG backend. Text is laid out with the DejaVu Sans
//! font embedded by the `dejavu` crate, registered once per process, so no system font is
//! needed. A series keeps its color across every panel of a figure (colors are assigned by name
//! in order of first appearance), so "P4DB" is the same line everywhere, and one legend under
//! the figure's title names them all (a legend inside a panel hides the lines it sits on).
//! Axis ranges come from the data; the y axis starts at 0 unless some value is negative. Empty
//! panels and empty series draw empty axes rather than fail. Non-finite points are skipped.
//!
//! Tick labels read in the axis's [`Unit`]: `4 M` transactions per second, `12 µs`, `40 %`,
//! `1.5×`, never `4000000.0`. The ticks are chosen here, not by plotters: round steps (1, 2,
//! 2.5 or 5 times a power of ten) and no more of them than fit side by side; each label gets the
//! fewest significant digits (at least 3) that keep neighbouring ticks apart. The label areas
//! are measured from the labels actually drawn, so nothing overlaps or is clipped; a figure
//! title too long for the figure's width wraps onto more lines.
//!
//! Every failure is a [`ReportError`] that names the file it concerns.
//!
//! See `docs/ARCHITECTURE.md` (the layers) for the page that explains it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

mod chart;
pub use chart::{write_svg, Panel, Series};
pub mod latency;
pub use latency::{Latency, LatencySummary};

/// What the values of an axis measure: it decides where the ticks go and how they read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// A count or a rate of counts, with SI prefixes: `250 k`, `4 M`, `1.5 G`.
    #[default]
    Count,
    /// A time in seconds: `850 ns`, `12 µs`, `1.2 ms`, `3 s`.
    Seconds,
    /// A share in percent, the values already multiplied by 100 (`40.0` reads `40 %`).
    Percent,
    /// A ratio to a baseline: `1.5×`.
    Ratio,
    /// The base-10 logarithm of a count (a log-scale axis), read as the count itself:
    /// `5.0` reads `100 k`. Ticks sit on powers of ten, or on 1, 2 and 5 times them.
    Log10Count,
    /// A count drawn on a log-scale axis: the values are the counts themselves (the chart takes
    /// their logarithm; values at or below zero are not drawn). Ticks as [`Unit::Log10Count`].
    LogScaleCount,
    /// A whole number: workers, or the number of a category (1 = the first system, …). Ticks
    /// on whole numbers only, and half a unit of room at either end.
    Integer,
}

impl Unit {
    /// `value` as a tick label, with 3 significant digits.
    pub fn format(self, value: f64) -> String {
        self.format_digits(value, 3)
    }

    /// `value` as a tick label with `digits` significant digits (trailing zeros dropped).
    fn format_digits(self, value: f64, digits: u32) -> String {
        match self {
            Unit::Count | Unit::Integer | Unit::LogScaleCount => with_prefix(value, digits, &COUNT_PREFIXES, ""),
            Unit::Seconds => with_prefix(value, digits, &TIME_PREFIXES, "s"),
            Unit::Percent => with_prefix(value, digits, &[(0, "")], "%"),
            Unit::Ratio => {
                let number = with_prefix(value, digits, &[(0, "")], "");
                if number == "0" {
                    number
                } else {
                    format!("{number}×")
                }
            }
            Unit::Log10Count => with_prefix(10f64.powf(value), digits, &COUNT_PREFIXES, ""),
        }
    }
}

/// SI prefixes for counts, as (power of ten, prefix), ascending.
const COUNT_PREFIXES: [(i32, &str); 5] = [(0, ""), (3, "k"), (6, "M"), (9, "G"), (12, "T")];
/// SI prefixes for seconds, as (power of ten, prefix), ascending.
const TIME_PREFIXES: [(i32, &str); 4] = [(-9, "n"), (-6, "µ"), (-3, "m"), (0, "")];

/// A count with an SI prefix and 3 significant digits: `4 M`, `250 k`, `1.5 M`, `999`, `0`.
pub fn format_si(value: f64) -> String {
    Unit::Count.format(value)
}

/// A time given in seconds, with an SI prefix and 3 significant digits: `12 µs`, `1.2 ms`.
pub fn format_seconds(value_s: f64) -> String {
    Unit::Seconds.format(value_s)
}

/// `value` rounded to `digits` significant digits, scaled by the largest of `prefixes` (powers
/// of ten, ascending) that leaves at least 1 (the smallest one for tiny values), then the
/// prefix and `symbol` after a space: `with_prefix(12e-6, 3, &TIME_PREFIXES, "s")` is `12 µs`.
/// A value that rounds up to the next prefix takes it (999.5 reads `1 k`, not `1000`). Zero
/// is `0`, without a unit.
fn with_prefix(value: f64, digits: u32, prefixes: &[(i32, &str)], symbol: &str) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value == 0.0 {
        return "0".to_string();
    }
    let magnitude = value.abs();
    let mut chosen = prefixes.iter().rposition(|&(power, _)| magnitude >= 10f64.powi(power)).unwrap_or(0);
    let mut mantissa = round_significant(magnitude / 10f64.powi(prefixes[chosen].0), digits);
    if mantissa.0 >= 1000.0 && chosen + 1 < prefixes.len() {
        chosen += 1;
        mantissa = round_significant(magnitude / 10f64.powi(prefixes[chosen].0), digits);
    }
    let (number, decimals) = mantissa;
    let mut text = format!("{number:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let unit = format!("{}{symbol}", prefixes[chosen].1);
    if unit.is_empty() {
        format!("{sign}{text}")
    } else {
        format!("{sign}{text} {unit}")
    }
}

/// `x` (positive) rounded to `digits` significant digits, and the decimals that shows.
fn round_significant(x: f64, digits: u32) -> (f64, usize) {
    let magnitude = x.log10().floor() as i32;
    let decimals = (digits as i32 - 1 - magnitude).max(0);
    let factor = 10f64.powi(decimals);
    ((x * factor).round() / factor, decimals as usize)
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

    /// A fresh, empty directory under the system temp dir for one test (the chart tests' too).
    pub(crate) fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pisadb-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn counts_read_with_si_prefixes() {
        assert_eq!(format_si(4_000_000.0), "4 M");
        assert_eq!(format_si(250_000.0), "250 k");
        assert_eq!(format_si(1_500_000.0), "1.5 M");
        assert_eq!(format_si(12_345_678.0), "12.3 M");
        assert_eq!(format_si(2.5e9), "2.5 G");
        assert_eq!(format_si(20.0), "20");
        assert_eq!(format_si(0.5), "0.5");
        assert_eq!(format_si(0.30000000000000004), "0.3");
    }

    #[test]
    fn zero_reads_0_and_negatives_keep_their_sign() {
        for unit in [Unit::Count, Unit::Seconds, Unit::Percent, Unit::Ratio, Unit::Integer] {
            assert_eq!(unit.format(0.0), "0", "{unit:?}");
            assert_eq!(unit.format(-0.0), "0", "{unit:?}");
        }
        assert_eq!(format_si(-250_000.0), "-250 k");
        assert_eq!(format_seconds(-0.0012), "-1.2 ms");
        assert_eq!(Unit::Percent.format(-40.0), "-40 %");
    }

    #[test]
    fn rounding_up_to_the_next_prefix_takes_it() {
        assert_eq!(format_si(999.5), "1 k");
        assert_eq!(format_si(999.4), "999");
        assert_eq!(format_si(999_600.0), "1 M");
        assert_eq!(format_si(9.996), "10");
        assert_eq!(format_seconds(0.0009996), "1 ms");
    }

    #[test]
    fn times_read_in_seconds_with_si_prefixes() {
        assert_eq!(format_seconds(0.000012), "12 µs");
        assert_eq!(format_seconds(0.0012), "1.2 ms");
        assert_eq!(format_seconds(850e-9), "850 ns");
        assert_eq!(format_seconds(3.0), "3 s");
    }

    #[test]
    fn percents_ratios_and_log_counts_read_in_their_unit() {
        assert_eq!(Unit::Percent.format(40.0), "40 %");
        assert_eq!(Unit::Percent.format(12.5), "12.5 %");
        assert_eq!(Unit::Ratio.format(1.5), "1.5×");
        assert_eq!(Unit::Log10Count.format(5.0), "100 k");
        assert_eq!(Unit::Log10Count.format(50_000f64.log10()), "50 k");
        assert_eq!(Unit::Integer.format(3.0), "3");
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
    fn progress_runs_hidden() {
        let progress = Progress::new(3, "sweep");
        for step in ["a", "b", "c"] {
            progress.inc(step);
        }
        progress.finish("done");
    }
}
