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
    // `latch/threads/2`: one std::sync::Mutex acquisition while another thread contends for the
    // same lock word (benches/latch.rs): the median of seven runs' medians (46 to 209 ns on this
    // shared 2-vCPU VM; CALIBRATION.md lists them). Charged only by the prototype's engine,
    // when two cores meet at one row's latch (node/latch.rs).
    latch_ns: 64,
};

/// The P4DB prototype's testbed (`--preset p4db-testbed`, [`crate::testbed`]). Nothing here
/// is fitted to a result; CALIBRATION.md shows each step.
pub const TESTBED_COSTS: CpuCosts = CpuCosts {
    // Pre-generated before the clock starts (the prototype's engine charges nothing anyway).
    txn_begin_ns: 0,
    // The fit: a local 8-operation transaction costs 0.86 µs of CPU. Under the prototype's
    // engine a local read costs one lock, one tuple read, one tuple access when the
    // transaction executes and one unlock: 2 × (lock_ns + tuple_ns) = 860 / 8 = 107.5 ns, so
    // lock_ns + tuple_ns = 53.75 ns. tuple_ns stays our measured 10 ns (a memory access on
    // either machine); the lock, its uncontended latch and the prototype's bookkeeping get
    // the rest, 43.75 ns, rounded up. (A local 8-read transaction then costs 864 ns.)
    lock_ns: 44,
    tuple_ns: 10,
    // The fitted 12.25 µs per node→switch→node traversal includes the DPDK processing and the
    // handler hand-off at both ends (crate::testbed::link puts it all in the links): charging
    // PisaDB's own per-datagram figures on top would count it twice, and would make the one
    // handler core a bottleneck at a load the fitted sweep shows none at (it is linear in the
    // remote share up to 90%).
    message_ns: 0,
    stack_ns: 0,
    // Measured here, as in CPU_COSTS: two cores meeting at one row's latch.
    latch_ns: 64,
};
