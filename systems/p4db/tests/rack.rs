//! End-to-end properties of the simulated rack.

use pisadb_check::History;
use pisadb_core::{SerialStore, TupleKey};
use pisadb_p4db::node::{Cc, Mode};
use pisadb_p4db::programs::p4db::P4dbConfig;
use pisadb_p4db::{run, RunConfig, WorkloadSpec};
use pisadb_workload::{SmallBankConfig, YcsbConfig};

/// A small, contended rack that simulates quickly even in a debug build.
fn small(mode: Mode, cc: Cc, seed: u64) -> RunConfig {
    let ycsb = YcsbConfig { nodes: 4, rows: 20_000, hot_per_node: 10, ..YcsbConfig::default() };
    RunConfig {
        nodes: 4,
        workers: 4,
        mode,
        cc,
        seed,
        workload: WorkloadSpec::Ycsb(ycsb),
        warmup_ns: 50_000,
        measure_ns: 300_000,
        layout_sample: 2_000,
        record_history: true,
        ..RunConfig::ycsb_default()
    }
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_does_not() {
    for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
        let a = run(&small(mode, Cc::WaitDie, 7)).unwrap().result;
        let b = run(&small(mode, Cc::WaitDie, 7)).unwrap().result;
        let c = run(&small(mode, Cc::WaitDie, 8)).unwrap().result;
        assert_eq!(a, b, "{mode:?}: same seed, same run");
        assert_ne!(a.trace_hash, c.trace_hash, "{mode:?}: the seed matters");
    }
}

/// After the workers stop and everything in flight finishes, no lock is held anywhere: NO_WAIT
/// and WAIT_DIE never leave a transaction stuck (a deadlock would keep its locks forever).
#[test]
fn every_transaction_finishes_and_releases_its_locks() {
    for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
        for cc in [Cc::NoWait, Cc::WaitDie] {
            let mut out = run(&small(mode, cc, 3)).unwrap();
            assert!(out.result.committed_per_s > 0.0);
            out.cluster.drain(5_000_000).unwrap_or_else(|e| panic!("{mode:?} {cc:?}: {e}"));
            for node in out.cluster.hosts() {
                assert_eq!(node.locked_tuples(), 0, "{mode:?} {cc:?}: node {} still holds locks", node.config().id);
            }
        }
    }
}

/// P4DB: replaying the committed switch transactions one by one in GID order gives each one
/// the outputs the switch returned, and the switch's registers end equal to the replay.
#[test]
fn switch_results_equal_a_serial_replay_in_gid_order() {
    let cfg = small(Mode::P4db, Cc::NoWait, 11);
    let mut out = run(&cfg).unwrap();
    out.cluster.drain(5_000_000).unwrap();
    let workload = cfg.workload.build(cfg.nodes, cfg.seed).unwrap();
    let mut switch_txns: Vec<_> = out.cluster.observer().records().iter().filter(|r| r.gid.is_some()).collect();
    assert!(switch_txns.len() > 100, "only {} switch transactions", switch_txns.len());
    switch_txns.sort_by_key(|r| r.gid);
    let gids: Vec<u64> = switch_txns.iter().map(|r| r.gid.unwrap()).collect();
    assert!(gids.windows(2).all(|w| w[0] < w[1]), "GIDs are unique");
    let mut store = SerialStore::default();
    let hot: Vec<TupleKey> = workload.hot_tuples();
    for &key in &hot {
        store.set(key, workload.initial_value(key));
    }
    for r in &switch_txns {
        let (txn, outputs) = r.switch_part();
        assert_eq!(txn.execute_serial(&mut store), outputs, "gid {:?}", r.gid);
    }
    for &key in &hot {
        if let Some(v) = pisadb_p4db::switch_value(&out.cluster, &out.layout, key) {
            assert_eq!(v, store.get(key), "{key:?}");
        }
    }
}

#[test]
fn smallbank_runs_in_every_mode() {
    for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
        let sb = SmallBankConfig { nodes: 4, accounts: 20_000, hot_per_node: 5, ..SmallBankConfig::default() };
        let cfg = RunConfig { workload: WorkloadSpec::SmallBank(sb), ..small(mode, Cc::NoWait, 5) };
        let mut out = run(&cfg).unwrap();
        assert!(out.result.hot_committed > 0 && out.result.cold_committed > 0, "{mode:?}: {:?}", out.result);
        out.check_invariants(5_000_000).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

/// A switch with room for only part of the hot set: transactions that touch hot tuples on both
/// sides of the boundary run as warm transactions (cold part locked and executed on the nodes,
/// then the switch sub-transaction, whose multicast result commits the participants). They
/// commit, leave no lock behind, the node part is conflict-serializable, and the switch parts
/// replay serially in GID order to the switch's outputs.
#[test]
fn warm_transactions_commit_atomically_when_the_hot_set_overflows_the_switch() {
    for cc in [Cc::NoWait, Cc::WaitDie] {
        let mut cfg = small(Mode::P4db, cc, 13);
        cfg.p4db = Some(P4dbConfig { entries_per_array: 1, ..cfg.p4db_config() });
        let mut out = run(&cfg).unwrap();
        out.cluster.drain(5_000_000).unwrap();
        assert!(out.layout.len() < 40 && !out.layout.overflow.is_empty(), "the hot set must overflow");
        let records = out.cluster.observer().records();
        let warm: Vec<_> = records.iter().filter(|r| !r.switch_ops.is_empty() && r.history.is_some()).collect();
        let remote_warm = warm.iter().filter(|r| r.gen.distributed).count();
        assert!(warm.len() > 50 && remote_warm > 5, "{cc:?}: {} warm, {remote_warm} distributed", warm.len());
        for node in out.cluster.hosts() {
            assert_eq!(node.locked_tuples(), 0, "{cc:?}: node {} holds locks", node.config().id);
            assert!(node.stats().rejected.is_empty(), "{cc:?}: {:?}", node.stats().rejected);
        }
        let mut history = History::new();
        records.iter().filter_map(|r| r.history.clone()).for_each(|t| history.record(t));
        history.check().unwrap_or_else(|e| panic!("{cc:?}: {e}"));
        // The switch parts, in GID order, against a serial replay from the initial values.
        let workload = cfg.workload.build(cfg.nodes, cfg.seed).unwrap();
        let mut by_gid: Vec<_> = records.iter().filter(|r| r.gid.is_some()).collect();
        by_gid.sort_by_key(|r| r.gid);
        let mut store = SerialStore::default();
        for (key, _) in out.layout.iter() {
            store.set(key, workload.initial_value(key));
        }
        for r in by_gid {
            let (txn, outputs) = r.switch_part();
            assert_eq!(txn.execute_serial(&mut store), outputs, "{cc:?}: gid {:?}", r.gid);
        }
        for (key, _) in out.layout.iter() {
            assert_eq!(
                pisadb_p4db::switch_value(&out.cluster, &out.layout, key),
                Some(store.get(key)),
                "{cc:?}: {key:?}"
            );
        }
    }
}
