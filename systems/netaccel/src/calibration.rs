//! The CPU costs the simulated hosts charge, measured from our own code (CALIBRATION.md has the
//! commands, the date and the machine).
//!
//! The executor's costs are per row of the operator's input, from `cargo bench -p pisadb-olap
//! --bench executor` (SF 0.1, one segment's share of 3); the tuple paths' costs are per tuple,
//! from `cargo bench -p pisadb-netaccel --bench costs`. The network stack's cost per datagram
//! is not our code: it is the DPDK-class figure P4DB's hosts use (assumed). The deparse
//! operator is charged its encoding only: the paper's deparser sends at line rate (§4.1,
//! "within 2% of the nominal maximum of 25 Gbps") from DPDK, so the link, not a per-datagram
//! stack cost, bounds it.

use serde::{Deserialize, Serialize};

/// CPU cost of each host-side step, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCosts {
    /// Hash join, per probe-side row (build rows are few: `part_FP`).
    pub join_probe_ns_per_row: f64,
    /// Hash aggregation, per input row.
    pub aggregate_ns_per_row: f64,
    /// Pattern 2 on a segment (join with `partsupp`, filter, distinct), per `partsupp` row.
    pub pattern2_ns_per_row: f64,
    /// A motion's encode and decode, per row.
    pub motion_ns_per_row: f64,
    /// The deparse operator, per tuple (frame and tuple encoded).
    pub deparse_ns_per_tuple: f64,
    /// The receive operator, per drained group (decoded and appended).
    pub receive_ns_per_tuple: f64,
    /// The control plane's join or aggregation, per overflow tuple.
    pub control_plane_ns_per_tuple: f64,
    /// The network stack, per datagram received or sent by a motion or the control plane.
    pub stack_ns_per_datagram: f64,
}

impl CpuCosts {
    /// The figures measured on the project machine (CALIBRATION.md, "NetAccel").
    pub const MEASURED: CpuCosts = CpuCosts {
        // executor/join_probe_lineitem: 695.8 µs over 31,148 + 190 rows.
        join_probe_ns_per_row: 22.2,
        // executor/aggregate_joined: 3.87 µs over 295 rows.
        aggregate_ns_per_row: 13.1,
        // executor/pattern2_partsupp: 361.0 µs over 26,986 partsupp rows.
        pattern2_ns_per_row: 13.4,
        // netaccel_costs/motion_rows_10k: 422.0 µs over 10,000 rows of 3 values.
        motion_ns_per_row: 42.2,
        // netaccel_costs/deparse_encode_10k: 204.0 µs over 10,000 tuples.
        deparse_ns_per_tuple: 20.4,
        // netaccel_costs/receive_10k: 107.8 µs over 10,000 groups.
        receive_ns_per_tuple: 10.8,
        // netaccel_costs/control_plane_10k: 1.386 ms over 10,000 overflow tuples.
        control_plane_ns_per_tuple: 138.6,
        // Assumed, as P4DB's hosts (CALIBRATION.md): a DPDK-class stack.
        stack_ns_per_datagram: 200.0,
    };
}

impl CpuCosts {
    /// Whether these are the measured figures (a rack's settings then leave them out).
    pub fn is_measured(&self) -> bool {
        *self == CpuCosts::MEASURED
    }
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts::MEASURED
    }
}

/// `rows × ns_per_row`, rounded up to whole nanoseconds.
pub fn ns(rows: usize, ns_per_row: f64) -> u64 {
    (rows as f64 * ns_per_row).ceil() as u64
}
