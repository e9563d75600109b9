//! Transactions as ordered lists of operations, their ordering dependencies, and the serial
//! reference execution every engine is checked against.
//!
//! Two operations of one transaction must keep their relative order when
//! - they touch the same tuple (the second sees the first's write, or the first must read the
//!   value from before the second's write), or
//! - both touch the accumulator and at least one of them changes it (a read-dependent write).
//!
//! Every other pair may run in any order, or side by side in one pipeline stage. This is the
//! whole of what the data layout (§4 of the P4DB paper: directed vs bidirectional edges) and the
//! pass planner need to know about a transaction.

use crate::op::{Op, TupleKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A transaction: operations executed in order, with one accumulator starting at zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    /// The operations, in program order.
    pub ops: Vec<Op>,
}

impl Txn {
    /// A transaction of these operations.
    pub fn new(ops: Vec<Op>) -> Self {
        Self { ops }
    }

    /// Whether operation `i` must run before operation `j` (`i < j`), as the module doc says.
    pub fn must_precede(&self, i: usize, j: usize) -> bool {
        debug_assert!(i < j);
        let (a, b) = (&self.ops[i], &self.ops[j]);
        let same_tuple = a.key == b.key;
        let acc_conflict = (a.writes_acc() && (b.reads_acc() || b.writes_acc())) || (a.reads_acc() && b.writes_acc());
        same_tuple || acc_conflict
    }

    /// All ordering dependencies `(i, j)` with `i < j`, in lexicographic order.
    pub fn dependencies(&self) -> Vec<(usize, usize)> {
        let n = self.ops.len();
        (0..n).flat_map(|j| (0..j).map(move |i| (i, j))).filter(|&(i, j)| self.must_precede(i, j)).collect()
    }

    /// Whether any operation changes a tuple.
    pub fn is_read_only(&self) -> bool {
        self.ops.iter().all(|op| !op.is_write())
    }

    /// Executes the transaction alone on `store`, returning each operation's output.
    pub fn execute_serial(&self, store: &mut SerialStore) -> Vec<i64> {
        let mut acc = 0;
        self.ops
            .iter()
            .map(|op| {
                let old = store.get(op.key);
                let outcome = op.apply(old, acc);
                store.set(op.key, outcome.new);
                acc = outcome.acc;
                outcome.out
            })
            .collect()
    }
}

/// A row a transaction creates when it commits, on its home node. Its key may come from one
/// of the transaction's outputs: TPC-C's NewOrder keys the order it inserts by the district's
/// next-order-id as the transaction read it, which on P4DB is an output of the switch.
///
/// Inserted rows are new, so they need no lock: no other transaction can name them before the
/// inserting one commits (the id they are keyed by is handed out once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Insert {
    /// The table the row goes to.
    pub table: u16,
    /// How the row id is formed.
    pub row: InsertRow,
    /// The value stored.
    pub value: i64,
}

/// How an [`Insert`]'s row id is formed: `base + n * stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InsertRow {
    /// `n` is the output of operation `op` (e.g. the order id a counter handed out).
    FromOutput {
        /// The operation whose output names the row.
        op: usize,
        /// Row of `n = 0`.
        base: u64,
        /// Rows between consecutive `n`.
        stride: u64,
    },
    /// `n` is a counter of the committing node, unique on that node (e.g. TPC-C's history rows,
    /// which have no key of their own).
    Sequence {
        /// Row of `n = 0`.
        base: u64,
        /// Rows between consecutive `n`.
        stride: u64,
    },
}

impl Insert {
    /// The key of the row, given the transaction's outputs and the node's next sequence number.
    /// `None` if an output it depends on is negative or the row id overflows.
    pub fn key(&self, outputs: &[i64], sequence: u64) -> Option<TupleKey> {
        let (n, base, stride) = match self.row {
            InsertRow::FromOutput { op, base, stride } => (u64::try_from(*outputs.get(op)?).ok()?, base, stride),
            InsertRow::Sequence { base, stride } => (sequence, base, stride),
        };
        let row = n.checked_mul(stride)?.checked_add(base)?;
        Some(TupleKey::new(self.table, row))
    }
}

/// The simplest correct tuple store: a sorted map where missing tuples read as zero. Used as
/// the oracle in tests; iteration order is the key order, so it is deterministic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SerialStore {
    /// Tuple values; absent means zero.
    values: BTreeMap<TupleKey, i64>,
}

impl SerialStore {
    /// The value of `key` (zero if never written).
    pub fn get(&self, key: TupleKey) -> i64 {
        self.values.get(&key).copied().unwrap_or(0)
    }

    /// Sets the value of `key`.
    pub fn set(&mut self, key: TupleKey, value: i64) {
        self.values.insert(key, value);
    }

    /// All tuples ever written, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (TupleKey, i64)> + '_ {
        self.values.iter().map(|(k, v)| (*k, *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{AccOut, OpKind};

    fn key(row: u64) -> TupleKey {
        TupleKey::new(0, row)
    }

    #[test]
    fn independent_operations_have_no_dependencies() {
        let txn = Txn::new(vec![Op::read(key(1)), Op::write(key(2), 5), Op::read(key(3))]);
        assert!(txn.dependencies().is_empty());
    }

    #[test]
    fn same_tuple_and_accumulator_flow_create_dependencies() {
        let txn = Txn::new(vec![
            Op::read(key(1)).with_acc_out(AccOut::Set),
            Op::read(key(2)),
            Op::new(key(3), OpKind::Add, 0).with_acc_in(),
            Op::write(key(2), 9),
        ]);
        assert_eq!(txn.dependencies(), vec![(0, 2), (1, 3)]);
    }

    #[test]
    fn inserts_are_keyed_by_an_output_or_a_sequence() {
        let by_output = Insert { table: 4, row: InsertRow::FromOutput { op: 1, base: 3, stride: 10 }, value: 0 };
        assert_eq!(by_output.key(&[7, 42], 99), Some(TupleKey::new(4, 423)));
        assert_eq!(by_output.key(&[7, -1], 99), None, "a negative id names no row");
        assert_eq!(by_output.key(&[7], 99), None, "a missing output names no row");
        let by_sequence = Insert { table: 5, row: InsertRow::Sequence { base: 2, stride: 8 }, value: 0 };
        assert_eq!(by_sequence.key(&[], 5), Some(TupleKey::new(5, 42)));
    }

    #[test]
    fn serial_execution_threads_the_accumulator() {
        // Amalgamate-like: move both balances of account 1 to account 2.
        let mut store = SerialStore::default();
        store.set(key(1), 30);
        store.set(key(2), 12);
        store.set(key(3), 100);
        let txn = Txn::new(vec![
            Op::write(key(1), 0).with_acc_out(AccOut::Set),
            Op::write(key(2), 0).with_acc_out(AccOut::Add),
            Op::new(key(3), OpKind::Add, 0).with_acc_in(),
        ]);
        assert_eq!(txn.execute_serial(&mut store), vec![30, 12, 100]);
        assert_eq!((store.get(key(1)), store.get(key(2)), store.get(key(3))), (0, 0, 142));
    }
}
