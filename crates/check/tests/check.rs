//! The checker against serial histories (accepted), classic anomalies (rejected with the right
//! violation) and serial histories with one stale read planted in them (rejected).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use pisadb_check::{CommittedTxn, EdgeKind, History, TxnRef, Violation};
use pisadb_core::TupleKey;
use proptest::prelude::*;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const X: TupleKey = TupleKey::new(0, 0);
const Y: TupleKey = TupleKey::new(0, 1);

fn txn(id: TxnRef, reads: &[(TupleKey, TxnRef)], writes: &[(TupleKey, TxnRef)]) -> CommittedTxn {
    CommittedTxn { id, reads: reads.to_vec(), writes: writes.to_vec() }
}

fn check(txns: &[CommittedTxn]) -> Result<usize, Violation> {
    txns.iter().cloned().collect::<History>().check().map(|summary| summary.edges)
}

/// Executes `n` random transactions one after another on a versioned map of `2 * keys` tuples
/// and records what each read and overwrote: the history, in execution order. Ids are
/// multiples of `stride` (dense or sparse ids take different lookup paths in the checker),
/// shuffled, so nothing can lean on ids following the execution order.
fn serial_history(seed: u64, n: usize, keys: u64, ops: RangeInclusive<usize>, stride: u64) -> Vec<CommittedTxn> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ids: Vec<TxnRef> = (1..=n as u64).map(|i| stride * i).collect();
    ids.shuffle(&mut rng);
    // Each tuple's latest version (its writer; absent = initial).
    let mut latest: BTreeMap<TupleKey, TxnRef> = BTreeMap::new();
    ids.into_iter()
        .map(|id| {
            let mut t = CommittedTxn { id, ..Default::default() };
            for _ in 0..rng.random_range(ops.clone()) {
                let key = TupleKey::new(rng.random_range(0..2), rng.random_range(0..keys));
                let seen = latest.get(&key).copied().unwrap_or(0);
                let kind = rng.random_range(0..3); // read, write, read-modify-write
                if kind != 1 && !t.reads.iter().any(|&(k, _)| k == key) {
                    t.reads.push((key, seen));
                }
                if kind != 0 && seen != id {
                    t.writes.push((key, seen));
                    latest.insert(key, id);
                }
            }
            t
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn serial_histories_are_accepted(
        seed in any::<u64>(), n in 0usize..300, keys in 1u64..12, stride in prop_oneof![Just(3), Just(1 << 40)],
    ) {
        let serial = serial_history(seed, n, keys, 1..=8, stride);
        let order: Vec<TxnRef> = serial.iter().map(|t| t.id).collect();
        let mut recorded = serial;
        recorded.shuffle(&mut ChaCha8Rng::seed_from_u64(!seed));
        let history: History = recorded.into_iter().collect();
        let summary = history.check();
        prop_assert!(summary.is_ok(), "{summary:?}");
        prop_assert_eq!(summary.unwrap().txns, n);
        prop_assert_eq!(history.check_order(&order), Ok(()));
    }
}

#[test]
fn lost_update_is_a_forked_version() {
    let txns = [txn(1, &[(X, 0)], &[(X, 0)]), txn(2, &[(X, 0)], &[(X, 0)])];
    assert_eq!(check(&txns), Err(Violation::ForkedVersion { key: X, prev: 0, writers: (1, 2) }));
    // The same on a version written by a committed transaction.
    let txns = [txn(1, &[], &[(X, 0)]), txn(3, &[(X, 1)], &[(X, 1)]), txn(2, &[(X, 1)], &[(X, 1)])];
    assert_eq!(check(&txns), Err(Violation::ForkedVersion { key: X, prev: 1, writers: (3, 2) }));
}

#[test]
fn write_skew_is_a_cycle() {
    let txns = [txn(1, &[(X, 0), (Y, 0)], &[(X, 0)]), txn(2, &[(X, 0), (Y, 0)], &[(Y, 0)])];
    let explanation = "T1 -rw-> T2 -rw-> T1".to_string();
    assert_eq!(check(&txns), Err(Violation::Cycle { txns: vec![1, 2], explanation }));
}

#[test]
fn read_skew_is_a_cycle() {
    // T1 reads x before T2 writes x and y, then reads T2's y: a non-repeatable view of the pair.
    let txns = [txn(2, &[], &[(X, 0), (Y, 0)]), txn(1, &[(X, 0), (Y, 2)], &[])];
    let explanation = "T1 -rw-> T2 -wr-> T1".to_string();
    assert_eq!(check(&txns), Err(Violation::Cycle { txns: vec![1, 2], explanation }));
}

#[test]
fn non_repeatable_read_is_a_cycle() {
    // T1 read x twice, before and after T2 overwrote it.
    let txns = [txn(1, &[(X, 0), (X, 2)], &[]), txn(2, &[], &[(X, 0)])];
    let explanation = "T1 -rw-> T2 -wr-> T1".to_string();
    assert_eq!(check(&txns), Err(Violation::Cycle { txns: vec![1, 2], explanation }));
}

#[test]
fn circular_information_flow_is_a_cycle() {
    // Each of three transactions read a write of the next one: G1c, the shortest cycle is reported.
    let z = TupleKey::new(1, 0);
    let txns = [
        txn(4, &[(Y, 5)], &[(X, 0)]),
        txn(5, &[(z, 6)], &[(Y, 0)]),
        txn(6, &[(X, 4)], &[(z, 0)]),
        txn(7, &[(X, 4), (Y, 5), (z, 6)], &[]),
    ];
    let explanation = "T4 -wr-> T6 -wr-> T5 -wr-> T4".to_string();
    assert_eq!(check(&txns), Err(Violation::Cycle { txns: vec![4, 6, 5], explanation }));
}

#[test]
fn dangling_versions_are_unknown() {
    // A read of an aborted (unrecorded) transaction's write.
    let aborted_read = [txn(1, &[], &[(X, 0)]), txn(2, &[(X, 9)], &[])];
    assert_eq!(check(&aborted_read), Err(Violation::UnknownVersion { key: X, txn: 2, version: 9 }));
    // A read of a version of y from a committed transaction that never wrote y.
    let wrong_tuple = [txn(1, &[], &[(X, 0)]), txn(2, &[(Y, 1)], &[])];
    assert_eq!(check(&wrong_tuple), Err(Violation::UnknownVersion { key: Y, txn: 2, version: 1 }));
    // An overwrite of a version nobody wrote, and of the version the write itself installs.
    let bad_prev = [txn(1, &[], &[(X, 3)])];
    assert_eq!(check(&bad_prev), Err(Violation::UnknownVersion { key: X, txn: 1, version: 3 }));
    let own_prev = [txn(1, &[], &[(X, 1)])];
    assert_eq!(check(&own_prev), Err(Violation::UnknownVersion { key: X, txn: 1, version: 1 }));
}

#[test]
fn duplicate_and_reserved_ids_are_rejected() {
    assert_eq!(check(&[txn(5, &[], &[(X, 0)]), txn(5, &[], &[])]), Err(Violation::DuplicateId(5)));
    assert_eq!(check(&[txn(0, &[], &[])]), Err(Violation::DuplicateId(0)));
}

#[test]
fn reading_your_own_write_makes_no_self_edge() {
    // T1 writes x and reads it back; T2 reads T1's x and overwrites it. Edges T1 -> T2: ww, wr,
    // and rw (T1 read its own version, which T2 overwrote); no T1 -> T1 and no T2 -> T2.
    let txns = [txn(1, &[(X, 1)], &[(X, 0)]), txn(2, &[(X, 1)], &[(X, 1)])];
    assert_eq!(check(&txns), Ok(3));
    assert_eq!(check(&txns[..1]), Ok(0));
}

#[test]
fn check_order_accepts_the_serial_order_and_rejects_a_swapped_wr_pair() {
    let txns = [txn(1, &[], &[(X, 0)]), txn(2, &[(X, 1)], &[(Y, 0)]), txn(3, &[(Y, 2)], &[])];
    let history: History = txns.into_iter().collect();
    assert_eq!(history.check_order(&[1, 2, 3]), Ok(()));
    assert_eq!(history.check_order(&[2, 1, 3]), Err(Violation::OrderViolated { from: 1, to: 2, kind: EdgeKind::Wr }));
    assert_eq!(history.check_order(&[1, 3, 2]), Err(Violation::OrderViolated { from: 2, to: 3, kind: EdgeKind::Wr }));
}

#[test]
fn check_order_needs_a_permutation_of_the_committed_transactions() {
    let history: History = [txn(1, &[], &[(X, 0)]), txn(2, &[(X, 1)], &[])].into_iter().collect();
    assert_eq!(history.check_order(&[1]), Err(Violation::OrderMismatch(2)));
    assert_eq!(history.check_order(&[1, 2, 1]), Err(Violation::OrderMismatch(1)));
    assert_eq!(history.check_order(&[1, 4, 2]), Err(Violation::OrderMismatch(4)));
}

/// In a serial history, makes one read see a version older than the one it saw, one that an
/// earlier transaction had already overwritten. Only reads whose reader provably depends on
/// the version it saw are candidates, since otherwise the stale read might serialize by moving
/// the reader earlier: the reader also overwrote that version (stale read-modify-write), or
/// read another tuple from the same writer (read skew). Returns the corrupted history and the
/// reader's id, or `None` if the history has no candidate.
fn plant_stale_read(serial: &mut [CommittedTxn], rng: &mut ChaCha8Rng) -> Option<TxnRef> {
    let prev: BTreeMap<(TupleKey, TxnRef), TxnRef> =
        serial.iter().flat_map(|t| t.writes.iter().map(move |&(key, prev)| ((key, t.id), prev))).collect();
    let mut candidates = Vec::new();
    for (r, t) in serial.iter().enumerate() {
        for (j, &(key, seen)) in t.reads.iter().enumerate() {
            let rmw = t.writes.contains(&(key, seen));
            let skew = t.reads.iter().any(|&(other, w)| other != key && w == seen);
            if seen != 0 && seen != t.id && (rmw || skew) {
                candidates.push((r, j));
            }
        }
    }
    let &(r, j) = candidates.choose(rng)?;
    let (key, seen) = serial[r].reads[j];
    // The versions of `key` before `seen`, newest first, down to the initial one.
    let mut older = vec![prev[&(key, seen)]];
    while let Some(&v) = older.last().filter(|&&v| v != 0) {
        older.push(prev[&(key, v)]);
    }
    serial[r].reads[j].1 = *older.choose(rng).expect("at least the initial version");
    Some(serial[r].id)
}

#[test]
fn serial_histories_with_a_stale_read_are_rejected() {
    let mut planted = 0;
    for seed in 0..300 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut serial = serial_history(seed, 60, 4, 1..=6, if seed % 2 == 0 { 1 } else { 1 << 40 });
        let order: Vec<TxnRef> = serial.iter().map(|t| t.id).collect();
        let Some(reader) = plant_stale_read(&mut serial, &mut rng) else { continue };
        planted += 1;
        let history: History = serial.into_iter().collect();
        // Every cycle runs through the reader: only its edges changed.
        match history.check() {
            Err(Violation::Cycle { txns, .. }) => {
                assert!(txns.contains(&reader), "seed {seed}: {txns:?} misses T{reader}")
            }
            other => panic!("seed {seed}: stale read of T{reader} accepted or misreported: {other:?}"),
        }
        assert!(matches!(history.check_order(&order), Err(Violation::OrderViolated { .. })), "seed {seed}");
    }
    assert!(planted >= 250, "only {planted} histories had a stale read planted");
}

/// The performance target: run with `cargo test --release -p pisadb-check -- --ignored`.
#[test]
#[ignore = "a million transactions: run in release mode"]
fn a_million_transactions_of_eight_accesses_are_checked() {
    let serial = serial_history(7, 1_000_000, 200_000, 8..=8, 3);
    let order: Vec<TxnRef> = serial.iter().map(|t| t.id).collect();
    let history: History = serial.into_iter().collect();
    let summary = history.check().expect("serial");
    assert_eq!(summary.txns, 1_000_000);
    assert_eq!(history.check_order(&order), Ok(()));
}
