//! TransKV's data center end to end on the simulator: determinism, and the checks of every
//! variant under a mixed workload.

use pisadb_transkv::rack::{run, run_checked, RackConfig};

fn small() -> RackConfig {
    RackConfig {
        records: 50_000,
        cache_per_switch: 128,
        zipf: 1.2,
        write_ratio: 0.5,
        ops_per_txn: 1,
        outstanding: 8,
        txns_per_client: 200,
        seed: 7,
        resolve_us: 10_000,
        lease_us: 0,
        refresh_epoch_us: 0,
        hot_shift_at_us: 0,
        hot_shift_ranks: 0,
        controller_cores: 2,
        nic_ns: 1_000,
    }
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
    let a = run("transkv", &small()).unwrap();
    let b = run("transkv", &small()).unwrap();
    assert_eq!(a, b);
    let c = run("transkv", &RackConfig { seed: 8, ..small() }).unwrap();
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn contended_writes_on_hot_cached_keys_stay_serializable() {
    // Zipf 1.2, half writes, 3-key transactions: switches abort, clean up and release;
    // every committed history is serializable in timestamp order and caches match stores.
    for ops_per_txn in [1, 3] {
        let f = run_checked("transkv", &RackConfig { ops_per_txn, ..small() }).unwrap();
        assert_eq!(f.commits, 800);
        assert!(f.aborts_switch > 0, "{f:?}");
    }
    let f = run_checked("tranx-coor", &small()).unwrap();
    assert_eq!((f.commits, f.aborts_switch, f.switch_answers), (800, 0, 0));
}

#[test]
fn the_log_variant_clones_every_switch_accepted_transaction_to_the_controller() {
    let t = run_checked("transkv", &small()).unwrap();
    let l = run_checked("transkv-log", &small()).unwrap();
    assert_eq!((t.log_copies, l.commits), (0, 800));
    // At least every transaction a switch answered, at most one copy per switch on the path.
    assert!(l.log_copies >= l.switch_answers && l.log_copies > 0, "{l:?}");
    assert!(l.recirculations > t.recirculations, "each copy costs a pass");
}

#[test]
fn transkv_answers_hot_reads_in_the_switch_and_beats_the_coordinator() {
    let cfg = RackConfig { write_ratio: 0.0, ..small() };
    let t = run_checked("transkv", &cfg).unwrap();
    let c = run_checked("tranx-coor", &cfg).unwrap();
    assert!(t.switch_answers > t.commits / 2, "{t:?}");
    assert!(t.mtps > c.mtps && t.read_latency.latency_us_mean < c.read_latency.latency_us_mean, "{t:?} {c:?}");
    let cached = run_checked("transkv-cache", &cfg).unwrap();
    let plain = run_checked("no-cache", &cfg).unwrap();
    assert!(cached.switch_answers > 0 && plain.switch_answers == 0);
    assert!(cached.mtps > plain.mtps, "{cached:?} {plain:?}");
}

#[test]
fn node_switch_and_controller_crashes_with_lossy_links_lose_no_committed_write_and_wedge_no_key() {
    use pisadb_sim::{Crash, Faults, Target};
    use pisadb_transkv::rack::{build, check};
    for variant in ["transkv", "tranx-coor"] {
        let cfg = RackConfig { write_ratio: 0.8, ops_per_txn: 2, resolve_us: 300, ..small() };
        let (mut world, hierarchy) = build(variant, &cfg).unwrap();
        // The node of the hottest key crashes twice while the clients write to it.
        let hottest = pisadb_transkv::layout::key_of_rank(0, cfg.records);
        let node = hierarchy.node_of(hottest);
        let crash = |at_ns| Crash { target: Target::Node(node), at_ns, down_ns: 50_000 };
        // And the switch caching it (the core of its pod) crashes and is rebuilt.
        let core = hierarchy.switch_of(hottest).unwrap_or(0);
        let switch_crash = Crash { target: Target::Switch(core), at_ns: 250_000, down_ns: 20_000 };
        let faults = Faults {
            seed: 9,
            loss: 0.02,
            heal_at_ns: 1_000_000_000,
            crashes: vec![
                crash(100_000),
                switch_crash,
                Crash { target: Target::Node(pisadb_transkv::layout::CONTROLLER), at_ns: 300_000, down_ns: 30_000 },
                crash(400_000),
            ],
            ..Faults::default()
        };
        let restarter = pisadb_transkv::fuzz::Restarter::new(variant, hierarchy.clone(), &faults).unwrap();
        world.inject(faults, Box::new(restarter));
        world.run(0, u64::MAX / 2, pisadb_transkv::rack::EVENTS_MAX).unwrap();
        let stats = world.fault_stats();
        assert_eq!((stats.node_crashes, stats.switch_crashes), (3, 1), "{variant}");
        assert!(stats.lost > 0 && stats.to_down + stats.cut_short > 0, "{variant}: {stats:?}");
        check(&world, &hierarchy).unwrap_or_else(|e| panic!("{variant}: {e}"));
        assert_eq!(world.observer().commits(), 800, "{variant}");
    }
}

#[test]
fn switches_crashing_under_contention_keep_the_history_serializable() {
    use pisadb_sim::{Crash, Faults, Target};
    use pisadb_transkv::rack::{build, check};
    // Zipf 1.2, mostly writes, 2-key transactions: the crashed switches held claims and hot
    // timestamps; each is rebuilt from the nodes' logs while requests it decided are in flight.
    let mut crashed = 0;
    for seed in 0..12u64 {
        let cfg = RackConfig {
            zipf: 1.2,
            write_ratio: 0.6,
            ops_per_txn: 1 + (seed % 2) as u8,
            cache_per_switch: 32,
            txns_per_client: 150,
            resolve_us: 200,
            seed,
            ..small()
        };
        let (mut world, hierarchy) = build("transkv", &cfg).unwrap();
        let hot_switch = hierarchy.switch_of(pisadb_transkv::layout::key_of_rank(0, cfg.records)).unwrap();
        let crashes = (0..3)
            .map(|i| Crash {
                target: Target::Switch(if i == 0 { hot_switch } else { (seed as u16 + i) % 8 }),
                at_ns: 20_000 + 37_000 * u64::from(i) + seed * 3_000,
                down_ns: 2_000 + seed * 500,
            })
            .collect();
        let faults =
            Faults { seed, jitter_ns: 2_000, reorder: true, heal_at_ns: 1_000_000_000, crashes, ..Faults::default() };
        let restarter = pisadb_transkv::fuzz::Restarter::new("transkv", hierarchy.clone(), &faults).unwrap();
        world.inject(faults, Box::new(restarter));
        world.run(0, u64::MAX / 2, pisadb_transkv::rack::EVENTS_MAX).unwrap();
        crashed += world.fault_stats().switch_crashes;
        check(&world, &hierarchy).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    assert_eq!(crashed, 36);
}

#[test]
fn transactions_over_several_nodes_commit_whole_or_not_at_all() {
    use pisadb_transkv::rack::run_world;
    use std::collections::BTreeSet;
    // Four independent keys per transaction over 16 nodes: nearly every transaction is
    // coordinated by the controller over several nodes, the switches deciding the hot keys on
    // each node's path. The checks refuse a partial commit (a write counted whose keys not
    // every node installed), so passing them is atomicity.
    let cfg = RackConfig { ops_per_txn: 4, ..small() };
    let (world, hierarchy, f) = run_world("transkv", &cfg).unwrap();
    pisadb_transkv::rack::check(&world, &hierarchy).unwrap();
    assert_eq!(f.commits, 800);
    let ledger = world.observer().ledger();
    let spanning = ledger
        .store_commits
        .values()
        .filter(|w| w.iter().map(|&(k, _)| hierarchy.node_of(k)).collect::<BTreeSet<_>>().len() > 1)
        .count();
    assert!(spanning > 100, "{spanning} of {} write commits span several nodes", ledger.store_commits.len());
    assert!(f.aborts_switch > 0, "shares refused on the way abort the whole transaction: {f:?}");
    // Read-only over cached keys of several nodes: one request per node, answered by the
    // switches on each path, no coordinator.
    let readers = RackConfig { write_ratio: 0.0, ..cfg };
    let (world, hierarchy, f) = run_world("transkv", &readers).unwrap();
    pisadb_transkv::rack::check(&world, &hierarchy).unwrap();
    assert!(f.switch_answers > f.commits / 4, "{f:?}");
}
