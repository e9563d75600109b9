//! From partitions to arrays: edge directions, a partition order, and stages (paper §4.3).
//!
//! Between two partitions `p` and `q`, the directed edges of the access graph may point both
//! ways. The layout can honour only one: it keeps the heavier direction and drops the lighter
//! (those transactions will take a second pass). The kept edges can still form cycles over
//! three or more partitions; a greedy feedback-arc-set ordering (Eades, Lin and Smyth: peel
//! sinks to the back, sources to the front, otherwise the partition with the most
//! out-minus-in weight to the front) gives a linear order and drops the backward edges, which
//! leaves a DAG. The DAG is list-scheduled onto the stages: a partition is ready for a stage
//! when all its predecessors sit in earlier stages; among the ready ones the longest remaining
//! chain goes first. Partitions that find no stage in time take the free arrays left over;
//! their edges are the ones the pipeline is too short for.

use crate::graph::AccessGraph;
use crate::target::LayoutTarget;

/// Directed weight between partitions: `d[p][q]` = weight of transactions requiring a tuple of
/// `p` before a tuple of `q`.
pub fn directed_weights(g: &AccessGraph, partition: &[usize], k: usize) -> Vec<Vec<u64>> {
    let mut d = vec![vec![0u64; k]; k];
    for ((a, b), w) in g.edges() {
        let (pa, pb) = (partition[a], partition[b]);
        if pa != pb {
            d[pa][pb] += w.forward;
            d[pb][pa] += w.backward;
        }
    }
    d
}

/// The kept directions: for each pair the heavier side (on a tie, from the lower partition).
pub fn keep_heavier(d: &[Vec<u64>]) -> Vec<Vec<u64>> {
    let k = d.len();
    let mut kept = vec![vec![0u64; k]; k];
    for p in 0..k {
        for q in p + 1..k {
            if d[p][q] >= d[q][p] {
                kept[p][q] = d[p][q];
            } else {
                kept[q][p] = d[q][p];
            }
        }
    }
    kept
}

/// A linear order of the partitions that keeps as much of `kept`'s weight forward as the
/// Eades–Lin–Smyth heuristic finds. Deterministic: ties go to the lower partition.
pub fn linear_order(kept: &[Vec<u64>]) -> Vec<usize> {
    let k = kept.len();
    let mut remaining: Vec<bool> = vec![true; k];
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let out_w = |p: usize, rem: &[bool]| (0..k).filter(|&q| rem[q]).map(|q| kept[p][q]).sum::<u64>();
    let in_w = |p: usize, rem: &[bool]| (0..k).filter(|&q| rem[q]).map(|q| kept[q][p]).sum::<u64>();
    let mut left = k;
    while left > 0 {
        let live = |rem: &[bool]| (0..k).filter(|&p| rem[p]).collect::<Vec<_>>();
        if let Some(&sink) = live(&remaining).iter().find(|&&p| out_w(p, &remaining) == 0) {
            remaining[sink] = false;
            tail.push(sink);
        } else if let Some(&source) = live(&remaining).iter().find(|&&p| in_w(p, &remaining) == 0) {
            remaining[source] = false;
            head.push(source);
        } else {
            let best = live(&remaining)
                .into_iter()
                .max_by_key(|&p| (out_w(p, &remaining) as i128 - in_w(p, &remaining) as i128, std::cmp::Reverse(p)))
                .expect("a partition remains");
            remaining[best] = false;
            head.push(best);
        }
        left -= 1;
    }
    head.extend(tail.into_iter().rev());
    head
}

/// The array slot (index into `target.arrays`) of each of the `k` partitions.
pub fn assign_to_arrays(g: &AccessGraph, partition: &[usize], k: usize, target: &LayoutTarget) -> Vec<usize> {
    assert_eq!(k, target.arrays.len(), "one partition per array");
    let kept = keep_heavier(&directed_weights(g, partition, k));
    let order = linear_order(&kept);
    let mut position = vec![0; k];
    order.iter().enumerate().for_each(|(i, &p)| position[p] = i);
    // The DAG: kept edges that point forward in the order.
    let dag = |p: usize, q: usize| kept[p][q] > 0 && position[p] < position[q];
    // Longest chain (in partitions) starting at each partition.
    let mut height = vec![1usize; k];
    for &p in order.iter().rev() {
        height[p] = 1 + (0..k).filter(|&q| dag(p, q)).map(|q| height[q]).max().unwrap_or(0);
    }
    let weight = |p: usize| (0..k).map(|q| kept[p][q] + kept[q][p]).sum::<u64>();
    let mut stage_of: Vec<Option<usize>> = vec![None; k];
    let mut slot_of: Vec<Option<usize>> = vec![None; k];
    let mut slot_used = vec![false; k];
    for (si, stage) in target.stages().into_iter().enumerate() {
        let slots: Vec<usize> = (0..k).filter(|&s| target.arrays[s].stage == stage).collect();
        let mut ready: Vec<usize> = (0..k)
            .filter(|&p| stage_of[p].is_none())
            .filter(|&p| (0..k).filter(|&q| dag(q, p)).all(|q| stage_of[q].is_some_and(|s| s < si)))
            .collect();
        ready.sort_by_key(|&p| (std::cmp::Reverse(height[p]), std::cmp::Reverse(weight(p)), position[p]));
        for (&p, &s) in ready.iter().zip(&slots) {
            stage_of[p] = Some(si);
            slot_of[p] = Some(s);
            slot_used[s] = true;
        }
    }
    // The pipeline was too short for some chains: the rest take the free arrays in order.
    let mut free = (0..k).filter(|&s| !slot_used[s]);
    for &p in &order {
        if slot_of[p].is_none() {
            slot_of[p] = free.next();
        }
    }
    slot_of.into_iter().map(|s| s.expect("as many arrays as partitions")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lighter_direction_of_a_mixed_cut_is_dropped() {
        let d = vec![vec![0, 5, 0], vec![2, 0, 0], vec![0, 0, 0]];
        let kept = keep_heavier(&d);
        assert_eq!(kept[0][1], 5);
        assert_eq!(kept[1][0], 0);
    }

    #[test]
    fn a_dag_is_ordered_topologically() {
        // 2 -> 0 -> 1, 2 -> 1
        let kept = vec![vec![0, 3, 0], vec![0, 0, 0], vec![4, 1, 0]];
        assert_eq!(linear_order(&kept), vec![2, 0, 1]);
    }

    #[test]
    fn a_cycle_loses_only_its_lightest_edge() {
        // 0 -> 1 (5), 1 -> 2 (5), 2 -> 0 (1)
        let kept = vec![vec![0, 5, 0], vec![0, 0, 5], vec![1, 0, 0]];
        let order = linear_order(&kept);
        let pos = |p: usize| order.iter().position(|&q| q == p).unwrap();
        assert!(pos(0) < pos(1) && pos(1) < pos(2), "order {order:?}");
    }
}
