//! NetAccel's experiments (seed 002 §4.1) as data: the runs of Fig. 7, Tables 1–2, Fig. 8
//! and a scale-factor sweep, which the harness's runner runs under N seeds and writes as CSV,
//! SVG and `pisadb reproduce netaccel`'s report, whose claims table puts ours beside the
//! paper's figures ([`PAPER_TABLE1`], [`PAPER_TABLE2`], Fig. 7's 2.04×).
//!
//! - **Fig. 7** (`fig7`): pattern 1, normal plan vs accelerated plan at 25 Gbps, in the paper's
//!   split (2 join and 2 group-by positions), in the split with the least overflow (5×1) and
//!   in the split the master's scheduler picks.
//! - **Tables 1–2** (`overflow`): overflow for every split the paper lists (J join positions,
//!   G group-by positions: 1×1 … 5×1), by type, and whether the control plane's one core kept
//!   up (the longest an overflow tuple waited).
//! - **Fig. 8** (`fig8`): the whole of Q20 at 10, 25, 50 and 100 Gbps: orig (Greenplum's own
//!   plan), normal, accelerated 2×2 and 5×1 (both patterns in the switch), with the lower
//!   bound of the accelerated plan (the busiest segment's tuple bytes ÷ the link rate) as a
//!   figure of every run (`lower_bound_ms`).
//! - `sf-sweep`: pattern 1's overflow and speedup as data grows.
//!
//! The full run uses SF 1, `--quick` SF 0.1 (the paper ran SF 100: our switch tables scale
//! with the scale factor to keep its load factors). The seed only moves the segments' start
//! offsets within a microsecond. Every answer is checked against the plain reference
//! (`answer_ok` in every CSV).

use crate::rack::RackConfig;
use crate::wire::MSG_BYTES;
use pisadb_harness::experiment::{Chart, Claim, Column, Experiment, Format, Holds, Measure, Point, Unit};
use pisadb_harness::{ExperimentName, ExperimentOptions, Reproduction};
use pisadb_olap::tpch::{distribute, Q20Data};
use serde_json::Value;

/// The experiments `pisadb sweep --system netaccel` runs.
pub const EXPERIMENTS: &[ExperimentName] = &[
    ExperimentName { name: "fig7", summary: "pattern 1, normal vs accelerated plan at 25 Gbps (Fig. 7)" },
    ExperimentName { name: "overflow", summary: "overflow by type for every J x G split with J + G <= 6 (Tables 1-2)" },
    ExperimentName {
        name: "fig8",
        summary: "the whole Q20 against the link rate: orig, normal, accelerated 2x2 and 5x1, lower bound (Fig. 8)",
    },
    ExperimentName { name: "sf-sweep", summary: "overflow and speedup as the scale factor grows" },
];

/// The paper's Table 1 (overall overflow %), by (J, G).
pub const PAPER_TABLE1: &[((u8, u8), f64)] = &[
    ((1, 1), 49.5),
    ((1, 2), 49.3),
    ((1, 3), 49.2),
    ((1, 4), 49.2),
    ((1, 5), 49.1),
    ((2, 1), 23.5),
    ((2, 2), 23.4),
    ((2, 3), 23.3),
    ((2, 4), 23.2),
    ((3, 1), 9.33),
    ((3, 2), 9.21),
    ((3, 3), 9.09),
    ((4, 1), 3.58),
    ((4, 2), 3.46),
    ((5, 1), 1.62),
];

/// The paper's Table 2 ((i), (ii), (iii) %), by (J, G).
pub const PAPER_TABLE2: &[((u8, u8), [f64; 3])] = &[
    ((1, 5), [51.1, 49.0, 0.07]),
    ((2, 4), [21.3, 22.7, 0.38]),
    ((3, 3), [7.36, 8.45, 0.65]),
    ((4, 2), [2.16, 2.64, 0.82]),
    ((5, 1), [0.52, 0.67, 0.96]),
];

/// Bytes a tuple datagram takes on a wire (payload, frame, Ethernet/IP/UDP overhead).
pub fn tuple_wire_bytes() -> u64 {
    ((MSG_BYTES + pisadb_wire::FRAME_BYTES) as u64 + pisadb_net::WIRE_OVERHEAD_BYTES).max(pisadb_net::WIRE_MIN_BYTES)
}

/// The lower bound of Q20's accelerated plan at `gbps`: the busiest segment's tuples (its
/// three streams) on its link, in ms.
pub fn lower_bound_ms(data: &Q20Data, segments: u16, gbps: f64) -> f64 {
    let busiest = distribute(data, usize::from(segments))
        .iter()
        .map(|s| (s.part_fp.rows() + s.lineitem_fp.rows() + s.partsupp.rows()) as u64)
        .max()
        .unwrap_or(0);
    (busiest * tuple_wire_bytes() * 8) as f64 / gbps / 1e6
}

/// The settings every point starts from: the preset's `base` at SF 0.1 (`quick`) or SF 1.
fn base(base: &Value, options: &ExperimentOptions) -> Result<RackConfig, String> {
    let cfg = crate::system::rack_config(base)?;
    Ok(RackConfig { sf: if options.quick { 0.1 } else { 1.0 }, seed: options.seed, ..cfg })
}

/// The settings of a point: `cfg` with the preset's costs kept.
fn settings(base: &Value, cfg: &RackConfig) -> Result<Value, String> {
    let mut v = serde_json::to_value(cfg).map_err(|e| e.to_string())?;
    if let (Value::Object(map), Some(costs)) = (&mut v, base.get("costs")) {
        map.insert("costs".into(), costs.clone());
    }
    Ok(v)
}

/// The CSV columns of every experiment.
fn columns() -> Vec<Column> {
    let mut c: Vec<Column> =
        ["sf", "join_positions", "group_positions", "link_gbps", "schedule_split"].map(Column::setting).to_vec();
    c.push(Column::fixed("response_ms", 4));
    c.push(Column::Ratio { header: "response_over_baseline", key: "response_ms", format: Format::Fixed(4) });
    c.extend([("split_j", "split.0"), ("split_g", "split.1")].map(|(header, key)| Column::Figure {
        header,
        key,
        format: Format::Plain,
    }));
    c.push(Column::fixed("overflow_pct_total", 3));
    c.extend(
        [
            ("overflow_pct_i", "overflow_pct.0"),
            ("overflow_pct_ii", "overflow_pct.1"),
            ("overflow_pct_iii", "overflow_pct.2"),
        ]
        .map(|(header, key)| Column::Figure { header, key, format: Format::Fixed(3) }),
    );
    c.push(Column::fixed("control_plane_backlog_ms", 4));
    c.push(Column::fixed("lower_bound_ms", 4));
    c.extend(["answer_ok", "answer_rows", "groups", "passes", "events"].map(Column::figure));
    c.push(Column::Text { header: "trace_hash", key: "trace_hash" });
    c
}

/// Experiment `name` as data, from the preset's settings `base`.
pub fn experiment(name: &str, base_settings: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
    let base = self::base(base_settings, options)?;
    let mut points = Vec::new();
    let mut add = |panel: &str, series: &str, variant: &str, x: f64, cfg: RackConfig| -> Result<(), String> {
        points.push(Point::new(panel, variant, x, settings(base_settings, &cfg)?).series(series));
        Ok(())
    };
    let response = Chart::figure("response_ms", 1e-3, "response time", Unit::Seconds);
    let split = |j: u8, g: u8| RackConfig { join_positions: j, group_positions: g, ..base.clone() };
    let (title, x_label, x_unit, charts, baseline, claims) = match name {
        "fig7" => {
            let panel = "pattern 1 at 25 Gbps";
            add(panel, "normal", "normal", 25.0, base.clone())?;
            add(panel, "accelerated 2×2", "accelerated", 25.0, split(2, 2))?;
            add(panel, "accelerated 5×1", "accelerated", 25.0, split(5, 1))?;
            let scheduled = RackConfig { schedule_split: true, ..split(2, 2) };
            add(panel, "accelerated, scheduler's split", "accelerated", 25.0, scheduled)?;
            let claim = Claim::ratio(
                "pattern 1 (Greenplum, 3 segments, SF 100, 2×2): the accelerated plan ran 2.04× faster (its response over the normal plan's: 1/2.04)",
                "Fig. 7, §4.1",
                1.0 / 2.04,
                Measure::ratio(panel, "accelerated 2×2", "normal", 25.0, "response_ms"),
            );
            (
                "NetAccel Fig. 7: pattern 1, normal vs accelerated plan at 25 Gbps",
                "link rate, Gbit/s",
                Unit::Count,
                vec![response],
                "normal",
                vec![claim],
            )
        }
        "overflow" => {
            let mut claims = Vec::new();
            for &((j, g), paper_total) in PAPER_TABLE1 {
                let panel = format!("G = {g}");
                add(&panel, "accelerated", "accelerated", f64::from(j), split(j, g))?;
                let near = |paper: f64| Holds::Within(paper * 0.5, paper * 1.5);
                let value =
                    |key| Measure::Value { panel: panel.clone(), series: "accelerated".into(), x: f64::from(j), key };
                claims.push(Claim {
                    words: format!("overall overflow at J×G = {j}×{g} (within ±50% of the paper's)"),
                    source: "Table 1".into(),
                    paper: Some(paper_total),
                    ours: value("overflow_pct_total"),
                    holds: near(paper_total),
                    reason: None,
                });
                if let Some((_, paper)) = PAPER_TABLE2.iter().find(|p| p.0 == (j, g)) {
                    for (k, (kind, key)) in
                        [("(i)", "overflow_pct.0"), ("(ii)", "overflow_pct.1"), ("(iii)", "overflow_pct.2")]
                            .into_iter()
                            .enumerate()
                    {
                        claims.push(Claim {
                            words: format!("overflow {kind} at J×G = {j}×{g} (within ±50% of the paper's)"),
                            source: "Table 2".into(),
                            paper: Some(paper[k]),
                            ours: value(key),
                            holds: near(paper[k]),
                            reason: None,
                        });
                    }
                }
            }
            let overflow = Chart::figure("overflow_pct_total", 1.0, "overall overflow", Unit::Percent);
            let backlog =
                Chart::figure("control_plane_backlog_ms", 1e-3, "control plane's longest wait", Unit::Seconds);
            (
                "NetAccel Tables 1-2: overflow by split (J join × G group-by positions)",
                "join positions J",
                Unit::Integer,
                vec![overflow, backlog],
                "",
                claims,
            )
        }
        "fig8" => {
            for gbps in [10.0, 25.0, 50.0, 100.0] {
                let cfg = RackConfig { link_gbps: gbps, query: crate::hosts::Query::Q20, ..base.clone() };
                add("Q20", "orig", "orig", gbps, cfg.clone())?;
                add("Q20", "normal", "normal", gbps, cfg.clone())?;
                add("Q20", "accelerated 2×2", "accelerated", gbps, cfg.clone())?;
                add(
                    "Q20",
                    "accelerated 5×1",
                    "accelerated",
                    gbps,
                    RackConfig { join_positions: 5, group_positions: 1, ..cfg },
                )?;
            }
            let bound = Chart::figure("lower_bound_ms", 1e-3, "accelerated plan's lower bound", Unit::Seconds);
            (
                "NetAccel Fig. 8: the whole of Q20 by link rate",
                "link rate, Gbit/s",
                Unit::Count,
                vec![response, bound],
                "normal",
                vec![],
            )
        }
        "sf-sweep" => {
            let sfs: &[f64] = if options.quick { &[0.01, 0.05, 0.1] } else { &[0.01, 0.1, 0.3, 1.0] };
            for &sf in sfs {
                let cfg = RackConfig { sf, ..base.clone() };
                add("pattern 1, 25 Gbps, 2×2", "normal", "normal", sf, cfg.clone())?;
                add("pattern 1, 25 Gbps, 2×2", "accelerated", "accelerated", sf, cfg)?;
            }
            let speedup = Chart {
                y_label: "response over the normal plan's".into(),
                y_unit: Unit::Ratio,
                y: pisadb_harness::experiment::Y::Ratio { key: "response_ms" },
            };
            (
                "NetAccel: pattern 1 against the scale factor",
                "TPC-H scale factor",
                Unit::Count,
                vec![response, speedup],
                "normal",
                vec![],
            )
        }
        other => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            return Err(format!("no NetAccel experiment `{other}`; accepted: {}", names.join(", ")));
        }
    };
    let name = EXPERIMENTS.iter().find(|e| e.name == name).map_or("", |e| e.name);
    let mut e = Experiment::new("netaccel", name, title, x_label, x_unit);
    e.points = points;
    e.charts = charts;
    e.chart_columns = 2;
    e.columns = columns();
    e.baseline = (!baseline.is_empty()).then(|| baseline.to_string());
    e.claims = claims;
    Ok(e)
}

/// What `pisadb reproduce netaccel` runs and says.
pub fn reproduction(base_settings: &Value, options: &ExperimentOptions) -> Reproduction {
    let b = base(base_settings, options).unwrap_or_default();
    let mut notes = String::new();
    differences(&mut notes);
    Reproduction {
        title: "NetAccel (seed 002) on PisaDB: our figures beside the paper's".into(),
        intro: format!(
            "`pisadb reproduce netaccel{}`. TPC-H SF {} (the paper: SF 100; switch tables scale with SF to keep its \
             load factors: 2^17 join and 2^16 group slots per position at SF 100), {} segments, one core each, a \
             Tofino 1, host links at {} Gbps unless stated, the control plane behind a {} Gbps CPU port with one \
             core. Every answer was checked against the plain reference (`answer_ok`). Fig. 8's accelerated plans \
             run patterns 1 and 2 in the switch (reloading); the paper's shape: normal (and orig) flat across link \
             rates, the accelerated plan improving from 10 to 25 Gbps, then little, because its deparse operator \
             plateaus at 29 Gbps.",
            if options.quick { " --quick" } else { "" },
            b.sf,
            b.segments,
            b.link_gbps,
            b.control_plane_gbps
        ),
        experiments: EXPERIMENTS.iter().map(|e| e.name).collect(),
        notes,
    }
}

/// Why our speedups differ from the paper's, from the calibrated costs and the wire model.
fn differences(md: &mut String) {
    use std::fmt::Write as _;
    let c = crate::calibration::CpuCosts::MEASURED;
    let wire_ns = |gbps: f64| (tuple_wire_bytes() * 8) as f64 / gbps;
    let cp_ns = c.stack_ns_per_datagram + c.control_plane_ns_per_tuple;
    let _ = writeln!(md, "## Where we differ from the paper, and why\n");
    let _ = writeln!(
        md,
        "- **The accelerated plan is slower here.** Our segments' executor joins `lineitem_FP` with `part_FP` \
         at {:.1} ns per row (and aggregates the few joined rows at {:.1} ns), measured; the accelerated plan \
         must put every `lineitem_FP` tuple on the wire, {} bytes a datagram, {:.1} ns at 25 Gbps and {:.1} \
         ns at 100 Gbps, and deparse it ({:.1} ns). A plan whose per-row cost is below a tuple's wire time \
         cannot be beaten by streaming the tuples, whatever the switch does. The paper's normal plan ran on \
         Greenplum, whose per-row cost is far higher (its Fig. 8 puts Q20 at seconds at SF 100); \
         `systems/netaccel/RESULTS.md` times DuckDB and our executor on the same pattern on this machine.",
        c.join_probe_ns_per_row,
        c.aggregate_ns_per_row,
        tuple_wire_bytes(),
        wire_ns(25.0),
        wire_ns(100.0),
        c.deparse_ns_per_tuple
    );
    let _ = writeln!(
        md,
        "- **The control plane is the bottleneck at 2×2.** Each overflow tuple costs its one core {:.0} ns \
         (stack {:.0} + join or aggregation {:.1}, measured): at most {:.1} M tuples/s, against {:.1} M \
         tuples/s of 92-byte datagrams that its 10 Gbps port carries and the ~22% of the inner stream that \
         overflows at J = 2. With 4 or 5 join positions the overflow falls to 1-3% and one core keeps up, as \
         the paper says.",
        cp_ns,
        c.stack_ns_per_datagram,
        c.control_plane_ns_per_tuple,
        1e3 / cp_ns,
        1e3 / wire_ns(10.0)
    );
    let _ = writeln!(
        md,
        "- **Overflow matches.** The join's overflow depends only on the load factor, which our table sizes \
         keep (2^17 join slots per position for SF 100's ~217k `part_FP` keys); at SF 1 our Tables 1-2 are \
         within a few tenths of a point to about one point of the paper's. At SF 0.1 the sample of `part_FP` \
         keys is small (190 for 131 slots, a load factor of 1.45 instead of 1.66) and the join overflows \
         less.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_harness::System;

    #[test]
    fn every_experiment_has_points_and_its_claims_name_them() {
        let options = ExperimentOptions::new(true, 1, "/nonexistent");
        let defaults = crate::system::SYSTEM.default_settings();
        for e in EXPERIMENTS {
            let experiment = experiment(e.name, &defaults, &options).unwrap();
            assert!(!experiment.points.is_empty(), "{}", e.name);
            for claim in &experiment.claims {
                let found = match &claim.ours {
                    Measure::Value { panel, series, x, .. } => experiment.find(panel, series, *x).is_some(),
                    Measure::Ratio { panel, series, over, x, .. } => {
                        experiment.find(panel, series, *x).is_some() && experiment.find(panel, over, *x).is_some()
                    }
                };
                assert!(found, "{}: {claim:?}", e.name);
            }
        }
        assert_eq!(
            experiment("overflow", &defaults, &options).unwrap().claims.len(),
            PAPER_TABLE1.len() + 3 * PAPER_TABLE2.len()
        );
    }
}
