//! Conflict-serializability of the rack's committed histories.
//!
//! Every committed transaction on the nodes records, per tuple, the version it read (the id of
//! the attempt whose write it saw, 0 for the initial load) and the version it overwrote. From
//! that the checker builds the direct serialization graph (Adya): `ww` from the overwritten
//! version's writer to the new writer, `wr` from a version's writer to its readers, `rw` from a
//! reader of a version to the transaction that overwrote that version. The history is
//! conflict-serializable iff the graph is acyclic. Switch transactions are checked separately
//! (serial replay in GID order, `rack.rs`).

use pisadb_node::{Cc, CommittedTxn, Mode};
use pisadb_sim::{run, RunConfig, WorkloadSpec};
use pisadb_workload::{Scheme, SmallBankConfig, YcsbConfig};
use std::collections::{BTreeMap, VecDeque};

/// Checks the history; on failure says what is wrong.
fn check(history: &[CommittedTxn]) -> Result<usize, String> {
    let ids: BTreeMap<u64, usize> = history.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    if ids.len() != history.len() {
        return Err("duplicate transaction id".into());
    }
    // Who overwrote version `v` of `key`.
    let mut next_writer: BTreeMap<(pisadb_core::TupleKey, u64), u64> = BTreeMap::new();
    for t in history {
        for &(key, prev) in &t.writes {
            if let Some(other) = next_writer.insert((key, prev), t.id) {
                return Err(format!("lost update: {other:#x} and {:#x} both overwrote {key:?}@{prev:#x}", t.id));
            }
        }
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); history.len()];
    let mut add = |from: u64, to: u64| -> Result<(), String> {
        if from == 0 || from == to {
            return Ok(());
        }
        let (&f, &t) = (ids.get(&from).ok_or(format!("version {from:#x} written by no committed txn"))?, &ids[&to]);
        edges[f].push(t);
        Ok(())
    };
    for t in history {
        for &(_, prev) in &t.writes {
            add(prev, t.id)?;
        }
        for &(key, seen) in &t.reads {
            add(seen, t.id)?;
            if let Some(&w) = next_writer.get(&(key, seen)) {
                add(t.id, w)?;
            }
        }
    }
    // Kahn: an acyclic graph empties completely.
    let mut indegree = vec![0usize; history.len()];
    edges.iter().flatten().for_each(|&t| indegree[t] += 1);
    let mut ready: VecDeque<usize> = (0..history.len()).filter(|&i| indegree[i] == 0).collect();
    let mut removed = 0;
    while let Some(i) = ready.pop_front() {
        removed += 1;
        for &t in &edges[i] {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.push_back(t);
            }
        }
    }
    if removed != history.len() {
        return Err(format!("cycle among {} transactions", history.len() - removed));
    }
    Ok(edges.iter().map(Vec::len).sum())
}

fn k(r: u64) -> pisadb_core::TupleKey {
    pisadb_core::TupleKey::new(0, r)
}

#[test]
fn the_checker_accepts_a_serial_history_and_rejects_write_skew_and_lost_updates() {
    // T1 writes x; T2 reads x from T1 and writes y: serial.
    let serial = [
        CommittedTxn { id: 1, reads: vec![(k(0), 0)], writes: vec![(k(0), 0)] },
        CommittedTxn { id: 2, reads: vec![(k(0), 1), (k(1), 0)], writes: vec![(k(1), 0)] },
    ];
    assert!(check(&serial).is_ok());
    // Write skew: both read x and y initially, T1 writes x, T2 writes y.
    let skew = [
        CommittedTxn { id: 1, reads: vec![(k(0), 0), (k(1), 0)], writes: vec![(k(0), 0)] },
        CommittedTxn { id: 2, reads: vec![(k(0), 0), (k(1), 0)], writes: vec![(k(1), 0)] },
    ];
    assert!(check(&skew).unwrap_err().contains("cycle"));
    let lost = [
        CommittedTxn { id: 1, reads: vec![(k(0), 0)], writes: vec![(k(0), 0)] },
        CommittedTxn { id: 2, reads: vec![(k(0), 0)], writes: vec![(k(0), 0)] },
    ];
    assert!(check(&lost).unwrap_err().contains("lost update"));
}

fn histories(cfg: RunConfig) -> Vec<CommittedTxn> {
    let mut out = run(&cfg).unwrap();
    out.cluster.drain(5_000_000).unwrap();
    out.cluster.records().iter().filter_map(|r| r.history.clone()).collect()
}

/// Random seeds, both schemes, every mode, YCSB-A and SmallBank on a small contended rack.
#[test]
fn committed_histories_are_conflict_serializable() {
    for seed in 1..=3 {
        for mode in [Mode::NoSwitch, Mode::LmSwitch, Mode::P4db] {
            for cc in [Cc::NoWait, Cc::WaitDie] {
                // Odd seeds partition by range, even ones round robin.
                let partitioning = if seed % 2 == 1 { Scheme::Range } else { Scheme::RoundRobin };
                let ycsb = YcsbConfig {
                    nodes: 4,
                    rows: 2_000,
                    hot_per_node: 8,
                    hot_prob: 0.5,
                    partitioning,
                    ..YcsbConfig::default()
                };
                let sb = SmallBankConfig {
                    nodes: 4,
                    accounts: 2_000,
                    hot_per_node: 5,
                    partitioning,
                    ..SmallBankConfig::default()
                };
                for workload in [WorkloadSpec::Ycsb(ycsb), WorkloadSpec::SmallBank(sb)] {
                    let cfg = RunConfig {
                        nodes: 4,
                        workers: 4,
                        mode,
                        cc,
                        seed,
                        workload,
                        warmup_ns: 0,
                        measure_ns: 200_000,
                        layout_sample: 1_000,
                        record_history: true,
                        ..RunConfig::ycsb_default()
                    };
                    let h = histories(cfg);
                    assert!(h.len() > 50, "{mode:?} {cc:?} seed {seed}: only {} transactions", h.len());
                    if let Err(why) = check(&h) {
                        panic!("{mode:?} {cc:?} seed {seed}: {why}");
                    }
                }
            }
        }
    }
}
