//! `pisadb layout`: how well P4DB's declustered data layout (paper §4) serves a workload. The
//! measurement is P4DB's ([`layout_report`]); this command parses the flags and prints.

use crate::systems::layout_report::{self, LayoutRequest, LayoutWorkload};
use clap::Args as ClapArgs;

/// Flags of `pisadb layout`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Workload whose hot transactions are laid out.
    #[arg(long, default_value = "smallbank", value_parser = clap::builder::PossibleValuesParser::new(layout_report::WORKLOADS))]
    workload: String,
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

/// Runs `pisadb layout`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let request = LayoutRequest {
        workload: LayoutWorkload::parse(&args.workload)?,
        nodes: args.nodes,
        hot_size: args.hot_size,
        seed: args.seed,
        sample: args.sample,
        profile: args.profile.clone(),
    };
    let report = layout_report::report(&request)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
