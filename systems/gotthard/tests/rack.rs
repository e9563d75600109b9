//! Whole runs of the rack: the four variants complete, the store ends where the commits say,
//! the same seed gives the same trace, and the switch's modes save what they should.

use pisadb_gotthard::program::Mode;
use pisadb_gotthard::rack::{run, run_checked, RackConfig};

fn small(write_share: f64) -> RackConfig {
    RackConfig { clients: 4, write_share, commits_per_client: 40, ..RackConfig::default() }
}

#[test]
fn every_variant_completes_and_the_store_counts_the_committed_increments() {
    for mode in [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort] {
        let f = run(mode, &small(0.25)).unwrap();
        assert_eq!(f.commits, 160, "{mode:?}");
        assert_eq!(
            i64::from(f.final_value),
            i64::try_from(f.write_commits).unwrap(),
            "{mode:?}: lost or doubled increments"
        );
        assert_eq!(f.rejected, 0, "{mode:?}");
        if mode == Mode::Forward || mode == Mode::ReadCache {
            assert_eq!(f.aborts_switch + f.aborts_switch_optimistic, 0, "{mode:?} never aborts");
        }
    }
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let a = run(Mode::OptimisticAbort, &small(0.25)).unwrap();
    let b = run(Mode::OptimisticAbort, &small(0.25)).unwrap();
    assert_eq!(a, b);
    let c = run(Mode::OptimisticAbort, &RackConfig { seed: 2, ..small(0.25) }).unwrap();
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn the_switch_modes_save_time_where_the_paper_says() {
    let forward = run(Mode::Forward, &small(0.25)).unwrap();
    let gotthard = run(Mode::OptimisticAbort, &small(0.25)).unwrap();
    assert!(gotthard.completion_s < forward.completion_s, "{gotthard:?} vs {forward:?}");
    assert!(gotthard.aborts_switch_optimistic > 0);
    let reads_forward = run(Mode::Forward, &small(0.0)).unwrap();
    let reads_cached = run(Mode::ReadCache, &small(0.0)).unwrap();
    assert!(reads_cached.completion_s < reads_forward.completion_s / 2.0, "{reads_cached:?}");
}

#[test]
fn latency_is_at_least_one_round_trip() {
    let f = run(Mode::Forward, &small(0.25)).unwrap();
    assert!(f.latency.latency_us_mean >= 100_000.0 && f.latency.latency_us_p99 >= f.latency.latency_us_mean, "{f:?}");
}

#[test]
fn every_variant_passes_the_oracles_serializable_history_and_every_commit_counted_once() {
    for mode in [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort] {
        for write_share in [0.0, 0.25, 1.0] {
            let f = run_checked(mode, &small(write_share)).unwrap_or_else(|e| panic!("{mode:?} {write_share}: {e}"));
            assert_eq!(f.retransmissions, 0, "{mode:?}: a healthy run never times out");
        }
    }
}

#[test]
fn eager_retransmissions_duplicate_every_attempt_and_nothing_commits_twice() {
    // A 30 ms timeout against a 100 ms round trip: every attempt is sent about three times,
    // so the switch sees copies of logged increments (and aborts them) and the store sees
    // copies of committed ones (and replays them). Every oracle must still hold.
    for mode in [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort] {
        let cfg = RackConfig { retransmit_us: 30_000, ..small(0.5) };
        let f = run_checked(mode, &cfg).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert!(f.retransmissions > 100, "{mode:?}: {f:?}");
        assert!(f.store_replays > 0 && f.stale_replies > 0, "{mode:?}: {f:?}");
        assert_eq!(f.commits, 160, "{mode:?}");
    }
}

#[test]
fn the_mode_is_whatever_the_control_plane_installed() {
    // The program has no mode of its own: a rack whose controller installs `forward` sees no
    // switch aborts, one that installs `gotthard` does, over the control channel.
    let forward = run_checked(Mode::Forward, &small(0.5)).unwrap();
    let gotthard = run_checked(Mode::OptimisticAbort, &small(0.5)).unwrap();
    assert_eq!(forward.aborts_switch + forward.aborts_switch_optimistic, 0);
    assert!(gotthard.aborts_switch_optimistic > 0);
}

/// Latency variance (`jitter_us`) is applied (the trace moves, the median latency grows by
/// the added delay), the jittered runs pass every oracle in every mode, and they are as
/// deterministic as the others: same seed, same trace.
#[test]
fn jittered_runs_are_slower_deterministic_and_pass_the_oracles() {
    let fixed = RackConfig { write_share: 1.0, commits_per_client: 50, ..RackConfig::default() };
    let jittery = RackConfig { jitter_us: 1_000, ..fixed.clone() };
    let steady = run(Mode::Forward, &fixed).unwrap();
    let varied = run_checked(Mode::Forward, &jittery).unwrap();
    assert_ne!(steady.trace_hash, varied.trace_hash);
    assert!(varied.latency.latency_us_p50 > steady.latency.latency_us_p50, "{:?} {:?}", varied.latency, steady.latency);
    assert_eq!(varied, run(Mode::Forward, &jittery).unwrap());
    for mode in [Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort] {
        run_checked(mode, &jittery).unwrap();
    }
}
