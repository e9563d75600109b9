//! Charts: a figure as a grid of [`Panel`]s, drawn to SVG by [`write_svg`].
//!
//! A panel is a small chart of [`Series`]. Most panels are line charts over their x values;
//! a panel whose every point sits at one x value (the variants of one figure compared at one
//! setting, as NetAccel's Fig. 7 at 25 Gbps) is drawn as bars side by side, the x value its
//! only tick, since a line chart would stack its points on one vertical. An axis whose unit is
//! [`Unit::LogScaleCount`] is drawn on a log scale from the values themselves, so a CSV keeps
//! the numbers a reader would type. A panel's caption wraps onto more lines when it is wider
//! than the panel, and the plots of a row keep their axes aligned.
//!
//! Everything else a chart promises (units on the ticks, one legend, colors by name, error
//! bars, reference lines dashed) is in the crate's documentation.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use crate::{create_parent, ReportError, Unit};

/// One line of a chart: a name (shown in the legend) and its `(x, y)` points, drawn in order,
/// with an error bar of `y ± errors[i]` at point `i` where `errors` gives one (a point whose
/// half-width is 0 or missing has none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// The legend label; series with the same name share a color across panels.
    pub name: String,
    /// The points, joined by a line in the order given.
    pub points: Vec<(f64, f64)>,
    /// Half-widths of the error bars, by point (e.g. a standard deviation over seeds); empty
    /// for none.
    pub errors: Vec<f64>,
    /// Set when this line is a reference measurement of the series of that name (say, the
    /// original implementation's figures for the same points): it is drawn dashed, in that
    /// series' color.
    pub reference_of: Option<String>,
}

impl Series {
    /// A line without error bars.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, errors: Vec::new(), reference_of: None }
    }

    /// The error bars of the finite points: `(x, y - e, y, y + e)` for each with `e > 0`.
    fn error_bars(&self) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
        self.points
            .iter()
            .zip(&self.errors)
            .filter(|((x, y), e)| x.is_finite() && y.is_finite() && e.is_finite() && **e > 0.0)
            .map(|(&(x, y), &e)| (x, y - e, y, y + e))
    }
}

/// One chart of a figure: a title, axis labels and units, and the lines it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The caption above the chart.
    pub title: String,
    /// The label of the horizontal axis (its unit shows in the tick labels, not here).
    pub x_label: String,
    /// What the x values measure, which decides how its ticks read.
    pub x_unit: Unit,
    /// The label of the vertical axis (its unit shows in the tick labels, not here).
    pub y_label: String,
    /// What the y values measure, which decides how its ticks read.
    pub y_unit: Unit,
    /// The lines drawn in this chart.
    pub series: Vec<Series>,
}

/// Width and height of one panel, in pixels.
const PANEL_SIZE: (u32, u32) = (480, 360);
/// Font sizes in pixels: the figure title, a panel's caption, axis descriptions, tick labels
/// and legend entries.
const TITLE_FONT_PX: u32 = 22;
const CAPTION_FONT_PX: u32 = 16;
const DESC_FONT_PX: u32 = 14;
const TICK_FONT_PX: u32 = 13;
/// Room around the figure's title and legend, between legend entries, and around a chart
/// inside its panel, in pixels.
const PAD_PX: u32 = 10;
/// Length of a tick mark; plotters puts the label twice as far from the axis.
const TICK_MARK_PX: u32 = 4;
/// The most ticks an axis gets, and the least room between two x tick labels, in pixels.
const TICKS_MAX: usize = 6;
const TICK_GAP_PX: u32 = 16;
/// Width of a legend entry's line sample, in pixels.
const SWATCH_PX: u32 = 24;

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

/// Writes an SVG with `panels` laid out in a grid of `columns` columns (rows as needed), the
/// figure title on top (wrapped to the figure's width) and under it one legend for the whole
/// figure. Lines with point markers, distinct colors per series name consistently across
/// panels (same name = same color). Axis ranges from the data, y starting at 0 unless data is
/// negative; tick labels in each axis's [`Unit`]. Empty panels/series must not panic.
///
/// Creates parent directories. `columns` is clamped to 1..=`panels.len()`.
pub fn write_svg(path: &Path, title: &str, columns: usize, panels: &[Panel]) -> Result<(), ReportError> {
    create_parent(path)?;
    register_font().map_err(|message| ReportError::Chart { path: path.to_path_buf(), message })?;
    draw(path, title, columns, panels)
        .map_err(|e| ReportError::Chart { path: path.to_path_buf(), message: e.to_string() })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Width and height of `text` in the registered sans-serif font of `size_px`.
fn text_size(text: &str, size_px: u32) -> Result<(u32, u32), Box<dyn std::error::Error>> {
    Ok(("sans-serif", size_px).into_font().box_size(text)?)
}

fn draw(path: &Path, title: &str, columns: usize, panels: &[Panel]) -> DrawResult {
    let drawn: Vec<Panel> = panels.iter().map(on_drawn_scale).collect();
    let panels = &drawn[..];
    let columns = columns.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(columns).max(1);
    let width = PANEL_SIZE.0 * columns as u32;

    // Colors by name in order of first appearance; the legend lists them in that order. A
    // reference line takes the color of the series it measures (a color of its own if that
    // series is not drawn), and is drawn dashed.
    let all_series = || panels.iter().flat_map(|p| &p.series);
    let mut legend: Vec<(&str, RGBColor)> = Vec::new();
    let mut own_colors = 0;
    for series in all_series().filter(|s| s.reference_of.is_none()) {
        if !legend.iter().any(|(name, _)| *name == series.name) {
            legend.push((series.name.as_str(), PALETTE[own_colors % PALETTE.len()]));
            own_colors += 1;
        }
    }
    for series in all_series() {
        let Some(of) = &series.reference_of else { continue };
        if !legend.iter().any(|(name, _)| *name == series.name) {
            let color = legend.iter().find(|(name, _)| name == of).map(|(_, c)| *c);
            let color = color.unwrap_or_else(|| {
                own_colors += 1;
                PALETTE[(own_colors - 1) % PALETTE.len()]
            });
            legend.push((series.name.as_str(), color));
        }
    }
    let colors: BTreeMap<&str, RGBColor> = legend.iter().copied().collect();
    let dashed: BTreeSet<&str> = all_series().filter(|s| s.reference_of.is_some()).map(|s| s.name.as_str()).collect();

    let title_lines = wrap(title, TITLE_FONT_PX, width - 2 * PAD_PX)?;
    let title_line_px = TITLE_FONT_PX * 13 / 10;
    let title_px = PAD_PX + title_line_px * title_lines.len() as u32;
    let legend_rows = legend_rows(&legend, width - 2 * PAD_PX)?;
    let legend_row_px = TICK_FONT_PX * 2;
    let legend_px = if legend_rows.is_empty() { 0 } else { PAD_PX + legend_row_px * legend_rows.len() as u32 };
    let header_px = title_px + legend_px;
    let size = (width, header_px + PANEL_SIZE.1 * rows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;

    let title_style = ("sans-serif", TITLE_FONT_PX).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in title_lines.iter().enumerate() {
        root.draw_text(line, &title_style, ((width / 2) as i32, (PAD_PX + title_line_px * i as u32) as i32))?;
    }
    let entry_style = ("sans-serif", TICK_FONT_PX).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, (entries, row_width)) in legend_rows.iter().enumerate() {
        let y = (title_px + PAD_PX + legend_row_px * row as u32 + legend_row_px / 2) as i32;
        let mut x = ((width - row_width) / 2) as i32;
        for &(name, text_width) in entries {
            let color = colors[name];
            if dashed.contains(name) {
                let third = SWATCH_PX as i32 / 3;
                for start in [x, x + 2 * third] {
                    root.draw(&PathElement::new([(start, y), (start + third, y)], color.stroke_width(2)))?;
                }
            } else {
                root.draw(&PathElement::new([(x, y), (x + SWATCH_PX as i32, y)], color.stroke_width(2)))?;
            }
            root.draw(&Circle::new((x + SWATCH_PX as i32 / 2, y), 3, color.stroke_width(2)))?;
            root.draw_text(name, &entry_style, (x + (SWATCH_PX + PAD_PX / 2) as i32, y))?;
            x += legend_entry_width(text_width) as i32;
        }
    }

    // Every panel's y labels get the room of the widest, so that the axes of a column line up.
    let y_axes = panels.iter().map(|panel| y_axis(panel, PANEL_SIZE.1)).collect::<Result<Vec<_>, _>>()?;
    let y_label_width_px = y_axes.iter().map(|(_, ticks)| ticks.label_width_px).max().unwrap_or(0);
    let (_, body) = root.split_vertically(header_px);
    for ((panel, y_axis), area) in panels.iter().zip(y_axes).zip(body.split_evenly((rows, columns))) {
        draw_panel(&area, panel, y_axis, y_label_width_px, &colors)?;
    }
    root.present()?;
    Ok(())
}

/// `text` broken at spaces into lines no wider than `width_px` (a word wider than that gets a
/// line of its own).
fn wrap(text: &str, size_px: u32, width_px: u32) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_size(&format!("{line} {word}"), size_px)?.0 <= width_px => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    Ok(lines)
}

/// One row of the legend: its entries (name, text width) and its width, in pixels.
type LegendRow<'a> = (Vec<(&'a str, u32)>, u32);

/// The legend's entries in rows no wider than `width_px`.
fn legend_rows<'a>(
    legend: &[(&'a str, RGBColor)],
    width_px: u32,
) -> Result<Vec<LegendRow<'a>>, Box<dyn std::error::Error>> {
    let mut rows: Vec<LegendRow<'a>> = Vec::new();
    for &(name, _) in legend {
        let text_width = text_size(name, TICK_FONT_PX)?.0;
        let entry = legend_entry_width(text_width);
        match rows.last_mut() {
            Some((entries, row_width)) if *row_width + entry <= width_px => {
                entries.push((name, text_width));
                *row_width += entry;
            }
            _ => rows.push((vec![(name, text_width)], entry)),
        }
    }
    Ok(rows)
}

/// The width a legend entry takes: its line sample, its name and the gap to the next entry.
fn legend_entry_width(text_width_px: u32) -> u32 {
    SWATCH_PX + PAD_PX / 2 + text_width_px + 2 * PAD_PX
}

/// The lines of `panel` with their non-finite points left out.
fn finite_lines(panel: &Panel) -> Vec<(&Series, Vec<(f64, f64)>)> {
    let finite = |s: &Series| s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    panel.series.iter().map(|s| (s, finite(s))).collect()
}

/// The one x value every finite point of `lines` sits at, if there is exactly one: such a
/// panel compares its series at one setting, and is drawn as bars side by side (a line chart
/// would stack its points on one vertical).
fn single_x(lines: &[(&Series, Vec<(f64, f64)>)]) -> Option<f64> {
    let xs: BTreeSet<u64> = lines.iter().flat_map(|(_, points)| points).map(|p| p.0.to_bits()).collect();
    (xs.len() == 1).then(|| f64::from_bits(*xs.first().expect("one x")))
}

/// `panel` as it is drawn: an axis in [`Unit::LogScaleCount`] becomes the base-10 logarithm of
/// its values, read as counts ([`Unit::Log10Count`]); values at or below zero, which a log
/// scale cannot show, are left out, and so are the error bars of a log y axis (a deviation is
/// not symmetric there).
pub(crate) fn on_drawn_scale(panel: &Panel) -> Panel {
    let log = |unit: Unit| unit == Unit::LogScaleCount;
    let (log_x, log_y) = (log(panel.x_unit), log(panel.y_unit));
    if !log_x && !log_y {
        return panel.clone();
    }
    let scaled = |v: f64, on: bool| match (on, v > 0.0) {
        (false, _) => v,
        (true, true) => v.log10(),
        (true, false) => f64::NAN,
    };
    let series = panel
        .series
        .iter()
        .map(|s| Series {
            points: s.points.iter().map(|&(x, y)| (scaled(x, log_x), scaled(y, log_y))).collect(),
            errors: if log_y { Vec::new() } else { s.errors.clone() },
            ..s.clone()
        })
        .collect();
    let unit = |u: Unit, on: bool| if on { Unit::Log10Count } else { u };
    Panel { x_unit: unit(panel.x_unit, log_x), y_unit: unit(panel.y_unit, log_y), series, ..panel.clone() }
}

/// A panel's caption in lines no wider than the panel.
fn caption_lines(title: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    wrap(title, CAPTION_FONT_PX, PANEL_SIZE.0 - 2 * PAD_PX)
}

/// The height of one line of a panel's caption, in pixels.
fn caption_line_px() -> Result<u32, Box<dyn std::error::Error>> {
    Ok(text_size("Mg", CAPTION_FONT_PX)?.1 + 2)
}

/// The y range of `panel` and its ticks, for a panel `height_px` tall. A linear y axis starts
/// at 0; a log one (which has no 0) at its data.
fn y_axis(panel: &Panel, height_px: u32) -> Result<(Range<f64>, AxisTicks), Box<dyn std::error::Error>> {
    let lines = finite_lines(panel);
    let bar_ends = panel.series.iter().flat_map(|s| s.error_bars()).flat_map(|(_, lo, _, hi)| [lo, hi]);
    let ys = lines.iter().flat_map(|(_, points)| points).map(|p| p.1).chain(bar_ends);
    let bottom = (panel.y_unit != Unit::Log10Count).then_some(0.0);
    let range = axis_range(panel.y_unit, ys, bottom);
    let caption_px = caption_line_px()? * caption_lines(&panel.title)?.len() as u32 + PAD_PX;
    let desc_px = text_size("Mg", DESC_FONT_PX)?.1;
    let plot_height = height_px.saturating_sub(caption_px + 3 * PAD_PX + 2 * TICK_MARK_PX + 2 * TICK_FONT_PX + desc_px);
    let ticks = AxisTicks::fit(panel.y_unit, &range, plot_height, true)?;
    Ok((range, ticks))
}

/// How a panel's x axis is laid out: over the data's range with round ticks, or (a panel whose
/// points share one x) one slot per series with the x value as the only label.
struct XLayout {
    /// The axis, in data coordinates (slots for bars).
    coord: TickedAxis,
    /// The label of a tick.
    label: Box<dyn Fn(&f64) -> String>,
    /// The widest and the tallest label, in pixels.
    label_px: (u32, u32),
}

impl XLayout {
    /// The axis of `lines` for a plot `plot_width_px` wide.
    fn of(
        panel: &Panel,
        lines: &[(&Series, Vec<(f64, f64)>)],
        plot_width_px: u32,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        if let Some(x) = single_x(lines) {
            let slots = lines.iter().filter(|(_, points)| !points.is_empty()).count() as f64;
            let text = panel.x_unit.format(x);
            let label_px = text_size(&text, TICK_FONT_PX)?;
            let coord = TickedAxis { linear: (0.0..slots).into(), ticks: vec![slots / 2.0] };
            return Ok(XLayout { coord, label: Box::new(move |_| text.clone()), label_px });
        }
        let range = axis_range(panel.x_unit, lines.iter().flat_map(|(_, points)| points).map(|p| p.0), None);
        let ticks = AxisTicks::fit(panel.x_unit, &range, plot_width_px, false)?;
        let (unit, digits) = (panel.x_unit, ticks.digits);
        let label_px = (ticks.label_width_px, ticks.label_height_px);
        Ok(XLayout { coord: ticks.coord(range), label: Box::new(move |v| unit.format_digits(*v, digits)), label_px })
    }
}

/// Draws `panel` on `area` with the y axis given, its labels `y_label_width_px` wide: its
/// caption (wrapped to the panel's width), then its lines, or its bars when every point sits at
/// one x ([`single_x`]).
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    (y_range, y_axis): (Range<f64>, AxisTicks),
    y_label_width_px: u32,
    colors: &BTreeMap<&str, RGBColor>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let lines = finite_lines(panel);
    let (width, _) = area.dim_in_pixel();
    let caption = caption_lines(&panel.title)?;
    let line_px = caption_line_px()?;
    let (caption_area, area) = area.split_vertically(PAD_PX + line_px * caption.len() as u32);
    let caption_style =
        ("sans-serif", CAPTION_FONT_PX).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in caption.iter().enumerate() {
        caption_area.draw_text(line, &caption_style, ((width / 2) as i32, (PAD_PX + line_px * i as u32) as i32))?;
    }

    // The y labels decide the width of their area, which decides the room left for x labels.
    let label_dist = 2 * TICK_MARK_PX;
    let desc_px = text_size("Mg", DESC_FONT_PX)?.1;
    let y_area = label_dist + y_label_width_px + PAD_PX + desc_px;
    let plot_width = width.saturating_sub(y_area + 4 * PAD_PX);
    let x_axis = XLayout::of(panel, &lines, plot_width)?;
    let x_area = label_dist + x_axis.label_px.1 + PAD_PX / 2 + desc_px + PAD_PX / 2;
    // Half the last x label may stick out to the right of the plot.
    let margin_right = (2 * PAD_PX).max(x_axis.label_px.0 / 2 + PAD_PX / 2);

    let mut chart = ChartBuilder::on(&area)
        .margin_top(PAD_PX)
        .margin_left(PAD_PX)
        .margin_right(margin_right)
        .margin_bottom(PAD_PX / 2)
        .x_label_area_size(x_area)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x_axis.coord, y_axis.coord(y_range))?;
    let y_format = |v: &f64| panel.y_unit.format_digits(*v, y_axis.digits);
    let bars = single_x(&lines).is_some();
    let mut mesh = chart.configure_mesh();
    if bars {
        // Bars stand in slots, not at x values: no vertical grid line through them.
        mesh.disable_x_mesh();
    }
    mesh.x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .x_label_formatter(&x_axis.label)
        .y_label_formatter(&y_format)
        .label_style(("sans-serif", TICK_FONT_PX))
        .axis_desc_style(("sans-serif", DESC_FONT_PX))
        .bold_line_style(BLACK.mix(0.12))
        .set_all_tick_mark_size(TICK_MARK_PX)
        .draw()?;

    for (slot, (series, points)) in lines.into_iter().filter(|(_, points)| !points.is_empty()).enumerate() {
        let color = colors.get(series.name.as_str()).copied().unwrap_or(BLACK);
        let errors = series.error_bars();
        if bars {
            // One bar per series, from 0 to its value; a reference measurement's bar is an
            // outline in the color of the series it measures.
            let (left, middle, right) = (slot as f64 + 0.15, slot as f64 + 0.5, slot as f64 + 0.85);
            let y = points[0].1;
            let style = if series.reference_of.is_some() { color.stroke_width(2) } else { color.mix(0.85).filled() };
            chart.draw_series([Rectangle::new([(left, 0.0), (right, y)], style)])?;
            // The deviation as a stem with caps, in black over the bar (plotters' error bar would
            // put a marker on the bar's top).
            for (_, lo, _, hi) in errors {
                let cap = |y: f64| PathElement::new([(middle - 0.08, y), (middle + 0.08, y)], BLACK.stroke_width(1));
                chart.draw_series([
                    PathElement::new([(middle, lo), (middle, hi)], BLACK.stroke_width(1)),
                    cap(lo),
                    cap(hi),
                ])?;
            }
            continue;
        }
        if series.reference_of.is_some() {
            let markers: Vec<Circle<(f64, f64), u32>> =
                points.iter().map(|&p| Circle::new(p, 3, color.stroke_width(2))).collect();
            chart.draw_series(DashedLineSeries::new(points, 6, 4, color.stroke_width(2)))?;
            chart.draw_series(markers)?;
        } else {
            chart.draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))?;
        }
        let stems = errors.map(|(x, lo, y, hi)| ErrorBar::new_vertical(x, lo, y, hi, color.stroke_width(1), 8));
        chart.draw_series(stems)?;
    }
    Ok(())
}

/// The ticks of one axis, how they are labelled, and the room their labels take.
struct AxisTicks {
    /// Where the ticks sit, in data coordinates.
    ticks: Vec<f64>,
    /// Significant digits of the labels.
    digits: u32,
    /// Width of the widest label, in pixels.
    label_width_px: u32,
    /// Height of the tallest label, in pixels.
    label_height_px: u32,
}

impl AxisTicks {
    /// The ticks of an axis over `range` that is `length_px` long: as many as fit (at most
    /// [`TICKS_MAX`]) with their labels side by side (`vertical`: one above the other).
    fn fit(unit: Unit, range: &Range<f64>, length_px: u32, vertical: bool) -> Result<Self, Box<dyn std::error::Error>> {
        let mut most = TICKS_MAX;
        loop {
            let ticks = ticks(unit, range, most);
            let digits = distinct_digits(unit, &ticks);
            let sizes = ticks
                .iter()
                .map(|&t| text_size(&unit.format_digits(t, digits), TICK_FONT_PX))
                .collect::<Result<Vec<_>, _>>()?;
            let label_width_px = sizes.iter().map(|s| s.0).max().unwrap_or(0);
            let label_height_px = sizes.iter().map(|s| s.1).max().unwrap_or(TICK_FONT_PX);
            let each_px = if vertical { label_height_px } else { label_width_px } + TICK_GAP_PX;
            if most <= 2 || each_px * ticks.len() as u32 <= length_px {
                return Ok(AxisTicks { ticks, digits, label_width_px, label_height_px });
            }
            most -= 1;
        }
    }
}

impl AxisTicks {
    /// The axis over `range` with these ticks.
    fn coord(&self, range: Range<f64>) -> TickedAxis {
        TickedAxis { linear: range.into(), ticks: self.ticks.clone() }
    }
}

/// A linear f64 axis with the ticks we chose (a grid line at each) instead of plotters' own,
/// and no minor grid lines.
struct TickedAxis {
    /// The axis's mapping of values to pixels.
    linear: RangedCoordf64,
    /// The ticks, in data coordinates.
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    // The labels come from the mesh's formatter; this marker only makes plotters accept one.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// The fewest significant digits, from 3 up to 6, that give distinct ticks distinct labels.
fn distinct_digits(unit: Unit, ticks: &[f64]) -> u32 {
    (3..6)
        .find(|&digits| {
            let labels: Vec<String> = ticks.iter().map(|&t| unit.format_digits(t, digits)).collect();
            labels.windows(2).all(|pair| pair[0] != pair[1])
        })
        .unwrap_or(6)
}

/// At most `most` ticks within `range` for `unit`: multiples of 1, 2, 2.5 or 5 times a power
/// of ten (whole numbers only for [`Unit::Integer`]); for [`Unit::Log10Count`], the powers of ten in
/// range, or 1, 2 and 5 times them when fewer than three powers fall in range.
fn ticks(unit: Unit, range: &Range<f64>, most: usize) -> Vec<f64> {
    match unit {
        Unit::Log10Count => {
            let slack = (range.end - range.start) * 1e-9;
            let inside = |x: &f64| *x >= range.start - slack && *x <= range.end + slack;
            let powers: Vec<f64> = (range.start.ceil() as i64..=range.end.floor() as i64).map(|p| p as f64).collect();
            if powers.len() >= 3 {
                return if powers.len() <= most { powers } else { round_ticks(range, most, 1.0) };
            }
            let decades = range.start.floor() as i64..=range.end.ceil() as i64;
            let one_two_five: Vec<f64> =
                decades.flat_map(|p| [1.0f64, 2.0, 5.0].map(|m| p as f64 + m.log10())).filter(inside).collect();
            if one_two_five.len() <= most {
                one_two_five
            } else {
                powers
            }
        }
        Unit::Integer => round_ticks(range, most, 1.0),
        _ => round_ticks(range, most, 0.0),
    }
}

/// At most `most` (at least 1) ticks at the multiples in `range` of the smallest round step (1,
/// 2, 2.5 or 5 times a power of ten; at least `step_min`, and whole if that is 1 or more) that
/// gives no more.
fn round_ticks(range: &Range<f64>, most: usize, step_min: f64) -> Vec<f64> {
    let most = most.max(1);
    let length = range.end - range.start;
    if !length.is_finite() || length <= 0.0 {
        return vec![range.start];
    }
    let slack = length * 1e-9;
    let mut power_first = (length / most as f64).log10().floor() as i32 - 1;
    if step_min > 0.0 {
        power_first = power_first.max(step_min.log10().floor() as i32);
    }
    // Steps from at most a tenth of the range per tick: four powers of ten up, a step is
    // longer than the range, which then holds one multiple at most.
    for power in power_first..power_first + 4 {
        for mantissa in [1.0, 2.0, 2.5, 5.0] {
            let step = mantissa * 10f64.powi(power);
            if step < step_min || (step_min >= 1.0 && step.fract() != 0.0) {
                continue;
            }
            let first = ((range.start - slack) / step).ceil();
            let last = ((range.end + slack) / step).floor();
            if last - first < most as f64 {
                return (first as i64..=last as i64).map(|k| k as f64 * step).collect();
            }
        }
    }
    vec![]
}

/// The range of an axis of `unit` covering `values` (and `include`, if given), see [`span`];
/// an [`Unit::Integer`] axis gets half a unit of room at either end instead.
fn axis_range(unit: Unit, values: impl Iterator<Item = f64>, include: Option<f64>) -> Range<f64> {
    if unit != Unit::Integer {
        return span(values, include);
    }
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        0.5..1.5
    } else {
        lo - 0.5..hi + 0.5
    }
}

/// The range covering `values` (and `include`, if given), with a 5% margin at either end but
/// none below a bottom that is `include` (a y axis from 0 has 0 on its x axis); 0..1 when
/// empty, widened around a single value.
fn span(values: impl Iterator<Item = f64>, include: Option<f64>) -> Range<f64> {
    let (lo, hi) = values.chain(include).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi || (lo == 0.0 && hi == 0.0) {
        0.0..1.0
    } else if lo == hi {
        lo - lo.abs() * 0.1..hi + hi.abs() * 0.1
    } else {
        let pad = (hi - lo) * 0.05;
        (if include == Some(lo) { lo } else { lo - pad })..hi + pad
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format_seconds;
    use crate::tests::scratch;

    fn series(name: &str, scale: f64) -> Series {
        Series::new(name, (0..5).map(|i| (f64::from(i), scale * f64::from(i * i))).collect())
    }

    fn panel(title: &str, series: Vec<Series>) -> Panel {
        Panel {
            title: title.to_string(),
            x_label: "hot keys".to_string(),
            x_unit: Unit::Count,
            y_label: "txn/s".to_string(),
            y_unit: Unit::Count,
            series,
        }
    }

    #[test]
    fn more_digits_only_where_three_would_merge_two_ticks() {
        assert_eq!(distinct_digits(Unit::Count, &[0.0, 1e6, 2e6]), 3);
        assert_eq!(distinct_digits(Unit::Count, &[1.000e6, 1.001e6, 1.002e6]), 4);
    }

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(ticks(Unit::Count, &(0.0..4.2e6), 6), vec![0.0, 1e6, 2e6, 3e6, 4e6]);
        assert_eq!(ticks(Unit::Percent, &(0.0..105.0), 6), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(Unit::Count, &(1.0..20.95), 6), vec![5.0, 10.0, 15.0, 20.0]);
        assert_eq!(ticks(Unit::Count, &(1.0..20.95), 3), vec![10.0, 20.0]);
        assert_eq!(ticks(Unit::Ratio, &(0.0..1.36), 6), vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.25]);
        assert_eq!(ticks(Unit::Integer, &(0.5..9.5), 4), vec![2.0, 4.0, 6.0, 8.0]);
        let seconds = ticks(Unit::Seconds, &(0.0..46e-6), 6);
        let labels: Vec<String> = seconds.iter().map(|&t| format_seconds(t)).collect();
        assert_eq!(labels, ["0", "10 µs", "20 µs", "30 µs", "40 µs"]);
        for most in 1..=8 {
            for range in [0.0..1.0, 0.0..4.2e6, -2.2..2.2, 4.7..6.4, 1e-7..3e-7] {
                let n = ticks(Unit::Count, &range, most).len();
                assert!((1..=most).contains(&n), "{range:?}, at most {most}: {n} ticks");
            }
        }
    }

    #[test]
    fn integer_ticks_are_whole_numbers_with_room_at_the_ends() {
        let range = axis_range(Unit::Integer, [1.0, 2.0, 3.0, 4.0].into_iter(), None);
        assert_eq!(range, 0.5..4.5);
        assert_eq!(ticks(Unit::Integer, &range, 6), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(ticks(Unit::Integer, &(0.5..2.5), 6), vec![1.0, 2.0]);
    }

    #[test]
    fn log_ticks_sit_on_powers_of_ten_or_one_two_five() {
        let labels = |range: Range<f64>| -> Vec<String> {
            ticks(Unit::Log10Count, &range, 6).iter().map(|&t| Unit::Log10Count.format(t)).collect()
        };
        assert_eq!(labels(50_000f64.log10()..2e6f64.log10()), ["50 k", "100 k", "200 k", "500 k", "1 M", "2 M"]);
        assert_eq!(labels(3.0..7.2), ["1 k", "10 k", "100 k", "1 M", "10 M"]);
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
    fn error_bars_are_drawn_and_widen_the_y_axis() {
        let dir = scratch("errors");
        let (plain, barred) = (dir.join("plain.svg"), dir.join("barred.svg"));
        let line = Series::new("P4DB", vec![(1.0, 10.0), (2.0, 20.0)]);
        write_svg(&plain, "t", 1, &[panel("p", vec![line.clone()])]).unwrap();
        // The second point's bar reaches 50, far above every point.
        let with_bars = Series { errors: vec![0.0, 30.0], ..line };
        assert_eq!(with_bars.error_bars().collect::<Vec<_>>(), [(2.0, -10.0, 20.0, 50.0)]);
        write_svg(&barred, "t", 1, &[panel("p", vec![with_bars])]).unwrap();
        let (plain, barred) = (std::fs::read_to_string(plain).unwrap(), std::fs::read_to_string(barred).unwrap());
        // A bar is three thin strokes (stem and two caps) in the series' color; the line is thick.
        let thin = |svg: &str| svg.matches(r##"<line opacity="1" stroke="#1F77B4" stroke-width="1""##).count();
        assert_eq!((thin(&plain), thin(&barred)), (0, 3), "one error bar, at the second point only");
        // The y axis reads up to 20 without the bar, and beyond 40 with it.
        let has_tick = |svg: &str, label: &str| svg.lines().any(|l| l.trim() == label);
        assert!(!has_tick(&plain, "40"), "the plain axis ends near its top point");
        assert!(has_tick(&barred, "40"), "the y axis does not cover the bar");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_reference_line_is_dashed_in_the_color_of_the_series_it_measures() {
        let dir = scratch("reference");
        let path = dir.join("ref.svg");
        let ours = Series::new("P4DB", vec![(1.0, 10.0), (2.0, 20.0)]);
        let theirs = Series { reference_of: Some("P4DB".into()), ..Series::new("P4DB (prototype)", vec![(1.0, 12.0)]) };
        let other = Series::new("No-Switch", vec![(1.0, 5.0), (2.0, 6.0)]);
        write_svg(&path, "t", 1, &[panel("p", vec![ours, theirs, other])]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        // The first palette color is P4DB's and the reference's; the second is No-Switch's.
        let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        let strokes = |color: &str| svg.matches(&format!(r#"stroke="{color}""#)).count();
        assert!(strokes(&hex(PALETTE[1])) > 0, "No-Switch keeps a color of its own");
        assert_eq!(strokes(&hex(PALETTE[2])), 0, "the reference took no color of its own");
        // A dashed line is drawn as separate segments: more strokes in P4DB's color than the two
        // plain lines' worth (a polyline and markers each).
        assert!(strokes(&hex(PALETTE[0])) > strokes(&hex(PALETTE[1])) + 2, "no dashes");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn svg_with_empty_or_odd_data_does_not_panic() {
        let dir = scratch("empty");
        let odd = Series::new("odd", vec![(1.0, -2.0), (f64::NAN, 1.0), (1.0, -2.0)]);
        let cases: Vec<Vec<Panel>> = vec![
            vec![],
            vec![panel("no series", vec![])],
            vec![panel("empty series", vec![Series::new("none", vec![])])],
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
    fn axis_ranges_come_from_the_data_with_a_margin_except_at_zero() {
        let close = |r: Range<f64>, lo: f64, hi: f64| (r.start - lo).abs() < 1e-9 && (r.end - hi).abs() < 1e-9;
        assert!(close(span([2.0, 4.0].into_iter(), Some(0.0)), 0.0, 4.2));
        assert!(close(span([2.0, 4.0].into_iter(), None), 1.9, 4.1));
        assert!(close(span([-2.0, 2.0].into_iter(), Some(0.0)), -2.2, 2.2));
        assert!(close(span(std::iter::empty(), Some(0.0)), 0.0, 1.0));
        assert!(close(span([5.0].into_iter(), None), 4.5, 5.5));
    }

    #[test]
    fn a_panel_whose_points_share_one_x_is_drawn_as_bars_labelled_with_that_x() {
        let dir = scratch("bars");
        let path = dir.join("bars.svg");
        let at = |name: &str, y: f64| Series { errors: vec![0.5], ..Series::new(name, vec![(25.0, y)]) };
        let mut p = panel("one x", vec![at("normal", 8.0), at("accelerated", 6.0), at("5×1", 1.0)]);
        p.x_unit = Unit::Count;
        write_svg(&path, "t", 1, &[p]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        // Three filled bars (one per series), each in its own color.
        for color in &PALETTE[..3] {
            let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", color.0, color.1, color.2);
            assert!(svg.contains(&fill), "no bar filled with {fill}");
            let line = format!(
                "<polyline fill=\"none\" opacity=\"1\" stroke=\"#{:02X}{:02X}{:02X}\"",
                color.0, color.1, color.2
            );
            assert_eq!(svg.matches(&line).count(), 1, "a line joins the points (beyond the legend's swatch): {line}");
        }
        // The x axis reads the one x value, once; no lines join the points.
        assert_eq!(svg.lines().filter(|l| l.trim() == "25").count(), 1, "the x value labels the axis once");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_log_scale_axis_takes_the_counts_themselves_and_ticks_on_powers_of_ten() {
        let mut p = panel("log", vec![Series::new("cost", vec![(10.0, 1.0), (100.0, 2.0), (1600.0, 3.0), (0.0, 9.0)])]);
        p.x_unit = Unit::LogScaleCount;
        let drawn = on_drawn_scale(&p);
        assert_eq!(drawn.x_unit, Unit::Log10Count);
        let xs: Vec<f64> = drawn.series[0].points.iter().map(|p| p.0).collect();
        assert!((xs[0] - 1.0).abs() < 1e-12 && (xs[1] - 2.0).abs() < 1e-12, "{xs:?}");
        assert!(xs[3].is_nan(), "a zero has no place on a log scale");
        let labels: Vec<String> =
            ticks(Unit::Log10Count, &(1.0..1600f64.log10()), 6).iter().map(|&t| drawn.x_unit.format(t)).collect();
        assert_eq!(labels, ["10", "100", "1 k"]);
        // Drawing it works and reads in counts.
        let dir = scratch("log");
        let path = dir.join("log.svg");
        write_svg(&path, "t", 1, &[p]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.lines().any(|l| l.trim() == "1 k"), "no 1 k tick");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_caption_wider_than_its_panel_wraps_onto_more_lines() {
        let long = "25 Gbps: response over the normal plan (below 1: accelerated wins), and more words";
        register_font().unwrap();
        let lines = caption_lines(long).unwrap();
        assert!(lines.len() >= 2, "{lines:?}");
        for line in &lines {
            assert!(text_size(line, CAPTION_FONT_PX).unwrap().0 <= PANEL_SIZE.0 - 2 * PAD_PX, "{line}");
        }
        let dir = scratch("caption");
        let path = dir.join("caption.svg");
        write_svg(&path, "t", 2, &[panel(long, vec![series("a", 1.0)]), panel("short", vec![])]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for line in &lines {
            assert!(svg.contains(line.as_str()), "caption line {line} missing");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
