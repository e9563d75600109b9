//! The CPU costs the simulated hosts charge, measured from our own code (CALIBRATION.md has the
//! commands, the date and the machine).
//!
//! Three classes of executor cost, one per preset that charges them:
//!
//! - [`CpuCosts::MEASURED`] (preset `pisadb`): our executor at SF 0.1, `cargo bench -p
//!   pisadb-olap --bench executor` (one segment's share of 3; 190 build keys, an L1-resident
//!   hash table).
//! - [`CpuCosts::OURS_SF100`] (preset `pisadb-sf100`): the same executor at the paper's scale,
//!   `cargo bench -p pisadb-netaccel --bench executor_sf100` (217 k build keys: every probe
//!   misses L2).
//! - [`CpuCosts::ROW_AT_A_TIME`] (preset `paper`): the paper's baseline's class. Its normal plan
//!   ran on Greenplum, whose segments run PostgreSQL's row-at-a-time executor; the figures are
//!   PostgreSQL 15's, measured on this machine by `systems/netaccel/scripts/postgres-hash-join.sh`
//!   (output in `systems/netaccel/calibration/`) on a workload of pattern 1's shape at SF 100's
//!   build size, never back-solved from the paper's 2.04×.
//!
//! The executor's costs are per row of the operator's input; the tuple paths' costs are per tuple,
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
    /// Our executor at the paper's scale (SF 100's 217 k `part_FP` keys), CALIBRATION.md
    /// "NetAccel"; the tuple paths as [`CpuCosts::MEASURED`].
    pub const OURS_SF100: CpuCosts = CpuCosts {
        // executor_sf100: slope of the join between 1 M and 4 M probe rows against 217 k keys.
        join_probe_ns_per_row: JOIN_SF100_NS,
        // executor_sf100/aggregate_joined: 300 k joined rows into SF 100's groups per segment.
        aggregate_ns_per_row: AGGREGATE_SF100_NS,
        // Pattern 2 probes `partsupp` against the groups: the same class of probe as the join
        // (a hash table of SF 100's size), so it is charged the join's per-row cost.
        pattern2_ns_per_row: JOIN_SF100_NS,
        ..CpuCosts::MEASURED
    };

    /// A row-at-a-time executor (PostgreSQL 15, the paper's Greenplum's executor) at SF 100's
    /// build size, CALIBRATION.md "NetAccel"; the tuple paths as [`CpuCosts::MEASURED`] (they
    /// are NetAccel's own operators, not Greenplum's).
    pub const ROW_AT_A_TIME: CpuCosts = CpuCosts {
        // postgres-hash-join.sh: join_ns_per_probe_row (sequential scan + hash probe, CPU time).
        join_probe_ns_per_row: PG_JOIN_NS,
        // postgres-hash-join.sh: aggregate_ns_per_joined_row (HashAggregate of SF 100-shaped joined rows).
        aggregate_ns_per_row: PG_AGGREGATE_NS,
        // Pattern 2 is a hash join probing `partsupp` rows: the same per-row class.
        pattern2_ns_per_row: PG_JOIN_NS,
        ..CpuCosts::MEASURED
    };

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

/// `executor_sf100`'s join, thread CPU ns per probe row (CALIBRATION.md, "NetAccel"; 2026-11-27).
pub const JOIN_SF100_NS: f64 = 15.1;
/// `executor_sf100`'s aggregation, thread CPU ns per joined row (300 k rows, 254 k groups).
pub const AGGREGATE_SF100_NS: f64 = 26.7;
/// PostgreSQL's sequential scan + hash join, CPU ns per probe row
/// (`systems/netaccel/calibration/postgres-hash-join.txt`).
pub const PG_JOIN_NS: f64 = 251.4;
/// PostgreSQL's hash aggregation of SF 100's joined rows, CPU ns per joined row (same file;
/// 300 k rows into 254 k groups, numeric sums).
pub const PG_AGGREGATE_NS: f64 = 980.1;

/// `rows × ns_per_row`, rounded up to whole nanoseconds.
pub fn ns(rows: usize, ns_per_row: f64) -> u64 {
    (rows as f64 * ns_per_row).ceil() as u64
}
