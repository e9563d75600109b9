//! P4DB's rack flags as `pisadb cluster` and `pisadb switch-bench` (`src/commands/real.rs`)
//! still spell them, until real mode's P4DB rack moves behind the real-mode contract into
//! `systems/p4db` (issue 28): then this file goes.
//!
//! `bench`, `compare` and `sweep` no longer read these: their P4DB flags are aliases of P4DB's
//! `--set` keys ([`pisadb_p4db::flags`]). What is left here is only the spelling real mode's
//! flags parse; the rack they describe is built by P4DB's own [`Rack`], the one place that
//! knows what a rack key means.

use clap::ValueEnum;
use pisadb_harness::System;
use pisadb_p4db::flags::Rack;
use pisadb_p4db::node::{Cc, Engine, Mode};
use pisadb_p4db::programs::p4db::{FineLocks, RecirculationModel};
use pisadb_p4db::{LayoutChoice, RunConfig};
use pisadb_workload::Scheme;

/// P4DB's variant, as real mode's `--mode` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
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

/// Concurrency control, as real mode's `--cc` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CcArg {
    /// Abort on any lock conflict.
    NoWait,
    /// Older transactions wait, younger ones abort.
    WaitDie,
}

/// The workload, as real mode's `--workload` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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

/// Real mode runs PisaDB's own preset only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Preset {
    /// PisaDB's model.
    Pisadb,
}

/// The layout real mode's rack takes (always declustered).
pub(crate) type LayoutArg = LayoutChoice;
/// The lock halves real mode's rack takes (always the stages').
pub(crate) type FineLocksArg = FineLocks;
/// The partitioning real mode's rack takes (always round-robin).
pub(crate) type PartitioningArg = Scheme;

/// A real rack's load, as real mode fills it in; [`RackArgs::config`] builds it with P4DB's
/// [`Rack`].
#[derive(Clone, Debug)]
pub(crate) struct RackArgs {
    pub preset: Preset,
    pub engine: Option<Engine>,
    pub txns_per_worker: Option<u64>,
    pub cc: CcArg,
    pub nodes: u16,
    pub workers: u16,
    pub workload: WorkloadArg,
    pub remote: Option<u8>,
    pub hot_prob: Option<u8>,
    pub hot_per_node: Option<u64>,
    pub rows: Option<u64>,
    pub warehouses: u16,
    pub partitioning: Option<PartitioningArg>,
    pub layout: LayoutArg,
    pub fine_locks: FineLocksArg,
    pub recirculation: Option<RecirculationModel>,
    pub seed: u64,
    pub measure_ms: u64,
    pub warmup_ms: u64,
}

impl RackArgs {
    /// The run configuration for `mode`.
    pub(crate) fn config(&self, mode: Mode) -> RunConfig {
        let Preset::Pisadb = self.preset;
        let workload = match self.workload {
            WorkloadArg::YcsbA => "ycsb-a",
            WorkloadArg::YcsbB => "ycsb-b",
            WorkloadArg::YcsbC => "ycsb-c",
            WorkloadArg::Smallbank => "smallbank",
            WorkloadArg::Tpcc => "tpcc",
        };
        let rack = Rack {
            testbed: false,
            engine: self.engine,
            txns_per_worker: self.txns_per_worker,
            cc: if self.cc == CcArg::WaitDie { Cc::WaitDie } else { Cc::NoWait },
            nodes: self.nodes,
            workers: self.workers,
            workload,
            remote: self.remote,
            hot_prob: self.hot_prob,
            hot_per_node: self.hot_per_node,
            rows: self.rows,
            warehouses: self.warehouses,
            partitioning: self.partitioning,
            layout: self.layout,
            fine_locks: self.fine_locks,
            recirculation: self.recirculation,
            seed: self.seed,
            measure_ms: self.measure_ms,
            warmup_ms: self.warmup_ms,
        };
        rack.config(mode)
    }
}

/// Checks that `--system NAME` names a registered system whose `what` this command runs (real
/// mode's P4DB rack and its switch benchmark are P4DB's alone).
pub(crate) fn require_p4db(name: &str, what: &str) -> Result<(), String> {
    let system = crate::systems::registry().get(name).map_err(|e| e.to_string())?;
    if system.name() == pisadb_p4db::SYSTEM.name() {
        Ok(())
    } else {
        Err(format!("system `{}` has no {what} yet (systems with {what}: p4db)", system.name()))
    }
}
