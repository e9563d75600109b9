//! Where rows live and where a transaction takes its keys from.
//!
//! Every table is partitioned by row with one of two schemes ([`Scheme`]):
//! - **round robin** (the default, as the paper partitions YCSB): row `r` lives on node
//!   `r % nodes`, and node `n`'s `i`-th own row is `n + nodes·i`;
//! - **range**: node `n` owns the `n`-th block of `span = ceil(rows / nodes)` consecutive rows,
//!   and its `i`-th own row is `n·span + i`.
//!
//! Both are described by the same three functions ([`Partitioning::node_of`],
//! [`Partitioning::row_of`], [`Partitioning::index_of`]), and everything else is written in
//! terms of a node's `i`-th row. The hot set is the first `hot_per_node` rows each node owns:
//! a row is hot when its index on its node is below `hot_per_node`.
//!
//! A transaction's keys are chosen in two steps. First, one node per key slot: all the home
//! node for a local transaction; for a distributed one, the home node, a second node chosen
//! among the others (so at least two nodes take part), and the rest anywhere in the rack.
//! Second, a row per slot on that slot's node, among the node's hot rows for a hot transaction
//! and among its other rows for a cold one. Validation (`KeySpace::validate`) makes sure each
//! node has enough of both for any transaction, so drawing distinct rows always succeeds.
//!
//! That is PisaDB's rule ([`RemoteRule::PerTransaction`]): the remote probability is the share
//! of distributed transactions. The P4DB prototype decides **per key** instead
//! ([`RemoteRule::PerKey`]): each key is on another node (uniform among the others) with the
//! remote probability, else on the home node, and a key equal to one already drawn is drawn
//! again, node and all. At 20% and 8 keys that makes 1 − 0.8⁸ ≈ 83% of transactions
//! distributed, with 1.6 remote keys on average, and a one-key transaction can be wholly
//! remote.

use crate::{ConfigError, TxnClass};
use pisadb_core::rng::SeededRng;
use pisadb_core::TupleKey;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A database node's index in the rack, `0..nodes`.
pub type NodeId = u16;

/// How rows are spread over nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Row `r` on node `r % nodes` (hash-like: neighbouring rows on different nodes).
    #[default]
    RoundRobin,
    /// Consecutive blocks of rows per node.
    Range,
}

/// What the remote probability of a workload decides (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteRule {
    /// Whether a transaction is distributed: keys on the home node and at least one other.
    #[default]
    PerTransaction,
    /// Whether each key is remote, independently (the P4DB prototype's rule).
    PerKey,
}

/// How rows map to nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partitioning {
    /// The number of database nodes; at least 1.
    pub nodes: u16,
    /// The scheme.
    pub scheme: Scheme,
    /// Rows per node under [`Scheme::Range`]: `ceil(rows / nodes)` (unused for round robin).
    pub span: u64,
}

impl Partitioning {
    /// Round robin over `nodes`.
    pub fn round_robin(nodes: u16) -> Self {
        Partitioning { nodes, scheme: Scheme::RoundRobin, span: 0 }
    }

    /// `scheme` for a table of `rows` rows over `nodes` nodes.
    pub fn new(scheme: Scheme, nodes: u16, rows: u64) -> Self {
        Partitioning { nodes, scheme, span: rows.div_ceil(u64::from(nodes.max(1))).max(1) }
    }

    /// The node that stores `key`. Every table is partitioned by row, so the tuples of one
    /// row (e.g. an account's savings and checking balances) share a node.
    pub fn node_of(&self, key: TupleKey) -> NodeId {
        let node = match self.scheme {
            Scheme::RoundRobin => key.row % u64::from(self.nodes),
            Scheme::Range => (key.row / self.span).min(u64::from(self.nodes) - 1),
        };
        // Below `nodes`, a u16.
        node as NodeId
    }

    /// The `index`-th row of `node`.
    pub fn row_of(&self, node: NodeId, index: u64) -> u64 {
        match self.scheme {
            Scheme::RoundRobin => u64::from(node) + u64::from(self.nodes) * index,
            Scheme::Range => u64::from(node) * self.span + index,
        }
    }

    /// The index of `row` among its node's rows.
    pub fn index_of(&self, row: u64) -> u64 {
        match self.scheme {
            Scheme::RoundRobin => row / u64::from(self.nodes),
            Scheme::Range => row - u64::from(self.node_of(TupleKey::new(0, row))) * self.span,
        }
    }

    /// How many of a table's `rows` rows `node` owns.
    pub fn rows_on(&self, node: NodeId, rows: u64) -> u64 {
        let nodes = u64::from(self.nodes);
        match self.scheme {
            Scheme::RoundRobin => (rows + nodes - 1 - u64::from(node).min(rows + nodes - 1)) / nodes,
            Scheme::Range => rows.saturating_sub(u64::from(node) * self.span).min(self.span),
        }
    }
}

/// The rows of a workload's tables, their hot set, and the odds that shape its transactions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KeySpace {
    /// How rows map to nodes.
    pub(crate) partitioning: Partitioning,
    /// The number of rows (per table), spread over all nodes.
    pub(crate) rows: u64,
    /// How many of its rows each node contributes to the hot set.
    pub(crate) hot_per_node: u64,
    /// The probability that a transaction is hot.
    pub(crate) hot_prob: f64,
    /// The probability that a transaction (or a key, by `remote_rule`) is remote, when there
    /// is more than one node.
    pub(crate) remote_prob: f64,
    /// What `remote_prob` decides.
    pub(crate) remote_rule: RemoteRule,
}

impl KeySpace {
    /// Checks the fields and that every node can supply `keys_per_txn` distinct rows of the
    /// kind (hot or cold) a transaction may ask for. `rows_field` is the config's name for
    /// `rows`, so the error names the field the user wrote.
    pub(crate) fn validate(&self, rows_field: &'static str, keys_per_txn: u64) -> Result<(), ConfigError> {
        let nodes = u64::from(self.partitioning.nodes);
        if nodes == 0 {
            return Err(ConfigError::new("nodes", 0, "at least 1"));
        }
        check_probability("hot_prob", self.hot_prob)?;
        check_probability("remote_prob", self.remote_prob)?;
        let rows_per_node_min = (0..self.partitioning.nodes).map(|n| self.rows_on(n)).min().unwrap_or(0);
        if self.hot_per_node > rows_per_node_min {
            let expected = format!("at most {rows_per_node_min} (the rows of the smallest node)");
            return Err(ConfigError::new("hot_per_node", self.hot_per_node, expected));
        }
        if self.hot_prob > 0.0 && self.hot_per_node < keys_per_txn {
            let expected = format!("at least {keys_per_txn} when hot_prob > 0 (a local hot transaction's keys)");
            return Err(ConfigError::new("hot_per_node", self.hot_per_node, expected));
        }
        if self.hot_prob < 1.0 && rows_per_node_min - self.hot_per_node < keys_per_txn {
            let rows_min = nodes * (self.hot_per_node + keys_per_txn);
            let expected = format!("at least {rows_min} when hot_prob < 1, so every node has {keys_per_txn} cold rows");
            return Err(ConfigError::new(rows_field, self.rows, expected));
        }
        Ok(())
    }

    /// Whether `row` is in the hot set: among the first `hot_per_node` rows of its node.
    pub(crate) fn is_hot_row(&self, row: u64) -> bool {
        row < self.rows && self.partitioning.index_of(row) < self.hot_per_node
    }

    /// Every hot row, in increasing order.
    pub(crate) fn hot_rows(&self) -> impl Iterator<Item = u64> {
        let p = self.partitioning;
        let mut rows: Vec<u64> =
            (0..p.nodes).flat_map(|n| (0..self.hot_per_node).map(move |i| p.row_of(n, i))).collect();
        rows.sort_unstable();
        rows.into_iter()
    }

    /// Draws whether the next transaction is hot.
    pub(crate) fn draw_class(&self, rng: &mut SeededRng) -> TxnClass {
        if rng.random_bool(self.hot_prob) {
            TxnClass::Hot
        } else {
            TxnClass::Cold
        }
    }

    /// Draws whether the next transaction is distributed; never with a single node, where it
    /// could not be.
    pub(crate) fn draw_distributed(&self, rng: &mut SeededRng) -> bool {
        self.partitioning.nodes > 1 && rng.random_bool(self.remote_prob)
    }

    /// `slots` distinct rows of `class` for a transaction from `home` under
    /// [`RemoteRule::PerKey`], and whether the transaction is distributed (some row is not on
    /// `home`). Each slot draws its node and then its row, and a row already taken is drawn
    /// again, node and all, as the prototype does; the home node alone can supply the rows
    /// (`validate`), so this ends.
    pub(crate) fn pick_rows_per_key(
        &self,
        rng: &mut SeededRng,
        home: NodeId,
        slots: usize,
        class: TxnClass,
    ) -> (Vec<u64>, bool) {
        let mut rows = Vec::with_capacity(slots);
        let mut distributed = false;
        while rows.len() < slots {
            let remote = self.draw_distributed(rng);
            let node = if remote { self.other_node(rng, home) } else { home };
            let row = self.pick_row(rng, node, class);
            if !rows.contains(&row) {
                rows.push(row);
                distributed |= remote;
            }
        }
        (rows, distributed)
    }

    /// One node per key slot, as the module doc describes: the home node first, and when
    /// `distributed`, a different node second and any nodes after that.
    pub(crate) fn pick_nodes(&self, rng: &mut SeededRng, home: NodeId, slots: usize, distributed: bool) -> Vec<NodeId> {
        let mut nodes = vec![home; slots];
        if distributed {
            assert!(slots >= 2, "a distributed transaction needs two keys");
            nodes[1] = self.other_node(rng, home);
            for node in &mut nodes[2..] {
                *node = rng.random_range(0..self.partitioning.nodes);
            }
        }
        nodes
    }

    /// A node other than `home`, uniformly.
    fn other_node(&self, rng: &mut SeededRng, home: NodeId) -> NodeId {
        let node = rng.random_range(0..self.partitioning.nodes - 1);
        if node >= home {
            node + 1
        } else {
            node
        }
    }

    /// One distinct row per slot, each on its slot's node and of the given class.
    ///
    /// Rejection sampling ends because `validate` guarantees every node has at least as many
    /// rows of each class as a transaction has slots.
    pub(crate) fn pick_distinct_rows(&self, rng: &mut SeededRng, nodes: &[NodeId], class: TxnClass) -> Vec<u64> {
        let mut rows = Vec::with_capacity(nodes.len());
        for &node in nodes {
            let row = loop {
                let row = self.pick_row(rng, node, class);
                if !rows.contains(&row) {
                    break row;
                }
            };
            rows.push(row);
        }
        rows
    }

    /// A uniform row of `node` from its hot rows, from its other rows, or (warm) from all.
    fn pick_row(&self, rng: &mut SeededRng, node: NodeId, class: TxnClass) -> u64 {
        let index = match class {
            TxnClass::Hot => rng.random_range(0..self.hot_per_node),
            TxnClass::Cold => rng.random_range(self.hot_per_node..self.rows_on(node)),
            TxnClass::Warm => rng.random_range(0..self.rows_on(node)),
        };
        self.partitioning.row_of(node, index)
    }

    /// How many rows `node` owns.
    fn rows_on(&self, node: NodeId) -> u64 {
        self.partitioning.rows_on(node, self.rows)
    }
}

/// Rejects a probability outside `0..=1` (including NaN).
fn check_probability(field: &'static str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::new(field, value, "a probability in 0..=1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::rng;
    use std::collections::BTreeSet;

    fn space(nodes: u16, rows: u64, hot_per_node: u64) -> KeySpace {
        KeySpace {
            partitioning: Partitioning::round_robin(nodes),
            rows,
            hot_per_node,
            hot_prob: 0.5,
            remote_prob: 0.5,
            remote_rule: RemoteRule::PerTransaction,
        }
    }

    #[test]
    fn hot_set_is_the_first_rows_of_every_node() {
        let s = space(3, 100, 4);
        let first_four_of_each: BTreeSet<u64> = (0..3).flat_map(|n| (0..4).map(move |i| n + 3 * i)).collect();
        assert_eq!(s.hot_rows().collect::<BTreeSet<_>>(), first_four_of_each);
        assert!((0..100).all(|r| s.is_hot_row(r) == first_four_of_each.contains(&r)));
    }

    #[test]
    fn range_partitioning_gives_each_node_a_block_and_its_first_rows_are_hot() {
        let s = KeySpace { partitioning: Partitioning::new(Scheme::Range, 3, 10), ..space(3, 10, 2) };
        let p = s.partitioning;
        // span 4: node 0 has 0..4, node 1 has 4..8, node 2 has 8..10.
        let owners: Vec<NodeId> = (0..10).map(|r| p.node_of(TupleKey::new(0, r))).collect();
        assert_eq!(owners, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
        assert_eq!([s.rows_on(0), s.rows_on(1), s.rows_on(2)], [4, 4, 2]);
        assert_eq!(s.hot_rows().collect::<Vec<_>>(), [0, 1, 4, 5, 8, 9]);
        assert!((0..10).all(|r| p.row_of(p.node_of(TupleKey::new(0, r)), p.index_of(r)) == r));
    }

    #[test]
    fn rows_on_counts_each_nodes_share_of_an_uneven_split() {
        let s = space(3, 10, 0);
        // Rows 0..10: node 0 has 0,3,6,9; node 1 has 1,4,7; node 2 has 2,5,8.
        assert_eq!([s.rows_on(0), s.rows_on(1), s.rows_on(2)], [4, 3, 3]);
    }

    #[test]
    fn picked_rows_live_on_their_node_and_match_the_class() {
        let s = space(4, 1000, 10);
        let mut r = rng::derive(1, "test");
        let p = s.partitioning;
        for home in 0..4 {
            let nodes = s.pick_nodes(&mut r, home, 6, true);
            for class in [TxnClass::Hot, TxnClass::Cold] {
                let rows = s.pick_distinct_rows(&mut r, &nodes, class);
                for (&row, &node) in rows.iter().zip(&nodes) {
                    assert_eq!(p.node_of(TupleKey::new(0, row)), node);
                    assert_eq!(s.is_hot_row(row), class == TxnClass::Hot);
                    assert!(row < 1000);
                }
            }
        }
    }
}
