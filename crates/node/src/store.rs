//! A node's partition of every table: fixed-width tuples in dense arrays.
//!
//! Rows are spread round robin (row `r` on node `r % nodes`, see
//! [`pisadb_workload::Partitioning`]), so a node's `i`-th row of a table is row
//! `id + nodes·i`, and the table is a plain vector indexed by `row / nodes`. A tuple is a 64-bit
//! value and the id of the transaction attempt that last wrote it (its *version*, 0 for the
//! initial load), which the serializability checker needs and costs 8 bytes.

use pisadb_core::TupleKey;
use pisadb_workload::Workload;

/// One tuple.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuple {
    /// The value.
    pub value: i64,
    /// Who wrote it last (0: the initial load).
    pub version: u64,
}

/// The tuples one node owns.
#[derive(Debug, Default)]
pub struct Store {
    id: u16,
    nodes: u16,
    /// By table id; empty for tables the workload does not have.
    tables: Vec<Vec<Tuple>>,
}

impl Store {
    /// Loads node `id`'s partition of `workload`'s tables with their initial values.
    pub fn load(id: u16, workload: &dyn Workload) -> Self {
        let nodes = workload.partitioning().nodes;
        let mut tables: Vec<Vec<Tuple>> = Vec::new();
        for (table, rows) in workload.tables() {
            let t = usize::from(table);
            if tables.len() <= t {
                tables.resize_with(t + 1, Vec::new);
            }
            // Rows id, id + nodes, … below `rows`.
            let own = rows.saturating_sub(u64::from(id)).div_ceil(u64::from(nodes));
            tables[t] = (0..own)
                .map(|i| {
                    let key = TupleKey::new(table, u64::from(id) + u64::from(nodes) * i);
                    Tuple { value: workload.initial_value(key), version: 0 }
                })
                .collect();
        }
        Store { id, nodes, tables }
    }

    fn slot(&self, key: TupleKey) -> Option<(usize, usize)> {
        if key.row % u64::from(self.nodes) != u64::from(self.id) {
            return None;
        }
        let table = usize::from(key.table);
        let index = usize::try_from(key.row / u64::from(self.nodes)).ok()?;
        (index < self.tables.get(table)?.len()).then_some((table, index))
    }

    /// The tuple `key`, if this node owns it.
    pub fn get(&self, key: TupleKey) -> Option<Tuple> {
        self.slot(key).map(|(t, i)| self.tables[t][i])
    }

    /// Overwrites tuple `key`; returns false if this node does not own it.
    pub fn set(&mut self, key: TupleKey, tuple: Tuple) -> bool {
        match self.slot(key) {
            Some((t, i)) => {
                self.tables[t][i] = tuple;
                true
            }
            None => false,
        }
    }

    /// Every tuple this node owns, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (TupleKey, Tuple)> + '_ {
        self.tables.iter().enumerate().flat_map(move |(t, rows)| {
            rows.iter().enumerate().map(move |(i, &tuple)| {
                (TupleKey::new(t as u16, u64::from(self.id) + u64::from(self.nodes) * i as u64), tuple)
            })
        })
    }
}
