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
fn transkv_answers_hot_reads_in_the_switch_and_beats_the_coordinator() {
    let cfg = RackConfig { write_ratio: 0.0, ..small() };
    let t = run_checked("transkv", &cfg).unwrap();
    let c = run_checked("tranx-coor", &cfg).unwrap();
    assert!(t.switch_answers > t.commits / 2, "{t:?}");
    assert!(t.mtps > c.mtps && t.read_us[0] < c.read_us[0], "{t:?} {c:?}");
    let cached = run_checked("transkv-cache", &cfg).unwrap();
    let plain = run_checked("no-cache", &cfg).unwrap();
    assert!(cached.switch_answers > 0 && plain.switch_answers == 0);
    assert!(cached.mtps > plain.mtps, "{cached:?} {plain:?}");
}
