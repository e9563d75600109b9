//! SwitchTx's presets: `pisadb` (the model's defaults) and `paper` (what seed 001 §5.1 states
//! of its testbed and workloads), each value with where it comes from.
//!
//! The CPU costs the servers charge are settings (`costs.*`, [`crate::costs`]): measured by
//! `benches/costs.rs` (`CALIBRATION.md`, `## SwitchTx`), except the network stack's, assumed.

use crate::costs::COSTS;
use pisadb_harness::Preset;

/// The servers' CPU costs, each with the bench that measured it.
fn with_costs(preset: Preset) -> Preset {
    preset
        .assumed("costs.stack_ns", COSTS.stack_ns, "200 ns per datagram: a DPDK-class stack, not our code (as P4DB's)")
        .measured("costs.begin_ns", COSTS.begin_ns, "switchtx/begin (benches/costs.rs; CALIBRATION.md)")
        .measured("costs.handler_ns", COSTS.handler_ns, "switchtx/read_1 and switchtx/validate, less one key each")
        .measured("costs.prepare_ns", COSTS.prepare_ns, "switchtx/prepare_lock, less two keys")
        .measured("costs.item_ns", COSTS.item_ns, "(switchtx/read_8 - switchtx/read_1) / 7")
}

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    vec![
        with_costs(Preset::new(
            "pisadb",
            "PisaDB's model of SwitchTx: 8 servers in three racks under S0, measured CPU costs",
        ))
        .stated("threads", 24, "seed 001 §5.1: 8 servers and 24 threads per server unless specified")
        .stated("mpl", 2, "seed 001 §5.1: static admission control, MPL = 2 per thread in YCSB-T")
        .assumed("mpl_max", 16, "the cap of the adaptive MPL; the paper's Listing 1 states none, Fig. 13 sweeps 1..16")
        .assumed(
            "epoch_us",
            100,
            "the paper's epoch is 'e.g., 100ms' (§3.4.2); our windows are milliseconds, so 100 µs",
        )
        .assumed("buffer_kb", 4096, "a strict-priority port's shared buffer; Tofino's is about 22 MB for all ports")
        .assumed(
            "timeout_us",
            2000,
            "an outcome-less transaction is resolved after 2 ms (the paper's runs lose nothing)",
        ),
        with_costs(Preset::new("paper", "seed 001's testbed and YCSB-T, as far as §5.1 states them"))
            .stated("threads", 24, "seed 001 §5.1: 24 threads per server unless specified")
            .stated("mpl", 2, "seed 001 §5.1: MPL = 2 for each thread in YCSB-T (1 in TPC-C)")
            .stated("multi_rack", true, "seed 001 §5.1, Fig. 9: four virtual switches, S0 over three ToRs")
            .stated("workload.columns", 24, "seed 001 §5.1: each record contains 24 columns")
            .stated("workload.keys", 8, "seed 001 §5.1: each transaction reads/writes 8 key-value pairs")
            .stated("workload.partitions", 8, "seed 001 §5.1: the 8 keys are distributed on 8 servers"),
    ]
}
