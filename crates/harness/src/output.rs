//! What a run of experiments leaves behind, the same for every system: a CSV per experiment
//! (fixed columns, then the experiment's own, every figure followed by its `_sd`), an SVG
//! (a panel per chart and panel label, error bars of one standard deviation, the paper's
//! values dashed in the color of the line they refer to), a Markdown table of every point,
//! and the claims table: the paper's words, its value, ours (mean ± sd), ours over the
//! paper's, and whether the trend holds — each computed from the runs.

use crate::experiment::{Claim, Column, Experiment, Measure, Y};
use crate::runner::{Measured, Stat};
use pisadb_report::{write_csv, write_svg, Panel, Series, Unit};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The columns every experiment's CSV starts with.
pub const FIXED_HEADER: [&str; 6] = ["experiment", "panel", "series", "variant", "x", "seeds"];

/// The wall-time column every CSV ends with (the one column that differs between equal runs).
pub const WALL_HEADER: &str = "wall_s";

/// Writes `<out>/<file_stem>.csv`; returns its path.
pub fn write_experiment_csv(e: &Experiment, measured: &[Measured], out: &Path) -> Result<PathBuf, String> {
    let mut header: Vec<String> = FIXED_HEADER.iter().map(|h| h.to_string()).collect();
    header.extend(e.columns.iter().flat_map(Column::headers));
    header.push(WALL_HEADER.to_string());
    let rows: Vec<Vec<String>> = e
        .points
        .iter()
        .zip(measured)
        .enumerate()
        .map(|(i, (p, m))| {
            let mut row = vec![
                e.name.to_string(),
                p.panel.clone(),
                p.series.clone(),
                p.variant.clone(),
                p.x.to_string(),
                m.runs.len().to_string(),
            ];
            for column in &e.columns {
                match column {
                    Column::Setting { key, .. } => {
                        row.push(crate::experiment::cell(crate::experiment::at(&p.settings, key)))
                    }
                    Column::Figure { key, format, .. } => {
                        let st = m.stat(key);
                        row.extend([format.write(st.mean), format.write(st.sd)]);
                    }
                    Column::Ratio { key, format, .. } => match e.baseline_of(i) {
                        Some(b) => {
                            let st = m.ratio(&measured[b], key);
                            row.extend([format.write(st.mean), format.write(st.sd)]);
                        }
                        None => row.extend([String::new(), String::new()]),
                    },
                    Column::Text { key, .. } => row.push(m.text(key)),
                    Column::XName { .. } => row.push(p.x_name.clone()),
                    Column::Annotation { key, .. } => {
                        row.push(crate::experiment::cell(crate::experiment::at(&p.annotations, key)))
                    }
                    Column::Reference { key, format, .. } => {
                        row.push(e.reference_of(i, key).map_or_else(String::new, |v| format.write(v)))
                    }
                    Column::ReferenceRatio { key, format, .. } => {
                        row.push(e.reference_ratio(i, key).map_or_else(String::new, |v| format.write(v)))
                    }
                    Column::PerWallSecond { key, .. } => row.push(format!("{:.0}", m.per_wall_second(key))),
                }
            }
            row.push(format!("{:.3}", m.wall_s()));
            row
        })
        .collect();
    let path = out.join(format!("{}.csv", e.file_stem));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    write_csv(&path, &header, &rows).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The value a chart's y shows at point `i` (NaN where it cannot: a ratio without baseline).
fn y_stat(e: &Experiment, measured: &[Measured], y: &Y, i: usize) -> Stat {
    match y {
        Y::Figure { key, scale } => measured[i].stat(key).scaled(*scale),
        Y::Ratio { key } => e.baseline_of(i).map_or(Stat::NAN, |b| measured[i].ratio(&measured[b], key)),
        Y::Distribution { .. } | Y::Timeline { .. } | Y::Parts { .. } | Y::Stack { .. } => Stat::NAN,
    }
}

/// Labels in order of first appearance.
fn distinct<'a>(labels: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for l in labels {
        if !seen.contains(&l) {
            seen.push(l);
        }
    }
    seen
}

/// The panels of every chart of `e`, charts outer, panel labels inner.
pub fn panels(e: &Experiment, measured: &[Measured]) -> Vec<Panel> {
    let mut out = Vec::new();
    for chart in &e.charts {
        let title = |panel: &str| {
            if e.charts.len() > 1 {
                format!("{panel}: {}", chart.y_label)
            } else {
                panel.to_string()
            }
        };
        if let Y::Distribution { key, scale } = chart.y {
            out.extend(distribution_panels(e, measured, key, scale, chart));
            continue;
        }
        if let Y::Timeline { key, step } = chart.y {
            out.extend(timeline_panels(e, measured, key, step, chart, &title));
            continue;
        }
        if let Y::Stack { parts, scale } = &chart.y {
            out.extend(stack_panels(e, measured, parts, *scale, chart, &title));
            continue;
        }
        for panel in distinct(e.points.iter().map(|p| p.panel.as_str())) {
            let members: Vec<usize> = (0..e.points.len()).filter(|&i| e.points[i].panel == panel).collect();
            let names = distinct(members.iter().map(|&i| e.points[i].series.as_str()));
            let hide_baseline = matches!(chart.y, Y::Ratio { .. });
            let shown: Vec<&str> =
                names.iter().copied().filter(|s| !(hide_baseline && e.is_baseline_series(s))).collect();
            let of = |s: &str| members.iter().copied().filter(|&i| e.points[i].series == s).collect::<Vec<usize>>();
            let line = |name: String, of: &[usize], y: &dyn Fn(usize) -> Stat| {
                let stats: Vec<Stat> = of.iter().map(|&i| y(i)).collect();
                Series {
                    name,
                    points: of.iter().zip(&stats).map(|(&i, st)| (e.points[i].x, st.mean)).collect(),
                    errors: stats.iter().map(|st| st.sd).collect(),
                    reference_of: None,
                }
            };
            let mut series: Vec<Series> = match &chart.y {
                Y::Parts { parts, scale } => shown
                    .iter()
                    .flat_map(|s| {
                        parts.iter().map(move |(part, key)| (s, part, key)).map(|(s, part, key)| {
                            line(format!("{s} {part}"), &of(s), &|i| measured[i].stat(key).scaled(*scale))
                        })
                    })
                    .collect(),
                y => shown.iter().map(|s| line(s.to_string(), &of(s), &|i| y_stat(e, measured, y, i))).collect(),
            };
            series.extend(reference_series(e, &chart.y, &shown, &members));
            series.extend(paper_series(e, chart_key(&chart.y), panel));
            out.push(Panel {
                title: title(panel),
                x_label: e.x_label.clone(),
                x_unit: e.x_unit,
                y_label: chart.y_label.clone(),
                y_unit: chart.y_unit,
                series,
            });
        }
    }
    out
}

/// The figure a chart shows, for matching the paper's values to it.
fn chart_key(y: &Y) -> (&'static str, bool) {
    match y {
        Y::Figure { key, .. } | Y::Distribution { key, .. } | Y::Timeline { key, .. } => (key, false),
        Y::Ratio { key } => (key, true),
        Y::Parts { .. } | Y::Stack { .. } => ("", false),
    }
}

/// The stated values ([`crate::experiment::Reference`]) of the `shown` series of a panel
/// (its points `members`) on a chart of their figure, dashed in the color of our line: the
/// value (times the chart's scale) on a figure chart, the ratio to the baseline's on a ratio
/// chart. Series with no stated value at any point draw nothing.
fn reference_series(e: &Experiment, y: &Y, shown: &[&str], members: &[usize]) -> Vec<Series> {
    let mut lines = Vec::new();
    for r in &e.references {
        let value = |i: usize| -> Option<Stat> {
            match y {
                Y::Figure { key, scale } if *key == r.figure => {
                    let mean = e.reference_of(i, r.mean)?;
                    let sd = r.sd.and_then(|k| e.reference_of(i, k)).unwrap_or(0.0);
                    Some(Stat { mean, sd }.scaled(*scale))
                }
                Y::Ratio { key } if *key == r.figure => Some(Stat { mean: e.reference_ratio(i, r.mean)?, sd: 0.0 }),
                _ => None,
            }
        };
        for s in shown {
            let stated: Vec<(f64, Stat)> = members
                .iter()
                .filter(|&&i| e.points[i].series == *s)
                .filter_map(|&i| Some((e.points[i].x, value(i)?)))
                .collect();
            if !stated.is_empty() {
                lines.push(Series {
                    name: format!("{s} ({})", r.name),
                    points: stated.iter().map(|(x, st)| (*x, st.mean)).collect(),
                    errors: stated.iter().map(|(_, st)| st.sd).collect(),
                    reference_of: Some(s.to_string()),
                });
            }
        }
    }
    lines
}

/// A chart of parts that add up to a whole ([`Y::Stack`]): one panel per panel label, one
/// line per part across the panel's series at x = 1, 2, …
fn stack_panels(
    e: &Experiment,
    measured: &[Measured],
    parts: &[(&'static str, &'static str)],
    scale: f64,
    chart: &crate::experiment::Chart,
    title: &dyn Fn(&str) -> String,
) -> Vec<Panel> {
    distinct(e.points.iter().map(|p| p.panel.as_str()))
        .into_iter()
        .map(|panel| {
            let members: Vec<usize> = (0..e.points.len()).filter(|&i| e.points[i].panel == panel).collect();
            let names = distinct(members.iter().map(|&i| e.points[i].series.as_str()));
            let firsts: Vec<usize> =
                names.iter().filter_map(|s| members.iter().copied().find(|&i| e.points[i].series == *s)).collect();
            let series = parts
                .iter()
                .map(|(part, key)| {
                    let stats: Vec<Stat> = firsts.iter().map(|&i| measured[i].stat(key).scaled(scale)).collect();
                    Series {
                        name: part.to_string(),
                        points: stats.iter().enumerate().map(|(k, st)| ((k + 1) as f64, st.mean)).collect(),
                        errors: stats.iter().map(|st| st.sd).collect(),
                        reference_of: None,
                    }
                })
                .collect();
            let named: Vec<String> = names.iter().enumerate().map(|(k, s)| format!("{} = {s}", k + 1)).collect();
            Panel {
                title: title(panel),
                x_label: format!("series ({})", named.join(", ")),
                x_unit: Unit::Integer,
                y_label: chart.y_label.clone(),
                y_unit: chart.y_unit,
                series,
            }
        })
        .collect()
}

/// The paper's values of `panel` drawn dashed beside our lines: each ratio claim on a ratio
/// chart of its figure whose `over` is the baseline, at its x.
fn paper_series(e: &Experiment, (key, is_ratio): (&str, bool), panel: &str) -> Vec<Series> {
    let mut lines: Vec<Series> = Vec::new();
    for claim in &e.claims {
        let (value, p, series, x, k) = match (claim.paper, &claim.ours) {
            (Some(value), Measure::Ratio { panel: p, series, over, x, key: k })
                if e.baseline.as_deref() == Some(over.as_str()) && !e.baseline_first_of_panel =>
            {
                (value, p, series, x, k)
            }
            (Some(value), Measure::Speedup { panel: p, series, x, key: k }) => (value, p, series, x, k),
            _ => continue,
        };
        if !is_ratio || *k != key || p != panel {
            continue;
        }
        let name = format!("{series} (paper)");
        match lines.iter_mut().find(|l| l.name == name) {
            Some(line) => line.points.push((*x, value)),
            None => lines.push(Series { reference_of: Some(series.clone()), ..Series::new(name, vec![(*x, value)]) }),
        }
    }
    lines
}

/// The arrays at `key` of each of `m`'s runs, times `scale`.
fn arrays(m: &Measured, key: &str, scale: f64) -> Vec<Vec<f64>> {
    m.runs
        .iter()
        .map(|r| {
            let items = crate::experiment::at(&r.figures, key).and_then(|v| v.as_array().cloned()).unwrap_or_default();
            items.iter().map(|v| v.as_f64().unwrap_or(f64::NAN) * scale).collect()
        })
        .collect()
}

/// Element `j` of `arrays` over the seeds (runs shorter than `j` left out).
fn element(arrays: &[Vec<f64>], j: usize) -> Stat {
    Stat::of(arrays.iter().filter_map(|v| v.get(j).copied()))
}

/// A time-series chart: one panel per panel label, one line per series, sample `j` at
/// x = `j × step`.
fn timeline_panels(
    e: &Experiment,
    measured: &[Measured],
    key: &str,
    step: f64,
    chart: &crate::experiment::Chart,
    title: &dyn Fn(&str) -> String,
) -> Vec<Panel> {
    distinct(e.points.iter().map(|p| p.panel.as_str()))
        .into_iter()
        .map(|panel| {
            let series = (0..e.points.len())
                .filter(|&i| e.points[i].panel == panel)
                .map(|i| {
                    let values = arrays(&measured[i], key, 1.0);
                    let n = values.iter().map(Vec::len).max().unwrap_or(0);
                    let stats: Vec<Stat> = (0..n).map(|j| element(&values, j)).collect();
                    Series {
                        name: e.points[i].series.clone(),
                        points: stats.iter().enumerate().map(|(j, st)| (j as f64 * step, st.mean)).collect(),
                        errors: stats.iter().map(|st| st.sd).collect(),
                        reference_of: None,
                    }
                })
                .collect();
            Panel {
                title: title(panel),
                x_label: e.x_label.clone(),
                x_unit: e.x_unit,
                y_label: chart.y_label.clone(),
                y_unit: chart.y_unit,
                series,
            }
        })
        .collect()
}

/// A distribution chart: one panel per panel and x, one line per series, value against share.
fn distribution_panels(
    e: &Experiment,
    measured: &[Measured],
    key: &str,
    scale: f64,
    chart: &crate::experiment::Chart,
) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for (i, p) in e.points.iter().enumerate() {
        let title = format!("{}, {}", p.panel, p.x_text());
        let values = arrays(&measured[i], key, scale);
        let n = values.iter().map(Vec::len).min().unwrap_or(0);
        if values.iter().all(|v| v.iter().all(|x| *x == 0.0)) {
            continue;
        }
        let line: Vec<(f64, f64)> =
            (0..n).map(|j| (element(&values, j).mean, (j + 1) as f64 * 100.0 / n as f64)).collect();
        let k = match panels.iter().position(|q| q.title == title) {
            Some(k) => k,
            None => {
                panels.push(Panel {
                    title,
                    x_label: chart.y_label.clone(),
                    x_unit: chart.y_unit,
                    y_label: "share of transactions".into(),
                    y_unit: Unit::Percent,
                    series: Vec::new(),
                });
                panels.len() - 1
            }
        };
        panels[k].series.push(Series::new(p.series.clone(), line));
    }
    panels
}

/// Writes `<out>/<file_stem>.svg`; returns its path.
pub fn write_experiment_svg(e: &Experiment, measured: &[Measured], out: &Path) -> Result<PathBuf, String> {
    let path = out.join(format!("{}.svg", e.file_stem));
    let panels = panels(e, measured);
    write_svg(&path, &e.title, e.chart_columns.min(panels.len()).max(1), &panels).map_err(|e| e.to_string())?;
    Ok(path)
}

/// A figure's mean ± deviation as a table reads it, in the chart's unit.
fn readable(st: Stat, unit: Unit, seeds: usize) -> String {
    if st.mean.is_nan() {
        return "—".into();
    }
    let value = |v: f64| match unit {
        Unit::Ratio => format!("{v:.3}×"),
        Unit::Percent => format!("{v:.2} %"),
        _ => unit.format(v),
    };
    if seeds > 1 {
        format!("{} ± {}", value(st.mean), value(st.sd))
    } else {
        value(st.mean)
    }
}

/// A Markdown table of every point of `e`: what each of its charts shows.
pub fn points_table(e: &Experiment, measured: &[Measured]) -> String {
    let charts: Vec<_> = e.charts.iter().filter(|c| matches!(c.y, Y::Figure { .. } | Y::Ratio { .. })).collect();
    let mut s = String::from("| panel | series | x |");
    for c in &charts {
        let _ = write!(s, " {} |", c.y_label);
    }
    s.push_str("\n|---|---|---|");
    s.push_str(&"---|".repeat(charts.len()));
    s.push('\n');
    for (i, (p, m)) in e.points.iter().zip(measured).enumerate() {
        let _ = write!(s, "| {} | {} | {} |", p.panel, p.series, p.x_text());
        for c in &charts {
            let _ = write!(s, " {} |", readable(y_stat(e, measured, &c.y, i), c.y_unit, m.runs.len()));
        }
        s.push('\n');
    }
    s
}

/// Ours for `claim`: the measure's mean ± deviation over the seeds, if its points ran.
pub fn claim_stat(e: &Experiment, measured: &[Measured], claim: &Claim) -> Option<Stat> {
    match &claim.ours {
        Measure::Value { panel, series, x, key } => Some(measured[e.find(panel, series, *x)?].stat(key)),
        Measure::Speedup { panel, series, x, key } => {
            let a = e.find(panel, series, *x)?;
            Some(measured[a].ratio(&measured[e.baseline_of(a)?], key))
        }
        Measure::Ratio { panel, series, over, x, key } => {
            let (a, b) = (e.find(panel, series, *x)?, e.find(panel, over, *x)?);
            Some(measured[a].ratio(&measured[b], key))
        }
    }
}

/// The header of a claims table.
pub const CLAIMS_HEADER: &str = "| the paper's claim | where | paper | ours (mean ± sd) | ours / paper | trend holds? | if not, why (from the model) |\n|---|---|---|---|---|---|---|\n";

/// The rows of the claims table for the claims of `e`.
pub fn claims_rows(e: &Experiment, measured: &[Measured]) -> String {
    let mut s = String::new();
    for claim in &e.claims {
        let ours = claim_stat(e, measured, claim);
        let number = |v: f64| format!("{v:.3}");
        let paper = claim.paper.map_or("—".to_string(), number);
        let (ours_text, ratio, holds, why) = match ours {
            Some(st) => {
                let held = claim.holds.check(st.mean, claim.paper);
                let why = match (held, &claim.reason) {
                    (true, _) => "",
                    (false, Some(reason)) => reason.as_str(),
                    (false, None) => "*unexplained*",
                };
                (
                    format!("{} ± {}", number(st.mean), number(st.sd)),
                    claim.paper.map_or("—".to_string(), |p| format!("{:.2}", st.mean / p)),
                    format!("{} ({})", if held { "yes" } else { "no" }, claim.holds.words()),
                    why,
                )
            }
            None => ("not run".into(), "—".into(), "—".into(), ""),
        };
        let _ =
            writeln!(s, "| {} | {} | {paper} | {ours_text} | {ratio} | {holds} | {why} |", claim.words, claim.source);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Chart, Holds, Point};
    use crate::runner::Run;
    use serde_json::json;

    fn measured(values: &[f64]) -> Measured {
        Measured {
            runs: values.iter().map(|v| Run { figures: json!({ "tps": v, "trace_hash": "h" }), wall_s: 0.5 }).collect(),
        }
    }

    fn experiment() -> Experiment {
        let mut e = Experiment::new("toy", "fig1", "Toy", "keys", Unit::Count);
        for x in [1.0, 2.0] {
            e.points.push(Point::new("p", "base", x, json!({ "seed": 1 })));
            e.points.push(Point::new("p", "fast", x, json!({ "seed": 1, "k": x })));
        }
        e.columns = vec![
            Column::setting("k"),
            Column::figure("tps"),
            Column::Ratio { header: "speedup", key: "tps", format: crate::experiment::Format::Fixed(2) },
            Column::Text { header: "trace_hash", key: "trace_hash" },
        ];
        e.charts = vec![Chart { y_label: "speedup".into(), y_unit: Unit::Ratio, y: Y::Ratio { key: "tps" } }];
        e.baseline = Some("base".into());
        e.claims = vec![Claim {
            words: "fast is twice as fast at 2 keys".into(),
            source: "Fig. 1".into(),
            paper: Some(2.0),
            ours: Measure::Ratio { panel: "p".into(), series: "fast".into(), over: "base".into(), x: 2.0, key: "tps" },
            holds: Holds::SameSideOf(1.0),
            reason: None,
        }];
        e
    }

    #[test]
    fn csv_rows_carry_means_deviations_and_paired_ratios() {
        let e = experiment();
        let m = vec![measured(&[1.0, 3.0]), measured(&[2.0, 6.0]), measured(&[1.0, 1.0]), measured(&[3.0, 3.0])];
        let dir = std::env::temp_dir().join(format!("pisadb-harness-output-{}", std::process::id()));
        let path = write_experiment_csv(&e, &m, &dir).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "experiment,panel,series,variant,x,seeds,k,tps,tps_sd,speedup,speedup_sd,trace_hash,wall_s"
        );
        assert_eq!(lines.next().unwrap(), "fig1,p,base,base,1,2,,2,1.4142135623730951,1.00,0.00,h h,1.000");
        assert_eq!(lines.next().unwrap(), "fig1,p,fast,fast,1,2,1,4,2.8284271247461903,2.00,0.00,h h,1.000");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn claims_are_computed_from_the_runs_and_the_paper_is_drawn_dashed() {
        let e = experiment();
        let m = vec![measured(&[1.0]), measured(&[2.0]), measured(&[1.0]), measured(&[3.0])];
        let rows = claims_rows(&e, &m);
        assert!(rows.contains("| 2.000 | 3.000 ± 0.000 | 1.50 | yes (same side of 1 as the paper) |"), "{rows}");
        let panels = panels(&e, &m);
        assert_eq!(panels.len(), 1);
        let names: Vec<&str> = panels[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fast", "fast (paper)"], "the baseline's own ratio line is not drawn");
        assert_eq!(panels[0].series[1].reference_of.as_deref(), Some("fast"));
    }

    #[test]
    fn a_claim_that_breaks_says_no() {
        let e = experiment();
        // The system made slower: the claim of a 2x speedup must not hold.
        let m = vec![measured(&[1.0]), measured(&[1.0]), measured(&[2.0]), measured(&[1.0])];
        let rows = claims_rows(&e, &m);
        assert!(rows.contains("| no (same side of 1 as the paper) | *unexplained* |"), "{rows}");
        // With the model's reason, the table gives it where the trend does not hold.
        let mut explained = e.clone();
        explained.claims[0] = explained.claims[0].clone().because("the base is charged twice");
        let rows = claims_rows(&explained, &m);
        assert!(rows.contains("| no (same side of 1 as the paper) | the base is charged twice |"), "{rows}");
        // Where it holds, no reason is shown.
        let held = vec![measured(&[1.0]), measured(&[2.0]), measured(&[1.0]), measured(&[3.0])];
        assert!(claims_rows(&explained, &held).contains("| yes (same side of 1 as the paper) |  |"));
    }

    /// An ablation: three steps of one series, the first its baseline, each with the value a
    /// prototype measured there.
    fn ablation() -> Experiment {
        let mut e = Experiment::new("toy", "steps", "Steps", "step", Unit::Integer);
        for (x, stated) in [(1.0, 10.0), (2.0, 15.0), (3.0, 40.0)] {
            let point = Point::new("p", "fast", x, json!({ "seed": 1, "w": 4 })).x_name(format!("step {x}"));
            e.points.push(point.annotate("label", "L").annotate("proto", json!({ "tps": stated, "tps_sd": 1.0 })));
        }
        e.baseline_first_of_panel = true;
        e.derived_figures = Some(crate::experiment::DerivedFigures(|f| {
            let tps = f["tps"].as_f64().unwrap_or(0.0);
            f["half"] = json!(tps / 2.0);
        }));
        e.references = vec![crate::experiment::Reference {
            name: "proto",
            figure: "tps",
            mean: "proto.tps",
            sd: Some("proto.tps_sd"),
        }];
        e.columns = vec![
            Column::XName { header: "x_name" },
            Column::Annotation { header: "label", key: "label" },
            Column::Ratio { header: "speedup", key: "tps", format: crate::experiment::Format::Fixed(2) },
            Column::Reference { header: "proto_tps", key: "proto.tps", format: crate::experiment::Format::Fixed(0) },
            Column::ReferenceRatio {
                header: "proto_speedup",
                key: "proto.tps",
                format: crate::experiment::Format::Fixed(2),
            },
            Column::PerWallSecond { header: "tps_per_wall_s", key: "tps" },
        ];
        e.charts = vec![
            Chart { y_label: "speedup".into(), y_unit: Unit::Ratio, y: Y::Ratio { key: "tps" } },
            Chart::figure("tps", 1.0, "tps", Unit::Count),
            Chart {
                y_label: "parts".into(),
                y_unit: Unit::Count,
                y: Y::Parts { parts: vec![("all", "tps"), ("half", "half")], scale: 1.0 },
            },
            Chart {
                y_label: "stack".into(),
                y_unit: Unit::Count,
                y: Y::Stack { parts: vec![("half", "half")], scale: 1.0 },
            },
        ];
        e
    }

    #[test]
    fn an_ablation_is_measured_against_its_first_step_and_the_prototype_beside_it() {
        let e = ablation();
        let m = vec![measured(&[2.0]), measured(&[3.0]), measured(&[8.0])];
        let dir = std::env::temp_dir().join(format!("pisadb-harness-ablation-{}", std::process::id()));
        let text = std::fs::read_to_string(write_experiment_csv(&e, &m, &dir).unwrap()).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "experiment,panel,series,variant,x,seeds,x_name,label,speedup,speedup_sd,proto_tps,proto_speedup,tps_per_wall_s,wall_s"
        );
        assert_eq!(lines[1], "steps,p,fast,fast,1,1,step 1,L,1.00,0.00,10,1.00,4,0.500");
        assert_eq!(lines[3], "steps,p,fast,fast,3,1,step 3,L,4.00,0.00,40,4.00,16,0.500");
        let panels = panels(&e, &m);
        // The ratio chart draws the first step too (it is no baseline series), and the
        // prototype's ratios dashed beside ours.
        let ratio = &panels[0].series;
        assert_eq!(ratio[0].points, [(1.0, 1.0), (2.0, 1.5), (3.0, 4.0)]);
        assert_eq!((ratio[1].name.as_str(), ratio[1].reference_of.as_deref()), ("fast (proto)", Some("fast")));
        assert_eq!(ratio[1].points, [(1.0, 1.0), (2.0, 1.5), (3.0, 4.0)]);
        // The figure chart draws the prototype's values with their deviation.
        assert_eq!(panels[1].series[1].points, [(1.0, 10.0), (2.0, 15.0), (3.0, 40.0)]);
        assert_eq!(panels[1].series[1].errors, [1.0, 1.0, 1.0]);
    }

    #[test]
    fn derived_figures_feed_part_and_stack_charts() {
        let e = ablation();
        let mut runner_m = vec![measured(&[2.0]), measured(&[3.0]), measured(&[8.0])];
        for m in &mut runner_m {
            for r in &mut m.runs {
                (e.derived_figures.unwrap().0)(&mut r.figures);
            }
        }
        let panels = panels(&e, &runner_m);
        let names: Vec<&str> = panels[2].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fast all", "fast half"]);
        assert_eq!(panels[2].series[1].points, [(1.0, 1.0), (2.0, 1.5), (3.0, 4.0)]);
        // A stack: one line per part, x = the series' ordinal, its first point's value.
        assert_eq!(panels[3].series[0].points, [(1.0, 1.0)]);
        assert_eq!(panels[3].x_label, "series (1 = fast)");
    }
}
