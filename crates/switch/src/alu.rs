//! The stateful ALU: the only way a packet can change switch memory.
//!
//! A Tofino stateful ALU reads one register cell (a single value, or a *pair* of two halves
//! `lo`/`hi`), evaluates a condition made of a few comparisons, and writes back one of two
//! update expressions, also producing one output value for the packet. Its arithmetic adds and
//! subtracts; it does not multiply, shift by variables or loop. [`RegisterAction`] models
//! exactly that: every expression is a sum of the old `lo`, the old `hi`, two packet inputs
//! `in1`/`in2` (PHV fields) and a constant, each with coefficient -1, 0 or +1. A comparison is
//! `expr <op> 0`. The number of comparisons is limited by the profile (2 on Tofino 1, 4 on
//! Tofino 2), and the switch refuses to load a program whose actions exceed it
//! ([`RegisterAction::check`]).
//!
//! All of P4DB's operations (read, write, add, constrained add, WriteCheck, TPC-C restock), its 2-bit lock
//! pair (Listing 1 of the paper) and the LM-Switch lock table are register actions built from
//! this one mechanism; so will be the other papers' programs.

use serde::{Deserialize, Serialize};

/// A linear expression over the old cell and the packet inputs; coefficients are -1, 0 or 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expr {
    /// Coefficient of the cell's (low half's) old value.
    pub lo: i8,
    /// Coefficient of the pair's high half's old value (pair arrays only).
    pub hi: i8,
    /// Coefficient of the first packet input.
    pub in1: i8,
    /// Coefficient of the second packet input.
    pub in2: i8,
    /// A constant added.
    pub constant: i64,
}

impl Expr {
    /// The old low half (or the whole cell).
    pub const LO: Expr = Expr { lo: 1, hi: 0, in1: 0, in2: 0, constant: 0 };
    /// The old high half.
    pub const HI: Expr = Expr { lo: 0, hi: 1, in1: 0, in2: 0, constant: 0 };
    /// The first packet input.
    pub const IN1: Expr = Expr { lo: 0, hi: 0, in1: 1, in2: 0, constant: 0 };
    /// The second packet input.
    pub const IN2: Expr = Expr { lo: 0, hi: 0, in1: 0, in2: 1, constant: 0 };

    /// A constant.
    pub const fn constant(value: i64) -> Expr {
        Expr { lo: 0, hi: 0, in1: 0, in2: 0, constant: value }
    }

    /// `self + other` (coefficients must stay within -1..=1; checked at load).
    pub const fn plus(self, other: Expr) -> Expr {
        Expr {
            lo: self.lo + other.lo,
            hi: self.hi + other.hi,
            in1: self.in1 + other.in1,
            in2: self.in2 + other.in2,
            constant: self.constant + other.constant,
        }
    }

    /// `self - other`.
    pub const fn minus(self, other: Expr) -> Expr {
        Expr {
            lo: self.lo - other.lo,
            hi: self.hi - other.hi,
            in1: self.in1 - other.in1,
            in2: self.in2 - other.in2,
            constant: self.constant - other.constant,
        }
    }

    #[inline]
    fn eval(&self, lo: i64, hi: i64, in1: i64, in2: i64) -> i64 {
        i64::from(self.lo)
            .wrapping_mul(lo)
            .wrapping_add(i64::from(self.hi).wrapping_mul(hi))
            .wrapping_add(i64::from(self.in1).wrapping_mul(in1))
            .wrapping_add(i64::from(self.in2).wrapping_mul(in2))
            .wrapping_add(self.constant)
    }

    fn uses_hi(&self) -> bool {
        self.hi != 0
    }

    fn coefficients_ok(&self) -> bool {
        [self.lo, self.hi, self.in1, self.in2].iter().all(|c| (-1..=1).contains(c))
    }
}

/// How a comparison relates its expression to zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    /// `expr == 0`
    Eq,
    /// `expr != 0`
    Ne,
    /// `expr < 0`
    Lt,
    /// `expr <= 0`
    Le,
    /// `expr > 0`
    Gt,
    /// `expr >= 0`
    Ge,
}

/// One comparison of the condition: `expr <op> 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// The left-hand side.
    pub expr: Expr,
    /// The relation to zero.
    pub op: CmpOp,
}

impl Comparison {
    /// `expr <op> 0`.
    pub const fn new(expr: Expr, op: CmpOp) -> Self {
        Comparison { expr, op }
    }

    #[inline]
    fn holds(&self, lo: i64, hi: i64, in1: i64, in2: i64) -> bool {
        let v = self.expr.eval(lo, hi, in1, in2);
        match self.op {
            CmpOp::Eq => v == 0,
            CmpOp::Ne => v != 0,
            CmpOp::Lt => v < 0,
            CmpOp::Le => v <= 0,
            CmpOp::Gt => v > 0,
            CmpOp::Ge => v >= 0,
        }
    }
}

/// How the comparisons combine into the condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Combine {
    /// True when every comparison holds.
    All,
    /// True when at least one comparison holds.
    Any,
}

/// What one branch of a register action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    /// New value of the low half (or whole cell); `None` keeps it.
    pub lo: Option<Expr>,
    /// New value of the high half (pair arrays only); `None` keeps it.
    pub hi: Option<Expr>,
    /// The output to the packet, over the *old* cell and the inputs.
    pub out: Expr,
}

impl Branch {
    /// Changes nothing and outputs `out`.
    pub const fn keep(out: Expr) -> Branch {
        Branch { lo: None, hi: None, out }
    }

    /// Sets the cell (low half) to `lo` and outputs `out`.
    pub const fn set(lo: Expr, out: Expr) -> Branch {
        Branch { lo: Some(lo), hi: None, out }
    }
}

/// One stateful action a program declares for a register array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterAction {
    /// A name for error messages and listings.
    pub name: String,
    /// The comparisons; empty means the `then` branch always runs.
    pub comparisons: Vec<Comparison>,
    /// How the comparisons combine.
    pub combine: Combine,
    /// Runs when the condition holds (or there is none).
    pub then: Branch,
    /// Runs when the condition fails.
    pub otherwise: Branch,
}

impl RegisterAction {
    /// An action without a condition.
    pub fn always(name: &str, then: Branch) -> Self {
        RegisterAction { name: name.into(), comparisons: Vec::new(), combine: Combine::All, then, otherwise: then }
    }

    /// An action with a condition.
    pub fn when(name: &str, comparisons: Vec<Comparison>, combine: Combine, then: Branch, otherwise: Branch) -> Self {
        RegisterAction { name: name.into(), comparisons, combine, then, otherwise }
    }

    /// Why this action cannot run on a stateful ALU with `comparisons_max` comparisons over a
    /// cell that is (`pair`) or is not a pair; `None` if it can.
    pub fn check(&self, comparisons_max: u8, pair: bool) -> Option<String> {
        if self.comparisons.len() > usize::from(comparisons_max) {
            return Some(format!(
                "uses {} comparisons, the stateful ALU evaluates at most {comparisons_max}",
                self.comparisons.len()
            ));
        }
        let exprs = self
            .comparisons
            .iter()
            .map(|c| c.expr)
            .chain([self.then, self.otherwise].into_iter().flat_map(|b| [b.lo, b.hi, Some(b.out)]).flatten());
        for expr in exprs {
            if !expr.coefficients_ok() {
                return Some(format!("expression {expr:?} needs a multiplication (coefficients must be -1, 0 or 1)"));
            }
            if expr.uses_hi() && !pair {
                return Some("reads the high half of a cell that is not a pair".into());
            }
        }
        let writes_hi = self.then.hi.is_some() || self.otherwise.hi.is_some();
        if writes_hi && !pair {
            return Some("writes the high half of a cell that is not a pair".into());
        }
        None
    }

    /// Runs the action on a cell: updates `lo`/`hi` in place (wrapped to `width_bits` each)
    /// and returns the output.
    #[inline]
    pub fn apply(&self, lo: &mut i64, hi: &mut i64, width_bits: u32, in1: i64, in2: i64) -> i64 {
        let (old_lo, old_hi) = (*lo, *hi);
        let holds = match self.combine {
            Combine::All => self.comparisons.iter().all(|c| c.holds(old_lo, old_hi, in1, in2)),
            Combine::Any => self.comparisons.iter().any(|c| c.holds(old_lo, old_hi, in1, in2)),
        };
        let branch = if holds || self.comparisons.is_empty() { &self.then } else { &self.otherwise };
        if let Some(e) = branch.lo {
            *lo = wrap(e.eval(old_lo, old_hi, in1, in2), width_bits);
        }
        if let Some(e) = branch.hi {
            *hi = wrap(e.eval(old_lo, old_hi, in1, in2), width_bits);
        }
        wrap(branch.out.eval(old_lo, old_hi, in1, in2), width_bits)
    }
}

/// The most comparisons any profile's stateful ALU evaluates (Tofino 2).
pub const MAX_COMPARISONS: usize = 4;

/// A [`RegisterAction`] compiled for execution: fixed-size, no heap, and evaluated with
/// the same semantics as [`RegisterAction::apply`] (a property test checks they agree). The
/// register file runs these; the readable form stays the program's declaration.
///
/// Laid out for the cache (216 bytes, `repr(C)` so the order holds): the comparison count
/// first, then the comparisons in use, then the two branches; coefficients stay as the `i8`s
/// the declaration has (a sign-extending load costs what a plain one does), so an action with
/// one comparison touches three cache lines, not the seven of a layout with widened
/// coefficients and the count at the end.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct CompiledAction {
    /// Comparisons in use.
    count: u8,
    /// Whether the comparisons combine with "any" instead of "all".
    any: bool,
    /// Up to four comparisons (Tofino 2's limit); the first `count` are used.
    comparisons: [(Lin, u8); MAX_COMPARISONS],
    /// The `then` branch and the `otherwise` branch.
    branches: [CompiledBranch; 2],
}

/// An [`Expr`] ready to evaluate: its coefficients in the order of the inputs
/// `[lo, hi, in1, in2]`, and its constant.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Lin {
    coefficients: [i8; 4],
    constant: i64,
}

impl Lin {
    fn of(e: Expr) -> Lin {
        Lin { coefficients: [e.lo, e.hi, e.in1, e.in2], constant: e.constant }
    }

    #[inline(always)]
    fn eval(&self, x: &[i64; 4]) -> i64 {
        let c = &self.coefficients;
        i64::from(c[0])
            .wrapping_mul(x[0])
            .wrapping_add(i64::from(c[1]).wrapping_mul(x[1]))
            .wrapping_add(i64::from(c[2]).wrapping_mul(x[2]))
            .wrapping_add(i64::from(c[3]).wrapping_mul(x[3]))
            .wrapping_add(self.constant)
    }
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct CompiledBranch {
    lo: Lin,
    hi: Lin,
    out: Lin,
    /// Whether the branch writes the low half, the high half.
    write_lo: u8,
    write_hi: u8,
}

impl CompiledBranch {
    fn of(b: &Branch) -> Self {
        CompiledBranch {
            lo: Lin::of(b.lo.unwrap_or_default()),
            hi: Lin::of(b.hi.unwrap_or_default()),
            out: Lin::of(b.out),
            write_lo: u8::from(b.lo.is_some()),
            write_hi: u8::from(b.hi.is_some()),
        }
    }
}

/// Bit `k` of the mask is set when the relation holds for sign class `k` (<0, ==0, >0).
fn relation_mask(op: CmpOp) -> u8 {
    match op {
        CmpOp::Lt => 0b001,
        CmpOp::Eq => 0b010,
        CmpOp::Gt => 0b100,
        CmpOp::Le => 0b011,
        CmpOp::Ne => 0b101,
        CmpOp::Ge => 0b110,
    }
}

impl RegisterAction {
    /// The executable form; the action must have passed [`RegisterAction::check`], so it has
    /// at most [`MAX_COMPARISONS`] comparisons.
    pub fn compile(&self) -> CompiledAction {
        assert!(self.comparisons.len() <= MAX_COMPARISONS, "more comparisons than any stateful ALU has");
        let mut comparisons = [(Lin::default(), 0); MAX_COMPARISONS];
        for (slot, c) in comparisons.iter_mut().zip(&self.comparisons) {
            *slot = (Lin::of(c.expr), relation_mask(c.op));
        }
        // No comparison at all: the `then` branch always runs, whatever the combination
        // (an empty "all" holds; an empty "any" would not).
        let any = self.combine == Combine::Any && !self.comparisons.is_empty();
        CompiledAction {
            count: self.comparisons.len() as u8,
            any,
            comparisons,
            branches: [CompiledBranch::of(&self.then), CompiledBranch::of(&self.otherwise)],
        }
    }
}

impl CompiledAction {
    /// Same contract as [`RegisterAction::apply`]. Evaluates only the comparisons that exist
    /// and only the taken branch: data-dependent work is what costs here.
    #[inline(always)]
    pub fn apply(&self, lo: &mut i64, hi: &mut i64, width_bits: u32, in1: i64, in2: i64) -> i64 {
        let x = [*lo, *hi, in1, in2];
        let holds = |(lin, mask): &(Lin, u8)| {
            let v = lin.eval(&x);
            let class = (v >= 0) as u32 + (v > 0) as u32;
            (mask >> class) & 1 == 1
        };
        let used = &self.comparisons[..usize::from(self.count)];
        let cond = if self.any { used.iter().any(holds) } else { used.iter().all(holds) };
        let br = &self.branches[usize::from(!cond)];
        if br.write_lo != 0 {
            *lo = wrap(br.lo.eval(&x), width_bits);
        }
        if br.write_hi != 0 {
            *hi = wrap(br.hi.eval(&x), width_bits);
        }
        wrap(br.out.eval(&x), width_bits)
    }
}

/// Wraps `value` to a signed two's-complement integer of `width_bits` (as the hardware does).
#[inline]
pub fn wrap(value: i64, width_bits: u32) -> i64 {
    let shift = 64 - width_bits;
    (value << shift) >> shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiled_action_fits_in_216_bytes() {
        assert_eq!(std::mem::size_of::<CompiledAction>(), 216);
    }

    #[test]
    fn wrap_sign_extends_at_the_width() {
        assert_eq!(wrap(i64::from(i32::MAX) + 1, 32), i64::from(i32::MIN));
        assert_eq!(wrap(-1, 8), -1);
        assert_eq!(wrap(255, 8), -1);
        assert_eq!(wrap(5, 64), 5);
    }

    #[test]
    fn conditional_action_picks_the_branch() {
        // if lo + in1 >= 0 { lo += in1; out = in1 } else { out = 0 }
        let sum = Expr::LO.plus(Expr::IN1);
        let act = RegisterAction::when(
            "add_if_non_negative",
            vec![Comparison::new(sum, CmpOp::Ge)],
            Combine::All,
            Branch::set(sum, Expr::IN1),
            Branch::keep(Expr::constant(0)),
        );
        let (mut lo, mut hi) = (10, 0);
        assert_eq!(act.apply(&mut lo, &mut hi, 32, -4, 0), -4);
        assert_eq!(lo, 6);
        assert_eq!(act.apply(&mut lo, &mut hi, 32, -7, 0), 0);
        assert_eq!(lo, 6);
    }

    proptest::proptest! {
        #[test]
        fn compiled_actions_agree_with_the_declared_semantics(
            coeffs in proptest::collection::vec(-1i8..=1, 28),
            consts in proptest::collection::vec(-5i64..=5, 7),
            ops in proptest::collection::vec(0usize..6, 4),
            n in 0usize..=4,
            any in proptest::bool::ANY,
            writes in proptest::collection::vec(proptest::bool::ANY, 4),
            cell in (-20i64..20, -20i64..20),
            inputs in (-20i64..20, -20i64..20),
        ) {
            let e = |i: usize| Expr { lo: coeffs[4 * i], hi: coeffs[4 * i + 1], in1: coeffs[4 * i + 2], in2: coeffs[4 * i + 3], constant: consts[i] };
            let all_ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
            let comparisons = (0..n).map(|i| Comparison::new(e(i), all_ops[ops[i]])).collect();
            let branch = |w: &[bool], k: usize| Branch {
                lo: w[0].then(|| e(4 + k)),
                hi: w[1].then(|| e(5 - k)),
                out: e(6 - k),
            };
            let combine = if any { Combine::Any } else { Combine::All };
            let act = RegisterAction::when("p", comparisons, combine, branch(&writes[..2], 0), branch(&writes[2..], 1));
            let compiled = act.compile();
            let (mut lo1, mut hi1) = cell;
            let (mut lo2, mut hi2) = cell;
            let out1 = act.apply(&mut lo1, &mut hi1, 32, inputs.0, inputs.1);
            let out2 = compiled.apply(&mut lo2, &mut hi2, 32, inputs.0, inputs.1);
            proptest::prop_assert_eq!((out1, lo1, hi1), (out2, lo2, hi2));
        }
    }

    #[test]
    fn check_refuses_what_a_stateful_alu_cannot_do() {
        let c = Comparison::new(Expr::LO, CmpOp::Eq);
        let three =
            RegisterAction::when("x", vec![c, c, c], Combine::All, Branch::keep(Expr::LO), Branch::keep(Expr::LO));
        assert!(three.check(2, false).unwrap().contains("at most 2"));
        assert!(three.check(4, false).is_none());
        let double = RegisterAction::always("x", Branch::set(Expr::LO.plus(Expr::LO), Expr::LO));
        assert!(double.check(2, false).unwrap().contains("multiplication"));
        let pair = RegisterAction::always("x", Branch { lo: None, hi: Some(Expr::IN1), out: Expr::HI });
        assert!(pair.check(2, false).unwrap().contains("high half"));
        assert!(pair.check(2, true).is_none());
    }
}
