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
//! - `breakeven`: pattern 1's normal plan against the accelerated plan at J = 2..5 join
//!   positions (G = 2), across the executor's join cost per row (the x axis, from 10 ns to a
//!   row-at-a-time executor's µs, with the three measured classes among the points) and link
//!   rates of 10, 25 and 100 Gbps: where the accelerated plan wins is where its line lies
//!   below the normal plan's. Every other cost is the preset's.
//! - `stack-sweep`: the assumed per-datagram stack cost (the paper states none) from 0 to
//!   800 ns, normal vs accelerated 2×2 and 5×1 at 25 Gbps: what the result depends on it.
//!
//! The full run uses SF 1, `--quick` SF 0.1 (the paper ran SF 100: our switch tables scale
//! with the scale factor to keep its load factors). The seed only moves the segments' start
//! offsets within a microsecond. Every answer is checked against the plain reference
//! (`answer_ok` in every CSV).

use crate::calibration::CpuCosts;
use crate::layout::JOIN_SLOTS_SF100;
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
    ExperimentName {
        name: "breakeven",
        summary: "normal vs accelerated (J = 2..5) across the executor's join ns/row and 10/25/100 Gbps links",
    },
    ExperimentName {
        name: "stack-sweep",
        summary: "the assumed per-datagram stack cost from 0 to 800 ns, normal vs accelerated 2x2 and 5x1",
    },
];

/// The join costs per row `breakeven` runs: a grid from a vectorised executor's tens of ns to
/// a row-at-a-time executor's µs, with the three measured classes and the preset's own.
pub fn breakeven_join_ns(preset: &CpuCosts) -> Vec<f64> {
    let mut xs = vec![10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0];
    xs.extend(
        [CpuCosts::MEASURED, CpuCosts::OURS_SF100, CpuCosts::ROW_AT_A_TIME, *preset].map(|c| c.join_probe_ns_per_row),
    );
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

/// The stack costs per datagram `stack-sweep` runs, ns.
pub const STACK_SWEEP_NS: [f64; 6] = [0.0, 100.0, 200.0, 300.0, 500.0, 800.0];

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

/// The settings of a point: `cfg`, its costs written out (the preset's, or a sweep's).
fn settings(cfg: &RackConfig) -> Result<Value, String> {
    let mut v = serde_json::to_value(cfg).map_err(|e| e.to_string())?;
    if let Value::Object(map) = &mut v {
        map.insert("costs".into(), serde_json::to_value(cfg.costs).map_err(|e| e.to_string())?);
    }
    Ok(v)
}

/// The model's reason, in one sentence, when Fig. 7's claim does not hold under `costs`.
fn fig7_reason(costs: &CpuCosts) -> String {
    format!(
        "the executor joins a row in {:.1} ns, less than the 2×2 accelerated plan spends per segment row \
         (~{:.0} ns: three segments' ~22% overflow through one control-plane core at {:.0} ns a tuple), so \
         streaming every tuple through the switch cannot win",
        costs.join_probe_ns_per_row,
        accelerated_bound_ns(costs, INNER_OVERFLOW_SF1[0].1),
        costs.stack_ns_per_datagram + costs.control_plane_ns_per_tuple
    )
}

/// The model's reason, in one sentence, when an overflow claim at `j` join positions
/// (`kind`: "overall", "(i)", "(ii)", "(iii)") does not hold at scale factor `sf`, where
/// `part_FP` has `part_keys` keys.
fn overflow_reason(j: u8, kind: &str, sf: f64, part_keys: usize) -> String {
    let keys = part_keys as f64;
    let slots = (JOIN_SLOTS_SF100 * sf / 100.0).round();
    if j >= 5 && (kind == "(i)" || kind == "(ii)") {
        format!(
            "with {j} positions a key overflows only from a slot holding {} or more, a Poisson tail of the \
             load factor that our CRC32 index makes rarer than the paper's (0.19% of `part_FP` at SF 1; {keys} \
             keys in {slots} slots here)",
            j + 1
        )
    } else {
        format!(
            "the join's overflow depends on the load factor: {keys} `part_FP` keys in {slots} slots at SF {sf} \
             ({:.2}, SF 100's is 1.66) leave the tail beyond {j} positions shorter than the paper's",
            keys / slots
        )
    }
}

/// The accelerated plan's bound per `lineitem_FP` row of a segment under `costs` at 25 Gbps
/// with a 10 Gbps CPU port, when `inner_share` of the inner stream overflows: the slowest of
/// the deparse, the wire, and three segments' overflow through one control-plane core and port.
fn accelerated_bound_ns(costs: &CpuCosts, inner_share: f64) -> f64 {
    let wire_ns = |gbps: f64| (tuple_wire_bytes() * 8) as f64 / gbps;
    let segments = 3.0;
    let cp_ns = costs.stack_ns_per_datagram + costs.control_plane_ns_per_tuple;
    [costs.deparse_ns_per_tuple, wire_ns(25.0), segments * inner_share * cp_ns, segments * inner_share * wire_ns(10.0)]
        .into_iter()
        .fold(0.0, f64::max)
}

/// A chart of each plan's response over the normal plan's, labelled `y_label`.
fn speedup_chart(y_label: &str) -> Chart {
    Chart {
        y_label: y_label.into(),
        y_unit: Unit::Ratio,
        y: pisadb_harness::experiment::Y::Ratio { key: "response_ms" },
    }
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
        points.push(Point::new(panel, variant, x, settings(&cfg)?).series(series));
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
            )
            .because(fig7_reason(&base.costs));
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
            // `part_FP`'s keys at this scale factor, for the reasons (the runs generate the same data).
            let part_keys = crate::system::data(base.sf)?.part_fp.rows();
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
                    reason: Some(overflow_reason(j, "overall", base.sf, part_keys)),
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
                            reason: Some(overflow_reason(j, kind, base.sf, part_keys)),
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
            let speedup = speedup_chart("response over the normal plan's");
            (
                "NetAccel: pattern 1 against the scale factor",
                "TPC-H scale factor",
                Unit::Count,
                vec![response, speedup],
                "normal",
                vec![],
            )
        }
        "breakeven" => {
            for gbps in [10.0, 25.0, 100.0] {
                let panel = format!("{gbps} Gbps");
                for join_ns in breakeven_join_ns(&base.costs) {
                    let costs = CpuCosts { join_probe_ns_per_row: join_ns, ..base.costs };
                    let cfg = RackConfig { link_gbps: gbps, costs, ..base.clone() };
                    add(&panel, "normal", "normal", join_ns, cfg.clone())?;
                    for j in 2..=5 {
                        let accelerated = RackConfig { join_positions: j, group_positions: 2, ..cfg.clone() };
                        add(&panel, &format!("accelerated {j}×2"), "accelerated", join_ns, accelerated)?;
                    }
                }
            }
            let speedup = speedup_chart("response over the normal plan's");
            (
                "NetAccel break-even: pattern 1 by the executor's join cost, link rate and join positions J \
                 (a response over the normal plan's below 1: the accelerated plan wins)",
                "executor's join cost, ns per probe row (log scale)",
                Unit::LogScaleCount,
                vec![response, speedup],
                "normal",
                vec![],
            )
        }
        "stack-sweep" => {
            let panel = "pattern 1 at 25 Gbps";
            for stack_ns in STACK_SWEEP_NS {
                let costs = CpuCosts { stack_ns_per_datagram: stack_ns, ..base.costs };
                let cfg = RackConfig { costs, ..base.clone() };
                add(panel, "normal", "normal", stack_ns, cfg.clone())?;
                add(panel, "accelerated 2×2", "accelerated", stack_ns, RackConfig { costs, ..split(2, 2) })?;
                add(panel, "accelerated 5×1", "accelerated", stack_ns, RackConfig { costs, ..split(5, 1) })?;
            }
            let speedup = speedup_chart("response over the normal plan's");
            (
                "NetAccel: pattern 1 against the assumed stack cost per datagram",
                "stack cost, ns per datagram",
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

/// What `pisadb reproduce netaccel` runs and says, under the preset whose settings are
/// `base_settings`.
pub fn reproduction(base_settings: &Value, options: &ExperimentOptions) -> Reproduction {
    let b = base(base_settings, options).unwrap_or_default();
    let mut notes = String::new();
    differences(&mut notes, &b.costs, &options.preset);
    Reproduction {
        title: "NetAccel (seed 002) on PisaDB: our figures beside the paper's".into(),
        intro: format!(
            "`pisadb reproduce netaccel{} --preset {}`. TPC-H SF {} (the paper: SF 100; switch tables scale with SF \
             to keep its load factors: 2^17 join and 2^16 group slots per position at SF 100, the largest arrays \
             within the 60% of a stage's SRAM the paper states, see CALIBRATION.md), {} segments, one core each, a \
             Tofino 1, host links at {} Gbps unless stated, the control plane behind a {} Gbps CPU port with one \
             core. The segments' executor joins at {:.1} ns per probe row ({}). Every answer was checked against \
             the plain reference (`answer_ok`). Fig. 8's accelerated plans run patterns 1 and 2 in the switch \
             (reloading); the paper's shape: normal (and orig) flat across link rates, the accelerated plan \
             improving from 10 to 25 Gbps, then little, because its deparse operator plateaus at 29 Gbps.",
            if options.quick { " --quick" } else { "" },
            options.preset,
            b.sf,
            b.segments,
            b.link_gbps,
            b.control_plane_gbps,
            b.costs.join_probe_ns_per_row,
            executor_class(&b.costs),
        ),
        experiments: EXPERIMENTS.iter().map(|e| e.name).collect(),
        notes,
    }
}

/// Which measured executor class `costs` charges, in words.
fn executor_class(costs: &CpuCosts) -> &'static str {
    let join = costs.join_probe_ns_per_row;
    if join == CpuCosts::ROW_AT_A_TIME.join_probe_ns_per_row {
        "a row-at-a-time executor: PostgreSQL 15's sequential scan and hash join at SF 100's build size, measured \
         on this machine, the class of the paper's Greenplum"
    } else if join == CpuCosts::OURS_SF100.join_probe_ns_per_row {
        "our vectorised executor at SF 100's build size, measured"
    } else if join == CpuCosts::MEASURED.join_probe_ns_per_row {
        "our vectorised executor at SF 0.1, measured: the hash table sits in L1"
    } else {
        "set by hand"
    }
}

/// Overflow to the control plane as a share of the inner stream, (ii) + (iii), at SF 1 in
/// the `overflow` experiment (RESULTS.md): 2×2 and 5×1. Used only to explain, never charged.
const INNER_OVERFLOW_SF1: [(&str, f64); 2] = [("2×2", 0.2256), ("5×1", 0.0125)];

/// Why our speedups differ from the paper's, from `costs` (the preset's) and the wire model:
/// each plan's bound per `lineitem_FP` row of a segment.
fn differences(md: &mut String, c: &CpuCosts, preset: &str) {
    use std::fmt::Write as _;
    let wire_ns = |gbps: f64| (tuple_wire_bytes() * 8) as f64 / gbps;
    let cp_ns = c.stack_ns_per_datagram + c.control_plane_ns_per_tuple;
    let accelerated_bound = |share: f64| accelerated_bound_ns(c, share);
    let _ = writeln!(md, "## Where we differ from the paper, and why (preset `{preset}`)\n");
    let _ = writeln!(
        md,
        "- **Per `lineitem_FP` row of a segment, the model predicts the plans' order.** The normal plan joins \
         each row at {:.1} ns ({}). The accelerated plan deparses it ({:.1} ns), puts it on the wire ({} bytes a \
         datagram: {:.1} ns at 25 Gbps, {:.1} ns at 100 Gbps), and the share that overflows meets, from all three \
         segments, one control-plane core at {:.0} ns a tuple (stack {:.0} assumed + join or aggregation {:.1} \
         measured) behind a {:.1} ns-per-datagram 10 Gbps port. The slowest of these bounds the accelerated \
         plan: {}. So the accelerated plan wins where the executor's join costs more than that bound per row, \
         and loses below it; the `breakeven` chart draws the crossing for every J and link rate.",
        c.join_probe_ns_per_row,
        executor_class(c),
        c.deparse_ns_per_tuple,
        tuple_wire_bytes(),
        wire_ns(25.0),
        wire_ns(100.0),
        cp_ns,
        c.stack_ns_per_datagram,
        c.control_plane_ns_per_tuple,
        wire_ns(10.0),
        INNER_OVERFLOW_SF1
            .iter()
            .map(|(split, share)| {
                let bound = accelerated_bound(*share);
                format!(
                    "at {split} ({:.1}% of the inner stream overflows at SF 1) {bound:.1} ns a row, a predicted speedup \
                     of about {:.2}×",
                    100.0 * share,
                    c.join_probe_ns_per_row / bound
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    let bound_2x2 = accelerated_bound(INNER_OVERFLOW_SF1[0].1);
    let classes = [
        ("our vectorised executor at SF 0.1", CpuCosts::MEASURED.join_probe_ns_per_row),
        ("our vectorised executor at SF 100's build size", CpuCosts::OURS_SF100.join_probe_ns_per_row),
        (
            "the row-at-a-time class of the paper's Greenplum (PostgreSQL, measured here)",
            CpuCosts::ROW_AT_A_TIME.join_probe_ns_per_row,
        ),
    ];
    let verdicts: Vec<String> = classes
        .iter()
        .map(|(class, join)| {
            let verdict = if *join > bound_2x2 { "wins" } else { "loses" };
            format!("with {class} ({join:.1} ns) the accelerated plan {verdict}")
        })
        .collect();
    let _ = writeln!(
        md,
        "- **Fig. 7's claim (2.04× at 2×2).** Its direction holds exactly when the executor's join costs more per \
         row than the accelerated plan's 2×2 bound ({bound_2x2:.1} ns under these tuple-path costs): {}. At 2×2 \
         the control plane's one core, not the switch, sets that bound, so the `stack-sweep` experiment shows \
         the 2×2 result moving with the assumed stack cost, while 5×1 (overflow 1-3%: one core keeps up, as the \
         paper says) is bound by the wire and barely moves.",
        verdicts.join("; ")
    );
    let _ = writeln!(
        md,
        "- **Overflow (Tables 1-2).** The join's overflow depends only on the load factor, which our table sizes \
         keep (2^17 join slots per position for SF 100's ~217k `part_FP` keys: the largest power-of-two array in \
         60% of a stage's SRAM, which is also what Table 2's level implies, so the *level* rests on that \
         assumption and only the trend in J is a result); at SF 1 our Tables 1-2 are within a few tenths of a \
         point to about one point of the paper's. A claim not held at SF 0.1 (`--quick`) fails for the sample: \
         `part_FP` has 190 keys for 131 slots there, a load factor of 1.45 instead of 1.66, so the join \
         overflows less, most visibly in the small shares at 4-5 join positions. With 5 positions a key \
         overflows only from a slot holding 6 or more, a Poisson tail at load 1.6 that our CRC32 index gives \
         at 0.19% of `part_FP` at SF 1 against the paper's 0.52% (a less uniform hash or key set there is our \
         reading, not a finding) and at 0% at SF 0.1, where no slot holds 6.\n"
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
                    Measure::Value { panel, series, x, .. } | Measure::Speedup { panel, series, x, .. } => {
                        experiment.find(panel, series, *x).is_some()
                    }
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
