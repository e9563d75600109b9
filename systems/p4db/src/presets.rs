//! P4DB's presets as the harness lists them: `pisadb` (our model, the default) and `paper`
//! (the P4DB prototype's testbed, issue 16; its old name `p4db-testbed` still answers), each
//! value with where it comes from (`CALIBRATION.md`).
//!
//! The testbed's values are read from [`crate::testbed::apply`] applied to the default
//! configuration, so this list cannot drift from what a run under the preset uses. The
//! testbed preset also changes each workload to the prototype's definition
//! ([`crate::testbed::prototype_workload`]) and the recirculation to two FIFO ports: a point's
//! settings apply those with the preset ([`crate::flags::settings`]), P4DB's experiments with
//! theirs.

use crate::run::RunConfig;
use crate::testbed;
use pisadb_harness::Preset;

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    let ours = RunConfig::ycsb_default();
    let c = ours.costs;
    let pisadb = Preset::new("pisadb", "PisaDB's model of P4DB: its engine, costs measured on our code, a 1 µs NIC")
        .stated("nodes", ours.nodes, "seed 000 §7: 8 nodes")
        .stated("workers", ours.workers, "seed 000 §7: 8-20 worker threads per node (20 in most figures)")
        .stated("link.gbps", ours.link.gbps, "seed 000 §7: 10 GbE NICs")
        .assumed(
            "link.nic_ns",
            ours.link.nic_ns,
            "1 µs per NIC crossing, a DPDK-class NIC; swept by the latency experiments",
        )
        .measured("costs.txn_begin_ns", c.txn_begin_ns, "costs/txn_begin (CALIBRATION.md)")
        .measured("costs.lock_ns", c.lock_ns, "costs/lock_acquire_release, per operation (CALIBRATION.md)")
        .measured("costs.tuple_ns", c.tuple_ns, "costs/tuple_read_write, per access (CALIBRATION.md)")
        .measured("costs.message_ns", c.message_ns, "costs/message_encode_decode, per side (CALIBRATION.md)")
        .assumed("costs.stack_ns", c.stack_ns, "200 ns per datagram: a DPDK-class stack is not our code to measure")
        .measured("costs.latch_ns", c.latch_ns, "latch/threads/2 (benches/latch.rs; CALIBRATION.md)");
    let mut bed = RunConfig::ycsb_default();
    testbed::apply(&mut bed);
    let t = bed.costs;
    let fitted = "fitted to the prototype's measured 0.86 µs of CPU per local 8-operation transaction (CALIBRATION.md)";
    let paper = Preset::new("paper", "the P4DB prototype's testbed (seed 000 §7 and its published code, issue 16)")
        .alias("p4db-testbed")
        .stated("nodes", bed.nodes, "seed 000 §7: 8 nodes")
        .stated("workers", bed.workers, "seed 000 §7: up to 20 worker threads per node")
        .stated("link.gbps", bed.link.gbps, "seed 000 §7: 10 GbE NICs with DPDK")
        .stated(
            "engine",
            bed.engine,
            "the prototype's engine (its published code): pre-generated transactions, one remote key per round trip",
        )
        .stated("txns_per_worker", bed.txns_per_worker, "experiments/p4db_exp.py of the prototype: num_txns=[500_000]")
        .assumed(
            "link.nic_ns",
            bed.link.nic_ns,
            "inferred from the prototype's result: each NIC's share of a fitted 12.25 µs node-switch-node traversal",
        )
        .assumed("costs.lock_ns", t.lock_ns, fitted)
        .measured("costs.tuple_ns", t.tuple_ns, "costs/tuple_read_write, ours (a memory access on either machine)")
        .assumed(
            "costs.txn_begin_ns",
            t.txn_begin_ns,
            "0: the prototype generates its transactions before the clock starts",
        )
        .assumed("costs.message_ns", t.message_ns, "0: inside the fitted traversal (CALIBRATION.md)")
        .assumed("costs.stack_ns", t.stack_ns, "0: inside the fitted traversal (CALIBRATION.md)")
        .measured("costs.latch_ns", t.latch_ns, "latch/threads/2 (benches/latch.rs; CALIBRATION.md)");
    vec![pisadb, paper]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_harness::System;

    #[test]
    fn both_presets_apply_to_the_settings_and_the_testbed_answers_to_its_old_name() {
        for preset in presets() {
            let mut settings = crate::system::SYSTEM.default_settings();
            preset.apply(&mut settings).unwrap_or_else(|e| panic!("{}: {e}", preset.name));
        }
        assert!(presets().iter().any(|p| p.is("p4db-testbed") && p.name == "paper"));
    }
}
