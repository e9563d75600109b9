//! # pisadb-p4db: P4DB and its two baselines on the shared platform
//!
//! P4DB (seed 000) runs the hottest transactions of a distributed database inside the switch
//! that connects its nodes: a declustered layout of the hot set over the switch's register
//! arrays, single-pass lock-free transactions, multi-pass ones under the pipeline lock, warm
//! transactions that span switch and nodes through an extended 2PC, and recovery of the switch
//! from the nodes' write-ahead logs. Its baselines are *No-Switch* (the switch only forwards)
//! and *LM-Switch* (the switch is a lock manager for hot tuples, as NetLock).
//!
//! Everything here is P4DB's own; what it shares with the other systems lives in `crates/`:
//!
//! - [`node`]: the database node, a [`pisadb_host::Host`] (workers, 2PL + 2PC, hot and warm
//!   switch transactions, LM-Switch's lock requests, its write-ahead log and recovery, the
//!   switch rebuild);
//! - [`programs`]: the switch programs (the transaction engine, the lock manager) on the shared
//!   pipeline model, and [`switch::RackSwitch`], the rack's switch in each mode;
//! - [`wire`]: their packet formats;
//! - [`mod@run`]: one experiment point — plan a rack from a [`RunConfig`] (layout, switch, nodes),
//!   run it on the shared simulator ([`pisadb_sim::World`]) and report a [`RunResult`], with
//!   [`metrics`] observing the nodes' events;
//! - [`experiments`]: the paper's experiments as data, their runner and the report of
//!   `pisadb sweep` and `pisadb reproduce p4db`;
//! - [`fuzz`]: fault-injection cases and the oracles that check them;
//! - [`real`]: real mode on the shared runtime (`pisadb-runtime`): the node and switch
//!   processes, `pisadb cluster` with its checks, and `pisadb switch-bench`;
//! - [`testbed`]: the P4DB prototype's testbed as a preset (its node engine, latencies, costs);
//! - [`paper`]: what the prototype measured, from its published data, for reports to compare;
//! - [`system`]: P4DB in the harness's registry ([`SYSTEM`]): its variants and settings;
//!   [`flags`], its rack keys and the flags that spell them (`--workload`, `--layout`, …);
//!   [`table`], its points as `bench` and `compare` print them; [`layout_report`], what
//!   `pisadb layout` measures of the declustered layout.
//!
//! See `systems/p4db/README.md` for the page that explains it.

pub mod experiments;
pub mod flags;
pub mod fuzz;
pub mod layout_report;
pub mod metrics;
pub mod node;
pub mod paper;
pub mod presets;
pub mod programs;
pub mod real;
pub mod run;
pub mod switch;
pub mod system;
pub mod table;
pub mod testbed;
pub mod wire;

pub use metrics::{Metrics, Window};
pub use run::{
    build, build_faulty, plan, run, run_rack, switch_value, Cluster, IdealLoss, LatencyBreakdown, LayoutChoice,
    PlanRestarts, PrototypeCounts, Rack, RackPlan, RunConfig, RunOutput, RunResult, WorkloadSpec,
};
pub use switch::RackSwitch;
pub use system::SYSTEM;
