//! The fault-injection campaign (`pisadb fuzz`) as a test: a few hundred seeds, each a small
//! rack with lossy, duplicating, reordering and slow links and crashes of nodes and of the
//! switch, each checked by every oracle of [`pisadb_p4db::fuzz`]. A longer campaign is
//! `cargo run --release -- fuzz --seeds 20000`.

use pisadb_p4db::fuzz::{replays_identically, run_case, FuzzCase};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Seeds of the CI campaign.
const SEEDS: u64 = 400;

#[test]
fn every_seed_of_the_campaign_passes_every_oracle() {
    let next = AtomicU64::new(1);
    let reports = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed > SEEDS {
                    break;
                }
                let report = run_case(&FuzzCase::from_seed(seed));
                reports.lock().unwrap().push(report);
            });
        }
    });
    let reports = reports.into_inner().unwrap();
    let failed: Vec<String> = reports
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("seed {} ({}; {}): {f}", r.seed, r.rack, r.faults)))
        .collect();
    assert!(
        failed.is_empty(),
        "{} seeds failed (replay one with `pisadb fuzz --seed S --seeds 1`):\n{}",
        failed.len(),
        failed.join("\n")
    );
    // The campaign did inject what it claims to.
    let sum = |f: fn(&pisadb_p4db::fuzz::CaseReport) -> u64| reports.iter().map(f).sum::<u64>();
    let (crashes, lost, duplicated) = (sum(|r| r.crashes), sum(|r| r.lost), sum(|r| r.duplicated));
    let committed: usize = reports.iter().map(|r| r.committed).sum();
    println!("{SEEDS} seeds: {committed} committed, {crashes} crashes, {lost} lost, {duplicated} duplicated");
    assert!(
        crashes > SEEDS / 2 && lost > 1_000 && duplicated > 1_000,
        "{crashes} crashes, {lost} lost, {duplicated} dup"
    );
    assert!(reports.iter().all(|r| r.committed > 0), "a seed committed nothing");
}

/// The same seed, faults and crashes included, gives the same history.
#[test]
fn a_seed_with_crashes_and_loss_replays_to_the_same_trace() {
    let seed = (1..)
        .find(|&s| {
            let case = FuzzCase::from_seed(s);
            case.faults.loss > 0.0 && case.faults.crashes.len() >= 2
        })
        .unwrap();
    assert!(replays_identically(&FuzzCase::from_seed(seed)), "seed {seed}");
}

/// Seeds long campaigns found failing, fixed since. 1092 and 2891 (`--seeds 3000 --seed 1001`):
/// SmallBank on P4DB where a switch crash left a transaction unanswered whose effect a logged
/// one had read, and the only GIDs free for it were below a later write to a cell it read; the
/// rebuild gave it a GID after every logged one, so the GID-order replay disagreed with what the
/// nodes saw. It now searches the holes in the GIDs. 27081 (`--seeds 10000 --seed 24001`): that
/// search explained an earlier result with the wrong transaction and then found no hole for a
/// later one; it now takes its placements back and searches them together.
#[test]
fn seeds_the_long_campaign_found_pass() {
    for seed in [1092, 2891, 27081] {
        let report = run_case(&FuzzCase::from_seed(seed));
        assert!(report.crashes >= 2, "seed {seed} no longer crashes the switch: {}", report.faults);
        assert_eq!(report.failure, None, "seed {seed} ({}; {})", report.rack, report.faults);
    }
}

/// A switch that is back (rebuilt from the logs) before its last answers have arrived: every
/// link is 45 µs slower around a switch crash of 20 µs. A late answer of the crashed switch
/// may disagree with how the rebuild decided that transaction, so the nodes fence it off by the
/// epoch in its GID word. Before the fence, 38 of the 193 P4DB seeds among 1..400 failed like
/// this (a GID given to two transactions).
#[test]
fn answers_of_a_crashed_switch_that_arrive_after_its_rebuild_are_dropped() {
    use pisadb_p4db::run::{build_faulty, run_rack};
    use pisadb_sim::{Crash, SlowLink, Target};
    let mut fenced = 0;
    let cases = (1..).map(FuzzCase::from_seed).filter(|c| c.config.mode == pisadb_p4db::node::Mode::P4db).take(24);
    for mut case in cases {
        case.faults.slow = (0..case.config.nodes)
            .map(|node| SlowLink { node, from_ns: 400_000, until_ns: 700_000, extra_ns: 45_000 })
            .collect();
        case.faults.crashes =
            vec![Crash { target: Target::Switch(0), at_ns: 500_000 + case.seed * 100, down_ns: 20_000 }];
        let rack = build_faulty(&case.config, case.faults.clone(), case.peer_timeout_ns).expect("builds");
        let mut out = run_rack(&case.config, rack).expect("runs");
        pisadb_p4db::fuzz::check(&case, &mut out).unwrap_or_else(|e| panic!("seed {}: {e}", case.seed));
        fenced += out.cluster.hosts().iter().filter_map(|n| n.stats().rejected.get("stale_switch_epoch")).sum::<u64>();
    }
    assert!(fenced > 0, "no late answer was dropped: the test no longer makes any");
}
