//! SwitchTx's presets: `pisadb` (the model's defaults) and `paper` (what seed 001 §5.1 states
//! of its testbed and workloads), each value with where it comes from.
//!
//! The CPU costs the servers charge are settings (`costs.*`, [`crate::costs`]): measured by
//! `benches/costs.rs` (`CALIBRATION.md`, `## SwitchTx`), except the network stack's, assumed
//! under `pisadb` (200 ns, a DPDK-class stack) and stated under `paper` (an RDMA-class RPC
//! library's). The network (`network.*`, [`crate::network`]) is the shared 100 GbE link under
//! `pisadb` (an assumed 1 µs NIC per end, no variance) and under `paper` a ConnectX-5-class NIC
//! with a per-hop jitter that may reorder. Listing 1's constants (`mpl_max`, `epoch_us`,
//! `admission.*`, [`crate::admission`]) are stated where Listing 1 states them and otherwise
//! assumed and swept by the `admission` experiment.

use crate::costs::COSTS;
use pisadb_harness::Preset;

/// The servers' CPU costs measured on our code, each with its bench (the stack's is each
/// preset's own).
fn with_costs(preset: Preset) -> Preset {
    preset
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
        .assumed("costs.stack_ns", COSTS.stack_ns, "200 ns per datagram: a DPDK-class stack, not our code (as P4DB's)")
        .stated("threads", 24, "seed 001 §5.1: 8 servers and 24 threads per server unless specified")
        .stated("mpl", 2, "seed 001 §5.1: static admission control, MPL = 2 per thread in YCSB-T")
        .assumed(
            "mpl_max",
            16,
            "Listing 1's MAXMPL (its init: slow start = MAXMPL / 2), which the paper does not state; Fig. 13 sweeps 1..16",
        )
        .stated("admission.alpha", 0.9, "seed 001 Listing 1: T_i > α T_{i-1}, α = 0.9")
        .stated("admission.slow_start", 0, "seed 001 Listing 1's init: slow start = MAXMPL / 2 (0 here)")
        .assumed("network.nic_ns", 1_000, "1 µs per end, the shared 100 GbE link's DPDK-class figure (pisadb_net)")
        .assumed("network.jitter_ns", 0, "no variance beyond queueing: the figures pinned before it was a setting")
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
        with_costs(Preset::new(
            "paper",
            "seed 001's testbed and YCSB-T as far as §5.1 states them, with an RDMA-class NIC and stack and a jittery network",
        ))
        .stated(
            "costs.stack_ns",
            50,
            "per datagram sent or received: eRPC (Kalia et al., NSDI'19, the FaSST authors' RPC library on ConnectX NICs) \
             handles up to 10 M small RPCs per second per core, 100 ns for a receive and a send; the paper's own RPC \
             library (ScaleRPC, its [41]) states no per-message cost",
        )
        .stated(
            "network.nic_ns",
            300,
            "per end: the ConnectX-5 EN product brief states 'sub-600ns latency' from adapter to adapter (seed 001 §5.1 \
             names ConnectX-5), so at most 300 ns at each end; with three Tofino passes each way (ToR, S0, ToR) this gives a round trip of about \
             4 µs across racks before the jitter (which adds 250 ns per hop on average), the paper's 'network round trip \
             (4µs)' (§5.2), a check and not a fit",
        )
        .assumed(
            "network.jitter_ns",
            500,
            "each hop's extra delay uniform in 0..=500 ns: no source states RDMA UD's spread; the paper blames its P99 on \
             'network quality fluctuations' (§5.3.1); the `network` experiment sweeps it",
        )
        .stated(
            "network.reorder",
            true,
            "seed 001 §3.5: 'the network may have problems such as packet loss and out-of-order issues'",
        )
        .stated("admission.alpha", 0.9, "seed 001 Listing 1: T_i > α T_{i-1}, α = 0.9")
        .stated("admission.slow_start", 0, "seed 001 Listing 1's init: slow start = MAXMPL / 2 (0 here)")
        .assumed(
            "mpl_max",
            16,
            "Listing 1's MAXMPL, which the paper does not state; Fig. 13 sweeps the static MPL to 16; the `admission` \
             experiment sweeps it",
        )
        .assumed(
            "epoch_us",
            100,
            "the paper's epoch is 'e.g., 100ms' (§3.4.2), about 10^4 transactions per thread; our runs last milliseconds, \
             so 100 µs (about 10 per thread); the `admission` experiment sweeps it",
        )
        .stated("threads", 24, "seed 001 §5.1: 24 threads per server unless specified")
            .stated("mpl", 2, "seed 001 §5.1: MPL = 2 for each thread in YCSB-T (1 in TPC-C)")
            .stated("multi_rack", true, "seed 001 §5.1, Fig. 9: four virtual switches, S0 over three ToRs")
            .stated("workload.columns", 24, "seed 001 §5.1: each record contains 24 columns")
            .stated("workload.keys", 8, "seed 001 §5.1: each transaction reads/writes 8 key-value pairs")
            .stated("workload.partitions", 8, "seed 001 §5.1: the 8 keys are distributed on 8 servers"),
    ]
}
