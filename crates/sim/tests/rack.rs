//! End-to-end properties of the simulated rack.

use pisadb_core::{SerialStore, TupleKey};
use pisadb_node::{Cc, Mode};
use pisadb_sim::{run, RunConfig, WorkloadSpec};
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
            for node in out.cluster.nodes() {
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
    let mut switch_txns: Vec<_> = out.cluster.records().iter().filter(|r| r.gid.is_some()).collect();
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
        assert_eq!(r.txn.execute_serial(&mut store), r.outputs, "gid {:?}", r.gid);
    }
    for &key in &hot {
        if let Some(v) = out.cluster.switch_value(&out.layout, key) {
            assert_eq!(v, store.get(key), "{key:?}");
        }
    }
}

#[test]
fn smallbank_runs_in_every_mode() {
    for mode in [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch] {
        let sb = SmallBankConfig { nodes: 4, accounts: 20_000, hot_per_node: 5, ..SmallBankConfig::default() };
        let cfg = RunConfig { workload: WorkloadSpec::SmallBank(sb), ..small(mode, Cc::NoWait, 5) };
        let out = run(&cfg).unwrap();
        assert!(out.result.hot_committed > 0 && out.result.cold_committed > 0, "{mode:?}: {:?}", out.result);
    }
}
