//! What a layout is laid onto (the data arrays a switch program offers) and the result.

use pisadb_core::TupleKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One register array that can hold hot tuples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySlot {
    /// Pipeline stage of the array.
    pub stage: u8,
    /// The program's register id of the array.
    pub register: u8,
    /// Cells in the array (one tuple each).
    pub capacity: u32,
    /// Width of a cell in bits.
    pub width_bits: u32,
}

/// The data arrays of a switch program, in (stage, register) order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutTarget {
    /// The arrays.
    pub arrays: Vec<ArraySlot>,
    /// SRAM is allocated in blocks of this many bits (for the SRAM figure of a layout).
    pub sram_block_bits: u64,
}

impl LayoutTarget {
    /// Tuples the arrays hold in all.
    pub fn capacity(&self) -> usize {
        self.arrays.iter().map(|a| a.capacity as usize).sum()
    }

    /// The distinct stages holding arrays, ascending.
    pub fn stages(&self) -> Vec<u8> {
        let mut stages: Vec<u8> = self.arrays.iter().map(|a| a.stage).collect();
        stages.sort_unstable();
        stages.dedup();
        stages
    }

    /// The array with register id `register`.
    pub fn array(&self, register: u8) -> Option<&ArraySlot> {
        self.arrays.iter().find(|a| a.register == register)
    }
}

/// Where one tuple lives on the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Placement {
    /// Pipeline stage.
    pub stage: u8,
    /// Register array id.
    pub register: u8,
    /// Cell in the array.
    pub index: u32,
}

/// A placement of hot tuples: the hot-set index every node keeps a copy of (paper §6.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    placements: BTreeMap<TupleKey, Placement>,
    /// Hot tuples that did not fit on the switch; they stay on the nodes.
    pub overflow: Vec<TupleKey>,
}

impl Layout {
    /// An empty layout with these tuples left on the nodes.
    pub fn with_overflow(overflow: Vec<TupleKey>) -> Self {
        Layout { placements: BTreeMap::new(), overflow }
    }

    /// Places `key`; replaces an earlier placement of it.
    pub fn insert(&mut self, key: TupleKey, placement: Placement) {
        self.placements.insert(key, placement);
    }

    /// Where `key` lives, if on the switch.
    pub fn get(&self, key: TupleKey) -> Option<Placement> {
        self.placements.get(&key).copied()
    }

    /// Whether `key` lives on the switch.
    pub fn contains(&self, key: TupleKey) -> bool {
        self.placements.contains_key(&key)
    }

    /// Tuples on the switch.
    pub fn len(&self) -> usize {
        self.placements.len()
    }

    /// Whether no tuple is on the switch.
    pub fn is_empty(&self) -> bool {
        self.placements.is_empty()
    }

    /// All placements in key order.
    pub fn iter(&self) -> impl Iterator<Item = (TupleKey, Placement)> + '_ {
        self.placements.iter().map(|(&k, &p)| (k, p))
    }
}
