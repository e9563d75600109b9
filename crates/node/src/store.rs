//! A node's partition of every table: fixed-width tuples in dense arrays.
//!
//! Whatever the partitioning scheme ([`pisadb_workload::Partitioning`]), a node's rows of a table
//! are numbered `0..` ([`Partitioning::index_of`]), so the table is a plain vector indexed by
//! that number. A tuple is a 64-bit
//! value and the id of the transaction attempt that last wrote it (its *version*, 0 for the
//! initial load), which the serializability checker needs and costs 8 bytes.

use pisadb_core::TupleKey;
use pisadb_workload::{Partitioning, Workload};

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
    partitioning: Option<Partitioning>,
    /// By table id; empty for tables the workload does not have.
    tables: Vec<Vec<Tuple>>,
}

impl Store {
    /// Loads node `id`'s partition of `workload`'s tables with their initial values.
    pub fn load(id: u16, workload: &dyn Workload) -> Self {
        let p = workload.partitioning();
        let mut tables: Vec<Vec<Tuple>> = Vec::new();
        for (table, rows) in workload.tables() {
            let t = usize::from(table);
            if tables.len() <= t {
                tables.resize_with(t + 1, Vec::new);
            }
            tables[t] = (0..p.rows_on(id, rows))
                .map(|i| {
                    let key = TupleKey::new(table, p.row_of(id, i));
                    Tuple { value: workload.initial_value(key), version: 0 }
                })
                .collect();
        }
        Store { id, partitioning: Some(p), tables }
    }

    fn slot(&self, key: TupleKey) -> Option<(usize, usize)> {
        let p = self.partitioning?;
        if p.node_of(key) != self.id {
            return None;
        }
        let table = usize::from(key.table);
        let index = usize::try_from(p.index_of(key.row)).ok()?;
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
        let p = self.partitioning;
        self.tables.iter().enumerate().flat_map(move |(t, rows)| {
            rows.iter()
                .enumerate()
                .filter_map(move |(i, &tuple)| Some((TupleKey::new(t as u16, p?.row_of(self.id, i as u64)), tuple)))
        })
    }
}
