//! Pass planning: how a node splits a hot transaction into pipeline passes under a layout.
//!
//! Rules of one pass (the switch checks them again on arrival): instructions visit stages in
//! non-decreasing order; each register array at most once; two operations that must keep their
//! order ([`Txn::must_precede`]) sit in strictly increasing stages. Operations that need not
//! keep their order commute, so any order consistent with the required pairs is equivalent to
//! program order; that is what lets the planner sort a pass by stage.
//!
//! The planner is greedy in program order: each operation goes to the earliest pass that comes
//! after the passes of the operations it depends on (the same pass if they sit in earlier
//! stages) and whose visit of its array is still free. Each pass is then sorted by stage.

use crate::target::Layout;
use pisadb_core::{TupleKey, Txn};

/// The passes of a transaction: operation indices per pass, in execution (stage) order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassPlan {
    /// Operation indices of each pass.
    pub passes: Vec<Vec<usize>>,
}

impl PassPlan {
    /// Whether the transaction runs in one pass.
    pub fn is_single_pass(&self) -> bool {
        self.passes.len() <= 1
    }
}

/// A transaction touches a tuple that is not on the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotOnSwitch {
    /// The tuple.
    pub key: TupleKey,
}

impl std::fmt::Display for NotOnSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tuple {:?} is not on the switch", self.key)
    }
}

impl std::error::Error for NotOnSwitch {}

/// Plans the passes of `txn` under `layout`.
pub fn plan_passes(txn: &Txn, layout: &Layout) -> Result<PassPlan, NotOnSwitch> {
    let places = txn
        .ops
        .iter()
        .map(|op| layout.get(op.key).ok_or(NotOnSwitch { key: op.key }))
        .collect::<Result<Vec<_>, _>>()?;
    let mut pass_of: Vec<usize> = Vec::with_capacity(txn.ops.len());
    // Arrays visited per pass, as (pass, register) pairs; transactions are short, a list is fastest.
    let mut visited: Vec<(usize, u8)> = Vec::with_capacity(txn.ops.len());
    for j in 0..txn.ops.len() {
        let mut pass = (0..j)
            .filter(|&i| txn.must_precede(i, j))
            .map(|i| pass_of[i] + usize::from(places[i].stage >= places[j].stage))
            .max()
            .unwrap_or(0);
        while visited.contains(&(pass, places[j].register)) {
            pass += 1;
        }
        visited.push((pass, places[j].register));
        pass_of.push(pass);
    }
    let count = pass_of.iter().max().map_or(0, |&p| p + 1);
    let mut passes = vec![Vec::new(); count];
    for (i, &p) in pass_of.iter().enumerate() {
        passes[p].push(i);
    }
    for pass in &mut passes {
        pass.sort_by_key(|&i| places[i].stage);
    }
    Ok(PassPlan { passes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Placement;
    use pisadb_core::{AccOut, Op, OpKind};

    fn k(r: u64) -> TupleKey {
        TupleKey::new(0, r)
    }

    fn layout(places: &[(u64, u8, u8)]) -> Layout {
        let mut l = Layout::default();
        for &(row, stage, register) in places {
            l.insert(k(row), Placement { stage, register, index: row as u32 });
        }
        l
    }

    fn transfer(a: u64, b: u64) -> Txn {
        Txn::new(vec![
            Op::new(k(a), OpKind::AddIfNonNegative, -1).with_acc_out(AccOut::Sub),
            Op::new(k(b), OpKind::Add, 0).with_acc_in(),
        ])
    }

    #[test]
    fn a_dependency_pointing_forward_fits_one_pass_and_backward_needs_two() {
        let l = layout(&[(0, 1, 1), (1, 2, 2)]);
        assert_eq!(plan_passes(&transfer(0, 1), &l).unwrap().passes, vec![vec![0, 1]]);
        assert_eq!(plan_passes(&transfer(1, 0), &l).unwrap().passes, vec![vec![0], vec![1]]);
    }

    #[test]
    fn independent_operations_are_sorted_by_stage_within_a_pass() {
        let l = layout(&[(0, 3, 5), (1, 1, 1)]);
        let txn = Txn::new(vec![Op::read(k(0)), Op::read(k(1))]);
        assert_eq!(plan_passes(&txn, &l).unwrap().passes, vec![vec![1, 0]]);
    }

    #[test]
    fn one_array_twice_needs_two_passes_and_so_does_one_tuple_twice() {
        let l = layout(&[(0, 1, 1), (1, 1, 1)]);
        let txn = Txn::new(vec![Op::read(k(0)), Op::read(k(1))]);
        assert_eq!(plan_passes(&txn, &l).unwrap().passes.len(), 2);
        let twice = Txn::new(vec![Op::read(k(0)), Op::write(k(0), 3)]);
        assert_eq!(plan_passes(&twice, &l).unwrap().passes.len(), 2);
    }

    #[test]
    fn a_tuple_off_the_switch_is_reported() {
        let l = layout(&[(0, 1, 1)]);
        assert_eq!(plan_passes(&transfer(0, 9), &l), Err(NotOnSwitch { key: k(9) }));
    }
}
