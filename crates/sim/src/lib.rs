//! # pisadb-sim: the rack, simulated deterministically
//!
//! [`cluster`] is the discrete-event engine: nodes from `pisadb-node`, the switch model from
//! `pisadb-switch`, links from [`net`], one event heap in virtual nanoseconds. [`run`] builds a
//! rack from a [`run::RunConfig`] (workload, mode, concurrency control, sizes, seed), runs a
//! warm-up and a measurement window, and reports a [`run::RunResult`]. The simulator reads no
//! clock: how fast it runs is measured by its caller.

pub mod cluster;
pub mod faults;
pub mod fuzz;
pub mod net;
pub mod run;
pub mod switch;

pub use cluster::{Cluster, Restarts, SimError, Window};
pub use faults::{Crash, FaultStats, Faults, SlowLink, Target};
pub use net::{LinkParams, Topology};
pub use run::{
    build, build_faulty, plan, run, run_rack, LatencyBreakdown, LayoutChoice, PlanRestarts, Rack, RackPlan, RunConfig,
    RunOutput, RunResult, WorkloadSpec,
};
pub use switch::RackSwitch;
