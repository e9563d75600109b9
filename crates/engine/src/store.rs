//! A node's partition of every table: fixed-width tuples in dense arrays.
//!
//! Whatever the partitioning scheme ([`pisadb_workload::Partitioning`]), a node's rows of a table
//! are numbered `0..` ([`Partitioning::index_of`]), so the table is a plain vector indexed by
//! that number. A tuple is a 64-bit
//! value and the id of the transaction attempt that last wrote it (its *version*, 0 for the
//! initial load), which the serializability checker needs and costs 8 bytes.
//!
//! Rows that transactions create (TPC-C's orders, order lines and history) have no place in
//! the dense arrays: their ids are handed out at run time and grow without bound. They live in
//! an ordered map beside the arrays, keyed like every other tuple, and [`Store::insert`]
//! refuses to create a row twice, so a duplicate key (say, an order id handed out twice) is
//! caught where it happens.

use crate::storage::{Storage, StorageError};
use pisadb_core::TupleKey;
use pisadb_workload::{Partitioning, Workload};
use std::collections::BTreeMap;

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
    /// Rows created by transactions.
    inserted: BTreeMap<TupleKey, Tuple>,
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
        Store { id, partitioning: Some(p), tables, inserted: BTreeMap::new() }
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
        match self.slot(key) {
            Some((t, i)) => Some(self.tables[t][i]),
            None => self.inserted.get(&key).copied(),
        }
    }

    /// Overwrites tuple `key`; returns false if this node does not own it.
    pub fn set(&mut self, key: TupleKey, tuple: Tuple) -> bool {
        match self.slot(key) {
            Some((t, i)) => {
                self.tables[t][i] = tuple;
                true
            }
            None => match self.inserted.get_mut(&key) {
                Some(row) => {
                    *row = tuple;
                    true
                }
                None => false,
            },
        }
    }

    /// Creates row `key`. Refused (false) if the row exists already or another node owns it.
    pub fn insert(&mut self, key: TupleKey, tuple: Tuple) -> bool {
        let owned = self.partitioning.is_some_and(|p| p.node_of(key) == self.id);
        if !owned || self.slot(key).is_some() || self.inserted.contains_key(&key) {
            return false;
        }
        self.inserted.insert(key, tuple);
        true
    }

    /// Rows created by transactions so far.
    pub fn inserted_rows(&self) -> usize {
        self.inserted.len()
    }

    /// Every tuple this node owns: the loaded tables in table and index order, then the
    /// inserted rows in key order.
    pub fn iter(&self) -> impl Iterator<Item = (TupleKey, Tuple)> + '_ {
        let p = self.partitioning;
        let loaded = self.tables.iter().enumerate().flat_map(move |(t, rows)| {
            rows.iter()
                .enumerate()
                .filter_map(move |(i, &tuple)| Some((TupleKey::new(t as u16, p?.row_of(self.id, i as u64)), tuple)))
        });
        loaded.chain(self.inserted.iter().map(|(&k, &t)| (k, t)))
    }
}

/// The in-memory store behind the storage interface.
impl Storage for Store {
    fn get(&self, key: TupleKey) -> Option<Tuple> {
        Store::get(self, key)
    }

    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        if self.set(key, tuple) {
            Ok(())
        } else {
            Err(StorageError::NotHeld { key })
        }
    }

    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        if self.insert(key, tuple) {
            Ok(())
        } else {
            Err(StorageError::NotCreatable { key })
        }
    }

    fn created_rows(&self) -> usize {
        self.inserted_rows()
    }

    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple)) {
        self.iter().for_each(|(key, tuple)| visit(key, tuple));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_workload::{Ycsb, YcsbConfig};

    fn store() -> Store {
        let ycsb = Ycsb::new(YcsbConfig::default(), 1).unwrap();
        Store::load(0, &ycsb)
    }

    #[test]
    fn put_overwrites_only_what_exists_and_create_only_what_does_not() {
        let mut s = store();
        let key = s.iter().next().unwrap().0;
        let t = Tuple { value: 5, version: 9 };
        assert_eq!(Storage::put(&mut s, key, t), Ok(()));
        assert_eq!(Storage::get(&s, key), Some(t));
        assert_eq!(Storage::create(&mut s, key, t), Err(StorageError::NotCreatable { key }));
        let fresh = TupleKey::new(200, 1);
        assert_eq!(Storage::put(&mut s, fresh, t), Err(StorageError::NotHeld { key: fresh }));
        assert_eq!(Storage::created_rows(&s), 0);
    }

    #[test]
    fn scan_visits_what_iter_yields() {
        let s = store();
        let mut seen = Vec::new();
        s.scan(&mut |k, t| seen.push((k, t)));
        assert_eq!(seen, s.iter().collect::<Vec<_>>());
    }
}
