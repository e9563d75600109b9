//! Pinned figures of small Gotthard racks (4 clients, 25% writes, 40 commits each, seed 1):
//! a refactor that moves a trace hash or a completion time has changed behaviour and must say
//! why. Also the authors' scenarios end to end on the simulated rack.

use pisadb_gotthard::program::Mode;
use pisadb_gotthard::rack::{mode_of, run, RackConfig};

#[test]
fn small_racks_are_pinned() {
    let cfg = RackConfig { clients: 4, write_share: 0.25, commits_per_client: 40, ..RackConfig::default() };
    // (variant, trace hash, completion s, aborts store, switch, switch-optimistic, final value)
    let pinned = [
        ("forward", "3d4affd7d72f8474", 5.200316532, 34, 0, 0, 36),
        ("read-cache", "592b149397b078a1", 4.240307645, 88, 0, 0, 36),
        ("gotthard", "d821fa74554d8650", 4.260274844, 0, 0, 18, 36),
        ("early-abort", "2fb53cbfc7fdf81e", 5.040310674, 26, 4, 0, 36),
    ];
    for (variant, hash, completion_s, store, switch, optimistic, value) in pinned {
        let f = run(mode_of(variant).unwrap(), &cfg).unwrap();
        assert_eq!(f.trace_hash, hash, "{variant}: {f:?}");
        assert!((f.completion_s - completion_s).abs() < 1e-9, "{variant}: {f:?}");
        assert_eq!((f.aborts_store, f.aborts_switch, f.aborts_switch_optimistic), (store, switch, optimistic));
        assert_eq!(f.final_value, value, "{variant}");
    }
}

#[test]
fn two_concurrent_writers_on_the_rack_the_switch_aborts_the_second_optimistically() {
    // Two clients, only writes, one commit each: both start from the same cache value at the
    // same instant; the first increment is logged by the switch, the second is answered
    // OPTIMISTIC_ABORT with the first one's value, retried, and commits behind it.
    let cfg = RackConfig { clients: 2, write_share: 1.0, commits_per_client: 1, ..RackConfig::default() };
    let f = run(Mode::OptimisticAbort, &cfg).unwrap();
    assert_eq!((f.commits, f.aborts_store, f.aborts_switch, f.aborts_switch_optimistic), (2, 0, 0, 1), "{f:?}");
    assert_eq!(f.final_value, 2);
    // The retry's round trip goes only to the switch: 2 × 20 ms + the full 100 ms.
    assert!(f.completion_s < 0.25, "{f:?}");
    let fwd = run(Mode::Forward, &cfg).unwrap();
    assert_eq!((fwd.aborts_store, fwd.final_value), (1, 2), "{fwd:?}");
    assert!(fwd.completion_s > f.completion_s);
}

#[test]
fn a_pipelined_chain_all_commit_at_the_store() {
    // At 25% writes and 8 clients, Gotthard's switch-side log lets back-to-back increments
    // pass: the store aborts (almost) nothing.
    let cfg = RackConfig { clients: 8, write_share: 0.25, commits_per_client: 50, ..RackConfig::default() };
    let f = run(Mode::OptimisticAbort, &cfg).unwrap();
    assert_eq!(f.commits, 400);
    assert!(f.aborts_store <= 1, "{f:?}");
    assert_eq!(i64::from(f.final_value), i64::try_from(f.write_commits).unwrap());
}
