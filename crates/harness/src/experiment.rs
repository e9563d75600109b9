//! Experiments as data: what a paper's figure is made of, written once per system and run by
//! one runner ([`crate::runner`]) for every system.
//!
//! An [`Experiment`] is a list of [`Point`]s — each one simulated run of a variant with
//! settings, placed in a chart by its panel, its series (the line) and its x — and the
//! instructions to read it: the CSV [`Column`]s, the [`Chart`]s, the baseline series that
//! ratios are taken against, and the paper's [`Claim`]s with the figures the paper gives for
//! them. Nothing in it runs anything or formats anything: a system builds the data, the runner
//! runs every point under N seeds (sharing runs between experiments), and [`crate::output`]
//! turns the measurements into CSVs with `_sd` columns, SVGs with error bars and the claims
//! table of `results/<system>.md`.
//!
//! A figure is named by a dotted path into the JSON object a point's run reports
//! ([`crate::PointReport::figures`]): `completion_s`, `read_us.1` (an array's element). A
//! setting is named the same way into the point's settings. Keeping both as JSON is what lets
//! one runner serve five systems whose figures have nothing else in common, and what lets a
//! sharded run write its raw results and a later `merge` read them back.

pub use pisadb_report::Unit;
use serde_json::Value;

/// One simulated run of a variant with settings, and where it goes in the charts.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The chart panel (a workload, a rack shape, …).
    pub panel: String,
    /// The line it belongs to (often the variant's name).
    pub series: String,
    /// The variant run.
    pub variant: String,
    /// The x value as charted.
    pub x: f64,
    /// How the x value reads in tables and panel titles (empty: the number).
    pub x_name: String,
    /// The settings of the run (the system's settings, edited), seed included.
    pub settings: Value,
    /// What is said of the point besides its settings, as a JSON object (`Null`: nothing):
    /// labels a CSV shows ([`Column::Annotation`]: a workload's name) and values stated outside
    /// our runs ([`Reference`]: what a paper's prototype measured at this configuration).
    pub annotations: Value,
}

impl Point {
    /// A point whose series is its variant's name.
    pub fn new(panel: impl Into<String>, variant: &str, x: f64, settings: Value) -> Self {
        Point {
            panel: panel.into(),
            series: variant.to_string(),
            variant: variant.to_string(),
            x,
            x_name: String::new(),
            settings,
            annotations: Value::Null,
        }
    }

    /// The same point with `value` said of it at `key` (see [`Point::annotations`]).
    pub fn annotate(mut self, key: &str, value: impl Into<Value>) -> Self {
        if !self.annotations.is_object() {
            self.annotations = Value::Object(serde_json::Map::new());
        }
        if let Value::Object(map) = &mut self.annotations {
            map.insert(key.to_string(), value.into());
        }
        self
    }

    /// The same point drawn as the line `series`.
    pub fn series(self, series: impl Into<String>) -> Self {
        Point { series: series.into(), ..self }
    }

    /// The same point with its x read as `x_name`.
    pub fn x_name(self, x_name: impl Into<String>) -> Self {
        Point { x_name: x_name.into(), ..self }
    }

    /// Its x as tables print it.
    pub fn x_text(&self) -> String {
        if self.x_name.is_empty() {
            self.x.to_string()
        } else {
            self.x_name.clone()
        }
    }
}

/// How a figure's mean (and its deviation) is written in a CSV cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// As Rust writes an `f64` (shortest exact form; a whole number without a point).
    Plain,
    /// With this many decimals.
    Fixed(usize),
}

impl Format {
    /// `value` in this format.
    pub fn write(self, value: f64) -> String {
        match self {
            Format::Plain => value.to_string(),
            Format::Fixed(digits) => format!("{value:.digits$}"),
        }
    }
}

/// A CSV column after the fixed ones (`experiment, panel, series, variant, x, seeds`).
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// A setting of the point (the first seed's: the seed itself varies).
    Setting {
        /// The header.
        header: &'static str,
        /// The dotted path into the settings.
        key: &'static str,
    },
    /// A figure's mean over the seeds, followed by a `<header>_sd` column.
    Figure {
        /// The header.
        header: &'static str,
        /// The dotted path into the figures.
        key: &'static str,
        /// How it is written.
        format: Format,
    },
    /// The mean of the per-seed ratios of a figure to the baseline's (paired by seed),
    /// followed by a `<header>_sd` column; empty where the point has no baseline.
    Ratio {
        /// The header.
        header: &'static str,
        /// The dotted path into the figures.
        key: &'static str,
        /// How it is written.
        format: Format,
    },
    /// A text figure of every seed's run, joined by spaces (a trace hash).
    Text {
        /// The header.
        header: &'static str,
        /// The dotted path into the figures.
        key: &'static str,
    },
    /// The point's x as tables read it ([`Point::x_name`]; empty where x is a number).
    XName {
        /// The header.
        header: &'static str,
    },
    /// An annotation of the point ([`Point::annotations`]) as a cell (empty where absent).
    Annotation {
        /// The header.
        header: &'static str,
        /// The dotted path into the annotations.
        key: &'static str,
    },
    /// A number stated of the point outside our runs (an annotation: a prototype's
    /// measurement), empty where none is.
    Reference {
        /// The header.
        header: &'static str,
        /// The dotted path into the annotations.
        key: &'static str,
        /// How it is written.
        format: Format,
    },
    /// The ratio of a stated number of the point to its baseline's (the prototype's speedup);
    /// empty where either has none.
    ReferenceRatio {
        /// The header.
        header: &'static str,
        /// The dotted path into the annotations.
        key: &'static str,
        /// How it is written.
        format: Format,
    },
    /// A figure summed over the seeds' runs per wall-clock second they took together (the
    /// simulator's speed), as a whole number. A wall-time figure: name it with `wall`.
    PerWallSecond {
        /// The header.
        header: &'static str,
        /// The dotted path into the figures.
        key: &'static str,
    },
}

impl Column {
    /// A figure column in [`Format::Plain`].
    pub const fn figure(header: &'static str) -> Column {
        Column::Figure { header, key: header, format: Format::Plain }
    }

    /// A figure column with `digits` decimals.
    pub const fn fixed(header: &'static str, digits: usize) -> Column {
        Column::Figure { header, key: header, format: Format::Fixed(digits) }
    }

    /// A setting column whose header is its key.
    pub const fn setting(key: &'static str) -> Column {
        Column::Setting { header: key, key }
    }

    /// The headers it writes.
    pub fn headers(&self) -> Vec<String> {
        match self {
            Column::Setting { header, .. }
            | Column::Text { header, .. }
            | Column::XName { header }
            | Column::Annotation { header, .. }
            | Column::Reference { header, .. }
            | Column::ReferenceRatio { header, .. }
            | Column::PerWallSecond { header, .. } => vec![header.to_string()],
            Column::Figure { header, .. } | Column::Ratio { header, .. } => {
                vec![header.to_string(), format!("{header}_sd")]
            }
        }
    }
}

/// What a chart's y axis shows of each point.
#[derive(Clone, Debug, PartialEq)]
pub enum Y {
    /// A figure, times `scale` (mean over the seeds, error bars their deviation).
    Figure {
        /// The dotted path into the figures.
        key: &'static str,
        /// Multiplies the figure (µs figures on a seconds axis: 1e-6).
        scale: f64,
    },
    /// A figure's paired ratio to the baseline's; the baseline's own line is not drawn.
    Ratio {
        /// The dotted path into the figures.
        key: &'static str,
    },
    /// A distribution: an array figure of values at evenly spaced shares (a CDF sampled at
    /// 5%, 10%, …), drawn as value (x, times `scale`; the chart's label and unit) against
    /// share (y, in percent), one panel per panel and x of the points, one line per series.
    /// Points whose array is empty or all zeros (a read CDF of write-only runs) are left out.
    Distribution {
        /// The dotted path to the array.
        key: &'static str,
        /// Multiplies each value.
        scale: f64,
    },
    /// A time series: an array figure sampled every `step` of x (from 0), drawn against x,
    /// one line per series (mean over the seeds, element by element, error bars their
    /// deviation).
    Timeline {
        /// The dotted path to the array.
        key: &'static str,
        /// The x between two samples.
        step: f64,
    },
    /// Several figures of each point, times `scale`: one line per series and part, named
    /// `<series> <part>` (committed hot and cold transactions).
    Parts {
        /// The parts: (name in the legend, dotted path into the figures).
        parts: Vec<(&'static str, &'static str)>,
        /// Multiplies each figure.
        scale: f64,
    },
    /// Figures that add up to a whole, times `scale`, compared across the series of a panel:
    /// one line per part, at x = 1, 2, … for the panel's series in order (the x axis names
    /// them), each point the series' first point in the panel (where the latency goes).
    Stack {
        /// The parts: (name in the legend, dotted path into the figures).
        parts: Vec<(&'static str, &'static str)>,
        /// Multiplies each figure.
        scale: f64,
    },
}

/// One chart of an experiment: a panel per panel label of its points.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Its y axis's label; with several charts, panel titles read `<panel>: <label>`.
    pub y_label: String,
    /// Its y axis's unit.
    pub y_unit: Unit,
    /// What it shows.
    pub y: Y,
}

impl Chart {
    /// A chart of figure `key` times `scale`.
    pub fn figure(key: &'static str, scale: f64, y_label: &str, y_unit: Unit) -> Chart {
        Chart { y_label: y_label.into(), y_unit, y: Y::Figure { key, scale } }
    }
}

/// Where a claim's "ours" comes from: one point's figure, or the paired ratio of two points'.
#[derive(Clone, Debug, PartialEq)]
pub enum Measure {
    /// The figure `key` of the point at `panel`, `series`, `x`.
    Value {
        /// The panel.
        panel: String,
        /// The series.
        series: String,
        /// The x.
        x: f64,
        /// The dotted path into the figures.
        key: &'static str,
    },
    /// The per-seed ratio of figure `key` of the point at `panel`, `series`, `x` over its
    /// baseline's ([`Experiment::baseline_of`]: the baseline series, or an ablation's first step).
    Speedup {
        /// The panel.
        panel: String,
        /// The series.
        series: String,
        /// The x.
        x: f64,
        /// The dotted path into the figures.
        key: &'static str,
    },
    /// The per-seed ratio of figure `key` of `series` over `over`'s, at `panel` and `x`.
    Ratio {
        /// The panel.
        panel: String,
        /// The series on top.
        series: String,
        /// The series below.
        over: String,
        /// The x.
        x: f64,
        /// The dotted path into the figures.
        key: &'static str,
    },
}

impl Measure {
    /// The paired ratio of figure `key` of `series` over `over`'s at `panel`, `x`.
    pub fn ratio(panel: &str, series: &str, over: &str, x: f64, key: &'static str) -> Measure {
        Measure::Ratio { panel: panel.into(), series: series.into(), over: over.into(), x, key }
    }
}

/// What must be true of ours for a claim's trend to hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Holds {
    /// Ours is above this.
    Above(f64),
    /// Ours is below this.
    Below(f64),
    /// Ours is on the same side of this as the paper's value (both speedups, both slowdowns).
    SameSideOf(f64),
    /// Ours is within this range ("about equal": 0.9..1.1).
    Within(f64, f64),
}

impl Holds {
    /// Whether `ours` holds against `paper`.
    pub fn check(self, ours: f64, paper: Option<f64>) -> bool {
        match self {
            Holds::Above(t) => ours > t,
            Holds::Below(t) => ours < t,
            Holds::SameSideOf(t) => paper.is_some_and(|p| (p - t) * (ours - t) > 0.0),
            Holds::Within(lo, hi) => (lo..=hi).contains(&ours),
        }
    }

    /// The rule in words, its bounds rounded to 6 decimals (a bound computed as 0.67 × 1.5
    /// reads `1.005`, not `1.0050000000000001`).
    pub fn words(self) -> String {
        let n = |v: f64| format!("{}", (v * 1e6).round() / 1e6);
        match self {
            Holds::Above(t) => format!("ours > {}", n(t)),
            Holds::Below(t) => format!("ours < {}", n(t)),
            Holds::SameSideOf(t) => format!("same side of {} as the paper", n(t)),
            Holds::Within(lo, hi) => format!("{} <= ours <= {}", n(lo), n(hi)),
        }
    }
}

/// A claim of the paper and how to check it against our runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The paper's words.
    pub words: String,
    /// Where the paper says it (figure, table or section).
    pub source: String,
    /// The paper's value, if it gives one.
    pub paper: Option<f64>,
    /// What of ours it compares with.
    pub ours: Measure,
    /// When the trend holds.
    pub holds: Holds,
    /// Why the model's trend differs from the paper's, in one sentence, from the model (not a
    /// guess): shown in the claims table when the trend does not hold. A claim that does not
    /// hold and has none is marked *unexplained* there.
    pub reason: Option<String>,
}

impl Claim {
    /// A claim whose trend holds when ours is on the same side of 1 as the paper's value (a
    /// ratio: both faster, or both slower).
    pub fn ratio(words: impl Into<String>, source: &str, paper: f64, ours: Measure) -> Claim {
        Claim {
            words: words.into(),
            source: source.into(),
            paper: Some(paper),
            ours,
            holds: Holds::SameSideOf(1.0),
            reason: None,
        }
    }

    /// The same claim with the model's reason for not holding (see [`Claim::reason`]).
    pub fn because(self, reason: impl Into<String>) -> Claim {
        Claim { reason: Some(reason.into()), ..self }
    }
}

/// An experiment: its points and how to read them.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    /// Its name on the command line.
    pub name: &'static str,
    /// Its files: `<out>/<file_stem>.csv` and `.svg`.
    pub file_stem: String,
    /// The figure's title.
    pub title: String,
    /// The x axis's label.
    pub x_label: String,
    /// The x axis's unit.
    pub x_unit: Unit,
    /// The points, in the order the CSV lists them.
    pub points: Vec<Point>,
    /// The CSV columns after the fixed ones.
    pub columns: Vec<Column>,
    /// The charts, in order; each draws one panel per panel label.
    pub charts: Vec<Chart>,
    /// Panels side by side in the SVG (at most).
    pub chart_columns: usize,
    /// The series ratios are taken against, at the same panel and x.
    pub baseline: Option<String>,
    /// Ratios are taken against the first point of the panel instead (an ablation's first,
    /// unoptimized step), and every series is drawn on a ratio chart.
    pub baseline_first_of_panel: bool,
    /// Figures computed from each run's figures before anything reads them (a rate times a
    /// share), added to the run's JSON object; a sharded run stores the runs without them.
    pub derived_figures: Option<DerivedFigures>,
    /// Values stated outside our runs, per point, drawn dashed beside our figure.
    pub references: Vec<Reference>,
    /// The paper's claims this experiment checks.
    pub claims: Vec<Claim>,
    /// Prose for the report, after the experiment's table (why ours differs, …).
    pub notes: String,
}

impl Experiment {
    /// An experiment of `system` called `name` without points yet: its files are
    /// `<system>-<name>.csv` and `.svg`.
    pub fn new(system: &str, name: &'static str, title: impl Into<String>, x_label: &str, x_unit: Unit) -> Self {
        Experiment {
            name,
            file_stem: format!("{system}-{name}"),
            title: title.into(),
            x_label: x_label.into(),
            x_unit,
            points: Vec::new(),
            columns: Vec::new(),
            charts: Vec::new(),
            chart_columns: 3,
            baseline: None,
            baseline_first_of_panel: false,
            derived_figures: None,
            references: Vec::new(),
            claims: Vec::new(),
            notes: String::new(),
        }
    }

    /// The index of the point at `panel`, `series`, `x`.
    pub fn find(&self, panel: &str, series: &str, x: f64) -> Option<usize> {
        self.points.iter().position(|p| p.panel == panel && p.series == series && p.x == x)
    }

    /// The index of point `i`'s baseline (the baseline series at its panel and x, or the
    /// panel's first point under [`Experiment::baseline_first_of_panel`]), if any.
    pub fn baseline_of(&self, i: usize) -> Option<usize> {
        let p = &self.points[i];
        if self.baseline_first_of_panel {
            return self.points.iter().position(|b| b.panel == p.panel);
        }
        self.find(&p.panel, self.baseline.as_deref()?, p.x)
    }

    /// Whether `series` is the baseline series, whose line a ratio chart leaves out.
    pub fn is_baseline_series(&self, series: &str) -> bool {
        !self.baseline_first_of_panel && self.baseline.as_deref() == Some(series)
    }

    /// The stated value `key` of point `i` ([`Point::annotations`]), if it has one.
    pub fn reference_of(&self, i: usize, key: &str) -> Option<f64> {
        number_at(&self.points[i].annotations, key)
    }

    /// The ratio of point `i`'s stated value `key` to its baseline's.
    pub fn reference_ratio(&self, i: usize, key: &str) -> Option<f64> {
        Some(self.reference_of(i, key)? / self.reference_of(self.baseline_of(i)?, key)?)
    }
}

/// A function adding figures computed from a run's figures to them ([`Experiment::derived_figures`]).
#[derive(Clone, Copy, Debug)]
pub struct DerivedFigures(pub fn(&mut Value));

impl PartialEq for DerivedFigures {
    /// The same function (as far as addresses tell: two experiments built by one system's code).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

/// Values stated outside our runs for each point (what a paper's prototype measured there),
/// read from the points' annotations and drawn dashed as `<series> (<name>)` on the charts of
/// `figure`: its value on a figure chart, its ratio to the baseline's on a ratio chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Whose values they are, in the legend (`prototype`).
    pub name: &'static str,
    /// The figure they state (a dotted path into the figures).
    pub figure: &'static str,
    /// The dotted path to the value in the annotations.
    pub mean: &'static str,
    /// The dotted path to its standard deviation, if stated (error bars).
    pub sd: Option<&'static str>,
}

/// What `pisadb reproduce NAME` runs and what its report says besides the figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Reproduction {
    /// The report's title (`# …`).
    pub title: String,
    /// The report's opening paragraph: the setup every experiment starts from.
    pub intro: String,
    /// The experiments to run, in order.
    pub experiments: Vec<&'static str>,
    /// Prose at the end of the report (where the model and the paper must differ, …).
    pub notes: String,
}

/// The figure at dotted path `key` of `value` as a number (`true` is 1), if it is one.
pub fn number_at(value: &Value, key: &str) -> Option<f64> {
    match at(value, key)? {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// The part of `value` at dotted path `key` (object keys and array indexes).
pub fn at<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(value, |v, part| match v {
        Value::Array(items) => items.get(part.parse::<usize>().ok()?),
        _ => v.get(part),
    })
}

/// A setting as a CSV cell: numbers as Rust writes them (an `f64` 0.0 reads `0`), strings
/// bare, anything else as JSON.
pub fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::Number(n)) if n.is_f64() => n.as_f64().map_or_else(String::new, |f| f.to_string()),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_reads_its_bounds_without_float_noise() {
        assert_eq!(Holds::Within(0.67 * 0.5, 0.67 * 1.5).words(), "0.335 <= ours <= 1.005");
        assert_eq!(Holds::Above(1.0).words(), "ours > 1");
        assert_eq!(Holds::SameSideOf(0.1 + 0.2).words(), "same side of 0.3 as the paper");
    }

    #[test]
    fn dotted_paths_reach_object_keys_and_array_elements() {
        let v = json!({ "a": { "b": [1.5, 2, true] }, "s": "x" });
        assert_eq!(number_at(&v, "a.b.0"), Some(1.5));
        assert_eq!(number_at(&v, "a.b.1"), Some(2.0));
        assert_eq!(number_at(&v, "a.b.2"), Some(1.0));
        assert_eq!(number_at(&v, "a.b.3"), None);
        assert_eq!(number_at(&v, "s"), None);
        assert_eq!(cell(at(&v, "s")), "x");
    }

    #[test]
    fn cells_read_as_rust_writes_the_settings() {
        assert_eq!(cell(Some(&json!(0.0))), "0");
        assert_eq!(cell(Some(&json!(0.25))), "0.25");
        assert_eq!(cell(Some(&json!(8))), "8");
        assert_eq!(cell(Some(&json!(true))), "true");
        assert_eq!(cell(None), "");
    }

    #[test]
    fn trends_hold_by_their_rule() {
        assert!(Holds::Above(1.0).check(1.2, None));
        assert!(!Holds::Below(0.55).check(0.6, Some(0.5)));
        assert!(Holds::SameSideOf(1.0).check(1.3, Some(1.8)));
        assert!(!Holds::SameSideOf(1.0).check(0.9, Some(1.8)));
        assert!(!Holds::SameSideOf(1.0).check(0.9, None));
    }
}
