//! NetAccel's presets, each value with where it comes from:
//!
//! - `pisadb` (the default): the model with our executor's costs measured at SF 0.1;
//! - `pisadb-sf100`: the same with our executor measured at the paper's scale (SF 100's
//!   217 k build keys, so the join's hash table misses cache);
//! - `paper`: what seed 002 §4 states of its testbed, with the executor of its baseline's
//!   class (Greenplum runs PostgreSQL's row-at-a-time executor; measured here on PostgreSQL
//!   15 by a documented script) and the deparse rate it states.
//!
//! The per-tuple costs of NetAccel's own operators (deparse, receive, motion, the control
//! plane's join) are measured on our code in every preset; the network stack's per-datagram
//! cost is assumed in every preset and swept by the `stack-sweep` experiment. The switch's
//! table sizes are not settings: `layout.rs` derives them from the paper's SRAM budget (and
//! says where that derivation rests on an assumption).

use crate::calibration::CpuCosts;
use crate::experiments::tuple_wire_bytes;
use pisadb_harness::Preset;

/// Where a preset's executor costs come from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Executor {
    /// Our executor at SF 0.1.
    OursSf01,
    /// Our executor at SF 100's build size.
    OursSf100,
    /// PostgreSQL's, at SF 100's build size.
    RowAtATime,
}

/// The preset's executor costs, each with its bench or script.
fn with_executor(preset: Preset, executor: Executor) -> Preset {
    const PG: &str = "systems/netaccel/scripts/postgres-hash-join.sh on this machine (PostgreSQL 15, single worker, \
                      217 k build keys; systems/netaccel/calibration/postgres-hash-join.txt): the class of the paper's \
                      Greenplum segments, which run PostgreSQL's executor (seed 002 §4)";
    let (c, join, aggregate, pattern2) = match executor {
        Executor::OursSf01 => (
            CpuCosts::MEASURED,
            "executor/join_probe_lineitem (SF 0.1)",
            "executor/aggregate_joined (SF 0.1)",
            "executor/pattern2_partsupp (SF 0.1)",
        ),
        Executor::OursSf100 => (
            CpuCosts::OURS_SF100,
            "executor_sf100 (join slope, 217 k build keys)",
            "executor_sf100/aggregate_joined",
            "executor_sf100 (join slope: pattern 2 probes partsupp against SF 100's groups)",
        ),
        Executor::RowAtATime => (CpuCosts::ROW_AT_A_TIME, PG, PG, PG),
    };
    preset
        .measured("costs.join_probe_ns_per_row", c.join_probe_ns_per_row, join)
        .measured("costs.aggregate_ns_per_row", c.aggregate_ns_per_row, aggregate)
        .measured("costs.pattern2_ns_per_row", c.pattern2_ns_per_row, pattern2)
}

/// The costs of NetAccel's own host-side operators (the same in every preset), each with the
/// bench that measured it (`CALIBRATION.md`, "NetAccel"), and the assumed stack cost.
fn with_tuple_paths(preset: Preset) -> Preset {
    let c = CpuCosts::MEASURED;
    preset
        .measured("costs.motion_ns_per_row", c.motion_ns_per_row, "netaccel_costs/motion_rows_10k")
        .measured("costs.receive_ns_per_tuple", c.receive_ns_per_tuple, "netaccel_costs/receive_10k")
        .measured("costs.control_plane_ns_per_tuple", c.control_plane_ns_per_tuple, "netaccel_costs/control_plane_10k")
        .assumed(
            "costs.stack_ns_per_datagram",
            c.stack_ns_per_datagram,
            "a DPDK-class stack, as P4DB's hosts (CALIBRATION.md); the paper states none: swept 0-800 ns by the \
             stack-sweep experiment",
        )
}

/// The settings every preset states of seed 002's rack.
fn with_rack(preset: Preset) -> Preset {
    preset
        .stated("segments", 3, "seed 002 §4: segment nodes on three machines, a dedicated master")
        .stated("join_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
        .stated("group_positions", 2, "seed 002 §4, Fig. 7: the 2×2 split")
        .stated("link_gbps", 25.0, "seed 002 §4: 'running our network at 25 Gbps' (Fig. 7; 100 Gbps NICs)")
        .stated(
            "control_plane_gbps",
            10.0,
            "seed 002 §4.1: a 10 Gbps port to the control plane suffices at 4-5 join positions",
        )
        .assumed(
            "sf",
            0.1,
            "the paper ran SF 100; one simulated packet per tuple limits us to SF <= 10 (experiments run SF 0.1 \
             with --quick, SF 1 without); switch tables scale with SF to keep their load factors",
        )
}

/// The deparse operator's cost under `paper`: its stated plateau rate on our datagrams.
pub fn paper_deparse_ns_per_tuple() -> f64 {
    (tuple_wire_bytes() * 8) as f64 / PAPER_DEPARSE_GBPS
}

/// The rate at which the paper's deparse operator plateaus (seed 002 §4.1, Fig. 8).
pub const PAPER_DEPARSE_GBPS: f64 = 29.0;

/// The presets: `pisadb` first (the default), then `paper` (every system lists these two first),
/// then `pisadb-sf100`.
pub fn presets() -> Vec<Preset> {
    let measured_deparse = |p: Preset| {
        p.measured(
            "costs.deparse_ns_per_tuple",
            CpuCosts::MEASURED.deparse_ns_per_tuple,
            "netaccel_costs/deparse_encode_10k",
        )
    };
    vec![
        measured_deparse(with_tuple_paths(with_executor(
            with_rack(Preset::new(
                "pisadb",
                "PisaDB's model of NetAccel: 3 segments and a master on one Tofino 1, our executor's costs measured at SF 0.1",
            )),
            Executor::OursSf01,
        ))),
        with_tuple_paths(with_executor(
            with_rack(Preset::new(
                "paper",
                "seed 002's testbed as far as §4 states it, with a row-at-a-time executor (PostgreSQL's, as its Greenplum) measured on this machine",
            )),
            Executor::RowAtATime,
        ))
        .stated(
            "costs.deparse_ns_per_tuple",
            paper_deparse_ns_per_tuple(),
            "seed 002 §4.1 (Fig. 8): the deparse operator plateaus at 29 Gbps; our tuple datagram's wire bytes × 8 / 29",
        ),
        measured_deparse(with_tuple_paths(with_executor(
            with_rack(Preset::new(
                "pisadb-sf100",
                "PisaDB's model with our executor measured at the paper's scale (SF 100's 217 k build keys)",
            )),
            Executor::OursSf100,
        ))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_harness::{preset_settings, Provenance};

    #[test]
    fn every_cost_the_model_charges_is_in_every_preset_with_a_provenance() {
        let costs = serde_json::to_value(CpuCosts::MEASURED).unwrap();
        let keys: Vec<String> = costs.as_object().unwrap().keys().map(|k| format!("costs.{k}")).collect();
        for preset in presets() {
            for key in &keys {
                let value = preset.values.iter().find(|v| &v.key == key);
                let value = value.unwrap_or_else(|| panic!("preset {} has no {key}", preset.name));
                let source = match &value.provenance {
                    Provenance::Measured(s) | Provenance::Stated(s) | Provenance::Assumed(s) => s,
                };
                assert!(!source.is_empty(), "{} {key}", preset.name);
            }
        }
    }

    #[test]
    fn the_paper_preset_charges_the_row_at_a_time_class_and_the_stated_deparse_rate() {
        let (settings, _) = preset_settings(&crate::system::SYSTEM, "paper").unwrap();
        let cfg = crate::system::rack_config(&settings).unwrap();
        assert_eq!(cfg.costs.join_probe_ns_per_row, CpuCosts::ROW_AT_A_TIME.join_probe_ns_per_row);
        assert!(cfg.costs.join_probe_ns_per_row > CpuCosts::MEASURED.join_probe_ns_per_row);
        let gbps = (tuple_wire_bytes() * 8) as f64 / cfg.costs.deparse_ns_per_tuple;
        assert!((gbps - PAPER_DEPARSE_GBPS).abs() < 1e-9, "{gbps}");
        let (settings, _) = preset_settings(&crate::system::SYSTEM, "pisadb").unwrap();
        assert_eq!(crate::system::rack_config(&settings).unwrap().costs, CpuCosts::MEASURED);
    }
}
