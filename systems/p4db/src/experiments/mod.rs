//! The P4DB paper's experiments as data, and the runs and report made of them.
//!
//! An experiment is a list of simulated points ([`PointSpec`]): a full [`RunConfig`] plus the
//! labels that place its result in a figure (panel, series, x). Nothing here runs anything:
//! [`data`] turns a [`Plan`] into the harness's experiment data, which the harness's one
//! runner runs for `pisadb sweep` (one experiment) and `pisadb reproduce` (all of them, in
//! three setups: [`reproduce`]), so a figure means the same thing whichever command drew it,
//! and `--seeds`, `--shard K/N` and `pisadb merge` work as for every system.
//!
//! The charts an experiment draws ([`Chart`]) are computed from the results by label: a
//! speedup divides a point's throughput by its baseline's — the point with the same panel and
//! x in the series [`Plan::baseline`] names, or, for an ablation, the first point of the panel.
//!
//! Sizes follow the paper's setup (§7.1–7.2: 8 nodes, 8 to 20 workers per node, YCSB with 50
//! hot keys per node and 75% hot transactions, SmallBank with 5/10/15 hot accounts per node and
//! 90% hot, TPC-C with 8/16/32 warehouses, 20% distributed unless swept) at simulated windows of
//! a few milliseconds. `--quick` keeps the shape of every figure with fewer points and shorter
//! windows.

pub mod data;
pub mod reproduce;

use crate::node::{Cc, Mode};
use crate::paper::PrototypePoint;
use crate::programs::p4db::{FineLocks, P4dbConfig, RecirculationModel};
use crate::testbed;
use crate::{LayoutChoice, RunConfig, WorkloadSpec};
use pisadb_report::Unit;
use pisadb_switch::SwitchProfile;
use pisadb_workload::{SmallBankConfig, TpccConfig, YcsbConfig, YcsbMix};

/// The experiments, named as on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Experiment {
    /// YCSB A/B/C: speedup over No-Switch as workers per node grow (paper Fig. 11, upper row).
    YcsbWorkers,
    /// YCSB: speedup as the share of distributed transactions grows (Fig. 11, lower row).
    YcsbRemote,
    /// YCSB: committed hot and cold transactions per second by system (Fig. 12).
    YcsbBreakdown,
    /// YCSB A and C: throughput as the share of hot transactions grows (Fig. 15a/b).
    YcsbHot,
    /// SmallBank with 5/10/15 hot accounts per node: speedup by workers (Fig. 13, upper row).
    SmallbankWorkers,
    /// SmallBank: speedup by share of distributed transactions (Fig. 13, lower row).
    SmallbankRemote,
    /// TPC-C with 8/16/32 warehouses: speedup by workers, 20% distributed (Fig. 14, upper row).
    TpccWorkers,
    /// TPC-C: speedup by remote item / remote customer probability (Fig. 14, lower row).
    TpccRemote,
    /// Hot YCSB-A on P4DB, 4 nodes as in the paper: random layout without optimizations, then fast recirculation,
    /// fine-grained locks, and the declustered layout added one at a time (Fig. 15c).
    SwitchOptimizations,
    /// Throughput and mean latency under the declustered and a random layout, YCSB-A,
    /// SmallBank and TPC-C (Fig. 16).
    Layout,
    /// YCSB-A with hot sets larger than the switch, for several tuple widths (Fig. 17).
    HotOverflow,
    /// TPC-C: where the latency of committed transactions goes, No-Switch vs P4DB (Fig. 18a).
    TpccLatencyBreakdown,
}

impl Experiment {
    /// The name used for files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::YcsbWorkers => "ycsb-workers",
            Experiment::YcsbRemote => "ycsb-remote",
            Experiment::YcsbBreakdown => "ycsb-breakdown",
            Experiment::YcsbHot => "ycsb-hot",
            Experiment::SmallbankWorkers => "smallbank-workers",
            Experiment::SmallbankRemote => "smallbank-remote",
            Experiment::TpccWorkers => "tpcc-workers",
            Experiment::TpccRemote => "tpcc-remote",
            Experiment::SwitchOptimizations => "switch-optimizations",
            Experiment::Layout => "layout",
            Experiment::HotOverflow => "hot-overflow",
            Experiment::TpccLatencyBreakdown => "tpcc-latency-breakdown",
        }
    }

    /// Every experiment, in the paper's order.
    pub fn all() -> &'static [Experiment] {
        &ALL_EXPERIMENTS
    }

    /// The experiment called `name`, or an error listing the names.
    pub fn from_name(name: &str) -> Result<Experiment, String> {
        let all = Experiment::all();
        all.iter().copied().find(|e| e.name() == name).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|e| e.name()).collect();
            format!("no P4DB experiment `{name}`; accepted: {}", names.join(", "))
        })
    }

    /// One sentence on what it shows (the `--help` of `sweep`).
    pub fn summary(self) -> &'static str {
        EXPERIMENT_NAMES.iter().find(|e| e.name == self.name()).map_or("", |e| e.summary)
    }
}

/// Every experiment, in the paper's order.
const ALL_EXPERIMENTS: [Experiment; 12] = [
    Experiment::YcsbWorkers,
    Experiment::YcsbRemote,
    Experiment::YcsbBreakdown,
    Experiment::YcsbHot,
    Experiment::SmallbankWorkers,
    Experiment::SmallbankRemote,
    Experiment::TpccWorkers,
    Experiment::TpccRemote,
    Experiment::SwitchOptimizations,
    Experiment::Layout,
    Experiment::HotOverflow,
    Experiment::TpccLatencyBreakdown,
];

/// The experiments as the harness lists them ([`pisadb_harness::System::experiments`]), in
/// the order of [`Experiment::all`].
pub static EXPERIMENT_NAMES: [pisadb_harness::ExperimentName; 12] = {
    use pisadb_harness::ExperimentName as E;
    [
        E { name: "ycsb-workers", summary: "YCSB A/B/C: speedup over No-Switch as workers per node grow (Fig. 11, upper row)" },
        E { name: "ycsb-remote", summary: "YCSB: speedup as the share of distributed transactions grows (Fig. 11, lower row)" },
        E { name: "ycsb-breakdown", summary: "YCSB: committed hot and cold transactions per second by system (Fig. 12)" },
        E { name: "ycsb-hot", summary: "YCSB A and C: throughput as the share of hot transactions grows (Fig. 15a/b)" },
        E { name: "smallbank-workers", summary: "SmallBank with 5/10/15 hot accounts per node: speedup by workers (Fig. 13, upper row)" },
        E { name: "smallbank-remote", summary: "SmallBank: speedup by share of distributed transactions (Fig. 13, lower row)" },
        E { name: "tpcc-workers", summary: "TPC-C with 8/16/32 warehouses: speedup by workers, 20% distributed (Fig. 14, upper row)" },
        E { name: "tpcc-remote", summary: "TPC-C: speedup by remote item / remote customer probability (Fig. 14, lower row)" },
        E { name: "switch-optimizations", summary: "hot YCSB-A on P4DB, 4 nodes: random layout without optimizations, then fast recirculation, fine-grained locks and the declustered layout added one at a time (Fig. 15c)" },
        E { name: "layout", summary: "throughput and mean latency under the declustered and a random layout, YCSB-A, SmallBank and TPC-C (Fig. 16)" },
        E { name: "hot-overflow", summary: "YCSB-A with hot sets larger than the switch, for several tuple widths (Fig. 17)" },
        E { name: "tpcc-latency-breakdown", summary: "TPC-C: where the latency of committed transactions goes, No-Switch vs P4DB (Fig. 18a)" },
    ]
};

/// What a chart plots on its y axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chart {
    /// Throughput divided by the baseline's.
    Speedup,
    /// Committed transactions per second.
    Throughput,
    /// Committed hot and cold transactions per second, one line each.
    HotCold,
    /// Mean latency, µs.
    MeanLatency,
    /// Mean latency split by phase, µs, one line per phase.
    LatencyBreakdown,
}

impl Chart {
    /// The y-axis label.
    pub fn label(self) -> &'static str {
        match self {
            Chart::Speedup => "speedup",
            Chart::Throughput | Chart::HotCold => "committed transactions / s",
            Chart::MeanLatency | Chart::LatencyBreakdown => "mean latency",
        }
    }

    /// What the y axis measures: latencies are drawn in seconds.
    pub fn unit(self) -> Unit {
        match self {
            Chart::Speedup => Unit::Ratio,
            Chart::Throughput | Chart::HotCold => Unit::Count,
            Chart::MeanLatency | Chart::LatencyBreakdown => Unit::Seconds,
        }
    }
}

/// What a speedup is relative to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// The point of this series with the same panel and x.
    Series(&'static str),
    /// The first point of the same panel (an ablation's unoptimized start).
    FirstOfPanel,
}

impl Baseline {
    /// Whether the baseline is the series `name` (which then is not drawn as a speedup).
    pub fn is_series(&self, name: &str) -> bool {
        matches!(self, Baseline::Series(s) if *s == name)
    }
}

/// One simulated point and where its result goes.
#[derive(Clone, Debug)]
pub struct PointSpec {
    /// The panel of the figure (e.g. "YCSB-A", "8 warehouses").
    pub panel: String,
    /// The line within the panel (e.g. "P4DB", "random layout").
    pub series: String,
    /// The x value.
    pub x: f64,
    /// A label for x where it is a category (the ablation's steps), else empty.
    pub x_name: String,
    /// The simulation.
    pub cfg: RunConfig,
}

impl PointSpec {
    /// Identifies the simulation: points of different experiments with equal keys are the same
    /// run, simulated once.
    pub fn key(&self) -> String {
        format!("{:?}", self.cfg)
    }
}

/// An experiment, ready to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The experiment.
    pub experiment: Experiment,
    /// The figure's title.
    pub title: String,
    /// The x-axis label.
    pub x_label: String,
    /// What the x values measure.
    pub x_unit: Unit,
    /// The charts drawn, one figure row each.
    pub charts: Vec<Chart>,
    /// What speedups are relative to.
    pub baseline: Baseline,
    /// The points, in the order they are reported.
    pub points: Vec<PointSpec>,
}

/// Options shared by every plan.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Fewer points, shorter windows.
    pub quick: bool,
    /// Seed of every point's first run.
    pub seed: u64,
    /// Runs per point, under seeds `seed`, `seed + 1`, ….
    pub seeds: u32,
    /// Concurrency control on the nodes.
    pub cc: Cc,
    /// Layout, lock halves and recirculation for every point whose experiment does not set
    /// them itself (the layout and ablation experiments compare their own).
    pub switch: SwitchChoices,
    /// The P4DB prototype's testbed (P4DB's `paper` preset) instead of PisaDB's model: every
    /// point's workload as the prototype defined it (the experiment's knobs kept), its engine,
    /// latencies, costs and two FIFO recirculation ports.
    pub testbed: bool,
    /// Every figure with the switch the paper's run used: P4DB's best points under the
    /// prototype's ideal layout (`SWITCH_NO_CONFLICT`), Fig. 15c's fine-grained step with its
    /// parity lock rule; `reproduce`'s "as the paper ran it" column.
    pub as_run: bool,
}

/// The switch-side choices of a P4DB run (layout, lock halves, recirculation), as every
/// simulating command spells them; `None` keeps the run's own choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchChoices {
    /// The layout of the hot set.
    pub layout: Option<LayoutChoice>,
    /// The lock halves of multi-pass transactions.
    pub fine_locks: Option<FineLocks>,
    /// The recirculation model.
    pub recirculation: Option<RecirculationModel>,
}

impl SwitchChoices {
    /// Applies the choices to `cfg`. The engine's settings are only written out when one
    /// differs from what `cfg` already runs, so a default run's settings stay as they were.
    pub fn apply(&self, cfg: &mut RunConfig) {
        if let Some(layout) = self.layout {
            cfg.layout = layout;
        }
        let current = cfg.p4db.clone().unwrap_or_else(|| P4dbConfig::for_profile(&cfg.profile));
        let wanted = P4dbConfig {
            fine_locks: self.fine_locks.unwrap_or(current.fine_locks),
            recirculation: self.recirculation.unwrap_or(current.recirculation),
            ..current.clone()
        };
        if wanted != current {
            cfg.p4db = Some(wanted);
        }
    }

    /// The warnings and notes a report of runs with these choices must carry.
    pub fn warnings(&self) -> Vec<&'static str> {
        let layout = self.layout.and_then(LayoutChoice::warning);
        let locks = self.fine_locks.and_then(FineLocks::warning);
        layout.into_iter().chain(locks).collect()
    }
}

/// The `--set KEY=VALUE` keys P4DB's experiments take (every point's concurrency control and
/// switch choices, where the experiment does not set them itself), with the values each accepts.
/// `sweep`'s and `reproduce`'s `--cc`, `--layout`, `--fine-locks` and `--recirculation` are
/// these keys under their flag names.
pub const EXPERIMENT_KEYS: [(&str, &[&str]); 4] = [
    ("cc", &["no-wait", "wait-die", "NoWait", "WaitDie"]),
    ("layout", &["declustered", "random", "ideal", "shuffled"]),
    ("fine_locks", &["stages", "parity", "whole-pipeline"]),
    ("recirculation", &["priority", "fifo", "two-port-fifo"]),
];

/// The names of [`EXPERIMENT_KEYS`].
pub static EXPERIMENT_KEY_NAMES: [&str; EXPERIMENT_KEYS.len()] = {
    let mut names = [""; EXPERIMENT_KEYS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = EXPERIMENT_KEYS[i].0;
        i += 1;
    }
    names
};

/// The concurrency control (default NO_WAIT) and switch choices `sets` (`KEY=VALUE`, keys of
/// [`EXPERIMENT_KEYS`]) ask for; an error names the bad key or value and what is accepted.
pub fn choices_from_sets(sets: &[String]) -> Result<(Cc, SwitchChoices), String> {
    let (mut cc, mut choices) = (Cc::NoWait, SwitchChoices::default());
    for set in sets {
        let (key, value) = set.split_once('=').ok_or_else(|| format!("--set `{set}`: expected KEY=VALUE"))?;
        let (key, value) = (key.trim().replace('-', "_"), value.trim());
        let Some((_, accepted)) = EXPERIMENT_KEYS.iter().find(|(k, _)| *k == key) else {
            let keys: Vec<&str> = EXPERIMENT_KEYS.iter().map(|(k, _)| *k).collect();
            return Err(format!("--set `{set}`: P4DB's experiments take the keys {}", keys.join(", ")));
        };
        if !accepted.contains(&value) {
            return Err(format!("--set {key}: `{value}` is not one of {}", accepted.join(", ")));
        }
        // The accepted spellings are the kebab-case names the settings use.
        let as_json = serde_json::Value::String(if value == "fifo" { "two-port-fifo".into() } else { value.into() });
        let bad = |e: serde_json::Error| format!("--set {key}={value}: {e}");
        match key.as_str() {
            "cc" => {
                cc = if value.eq_ignore_ascii_case("wait-die") || value == "WaitDie" { Cc::WaitDie } else { Cc::NoWait }
            }
            "layout" => choices.layout = Some(serde_json::from_value(as_json).map_err(bad)?),
            "fine_locks" => choices.fine_locks = Some(serde_json::from_value(as_json).map_err(bad)?),
            _ => choices.recirculation = Some(serde_json::from_value(as_json).map_err(bad)?),
        }
    }
    Ok((cc, choices))
}

const ALL_MODES: [Mode; 3] = [Mode::NoSwitch, Mode::LmSwitch, Mode::P4db];
/// The paper drops LM-Switch after YCSB (§7.4: "only minimal gains").
const TWO_MODES: [Mode; 2] = [Mode::NoSwitch, Mode::P4db];

impl Options {
    fn base(&self, workload: WorkloadSpec, mode: Mode, workers: u16) -> RunConfig {
        let mut cfg = RunConfig {
            nodes: 8,
            workers,
            mode,
            cc: self.cc,
            workload,
            seed: self.seed,
            warmup_ns: if self.quick { 500_000 } else { 1_000_000 },
            measure_ns: if self.quick { 2_000_000 } else { 5_000_000 },
            ..RunConfig::ycsb_default()
        };
        if self.as_run && mode == Mode::P4db {
            cfg.layout = testbed::LAYOUT;
        }
        if self.testbed {
            cfg.workload = testbed::prototype_workload(&cfg.workload);
            testbed::apply(&mut cfg);
            let prototypes = SwitchChoices { recirculation: Some(testbed::RECIRCULATION), ..Default::default() };
            prototypes.apply(&mut cfg);
        }
        self.switch.apply(&mut cfg);
        cfg
    }

    /// The layout of the points that show P4DB at its best: the declustered one, or the ideal
    /// one when asked for (the paper's headline runs), with its name in figures.
    fn best_layout(&self) -> (LayoutChoice, &'static str) {
        match self.switch.layout {
            Some(LayoutChoice::Ideal) => (LayoutChoice::Ideal, "ideal layout"),
            None if self.as_run => (LayoutChoice::Ideal, "ideal layout"),
            _ => (LayoutChoice::Declustered, "declustered layout"),
        }
    }

    /// The lock rule of Fig. 15c's fine-grained step.
    fn fine_locks(&self) -> FineLocks {
        let as_run = if self.as_run { FineLocks::Parity } else { FineLocks::Stages };
        self.switch.fine_locks.unwrap_or(as_run)
    }

    fn pick<T: Clone>(&self, full: &[T], quick: &[T]) -> Vec<T> {
        if self.quick {
            quick.to_vec()
        } else {
            full.to_vec()
        }
    }
}

fn ycsb(mix: YcsbMix, remote_pct: u32, hot_pct: u32) -> WorkloadSpec {
    WorkloadSpec::Ycsb(YcsbConfig {
        mix,
        remote_prob: f64::from(remote_pct) / 100.0,
        hot_prob: f64::from(hot_pct) / 100.0,
        ..YcsbConfig::default()
    })
}

fn smallbank(hot_per_node: u64, remote_pct: u32) -> WorkloadSpec {
    WorkloadSpec::SmallBank(SmallBankConfig {
        hot_per_node,
        remote_prob: f64::from(remote_pct) / 100.0,
        ..SmallBankConfig::default()
    })
}

/// TPC-C with `warehouses` where a share `distributed_pct` of each transaction type is remote
/// when every warehouse is on its own node (the paper's Fig. 14 upper row: "a fixed ratio of 20%
/// distributed transactions"): Payment's customer is remote with that probability, and each of
/// an order's lines with the probability that makes an average 10-line order remote with it.
///
/// On the prototype's testbed the knob is the prototype's own: each order line and each
/// payment is remote with that probability.
fn tpcc(o: &Options, warehouses: u16, distributed_pct: u32) -> WorkloadSpec {
    if o.testbed {
        return tpcc_remote(warehouses, distributed_pct);
    }
    let p = f64::from(distributed_pct) / 100.0;
    let remote_item_prob = 1.0 - (1.0 - p).powf(0.1);
    WorkloadSpec::Tpcc(TpccConfig { warehouses, remote_item_prob, remote_customer_prob: p, ..TpccConfig::default() })
}

/// TPC-C with `warehouses` where each order line's item and each payment's customer come from
/// a remote warehouse with probability `remote_pct` (the knob of the paper's Fig. 14, lower row).
fn tpcc_remote(warehouses: u16, remote_pct: u32) -> WorkloadSpec {
    let p = f64::from(remote_pct) / 100.0;
    WorkloadSpec::Tpcc(TpccConfig { warehouses, remote_item_prob: p, remote_customer_prob: p, ..TpccConfig::default() })
}

/// A system's name in figures and reports.
pub fn system(mode: Mode) -> &'static str {
    match mode {
        Mode::NoSwitch => "No-Switch",
        Mode::LmSwitch => "LM-Switch",
        Mode::P4db => "P4DB",
    }
}

fn mix_name(mix: YcsbMix) -> String {
    format!("YCSB-{mix:?}")
}

fn hot_accounts(hot: u64) -> String {
    format!("{hot} hot accounts / node")
}

fn warehouse_panel(warehouses: u16) -> String {
    format!("{warehouses} warehouses")
}

/// Adds one point per panel, x and system, in that order: the shape of most of the paper's
/// figures. `panel_name` titles a panel, `cfg` builds the simulation of one point.
fn grid<P: Copy, X: Copy + Into<f64>>(
    points: &mut Vec<PointSpec>,
    panels: &[P],
    panel_name: impl Fn(P) -> String,
    xs: &[X],
    modes: &[Mode],
    cfg: impl Fn(P, X, Mode) -> RunConfig,
) {
    for &panel in panels {
        for &x in xs {
            for &mode in modes {
                let (panel_name, series) = (panel_name(panel), system(mode).to_string());
                points.push(PointSpec {
                    panel: panel_name,
                    series,
                    x: x.into(),
                    x_name: String::new(),
                    cfg: cfg(panel, x, mode),
                });
            }
        }
    }
}

/// The paper's grids (the prototype's `experiments/p4db_exp.py`): workers per node, and the
/// remote share from 10% to 90%.
const WORKERS_FULL: [u16; 8] = [1, 2, 4, 8, 10, 12, 16, 20];
const WORKERS_QUICK: [u16; 3] = [1, 8, 20];
const REMOTE_FULL: [u32; 9] = [10, 20, 30, 40, 50, 60, 70, 80, 90];
const REMOTE_QUICK: [u32; 3] = [10, 50, 90];
/// The share of hot transactions (`exp_skew`): 0% to 100% in steps of 10.
const HOT_FULL: [u32; 11] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
const HOT_QUICK: [u32; 3] = [0, 50, 100];

/// The plan of `experiment`.
pub fn plan(experiment: Experiment, o: &Options) -> Plan {
    let mut points = Vec::new();
    let mut push = |panel: String, series: &str, x: f64, cfg: RunConfig| {
        points.push(PointSpec { panel, series: series.to_string(), x, x_name: String::new(), cfg });
    };
    let (title, (x_label, x_unit), charts, baseline) = match experiment {
        Experiment::YcsbWorkers | Experiment::YcsbBreakdown => {
            let mixes = [YcsbMix::A, YcsbMix::B, YcsbMix::C];
            let workers = o.pick(&WORKERS_FULL, &WORKERS_QUICK);
            grid(&mut points, &mixes, mix_name, &workers, &ALL_MODES, |mix, w, mode| {
                o.base(ycsb(mix, 20, 75), mode, w)
            });
            if experiment == Experiment::YcsbWorkers {
                (
                    "YCSB: speedup over No-Switch by workers per node (cf. P4DB Fig. 11, upper row)",
                    ("workers per node", Unit::Integer),
                    vec![Chart::Speedup, Chart::Throughput],
                    Baseline::Series("No-Switch"),
                )
            } else {
                (
                    "YCSB: committed hot and cold transactions per second (cf. P4DB Fig. 12)",
                    ("workers per node", Unit::Integer),
                    vec![Chart::HotCold],
                    Baseline::Series("No-Switch"),
                )
            }
        }
        Experiment::YcsbRemote => {
            let mixes = o.pick(&[YcsbMix::A, YcsbMix::B, YcsbMix::C], &[YcsbMix::A, YcsbMix::C]);
            let remote = o.pick(&REMOTE_FULL, &REMOTE_QUICK);
            grid(&mut points, &mixes, mix_name, &remote, &ALL_MODES, |mix, r, mode| o.base(ycsb(mix, r, 75), mode, 20));
            (
                "YCSB: speedup over No-Switch by distributed share (cf. P4DB Fig. 11, lower row)",
                ("remote: distributed transactions (per key on the testbed)", Unit::Percent),
                vec![Chart::Speedup, Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::YcsbHot => {
            let mixes = o.pick(&[YcsbMix::A, YcsbMix::C], &[YcsbMix::A]);
            let hot: Vec<u32> = o.pick(&HOT_FULL, &HOT_QUICK);
            grid(&mut points, &mixes, mix_name, &hot, &ALL_MODES, |mix, h, mode| o.base(ycsb(mix, 20, h), mode, 20));
            (
                "YCSB: throughput by share of hot transactions, 20% remote (cf. P4DB Fig. 15a/b)",
                ("hot transactions", Unit::Percent),
                vec![Chart::Throughput, Chart::Speedup],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::SmallbankWorkers => {
            let hot = o.pick(&[5, 10, 15], &[5, 15]);
            let workers = o.pick(&WORKERS_FULL, &WORKERS_QUICK);
            grid(&mut points, &hot, hot_accounts, &workers, &TWO_MODES, |h, w, mode| o.base(smallbank(h, 20), mode, w));
            (
                "SmallBank: speedup over No-Switch by workers per node (cf. P4DB Fig. 13, upper row)",
                ("workers per node", Unit::Integer),
                vec![Chart::Speedup, Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::SmallbankRemote => {
            let hot = o.pick(&[5, 10, 15], &[5, 15]);
            let remote = o.pick(&REMOTE_FULL, &REMOTE_QUICK);
            grid(&mut points, &hot, hot_accounts, &remote, &TWO_MODES, |h, r, mode| o.base(smallbank(h, r), mode, 20));
            (
                "SmallBank: speedup over No-Switch by distributed share (cf. P4DB Fig. 13, lower row)",
                ("remote: distributed transactions (per account on the testbed)", Unit::Percent),
                vec![Chart::Speedup, Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::TpccWorkers => {
            let warehouses = o.pick(&[8, 16, 32], &[8, 32]);
            let workers = o.pick(&WORKERS_FULL, &WORKERS_QUICK);
            grid(&mut points, &warehouses, warehouse_panel, &workers, &TWO_MODES, |wh, w, mode| {
                o.base(tpcc(o, wh, 20), mode, w)
            });
            (
                "TPC-C NewOrder/Payment: speedup over No-Switch by workers per node (cf. P4DB Fig. 14, upper row)",
                ("workers per node", Unit::Integer),
                vec![Chart::Speedup, Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::TpccRemote => {
            let warehouses = o.pick(&[8, 16, 32], &[8]);
            let remote = o.pick(&REMOTE_FULL, &REMOTE_QUICK);
            grid(&mut points, &warehouses, warehouse_panel, &remote, &TWO_MODES, |wh, r, mode| {
                o.base(tpcc_remote(wh, r), mode, 20)
            });
            (
                "TPC-C: speedup over No-Switch by remote item / customer probability (cf. P4DB Fig. 14, lower row)",
                ("remote item / customer probability", Unit::Percent),
                vec![Chart::Speedup, Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::SwitchOptimizations => {
            let (best, best_name) = o.best_layout();
            let last = format!("+ {best_name}");
            let steps = [
                ("no optimization", LayoutChoice::Random, false, false),
                ("+ fast recirculation", LayoutChoice::Random, true, false),
                ("+ fine-grained locks", LayoutChoice::Random, true, true),
                (last.as_str(), best, true, true),
            ];
            for (i, (name, layout, fast, fine)) in steps.into_iter().enumerate() {
                // The paper ran this ablation on 4 nodes with only hot transactions.
                let base = o.base(ycsb(YcsbMix::A, 20, 100), Mode::P4db, 20);
                // `--fine-locks parity` makes the fine-grained step the prototype's measurement.
                let fine_locks = o.fine_locks();
                // The base's stored switch settings (recirculation model), not the ones its layout
                // implies: each step sets its own layout.
                let stored = base.p4db.clone().unwrap_or_else(|| P4dbConfig::for_profile(&base.profile));
                let p4db = P4dbConfig {
                    fast_recirculation: fast,
                    fine_locks: if fine { fine_locks } else { FineLocks::WholePipeline },
                    ..stored
                };
                let cfg = RunConfig { nodes: 4, layout, p4db: Some(p4db), ..base };
                points.push(PointSpec {
                    panel: "hot YCSB-A".into(),
                    series: "P4DB".into(),
                    x: (i + 1) as f64,
                    x_name: name.into(),
                    cfg,
                });
            }
            ("P4DB's switch optimizations on hot YCSB-A, 4 nodes x 20 workers, 1 = none, 2 = + fast recirculation, 3 = + fine-grained locks, 4 = + declustered layout (cf. Fig. 15c)", ("optimizations applied", Unit::Integer), vec![Chart::Throughput, Chart::Speedup], Baseline::FirstOfPanel)
        }
        Experiment::Layout => {
            // SmallBank with 5 hot accounts per node, as the prototype ran Fig. 16 (`exp_h`).
            let workloads =
                [("YCSB-A", ycsb(YcsbMix::A, 20, 75)), ("SmallBank", smallbank(5, 20)), ("TPC-C", tpcc(o, 8, 20))];
            for (name, w) in workloads {
                for workers in o.pick(&WORKERS_FULL, &[8, 20]) {
                    let (best, best_name) = o.best_layout();
                    for (series, layout) in [(best_name, best), ("random layout", LayoutChoice::Random)] {
                        let cfg = RunConfig { layout, ..o.base(w.clone(), Mode::P4db, workers) };
                        push(name.to_string(), series, f64::from(workers), cfg);
                    }
                }
            }
            (
                "P4DB under its best layout and a random one (cf. P4DB Fig. 16)",
                ("workers per node", Unit::Integer),
                vec![Chart::Throughput, Chart::MeanLatency],
                Baseline::Series("random layout"),
            )
        }
        Experiment::HotOverflow => {
            // Tuple widths shrink the switch: a 32-bit cell per 4 bytes of tuple.
            let widths: Vec<u32> = o.pick(&[4, 8, 16, 32], &[4, 16]);
            let sizes: Vec<u64> = o.pick(
                &[10_000, 50_000, 100_000, 300_000, 650_000, 1_000_000, 2_000_000],
                &[50_000, 650_000, 2_000_000],
            );
            let profile = SwitchProfile::tofino1();
            let full = P4dbConfig::for_profile(&profile);
            for &hot in &sizes {
                let per_node = hot / 8;
                let workload = WorkloadSpec::Ycsb(YcsbConfig {
                    hot_per_node: per_node,
                    rows: (per_node * 8 * 4).max(1_000_000),
                    ..YcsbConfig::default()
                });
                let x = (hot as f64).log10();
                for &width in &widths {
                    let entries = full.entries_per_array / (width / 4);
                    let capacity = u64::from(entries) * u64::from(full.data_stages) * u64::from(full.arrays_per_stage);
                    let base = o.base(workload.clone(), Mode::P4db, 20);
                    let shape = base.p4db.clone().unwrap_or_else(|| full.clone());
                    let p4db = P4dbConfig { entries_per_array: entries, ..shape };
                    let cfg = RunConfig { p4db: Some(p4db), ..base };
                    let series = format!("P4DB, {width} B tuples ({}k rows fit)", capacity / 1000);
                    points.push(PointSpec { panel: "YCSB-A".into(), series, x, x_name: hot.to_string(), cfg });
                }
                let cfg = o.base(workload, Mode::NoSwitch, 20);
                points.push(PointSpec {
                    panel: "YCSB-A".into(),
                    series: "No-Switch".into(),
                    x,
                    x_name: hot.to_string(),
                    cfg,
                });
            }
            (
                "YCSB-A with hot sets beyond the switch's capacity (cf. P4DB Fig. 17)",
                ("hot-set size (tuples, log scale)", Unit::Log10Count),
                vec![Chart::Throughput],
                Baseline::Series("No-Switch"),
            )
        }
        Experiment::TpccLatencyBreakdown => {
            for mode in TWO_MODES {
                push("8 warehouses".into(), system(mode), 20.0, o.base(tpcc(o, 8, 20), mode, 20));
            }
            (
                "TPC-C, 8 warehouses, 8 nodes x 20 workers: where the latency goes (cf. P4DB Fig. 18a)",
                ("workers per node", Unit::Integer),
                vec![Chart::LatencyBreakdown],
                Baseline::Series("No-Switch"),
            )
        }
    };
    Plan { experiment, title: title.into(), x_label: x_label.into(), x_unit, charts, baseline, points }
}

/// The prototype's published experiments (`figures/data/<name>.csv`, see
/// [`crate::paper`]) that measured the points of `experiment`; the first that holds a
/// configuration answers for it.
fn prototype_experiments(experiment: Experiment, layout: LayoutChoice, workload: &str) -> &'static [&'static str] {
    match (experiment, layout, workload) {
        (Experiment::YcsbWorkers | Experiment::YcsbBreakdown, ..) => &["exp_c"],
        (Experiment::YcsbRemote, ..) => &["exp_b"],
        (Experiment::YcsbHot, ..) => &["exp_ycsb_skew"],
        (Experiment::SmallbankWorkers, ..) => &["exp_g"],
        (Experiment::SmallbankRemote, ..) => &["exp_f"],
        (Experiment::TpccWorkers, ..) => &["exp_k"],
        (Experiment::TpccRemote, ..) => &["exp_j"],
        (Experiment::SwitchOptimizations, ..) => &["exp_ycsb_optis_slow", "exp_ycsb_optis_fast"],
        (Experiment::Layout, LayoutChoice::Random, "ycsb") => &["exp_d"],
        (Experiment::Layout, LayoutChoice::Random, "smallbank") => &["exp_h"],
        (Experiment::Layout, LayoutChoice::Random, _) => &["exp_l"],
        (Experiment::Layout, _, "ycsb") => &["exp_c"],
        (Experiment::Layout, _, "smallbank") => &["exp_g"],
        (Experiment::Layout, ..) => &["exp_k"],
        (Experiment::HotOverflow | Experiment::TpccLatencyBreakdown, ..) => &[],
    }
}

/// A probability as the prototype's integer percent knob.
fn percent(p: f64) -> u32 {
    (p * 100.0).round() as u32
}

/// What the prototype measured for point `p` of `experiment`, if it ran that configuration.
///
/// The point's knobs are matched as the paper ran them: the same rack, system and concurrency
/// control, the workload's knobs (a remote probability is compared as a percent, per key in the
/// prototype), and for P4DB the layout the paper used — its ideal layout
/// (`SWITCH_NO_CONFLICT`) for everything but the random-layout runs — with the fast
/// recirculation and lock-halves steps of the Fig. 15c ablation.
pub fn prototype_point(experiment: Experiment, p: &PointSpec) -> Option<&'static PrototypePoint> {
    let cfg = &p.cfg;
    let shape = |q: &PrototypePoint| match &cfg.workload {
        WorkloadSpec::Ycsb(y) => {
            q.workload == "ycsb"
                && q.ycsb_write_prob == percent(y.mix.write_fraction())
                && q.ycsb_remote_prob == percent(y.remote_prob)
                && q.ycsb_hot_prob == percent(y.hot_prob)
                && q.ycsb_hot_size == y.hot_per_node
        }
        WorkloadSpec::SmallBank(s) => {
            q.workload == "smallbank"
                && q.smallbank_remote_prob == percent(s.remote_prob)
                && q.smallbank_hot_size == s.hot_per_node
        }
        // The knob of every TPC-C plan is the remote customer probability (the line
        // probability is derived from it where the plan asks for a distributed share).
        WorkloadSpec::Tpcc(t) => {
            q.workload == "tpcc"
                && q.tpcc_num_warehouses == t.warehouses
                && q.new_order_remote_prob == percent(t.remote_customer_prob)
        }
    };
    let p4db = cfg.p4db_config();
    let switch = |q: &PrototypePoint| {
        if cfg.mode != Mode::P4db {
            return true;
        }
        // The paper ran its best layout as the prototype's ideal one; random as `idx % N`.
        let ideal = matches!(cfg.layout, LayoutChoice::Declustered | LayoutChoice::Ideal);
        let steps = experiment != Experiment::SwitchOptimizations
            || (q.fast_recirculation == Some(p4db.fast_recirculation)
                && q.ycsb_opti_test == (p4db.fine_locks != FineLocks::WholePipeline && !ideal));
        q.switch_no_conflict == ideal && steps
    };
    let matches = |q: &PrototypePoint| {
        q.num_nodes == cfg.nodes && q.num_txn_workers == cfg.workers && q.is(cfg.mode, cfg.cc) && shape(q) && switch(q)
    };
    prototype_experiments(experiment, cfg.layout, cfg.workload.name())
        .iter()
        .find_map(|name| crate::paper::prototype_point(name, matches))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            quick: false,
            seed: 1,
            seeds: 1,
            cc: Cc::NoWait,
            switch: Default::default(),
            testbed: false,
            as_run: false,
        }
    }

    #[test]
    fn every_point_the_prototype_ran_finds_its_measurement() {
        // Every point of these experiments is on the prototype's grid (LM-Switch only where the
        // prototype ran it: the YCSB worker and remote sweeps; its published hot sweep is
        // YCSB-A's only).
        for experiment in [
            Experiment::YcsbWorkers,
            Experiment::YcsbRemote,
            Experiment::YcsbHot,
            Experiment::SmallbankWorkers,
            Experiment::SmallbankRemote,
            Experiment::TpccWorkers,
            Experiment::TpccRemote,
            Experiment::SwitchOptimizations,
            Experiment::Layout,
        ] {
            let plan = plan(experiment, &options());
            let lm_ran = matches!(experiment, Experiment::YcsbWorkers | Experiment::YcsbRemote);
            let published = |p: &&PointSpec| {
                (lm_ran || p.cfg.mode != Mode::LmSwitch) && (experiment != Experiment::YcsbHot || p.panel == "YCSB-A")
            };
            for p in plan.points.iter().filter(published) {
                assert!(
                    prototype_point(experiment, p).is_some(),
                    "{}: no prototype run for {} {} x={}",
                    experiment.name(),
                    p.panel,
                    p.series,
                    p.x
                );
            }
        }
    }

    #[test]
    fn the_ablation_steps_find_the_prototypes_four_builds() {
        let plan = plan(Experiment::SwitchOptimizations, &options());
        let found: Vec<(&str, bool, bool, Option<bool>)> = plan
            .points
            .iter()
            .map(|p| {
                let q = prototype_point(Experiment::SwitchOptimizations, p).unwrap();
                (q.experiment.as_str(), q.switch_no_conflict, q.ycsb_opti_test, q.fast_recirculation)
            })
            .collect();
        assert_eq!(
            found,
            [
                ("exp_ycsb_optis_slow", false, false, Some(false)),
                ("exp_ycsb_optis_fast", false, false, Some(true)),
                ("exp_ycsb_optis_fast", false, true, Some(true)),
                ("exp_ycsb_optis_fast", true, false, Some(true)),
            ]
        );
    }
}
