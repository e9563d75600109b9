//! `pisadb bench` (one simulated point) and `pisadb compare` (the three systems side by side):
//! the rack in the simulator, with the figures a user reads.

use crate::systems::registry;
use clap::{Args as ClapArgs, ValueEnum};
use pisadb_harness::{apply_set, PointReport, System};
use pisadb_p4db::experiments::SwitchChoices;
use pisadb_p4db::node::{Cc, Engine, Mode};
use pisadb_p4db::programs::p4db::{FineLocks, RecirculationModel};
use pisadb_p4db::{testbed, LayoutChoice, RunConfig, RunResult, WorkloadSpec};
use pisadb_workload::{RemoteRule, Scheme, SmallBankConfig, TpccConfig, YcsbConfig, YcsbMix};
use serde::Serialize;

/// The system under test, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeArg {
    /// Hot transactions run in the switch.
    P4db,
    /// The switch only forwards.
    NoSwitch,
    /// The switch is a lock manager for hot tuples.
    LmSwitch,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::P4db => Mode::P4db,
            ModeArg::NoSwitch => Mode::NoSwitch,
            ModeArg::LmSwitch => Mode::LmSwitch,
        }
    }
}

/// Concurrency control, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CcArg {
    /// Abort on any lock conflict.
    NoWait,
    /// Older transactions wait, younger ones abort.
    WaitDie,
}

impl From<PartitioningArg> for Scheme {
    fn from(p: PartitioningArg) -> Scheme {
        match p {
            PartitioningArg::RoundRobin => Scheme::RoundRobin,
            PartitioningArg::Range => Scheme::Range,
        }
    }
}

impl From<CcArg> for Cc {
    fn from(c: CcArg) -> Cc {
        match c {
            CcArg::NoWait => Cc::NoWait,
            CcArg::WaitDie => Cc::WaitDie,
        }
    }
}

/// The workload, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WorkloadArg {
    /// YCSB-A: 8 operations, 50% writes.
    #[value(alias = "a")]
    YcsbA,
    /// YCSB-B: 5% writes.
    #[value(alias = "b")]
    YcsbB,
    /// YCSB-C: read only.
    #[value(alias = "c")]
    YcsbC,
    /// SmallBank's six transaction types.
    Smallbank,
    /// TPC-C NewOrder and Payment, 50/50, with warm transactions.
    Tpcc,
}

/// How the hot set is laid out, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LayoutArg {
    /// P4DB's declustered layout, fitted on a sample of hot transactions (paper §4).
    Declustered,
    /// The prototype's "worst layout": key idx in array idx % N (N = 20 for YCSB, 10 for
    /// SmallBank and TPC-C), real multi-pass transactions under the pipeline lock.
    Random,
    /// The prototype's SWITCH_NO_CONFLICT runs (the paper's headline figures): random's
    /// placement, every hot transaction one pass with no locks, the operations beyond its first
    /// pass NOT executed (counted). An upper bound no register layout achieves.
    Ideal,
    /// Each hot tuple in a uniformly random array.
    Shuffled,
}

impl From<LayoutArg> for LayoutChoice {
    fn from(l: LayoutArg) -> LayoutChoice {
        match l {
            LayoutArg::Declustered => LayoutChoice::Declustered,
            LayoutArg::Random => LayoutChoice::Random,
            LayoutArg::Ideal => LayoutChoice::Ideal,
            LayoutArg::Shuffled => LayoutChoice::Shuffled,
        }
    }
}

/// Which pipeline-lock halves a multi-pass transaction takes, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FineLocksArg {
    /// The halves of the stages it touches (P4DB §5.3; serializable).
    Stages,
    /// One half by the parity of its first key, as the prototype measured Fig. 15c: NOT
    /// serializable.
    Parity,
    /// Both halves: every multi-pass transaction locks the whole pipeline.
    WholePipeline,
}

impl From<FineLocksArg> for FineLocks {
    fn from(f: FineLocksArg) -> FineLocks {
        match f {
            FineLocksArg::Stages => FineLocks::Stages,
            FineLocksArg::Parity => FineLocks::Parity,
            FineLocksArg::WholePipeline => FineLocks::WholePipeline,
        }
    }
}

/// How the switch recirculates, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RecirculationArg {
    /// Every recirculation port, queues served by recirculation count (long waiters first).
    Priority,
    /// The prototype's: one shared slow port and one fast port for lock holders, each first
    /// come, first served.
    #[value(alias = "two-port-fifo")]
    Fifo,
}

impl From<RecirculationArg> for RecirculationModel {
    fn from(r: RecirculationArg) -> RecirculationModel {
        match r {
            RecirculationArg::Priority => RecirculationModel::Priority,
            RecirculationArg::Fifo => RecirculationModel::TwoPortFifo,
        }
    }
}

/// A set of defaults for everything a run is made of, as spelled on the command line: P4DB's
/// two, or another system's preset by name (`pisadb systems --presets NAME` lists them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Preset {
    /// PisaDB's own model: its engine, its measured CPU costs, a 1 us NIC, PisaDB's workloads.
    #[default]
    Pisadb,
    /// The P4DB prototype's testbed (issue 16): the prototype's workload definitions (YCSB:
    /// 10M rows in ranges, each key remote with --remote; SmallBank per account; TPC-C with
    /// 51% NewOrder, 5-10 lines, 20% remote), its node engine (pre-generated transactions,
    /// one remote key per round trip, an unlock message per remote key, aborted transactions
    /// skipped, one handler core, row latches), 12.25 us per node->switch->node traversal,
    /// 0.86 us of CPU per local 8-operation transaction and two-port FIFO recirculation. The
    /// layout stays declustered; the paper's headline runs take --layout ideal. Flags given
    /// explicitly override it. P4DB's `paper` preset; `p4db-testbed` is its old name.
    P4dbTestbed,
    /// Another preset, looked up in the system's own list when the command runs.
    Other(&'static str),
}

impl Preset {
    /// The CLI spelling (P4DB's directory name for its testbed).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Preset::Pisadb => "pisadb",
            Preset::P4dbTestbed => "p4db-testbed",
            Preset::Other(name) => name,
        }
    }

    /// The name the harness looks the preset up by (`paper` for P4DB's testbed).
    pub(crate) fn harness_name(self) -> &'static str {
        match self {
            Preset::P4dbTestbed => "paper",
            other => other.name(),
        }
    }

    /// Reads `--preset NAME`: `pisadb`, `paper` (or its old name `p4db-testbed`), or any
    /// name a system's list has (checked when the system is known).
    pub(crate) fn parse(name: &str) -> Result<Preset, String> {
        match name {
            "pisadb" => Ok(Preset::Pisadb),
            "paper" | "p4db-testbed" => Ok(Preset::P4dbTestbed),
            "" => Err("--preset needs a name: pisadb, paper, or one `pisadb systems --presets NAME` lists".into()),
            // A command line is parsed once per process: the name lives as long as the run.
            other => Ok(Preset::Other(Box::leak(other.to_string().into_boxed_str()))),
        }
    }
}

/// The node engine, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum EngineArg {
    /// PisaDB's engine: batched lock requests per node, 2PC, retries.
    Pisadb,
    /// The P4DB prototype's engine (see --preset p4db-testbed).
    Prototype,
}

impl From<EngineArg> for Engine {
    fn from(e: EngineArg) -> Engine {
        match e {
            EngineArg::Pisadb => Engine::Pisadb,
            EngineArg::Prototype => Engine::Prototype,
        }
    }
}

/// Rows over all nodes the `pisadb` preset runs (YCSB keys, SmallBank accounts).
const PISADB_ROWS: u64 = 1_000_000;

/// Partitioning scheme, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PartitioningArg {
    /// Row r on node r % nodes.
    RoundRobin,
    /// Consecutive blocks of rows per node.
    Range,
}

/// The rack and workload flags shared by `bench` and `compare`.
#[derive(ClapArgs, Debug, Clone, Serialize)]
pub(crate) struct RackArgs {
    /// Defaults for everything below: `pisadb` (PisaDB's model) or `paper` (the paper's
    /// testbed; for P4DB its prototype's workloads, node engine, latencies and costs, old name
    /// `p4db-testbed`; see CALIBRATION.md), or another preset of the system (`pisadb systems
    /// --presets NAME`). Flags and --set given explicitly override the preset's values.
    #[arg(long, default_value = "pisadb", value_parser = Preset::parse)]
    pub preset: Preset,
    /// How the nodes run transactions [default: the preset's: pisadb, or prototype under
    /// --preset p4db-testbed].
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// The prototype's engine: transactions pre-generated per worker; a worker that ran them
    /// all stops [default: the prototype's 500000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub txns_per_worker: Option<u64>,
    /// Concurrency control for transactions on the nodes.
    #[arg(long, value_enum, default_value = "no-wait")]
    pub cc: CcArg,
    /// Database nodes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub nodes: u16,
    /// Worker cores per node, each running one transaction at a time.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// The workload.
    #[arg(long, value_enum, default_value = "ycsb-a")]
    pub workload: WorkloadArg,
    /// Percent of distributed transactions (YCSB, SmallBank; default 20). For TPC-C, the
    /// remote-item and remote-customer probability (default: the standard's 1% and 15%).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub remote: Option<u8>,
    /// Percent of transactions on the hot set (YCSB default 75, SmallBank 90; not TPC-C).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub hot_prob: Option<u8>,
    /// Hot tuples per node (YCSB default 50 keys, SmallBank 15 accounts; not TPC-C).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub hot_per_node: Option<u64>,
    /// Rows over all nodes: YCSB keys or SmallBank accounts [default: 1000000; the prototype's
    /// 10000000 YCSB keys under --preset p4db-testbed].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub rows: Option<u64>,
    /// TPC-C warehouses (a multiple of --nodes).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub warehouses: u16,
    /// How rows are spread over the nodes (YCSB, SmallBank; TPC-C is always by warehouse)
    /// [default: round-robin; range under --preset p4db-testbed].
    #[arg(long, value_enum)]
    pub partitioning: Option<PartitioningArg>,
    /// How the hot set is laid out on the switch (P4DB mode): declustered (P4DB's algorithm),
    /// random (the prototype's idx % N), ideal (the prototype's SWITCH_NO_CONFLICT upper bound:
    /// one pass, no locks, operations past the first pass not executed; the layout of the paper's
    /// headline runs, an upper bound), shuffled. The testbed preset keeps declustered: ask for
    /// ideal to reproduce the paper's runs.
    #[arg(long, value_enum, default_value = "declustered")]
    pub layout: LayoutArg,
    /// Which pipeline-lock halves a multi-pass transaction takes (P4DB mode): stages (the halves
    /// it touches, P4DB §5.3), parity (one half by its first key's parity, the prototype's
    /// Fig. 15c; not serializable), whole-pipeline.
    #[arg(long, value_enum, default_value = "stages")]
    pub fine_locks: FineLocksArg,
    /// How the switch recirculates (P4DB mode): priority (every port, long waiters first) or
    /// fifo (the prototype's one slow and one fast port, first come, first served)
    /// [default: priority; fifo under --preset p4db-testbed].
    #[arg(long, value_enum)]
    pub recirculation: Option<RecirculationArg>,
    /// Seed of everything; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated milliseconds measured (after the warm-up).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub measure_ms: u64,
    /// Simulated milliseconds of warm-up, not measured.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub warmup_ms: u64,
}

impl RackArgs {
    /// The run configuration for `mode`.
    pub(crate) fn config(&self, mode: Mode) -> RunConfig {
        let pct = |p: u8| f64::from(p) / 100.0;
        let testbed = self.preset == Preset::P4dbTestbed;
        // PisaDB's preset keeps the CLI's historical defaults; the testbed's are the prototype's.
        let rows = |prototype_rows: u64| self.rows.unwrap_or(if testbed { prototype_rows } else { PISADB_ROWS });
        let partitioning = |prototype: Scheme| {
            self.partitioning.map_or(if testbed { prototype } else { Scheme::RoundRobin }, Scheme::from)
        };
        let ycsb = |mix| {
            let d = if testbed { YcsbConfig::prototype(mix) } else { YcsbConfig::default() };
            WorkloadSpec::Ycsb(YcsbConfig {
                nodes: self.nodes,
                rows: rows(d.rows),
                hot_per_node: self.hot_per_node.unwrap_or(d.hot_per_node),
                hot_prob: self.hot_prob.map_or(d.hot_prob, pct),
                remote_prob: self.remote.map_or(d.remote_prob, pct),
                mix,
                partitioning: partitioning(d.partitioning),
                ..d
            })
        };
        let workload = match self.workload {
            WorkloadArg::YcsbA => ycsb(YcsbMix::A),
            WorkloadArg::YcsbB => ycsb(YcsbMix::B),
            WorkloadArg::YcsbC => ycsb(YcsbMix::C),
            WorkloadArg::Smallbank => {
                let d = if testbed { SmallBankConfig::prototype() } else { SmallBankConfig::default() };
                WorkloadSpec::SmallBank(SmallBankConfig {
                    nodes: self.nodes,
                    accounts: rows(d.accounts),
                    hot_per_node: self.hot_per_node.unwrap_or(d.hot_per_node),
                    hot_prob: self.hot_prob.map_or(d.hot_prob, pct),
                    remote_prob: self.remote.map_or(d.remote_prob, pct),
                    partitioning: partitioning(d.partitioning),
                    ..d
                })
            }
            WorkloadArg::Tpcc => {
                let d = if testbed { TpccConfig::prototype(self.warehouses) } else { TpccConfig::default() };
                WorkloadSpec::Tpcc(TpccConfig {
                    nodes: self.nodes,
                    warehouses: self.warehouses,
                    remote_item_prob: self.remote.map_or(d.remote_item_prob, pct),
                    remote_customer_prob: self.remote.map_or(d.remote_customer_prob, pct),
                    ..d
                })
            }
        };
        let mut cfg = RunConfig {
            nodes: self.nodes,
            workers: self.workers,
            mode,
            cc: self.cc.into(),
            workload,
            seed: self.seed,
            warmup_ns: self.warmup_ms * 1_000_000,
            measure_ns: self.measure_ms * 1_000_000,
            ..RunConfig::ycsb_default()
        };
        if testbed {
            testbed::apply(&mut cfg);
        }
        self.switch_choices().apply(&mut cfg);
        if let Some(engine) = self.engine {
            cfg.engine = engine.into();
        }
        if let Some(n) = self.txns_per_worker {
            cfg.txns_per_worker = n;
        }
        cfg
    }

    /// The layout, lock and recirculation flags; the testbed preset recirculates as the
    /// prototype's switch does (two FIFO ports) unless told otherwise.
    pub(crate) fn switch_choices(&self) -> SwitchChoices {
        let testbed = self.preset == Preset::P4dbTestbed;
        let recirculation =
            self.recirculation.unwrap_or(if testbed { RecirculationArg::Fifo } else { RecirculationArg::Priority });
        SwitchChoices {
            layout: Some(self.layout.into()),
            fine_locks: Some(self.fine_locks.into()),
            recirculation: Some(recirculation.into()),
        }
    }

    /// What the preset selected, one line (none for PisaDB's own preset).
    pub(crate) fn describe_preset(&self) -> Option<String> {
        (self.preset == Preset::P4dbTestbed).then(|| testbed::describe(&self.config(Mode::P4db)))
    }

    /// One line describing the rack and workload.
    pub(crate) fn describe(&self) -> String {
        // What the remote probability means under each rule.
        let remote = |p: f64, rule: RemoteRule, unit: &str| match rule {
            RemoteRule::PerTransaction => format!("{:.0}% distributed", p * 100.0),
            RemoteRule::PerKey => format!("each {unit} remote with {:.0}%", p * 100.0),
        };
        let cfg = self.config(Mode::P4db);
        let workload = match &cfg.workload {
            WorkloadSpec::Ycsb(c) => format!(
                "YCSB-{:?}, {} rows, {} hot per node, {:.0}% hot, {}, {:?}",
                c.mix,
                c.rows,
                c.hot_per_node,
                c.hot_prob * 100.0,
                remote(c.remote_prob, c.remote_rule, "key"),
                c.partitioning
            ),
            WorkloadSpec::SmallBank(c) => format!(
                "SmallBank, {} accounts, {} hot per node, {:.0}% hot, {}, {:?}",
                c.accounts,
                c.hot_per_node,
                c.hot_prob * 100.0,
                remote(c.remote_prob, c.remote_rule, "account"),
                c.partitioning
            ),
            WorkloadSpec::Tpcc(c) => format!(
                "TPC-C NewOrder/Payment, {} warehouses, {:.0}% remote items, {:.0}% remote customers",
                c.warehouses,
                c.remote_item_prob * 100.0,
                c.remote_customer_prob * 100.0
            ),
        };
        let p4db = cfg.p4db_config();
        let switch = match (p4db.fine_locks, p4db.recirculation) {
            (FineLocks::Stages, RecirculationModel::Priority) => String::new(),
            (locks, recirculation) => format!(", {locks:?} locks, {recirculation:?} recirculation"),
        };
        format!(
            "{workload} on {} nodes x {} workers, {:?}, {:?} layout{switch}, {} engine, seed {}; {} ms simulated after \
             {} ms warm-up",
            self.nodes,
            self.workers,
            self.cc,
            self.layout,
            cfg.engine.name(),
            self.seed,
            self.measure_ms,
            self.warmup_ms
        )
    }
}

/// Which system runs, and how its settings differ from the defaults: shared by every command
/// that simulates.
#[derive(ClapArgs, Debug, Clone, Serialize)]
pub(crate) struct SystemArgs {
    /// The system (`pisadb systems` lists them).
    #[arg(long, default_value = "p4db")]
    pub system: String,
    /// Edit one of the system's settings, by dotted key (`--set workers=8`, `--set
    /// link.gbps=25`; `pisadb systems --settings NAME` prints every key); repeatable, applied
    /// after the other flags.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

impl SystemArgs {
    /// The system named by `--system`.
    pub(crate) fn system(&self) -> Result<&'static dyn System, String> {
        registry().get(&self.system).map_err(|e| e.to_string())
    }
}

/// Flags of `pisadb bench`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    system: SystemArgs,
    /// The variant of the system to run (P4DB's: p4db, no-switch, lm-switch); default: the
    /// system itself. `--mode` is the same flag under its old name.
    #[arg(long, alias = "mode")]
    variant: Option<String>,
    #[command(flatten)]
    rack: RackArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// A run's figures with the simulator's speed and what ran: one schema for every system
/// (`bench --json`, `compare --json`). The figures are the system's own, at the top level as
/// since the first release; nothing of another system appears.
#[derive(Serialize)]
pub(crate) struct Point {
    /// The system.
    pub system: &'static str,
    /// The variant that ran.
    pub variant: String,
    /// The variant again, under the name it had since the first release.
    pub mode: String,
    /// The preset the settings started from.
    pub preset: &'static str,
    /// The settings in force: the preset's, then the `--set` overrides (P4DB's: from its flags).
    pub settings: serde_json::Value,
    /// The figures, as the system names them.
    #[serde(flatten)]
    pub figures: serde_json::Value,
    /// Simulated events the run processed.
    pub events: u64,
    /// The hash of the run's event trace (equal seeds, equal hashes).
    pub trace_hash: String,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Simulated events per wall-clock second (the simulator's speed, for every system).
    pub events_per_wall_s: f64,
    /// Simulated committed transactions per wall-clock second (0 for a system without
    /// transactions).
    pub sim_txn_per_wall_s: f64,
    /// P4DB's rack flags (P4DB only: the other systems' inputs are their settings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<RackArgs>,
    /// The `--set` overrides applied.
    pub sets: Vec<String>,
    /// The table row the system gives the point.
    #[serde(skip)]
    pub row: Vec<(String, String)>,
}

impl Point {
    /// P4DB's figures, when the point is P4DB's.
    fn p4db(&self) -> Option<RunResult> {
        if self.system != "p4db" {
            return None;
        }
        // The event count and the trace hash are printed beside the figures; P4DB's result
        // holds them too.
        let mut figures = self.figures.clone();
        if let serde_json::Value::Object(map) = &mut figures {
            map.insert("events".into(), self.events.into());
            map.insert("trace_hash".into(), self.trace_hash.clone().into());
        }
        serde_json::from_value(figures).ok()
    }

    /// Committed transactions (for the simulator's speed): P4DB splits them into hot and cold,
    /// other systems report `commits`.
    fn committed(&self) -> f64 {
        let split: f64 = ["hot_committed", "cold_committed"].iter().filter_map(|k| self.figures[*k].as_f64()).sum();
        if split > 0.0 {
            split
        } else {
            self.figures["commits"].as_f64().unwrap_or(0.0)
        }
    }
}

/// The settings a system runs with: P4DB's come from the rack flags, every system's from its
/// defaults; then the `--set` overrides.
fn settings(system: &dyn System, rack: &RackArgs, sets: &[String]) -> Result<serde_json::Value, String> {
    let mut settings = if system.name() == "p4db" {
        // The variant decides the mode, not a setting: the rack's mode is dropped here.
        let rack_config = serde_json::to_value(rack.config(Mode::P4db)).map_err(|e| e.to_string())?;
        pisadb_p4db::system::without_mode(rack_config)
    } else {
        let (settings, preset) =
            pisadb_harness::preset_settings(system, rack.preset.harness_name()).map_err(|e| e.to_string())?;
        eprint!("{}", pisadb_harness::preset::describe(system, &preset));
        settings
    };
    for set in sets {
        apply_set(&mut settings, set).map_err(|e| e.to_string())?;
    }
    Ok(settings)
}

/// Runs one point of `variant` and measures the simulator's speed (the only wall clock in the
/// program).
pub(crate) fn run_point(system: &dyn System, variant: &str, rack: &RackArgs, sets: &[String]) -> Result<Point, String> {
    system.variant(variant).map_err(|e| e.to_string())?;
    let settings = settings(system, rack, sets)?;
    #[allow(clippy::disallowed_methods)] // the simulator's own speed is a wall-clock figure
    let started = std::time::Instant::now();
    let PointReport { system: name, variant, mut figures, row, events, trace_hash } =
        system.run_point(variant, &settings).map_err(|e| {
            if sets.is_empty() {
                e.to_string()
            } else {
                format!("{e} (with --set {})", sets.join(" --set "))
            }
        })?;
    let wall_s = started.elapsed().as_secs_f64();
    if let serde_json::Value::Object(map) = &mut figures {
        // Printed once, beside the figures.
        map.remove("events");
        map.remove("trace_hash");
    }
    let p4db = system.name() == "p4db";
    let mut point = Point {
        system: name,
        mode: variant.clone(),
        variant,
        preset: rack.preset.harness_name(),
        settings,
        figures,
        events,
        trace_hash,
        wall_s,
        events_per_wall_s: events as f64 / wall_s.max(1e-9),
        sim_txn_per_wall_s: 0.0,
        inputs: p4db.then(|| rack.clone()),
        sets: sets.to_vec(),
        row,
    };
    point.sim_txn_per_wall_s = point.committed() / wall_s.max(1e-9);
    Ok(point)
}

/// Runs `pisadb bench`.
pub(crate) fn run_bench(args: &Args) -> Result<(), String> {
    let system = args.system.system()?;
    let variant = args.variant.clone().unwrap_or_else(|| system.variants()[0].name.to_string());
    let point = run_point(system, &variant, &args.rack, &args.system.sets)?;
    if args.json {
        print_warnings(system, &args.rack, true);
        println!("{}", serde_json::to_string_pretty(&point).map_err(|e| e.to_string())?);
        return Ok(());
    }
    print_header(system, &args.rack, &args.system.sets);
    print_table(&[point]);
    Ok(())
}

/// Flags of `pisadb compare`.
#[derive(clap::Parser, Debug)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    system: SystemArgs,
    #[command(flatten)]
    rack: RackArgs,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `pisadb compare`: every variant of the system on the same workload and seed, its
/// baselines first.
pub(crate) fn run_compare(args: &CompareArgs) -> Result<(), String> {
    let system = args.system.system()?;
    if !args.json {
        print_header(system, &args.rack, &args.system.sets);
    }
    let mut points = Vec::new();
    let mut variants: Vec<&str> = system.variants().iter().map(|v| v.name).collect();
    variants.rotate_left(1); // the system itself last, after the baselines it is measured against
    for variant in variants {
        if !args.json {
            eprintln!("simulating {variant} ...");
        }
        points.push(run_point(system, variant, &args.rack, &args.system.sets)?);
    }
    if args.json {
        print_warnings(system, &args.rack, true);
        println!("{}", serde_json::to_string_pretty(&points).map_err(|e| e.to_string())?);
    } else {
        print_table(&points);
    }
    Ok(())
}

/// What ran: P4DB's rack flags describe its rack; another system's settings are its own
/// (`pisadb systems --settings NAME`), edited by the `--set`s.
fn print_header(system: &dyn System, r: &RackArgs, sets: &[String]) {
    if system.name() == "p4db" {
        if let Some(preset) = r.describe_preset() {
            println!("{preset}");
        }
        println!("{}", r.describe());
        print_warnings(system, r, false);
    } else if sets.is_empty() {
        println!(
            "{}: preset `{}` (pisadb systems --presets {})",
            system.paper(),
            r.preset.harness_name(),
            system.name()
        );
    } else {
        println!("{}: preset `{}` with --set {}", system.paper(), r.preset.harness_name(), sets.join(" --set "));
    }
    println!();
}

/// The warnings P4DB's switch-side flags call for (the `ideal` layout is an upper bound,
/// `parity` locks are not serializable): on stdout above a table, on stderr beside JSON.
fn print_warnings(system: &dyn System, r: &RackArgs, to_stderr: bool) {
    if system.name() != "p4db" {
        return;
    }
    for warning in r.switch_choices().warnings() {
        if to_stderr {
            eprintln!("{warning}");
        } else {
            println!("{warning}");
        }
    }
}

fn print_table(points: &[Point]) {
    let p4db: Option<Vec<RunResult>> = points.iter().map(Point::p4db).collect();
    match p4db {
        Some(results) => {
            print_p4db_table(points, &results);
            print_prototype_counts(points, &results);
        }
        None => print_rows(points),
    }
}

/// Under the prototype's engine: what became of the transactions begun in the window.
fn print_prototype_counts(points: &[Point], results: &[RunResult]) {
    for (p, r) in points.iter().zip(results) {
        let Some(c) = r.prototype else { continue };
        println!(
            "{:<10} prototype engine: {} transactions begun in the window, {} committed, {} skipped after an abort \
             (never retried); {} workers ran out of their {} pre-generated transactions (the run ends at the \
             window's end)",
            p.mode,
            c.started,
            r.hot_committed + r.cold_committed,
            c.skipped,
            c.workers_done,
            c.txns_per_worker
        );
    }
}

/// Any system's points: the columns its rows name, plus the simulator's speed in events per
/// wall second (a system may commit no transactions).
fn print_rows(points: &[Point]) {
    let Some(first) = points.first() else { return };
    let width = |i: usize| {
        points.iter().map(|p| p.row.get(i).map_or(0, |c| c.1.len())).chain([first.row[i].0.len()]).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..first.row.len()).map(width).collect();
    let header: Vec<String> = first.row.iter().zip(&widths).map(|((h, _), w)| format!("{h:>w$}")).collect();
    println!("{} {:>12}", header.join(" "), "sim events/s");
    for p in points {
        let cells: Vec<String> = p.row.iter().zip(&widths).map(|((_, c), w)| format!("{c:>w$}")).collect();
        println!("{} {:>12}", cells.join(" "), pisadb_report::format_si(p.events_per_wall_s));
    }
}

/// P4DB's table, as the README shows it: speedups against No-Switch.
fn print_p4db_table(points: &[Point], results: &[RunResult]) {
    let base = points.iter().zip(results).find(|(p, _)| p.mode == "no-switch").map(|(_, r)| r.committed_per_s);
    println!(
        "{:<10} {:>12} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
        "system", "commits/s", "speedup", "aborts", "hot", "cold", "p50 us", "p99 us", "passes", "recircs", "sim txn/s"
    );
    for (p, r) in points.iter().zip(results) {
        let speedup = base.map_or("-".to_string(), |b| format!("{:.2}x", r.committed_per_s / b));
        println!(
            "{:<10} {:>12.0} {:>8} {:>6.1}% {:>9} {:>9} {:>9.1} {:>9.1} {:>10} {:>10} {:>11.0}",
            p.mode,
            r.committed_per_s,
            speedup,
            r.abort_rate * 100.0,
            r.hot_committed,
            r.cold_committed,
            r.latency.latency_us_p50,
            r.latency.latency_us_p99,
            r.switch_passes,
            r.recirculations,
            p.sim_txn_per_wall_s
        );
    }
    for (p, r) in points.iter().zip(results) {
        if let Some(loss) = r.ideal {
            println!(
                "{}: the ideal layout did not execute {} operations of {} switch transactions ({} switch transactions committed)",
                p.mode, loss.dropped_ops, loss.truncated_txns, r.switch_committed
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use pisadb_p4db::node::CpuCosts;
    use pisadb_sim::net::LinkParams;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rack: RackArgs,
    }

    fn rack(args: &[&str]) -> RunConfig {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).expect("flags parse");
        cli.rack.config(Mode::P4db)
    }

    #[test]
    fn the_default_preset_is_pisadbs_model_as_before() {
        let cfg = rack(&[]);
        assert_eq!(cfg.engine, Engine::Pisadb);
        assert_eq!(cfg.costs, CpuCosts::calibrated());
        assert_eq!(cfg.link, LinkParams::ten_gbe());
        assert_eq!((cfg.layout, cfg.p4db.clone()), (LayoutChoice::Declustered, None), "the switch's defaults");
        let WorkloadSpec::Ycsb(y) = &cfg.workload else { panic!("YCSB") };
        assert_eq!(y, &YcsbConfig { rows: PISADB_ROWS, partitioning: Scheme::RoundRobin, ..YcsbConfig::default() });
    }

    #[test]
    fn the_testbed_preset_selects_the_prototypes_workload_engine_latencies_and_costs() {
        let cfg = rack(&["--preset", "p4db-testbed"]);
        assert_eq!(cfg.engine, Engine::Prototype);
        assert_eq!(cfg.txns_per_worker, testbed::TXNS_PER_WORKER);
        assert_eq!(cfg.costs, CpuCosts::testbed());
        assert_eq!(cfg.link, testbed::link(&cfg.profile, &cfg.costs));
        assert_eq!(cfg.workload, WorkloadSpec::Ycsb(YcsbConfig::prototype(YcsbMix::A)));
        // The real layout, P4DB's: the paper's SWITCH_NO_CONFLICT runs take an explicit --layout
        // ideal, since that layout skips operations.
        assert_eq!(cfg.layout, LayoutChoice::Declustered);
        assert_eq!(rack(&["--preset", "p4db-testbed", "--layout", "ideal"]).layout, LayoutChoice::Ideal);
        assert_eq!(cfg.p4db_config().recirculation, RecirculationModel::TwoPortFifo);
        let cfg = rack(&["--preset", "p4db-testbed", "--workload", "smallbank"]);
        assert_eq!(cfg.workload, WorkloadSpec::SmallBank(SmallBankConfig::prototype()));
        let cfg = rack(&["--preset", "p4db-testbed", "--workload", "tpcc", "--warehouses", "16"]);
        assert_eq!(cfg.workload, WorkloadSpec::Tpcc(TpccConfig::prototype(16)));
    }

    #[test]
    fn explicit_flags_override_the_testbed_preset() {
        let cfg = rack(&[
            "--preset",
            "p4db-testbed",
            "--rows",
            "5000",
            "--partitioning",
            "round-robin",
            "--remote",
            "50",
            "--engine",
            "pisadb",
            "--txns-per-worker",
            "7",
            "--layout",
            "random",
            "--recirculation",
            "priority",
        ]);
        assert_eq!(cfg.layout, LayoutChoice::Random);
        assert_eq!(cfg.p4db_config().recirculation, RecirculationModel::Priority);
        let WorkloadSpec::Ycsb(y) = &cfg.workload else { panic!("YCSB") };
        assert_eq!((y.rows, y.partitioning, y.remote_prob), (5_000, Scheme::RoundRobin, 0.5));
        assert_eq!(y.remote_rule, YcsbConfig::prototype(YcsbMix::A).remote_rule, "the rest stays the prototype's");
        assert_eq!((cfg.engine, cfg.txns_per_worker), (Engine::Pisadb, 7));
        assert_eq!(cfg.costs, CpuCosts::testbed(), "the testbed's costs stay");
    }
}
