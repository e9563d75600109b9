//! P4DB's plans ([`Plan`]) as the harness's experiments ([`pisadb_harness::Experiment`]),
//! run by the one runner every system's experiments run on: N seeds in parallel, shared runs,
//! `--shard K/N` and `pisadb merge`.
//!
//! A plan's point is a full [`RunConfig`]; as data it becomes the variant its mode names and
//! the configuration's settings without the mode (what [`crate::system::P4db::config`] reads
//! back), with two annotations: the workload's name, and what the P4DB prototype measured at
//! the same configuration ([`prototype_point`]), which the CSV writes beside ours and the
//! charts draw dashed. Speedups are ratios of committed transactions per second to the
//! plan's baseline — the No-Switch point at the same panel and x, or for the ablation of
//! Fig. 15c the first step of its panel. Hot and cold throughput are figures derived from
//! each run ([`derived_figures`]), computed as [`RunResult`]'s own methods compute them, so the
//! CSV holds the same numbers as when P4DB ran its experiments itself.
//!
//! The `--set` keys P4DB's experiments take are its switch and concurrency-control choices
//! ([`super::EXPERIMENT_KEYS`]); the preset chooses PisaDB's model (`pisadb`) or the
//! prototype's testbed (`paper`, old name `p4db-testbed`). `reproduce p4db` runs every
//! experiment in three setups, each named `<setup>/<experiment>` ([`super::reproduce`]).

use super::{choices_from_sets, plan, prototype_point, Baseline, Chart as PlanChart, Options, Plan};
use crate::node::Cc;
use crate::system::without_mode;
use crate::RunResult;
use pisadb_harness::experiment::{Chart, Claim, Column, DerivedFigures, Experiment, Format, Point, Reference, Unit, Y};
use pisadb_harness::{ExperimentOptions, DEFAULT_PRESET};
use serde_json::{json, Value};

/// Seconds per microsecond: the results' latencies are in µs, the charts' time axes in seconds.
const S_PER_US: f64 = 1e-6;

/// Whether `preset` is P4DB's testbed, or an error naming the presets it has.
pub fn testbed_preset(preset: &str) -> Result<bool, String> {
    match preset {
        DEFAULT_PRESET => Ok(false),
        "paper" | "p4db-testbed" => Ok(true),
        other => Err(format!("P4DB has no preset `{other}`; its presets: pisadb, paper (old name p4db-testbed)")),
    }
}

/// The plans' options `options` ask for: quick or full, seeds, the preset's testbed, and the
/// concurrency control and switch choices of its `--set` keys.
pub fn plan_options(options: &ExperimentOptions) -> Result<Options, String> {
    let testbed = testbed_preset(&options.preset)?;
    let (cc, switch): (Cc, _) = choices_from_sets(&options.sets)?;
    Ok(Options { quick: options.quick, seed: options.seed, seeds: options.seeds, cc, switch, testbed, as_run: false })
}

/// Experiment `name` under `options` as data, its files `<file_stem>.csv` and `.svg`, checked
/// against `claims`.
pub fn experiment(
    name: super::Experiment,
    options: &Options,
    file_stem: String,
    claims: impl Fn(&Plan) -> Vec<Claim>,
) -> Experiment {
    let plan = plan(name, options);
    let mut e = as_experiment(&plan);
    e.file_stem = file_stem;
    e.claims = claims(&plan);
    let warnings = options.switch.warnings();
    e.notes = warnings.join("\n\n");
    e
}

/// `plan` as the harness's experiment (files `<experiment>.csv` and `.svg`, no claims).
pub fn as_experiment(plan: &Plan) -> Experiment {
    let name = plan.experiment.name();
    let mut e = Experiment::new("p4db", name, plan.title.clone(), &plan.x_label, plan.x_unit);
    e.file_stem = name.to_string();
    e.points = plan
        .points
        .iter()
        .map(|p| {
            let settings = without_mode(serde_json::to_value(&p.cfg).expect("a run configuration serializes"));
            let point = Point::new(p.panel.clone(), p.cfg.mode.name(), p.x, settings)
                .series(p.series.clone())
                .x_name(p.x_name.clone())
                .annotate("workload", p.cfg.workload.name());
            match prototype_point(plan.experiment, p) {
                Some(q) => point.annotate(
                    "prototype",
                    json!({
                        "committed_per_s": q.commits_per_s_mean,
                        "committed_per_s_sd": q.commits_per_s_sd,
                        "committed_per_s_best": q.commits_per_s_max,
                    }),
                ),
                None => point,
            }
        })
        .collect();
    e.columns = columns();
    e.charts = plan.charts.iter().map(|&c| chart(c)).collect();
    let mut panels: Vec<&str> = Vec::new();
    for p in &e.points {
        if !panels.contains(&p.panel.as_str()) {
            panels.push(&p.panel);
        }
    }
    e.chart_columns = panels.len().max(1);
    match plan.baseline {
        Baseline::Series(series) => e.baseline = Some(series.to_string()),
        Baseline::FirstOfPanel => e.baseline_first_of_panel = true,
    }
    e.derived_figures = Some(DerivedFigures(derived_figures));
    e.references = vec![Reference {
        name: "prototype",
        figure: "committed_per_s",
        mean: "prototype.committed_per_s",
        sd: Some("prototype.committed_per_s_sd"),
    }];
    e
}

/// Adds to a run's figures what P4DB's tables read besides them: committed hot and cold
/// transactions per second ([`RunResult::hot_committed_per_s`]) and the transactions committed
/// in the window (`committed`, for the simulator's speed).
fn derived_figures(figures: &mut Value) {
    let Ok(r) = serde_json::from_value::<RunResult>(figures.clone()) else { return };
    if let Value::Object(map) = figures {
        map.insert("hot_committed_per_s".into(), json!(r.hot_committed_per_s()));
        map.insert("cold_committed_per_s".into(), json!(r.cold_committed_per_s()));
        map.insert("committed".into(), json!(r.hot_committed + r.cold_committed));
    }
}

/// The CSV's columns after the harness's fixed ones, as P4DB's tables always had them.
fn columns() -> Vec<Column> {
    let fixed = |header, key, digits| Column::Figure { header, key, format: Format::Fixed(digits) };
    let reference = |header, key| Column::Reference { header, key, format: Format::Fixed(0) };
    vec![
        Column::XName { header: "x_name" },
        Column::Annotation { header: "workload", key: "workload" },
        Column::setting("workers"),
        fixed("committed_per_s", "committed_per_s", 0),
        Column::Ratio { header: "speedup", key: "committed_per_s", format: Format::Fixed(3) },
        fixed("hot_committed_per_s", "hot_committed_per_s", 0),
        fixed("cold_committed_per_s", "cold_committed_per_s", 0),
        fixed("abort_rate", "abort_rate", 4),
        fixed("latency_p50_us", "latency_us_p50", 2),
        fixed("latency_p99_us", "latency_us_p99", 2),
        fixed("latency_mean_us", "latency_us_mean", 2),
        fixed("retry_us", "latency_breakdown.retry_us", 2),
        fixed("lock_read_us", "latency_breakdown.lock_read_us", 2),
        fixed("commit_us", "latency_breakdown.commit_us", 2),
        fixed("switch_us", "latency_breakdown.switch_us", 2),
        fixed("other_us", "latency_breakdown.other_us", 2),
        fixed("switch_passes", "switch_passes", 0),
        fixed("recirculations", "recirculations", 0),
        fixed("switch_drops", "switch_drops", 0),
        Column::PerWallSecond { header: "sim_txn_per_wall_s", key: "committed" },
        reference("prototype_committed_per_s", "prototype.committed_per_s"),
        reference("prototype_committed_per_s_sd", "prototype.committed_per_s_sd"),
        reference("prototype_committed_per_s_best", "prototype.committed_per_s_best"),
        Column::ReferenceRatio {
            header: "prototype_speedup",
            key: "prototype.committed_per_s",
            format: Format::Fixed(3),
        },
    ]
}

/// What a plan's chart draws, as the harness's chart.
fn chart(c: PlanChart) -> Chart {
    let (y_label, y_unit) = (c.label().to_string(), c.unit());
    let y = match c {
        PlanChart::Speedup => Y::Ratio { key: "committed_per_s" },
        PlanChart::Throughput => Y::Figure { key: "committed_per_s", scale: 1.0 },
        PlanChart::MeanLatency => Y::Figure { key: "latency_us_mean", scale: S_PER_US },
        PlanChart::HotCold => {
            Y::Parts { parts: vec![("hot", "hot_committed_per_s"), ("cold", "cold_committed_per_s")], scale: 1.0 }
        }
        PlanChart::LatencyBreakdown => Y::Stack {
            parts: vec![
                ("retries", "latency_breakdown.retry_us"),
                ("lock + read", "latency_breakdown.lock_read_us"),
                ("2PC vote", "latency_breakdown.commit_us"),
                ("switch", "latency_breakdown.switch_us"),
                ("other", "latency_breakdown.other_us"),
            ],
            scale: S_PER_US,
        },
    };
    Chart { y_label, y_unit: if matches!(y, Y::Ratio { .. }) { Unit::Ratio } else { y_unit }, y }
}
