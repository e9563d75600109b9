//! `pisadb reproduce NAME [--quick]`: every experiment of a paper's evaluation, its CSVs and
//! charts, and a report `<out>/<name>.md` that tables every claim of the paper against ours.
//!
//! What a reproduction runs and reports is its system's own (P4DB's three setups included):
//! this command parses the flags and prints what [`pisadb_harness::Registry::reproduce`]
//! returns. The papers it accepts are the registry's systems that have experiments.

use super::sweep::CommonArgs;
use crate::systems::registry;
use clap::Args as ClapArgs;

/// Every paper `reproduce` accepts, for `--help`: every registered system with experiments of
/// its own, so a new system needs no line here.
fn papers() -> Vec<clap::builder::PossibleValue> {
    let registry = registry();
    let systems = registry.systems().iter().filter(|s| !s.experiments().is_empty());
    systems
        .map(|s| {
            let names: Vec<&str> = s.experiments().iter().map(|e| e.name).collect();
            clap::builder::PossibleValue::new(s.name()).help(format!(
                "{}: {}, reported in <out>/{}.md",
                s.paper(),
                names.join(", "),
                s.name()
            ))
        })
        .collect()
}

/// Flags of `pisadb reproduce`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The paper: any system's with experiments of its own.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(papers()))]
    paper: String,
    #[command(flatten)]
    common: CommonArgs,
}

/// Runs `pisadb reproduce`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    eprintln!(
        "reproducing {}{}; the report goes to {}",
        args.paper,
        if args.common.quick { " (quick)" } else { "" },
        args.common.out.join(format!("{}.md", args.paper)).display()
    );
    let summary = registry().reproduce(&args.paper, &args.common.options(&args.paper)?).map_err(|e| e.to_string())?;
    println!("{summary}");
    Ok(())
}
