//! The CPU cost figures the simulator charges, measured from our own code paths.
//!
//! Each figure is the median time of a criterion benchmark in `crates/node/benches/costs.rs`
//! on the project machine (2 cores, Intel Xeon @ 2.5 GHz), rounded up to whole nanoseconds; the
//! table with the date and command is in `CALIBRATION.md` at the repository root. Re-run the
//! benchmark and update both places together when the code paths change.

use crate::config::CpuCosts;

/// The calibrated costs.
pub const CPU_COSTS: CpuCosts =
    CpuCosts { txn_begin_ns: 300, lock_ns: 50, tuple_ns: 20, message_ns: 60, stack_ns: 200 };
