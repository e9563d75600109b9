//! Refinement: local search on the layout's real objective, the single-pass count.
//!
//! The max-k-cut and the partition order optimise a proxy: cut weight, then the directed
//! weight kept forward. Both are blind to what makes a whole transaction single-pass (*all* its
//! tuples in distinct arrays *and all* its orders forward). This last step moves one tuple at a
//! time to the array that most increases the number of sample transactions that run in one
//! pass, until no move helps (or a round limit). Each move only re-checks the transactions
//! that touch the moved tuple, so a round costs about `tuples × arrays × transactions per
//! tuple` checks of a few operations each.

use crate::graph::AccessGraph;
use crate::target::LayoutTarget;
use pisadb_core::{rng, Txn};
use rand::seq::SliceRandom;

/// Rounds of moves over all tuples; the search usually settles in three or four.
const MAX_ROUNDS: usize = 8;

/// A sample transaction as the search sees it: the vertex of each operation and the operation
/// pairs that must keep their order.
struct SampleTxn {
    vertex: Vec<usize>,
    ordered: Vec<(usize, usize)>,
}

/// Improves `slot_of_vertex` (an index into `target.arrays` per vertex) in place.
pub fn refine(g: &AccessGraph, sample: &[Txn], target: &LayoutTarget, slot_of_vertex: &mut [usize], seed: u64) {
    let txns: Vec<SampleTxn> = sample
        .iter()
        .filter_map(|t| {
            let vertex = t.ops.iter().map(|op| g.vertex(op.key)).collect::<Option<Vec<_>>>()?;
            Some(SampleTxn { vertex, ordered: t.dependencies() })
        })
        .collect();
    let mut txns_of: Vec<Vec<usize>> = vec![Vec::new(); g.len()];
    for (t, txn) in txns.iter().enumerate() {
        let mut vs = txn.vertex.clone();
        vs.sort_unstable();
        vs.dedup();
        vs.into_iter().for_each(|v| txns_of[v].push(t));
    }
    let arrays = &target.arrays;
    let mut load = vec![0u32; arrays.len()];
    slot_of_vertex.iter().for_each(|&s| load[s] += 1);
    let single = |txn: &SampleTxn, slots: &[usize]| {
        let slot = |i: usize| slots[txn.vertex[i]];
        let n = txn.vertex.len();
        let distinct = (0..n).all(|j| (0..j).all(|i| arrays[slot(i)].register != arrays[slot(j)].register));
        distinct && txn.ordered.iter().all(|&(i, j)| arrays[slot(i)].stage < arrays[slot(j)].stage)
    };
    let mut ok: Vec<bool> = txns.iter().map(|t| single(t, slot_of_vertex)).collect();
    let mut rng = rng::derive(seed, "layout/refine");
    let mut order: Vec<usize> = (0..g.len()).filter(|&v| !txns_of[v].is_empty()).collect();
    for _ in 0..MAX_ROUNDS {
        let mut improved = false;
        order.shuffle(&mut rng);
        for &v in &order {
            let current = slot_of_vertex[v];
            let before: i64 = txns_of[v].iter().map(|&t| i64::from(ok[t])).sum();
            let mut best = (0i64, current);
            for s in 0..arrays.len() {
                if s == current || load[s] >= arrays[s].capacity {
                    continue;
                }
                slot_of_vertex[v] = s;
                let after: i64 = txns_of[v].iter().map(|&t| i64::from(single(&txns[t], slot_of_vertex))).sum();
                if after - before > best.0 {
                    best = (after - before, s);
                }
            }
            slot_of_vertex[v] = best.1;
            if best.1 != current {
                load[current] -= 1;
                load[best.1] += 1;
                for &t in &txns_of[v] {
                    ok[t] = single(&txns[t], slot_of_vertex);
                }
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
}
