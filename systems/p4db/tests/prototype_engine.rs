//! The P4DB prototype's engine on a whole simulated rack: what it must and must not do.

use pisadb_check::History;
use pisadb_p4db::node::{Cc, Engine, Mode};
use pisadb_p4db::{run, testbed, RunConfig, WorkloadSpec};
use pisadb_workload::{SmallBankConfig, TpccConfig, YcsbConfig};

/// A small, contended rack of the prototype's engine that simulates quickly in a debug build.
fn small(mode: Mode, cc: Cc, seed: u64) -> RunConfig {
    let ycsb = YcsbConfig { nodes: 4, rows: 20_000, hot_per_node: 10, ..YcsbConfig::default() };
    let mut cfg = RunConfig {
        nodes: 4,
        workers: 4,
        mode,
        cc,
        seed,
        workload: WorkloadSpec::Ycsb(ycsb),
        warmup_ns: 50_000,
        measure_ns: 1_000_000,
        layout_sample: 2_000,
        record_history: true,
        ..RunConfig::ycsb_default()
    };
    testbed::apply(&mut cfg);
    cfg
}

#[test]
fn every_transaction_begun_is_committed_or_skipped_never_retried() {
    for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
        let mut out = run(&small(mode, Cc::NoWait, 3)).unwrap();
        out.cluster.drain(50_000_000).unwrap();
        let nodes = out.cluster.hosts();
        let sum = |f: fn(&pisadb_p4db::node::NodeStats) -> u64| nodes.iter().map(|n| f(n.stats())).sum::<u64>();
        let (begun, committed, skipped, aborts) =
            (sum(|s| s.begun), sum(|s| s.committed), sum(|s| s.skipped), sum(|s| s.aborts));
        assert!(skipped > 0, "{mode:?}: a contended NO_WAIT rack aborts some transactions");
        assert_eq!(begun, committed + skipped, "{mode:?}: begun = committed + skipped");
        assert_eq!(aborts, skipped, "{mode:?}: each abort skips its transaction: no second attempt");
        let records = out.cluster.observer().records();
        assert_eq!(records.len() as u64, committed, "{mode:?}: every commit reported once");
        let window = out.result.prototype.expect("the prototype's counts are reported");
        assert!(window.started > 0 && window.skipped > 0, "{mode:?}: {window:?}");
        assert!(nodes.iter().all(|n| n.locked_tuples() == 0), "{mode:?}: no lock left behind");
    }
}

/// Sequential locking, write-back at release and skipping keep 2PL's guarantee: the committed
/// histories are conflict serializable and the workloads' invariants hold, warm transactions
/// (TPC-C in P4DB mode) included.
#[test]
fn the_prototype_engine_keeps_histories_serializable_and_invariants_true() {
    let ycsb = YcsbConfig { nodes: 4, rows: 2_000, hot_per_node: 8, hot_prob: 0.5, ..YcsbConfig::default() };
    let sb = SmallBankConfig { nodes: 4, accounts: 2_000, hot_per_node: 5, ..SmallBankConfig::default() };
    let tpcc = TpccConfig {
        nodes: 4,
        warehouses: 4,
        items: 1_000,
        customers_per_district: 50,
        hot_items: 8,
        ..TpccConfig::default()
    };
    for mode in [Mode::NoSwitch, Mode::P4db] {
        for cc in [Cc::NoWait, Cc::WaitDie] {
            for workload in [
                WorkloadSpec::Ycsb(ycsb.clone()),
                WorkloadSpec::SmallBank(sb.clone()),
                WorkloadSpec::Tpcc(tpcc.clone()),
            ] {
                let cfg = RunConfig { workload, measure_ns: 400_000, ..small(mode, cc, 5) };
                let name = cfg.workload.name();
                let mut out = run(&cfg).unwrap();
                out.check_invariants(50_000_000).unwrap_or_else(|e| panic!("{name} {mode:?} {cc:?}: {e}"));
                let mut history = History::new();
                out.cluster
                    .observer()
                    .records()
                    .iter()
                    .filter_map(|r| r.history.clone())
                    .for_each(|t| history.record(t));
                assert!(history.len() > 20, "{name} {mode:?} {cc:?}: only {} transactions", history.len());
                if let Err(why) = history.check() {
                    panic!("{name} {mode:?} {cc:?}: {why}");
                }
            }
        }
    }
}

#[test]
fn a_worker_stops_when_its_pregenerated_transactions_are_used_up() {
    let cfg = RunConfig { txns_per_worker: 5, ..small(Mode::NoSwitch, Cc::NoWait, 1) };
    let mut out = run(&cfg).unwrap();
    out.cluster.drain(50_000_000).unwrap();
    let nodes = out.cluster.hosts();
    let begun: u64 = nodes.iter().map(|n| n.stats().begun).sum();
    assert_eq!(begun, 4 * 4 * 5, "4 nodes x 4 workers x 5 transactions, no more");
    let done: u64 = nodes.iter().map(|n| n.stats().workers_done).sum();
    assert_eq!(done, 16, "every worker ran out");
    assert_eq!(out.result.prototype.unwrap().workers_done, 16);
}

#[test]
fn the_default_engine_reports_no_prototype_counts() {
    let cfg = RunConfig { engine: Engine::Pisadb, ..small(Mode::NoSwitch, Cc::NoWait, 1) };
    let out = run(&cfg).unwrap();
    assert!(out.result.prototype.is_none());
    let json = serde_json::to_value(&out.result).unwrap();
    assert!(json.get("prototype").is_none(), "PisaDB's figures print as before");
}

#[test]
fn the_same_seed_gives_the_same_run_under_the_prototype_engine() {
    for mode in [Mode::P4db, Mode::NoSwitch] {
        let a = run(&small(mode, Cc::NoWait, 9)).unwrap().result;
        let b = run(&small(mode, Cc::NoWait, 9)).unwrap().result;
        assert_eq!(a, b, "{mode:?}: same seed, same run");
    }
}
