//! The access graph of a sample of hot transactions (paper §4.2).
//!
//! Vertices are hot tuples. For every transaction and every pair of distinct hot tuples it
//! touches, the pair's edge gains weight 1: on the *directed* side `u → v` if some operation on
//! `u` must precede some operation on `v` in that transaction (a read-dependent write, or an
//! accumulator conflict), on the *bidirectional* side if neither order is required. (If both
//! orders are required the transaction can never be single-pass; it weighs on both directions.)
//! Tuples of the sample that are not in the graph's vertex set are ignored.

use pisadb_core::{TupleKey, Txn};
use std::collections::BTreeMap;

/// Weights of the edge between vertices `a < b`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeWeight {
    /// Transactions requiring `a` before `b`.
    pub forward: u64,
    /// Transactions requiring `b` before `a`.
    pub backward: u64,
    /// Transactions touching both with no order between them.
    pub bidirectional: u64,
}

impl EdgeWeight {
    /// All the weight, regardless of direction: what the cut maximises.
    pub fn total(&self) -> u64 {
        self.forward + self.backward + self.bidirectional
    }
}

/// The access graph.
#[derive(Clone, Debug, Default)]
pub struct AccessGraph {
    vertices: Vec<TupleKey>,
    index: BTreeMap<TupleKey, usize>,
    edges: BTreeMap<(usize, usize), EdgeWeight>,
    /// Per vertex, its neighbours and the total weight to each, in neighbour order.
    adjacency: Vec<Vec<(usize, u64)>>,
}

impl AccessGraph {
    /// The graph over `vertices` (sorted, distinct) from `sample`.
    pub fn build(vertices: &[TupleKey], sample: &[Txn]) -> Self {
        let index: BTreeMap<TupleKey, usize> = vertices.iter().enumerate().map(|(i, &k)| (k, i)).collect();
        let mut edges: BTreeMap<(usize, usize), EdgeWeight> = BTreeMap::new();
        for txn in sample {
            // Distinct vertices of the transaction, and the ordered pairs it requires.
            let mut touched: Vec<usize> = txn.ops.iter().filter_map(|op| index.get(&op.key).copied()).collect();
            touched.sort_unstable();
            touched.dedup();
            let mut required: Vec<(usize, usize)> = txn
                .dependencies()
                .into_iter()
                .filter_map(|(i, j)| Some((*index.get(&txn.ops[i].key)?, *index.get(&txn.ops[j].key)?)))
                .filter(|(u, v)| u != v)
                .collect();
            required.sort_unstable();
            required.dedup();
            for (x, &a) in touched.iter().enumerate() {
                for &b in &touched[x + 1..] {
                    let fwd = required.binary_search(&(a, b)).is_ok();
                    let bwd = required.binary_search(&(b, a)).is_ok();
                    let w = edges.entry((a, b)).or_default();
                    w.forward += u64::from(fwd);
                    w.backward += u64::from(bwd);
                    w.bidirectional += u64::from(!fwd && !bwd);
                }
            }
        }
        let mut adjacency = vec![Vec::new(); vertices.len()];
        for (&(a, b), w) in &edges {
            adjacency[a].push((b, w.total()));
            adjacency[b].push((a, w.total()));
        }
        AccessGraph { vertices: vertices.to_vec(), index, edges, adjacency }
    }

    /// A graph from explicit undirected weights (for tests of the cut).
    pub fn from_weights(n: usize, weights: &[(usize, usize, u64)]) -> Self {
        let mut edges: BTreeMap<(usize, usize), EdgeWeight> = BTreeMap::new();
        for &(a, b, w) in weights {
            assert!(a != b && a < n && b < n, "bad edge ({a}, {b}) for {n} vertices");
            edges.entry((a.min(b), a.max(b))).or_default().bidirectional += w;
        }
        let vertices: Vec<TupleKey> = (0..n as u64).map(|r| TupleKey::new(0, r)).collect();
        let index = vertices.iter().enumerate().map(|(i, &k)| (k, i)).collect();
        let mut adjacency = vec![Vec::new(); n];
        for (&(a, b), w) in &edges {
            adjacency[a].push((b, w.total()));
            adjacency[b].push((a, w.total()));
        }
        AccessGraph { vertices, index, edges, adjacency }
    }

    /// The tuples, by vertex number.
    pub fn vertices(&self) -> &[TupleKey] {
        &self.vertices
    }

    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether the graph has no vertex.
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// The vertex of `key`.
    pub fn vertex(&self, key: TupleKey) -> Option<usize> {
        self.index.get(&key).copied()
    }

    /// Neighbours of `v` with total edge weights.
    pub fn neighbours(&self, v: usize) -> &[(usize, u64)] {
        &self.adjacency[v]
    }

    /// All edges `(a, b)` with `a < b`, in order.
    pub fn edges(&self) -> impl Iterator<Item = ((usize, usize), EdgeWeight)> + '_ {
        self.edges.iter().map(|(&e, &w)| (e, w))
    }

    /// The edge between `a` and `b`, oriented so that `forward` means `a → b`.
    pub fn edge(&self, a: usize, b: usize) -> EdgeWeight {
        match self.edges.get(&(a.min(b), a.max(b))) {
            None => EdgeWeight::default(),
            Some(&w) if a < b => w,
            Some(&w) => EdgeWeight { forward: w.backward, backward: w.forward, ..w },
        }
    }

    /// Sum of all vertices' weighted degrees (twice the total edge weight).
    pub fn weighted_degree(&self, v: usize) -> u64 {
        self.adjacency[v].iter().map(|&(_, w)| w).sum()
    }

    /// Weight of the edges between different partitions under `partition`.
    pub fn cut_weight(&self, partition: &[usize]) -> u64 {
        self.edges.iter().filter(|((a, b), _)| partition[*a] != partition[*b]).map(|(_, w)| w.total()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::{AccOut, Op, OpKind};

    fn k(r: u64) -> TupleKey {
        TupleKey::new(1, r)
    }

    #[test]
    fn read_dependent_writes_give_directed_edges_and_independent_access_bidirectional_ones() {
        let txn = Txn::new(vec![
            Op::read(k(0)).with_acc_out(AccOut::Set),
            Op::new(k(1), OpKind::Add, 0).with_acc_in(),
            Op::read(k(2)),
        ]);
        let g = AccessGraph::build(&[k(0), k(1), k(2)], &[txn.clone(), txn]);
        assert_eq!(g.edge(0, 1), EdgeWeight { forward: 2, backward: 0, bidirectional: 0 });
        assert_eq!(g.edge(1, 0), EdgeWeight { forward: 0, backward: 2, bidirectional: 0 });
        assert_eq!(g.edge(0, 2), EdgeWeight { forward: 0, backward: 0, bidirectional: 2 });
        assert_eq!(g.edge(1, 2).bidirectional, 2);
        assert_eq!(g.weighted_degree(0), 4);
        assert_eq!(g.cut_weight(&[0, 1, 2]), 6);
        assert_eq!(g.cut_weight(&[0, 0, 0]), 0);
    }

    #[test]
    fn tuples_outside_the_vertex_set_are_ignored() {
        let txn = Txn::new(vec![Op::read(k(0)), Op::read(k(9))]);
        let g = AccessGraph::build(&[k(0)], &[txn]);
        assert_eq!(g.edges().count(), 0);
    }
}
