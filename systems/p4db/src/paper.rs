//! What the P4DB prototype measured: the runs behind the paper's figures, as published.
//!
//! The paper's text states its headline ratios loosely ("up to 5x", "more than 2x"), but the
//! prototype's repository (DataManagementLab/p4db, `figures/data/*.csv`) publishes every run
//! behind every figure: one row per node and run. `scripts/prototype_results.py` condenses
//! them, as the prototype's own plotting code does (`figures/utils.R`: per run, the nodes'
//! `total_commits / avg_duration` summed; the figure plots the best of the runs), into
//! `systems/p4db/paper/prototype_results.csv`, one row per configuration with the best, the
//! mean and the standard deviation over its runs. That file is compiled in here, so a report
//! can put the prototype's own number beside each of ours — a comparison of figures measured
//! on the same configuration, not of a sentence.
//!
//! The prototype identifies a configuration by its command-line parameters and its compile-time
//! switches; [`PrototypePoint`] keeps the ones the figures vary. What they mean in PisaDB's
//! terms: `switch_no_conflict` is the ideal layout (every hot transaction one pass, no locks),
//! otherwise the layout is `idx % N`; `ycsb_opti_test` is the prototype's parity rule for the
//! two pipeline-lock halves; a remote probability is per key (per order line for TPC-C).

use crate::node::{Cc, Mode};
use serde::Deserialize;
use std::sync::OnceLock;

/// The condensed table (see the module doc for how it was made).
const TABLE: &str = include_str!("../paper/prototype_results.csv");

/// One configuration the prototype ran, and what it measured.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PrototypePoint {
    /// The prototype's experiment (its `figures/data/<experiment>.csv`), e.g. `exp_c`.
    pub experiment: String,
    /// `ycsb`, `smallbank` or `tpcc`.
    pub workload: String,
    /// Database nodes.
    pub num_nodes: u16,
    /// Worker threads per node.
    pub num_txn_workers: u16,
    /// `no_wait` or `wait_die`.
    pub cc_scheme: String,
    /// P4DB (`true`) or a baseline.
    pub use_switch: bool,
    /// LM-Switch (with `use_switch` false).
    pub lm_on_switch: bool,
    /// The ideal layout: hot transactions single-pass without locks.
    pub switch_no_conflict: bool,
    /// Lock halves chosen by the parity of the first key (Fig. 15c's "fine-grained locking").
    pub ycsb_opti_test: bool,
    /// YCSB: percent of operations that write (0, 5, 50 for C, B, A).
    pub ycsb_write_prob: u32,
    /// YCSB: percent probability that a key is remote.
    pub ycsb_remote_prob: u32,
    /// YCSB: percent of transactions that are hot.
    pub ycsb_hot_prob: u32,
    /// YCSB: hot keys per node.
    pub ycsb_hot_size: u64,
    /// SmallBank: hot accounts per node.
    pub smallbank_hot_size: u64,
    /// SmallBank: percent probability that an account is remote.
    pub smallbank_remote_prob: u32,
    /// TPC-C: warehouses.
    pub tpcc_num_warehouses: u16,
    /// TPC-C: percent probability that an order line (and a payment) is remote.
    pub new_order_remote_prob: u32,
    /// Whether lock holders recirculated on their own port; known only for the Fig. 15c runs.
    pub fast_recirculation: Option<bool>,
    /// Runs of this configuration.
    pub runs: u32,
    /// The best run's committed transactions per second: what the paper's figures plot.
    pub commits_per_s_max: f64,
    /// The mean over the runs.
    pub commits_per_s_mean: f64,
    /// The standard deviation over the runs.
    pub commits_per_s_sd: f64,
    /// Aborted attempts over all attempts.
    pub abort_rate: f64,
}

impl PrototypePoint {
    /// Whether this run was of `mode` under `cc`.
    pub fn is(&self, mode: Mode, cc: Cc) -> bool {
        let system = match mode {
            Mode::P4db => self.use_switch && !self.lm_on_switch,
            Mode::LmSwitch => !self.use_switch && self.lm_on_switch,
            Mode::NoSwitch => !self.use_switch && !self.lm_on_switch,
        };
        let cc_name = match cc {
            Cc::NoWait => "no_wait",
            Cc::WaitDie => "wait_die",
        };
        system && self.cc_scheme == cc_name
    }
}

/// Every configuration the prototype's published data holds, in the file's order.
pub fn prototype_points() -> &'static [PrototypePoint] {
    static POINTS: OnceLock<Vec<PrototypePoint>> = OnceLock::new();
    POINTS.get_or_init(|| {
        csv::Reader::from_reader(TABLE.as_bytes())
            .deserialize()
            .collect::<Result<Vec<PrototypePoint>, _>>()
            .expect("systems/p4db/paper/prototype_results.csv is well formed (a test checks it)")
    })
}

/// The prototype's point of `experiment` that `matches`, if it ran one (the first if several).
pub fn prototype_point(experiment: &str, matches: impl Fn(&PrototypePoint) -> bool) -> Option<&'static PrototypePoint> {
    prototype_points().iter().find(|p| p.experiment == experiment && matches(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_holds_every_figures_experiment() {
        let points = prototype_points();
        assert!(points.len() > 700, "{} points", points.len());
        for experiment in ["exp_a", "exp_b", "exp_c", "exp_d", "exp_g", "exp_k", "exp_ycsb_skew", "exp_ycsb_optis_fast"]
        {
            assert!(points.iter().any(|p| p.experiment == experiment), "{experiment} missing");
        }
        assert!(points.iter().all(|p| p.runs >= 1 && p.commits_per_s_max >= p.commits_per_s_mean));
    }

    /// Figures read straight off the published data (exp_a, 8 nodes x 20 workers, NO_WAIT,
    /// ideal layout): the best runs behind the paper's YCSB-A bars.
    #[test]
    fn ycsb_a_headline_runs_are_found_by_configuration() {
        let find = |mode| {
            prototype_point("exp_a", |p| p.ycsb_write_prob == 50 && p.is(mode, Cc::NoWait) && p.switch_no_conflict)
                .unwrap()
        };
        assert_eq!(find(Mode::P4db).commits_per_s_max, 6_595_157.0);
        assert_eq!(find(Mode::NoSwitch).commits_per_s_max, 1_915_556.0);
        assert!(prototype_point("exp_a", |p| p.num_nodes == 3).is_none());
    }
}
