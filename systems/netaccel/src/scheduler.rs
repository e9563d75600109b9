//! The network scheduler: it picks the stage split (J, G) from a cost model of expected
//! overflow before the program is loaded (seed 002 §3.1, §4.1: "the decision on how to
//! distribute the available stages was a cost-based one").
//!
//! ## The model
//!
//! Keys hash uniformly, so the number of outer keys landing on a join slot is Poisson with
//! mean `λ = outer keys / join slots`. With `J` chain positions:
//!
//! - (i) the outer keys that find no room are the excess over `J` per slot:
//!   `E[(N − J)⁺] · slots`, a fraction `E[(N − J)⁺] / λ` of the outer relation;
//! - (ii) an inner tuple's chain is flagged full when its slot got more than `J` keys, whatever
//!   its key: a fraction `P(N > J)` of the inner relation;
//! - (iii) likewise for groups: with `μ = groups / group slots` and `G` positions, a fraction
//!   `E[(M − G)⁺] / μ` of the groups find no room, and (tuples spread evenly over groups) the
//!   same fraction of the joined tuples that stayed in the switch.
//!
//! The scheduler only needs what a catalog holds: the outer relation's rows, the inner
//! relation's rows, and an estimate of the joined rows and groups (the inner rows times the
//! outer relation's share of the parts; every joined row its own group, an upper bound). Its
//! cost is the expected overflow tuples — what the control plane's one core and the CPU port
//! must absorb — and it picks the split with the least among those that fit the pipe
//! (`J + 2G + 1` stages).

use crate::layout::{Layout, GROUP_POSITIONS_MAX, JOIN_POSITIONS_MAX};

/// What the scheduler knows about a query before it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimates {
    /// Outer (build) tuples: distinct join keys.
    pub outer_keys: f64,
    /// Inner (probe) tuples.
    pub inner_tuples: f64,
    /// Inner tuples expected to find a join partner.
    pub joined_tuples: f64,
    /// Distinct groups expected among the joined tuples.
    pub groups: f64,
}

impl Estimates {
    /// Q20's pattern 1 from catalog figures: `part_FP` rows, `lineitem_FP` rows, `part` rows.
    pub fn q20_pattern1(part_fp_rows: usize, lineitem_fp_rows: usize, part_rows: f64) -> Estimates {
        let joined = lineitem_fp_rows as f64 * part_fp_rows as f64 / part_rows.max(1.0);
        Estimates {
            outer_keys: part_fp_rows as f64,
            inner_tuples: lineitem_fp_rows as f64,
            joined_tuples: joined,
            groups: joined,
        }
    }
}

/// `E[(N − k)⁺]` and `P(N > k)` for `N` Poisson with mean `mean`.
fn poisson_excess(mean: f64, k: u32) -> (f64, f64) {
    let mut p = (-mean).exp();
    let (mut excess, mut at_most_k) = (0.0, 0.0);
    for n in 0..(k + 200) {
        if n <= k {
            at_most_k += p;
        } else {
            excess += f64::from(n - k) * p;
        }
        p *= mean / f64::from(n + 1);
    }
    (excess, (1.0 - at_most_k).max(0.0))
}

/// Expected overflow tuples of types (i), (ii), (iii) for `layout` under `est`.
pub fn expected_overflow(layout: &Layout, est: &Estimates) -> [f64; 3] {
    let lambda = est.outer_keys / f64::from(layout.join_slots);
    let (join_excess, chain_full) = poisson_excess(lambda, u32::from(layout.join_positions));
    let outer = join_excess * f64::from(layout.join_slots);
    let chain = chain_full * est.inner_tuples;
    let mu = est.groups / f64::from(layout.group_slots);
    let (group_excess, _) = poisson_excess(mu, u32::from(layout.group_positions));
    let group_fraction = if mu > 0.0 { group_excess / mu } else { 0.0 };
    let joined_in_switch = est.joined_tuples * (1.0 - chain_full);
    [outer, chain, group_fraction * joined_in_switch]
}

/// The split with the least expected overflow among those whose `J + 2G + 1` stages fit in
/// `stages`, for tables sized at scale factor `sf`.
pub fn choose_split(est: &Estimates, sf: f64, segments: u16, stages: u8) -> Layout {
    let mut best: Option<(f64, Layout)> = None;
    for j in 1..=JOIN_POSITIONS_MAX {
        for g in 1..=GROUP_POSITIONS_MAX {
            let layout = Layout::for_scale_factor(sf, j, g, segments);
            if layout.stages() > stages {
                continue;
            }
            let cost: f64 = expected_overflow(&layout, est).iter().sum();
            if best.as_ref().is_none_or(|(c, _)| cost < *c - 1e-9) {
                best = Some((cost, layout));
            }
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| Layout::for_scale_factor(sf, 1, 1, segments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_gives_the_papers_join_overflow_at_its_load_factor() {
        // SF 100: 217k part_FP keys in 2^17 slots (λ ≈ 1.66); the paper's Table 2, (i) and (ii).
        let est = Estimates { outer_keys: 217_000.0, inner_tuples: 1.0, joined_tuples: 0.0, groups: 0.0 };
        let paper = [(1, 51.1, 49.0), (2, 21.3, 22.7), (3, 7.36, 8.45), (4, 2.16, 2.64), (5, 0.52, 0.67)];
        for (j, outer_pct, chain_pct) in paper {
            let layout = Layout::for_scale_factor(100.0, j, 1, 3);
            let [i, ii, _] = expected_overflow(&layout, &est);
            let (i, ii) = (100.0 * i / est.outer_keys, 100.0 * ii);
            assert!((i - outer_pct).abs() < 0.15 * outer_pct + 0.2, "J={j}: (i) {i:.2} vs the paper's {outer_pct}");
            assert!((ii - chain_pct).abs() < 0.15 * chain_pct + 0.2, "J={j}: (ii) {ii:.2} vs the paper's {chain_pct}");
        }
    }

    #[test]
    fn the_scheduler_prefers_join_positions_for_a_selective_join() {
        let est = Estimates::q20_pattern1(2127, 909_455, 200_000.0);
        let layout = choose_split(&est, 1.0, 3, 12);
        assert!(layout.stages() <= 12);
        assert!(layout.join_positions >= 4, "a selective join wants its state in the switch: {layout:?}");
        let two_by_two = Layout::for_scale_factor(1.0, 2, 2, 3);
        let cost = |l: &Layout| expected_overflow(l, &est).iter().sum::<f64>();
        assert!(cost(&layout) <= cost(&two_by_two));
    }
}
