//! Conflict-serializability of the rack's committed histories.
//!
//! Every committed transaction on the nodes records, per tuple, the version it read (the id of
//! the attempt whose write it saw, 0 for the initial load) and the version it overwrote;
//! `pisadb-check` decides whether the direct serialization graph is acyclic. Switch
//! transactions are checked separately (serial replay in GID order, `rack.rs`).

use pisadb_check::History;
use pisadb_p4db::node::{Cc, Mode};
use pisadb_p4db::{run, RunConfig, WorkloadSpec};
use pisadb_workload::{Scheme, SmallBankConfig, TpccConfig, YcsbConfig, YcsbMix};

/// The committed history of a run, after checking the workload's invariants on it.
fn history(cfg: RunConfig) -> History {
    let mut out = run(&cfg).unwrap();
    out.check_invariants(5_000_000)
        .unwrap_or_else(|e| panic!("{} {:?} seed {}: {e}", cfg.workload.name(), cfg.mode, cfg.seed));
    let mut history = History::new();
    out.cluster.observer().records().iter().filter_map(|r| r.history.clone()).for_each(|t| history.record(t));
    history
}

/// Several seeds, both schemes, every mode, YCSB-A, SmallBank and TPC-C on a small contended
/// rack (TPC-C partitions by warehouse, so it runs round robin only).
#[test]
fn committed_histories_are_conflict_serializable() {
    for seed in 1..=3 {
        for mode in [Mode::NoSwitch, Mode::LmSwitch, Mode::P4db] {
            for cc in [Cc::NoWait, Cc::WaitDie] {
                // Odd seeds partition by range, even ones round robin.
                let partitioning = if seed % 2 == 1 { Scheme::Range } else { Scheme::RoundRobin };
                let ycsb = YcsbConfig {
                    nodes: 4,
                    rows: 2_000,
                    hot_per_node: 8,
                    hot_prob: 0.5,
                    partitioning,
                    ..YcsbConfig::default()
                };
                let sb = SmallBankConfig {
                    nodes: 4,
                    accounts: 2_000,
                    hot_per_node: 5,
                    partitioning,
                    ..SmallBankConfig::default()
                };
                let tpcc = TpccConfig {
                    nodes: 4,
                    warehouses: 4,
                    items: 1_000,
                    customers_per_district: 50,
                    hot_items: 8,
                    ..TpccConfig::default()
                };
                for workload in [WorkloadSpec::Ycsb(ycsb), WorkloadSpec::SmallBank(sb), WorkloadSpec::Tpcc(tpcc)] {
                    let cfg = RunConfig {
                        nodes: 4,
                        workers: 4,
                        mode,
                        cc,
                        seed,
                        workload,
                        warmup_ns: 0,
                        measure_ns: 200_000,
                        layout_sample: 1_000,
                        record_history: true,
                        ..RunConfig::ycsb_default()
                    };
                    let name = cfg.workload.name();
                    let h = history(cfg);
                    assert!(h.len() > 50, "{name} {mode:?} {cc:?} seed {seed}: only {} transactions", h.len());
                    if let Err(why) = h.check() {
                        panic!("{name} {mode:?} {cc:?} seed {seed}: {why}");
                    }
                }
            }
        }
    }
}

/// The prototype's workload rules (remote per key, so a SmallBank transaction can be wholly
/// remote; YCSB in ranges; TPC-C's 20% remote lines and payments) on PisaDB's engine, scaled
/// down to a small contended rack: every mode commits, serializably.
#[test]
fn the_prototypes_workloads_commit_serializably_on_pisadbs_engine() {
    let ycsb = YcsbConfig { nodes: 4, rows: 4_000, hot_per_node: 20, ..YcsbConfig::prototype(YcsbMix::A) };
    let sb = SmallBankConfig { nodes: 4, accounts: 2_000, hot_per_node: 5, ..SmallBankConfig::prototype() };
    let tpcc =
        TpccConfig { nodes: 4, items: 1_000, customers_per_district: 50, hot_items: 8, ..TpccConfig::prototype(4) };
    for mode in [Mode::NoSwitch, Mode::LmSwitch, Mode::P4db] {
        for workload in
            [WorkloadSpec::Ycsb(ycsb.clone()), WorkloadSpec::SmallBank(sb.clone()), WorkloadSpec::Tpcc(tpcc.clone())]
        {
            let cfg = RunConfig {
                nodes: 4,
                workers: 4,
                mode,
                cc: Cc::NoWait,
                seed: 11,
                workload,
                warmup_ns: 0,
                measure_ns: 1_000_000,
                layout_sample: 1_000,
                record_history: true,
                ..RunConfig::ycsb_default()
            };
            let name = cfg.workload.name();
            let h = history(cfg);
            assert!(h.len() > 50, "{name} {mode:?}: only {} transactions", h.len());
            if let Err(why) = h.check() {
                panic!("{name} {mode:?}: {why}");
            }
        }
    }
}
