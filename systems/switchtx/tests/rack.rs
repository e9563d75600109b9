//! The rack end to end: every variant commits, passes the end-of-run checks, and is
//! deterministic.

use pisadb_switchtx::rack::{run, RackConfig, ABLATION, VARIANT_NAMES};

/// A small rack: 2 threads per server, a short window.
fn small() -> RackConfig {
    RackConfig { threads: 2, warmup_us: 50, measure_us: 200, ..RackConfig::default() }
}

#[test]
fn every_variant_commits_and_passes_the_checks() {
    for v in VARIANT_NAMES {
        let f = run(v, &small()).unwrap_or_else(|e| panic!("{v}: {e}"));
        eprintln!("{v}: {f:?}");
        assert!(f.commits > 0, "{v} committed nothing");
        assert!(f.checked_commits >= f.commits, "{v}");
    }
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
    for v in ["fasst", "switchtx"] {
        let a = run(v, &small()).unwrap();
        let b = run(v, &small()).unwrap();
        assert_eq!((&a.trace_hash, a.events, a.commits), (&b.trace_hash, b.events, b.commits), "{v}");
        let c = run(v, &RackConfig { seed: 2, ..small() }).unwrap();
        assert_ne!(a.trace_hash, c.trace_hash, "{v}: seed 2 ran the same history as seed 1");
    }
}

#[test]
fn in_switch_coordination_absorbs_messages_and_shortens_locks() {
    // Uncontended (θ = 0): the switches drop every gathered message but the last, the client
    // sends no phase requests, and write locks are held for fewer round trips.
    let cfg =
        RackConfig { workload: pisadb_switchtx::server::Workload { theta: 0.0, ..Default::default() }, ..small() };
    let fasst = run("fasst", &cfg).unwrap();
    let tree = run("tree-gas", &cfg).unwrap();
    assert_eq!(fasst.switch_gathered, 0);
    assert!(tree.switch_gathered > 0);
    assert!(tree.lock_us_mean < fasst.lock_us_mean, "{tree:?} vs {fasst:?}");
    assert!(tree.p50_us < fasst.p50_us, "{tree:?} vs {fasst:?}");
}

#[test]
fn a_one_rack_testbed_and_the_adaptive_mpl_run_and_pass() {
    let f = run("switchtx", &RackConfig { multi_rack: false, measure_us: 500, epoch_us: 50, ..small() }).unwrap();
    assert!(f.commits > 0 && f.mpl_mean >= 1.0, "{f:?}");
    let g = run("gas", &RackConfig { multi_rack: false, ..small() }).unwrap();
    assert!(g.switch_gathered > 0, "one rack: the ToR coordinates");
}

#[test]
fn a_single_shard_transaction_skips_the_validate_round() {
    use pisadb_switchtx::server::Workload;
    let at = |partitions| RackConfig {
        workload: Workload { theta: 0.0, keys: 4, partitions, ..Workload::default() },
        threads: 1,
        mpl: 1,
        ..small()
    };
    for v in ["fasst", "tree-gas"] {
        let one = run(v, &at(1)).unwrap();
        let two = run(v, &at(2)).unwrap();
        assert!(one.commits > 0 && one.p50_us < two.p50_us, "{v}: {one:?} vs {two:?}");
    }
}

#[test]
fn read_only_transactions_commit_without_an_execute_phase_and_pass_the_checks() {
    use pisadb_switchtx::server::Workload;
    let mixed = RackConfig { workload: Workload { read_only_fraction: 0.5, ..Workload::default() }, ..small() };
    let only = RackConfig { workload: Workload { read_only_fraction: 1.0, ..Workload::default() }, ..small() };
    for v in ABLATION {
        let f = run(v, &mixed).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert!(f.commits > 0, "{v}: {f:?}");
        let r = run(v, &only).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(r.lock_us_mean, 0.0, "{v}: read-only transactions lock nothing");
        let rw = run(v, &small()).unwrap();
        assert!(r.p50_us < rw.p50_us, "{v}: two phases beat five: {r:?} vs {rw:?}");
    }
}

#[test]
fn tpcc_new_order_and_payment_commit_and_pass_the_checks() {
    use pisadb_switchtx::server::Workload;
    let cfg = RackConfig { workload: Workload { tpcc_warehouses: 4, ..Workload::default() }, mpl: 1, ..small() };
    for v in ["fasst", "tree-gas", "switchtx"] {
        let f = run(v, &cfg).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert!(f.commits > 0, "{v}: {f:?}");
    }
}

#[test]
fn blind_writes_skip_execute_and_validate_and_pass_the_checks() {
    use pisadb_switchtx::server::Workload;
    let mixed = RackConfig { workload: Workload { blind_fraction: 0.5, ..Workload::default() }, ..small() };
    let only = RackConfig { workload: Workload { blind_fraction: 1.0, ..Workload::default() }, ..small() };
    for v in ABLATION {
        let f = run(v, &mixed).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert!(f.commits > 0, "{v}: {f:?}");
        let b = run(v, &only).unwrap_or_else(|e| panic!("{v}: {e}"));
        let rw = run(v, &small()).unwrap();
        assert!(b.commits > 0 && b.p50_us < rw.p50_us, "{v}: three phases beat five: {b:?} vs {rw:?}");
    }
}

#[test]
fn tpcc_with_local_items_fits_its_messages() {
    // With local order lines a NewOrder's home server holds up to 49 of its tuples: its
    // `prepare` carries writes and reads of them all.
    use pisadb_switchtx::server::Workload;
    let w = Workload { tpcc_warehouses: 2, remote_items: 0.0, ..Workload::default() };
    let f = run("tree-gas", &RackConfig { workload: w, mpl: 1, ..small() }).unwrap();
    assert!(f.commits > 0, "{f:?}");
}

#[test]
fn eris_sequences_one_shot_transactions_and_refuses_more_than_40_shards() {
    let f = run("eris", &RackConfig { threads: 5, ..small() }).unwrap();
    assert!(f.commits > 0 && f.aborts == 0, "one-shot transactions never abort: {f:?}");
    assert_eq!(f.lock_us_mean, 0.0);
    let err = run("eris", &RackConfig { threads: 6, ..small() }).unwrap_err();
    assert!(err.contains("48 shards") && err.contains("threads <= 5"), "{err}");
    let tpcc = RackConfig {
        workload: pisadb_switchtx::server::Workload { tpcc_warehouses: 2, ..Default::default() },
        ..small()
    };
    assert!(run("eris", &tpcc).unwrap_err().contains("YCSB-T"));
}

#[test]
fn servers_killed_mid_run_restart_from_their_logs_and_no_commit_is_lost() {
    // Server 3 crashes 60 µs into the window and stays down 80 µs; server 6 crashes 200 µs in
    // for 40 µs. Each loses its memory and every datagram sent to it meanwhile, and restarts
    // from its write-ahead log. After the drain the checks (run inside `run_with`) must hold:
    // serializable, no commit lost, backups equal primaries, no lock left.
    use pisadb_sim::{Crash, Faults, Target};
    let cfg = RackConfig { durable: true, timeout_us: 100, measure_us: 400, ..small() };
    let crash = |node, at_us: u64, down_us: u64| Crash {
        target: Target::Node(node),
        at_ns: (50 + at_us) * 1_000,
        down_ns: down_us * 1_000,
    };
    let faults = Faults { seed: 1, crashes: vec![crash(3, 60, 80), crash(6, 200, 40)], ..Faults::default() };
    for v in ["fasst", "switchtx"] {
        let (f, stats) = pisadb_switchtx::rack::run_with(v, &cfg, Some(faults.clone()), 50_000_000)
            .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(stats.node_crashes, 2, "{v}");
        assert!(f.timeouts > 0, "{v}: transactions waiting on the crashed servers timed out: {f:?}");
        assert!(f.checked_commits > 20 && f.checked_commits >= f.commits, "{v}: {f:?}");
    }
    // Without the log there is nothing to restart from: the run refuses rather than go on.
    let volatile = RackConfig { durable: false, ..cfg };
    let err = pisadb_switchtx::rack::run_with("switchtx", &volatile, Some(faults), 50_000_000).unwrap_err();
    assert!(err.contains("keep no log"), "{err}");
}

/// The paper's YCSB-T on a rack with leases (none if 0), whose server 2 crashes at 300 µs and
/// stays down past the window.
fn crash_of_server_2(lease_us: u64) -> (pisadb_switchtx::rack::RackWorld, pisadb_switchtx::rack::RackFigures) {
    use pisadb_sim::{Crash, Faults, Target};
    let cfg = RackConfig {
        threads: 2,
        warmup_us: 0,
        measure_us: 1_500,
        durable: true,
        lease_us,
        timeout_us: 200,
        ..RackConfig::default()
    };
    let faults = Faults {
        seed: 1,
        loss: 0.0,
        duplicate: 0.0,
        jitter_ns: 0,
        reorder: false,
        slow: Vec::new(),
        crashes: vec![Crash { target: Target::Node(2), at_ns: 300_000, down_ns: 3_000_000 }],
        heal_at_ns: 0,
    };
    pisadb_switchtx::rack::run_world("tree-gas", &cfg, Some(faults), pisadb_switchtx::rack::EVENTS_MAX)
        .unwrap_or_else(|e| panic!("lease_us {lease_us}: {e}"))
}

#[test]
fn a_crashed_servers_backup_is_promoted_and_serves_its_shard_while_it_is_down() {
    let (world, promoted) = crash_of_server_2(50);
    let (_, waited) = crash_of_server_2(0);
    eprintln!("promoted: {promoted:?}\nwaited: {waited:?}");
    // The manager removed server 2: shard 2 is served by its backup, server 3, with no backup
    // left, and shard 1 lost its backup (server 2).
    let map = world.hosts()[3].map().clone();
    assert_eq!((map.epoch, map.primary_of(2), map.backup_of(2), map.backup_of(1)), (1, 3, None, None), "{map:?}");
    assert!(world.hosts().iter().all(|h| h.map().epoch == 1), "every server, the restarted one too, follows it");
    // Shard 2's records moved into server 3's primary store, and were written there after.
    let shard2 = |k: &u64| pisadb_switchtx::server::shard_of(*k) == 2;
    assert!(world.hosts()[3].primary().keys().any(shard2));
    assert!(!world.hosts()[3].backup().keys().any(shard2));
    // Every transaction touches every shard (8 keys over the 8 servers). Without promotion
    // they wait for the restart, which comes after the window; with it, new transactions go
    // to server 3, and those in flight when server 2 failed are decided without it (their
    // locks would otherwise hold the hot keys until it is back).
    assert!(promoted.commits > 2 * waited.commits, "{} vs {}", promoted.commits, waited.commits);
    // Both passed the end-of-run checks (serializable, no lost commit, replicas equal).
    assert!(promoted.checked_commits >= promoted.commits);
}

#[test]
fn a_loaded_rack_with_short_leases_and_no_failure_removes_no_one() {
    // Renewals have their own core and the manager does not judge when it was itself held up:
    // busy workers (every lane starting at once after the first grant, a burst of
    // resolutions) must not make a live server look lapsed.
    let cfg =
        RackConfig { threads: 8, warmup_us: 0, measure_us: 400, durable: true, lease_us: 20, ..RackConfig::default() };
    let (world, f) = pisadb_switchtx::rack::run_world("switchtx", &cfg, None, pisadb_switchtx::rack::EVENTS_MAX)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(f.commits > 0, "{f:?}");
    for h in world.hosts() {
        assert_eq!(h.map().epoch, 0, "{:?}", h.map());
    }
}
