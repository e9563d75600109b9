//! Exact-match tables of one pipe: what the control plane installs and the data plane reads.
//!
//! A [`TableFile`] holds the entries of every table a program declared
//! ([`crate::program::TableSpec`]). The control plane inserts, overwrites and deletes entries
//! ([`TableFile::insert`], [`TableFile::delete`]), through the switch's control channel or a
//! driver's setup code; the data plane only looks keys up, through
//! [`crate::registers::PassContext::lookup`], which enforces the per-pass rules.
//!
//! Entries are kept in a `BTreeMap` per table: the hardware's hash ways are a placement detail
//! the model does not need (their SRAM cost is charged at load), and an ordered map keeps
//! listings deterministic. A table refuses keys and values wider than it was declared with and
//! more entries than it was declared to hold, as a driver would refuse them.

use crate::program::ProgramSpec;
use std::collections::BTreeMap;
use thiserror::Error;

/// The entries of one table, with the shape it was declared with.
#[derive(Clone, Debug)]
struct TableState {
    stage: u8,
    key_bits: u32,
    value_bits: u32,
    capacity: u32,
    entries: BTreeMap<u64, u64>,
}

/// All exact-match tables of one program in one pipe.
#[derive(Clone, Debug)]
pub struct TableFile {
    /// Position in `tables` by table id; `u8::MAX` where no table has that id.
    slot_of: [u8; 64],
    tables: Vec<TableState>,
}

/// A control-plane table operation that cannot be carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum TableError {
    /// No table has this id.
    #[error("no table with id {0}")]
    UnknownTable(u8),
    /// The key has bits set above the table's key width.
    #[error("table {table}: key {key:#x} does not fit its {key_bits}-bit key")]
    KeyTooWide {
        /// The table.
        table: u8,
        /// The key.
        key: u64,
        /// The table's key width.
        key_bits: u32,
    },
    /// The value has bits set above the table's value width.
    #[error("table {table}: value {value:#x} does not fit its {value_bits}-bit value")]
    ValueTooWide {
        /// The table.
        table: u8,
        /// The value.
        value: u64,
        /// The table's value width.
        value_bits: u32,
    },
    /// The table already holds as many entries as it was declared with.
    #[error("table {table} is full ({capacity} entries)")]
    TableFull {
        /// The table.
        table: u8,
        /// Its declared number of entries.
        capacity: u32,
    },
    /// The key has no entry.
    #[error("table {table} has no entry for key {key:#x}")]
    NoSuchEntry {
        /// The table.
        table: u8,
        /// The key.
        key: u64,
    },
}

/// Whether `value` fits in `bits` bits.
fn fits(value: u64, bits: u32) -> bool {
    bits >= 64 || value >> bits == 0
}

impl TableFile {
    /// A table file without tables (programs that declare none).
    pub const EMPTY: TableFile = TableFile { slot_of: [u8::MAX; 64], tables: Vec::new() };

    /// Empty tables for `spec` (which the switch has checked).
    pub fn new(spec: &ProgramSpec) -> Self {
        let mut slot_of = [u8::MAX; 64];
        let tables = spec
            .tables
            .iter()
            .enumerate()
            .map(|(slot, t)| {
                slot_of[usize::from(t.id)] = slot as u8;
                TableState {
                    stage: t.stage,
                    key_bits: t.key_bits,
                    value_bits: t.value_bits,
                    capacity: t.entries,
                    entries: BTreeMap::new(),
                }
            })
            .collect();
        TableFile { slot_of, tables }
    }

    fn state(&self, table: u8) -> Result<&TableState, TableError> {
        match self.slot_of.get(usize::from(table)) {
            Some(&s) if s != u8::MAX => Ok(&self.tables[usize::from(s)]),
            _ => Err(TableError::UnknownTable(table)),
        }
    }

    fn state_mut(&mut self, table: u8) -> Result<&mut TableState, TableError> {
        match self.slot_of.get(usize::from(table)) {
            Some(&s) if s != u8::MAX => Ok(&mut self.tables[usize::from(s)]),
            _ => Err(TableError::UnknownTable(table)),
        }
    }

    /// The stage of `table`, if it exists.
    pub fn stage_of(&self, table: u8) -> Option<u8> {
        self.state(table).ok().map(|t| t.stage)
    }

    /// The value of `key` in `table` (control-plane read; the data plane uses
    /// [`crate::registers::PassContext::lookup`]).
    pub fn get(&self, table: u8, key: u64) -> Result<Option<u64>, TableError> {
        Ok(self.state(table)?.entries.get(&key).copied())
    }

    /// Every entry of `table` as (key, value), in key order (a control-plane dump).
    pub fn entries(&self, table: u8) -> Result<impl Iterator<Item = (u64, u64)> + '_, TableError> {
        Ok(self.state(table)?.entries.iter().map(|(&k, &v)| (k, v)))
    }

    /// Entries installed in `table`.
    pub fn len(&self, table: u8) -> Result<usize, TableError> {
        Ok(self.state(table)?.entries.len())
    }

    /// Whether no table holds any entry.
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(|t| t.entries.is_empty())
    }

    /// Installs `key -> value` in `table`, overwriting an existing key's value; returns the
    /// value it replaced.
    pub fn insert(&mut self, table: u8, key: u64, value: u64) -> Result<Option<u64>, TableError> {
        let t = self.state_mut(table)?;
        if !fits(key, t.key_bits) {
            return Err(TableError::KeyTooWide { table, key, key_bits: t.key_bits });
        }
        if !fits(value, t.value_bits) {
            return Err(TableError::ValueTooWide { table, value, value_bits: t.value_bits });
        }
        if !t.entries.contains_key(&key) && t.entries.len() >= t.capacity as usize {
            return Err(TableError::TableFull { table, capacity: t.capacity });
        }
        Ok(t.entries.insert(key, value))
    }

    /// Removes the entry of `key` from `table`; returns its value.
    pub fn delete(&mut self, table: u8, key: u64) -> Result<u64, TableError> {
        self.state_mut(table)?.entries.remove(&key).ok_or(TableError::NoSuchEntry { table, key })
    }

    /// The data plane's read: `(stage, value)` of `key` in `table`.
    pub(crate) fn lookup(&self, table: u8, key: u64) -> Option<(u8, Option<u64>)> {
        let t = self.state(table).ok()?;
        Some((t.stage, t.entries.get(&key).copied()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::TableSpec;

    fn file() -> TableFile {
        let table = TableSpec { id: 2, name: "t".into(), stage: 1, key_bits: 8, value_bits: 4, entries: 2 };
        TableFile::new(&ProgramSpec {
            name: "p".into(),
            arrays: Vec::new(),
            reserve_fast_recirc_port: false,
            tables: vec![table],
        })
    }

    #[test]
    fn inserts_overwrite_and_respect_widths_and_capacity() {
        let mut t = file();
        assert_eq!(t.insert(2, 1, 9), Ok(None));
        assert_eq!(t.insert(2, 1, 10), Ok(Some(9)), "an insert of an existing key overwrites it");
        assert_eq!(t.insert(2, 256, 0), Err(TableError::KeyTooWide { table: 2, key: 256, key_bits: 8 }));
        assert_eq!(t.insert(2, 3, 16), Err(TableError::ValueTooWide { table: 2, value: 16, value_bits: 4 }));
        assert_eq!(t.insert(2, 255, 15), Ok(None));
        assert_eq!(t.insert(2, 7, 0), Err(TableError::TableFull { table: 2, capacity: 2 }));
        assert_eq!(t.insert(2, 255, 1), Ok(Some(15)), "overwriting in a full table is fine");
        assert_eq!(t.insert(5, 0, 0), Err(TableError::UnknownTable(5)));
    }

    #[test]
    fn deletes_return_the_value_or_say_there_was_none() {
        let mut t = file();
        t.insert(2, 4, 3).unwrap();
        assert_eq!(t.delete(2, 4), Ok(3));
        assert_eq!(t.delete(2, 4), Err(TableError::NoSuchEntry { table: 2, key: 4 }));
        assert_eq!(t.get(2, 4), Ok(None));
        assert!(t.is_empty());
    }
}
