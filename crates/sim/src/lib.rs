//! # pisadb-sim: the rack, simulated deterministically
//!
//! [`cluster`] is the discrete-event engine: nodes from `pisadb-node`, the switch model from
//! `pisadb-switch`, links from [`net`], one event heap in virtual nanoseconds. [`run`] builds a
//! rack from a [`run::RunConfig`] (workload, mode, concurrency control, sizes, seed), runs a
//! warm-up and a measurement window, and reports a [`run::RunResult`]. The simulator reads no
//! clock: how fast it runs is measured by its caller.

pub mod cluster;
pub mod net;
pub mod run;
pub mod switch;

pub use cluster::{Cluster, SimError, Window};
pub use net::{LinkParams, Topology};
pub use run::{
    build, plan, run, LatencyBreakdown, LayoutChoice, Rack, RackPlan, RunConfig, RunOutput, RunResult, WorkloadSpec,
};
pub use switch::RackSwitch;
