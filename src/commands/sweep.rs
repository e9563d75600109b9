//! `pisadb sweep <experiment>`: one experiment of a system, its points run in parallel under
//! several seeds, written to `<out>/<experiment>.csv` and `.svg`, and summarised on stdout.
//!
//! Every system's experiments are its own crate's ([`pisadb_harness::System::experiments`]);
//! this command parses the flags into the harness's [`ExperimentOptions`] and prints what the
//! harness returns ([`pisadb_harness::Registry::sweep`]). The experiment names come from the
//! registry, so `--system` can be left out when only one system has the experiment asked for.
//! A system's flags that its experiments take (P4DB's `--cc`, `--layout`, `--fine-locks`,
//! `--recirculation`: [`pisadb_harness::FlagAlias::experiments`]) are written as `--set
//! KEY=VALUE` overrides, the one vocabulary every system reads.

use super::bench::AliasFlags;
use crate::systems::registry;
use clap::Args as ClapArgs;
use pisadb_harness::ExperimentOptions;
use std::path::PathBuf;

/// Flags of `pisadb sweep`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The experiment to run, one of a system's (`pisadb systems` lists them); a name several
    /// systems share needs `--system`.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(experiment_names()))]
    experiment: String,
    /// The system whose experiments run [default: the one that has the experiment].
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

/// Flags shared by `sweep` and `reproduce`.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct CommonArgs {
    /// Fewer points and shorter simulated windows, for a first look.
    #[arg(long)]
    pub quick: bool,
    /// Directory for the CSV and SVG files.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Simulations run side by side (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Seed of every point's first run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per point, under seeds seed, seed+1, ...: figures are their mean, error bars their
    /// standard deviation [default: 3, or 1 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub seeds: Option<u32>,
    /// Defaults for every point: `pisadb` (PisaDB's model) or `paper` (the paper's testbed as
    /// far as it states it; P4DB's old name `p4db-testbed`), or another preset of the system
    /// (`pisadb systems --presets NAME` lists them with where each value comes from). The
    /// experiment's own knobs stay. Results under another preset than pisadb go to
    /// `<out>/<preset>/`.
    #[arg(long, default_value = pisadb_harness::DEFAULT_PRESET)]
    pub preset: String,
    /// A system's flags its experiments take: each replaces the choice of every point whose
    /// experiment does not set it itself.
    #[command(flatten)]
    pub flags: AliasFlags<true>,
    /// Edit a setting every point starts from, by dotted key (`pisadb systems --settings
    /// NAME`); repeatable, applied after the preset.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Run only the K-th of N deterministic slices of the runs and write them raw to
    /// `<out>/shard-SYSTEM-K-of-N.json`; `pisadb merge DIR...` then writes the CSVs, charts and
    /// report (run the N shards on N machines: see the README).
    #[arg(long, value_name = "K/N", value_parser = pisadb_harness::Shard::parse)]
    pub shard: Option<pisadb_harness::Shard>,
}

impl CommonArgs {
    /// Runs per point: `--seeds`, or 3 (1 with `--quick`).
    pub(crate) fn seeds(&self) -> u32 {
        self.seeds.unwrap_or(if self.quick { 1 } else { 3 })
    }

    /// Threads to use.
    pub(crate) fn threads(&self) -> usize {
        self.threads.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The harness's options these flags mean for system `system`, its flags' `--set`s before
    /// the `--set`s given.
    pub(crate) fn options(&self, system: &str) -> Result<ExperimentOptions, String> {
        let system = registry().get(system).map_err(|e| e.to_string())?;
        Ok(ExperimentOptions {
            quick: self.quick,
            seed: self.seed,
            seeds: self.seeds(),
            threads: self.threads(),
            out: self.out.clone(),
            shard: self.shard,
            preset: self.preset.clone(),
            sets: self.flags.sets(system, &self.sets)?,
        })
    }
}

/// Runs `pisadb sweep`.
pub(crate) fn run_sweep(args: &Args) -> Result<(), String> {
    let system = match &args.system {
        Some(name) => name.clone(),
        None => owner_of(&args.experiment)?,
    };
    let summary =
        registry().sweep(&system, &args.experiment, &args.common.options(&system)?).map_err(|e| e.to_string())?;
    println!("{summary}");
    Ok(())
}

/// The one system with an experiment called `experiment`; a name several systems share must
/// be asked with `--system`.
fn owner_of(experiment: &str) -> Result<String, String> {
    let registry = registry();
    let systems = registry.systems();
    let owners: Vec<&str> =
        systems.iter().filter(|s| s.experiments().iter().any(|e| e.name == experiment)).map(|s| s.name()).collect();
    match owners.as_slice() {
        [only] => Ok(only.to_string()),
        [] => Err(format!("no system has an experiment `{experiment}`")),
        several => Err(format!(
            "`{experiment}` is an experiment of {}: say which with --system {}",
            several.join(" and "),
            several.join("|")
        )),
    }
}

/// Every experiment name `sweep` accepts, for `--help`: each system's, once per name (a name
/// two systems share lists both).
fn experiment_names() -> Vec<clap::builder::PossibleValue> {
    let mut names: Vec<(&'static str, Vec<String>)> = Vec::new();
    for s in registry().systems() {
        for e in s.experiments() {
            let help = format!("{}: {}", s.name(), e.summary);
            match names.iter_mut().find(|(name, _)| *name == e.name) {
                Some((_, helps)) => helps.push(help),
                None => names.push((e.name, vec![help])),
            }
        }
    }
    names.into_iter().map(|(name, helps)| clap::builder::PossibleValue::new(name).help(helps.join("; "))).collect()
}
