//! P4DB's real-mode settings: the rack and load a real run takes, as `--set KEY=VALUE` keys.
//!
//! The simulator's settings are a whole [`RunConfig`]; a real rack takes only a few of them, and
//! two of its own (the peer timeout and whether to keep every commit for the checks). So real
//! mode has its own small, flat set of settings ([`RealSettings`]), each named as the flag it
//! was before it was a setting (`nodes`, `workers`, `cc`, `workload`, `rows`, …), and the old
//! flags stay as aliases ([`ALIASES`]: `--nodes 4` is `--set nodes=4`, `--mode` is
//! `--variant`). [`RealSettings::run_config`] builds the [`RunConfig`] every process of the rack
//! plans from: PisaDB's own preset (PisaDB's engine: the prototype's has no log and no
//! timeouts), P4DB's declustered layout, stage locks and priority recirculation, with the
//! workload's rows spread round-robin.

use crate::node::{Cc, Mode};
use crate::programs::p4db::{FineLocks, RecirculationModel};
use crate::{LayoutChoice, RunConfig};
use pisadb_harness::real::{AliasTo, FlagAlias};
use pisadb_workload::Scheme;
use serde::{Deserialize, Serialize};

/// The workload of a real rack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RealWorkload {
    /// YCSB-A: 8 operations, 50% writes.
    #[serde(alias = "a")]
    YcsbA,
    /// YCSB-B: 5% writes.
    #[serde(alias = "b")]
    YcsbB,
    /// YCSB-C: read only.
    #[serde(alias = "c")]
    YcsbC,
    /// SmallBank's six transaction types.
    Smallbank,
    /// TPC-C NewOrder and Payment.
    Tpcc,
}

/// Concurrency control on the nodes, spelled as the command line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RealCc {
    /// Abort on any lock conflict.
    #[serde(alias = "NoWait")]
    NoWait,
    /// Older transactions wait, younger ones abort.
    #[serde(alias = "WaitDie")]
    WaitDie,
}

impl From<RealCc> for Cc {
    fn from(cc: RealCc) -> Cc {
        match cc {
            RealCc::NoWait => Cc::NoWait,
            RealCc::WaitDie => Cc::WaitDie,
        }
    }
}

/// A real P4DB rack's settings (`--set KEY=VALUE`; see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealSettings {
    /// Database nodes, one process each (1..=64).
    pub nodes: u16,
    /// Workers per node (logical: one transaction each, one thread per node process; 1..=64).
    pub workers: u16,
    /// Concurrency control for transactions on the nodes: no-wait or wait-die.
    pub cc: RealCc,
    /// The workload: ycsb-a, ycsb-b, ycsb-c, smallbank or tpcc.
    pub workload: RealWorkload,
    /// Rows over all nodes: YCSB keys or SmallBank accounts (at least 1).
    pub rows: u64,
    /// TPC-C warehouses (1..=1024, a multiple of the nodes).
    pub warehouses: u16,
    /// Percent of distributed transactions (0..=100; `null`: the workload's default).
    pub remote: Option<u8>,
    /// Percent of transactions on the hot set (0..=100; `null`: the workload's default).
    pub hot_prob: Option<u8>,
    /// Seed of the workload and layout.
    pub seed: u64,
    /// A worker aborts an attempt another node has not answered within this many ms.
    pub peer_timeout_ms: u64,
    /// Keep every committed transaction and the final stores for the end-of-run checks.
    pub verify: bool,
}

impl Default for RealSettings {
    fn default() -> Self {
        RealSettings {
            nodes: 4,
            workers: 4,
            cc: RealCc::NoWait,
            workload: RealWorkload::Smallbank,
            rows: 100_000,
            warehouses: 4,
            remote: None,
            hot_prob: None,
            seed: 1,
            peer_timeout_ms: 50,
            verify: true,
        }
    }
}

/// P4DB's flags of `pisadb cluster` from before they were settings, kept as aliases.
pub const ALIASES: &[FlagAlias] = &[
    FlagAlias { flag: "--mode", to: AliasTo::Flag("--variant") },
    FlagAlias { flag: "--nodes", to: AliasTo::Set("nodes") },
    FlagAlias { flag: "--workers", to: AliasTo::Set("workers") },
    FlagAlias { flag: "--cc", to: AliasTo::Set("cc") },
    FlagAlias { flag: "--workload", to: AliasTo::Set("workload") },
    FlagAlias { flag: "--rows", to: AliasTo::Set("rows") },
    FlagAlias { flag: "--warehouses", to: AliasTo::Set("warehouses") },
    FlagAlias { flag: "--remote", to: AliasTo::Set("remote") },
    FlagAlias { flag: "--hot-prob", to: AliasTo::Set("hot_prob") },
    FlagAlias { flag: "--seed", to: AliasTo::Set("seed") },
    FlagAlias { flag: "--peer-timeout-ms", to: AliasTo::Set("peer_timeout_ms") },
    FlagAlias { flag: "--no-verify", to: AliasTo::Assign("verify=false") },
];

impl RealSettings {
    /// Refuses a value out of range, naming the setting and the values accepted.
    pub fn check(&self) -> Result<(), String> {
        let out = |key: &str, value: &dyn std::fmt::Display, accepted: &str| {
            Err(format!("--set {key}={value}: expected {accepted}"))
        };
        if !(1..=64).contains(&self.nodes) {
            return out("nodes", &self.nodes, "1..=64");
        }
        if !(1..=64).contains(&self.workers) {
            return out("workers", &self.workers, "1..=64");
        }
        if self.rows == 0 {
            return out("rows", &self.rows, "at least 1");
        }
        if !(1..=1024).contains(&self.warehouses) {
            return out("warehouses", &self.warehouses, "1..=1024");
        }
        for (key, percent) in [("remote", self.remote), ("hot_prob", self.hot_prob)] {
            if let Some(p) = percent.filter(|&p| p > 100) {
                return out(key, &p, "a percentage, 0..=100");
            }
        }
        Ok(())
    }

    /// The rack's run configuration in `mode` (see the module documentation).
    pub fn run_config(&self, mode: Mode) -> RunConfig {
        // One planner of a rack from its keys: the bench's (`crate::flags::Rack`), on PisaDB's
        // model with round-robin partitioning, the declustered layout and staged locks.
        let workload = match self.workload {
            RealWorkload::YcsbA => "ycsb-a",
            RealWorkload::YcsbB => "ycsb-b",
            RealWorkload::YcsbC => "ycsb-c",
            RealWorkload::Smallbank => "smallbank",
            RealWorkload::Tpcc => "tpcc",
        };
        let rack = crate::flags::Rack {
            testbed: false,
            engine: None,
            txns_per_worker: None,
            cc: self.cc.into(),
            nodes: self.nodes,
            workers: self.workers,
            workload,
            remote: self.remote,
            hot_prob: self.hot_prob,
            hot_per_node: None,
            rows: Some(self.rows),
            warehouses: self.warehouses,
            partitioning: Some(Scheme::RoundRobin),
            layout: LayoutChoice::Declustered,
            fine_locks: FineLocks::Stages,
            recirculation: Some(RecirculationModel::Priority),
            seed: self.seed,
            measure_ms: 1,
            warmup_ms: 0,
        };
        rack.config(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;

    fn with(sets: &[&str]) -> Result<RealSettings, String> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let defaults = serde_json::to_value(RealSettings::default()).unwrap();
        let s: RealSettings = pisadb_harness::read_back(defaults, &sets).map_err(|e| e.to_string())?;
        s.check().map(|()| s)
    }

    #[test]
    fn the_old_flags_values_are_read_as_settings() {
        let s = with(&["nodes=3", "cc=wait-die", "workload=tpcc", "remote=20", "verify=false"]).unwrap();
        assert_eq!(
            (s.nodes, s.cc, s.workload, s.remote, s.verify),
            (3, RealCc::WaitDie, RealWorkload::Tpcc, Some(20), false)
        );
        assert_eq!(with(&["workload=a"]).unwrap().workload, RealWorkload::YcsbA);
        assert_eq!(with(&["cc=WaitDie"]).unwrap().cc, RealCc::WaitDie);
    }

    #[test]
    fn values_out_of_range_are_refused_naming_the_setting_and_the_values_accepted() {
        assert_eq!(with(&["nodes=0"]).unwrap_err(), "--set nodes=0: expected 1..=64");
        assert_eq!(with(&["workers=65"]).unwrap_err(), "--set workers=65: expected 1..=64");
        assert_eq!(with(&["hot_prob=101"]).unwrap_err(), "--set hot_prob=101: expected a percentage, 0..=100");
        assert!(with(&["workload=tpcd"]).unwrap_err().contains("ycsb-a"));
        assert!(with(&["cc=wait"]).unwrap_err().contains("no-wait"));
    }

    #[test]
    fn the_run_configuration_carries_the_settings() {
        let s = with(&["nodes=3", "workers=2", "rows=3000", "hot_prob=50"]).unwrap();
        let cfg = s.run_config(Mode::LmSwitch);
        assert_eq!((cfg.nodes, cfg.workers, cfg.mode, cfg.seed), (3, 2, Mode::LmSwitch, 1));
        let WorkloadSpec::SmallBank(b) = cfg.workload else { panic!("SmallBank") };
        assert_eq!((b.nodes, b.accounts, b.hot_prob, b.partitioning), (3, 3000, 0.5, Scheme::RoundRobin));
    }

    /// The real rack is planned from its real-mode settings, no longer from the bench's flags:
    /// the run configuration is the one those flags planned (`crate::flags::Rack`, the port of
    /// the old `RackArgs`), so no real-mode figure moves.
    #[test]
    fn real_settings_plan_the_rack_the_bench_flags_planned() {
        use crate::flags::Rack;
        let cases = [
            ("smallbank", RealWorkload::Smallbank, Cc::NoWait, RealCc::NoWait, None, None),
            ("ycsb-a", RealWorkload::YcsbA, Cc::WaitDie, RealCc::WaitDie, Some(30), Some(60)),
            ("ycsb-c", RealWorkload::YcsbC, Cc::NoWait, RealCc::NoWait, None, Some(10)),
            ("tpcc", RealWorkload::Tpcc, Cc::NoWait, RealCc::NoWait, Some(5), None),
        ];
        for (workload, real_workload, cc, real_cc, remote, hot_prob) in cases {
            let flags = Rack {
                testbed: false,
                engine: None,
                txns_per_worker: None,
                cc,
                nodes: 3,
                workers: 2,
                workload,
                remote,
                hot_prob,
                hot_per_node: None,
                rows: Some(3000),
                warehouses: 6,
                partitioning: Some(Scheme::RoundRobin),
                layout: LayoutChoice::Declustered,
                fine_locks: FineLocks::Stages,
                recirculation: None,
                seed: 7,
                measure_ms: 1,
                warmup_ms: 0,
            };
            let settings = RealSettings {
                nodes: 3,
                workers: 2,
                cc: real_cc,
                workload: real_workload,
                rows: 3000,
                warehouses: 6,
                remote,
                hot_prob,
                seed: 7,
                ..RealSettings::default()
            };
            for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
                let (old, new) = (flags.config(mode), settings.run_config(mode));
                assert_eq!(serde_json::to_value(new).unwrap(), serde_json::to_value(old).unwrap(), "{workload}");
            }
        }
    }
}
