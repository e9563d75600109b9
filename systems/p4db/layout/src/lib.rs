//! P4DB's declustered data layout (paper §4): which hot tuple lives in which register array.
//!
//! A switch transaction runs in one pass through the pipeline only if (a) no two of its tuples
//! share a register array (a packet reaches each array once per pass) and (b) every ordering
//! dependency between its operations points forward in the pipeline: the tuple whose value is
//! needed lives in an earlier stage than the tuple that needs it. The layout decides (a) and
//! (b) for the whole workload at once, from a sample of its hot transactions:
//!
//! 1. **Access graph** ([`graph`]): one vertex per hot tuple; each pair of tuples a sampled
//!    transaction touches together adds weight to their edge, *directed* `u → v` if an
//!    operation on `u` must precede one on `v` ([`pisadb_core::Txn::must_precede`]), else
//!    *bidirectional*.
//! 2. **Max-k-cut** ([`maxcut`]): `k` partitions, one per register array, each at most an
//!    array's capacity; maximise the weight of edges *between* partitions, ignoring direction.
//!    Seeded greedy start plus local search (moves and swaps), best of a few restarts.
//! 3. **Directions** ([`order`]): between two partitions, keep the heavier direction of the
//!    directed edges and drop the lighter (those transactions will need a second pass); break
//!    the cycles that remain the same way; the rest is a DAG.
//! 4. **Stages** ([`order`]): list-schedule the DAG onto the stages, longest remaining chain
//!    first, so that every kept edge goes to a strictly later stage; partitions without edges
//!    between them may share a stage (different arrays).
//! 5. **Refinement** ([`refine`]): local search on the objective itself, moving single tuples
//!    between arrays while that raises the number of single-pass transactions in the sample.
//! 6. **Placement**: every tuple gets the next free index of its array.
//!
//! How far any layout can go depends on the workload. When transactions require `a` before `b`
//! as often as `b` before `a` for random pairs (SmallBank's payments between random hot
//! accounts), every layout orders each pair one way, so at most half of those transactions can
//! be single-pass; the rest are multi-pass by necessity, not by a weak heuristic.
//!
//! If the hot set is larger than the switch, the least-accessed tuples (in the sample) are left
//! out and listed in [`Layout::overflow`]; they stay on the nodes.
//!
//! Two baselines place tuples without looking at the workload. [`modulo`] is the one the paper's
//! prototype actually ran as its "worst" layout (Fig. 16, Fig. 15c): a tuple's array is its row
//! id modulo the number of arrays (`idx % 20` for YCSB, `% 10` for SmallBank and TPC-C in the
//! prototype's code). [`random`] drops tuples uniformly at random into arrays (LM-Switch's lock
//! placement, and `pisadb layout`'s reference). [`plan_passes`] is what a node runs per
//! transaction to build its packet, and [`evaluate`] measures a layout on a sample.
//!
//! Everything is deterministic in its inputs and seed: maps are `BTreeMap`s and all randomness
//! comes from [`pisadb_core::rng::derive`].
//!
//! See `systems/p4db/README.md` (the declustered layout) for the page that explains it.

pub mod graph;
pub mod maxcut;
pub mod order;
mod plan;
pub mod refine;
mod stats;
mod target;

pub use plan::{plan_passes, NotOnSwitch, PassPlan};
pub use stats::{evaluate, LayoutStats};
pub use target::{ArraySlot, Layout, LayoutTarget, Placement};

use graph::AccessGraph;
use pisadb_core::{rng, TupleKey, Txn};
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Restarts of the max-k-cut heuristic; the best cut wins. Cheap at hot-set sizes (hundreds).
const MAX_CUT_RESTARTS: u64 = 4;

/// The declustered layout of `hot` for the transactions in `sample` on `target`.
pub fn declustered(hot: &[TupleKey], sample: &[Txn], target: &LayoutTarget, seed: u64) -> Layout {
    let hot = dedup_sorted(hot);
    let (kept, overflow) = split_overflow(&hot, sample, target);
    // Tuples no sampled transaction touches have no edges: the cut cannot place them better
    // than anywhere, so they skip it and fill the room left at the end (with hot sets of
    // hundreds of thousands of tuples that is most of them, and most of the work).
    let sampled: BTreeSet<TupleKey> = sample.iter().flat_map(|t| t.ops.iter().map(|op| op.key)).collect();
    let (kept, untouched): (Vec<TupleKey>, Vec<TupleKey>) = kept.into_iter().partition(|k| sampled.contains(k));
    let graph = AccessGraph::build(&kept, sample);
    let k = target.arrays.len();
    let capacity = target.arrays.iter().map(|a| a.capacity as usize).min().unwrap_or(0);
    let partition = maxcut::best_of(&graph, k, capacity, MAX_CUT_RESTARTS, seed);
    let slot_of_partition = order::assign_to_arrays(&graph, &partition, k, target);
    let mut slot_of_vertex: Vec<usize> = partition.iter().map(|&p| slot_of_partition[p]).collect();
    refine::refine(&graph, sample, target, &mut slot_of_vertex, seed);
    let mut next_index = vec![0u32; target.arrays.len()];
    let mut layout = Layout::with_overflow(overflow);
    for (v, &key) in graph.vertices().iter().enumerate() {
        let slot = slot_of_vertex[v];
        let array = &target.arrays[slot];
        layout.insert(key, Placement { stage: array.stage, register: array.register, index: next_index[slot] });
        next_index[slot] += 1;
    }
    // The untouched tuples, round robin over the arrays with room (they fit: see split_overflow).
    let mut slot = 0;
    for key in untouched {
        while next_index[slot] >= target.arrays[slot].capacity {
            slot = (slot + 1) % target.arrays.len();
        }
        let array = &target.arrays[slot];
        layout.insert(key, Placement { stage: array.stage, register: array.register, index: next_index[slot] });
        next_index[slot] += 1;
        slot = (slot + 1) % target.arrays.len();
    }
    layout
}

/// A layout that drops each hot tuple into a uniformly random array with room left.
pub fn random(hot: &[TupleKey], target: &LayoutTarget, seed: u64) -> Layout {
    let mut rng = rng::derive(seed, "layout/random");
    let mut hot = dedup_sorted(hot);
    hot.shuffle(&mut rng);
    let total = target.capacity();
    let overflow = if hot.len() > total { hot.split_off(total) } else { Vec::new() };
    let mut next_index = vec![0u32; target.arrays.len()];
    let mut layout = Layout::with_overflow(overflow);
    for key in hot {
        // Rejection sampling over arrays with room: exact uniformity, and the loop ends because
        // the tuples that remain fit.
        let slot = loop {
            let s = rng.random_range(0..target.arrays.len());
            if next_index[s] < target.arrays[s].capacity {
                break s;
            }
        };
        let array = &target.arrays[slot];
        layout.insert(key, Placement { stage: array.stage, register: array.register, index: next_index[slot] });
        next_index[slot] += 1;
    }
    layout
}

/// The prototype's layout: tuple `(table, row)` goes to array `(row + table) % arrays` of the
/// first `arrays` arrays of `target` (all of them if fewer), at the next free index.
///
/// For a one-table workload (YCSB, table 0) this is exactly the prototype's `idx % N`. Where
/// PisaDB keeps as separate tuples what the prototype packs into one register cell (SmallBank's
/// savings and checking balance of one account, TPC-C's stock fields), the table id shifts the
/// fields of one row into neighbouring arrays instead of making them collide in one array,
/// which they do not in the prototype. A tuple whose array is full stays on the nodes
/// ([`Layout::overflow`]): the rule has no second choice.
pub fn modulo(hot: &[TupleKey], target: &LayoutTarget, arrays: usize) -> Layout {
    let arrays = arrays.clamp(1, target.arrays.len().max(1));
    let mut next_index = vec![0u32; arrays];
    let mut layout = Layout::default();
    for key in dedup_sorted(hot) {
        let Some(slot) = modulo_slot(key, arrays).filter(|&s| s < target.arrays.len()) else {
            layout.overflow.push(key);
            continue;
        };
        let array = &target.arrays[slot];
        if next_index[slot] >= array.capacity {
            layout.overflow.push(key);
            continue;
        }
        layout.insert(key, Placement { stage: array.stage, register: array.register, index: next_index[slot] });
        next_index[slot] += 1;
    }
    layout
}

/// The array (position in the target) [`modulo`] gives `key` among `arrays` arrays.
pub fn modulo_slot(key: TupleKey, arrays: usize) -> Option<usize> {
    let arrays = u64::try_from(arrays).ok().filter(|&n| n > 0)?;
    usize::try_from(key.row.wrapping_add(u64::from(key.table)) % arrays).ok()
}

fn dedup_sorted(keys: &[TupleKey]) -> Vec<TupleKey> {
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Splits the hot set into what fits on the switch and what does not: the least-accessed
/// tuples (ties: higher keys) overflow. Partitions are as large as the smallest array.
fn split_overflow(hot: &[TupleKey], sample: &[Txn], target: &LayoutTarget) -> (Vec<TupleKey>, Vec<TupleKey>) {
    let per_partition = target.arrays.iter().map(|a| a.capacity as usize).min().unwrap_or(0);
    let room = per_partition * target.arrays.len();
    if hot.len() <= room {
        return (hot.to_vec(), Vec::new());
    }
    let mut accesses: BTreeMap<TupleKey, u64> = hot.iter().map(|&k| (k, 0)).collect();
    for op in sample.iter().flat_map(|t| &t.ops) {
        if let Some(n) = accesses.get_mut(&op.key) {
            *n += 1;
        }
    }
    let mut by_heat: Vec<TupleKey> = hot.to_vec();
    by_heat.sort_by_key(|k| (std::cmp::Reverse(accesses[k]), *k));
    let overflow = by_heat.split_off(room);
    by_heat.sort_unstable();
    (by_heat, overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::{AccOut, Op, OpKind};

    fn target(stages: u8, per_stage: u8, capacity: u32) -> LayoutTarget {
        let arrays = (0..stages)
            .flat_map(|s| {
                (0..per_stage).map(move |a| ArraySlot {
                    stage: 1 + s,
                    register: 1 + s * per_stage + a,
                    capacity,
                    width_bits: 32,
                })
            })
            .collect();
        LayoutTarget { arrays, sram_block_bits: 128 * 1024 }
    }

    fn k(row: u64) -> TupleKey {
        TupleKey::new(0, row)
    }

    /// A transfer: read-dependent write from `a` to `b`.
    fn transfer(a: u64, b: u64) -> Txn {
        Txn::new(vec![
            Op::new(k(a), OpKind::AddIfNonNegative, -1).with_acc_out(AccOut::Sub),
            Op::new(k(b), OpKind::Add, 0).with_acc_in(),
        ])
    }

    #[test]
    fn every_hot_tuple_is_placed_once_within_capacity() {
        let hot: Vec<_> = (0..50).map(k).collect();
        let sample: Vec<_> = (0..49).map(|i| transfer(i, i + 1)).collect();
        let t = target(3, 2, 9);
        for layout in [declustered(&hot, &sample, &t, 1), random(&hot, &t, 1)] {
            assert_eq!(layout.len() + layout.overflow.len(), 50);
            let mut seen = std::collections::BTreeSet::new();
            for (key, p) in layout.iter() {
                assert!(seen.insert((p.register, p.index)), "{key:?} shares a cell");
                let slot = t.arrays.iter().find(|a| a.register == p.register).unwrap();
                assert_eq!(slot.stage, p.stage);
                assert!(p.index < slot.capacity);
            }
            assert_eq!(layout.len(), 50);
        }
    }

    #[test]
    fn overflow_keeps_the_most_accessed_tuples_on_the_switch() {
        let hot: Vec<_> = (0..10).map(k).collect();
        // Tuples 0..4 are accessed, 4..10 never.
        let sample: Vec<_> = (0..3).map(|i| transfer(i, i + 1)).collect();
        let layout = declustered(&hot, &sample, &target(2, 1, 2), 7);
        assert_eq!(layout.len(), 4);
        assert!((0..4).all(|i| layout.get(k(i)).is_some()));
        assert_eq!(layout.overflow, (4..10).map(k).collect::<Vec<_>>());
    }

    #[test]
    fn a_chain_of_dependencies_becomes_a_forward_path_through_the_stages() {
        // 0 -> 1 -> 2 -> 3 over and over: declustered must place them in increasing stages.
        let hot: Vec<_> = (0..4).map(k).collect();
        let sample: Vec<_> = (0..30).map(|i| transfer(i % 3, i % 3 + 1)).collect();
        let t = target(4, 1, 8);
        let layout = declustered(&hot, &sample, &t, 3);
        let stages: Vec<u8> = (0..4).map(|i| layout.get(k(i)).unwrap().stage).collect();
        assert!(stages.windows(2).all(|w| w[0] < w[1]), "stages {stages:?}");
        assert_eq!(evaluate(&layout, &sample, &t).single_pass_ratio, 1.0);
    }

    #[test]
    fn modulo_puts_row_r_of_table_t_in_array_r_plus_t_mod_n() {
        let hot: Vec<_> = (0..30).map(k).chain([TupleKey::new(1, 4)]).collect();
        let t = target(4, 2, 100);
        let layout = modulo(&hot, &t, 5);
        for (key, p) in layout.iter() {
            let slot = ((key.row + u64::from(key.table)) % 5) as usize;
            assert_eq!(p.register, t.arrays[slot].register, "{key:?}");
        }
        assert_eq!(layout.get(k(7)).unwrap().register, t.arrays[2].register);
        assert_eq!(layout.get(TupleKey::new(1, 4)).unwrap().register, t.arrays[0].register);
        assert!(layout.overflow.is_empty());
        // A full array has no second choice: its extra tuples stay on the nodes.
        let small = modulo(&hot, &target(4, 2, 2), 5);
        assert_eq!(small.len(), 10);
        assert_eq!(small.overflow.len(), 21);
    }

    #[test]
    fn the_same_seed_gives_the_same_layout() {
        let hot: Vec<_> = (0..40).map(k).collect();
        let sample: Vec<_> = (0..200).map(|i| transfer(i * 7 % 40, (i * 13 + 1) % 40)).collect();
        let t = target(4, 2, 16);
        assert_eq!(declustered(&hot, &sample, &t, 5), declustered(&hot, &sample, &t, 5));
        assert_eq!(random(&hot, &t, 5), random(&hot, &t, 5));
    }
}
