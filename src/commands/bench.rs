//! `pisadb bench` (one simulated point) and `pisadb compare` (every variant of a system side by
//! side), for any system of the registry.
//!
//! The command parses and prints; the harness runs and times the point
//! ([`pisadb_harness::bench`]) and the system says what its settings are, what to warn of and
//! how its table looks. A system's flag aliases (P4DB's `--workload`, `--nodes`, `--layout`, …)
//! are offered for every system and turned into `--set`s ([`AliasFlags`]); a system without the
//! flag refuses it, naming those that take it.

use crate::systems::registry;
use clap::Args as ClapArgs;
use pisadb_harness::bench::{flag_sets, run_point, BenchPoint};
use pisadb_harness::{preset, FlagAlias, System};
use serde::Serialize;

/// Every registered system's flag aliases, each flag once (the first system's help); only
/// those `sweep` and `reproduce` take when `experiments`.
fn aliases(experiments: bool) -> Vec<FlagAlias> {
    let mut flags: Vec<FlagAlias> = Vec::new();
    for alias in registry().systems().iter().flat_map(|s| s.flag_aliases()) {
        if (alias.experiments || !experiments) && !flags.iter().any(|f| f.flag == alias.flag) {
            flags.push(*alias);
        }
    }
    flags
}

/// The flags that are other spellings of a system's `--set` keys, as given (`EXPERIMENTS`:
/// only those `sweep` and `reproduce` take).
#[derive(Clone, Debug, Default)]
pub(crate) struct AliasFlags<const EXPERIMENTS: bool> {
    /// (flag, value) of each flag given.
    pub given: Vec<(&'static str, String)>,
}

impl<const EXPERIMENTS: bool> AliasFlags<EXPERIMENTS> {
    /// The `--set`s the flags stand for on `system`, before `sets`; a flag the system does not
    /// take is refused, naming the systems that do.
    pub(crate) fn sets(&self, system: &dyn System, sets: &[String]) -> Result<Vec<String>, String> {
        let mut all = flag_sets(registry().systems(), system, &self.given).map_err(|e| e.to_string())?;
        all.extend(sets.iter().cloned());
        Ok(all)
    }
}

impl<const EXPERIMENTS: bool> clap::FromArgMatches for AliasFlags<EXPERIMENTS> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given =
            aliases(EXPERIMENTS).into_iter().filter_map(|a| Some((a.flag, matches.get_one::<String>(a.flag)?.clone())));
        Ok(AliasFlags { given: given.collect() })
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<const EXPERIMENTS: bool> clap::Args for AliasFlags<EXPERIMENTS> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.args(aliases(EXPERIMENTS).into_iter().map(|a| {
            let arg = clap::Arg::new(a.flag)
                .long(a.flag)
                .help(a.help)
                .help_heading("A system's flags (each a --set KEY=VALUE)");
            match a.values {
                [] => arg.value_name("N"),
                values => arg.value_name("NAME").value_parser(clap::builder::PossibleValuesParser::new(values)),
            }
        }))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The registry's first system, the one a command runs without `--system`.
fn first_system() -> String {
    registry().systems().first().map_or_else(String::new, |s| s.name().to_string())
}

/// Which system runs, and how its settings differ from the defaults: shared by every command
/// that simulates.
#[derive(ClapArgs, Debug, Clone, Serialize)]
pub(crate) struct SystemArgs {
    /// The system (`pisadb systems` lists them).
    #[arg(long, default_value_t = first_system())]
    pub system: String,
    /// Edit one of the system's settings, by dotted key (`--set workers=8`, `--set
    /// link.gbps=25`; `pisadb systems --settings NAME` prints every key); repeatable, applied
    /// after the preset and the system's flags.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// The flags `bench` and `compare` share.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct PointArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Defaults for every setting: `pisadb` (PisaDB's model) or `paper` (the paper's testbed as
    /// far as it states it; for P4DB its prototype's workloads, node engine, latencies and costs,
    /// old name `p4db-testbed`; see CALIBRATION.md), or another preset of the system (`pisadb
    /// systems --presets NAME` lists them with where each value comes from). Flags and --set
    /// given explicitly override the preset's values.
    #[arg(long, default_value = preset::DEFAULT_PRESET)]
    preset: String,
    #[command(flatten)]
    flags: AliasFlags<false>,
    /// Print JSON (one object for bench, an array for compare) instead of a table.
    #[arg(long)]
    json: bool,
}

/// A system with the settings its flags ask for.
struct Resolved {
    system: &'static dyn System,
    /// The preset's name (not an alias).
    preset: String,
    settings: serde_json::Value,
}

impl PointArgs {
    /// The system, its preset and its settings in force; what the preset chose goes to stderr.
    fn resolve(&self) -> Result<Resolved, String> {
        let system = registry().get(&self.system.system).map_err(|e| e.to_string())?;
        let sets = self.flags.sets(system, &self.system.sets)?;
        let chosen = preset::find_preset(system, &self.preset).map_err(|e| e.to_string())?;
        eprint!("{}", preset::describe(system, &chosen));
        let settings = system.settings(&self.preset, &sets).map_err(|e| e.to_string())?;
        Ok(Resolved { system, preset: chosen.name.to_string(), settings })
    }

    /// Runs `variant` of the resolved system.
    fn run(&self, r: &Resolved, variant: &str) -> Result<BenchPoint, String> {
        run_point(r.system, variant, &r.preset, r.settings.clone(), &self.system.sets).map_err(|e| e.to_string())
    }

    /// Prints `points` as JSON or as the system's table, with what ran above it and its
    /// warnings (on stderr beside JSON).
    fn print<T: Serialize>(&self, r: &Resolved, points: &[BenchPoint], json: &T) -> Result<(), String> {
        let warnings = r.system.warnings(&r.settings);
        if self.json {
            warnings.iter().for_each(|w| eprintln!("{w}"));
            println!("{}", serde_json::to_string_pretty(json).map_err(|e| e.to_string())?);
            return Ok(());
        }
        for line in r.system.describe_point(&r.preset, &self.system.sets, &r.settings).iter().chain(&warnings) {
            println!("{line}");
        }
        println!();
        print!("{}", r.system.bench_table(points));
        Ok(())
    }
}

/// Flags of `pisadb bench`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The variant of the system to run (`pisadb systems` lists them); default: the system
    /// itself. `--mode` is the same flag under its old name.
    #[arg(long, alias = "mode")]
    variant: Option<String>,
    #[command(flatten)]
    point: PointArgs,
}

/// Runs `pisadb bench`.
pub(crate) fn run_bench(args: &Args) -> Result<(), String> {
    let r = args.point.resolve()?;
    let variant = args.variant.clone().unwrap_or_else(|| r.system.variants()[0].name.to_string());
    let point = args.point.run(&r, &variant)?;
    args.point.print(&r, std::slice::from_ref(&point), &point)
}

/// Flags of `pisadb compare`.
#[derive(clap::Parser, Debug)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    point: PointArgs,
}

/// Runs `pisadb compare`: every variant of the system on the same settings and seed, its
/// baselines first.
pub(crate) fn run_compare(args: &CompareArgs) -> Result<(), String> {
    let r = args.point.resolve()?;
    let mut variants: Vec<&str> = r.system.variants().iter().map(|v| v.name).collect();
    variants.rotate_left(1); // the system itself last, after the baselines it is measured against
    let mut points = Vec::new();
    for variant in variants {
        if !args.point.json {
            eprintln!("simulating {variant} ...");
        }
        points.push(args.point.run(&r, variant)?);
    }
    args.point.print(&r, &points, &points)
}
