//! P4DB's rack keys: the `--set` keys that describe a rack and its workload the way P4DB's
//! command line always has (`--workload`, `--nodes`, `--layout`, …), and the flags that spell
//! them ([`FLAG_ALIASES`]).
//!
//! P4DB's settings are its whole run configuration ([`RunConfig`]), so most of them are dotted
//! paths (`link.gbps`, `workload.Ycsb.hot_prob`). A few things a user asks for are not one path:
//! `workload=smallbank` replaces the workload with SmallBank's definition (PisaDB's or, under the
//! `paper` preset, the prototype's), `nodes=4` sizes the rack *and* the workload, `remote=20`
//! is a percent that lands in whichever workload runs, and the `paper` preset also changes the
//! rows, the partitioning and the recirculation a flag left alone. [`Rack`] collects these keys
//! (in any order: the rack is built once from all of them) and [`settings`] builds the run
//! configuration from them before the other `--set`s edit it as paths.
//!
//! A key that is also a path of the configuration (`workers`, `seed`, `cc`, `layout`, `engine`)
//! is a rack key when its value is one the flag accepts (`cc=no-wait`) and a path otherwise
//! (`cc=WaitDie`), so both spellings work and a bad value gets the configuration's own error.

use crate::experiments::SwitchChoices;
use crate::node::{Cc, Engine, Mode};
use crate::programs::p4db::{FineLocks, RecirculationModel};
use crate::run::{LayoutChoice, RunConfig, WorkloadSpec};
use crate::testbed;
use pisadb_harness::{apply_set, FlagAlias, HarnessError};
use pisadb_workload::{RemoteRule, Scheme, SmallBankConfig, TpccConfig, YcsbConfig, YcsbMix};
use serde_json::Value;

/// Rows over all nodes the `pisadb` preset runs (YCSB keys, SmallBank accounts).
pub const PISADB_ROWS: u64 = 1_000_000;

const fn alias(
    flag: &'static str,
    key: &'static str,
    values: &'static [&'static str],
    help: &'static str,
) -> FlagAlias {
    FlagAlias { flag, key, values, help, experiments: false }
}

const fn for_experiments(alias: FlagAlias) -> FlagAlias {
    FlagAlias { experiments: true, ..alias }
}

/// The flags P4DB's command line has always had, each another spelling of a rack key.
pub static FLAG_ALIASES: [FlagAlias; 18] = [
    alias("workload", "workload", &["ycsb-a", "a", "ycsb-b", "b", "ycsb-c", "c", "smallbank", "tpcc"],
        "P4DB: the workload: YCSB-A (8 operations, 50% writes), -B (5% writes), -C (read only), SmallBank, or TPC-C NewOrder and Payment [default: ycsb-a]"),
    alias("nodes", "nodes", &[], "P4DB: database nodes [default: 8]"),
    alias("workers", "workers", &[], "P4DB: worker cores per node, each running one transaction at a time [default: 20]"),
    alias("engine", "engine", &["pisadb", "prototype"],
        "P4DB: how the nodes run transactions: PisaDB's engine, or the P4DB prototype's (pre-generated transactions, one remote key per round trip) [default: pisadb; prototype under --preset paper]"),
    alias("txns-per-worker", "txns_per_worker", &[],
        "P4DB, the prototype's engine: transactions pre-generated per worker [default: the prototype's 500000]"),
    for_experiments(alias("cc", "cc", &["no-wait", "wait-die"], "P4DB: concurrency control for transactions on the nodes [default: no-wait]")),
    alias("remote", "remote", &[],
        "P4DB: percent of distributed transactions (YCSB, SmallBank; default 20); for TPC-C the remote-item and remote-customer probability (default: the standard's 1% and 15%)"),
    alias("hot-prob", "hot_prob", &[], "P4DB: percent of transactions on the hot set (YCSB default 75, SmallBank 90; not TPC-C)"),
    alias("hot-per-node", "hot_per_node", &[], "P4DB: hot tuples per node (YCSB default 50 keys, SmallBank 15 accounts; not TPC-C)"),
    alias("rows", "rows", &[],
        "P4DB: rows over all nodes, YCSB keys or SmallBank accounts [default: 1000000; the prototype's 10000000 YCSB keys under --preset paper]"),
    alias("warehouses", "warehouses", &[], "P4DB: TPC-C warehouses, a multiple of --nodes [default: 8]"),
    alias("partitioning", "partitioning", &["round-robin", "range"],
        "P4DB: how rows are spread over the nodes (YCSB, SmallBank; TPC-C is always by warehouse) [default: round-robin; range under --preset paper]"),
    for_experiments(alias("layout", "layout", &["declustered", "random", "ideal", "shuffled"],
        "P4DB: the hot set's layout on the switch: declustered (P4DB's algorithm), random (the prototype's idx % N), ideal (the prototype's SWITCH_NO_CONFLICT upper bound: one pass, no locks, operations past the first pass not executed; the paper's headline runs), shuffled [default: declustered]")),
    for_experiments(alias("fine-locks", "fine_locks", &["stages", "parity", "whole-pipeline"],
        "P4DB: which pipeline-lock halves a multi-pass transaction takes: stages (the halves it touches, P4DB §5.3), parity (one half by its first key's parity, the prototype's Fig. 15c; not serializable), whole-pipeline [default: stages]")),
    for_experiments(alias("recirculation", "recirculation", &["priority", "fifo", "two-port-fifo"],
        "P4DB: how the switch recirculates: priority (every port, long waiters first) or fifo (the prototype's one slow and one fast port, first come, first served) [default: priority; fifo under --preset paper]")),
    alias("seed", "seed", &[], "P4DB: seed of everything; the same seed gives the same run [default: 1]"),
    alias("measure-ms", "measure_ms", &[], "P4DB: simulated milliseconds measured, after the warm-up [default: 10]"),
    alias("warmup-ms", "warmup_ms", &[], "P4DB: simulated milliseconds of warm-up, not measured [default: 1]"),
];

/// The rack and workload the rack keys describe; what a key leaves alone is the preset's.
#[derive(Clone, Debug, PartialEq)]
pub struct Rack {
    /// The `paper` preset: the prototype's workload definitions, engine, links and costs.
    pub testbed: bool,
    /// `engine`: how the nodes run transactions (default: the preset's).
    pub engine: Option<Engine>,
    /// `txns_per_worker`: the prototype engine's pre-generated transactions per worker.
    pub txns_per_worker: Option<u64>,
    /// `cc`: concurrency control on the nodes.
    pub cc: Cc,
    /// `nodes`: database nodes (the rack's and the workload's).
    pub nodes: u16,
    /// `workers`: worker cores per node.
    pub workers: u16,
    /// `workload`: its name as the flag spells it (`ycsb-a`, `smallbank`, `tpcc`, …).
    pub workload: &'static str,
    /// `remote`: percent of distributed transactions (TPC-C: remote items and customers).
    pub remote: Option<u8>,
    /// `hot_prob`: percent of transactions on the hot set.
    pub hot_prob: Option<u8>,
    /// `hot_per_node`: hot tuples per node.
    pub hot_per_node: Option<u64>,
    /// `rows`: YCSB keys or SmallBank accounts over all nodes.
    pub rows: Option<u64>,
    /// `warehouses`: TPC-C warehouses.
    pub warehouses: u16,
    /// `partitioning`: how rows are spread over the nodes.
    pub partitioning: Option<Scheme>,
    /// `layout`: the hot set's layout on the switch.
    pub layout: LayoutChoice,
    /// `fine_locks`: the pipeline-lock halves of multi-pass transactions.
    pub fine_locks: FineLocks,
    /// `recirculation`: the switch's recirculation model (default: the preset's).
    pub recirculation: Option<RecirculationModel>,
    /// `seed`: seed of everything.
    pub seed: u64,
    /// `measure_ms`: simulated milliseconds measured.
    pub measure_ms: u64,
    /// `warmup_ms`: simulated milliseconds of warm-up.
    pub warmup_ms: u64,
}

/// A whole number in `lo..=hi`, or an error naming the key and the range.
fn number<T: TryFrom<u64>>(key: &str, value: &str, lo: u64, hi: u64) -> Result<T, String> {
    let n = value.parse::<u64>().ok().filter(|n| (lo..=hi).contains(n));
    n.and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("`{key}` takes a whole number from {lo} to {hi}, not `{value}`"))
}

impl Rack {
    /// The rack of no keys: P4DB's defaults, under the `paper` preset if `testbed`.
    pub fn new(testbed: bool) -> Rack {
        Rack {
            testbed,
            engine: None,
            txns_per_worker: None,
            cc: Cc::NoWait,
            nodes: 8,
            workers: 20,
            workload: "ycsb-a",
            remote: None,
            hot_prob: None,
            hot_per_node: None,
            rows: None,
            warehouses: 8,
            partitioning: None,
            layout: LayoutChoice::Declustered,
            fine_locks: FineLocks::Stages,
            recirculation: None,
            seed: 1,
            measure_ms: 10,
            warmup_ms: 1,
        }
    }

    /// Takes `key=value` if `key` is a rack key with a value its flag accepts: `Ok(true)`;
    /// `Ok(false)` leaves it to the configuration's paths (a key that is also a path, with a
    /// value the flag does not spell); `Err` names the key and what it takes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let key = key.replace('-', "_");
        let Some(alias) = FLAG_ALIASES.iter().find(|a| a.key == key) else { return Ok(false) };
        let path_spelling = match key.as_str() {
            // Paths of the configuration too, whose readers name what they take.
            "cc" => !alias.values.contains(&value),
            "workload" => value.starts_with('{'),
            "nodes" | "workers" | "txns_per_worker" | "seed" => value.parse::<u64>().is_err(),
            _ => false,
        };
        if path_spelling {
            return Ok(false);
        }
        if !alias.values.is_empty() && !alias.values.contains(&value) {
            return Err(format!("`{key}` takes one of {}, not `{value}`", alias.values.join(", ")));
        }
        match key.as_str() {
            "workload" => self.workload = alias.values.iter().find(|v| **v == value).copied().unwrap_or("ycsb-a"),
            "nodes" => self.nodes = number(&key, value, 1, 1024)?,
            "workers" => self.workers = number(&key, value, 1, 64)?,
            "engine" => self.engine = Some(if value == "prototype" { Engine::Prototype } else { Engine::Pisadb }),
            "txns_per_worker" => self.txns_per_worker = Some(number(&key, value, 1, u64::MAX)?),
            "cc" => self.cc = if value == "wait-die" { Cc::WaitDie } else { Cc::NoWait },
            "remote" => self.remote = Some(number(&key, value, 0, 100)?),
            "hot_prob" => self.hot_prob = Some(number(&key, value, 0, 100)?),
            "hot_per_node" => self.hot_per_node = Some(number(&key, value, 1, u64::MAX)?),
            "rows" => self.rows = Some(number(&key, value, 1, u64::MAX)?),
            "warehouses" => self.warehouses = number(&key, value, 1, 1024)?,
            "partitioning" => {
                self.partitioning = Some(if value == "range" { Scheme::Range } else { Scheme::RoundRobin })
            }
            "layout" => self.layout = serde_json::from_value(Value::from(value)).map_err(|e| e.to_string())?,
            "fine_locks" => self.fine_locks = serde_json::from_value(Value::from(value)).map_err(|e| e.to_string())?,
            "recirculation" => {
                let priority = value == "priority";
                self.recirculation =
                    Some(if priority { RecirculationModel::Priority } else { RecirculationModel::TwoPortFifo })
            }
            "seed" => self.seed = number(&key, value, 0, u64::MAX)?,
            "measure_ms" => self.measure_ms = number(&key, value, 1, 10_000)?,
            _ => self.warmup_ms = number(&key, value, 0, 10_000)?,
        }
        Ok(true)
    }

    /// The layout, lock and recirculation choices; the testbed recirculates as the prototype's
    /// switch does (two FIFO ports) unless told otherwise.
    pub fn switch_choices(&self) -> SwitchChoices {
        let fifo = if self.testbed { testbed::RECIRCULATION } else { RecirculationModel::Priority };
        SwitchChoices {
            layout: Some(self.layout),
            fine_locks: Some(self.fine_locks),
            recirculation: Some(self.recirculation.unwrap_or(fifo)),
        }
    }

    /// The run configuration for `mode`.
    pub fn config(&self, mode: Mode) -> RunConfig {
        let pct = |p: u8| f64::from(p) / 100.0;
        let testbed = self.testbed;
        // PisaDB's preset keeps the command line's historical defaults; the testbed's are the prototype's.
        let rows = |prototype_rows: u64| self.rows.unwrap_or(if testbed { prototype_rows } else { PISADB_ROWS });
        let partitioning =
            |prototype: Scheme| self.partitioning.unwrap_or(if testbed { prototype } else { Scheme::RoundRobin });
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
            "ycsb-a" | "a" => ycsb(YcsbMix::A),
            "ycsb-b" | "b" => ycsb(YcsbMix::B),
            "ycsb-c" | "c" => ycsb(YcsbMix::C),
            "smallbank" => {
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
            _ => {
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
            cc: self.cc,
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
            cfg.engine = engine;
        }
        if let Some(n) = self.txns_per_worker {
            cfg.txns_per_worker = n;
        }
        cfg
    }
}

/// Whether preset `name` is the prototype's testbed (`paper`, old name `p4db-testbed`), or
/// an error naming P4DB's presets.
pub fn is_testbed(name: &str) -> Result<bool, HarnessError> {
    let preset = pisadb_harness::preset::lookup("p4db", crate::presets::presets(), name)?;
    Ok(preset.name == "paper")
}

/// The settings of a point under preset `preset` with `sets`: the rack keys among them build
/// the run configuration ([`Rack`]), the others then edit it as paths, in order.
pub fn settings(preset: &str, sets: &[String]) -> Result<Value, HarnessError> {
    let mut rack = Rack::new(is_testbed(preset)?);
    let mut paths = Vec::new();
    for set in sets {
        let (key, value) = set.split_once('=').ok_or_else(|| pisadb_harness::SettingsError::Syntax(set.clone()))?;
        let taken = rack
            .set(key.trim(), value.trim())
            .map_err(|why| HarnessError::Run { system: "p4db".into(), why: format!("--set {set}: {why}") })?;
        if !taken {
            paths.push(set);
        }
    }
    let config = serde_json::to_value(rack.config(Mode::P4db)).expect("a run configuration serializes");
    // The variant decides the mode, not a setting.
    let mut settings = crate::system::without_mode(config);
    for set in paths {
        apply_set(&mut settings, set)?;
    }
    Ok(settings)
}

/// One line describing the rack and workload of `cfg`.
pub fn describe(cfg: &RunConfig) -> String {
    // What the remote probability means under each rule.
    let remote = |p: f64, rule: RemoteRule, unit: &str| match rule {
        RemoteRule::PerTransaction => format!("{:.0}% distributed", p * 100.0),
        RemoteRule::PerKey => format!("each {unit} remote with {:.0}%", p * 100.0),
    };
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
        "{workload} on {} nodes x {} workers, {:?}, {:?} layout{switch}, {} engine, seed {}; {} ms simulated after {} ms \
         warm-up",
        cfg.nodes,
        cfg.workers,
        cfg.cc,
        cfg.layout,
        cfg.engine.name(),
        cfg.seed,
        cfg.measure_ns / 1_000_000,
        cfg.warmup_ns / 1_000_000
    )
}

/// The warnings a run of `cfg` calls for: the `ideal` layout is an upper bound, `parity` locks
/// are not serializable.
pub fn warnings(cfg: &RunConfig) -> Vec<String> {
    let layout = cfg.layout.warning();
    let locks = cfg.p4db_config().fine_locks.warning();
    layout.into_iter().chain(locks).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::CpuCosts;
    use pisadb_sim::net::LinkParams;

    fn rack(preset: &str, sets: &[&str]) -> RunConfig {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        crate::system::SYSTEM.config("p4db", &settings(preset, &sets).expect("valid")).expect("reads back")
    }

    #[test]
    fn the_default_preset_is_pisadbs_model_as_before() {
        let cfg = rack("pisadb", &[]);
        assert_eq!(cfg.engine, Engine::Pisadb);
        assert_eq!(cfg.costs, CpuCosts::calibrated());
        assert_eq!(cfg.link, LinkParams::ten_gbe());
        assert_eq!((cfg.layout, cfg.p4db.clone()), (LayoutChoice::Declustered, None), "the switch's defaults");
        let WorkloadSpec::Ycsb(y) = &cfg.workload else { panic!("YCSB") };
        assert_eq!(y, &YcsbConfig { rows: PISADB_ROWS, partitioning: Scheme::RoundRobin, ..YcsbConfig::default() });
    }

    #[test]
    fn the_testbed_preset_selects_the_prototypes_workload_engine_latencies_and_costs() {
        let cfg = rack("p4db-testbed", &[]);
        assert_eq!(cfg.engine, Engine::Prototype);
        assert_eq!(cfg.txns_per_worker, testbed::TXNS_PER_WORKER);
        assert_eq!(cfg.costs, CpuCosts::testbed());
        assert_eq!(cfg.link, testbed::link(&cfg.profile, &cfg.costs));
        assert_eq!(cfg.workload, WorkloadSpec::Ycsb(YcsbConfig::prototype(YcsbMix::A)));
        // The real layout, P4DB's: the paper's SWITCH_NO_CONFLICT runs take an explicit
        // `layout=ideal`, since that layout skips operations.
        assert_eq!(cfg.layout, LayoutChoice::Declustered);
        assert_eq!(rack("paper", &["layout=ideal"]).layout, LayoutChoice::Ideal);
        assert_eq!(cfg.p4db_config().recirculation, RecirculationModel::TwoPortFifo);
        let cfg = rack("paper", &["workload=smallbank"]);
        assert_eq!(cfg.workload, WorkloadSpec::SmallBank(SmallBankConfig::prototype()));
        let cfg = rack("paper", &["warehouses=16", "workload=tpcc"]);
        assert_eq!(cfg.workload, WorkloadSpec::Tpcc(TpccConfig::prototype(16)));
    }

    #[test]
    fn explicit_keys_override_the_testbed_preset() {
        let cfg = rack(
            "paper",
            &[
                "rows=5000",
                "partitioning=round-robin",
                "remote=50",
                "engine=pisadb",
                "txns_per_worker=7",
                "layout=random",
                "recirculation=priority",
            ],
        );
        assert_eq!(cfg.layout, LayoutChoice::Random);
        assert_eq!(cfg.p4db_config().recirculation, RecirculationModel::Priority);
        let WorkloadSpec::Ycsb(y) = &cfg.workload else { panic!("YCSB") };
        assert_eq!((y.rows, y.partitioning, y.remote_prob), (5_000, Scheme::RoundRobin, 0.5));
        assert_eq!(y.remote_rule, YcsbConfig::prototype(YcsbMix::A).remote_rule, "the rest stays the prototype's");
        assert_eq!((cfg.engine, cfg.txns_per_worker), (Engine::Pisadb, 7));
        assert_eq!(cfg.costs, CpuCosts::testbed(), "the testbed's costs stay");
    }

    #[test]
    fn nodes_size_the_workload_too_and_paths_edit_after_the_rack() {
        let cfg = rack("pisadb", &["workers=3", "nodes=4", "cc=WaitDie", "workload.Ycsb.hot_prob=0.5"]);
        let WorkloadSpec::Ycsb(y) = &cfg.workload else { panic!("YCSB") };
        assert_eq!((cfg.nodes, y.nodes, cfg.workers, cfg.cc, y.hot_prob), (4, 4, 3, Cc::WaitDie, 0.5));
        assert_eq!(rack("pisadb", &["cc=wait-die"]).cc, Cc::WaitDie, "the flag's spelling");
    }

    #[test]
    fn bad_rack_values_and_presets_are_refused_naming_what_is_accepted() {
        let err = |preset: &str, set: &str| settings(preset, &[set.to_string()]).unwrap_err().to_string();
        assert!(err("pisadb", "nodes=0").contains("`nodes` takes a whole number from 1 to 1024, not `0`"));
        assert!(err("pisadb", "remote=150").contains("from 0 to 100"));
        assert!(err("pisadb", "partitioning=hash").contains("round-robin, range"));
        let optimistic = settings("pisadb", &["cc=Optimistic".to_string()]).expect("a path's value, read back later");
        let read_back = crate::system::SYSTEM.config("p4db", &optimistic).unwrap_err().to_string();
        assert!(read_back.contains("expected `NoWait` or `WaitDie`"), "{read_back}");
        assert!(err("pisadb", "workers=many").contains("`workers` takes a number, not `many`"));
        assert!(err("lab", "nodes=2").contains("no preset `lab`; its presets: pisadb, paper"));
    }
}
