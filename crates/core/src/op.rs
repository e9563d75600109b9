//! Operations on single tuples and their reference semantics.
//!
//! An operation reads one tuple's old value `old`, an immediate operand `data`, and optionally
//! the transaction's accumulator `acc` (when `acc_in` is set, the operand becomes
//! `data + acc`). It produces the tuple's new value and an *output*. The output is what the
//! caller gets back (for reads, the value read), and it can also be folded into the
//! accumulator (`acc_out`: set, add or subtract) so that later operations depend on it.
//!
//! The accumulator is the smallest mechanism that covers read-dependent writes: SmallBank's
//! Amalgamate reads two balances into it and adds them to a third account; SendPayment's
//! constrained debit puts the amount actually moved into it for the credit; WriteCheck reads the
//! savings balance into it to decide on the overdraft penalty. On the switch it is a packet
//! header field (a PHV field), so it survives recirculation between passes.
//!
//! Values are `i64` here; the switch stores 32-bit registers and wraps. Workloads keep values
//! within 32 bits so both agree (a property test in the switch crate checks it).

use serde::{Deserialize, Serialize};

/// Names one tuple independently of where it is stored: a table id and a row id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TupleKey {
    /// Table id, as assigned by the workload (e.g. SmallBank savings = 0, checking = 1).
    pub table: u16,
    /// Row id within the table (the primary key).
    pub row: u64,
}

impl TupleKey {
    /// A key for `row` of `table`.
    pub const fn new(table: u16, row: u64) -> Self {
        Self { table, row }
    }
}

/// The kind of an operation; see [`Op::apply`] for the exact semantics of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OpKind {
    /// `new = old`, `out = old`.
    Read,
    /// `new = operand`, `out = old`.
    Write,
    /// `new = old + operand`, `out = old`.
    Add,
    /// A constrained write: if `old + operand >= 0` then `new = old + operand` and
    /// `out = operand` (the delta applied), else `new = old` and `out = 0`.
    AddIfNonNegative,
    /// SmallBank's WriteCheck on a checking balance, with the savings balance in the
    /// accumulator: if `old + acc < data` then `new = old - data - 1` (overdraft penalty) else
    /// `new = old - data`; `out = old`. Uses `acc` for the comparison, never as operand.
    WriteCheck,
    /// TPC-C's stock update (NewOrder, clause 2.4.2.2): with `q = operand`, if
    /// `old - q >= RESTOCK_THRESHOLD` then `new = old - q`, else `new = old - q + RESTOCK_AMOUNT`
    /// (the warehouse restocks); `out = old`. One comparison, so one stateful ALU action.
    Restock,
}

/// [`OpKind::Restock`]: the stock level below which an order triggers a restock.
pub const RESTOCK_THRESHOLD: i64 = 10;
/// [`OpKind::Restock`]: how much a restock adds.
pub const RESTOCK_AMOUNT: i64 = 91;

/// What an operation does with its output to the transaction's accumulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AccOut {
    /// The accumulator is left alone.
    #[default]
    None,
    /// `acc = out`.
    Set,
    /// `acc = acc + out`.
    Add,
    /// `acc = acc - out`.
    Sub,
}

/// One operation of a transaction on one tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Op {
    /// The tuple operated on.
    pub key: TupleKey,
    /// What the operation does.
    pub kind: OpKind,
    /// The immediate operand.
    pub data: i64,
    /// Whether the accumulator takes part (as operand, or for WriteCheck, as the comparison).
    pub acc_in: bool,
    /// What happens to the accumulator after the operation.
    pub acc_out: AccOut,
}

/// The effect of applying an operation: the tuple's new value, the output, the new accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpOutcome {
    /// The tuple's value after the operation.
    pub new: i64,
    /// The operation's output, returned to the caller.
    pub out: i64,
    /// The accumulator after the operation.
    pub acc: i64,
}

impl Op {
    /// An operation without accumulator use.
    pub const fn new(key: TupleKey, kind: OpKind, data: i64) -> Self {
        Self { key, kind, data, acc_in: false, acc_out: AccOut::None }
    }

    /// A read of `key`.
    pub const fn read(key: TupleKey) -> Self {
        Self::new(key, OpKind::Read, 0)
    }

    /// A blind write of `value` to `key`.
    pub const fn write(key: TupleKey, value: i64) -> Self {
        Self::new(key, OpKind::Write, value)
    }

    /// This operation, also taking the accumulator as input.
    pub const fn with_acc_in(mut self) -> Self {
        self.acc_in = true;
        self
    }

    /// This operation, folding its output into the accumulator as `mode` says.
    pub const fn with_acc_out(mut self, mode: AccOut) -> Self {
        self.acc_out = mode;
        self
    }

    /// Whether the operation changes its tuple (for locking and conflict detection).
    pub const fn is_write(&self) -> bool {
        !matches!(self.kind, OpKind::Read)
    }

    /// Whether the operation reads the accumulator.
    pub const fn reads_acc(&self) -> bool {
        self.acc_in
    }

    /// Whether the operation changes the accumulator.
    pub const fn writes_acc(&self) -> bool {
        !matches!(self.acc_out, AccOut::None)
    }

    /// The reference semantics: applies the operation to `old` with accumulator `acc`.
    ///
    /// The switch's register actions and the nodes' tuple store both must produce exactly this.
    pub fn apply(&self, old: i64, acc: i64) -> OpOutcome {
        let acc_term = if self.acc_in { acc } else { 0 };
        let operand = self.data.wrapping_add(acc_term);
        let (new, out) = match self.kind {
            OpKind::Read => (old, old),
            OpKind::Write => (operand, old),
            OpKind::Add => (old.wrapping_add(operand), old),
            OpKind::AddIfNonNegative => {
                let sum = old.wrapping_add(operand);
                if sum >= 0 {
                    (sum, operand)
                } else {
                    (old, 0)
                }
            }
            OpKind::WriteCheck => {
                let penalty = i64::from(old.wrapping_add(acc_term) < self.data);
                (old.wrapping_sub(self.data).wrapping_sub(penalty), old)
            }
            OpKind::Restock => {
                let left = old.wrapping_sub(operand);
                let restock = if left >= RESTOCK_THRESHOLD { 0 } else { RESTOCK_AMOUNT };
                (left.wrapping_add(restock), old)
            }
        };
        let acc = match self.acc_out {
            AccOut::None => acc,
            AccOut::Set => out,
            AccOut::Add => acc.wrapping_add(out),
            AccOut::Sub => acc.wrapping_sub(out),
        };
        OpOutcome { new, out, acc }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: TupleKey = TupleKey::new(1, 7);

    #[test]
    fn constrained_add_applies_only_when_result_is_non_negative() {
        let op = Op::new(K, OpKind::AddIfNonNegative, -30);
        assert_eq!(op.apply(100, 0), OpOutcome { new: 70, out: -30, acc: 0 });
        assert_eq!(op.apply(20, 0), OpOutcome { new: 20, out: 0, acc: 0 });
        assert_eq!(op.apply(30, 0).new, 0, "exactly zero is allowed");
    }

    #[test]
    fn write_check_charges_a_penalty_when_total_is_short() {
        let op = Op::new(K, OpKind::WriteCheck, 50).with_acc_in();
        assert_eq!(op.apply(30, 10).new, 30 - 50 - 1, "30 + 10 < 50: penalty");
        assert_eq!(op.apply(30, 20).new, 30 - 50, "30 + 20 >= 50: no penalty");
        assert_eq!(op.apply(30, 20).acc, 20, "WriteCheck leaves acc alone without acc_out");
    }

    #[test]
    fn restock_refills_when_the_stock_would_fall_below_the_threshold() {
        let op = Op::new(K, OpKind::Restock, 5);
        assert_eq!(op.apply(20, 0), OpOutcome { new: 15, out: 20, acc: 0 });
        assert_eq!(op.apply(15, 0).new, 10, "exactly the threshold stays");
        assert_eq!(op.apply(14, 0).new, 14 - 5 + RESTOCK_AMOUNT);
    }

    #[test]
    fn accumulator_modes_fold_the_output() {
        let read = Op::read(K);
        assert_eq!(read.with_acc_out(AccOut::Set).apply(5, 100).acc, 5);
        assert_eq!(read.with_acc_out(AccOut::Add).apply(5, 100).acc, 105);
        assert_eq!(read.with_acc_out(AccOut::Sub).apply(5, 100).acc, 95);
        assert_eq!(read.apply(5, 100).acc, 100);
    }

    #[test]
    fn acc_in_adds_the_accumulator_to_the_operand() {
        let add = Op::new(K, OpKind::Add, 1).with_acc_in();
        assert_eq!(add.apply(10, 5).new, 16);
        assert_eq!(Op::new(K, OpKind::Add, 1).apply(10, 5).new, 11);
    }
}
