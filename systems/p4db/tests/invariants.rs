//! The workloads' own invariants after simulated runs, on the whole database (nodes and switch):
//! SmallBank's balances change by exactly the money that committed transactions moved in or
//! out, and TPC-C meets its consistency conditions (warehouse YTD = Σ district YTD, orders
//! numbered without gaps up to the district's next order id, one line per ordered item, …).
//!
//! Each run is drained before the check, so every commit is recorded and nothing is in flight.
//! Seeds are random (proptest), and the runs cover every system, both concurrency controls,
//! and the random layout, whose hot transactions need several pipeline passes.

use pisadb_p4db::node::{Cc, Mode};
use pisadb_p4db::{run, LayoutChoice, RunConfig, WorkloadSpec};
use pisadb_workload::{SmallBankConfig, TpccConfig};
use proptest::prelude::*;

/// The systems and layouts a workload runs on: (mode, layout).
const SYSTEMS: [(Mode, LayoutChoice); 4] = [
    (Mode::P4db, LayoutChoice::Declustered),
    (Mode::P4db, LayoutChoice::Random),
    (Mode::NoSwitch, LayoutChoice::Declustered),
    (Mode::LmSwitch, LayoutChoice::Declustered),
];

fn rack(workload: WorkloadSpec, mode: Mode, layout: LayoutChoice, cc: Cc, seed: u64) -> RunConfig {
    RunConfig {
        nodes: 4,
        workers: 4,
        mode,
        cc,
        seed,
        workload,
        layout,
        warmup_ns: 20_000,
        measure_ns: 150_000,
        layout_sample: 1_000,
        record_history: true,
        ..RunConfig::ycsb_default()
    }
}

/// Runs `cfg`, checks the workload's invariants and that no node rejected a transaction, and
/// returns (committed transactions, recirculations).
fn run_and_check(cfg: &RunConfig) -> (usize, u64) {
    let what = format!("{} {:?} {:?} {:?} seed {}", cfg.workload.name(), cfg.mode, cfg.layout, cfg.cc, cfg.seed);
    let mut out = run(cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
    out.check_invariants(5_000_000).unwrap_or_else(|e| panic!("{what}: {e}"));
    for node in out.cluster.hosts() {
        assert!(
            node.stats().rejected.is_empty(),
            "{what}: node {} rejected {:?}",
            node.config().id,
            node.stats().rejected
        );
    }
    (out.cluster.observer().records().len(), out.result.recirculations)
}

fn smallbank() -> WorkloadSpec {
    // Small balances make refused payments and overdraft penalties common.
    WorkloadSpec::SmallBank(SmallBankConfig {
        nodes: 4,
        accounts: 4_000,
        hot_per_node: 5,
        initial_balance_min: 0,
        initial_balance_max: 300,
        ..SmallBankConfig::default()
    })
}

fn tpcc(warehouses: u16, remote: f64) -> WorkloadSpec {
    WorkloadSpec::Tpcc(TpccConfig {
        nodes: 4,
        warehouses,
        items: 2_000,
        customers_per_district: 100,
        hot_items: 8,
        remote_item_prob: remote,
        remote_customer_prob: remote,
        ..TpccConfig::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    #[test]
    fn smallbank_conserves_money_in_every_system(seed: u64, wait_die: bool) {
        let cc = if wait_die { Cc::WaitDie } else { Cc::NoWait };
        for (mode, layout) in SYSTEMS {
            let (committed, recirculations) = run_and_check(&rack(smallbank(), mode, layout, cc, seed));
            prop_assert!(committed > 50, "{mode:?} {layout:?}: only {committed} commits");
            if (mode, layout) == (Mode::P4db, LayoutChoice::Random) {
                prop_assert!(recirculations > 0, "the random layout should need multi-pass transactions");
            }
        }
    }

    #[test]
    fn tpcc_stays_consistent_in_every_system(seed: u64, wait_die: bool, per_node in 1u16..3, remote in 0.0..0.5) {
        let cc = if wait_die { Cc::WaitDie } else { Cc::NoWait };
        for (mode, layout) in SYSTEMS {
            let (committed, _) = run_and_check(&rack(tpcc(4 * per_node, remote), mode, layout, cc, seed));
            prop_assert!(committed > 20, "{mode:?} {layout:?}: only {committed} commits");
        }
    }
}

/// The checks can fail: a run whose snapshot lost one committed transaction's effect is caught.
#[test]
fn a_lost_commit_breaks_the_invariants() {
    for workload in [smallbank(), tpcc(4, 0.2)] {
        let cfg = rack(workload, Mode::P4db, LayoutChoice::Declustered, Cc::NoWait, 1);
        let mut out = run(&cfg).unwrap();
        out.cluster.drain(5_000_000).unwrap();
        let db = out.snapshot();
        let records = out.cluster.observer().records();
        // Everything but the first commit whose effect an invariant sees (a deposit moves
        // money in; every TPC-C transaction leaves a row).
        let first =
            records.iter().position(|r| matches!(r.gen.kind, "DepositChecking" | "NewOrder" | "Payment")).unwrap();
        let committed: Vec<_> = records
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != first)
            .map(|(_, r)| (&r.gen, r.outputs.as_slice()))
            .collect();
        assert!(out.workload.check_invariants(&db, &committed).is_err(), "{}", cfg.workload.name());
    }
}
