//! The CPU cost figures the simulator charges, measured from our own code paths.
//!
//! Each figure is the median time of a criterion benchmark in `systems/p4db/benches/costs.rs`
//! on the project machine (2 cores, Intel Xeon @ 2.5 GHz), rounded up to whole nanoseconds; the
//! table with the date and command is in `CALIBRATION.md` at the repository root. Re-run the
//! benchmark and update both places together when the code paths change.

use crate::node::config::CpuCosts;

/// The calibrated costs.
pub const CPU_COSTS: CpuCosts = CpuCosts {
    // `txn_begin`: 801 ns median (YCSB draw of 8 keys + hot-set lookups).
    txn_begin_ns: 801,
    // `lock_acquire_release`: 381 ns median for the pair, over a table of 10,000 locked tuples.
    lock_ns: 190,
    // `tuple_read_write`: 19 ns median for the pair.
    tuple_ns: 10,
    // `message_encode_decode`: 367 ns median for an 8-entry LockRead, both directions.
    message_ns: 184,
    // Not our code: the per-datagram CPU of a kernel-bypass (DPDK) stack, rx or tx, assumed
    // 200 ns (a few hundred cycles per packet including UDP/IP header work). Not measured here.
    stack_ns: 200,
};
