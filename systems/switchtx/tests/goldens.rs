//! Pinned figures of one small SwitchTx run per variant (8 servers × 2 threads, MPL 2,
//! YCSB-T θ 0.8, 50 µs warm-up, 200 µs window, seed 1): a change that moves a trace hash or a
//! figure has changed behaviour and must say why.

use pisadb_switchtx::rack::{run, RackConfig};

#[test]
fn small_runs_are_pinned() {
    let cfg = RackConfig { threads: 2, warmup_us: 50, measure_us: 200, ..RackConfig::default() };
    // (variant, trace hash, commits in the window, aborts, checked commits)
    let pinned: [(&str, &str, u64, u64, u64); 5] = [
        ("fasst", "65d509291e3f0386", 94, 4, 125),
        ("gas", "7e41d9fe36db24d0", 118, 5, 155),
        ("tree-gas", "c39ca014de023f84", 120, 5, 157),
        ("reorder", "96f9fdea91e9349b", 118, 4, 156),
        ("switchtx", "1873c8194a64873b", 80, 2, 158),
    ];
    for (variant, hash, commits, aborts, checked) in pinned {
        let f = run(variant, &cfg).unwrap();
        assert_eq!(
            (f.trace_hash.as_str(), f.commits, f.aborts, f.checked_commits),
            (hash, commits, aborts, checked),
            "{variant}: {f:?}"
        );
    }
}

#[test]
fn a_run_whose_attempts_time_out_is_pinned() {
    // The same run with a 30 µs timeout, below the loaded latency: attempts time out, are
    // resolved by querying their participants, and back off (seeded jitter) before retrying.
    // Pins the timeout path and the retry backoff. (Before the backoff, retrying at once:
    // 12 commits, 52 aborts, 123 timeouts, 12 checked.)
    let cfg = RackConfig { threads: 2, warmup_us: 50, measure_us: 200, timeout_us: 30, ..RackConfig::default() };
    let f = run("tree-gas", &cfg).unwrap();
    assert!(f.timeouts > 0 && f.aborts_timeout > 0, "{f:?}");
    assert_eq!(
        (f.trace_hash.as_str(), f.commits, f.aborts, f.timeouts, f.checked_commits),
        ("1187a3604c628fef", 13, 51, 111, 21),
        "{f:?}"
    );
}

#[test]
fn the_eris_baseline_is_pinned() {
    // The same small run under the Eris baseline (a sequencer switch, one-shot transactions,
    // its own server host): pinned when Eris's executor became a host type of its own, with
    // the figures the flag-driven server gave.
    let cfg = RackConfig { threads: 2, warmup_us: 50, measure_us: 200, ..RackConfig::default() };
    let f = run("eris", &cfg).unwrap();
    assert_eq!(
        (f.trace_hash.as_str(), f.commits, f.aborts, f.checked_commits),
        ("87f0a723e23c26de", 321, 0, 418),
        "{f:?}"
    );
}
