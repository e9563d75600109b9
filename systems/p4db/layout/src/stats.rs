//! How well a layout serves a sample of transactions.

use crate::plan::plan_passes;
use crate::target::{Layout, LayoutTarget};
use pisadb_core::Txn;
use serde::Serialize;
use std::collections::BTreeMap;

/// The figures of a layout on a sample (`pisadb layout` prints them).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayoutStats {
    /// Share of the sample's switch transactions that run in one pass.
    pub single_pass_ratio: f64,
    /// Mean passes per switch transaction.
    pub mean_passes: f64,
    /// Stages holding at least one placed tuple.
    pub stages_used: usize,
    /// SRAM the placed tuples occupy, in bytes, counting whole SRAM blocks per array.
    pub sram_bytes: u64,
    /// Transactions of the sample that run on the switch (all their tuples placed).
    pub switch_txns: usize,
    /// Transactions of the sample that touch a tuple left on the nodes.
    pub off_switch_txns: usize,
}

/// Evaluates `layout` on `sample`.
pub fn evaluate(layout: &Layout, sample: &[Txn], target: &LayoutTarget) -> LayoutStats {
    let (mut single, mut passes, mut on, mut off) = (0usize, 0usize, 0usize, 0usize);
    for txn in sample {
        match plan_passes(txn, layout) {
            Ok(plan) => {
                on += 1;
                passes += plan.passes.len();
                single += usize::from(plan.is_single_pass());
            }
            Err(_) => off += 1,
        }
    }
    let mut per_array: BTreeMap<u8, u64> = BTreeMap::new();
    for (_, p) in layout.iter() {
        *per_array.entry(p.register).or_default() += 1;
    }
    let mut stages: Vec<u8> = layout.iter().map(|(_, p)| p.stage).collect();
    stages.sort_unstable();
    stages.dedup();
    let block = target.sram_block_bits.max(1);
    let sram_bits: u64 = per_array
        .iter()
        .map(|(&register, &tuples)| {
            let width = target.array(register).map_or(32, |a| u64::from(a.width_bits));
            (tuples * width).div_ceil(block) * block
        })
        .sum();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    LayoutStats {
        single_pass_ratio: ratio(single, on),
        mean_passes: ratio(passes, on),
        stages_used: stages.len(),
        sram_bytes: sram_bits / 8,
        switch_txns: on,
        off_switch_txns: off,
    }
}
