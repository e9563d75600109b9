//! What `pisadb layout` measures: how well P4DB's declustered data layout (paper §4) serves a
//! workload.
//!
//! Draws a sample of hot transactions from the workload, lays the hot tuples out on the
//! switch's data arrays three times (declustered from the sample's access graph, uniformly at
//! random — `bench --layout shuffled` —, and the prototype's `idx % N` — `bench --layout
//! random`), and evaluates each on a *second*, held-out sample drawn from the same workload:
//! evaluating on the sample the layout was fitted to would flatter it. The command line parses
//! a [`LayoutRequest`] and prints the [`LayoutReport`] (as JSON or [`LayoutReport::table`]).

use crate::programs::p4db::P4dbConfig;
use pisadb_core::Txn;
use pisadb_p4db_layout::{declustered, evaluate, modulo, random, LayoutStats};
use pisadb_switch::SwitchProfile;
use pisadb_workload::{SmallBank, SmallBankConfig, Workload, Ycsb, YcsbConfig};
use serde::Serialize;
use std::fmt::Write as _;

/// The workloads whose hot transactions can be laid out, as `--workload` spells them.
pub const WORKLOADS: [&str; 2] = ["ycsb", "smallbank"];

/// Which workload's hot transactions to lay out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutWorkload {
    /// YCSB: 8 reads/writes per transaction over a hot set per node.
    Ycsb,
    /// SmallBank: six banking transactions with read-dependent and constrained writes.
    Smallbank,
}

impl LayoutWorkload {
    /// The workload `--workload NAME` names, or an error naming the flag and [`WORKLOADS`].
    pub fn parse(name: &str) -> Result<LayoutWorkload, String> {
        match name {
            "ycsb" => Ok(LayoutWorkload::Ycsb),
            "smallbank" => Ok(LayoutWorkload::Smallbank),
            other => Err(format!("--workload: no workload `{other}`; accepted: {}", WORKLOADS.join(", "))),
        }
    }

    /// Hot tuples per node by default: SmallBank 15 accounts, YCSB 50 keys.
    fn default_hot_size(self) -> u64 {
        match self {
            LayoutWorkload::Ycsb => YcsbConfig::default().hot_per_node,
            LayoutWorkload::Smallbank => SmallBankConfig::default().hot_per_node,
        }
    }

    /// The prototype's data arrays (its `idx % N`): 20 for YCSB, 10 for SmallBank.
    fn prototype_arrays(self) -> usize {
        match self {
            LayoutWorkload::Ycsb => 20,
            LayoutWorkload::Smallbank => 10,
        }
    }
}

/// What to lay out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutRequest {
    /// The workload.
    pub workload: LayoutWorkload,
    /// Database nodes (each contributes its own hot set).
    pub nodes: u16,
    /// Hot tuples per node (default: the workload's).
    pub hot_size: Option<u64>,
    /// Seed for the samples and the random layout.
    pub seed: u64,
    /// Hot transactions in each sample (the layout's and the held-out evaluation's).
    pub sample: u64,
    /// The switch profile's name (`tofino1`, `tofino2`).
    pub profile: String,
}

/// The three layouts, evaluated on the held-out sample (`pisadb layout --json` prints this).
#[derive(Clone, Debug, Serialize)]
pub struct LayoutReport {
    /// The workload.
    pub workload: LayoutWorkload,
    /// Database nodes.
    pub nodes: u16,
    /// Hot tuples per node.
    pub hot_size: u64,
    /// The seed.
    pub seed: u64,
    /// The switch profile.
    pub profile: String,
    /// Hot tuples in all.
    pub hot_tuples: usize,
    /// Hot transactions per sample.
    pub sample_txns: u64,
    /// The switch's data arrays.
    pub data_arrays: usize,
    /// P4DB's declustered layout.
    pub declustered: LayoutStats,
    /// Uniformly random arrays (`bench --layout shuffled`).
    pub random: LayoutStats,
    /// The prototype's `idx % N` (`bench --layout random`), N = 20 for YCSB, 10 for SmallBank.
    pub idx_mod_n: LayoutStats,
    /// Hot tuples the declustered layout could not fit on the switch.
    #[serde(skip)]
    pub overflow: usize,
}

/// Lays out and evaluates `request`'s workload.
pub fn report(request: &LayoutRequest) -> Result<LayoutReport, String> {
    let profile = SwitchProfile::by_name(&request.profile)?;
    let hot_size = request.hot_size.unwrap_or(request.workload.default_hot_size());
    let (nodes, seed) = (request.nodes, request.seed);
    let workload: Box<dyn Workload> = match request.workload {
        LayoutWorkload::Ycsb => {
            let config = YcsbConfig { nodes, hot_per_node: hot_size, hot_prob: 1.0, ..YcsbConfig::default() };
            Box::new(Ycsb::new(config, seed).map_err(|e| e.to_string())?)
        }
        LayoutWorkload::Smallbank => {
            let config = SmallBankConfig { nodes, hot_per_node: hot_size, hot_prob: 1.0, ..SmallBankConfig::default() };
            Box::new(SmallBank::new(config, seed).map_err(|e| e.to_string())?)
        }
    };
    let target = P4dbConfig::for_profile(&profile).layout_target(&profile);
    let hot = workload.hot_tuples();
    let n = request.sample as usize;
    let fit: Vec<Txn> = workload.hot_sample(n, seed);
    let held_out: Vec<Txn> = workload.hot_sample(n, seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let declustered_layout = declustered(&hot, &fit, &target, seed);
    let random_layout = random(&hot, &target, seed);
    let modulo_layout = modulo(&hot, &target, request.workload.prototype_arrays());
    Ok(LayoutReport {
        workload: request.workload,
        nodes,
        hot_size,
        seed,
        profile: profile.name.clone(),
        hot_tuples: hot.len(),
        sample_txns: request.sample,
        data_arrays: target.arrays.len(),
        declustered: evaluate(&declustered_layout, &held_out, &target),
        random: evaluate(&random_layout, &held_out, &target),
        idx_mod_n: evaluate(&modulo_layout, &held_out, &target),
        overflow: declustered_layout.overflow.len(),
    })
}

impl LayoutReport {
    /// The report as the terminal shows it.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "P4DB data layout: {:?} on {} nodes, {} hot tuples per node ({} in all), {} with {} data arrays",
            self.workload, self.nodes, self.hot_size, self.hot_tuples, self.profile, self.data_arrays
        );
        let _ = writeln!(
            s,
            "fitted on {} hot transactions, evaluated on {} others (seed {})",
            self.sample_txns, self.sample_txns, self.seed
        );
        if self.overflow > 0 {
            let _ = writeln!(s, "note: {} hot tuples did not fit on the switch and stay on the nodes", self.overflow);
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<12} {:>12} {:>12} {:>12} {:>12}",
            "layout", "single-pass", "mean passes", "stages used", "SRAM used"
        );
        for (name, st) in [("declustered", &self.declustered), ("shuffled", &self.random), ("idx % N", &self.idx_mod_n)]
        {
            let _ = writeln!(
                s,
                "{:<12} {:>11.2}% {:>12.3} {:>12} {:>9} KiB",
                name,
                st.single_pass_ratio * 100.0,
                st.mean_passes,
                st.stages_used,
                st.sram_bytes / 1024
            );
        }
        s
    }
}
