//! # pisadb-sim: the rack, simulated deterministically
//!
//! [`world`] is the discrete-event engine, generic over the hosts ([`pisadb_host::Host`]), the
//! switch ([`pisadb_switch::SwitchDevice`]) and what observes the hosts' events: links from
//! [`net`], one event scheduler in virtual nanoseconds. P4DB's rack is one instance of it. [`run`] builds a
//! rack from a [`run::RunConfig`] (workload, mode, concurrency control, sizes, seed), runs a
//! warm-up and a measurement window, and reports a [`run::RunResult`]. The simulator reads no
//! clock: how fast it runs is measured by its caller.

pub mod faults;
pub mod fuzz;
pub mod metrics;
pub mod net;
pub mod run;
pub mod switch;
pub mod world;

pub use faults::{Crash, FaultStats, Faults, SlowLink, Target};
pub use metrics::{Metrics, Window};
pub use net::{LinkParams, Topology};
pub use run::{
    build, build_faulty, plan, run, run_rack, switch_value, Cluster, LatencyBreakdown, LayoutChoice, PlanRestarts,
    Rack, RackPlan, RunConfig, RunOutput, RunResult, WorkloadSpec,
};
pub use switch::RackSwitch;
pub use world::{Moment, Observer, Restarts, SimError, World};
