//! NetAccel's presets: `pisadb` (the model's defaults, with the CPU costs measured on our
//! executor and stack) and `paper` (what seed 002 §4 states of its testbed), each value with
//! where it comes from.

use crate::calibration::CpuCosts;
use pisadb_harness::Preset;

/// The CPU costs, each with the bench that measured it (`CALIBRATION.md`, "NetAccel").
fn with_costs(preset: Preset) -> Preset {
    let c = CpuCosts::MEASURED;
    preset
        .measured("costs.join_probe_ns_per_row", c.join_probe_ns_per_row, "executor/join_probe_lineitem")
        .measured("costs.aggregate_ns_per_row", c.aggregate_ns_per_row, "executor/aggregate_joined")
        .measured("costs.pattern2_ns_per_row", c.pattern2_ns_per_row, "executor/pattern2_partsupp")
        .measured("costs.motion_ns_per_row", c.motion_ns_per_row, "netaccel_costs/motion_rows_10k")
        .measured("costs.deparse_ns_per_tuple", c.deparse_ns_per_tuple, "netaccel_costs/deparse_encode_10k")
        .measured("costs.receive_ns_per_tuple", c.receive_ns_per_tuple, "netaccel_costs/receive_10k")
        .measured("costs.control_plane_ns_per_tuple", c.control_plane_ns_per_tuple, "netaccel_costs/control_plane_10k")
        .assumed(
            "costs.stack_ns_per_datagram",
            c.stack_ns_per_datagram,
            "a DPDK-class stack, as P4DB's hosts (CALIBRATION.md)",
        )
}

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    vec![
        with_costs(
            Preset::new(
                "pisadb",
                "PisaDB's model of NetAccel: 3 segments and a master on one Tofino 1, measured CPU costs",
            )
            .stated("segments", 3, "seed 002 §4: segment nodes on three machines")
            .stated("join_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
            .stated("group_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
            .stated("link_gbps", 25.0, "seed 002 §4: 'running our network at 25 Gbps' (Fig. 7)")
            .stated(
                "control_plane_gbps",
                10.0,
                "seed 002 §4.1: a 10 Gbps port to the control plane suffices at 4-5 join positions",
            )
            .assumed(
                "sf",
                0.1,
                "small enough to simulate one packet per tuple (the paper: SF 100); tables scale with SF",
            ),
        ),
        with_costs(
            Preset::new("paper", "seed 002's testbed, as far as §4 states it")
                .stated("segments", 3, "seed 002 §4: segment nodes on three machines, a dedicated master")
                .stated("join_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
                .stated("group_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
                .stated("link_gbps", 25.0, "seed 002 §4: Fig. 7's response times at 25 Gbps (100 Gbps NICs)")
                .stated("control_plane_gbps", 10.0, "seed 002 §4.1: a 10 Gbps dataplane-to-control-plane link")
                .assumed("sf", 0.1, "the paper ran SF 100; one simulated packet per tuple limits us to SF <= 10"),
        ),
    ]
}
