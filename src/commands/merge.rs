//! `pisadb merge DIR...`: the shards of a sharded `sweep` or `reproduce` (`--shard K/N`, each
//! written as `shard-SYSTEM-K-of-N.json`) assembled into the CSVs, charts and report the
//! unsharded command writes ([`pisadb_harness::campaign::merge`]).

use crate::systems::registry;
use clap::Args as ClapArgs;
use std::path::PathBuf;

/// Flags of `pisadb merge`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Shard files, or directories holding them (every `shard-*.json` inside is read).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Directory for the CSV, SVG and report files (under `<out>/<preset>/` for a preset other
    /// than pisadb, as the unsharded command).
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

/// Runs `pisadb merge`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let summary = pisadb_harness::campaign::merge(&registry(), &args.paths, &args.out, 1)?;
    println!("{summary}");
    Ok(())
}
