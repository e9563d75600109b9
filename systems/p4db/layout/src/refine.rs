//! Refinement: local search on the layout's real objective, the single-pass count.
//!
//! The max-k-cut and the partition order optimise a proxy: cut weight, then the directed
//! weight kept forward. Both are blind to what makes a whole transaction single-pass (*all* its
//! tuples in distinct arrays *and all* its orders forward). This last step moves one tuple at a
//! time to the array that most increases the number of sample transactions that run in one
//! pass, until no move helps (or a round limit).
//!
//! ## Cost
//!
//! Each move only re-checks the transactions that touch the moved tuple. For a tuple `v` and one
//! of its transactions, everything but `v`'s own array is fixed while the search tries `v` in
//! every array, so the transaction is reduced once to a `Constraint` on `v`'s array: whether
//! the other operations are fine among themselves, the registers they use, and the stages
//! `v` must lie strictly between (after every operation that must precede it, before every one
//! that must follow). A constraint is then the set of arrays that meet it, a bit set
//! (`ArraySets`: the arrays of each register, the arrays below each stage), and the search
//! counts, for every array at once, the constraints its bit is in, with bit-sliced counters
//! (`BitCounts`: one carry chain per constraint, not one test per array). A round costs
//! about `tuples × transactions per tuple × operations²` instead of `tuples × arrays ×
//! transactions per tuple × operations²`. Targets of more than 128 arrays (no switch has
//! them) test each array in turn instead. The moves, their order and the tie-breaking are those of the plain search
//! (kept as the test oracle `refine_plain`), so the layout is the same bit for bit.

use crate::graph::AccessGraph;
use crate::target::{ArraySlot, LayoutTarget};
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

impl SampleTxn {
    /// Whether the transaction runs in one pass with the vertices in `slots`: all its
    /// operations in arrays of distinct registers, every ordered pair in increasing stages.
    fn single(&self, arrays: &[ArraySlot], slots: &[usize]) -> bool {
        let slot = |i: usize| slots[self.vertex[i]];
        let n = self.vertex.len();
        let distinct = (0..n).all(|j| (0..j).all(|i| arrays[slot(i)].register != arrays[slot(j)].register));
        distinct && self.ordered.iter().all(|&(i, j)| arrays[slot(i)].stage < arrays[slot(j)].stage)
    }

    /// What the transaction asks of vertex `v`'s array, every other vertex staying in `slots`.
    fn constraint_on(&self, v: usize, arrays: &[ArraySlot], slots: &[usize]) -> Constraint {
        let mut c = Constraint { feasible: true, registers: [0; 4], after_stage: -1, before_stage: i16::MAX };
        let mut seen_v = false;
        for &u in &self.vertex {
            if u == v {
                // Two operations on `v` share its register: never one pass, wherever it goes.
                c.feasible &= !seen_v;
                seen_v = true;
                continue;
            }
            let register = arrays[slots[u]].register;
            let (word, bit) = (usize::from(register / 64), register % 64);
            c.feasible &= c.registers[word] & (1 << bit) == 0;
            c.registers[word] |= 1 << bit;
        }
        for &(i, j) in &self.ordered {
            let (a, b) = (self.vertex[i], self.vertex[j]);
            match (a == v, b == v) {
                (false, false) => c.feasible &= arrays[slots[a]].stage < arrays[slots[b]].stage,
                (false, true) => c.after_stage = c.after_stage.max(i16::from(arrays[slots[a]].stage)),
                (true, false) => c.before_stage = c.before_stage.min(i16::from(arrays[slots[b]].stage)),
                (true, true) => c.feasible = false,
            }
        }
        c
    }
}

/// A transaction's demand on one vertex's array, the others fixed.
struct Constraint {
    /// Whether the other operations are in distinct registers and keep their own orders.
    feasible: bool,
    /// The registers of the other operations (bit `r` for register id `r`).
    registers: [u64; 4],
    /// The array's stage must be above this (-1: no lower bound).
    after_stage: i16,
    /// The array's stage must be below this (`i16::MAX`: no upper bound).
    before_stage: i16,
}

impl Constraint {
    /// Whether the transaction is single-pass with the vertex in `array`.
    fn met_by(&self, array: &ArraySlot) -> bool {
        let (word, bit) = (usize::from(array.register / 64), array.register % 64);
        let stage = i16::from(array.stage);
        self.feasible && self.registers[word] & (1 << bit) == 0 && self.after_stage < stage && stage < self.before_stage
    }
}

/// Arrays as bits of a `u128` (array `s` is bit `s`): what a [`Constraint`] becomes.
struct ArraySets {
    /// Per register id, its arrays.
    of_register: Vec<u128>,
    /// Per stage `t` (0..=256), the arrays of stages below `t`.
    below_stage: Vec<u128>,
}

impl ArraySets {
    /// The sets of `arrays`, or `None` past 128 arrays.
    fn new(arrays: &[ArraySlot]) -> Option<Self> {
        if arrays.len() > 128 {
            return None;
        }
        let mut of_register = vec![0u128; 256];
        let mut below_stage = vec![0u128; 257];
        for (s, a) in arrays.iter().enumerate() {
            of_register[usize::from(a.register)] |= 1 << s;
            for below in &mut below_stage[usize::from(a.stage) + 1..] {
                *below |= 1 << s;
            }
        }
        Some(ArraySets { of_register, below_stage })
    }

    /// The arrays that meet `c`.
    fn meeting(&self, c: &Constraint) -> u128 {
        if !c.feasible {
            return 0;
        }
        let mut registers = 0u128;
        for (word, &bits) in c.registers.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                registers |= self.of_register[word * 64 + bits.trailing_zeros() as usize];
                bits &= bits - 1;
            }
        }
        // Stages strictly between `after_stage` (>= -1) and `before_stage`.
        let upto = usize::try_from(c.before_stage).unwrap_or(0).min(256);
        let from = usize::try_from(c.after_stage + 1).unwrap_or(0).min(256);
        let window = self.below_stage[upto] & !self.below_stage[from];
        window & !registers
    }
}

/// Counters for up to 128 arrays at once, bit-sliced: bit `s` of `planes[k]` is bit `k` of
/// array `s`'s count, so adding a set of arrays is one carry chain.
#[derive(Default)]
struct BitCounts {
    planes: Vec<u128>,
}

impl BitCounts {
    fn clear(&mut self) {
        self.planes.iter_mut().for_each(|p| *p = 0);
    }

    /// Adds one to the count of every array in `set`.
    fn add(&mut self, mut set: u128) {
        let mut k = 0;
        while set != 0 {
            if k == self.planes.len() {
                self.planes.push(0);
            }
            let carry = self.planes[k] & set;
            self.planes[k] ^= set;
            set = carry;
            k += 1;
        }
    }

    /// The count of array `s`.
    fn count(&self, s: usize) -> i64 {
        self.planes.iter().enumerate().map(|(k, p)| (((p >> s) & 1) as i64) << k).sum()
    }
}

/// The sample's transactions over the graph's vertices, and the transactions of each vertex.
fn sample_txns(g: &AccessGraph, sample: &[Txn]) -> (Vec<SampleTxn>, Vec<Vec<usize>>) {
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
    (txns, txns_of)
}

/// Improves `slot_of_vertex` (an index into `target.arrays` per vertex) in place.
pub fn refine(g: &AccessGraph, sample: &[Txn], target: &LayoutTarget, slot_of_vertex: &mut [usize], seed: u64) {
    let (txns, txns_of) = sample_txns(g, sample);
    let arrays = &target.arrays;
    let mut load = vec![0u32; arrays.len()];
    slot_of_vertex.iter().for_each(|&s| load[s] += 1);
    let mut ok: Vec<bool> = txns.iter().map(|t| t.single(arrays, slot_of_vertex)).collect();
    let mut rng = rng::derive(seed, "layout/refine");
    let mut order: Vec<usize> = (0..g.len()).filter(|&v| !txns_of[v].is_empty()).collect();
    // Reused across vertices: the search allocates nothing per move.
    let mut constraints: Vec<Constraint> = Vec::new();
    let sets = ArraySets::new(arrays);
    let mut counts = BitCounts::default();
    for _ in 0..MAX_ROUNDS {
        let mut improved = false;
        order.shuffle(&mut rng);
        for &v in &order {
            let current = slot_of_vertex[v];
            let before: i64 = txns_of[v].iter().map(|&t| i64::from(ok[t])).sum();
            constraints.clear();
            constraints.extend(txns_of[v].iter().map(|&t| txns[t].constraint_on(v, arrays, slot_of_vertex)));
            if let Some(sets) = &sets {
                counts.clear();
                constraints.iter().for_each(|c| counts.add(sets.meeting(c)));
            }
            let mut best = (0i64, current);
            for (s, array) in arrays.iter().enumerate() {
                if s == current || load[s] >= array.capacity {
                    continue;
                }
                let after = match &sets {
                    Some(_) => counts.count(s),
                    None => constraints.iter().filter(|c| c.met_by(array)).count() as i64,
                };
                if after - before > best.0 {
                    best = (after - before, s);
                }
            }
            slot_of_vertex[v] = best.1;
            if best.1 != current {
                load[current] -= 1;
                load[best.1] += 1;
                for &t in &txns_of[v] {
                    ok[t] = txns[t].single(arrays, slot_of_vertex);
                }
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::ArraySlot;
    use pisadb_core::{AccOut, Op, OpKind, TupleKey};
    use proptest::prelude::*;

    /// The plain search this module replaced: every candidate array re-checks every
    /// transaction of the moved tuple in full. The oracle the fast search must equal.
    fn refine_plain(g: &AccessGraph, sample: &[Txn], target: &LayoutTarget, slot_of_vertex: &mut [usize], seed: u64) {
        let (txns, txns_of) = sample_txns(g, sample);
        let arrays = &target.arrays;
        let mut load = vec![0u32; arrays.len()];
        slot_of_vertex.iter().for_each(|&s| load[s] += 1);
        let mut ok: Vec<bool> = txns.iter().map(|t| t.single(arrays, slot_of_vertex)).collect();
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
                    let after: i64 =
                        txns_of[v].iter().map(|&t| i64::from(txns[t].single(arrays, slot_of_vertex))).sum();
                    if after - before > best.0 {
                        best = (after - before, s);
                    }
                }
                slot_of_vertex[v] = best.1;
                if best.1 != current {
                    load[current] -= 1;
                    load[best.1] += 1;
                    for &t in &txns_of[v] {
                        ok[t] = txns[t].single(arrays, slot_of_vertex);
                    }
                    improved = true;
                }
            }
            if !improved {
                break;
            }
        }
    }

    fn target(stages: u8, per_stage: u8, capacity: u32) -> LayoutTarget {
        let arrays = (0..stages)
            .flat_map(|s| (0..per_stage).map(move |r| (s, r)))
            .map(|(stage, r)| ArraySlot { stage, register: 1 + stage * per_stage + r, capacity, width_bits: 32 })
            .collect();
        LayoutTarget { arrays, sram_block_bits: 128 * 1024 }
    }

    /// A transaction over `rows` (of a 12-row table): plain adds, adds that set the
    /// accumulator and adds that read it, so it has both ordered and unordered pairs (and
    /// repeated tuples, which are never single-pass).
    fn txn(rows: &[(u64, u8)]) -> Txn {
        let ops = rows
            .iter()
            .map(|&(row, what)| {
                let op = Op::new(TupleKey::new(0, row), OpKind::Add, 1);
                match what % 3 {
                    0 => op,
                    1 => op.with_acc_out(AccOut::Set),
                    _ => op.with_acc_in(),
                }
            })
            .collect();
        Txn::new(ops)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The fast search moves exactly as the plain one, so the layout is identical.
        #[test]
        fn the_fast_search_makes_the_plain_search_moves(
            txns in prop::collection::vec(prop::collection::vec((0u64..12, 0u8..3), 1..6), 1..40),
            stages in 1u8..5,
            per_stage in 1u8..4,
            seed in 0u64..1000,
        ) {
            let sample: Vec<Txn> = txns.iter().map(|rows| txn(rows)).collect();
            let hot: Vec<TupleKey> = (0..12).map(|r| TupleKey::new(0, r)).collect();
            let g = AccessGraph::build(&hot, &sample);
            let t = target(stages, per_stage, 12);
            let start: Vec<usize> = (0..g.len()).map(|v| (v * 7 + seed as usize) % t.arrays.len()).collect();
            let (mut fast, mut plain) = (start.clone(), start);
            refine(&g, &sample, &t, &mut fast, seed);
            refine_plain(&g, &sample, &t, &mut plain, seed);
            prop_assert_eq!(fast, plain);
        }
    }

    /// Past 128 arrays the search tests each array in turn, and still moves as the plain one.
    #[test]
    fn a_target_of_more_than_128_arrays_still_makes_the_plain_search_moves() {
        let rows: Vec<Vec<(u64, u8)>> =
            (0..60u64).map(|i| vec![(i % 12, (i % 3) as u8), ((i * 5 + 1) % 12, 1), ((i * 7 + 2) % 12, 2)]).collect();
        let sample: Vec<Txn> = rows.iter().map(|r| txn(r)).collect();
        let hot: Vec<TupleKey> = (0..12).map(|r| TupleKey::new(0, r)).collect();
        let g = AccessGraph::build(&hot, &sample);
        let t = target(43, 3, 2);
        assert!(t.arrays.len() > 128);
        let start: Vec<usize> = (0..g.len()).map(|v| (v * 11) % 6).collect();
        let (mut fast, mut plain) = (start.clone(), start);
        refine(&g, &sample, &t, &mut fast, 3);
        refine_plain(&g, &sample, &t, &mut plain, 3);
        assert_eq!(fast, plain);
    }
}
