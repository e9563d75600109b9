//! `pisadb layout`: how well P4DB's declustered data layout (paper §4) serves a workload.
//!
//! Draws a sample of hot transactions from the workload, lays the hot tuples out on the
//! switch's data arrays three times (declustered from the sample's access graph, uniformly at
//! random — `bench --layout shuffled` —, and the prototype's `idx % N` — `bench --layout
//! random`), and evaluates each on a *second*, held-out sample drawn from the same workload:
//! evaluating on the sample the layout was fitted to would flatter it.

use clap::{Args as ClapArgs, ValueEnum};
use pisadb_core::Txn;
use pisadb_p4db::programs::p4db::P4dbConfig;
use pisadb_p4db_layout::{declustered, evaluate, modulo, random, LayoutStats};
use pisadb_switch::SwitchProfile;
use pisadb_workload::{SmallBank, SmallBankConfig, Workload, Ycsb, YcsbConfig};
use serde::Serialize;

/// Which workload's hot transactions to lay out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WorkloadName {
    /// YCSB: 8 reads/writes per transaction over a hot set per node.
    Ycsb,
    /// SmallBank: six banking transactions with read-dependent and constrained writes.
    Smallbank,
}

/// Flags of `pisadb layout`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Workload whose hot transactions are laid out.
    #[arg(long, value_enum, default_value = "smallbank")]
    workload: WorkloadName,
    /// Database nodes (each contributes its own hot set).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    nodes: u16,
    /// Hot tuples per node: accounts for SmallBank (default 15; the paper uses 5-15), keys for
    /// YCSB (default 50, as in the paper).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    hot_size: Option<u64>,
    /// Seed for the samples and the random layout; the same seed gives the same output.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hot transactions in each sample (the layout's and the held-out evaluation's).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    sample: u64,
    /// Switch profile: tofino1 or tofino2.
    #[arg(long, default_value = "tofino1")]
    profile: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    workload: WorkloadName,
    nodes: u16,
    hot_size: u64,
    seed: u64,
    profile: String,
    hot_tuples: usize,
    sample_txns: u64,
    data_arrays: usize,
    declustered: LayoutStats,
    /// Uniformly random arrays (`bench --layout shuffled`).
    random: LayoutStats,
    /// The prototype's `idx % N` (`bench --layout random`), N = 20 for YCSB, 10 for SmallBank.
    idx_mod_n: LayoutStats,
}

/// Runs `pisadb layout`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let profile = SwitchProfile::by_name(&args.profile)?;
    let workload = build_workload(args)?;
    let target = P4dbConfig::for_profile(&profile).layout_target(&profile);
    let hot = workload.hot_tuples();
    let n = args.sample as usize;
    let fit: Vec<Txn> = workload.hot_sample(n, args.seed);
    let held_out: Vec<Txn> = workload.hot_sample(n, args.seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let declustered_layout = declustered(&hot, &fit, &target, args.seed);
    let random_layout = random(&hot, &target, args.seed);
    let prototype_arrays = match args.workload {
        WorkloadName::Ycsb => 20,
        WorkloadName::Smallbank => 10,
    };
    let modulo_layout = modulo(&hot, &target, prototype_arrays);
    let report = Report {
        workload: args.workload,
        nodes: args.nodes,
        hot_size: hot_size(args),
        seed: args.seed,
        profile: profile.name.clone(),
        hot_tuples: hot.len(),
        sample_txns: args.sample,
        data_arrays: target.arrays.len(),
        declustered: evaluate(&declustered_layout, &held_out, &target),
        random: evaluate(&random_layout, &held_out, &target),
        idx_mod_n: evaluate(&modulo_layout, &held_out, &target),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print_table(&report, declustered_layout.overflow.len());
    }
    Ok(())
}

/// `--hot-size`, or the workload's default (SmallBank 15 accounts, YCSB 50 keys per node).
fn hot_size(args: &Args) -> u64 {
    args.hot_size.unwrap_or(match args.workload {
        WorkloadName::Ycsb => YcsbConfig::default().hot_per_node,
        WorkloadName::Smallbank => SmallBankConfig::default().hot_per_node,
    })
}

fn build_workload(args: &Args) -> Result<Box<dyn Workload>, String> {
    let seed = args.seed;
    Ok(match args.workload {
        WorkloadName::Ycsb => {
            let config =
                YcsbConfig { nodes: args.nodes, hot_per_node: hot_size(args), hot_prob: 1.0, ..YcsbConfig::default() };
            Box::new(Ycsb::new(config, seed).map_err(|e| e.to_string())?)
        }
        WorkloadName::Smallbank => {
            let config = SmallBankConfig {
                nodes: args.nodes,
                hot_per_node: hot_size(args),
                hot_prob: 1.0,
                ..SmallBankConfig::default()
            };
            Box::new(SmallBank::new(config, seed).map_err(|e| e.to_string())?)
        }
    })
}

fn print_table(r: &Report, overflow: usize) {
    println!(
        "P4DB data layout: {:?} on {} nodes, {} hot tuples per node ({} in all), {} with {} data arrays",
        r.workload, r.nodes, r.hot_size, r.hot_tuples, r.profile, r.data_arrays
    );
    println!("fitted on {} hot transactions, evaluated on {} others (seed {})", r.sample_txns, r.sample_txns, r.seed);
    if overflow > 0 {
        println!("note: {overflow} hot tuples did not fit on the switch and stay on the nodes");
    }
    println!();
    println!("{:<12} {:>12} {:>12} {:>12} {:>12}", "layout", "single-pass", "mean passes", "stages used", "SRAM used");
    for (name, s) in [("declustered", &r.declustered), ("shuffled", &r.random), ("idx % N", &r.idx_mod_n)] {
        println!(
            "{:<12} {:>11.2}% {:>12.3} {:>12} {:>9} KiB",
            name,
            s.single_pass_ratio * 100.0,
            s.mean_passes,
            s.stages_used,
            s.sram_bytes / 1024
        );
    }
}
