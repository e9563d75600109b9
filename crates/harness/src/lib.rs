//! # pisadb-harness: one harness for every system
//!
//! PisaDB hosts several papers' systems on one platform. To a user they are rows of one
//! registry: `pisadb systems` lists them, and every command takes `--system NAME` (and, where
//! a system has baselines, `--variant NAME`) instead of growing a command per paper. This crate
//! is that contract, and it names no system:
//!
//! - [`System`]: what a paper's crate implements — its name, its variants (the system itself
//!   and the baselines it is compared with), its settings as one serde value, and how to run
//!   one simulated point of a variant with given settings.
//! - [`Registry`]: the systems the binary was built with, looked up by name with an error that
//!   lists the names it knows. Adding a system is one line in the binary's registry.
//! - Fault injection: a system may offer seeded fault-injection cases
//!   ([`System::fuzz_case`]), each one short simulated run with faults, checked by the
//!   system's own oracles and summed up in a [`FuzzReport`]. `pisadb fuzz --system NAME` runs
//!   any system's cases; a system without them is refused with the names of those that have
//!   them ([`Registry::fuzzer`]).
//! - Experiments as data ([`experiment`]): a system describes its paper's experiments —
//!   points, columns, charts, the paper's claims — ([`System::experiment`],
//!   [`System::reproduction`]) and one runner ([`runner`], [`campaign`]) runs every point
//!   under N seeds on one thread pool ([`pool`]), shares runs between figures, slices a
//!   command into shards ([`shard`]) and writes CSVs with `_sd` columns, SVGs with error bars
//!   and the claims table ([`output`]). `pisadb sweep --system NAME EXPERIMENT` and `pisadb
//!   reproduce NAME` reach them through [`Registry::sweep`] and [`Registry::reproduce`].
//! - [`preset`]: named sets of settings, every value with its provenance (measured, stated,
//!   assumed); every system has at least `pisadb` (the default) and `paper`.
//! - [`settings`]: `--set key=value` overrides applied to a system's settings before they are
//!   read back into its typed configuration, with errors that name the key and the keys or
//!   values it accepts.
//! - [`bench`]: one point as `pisadb bench` and `compare` run it, one JSON schema for every
//!   system, the system's own table ([`System::bench_table`]), and a system's flag aliases
//!   (`--FLAG VALUE` for `--set KEY=VALUE`, [`System::flag_aliases`]).
//! - [`perf`]: `pisadb perf`'s measurement of the simulator (phase clock, CPU, memory) and
//!   what it asks of a system beyond its points (a larger network of it, the transactions a
//!   point committed).
//!
//! See `docs/ARCHITECTURE.md` (the system contract; adding a system) for the page that explains it.

pub mod bench;
pub mod campaign;
pub mod experiment;
pub mod output;
pub mod perf;
pub mod pool;
pub mod preset;
pub mod real;
pub mod runner;
pub mod settings;
pub mod shard;

pub use bench::{BenchPoint, FlagAlias};
pub use experiment::{Experiment, Reproduction};
pub use preset::{preset_settings, Preset, Provenance, DEFAULT_PRESET};
pub use settings::{apply_set, read_back, SettingsError};
pub use shard::Shard;

use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

/// Why the harness could not do what was asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    /// No system of that name.
    #[error("unknown system `{name}`; known systems: {}", known.join(", "))]
    UnknownSystem {
        /// The name asked for.
        name: String,
        /// The names the registry knows.
        known: Vec<String>,
    },
    /// The system has no variant of that name.
    #[error("system `{system}` has no variant `{variant}`; its variants: {}", known.join(", "))]
    UnknownVariant {
        /// The system.
        system: String,
        /// The variant asked for.
        variant: String,
        /// Its variants.
        known: Vec<String>,
    },
    /// A `--set` override could not be applied or read back.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The system does not offer what was asked.
    #[error("system `{system}` has no {what} (systems with {what}: {})", with.join(", "))]
    Unsupported {
        /// The system.
        system: String,
        /// What was asked (`fault-injection cases`).
        what: String,
        /// The systems that have it.
        with: Vec<String>,
    },
    /// The point could not run (a configuration the system refuses, a livelock, …).
    #[error("{system}: {why}")]
    Run {
        /// The system.
        system: String,
        /// What went wrong, in the system's words.
        why: String,
    },
}

/// One way to run a system: the system itself or a baseline it is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// Its name on the command line (`p4db`, `no-switch`, …).
    pub name: &'static str,
    /// One sentence on what it is.
    pub summary: &'static str,
}

/// The figures of one simulated point, in a form every command can print.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointReport {
    /// The system.
    pub system: &'static str,
    /// The variant that ran.
    pub variant: String,
    /// Every figure, as the system names them (`bench --json` prints this object).
    pub figures: Value,
    /// The columns of a table row: (header, cell), in order.
    pub row: Vec<(String, String)>,
    /// Simulated events the run processed.
    pub events: u64,
    /// The hash of the run's event trace (equal seeds, equal hashes).
    pub trace_hash: String,
}

/// What one fault-injection case did, in a form every command can print.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FuzzReport {
    /// The seed the case came from (it replays the case).
    pub seed: u64,
    /// A one-line description of what ran (rack, variant, workload).
    pub case: String,
    /// A one-line description of the faults planned.
    pub faults: String,
    /// Transactions committed.
    pub committed: u64,
    /// Datagrams lost on a hop.
    pub lost: u64,
    /// Datagrams duplicated.
    pub duplicated: u64,
    /// Hosts and switches crashed.
    pub crashes: u64,
    /// A system's own short figure for the seed's line (P4DB: the longest gap after healing).
    pub detail: String,
    /// The first oracle that failed, if any.
    pub failure: Option<String>,
    /// The system's whole report (what `fuzz --json` prints).
    pub report: Value,
}

/// A system's fault-injection case runner: the case of a seed, run and checked.
pub type FuzzCaseFn = fn(u64) -> FuzzReport;

/// How a system's experiments run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExperimentOptions {
    /// Fewer points and shorter runs, for a first look.
    pub quick: bool,
    /// The first seed of every point.
    pub seed: u64,
    /// Runs per point, under seeds `seed`, `seed + 1`, …: figures are their mean.
    pub seeds: u32,
    /// Simulations run side by side.
    pub threads: usize,
    /// The directory for CSVs, charts and reports.
    pub out: PathBuf,
    /// Run only this slice of the runs and write them raw ([`shard`]).
    pub shard: Option<Shard>,
    /// The preset the experiments' settings start from.
    pub preset: String,
    /// `--set KEY=VALUE` overrides of the settings every point starts from, applied after the
    /// preset (a system's flag aliases among them: P4DB's `--layout random` is `layout=random`).
    pub sets: Vec<String>,
}

impl ExperimentOptions {
    /// Quick or full runs of one seed from `seed`, on one thread, into `out`, under the
    /// default preset, unsharded.
    pub fn new(quick: bool, seed: u64, out: impl Into<PathBuf>) -> Self {
        ExperimentOptions {
            quick,
            seed,
            seeds: 1,
            threads: 1,
            out: out.into(),
            shard: None,
            preset: DEFAULT_PRESET.to_string(),
            sets: Vec::new(),
        }
    }
}

/// One experiment a system can run (`pisadb sweep --system NAME EXPERIMENT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExperimentName {
    /// Its name on the command line.
    pub name: &'static str,
    /// One sentence on what it shows.
    pub summary: &'static str,
}

/// A paper's system, as the harness and the command line see it.
pub trait System: Sync {
    /// Its name on the command line (`p4db`).
    fn name(&self) -> &'static str;
    /// The paper it implements and where its text is (`P4DB (SIGMOD'22), seed 000`).
    fn paper(&self) -> &'static str;
    /// One sentence on what it puts in the switch.
    fn summary(&self) -> &'static str;
    /// Its variants; the first is the default.
    fn variants(&self) -> &'static [Variant];
    /// Its default settings as one serde value (a JSON object), the base `--set` edits.
    fn default_settings(&self) -> Value;
    /// Runs one simulated point of `variant` with `settings` (the default settings, edited).
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError>;
    /// The frame kinds its `wire` module declares (every system sends some; no two systems
    /// may claim one byte, checked over the registry).
    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind];

    // --- One point, as `bench` and `compare` run it (see `bench`). ---

    /// Flags that are other spellings of its `--set` keys (none by default).
    fn flag_aliases(&self) -> &'static [FlagAlias] {
        &[]
    }

    /// The settings a point runs with: the defaults under preset `preset` (a name or an
    /// alias), then `sets` (`KEY=VALUE`, its flag aliases' first) in order. A system whose keys
    /// mean more than a path into its settings (P4DB's `workload=smallbank`) reads them here.
    fn settings(&self, preset: &str, sets: &[String]) -> Result<Value, HarnessError> {
        let preset = preset::lookup(self.name(), self.presets(), preset)?;
        let mut settings = self.default_settings();
        preset.apply(&mut settings)?;
        for set in sets {
            apply_set(&mut settings, set)?;
        }
        Ok(settings)
    }

    /// The lines above a table of its points: what ran under which preset (by default its
    /// paper and the preset's name, with the `--set`s given).
    fn describe_point(&self, preset: &str, sets: &[String], _settings: &Value) -> Vec<String> {
        vec![if sets.is_empty() {
            format!("{}: preset `{preset}` (pisadb systems --presets {})", self.paper(), self.name())
        } else {
            format!("{}: preset `{preset}` with --set {}", self.paper(), sets.join(" --set "))
        }]
    }

    /// What a reader of points run with `settings` must be warned of (a figure that is an
    /// upper bound, a protocol that is not serializable); none by default.
    fn warnings(&self, _settings: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Its points as a table, only the columns that mean something for it (by default each
    /// point's row and the simulator's speed, [`bench::rows_table`]).
    fn bench_table(&self, points: &[BenchPoint]) -> String {
        bench::rows_table(points)
    }

    /// A network `factor` times its default's hosts, for `pisadb perf`'s scaling table, or
    /// `None` when its topology is fixed (the default).
    fn scaled(&self, _factor: u32) -> Option<perf::Scaled> {
        None
    }

    /// Its seeded fault-injection cases, if it has them (none by default).
    fn fuzz_case(&self) -> Option<FuzzCaseFn> {
        None
    }

    // --- Experiments and presets: the runner's side of the contract (see `experiment`). ---

    /// The experiments it describes as data (none by default).
    fn experiments(&self) -> &'static [ExperimentName] {
        &[]
    }

    /// Experiment `name` (one of [`System::experiments`]) as data, its points' settings
    /// edited from `base` (the default settings under the chosen preset).
    fn experiment(&self, name: &str, _base: &Value, _options: &ExperimentOptions) -> Result<Experiment, String> {
        Err(format!("no experiment `{name}`"))
    }

    /// What `pisadb reproduce` runs and the report's prose (by default: every experiment).
    fn reproduction(&self, _options: &ExperimentOptions) -> Reproduction {
        Reproduction {
            title: format!("{} on PisaDB", self.paper()),
            intro: String::new(),
            experiments: self.experiments().iter().map(|e| e.name).collect(),
            notes: String::new(),
        }
    }

    /// Its presets: at least `pisadb` (the default) and `paper` (by default only `pisadb`,
    /// the default settings as they are).
    fn presets(&self) -> Vec<Preset> {
        vec![Preset::new(DEFAULT_PRESET, "PisaDB's model as it stands (the default settings)")]
    }

    /// The `--set` keys its experiments read from [`ExperimentOptions::sets`] themselves (choices
    /// every point takes where its experiment does not set them), which are therefore not
    /// applied to the settings (none by default).
    fn experiment_keys(&self) -> &'static [&'static str] {
        &[]
    }

    // --- End of experiments and presets. ---

    /// The variant called `name`, or an error listing the variants.
    fn variant(&self, name: &str) -> Result<&'static Variant, HarnessError> {
        self.variants().iter().find(|v| v.name == name).ok_or_else(|| HarnessError::UnknownVariant {
            system: self.name().to_string(),
            variant: name.to_string(),
            known: self.variants().iter().map(|v| v.name.to_string()).collect(),
        })
    }
}

/// The systems a binary was built with.
pub struct Registry {
    /// In the order `pisadb systems` lists them.
    systems: Vec<&'static dyn System>,
}

impl Registry {
    /// A registry of `systems`.
    pub fn new(systems: Vec<&'static dyn System>) -> Self {
        Registry { systems }
    }

    /// Every system, in order.
    pub fn systems(&self) -> &[&'static dyn System] {
        &self.systems
    }

    /// The system called `name`, or an error listing the names.
    pub fn get(&self, name: &str) -> Result<&'static dyn System, HarnessError> {
        self.systems.iter().copied().find(|s| s.name() == name).ok_or_else(|| HarnessError::UnknownSystem {
            name: name.to_string(),
            known: self.systems.iter().map(|s| s.name().to_string()).collect(),
        })
    }

    /// The fault-injection cases of the system called `name`, or an error naming the systems
    /// that have them.
    pub fn fuzzer(&self, name: &str) -> Result<FuzzCaseFn, HarnessError> {
        let system = self.get(name)?;
        system.fuzz_case().ok_or_else(|| HarnessError::Unsupported {
            system: system.name().to_string(),
            what: "fault-injection cases".to_string(),
            with: self.systems.iter().filter(|s| s.fuzz_case().is_some()).map(|s| s.name().to_string()).collect(),
        })
    }

    /// The system called `name` if it runs its own experiments, or an error naming those that do.
    fn experimenter(&self, name: &str) -> Result<&'static dyn System, HarnessError> {
        let system = self.get(name)?;
        if system.experiments().is_empty() {
            return Err(HarnessError::Unsupported {
                system: system.name().to_string(),
                what: "experiments of its own".to_string(),
                with: self
                    .systems
                    .iter()
                    .filter(|s| !s.experiments().is_empty())
                    .map(|s| s.name().to_string())
                    .collect(),
            });
        }
        Ok(system)
    }

    /// Runs experiment `experiment` of the system called `name`; an unknown experiment is
    /// refused with the system's list.
    pub fn sweep(&self, name: &str, experiment: &str, options: &ExperimentOptions) -> Result<String, HarnessError> {
        let system = self.experimenter(name)?;
        if !system.experiments().iter().any(|e| e.name == experiment) {
            return Err(HarnessError::Run {
                system: system.name().to_string(),
                why: format!(
                    "no experiment `{experiment}`; its experiments: {}",
                    system.experiments().iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        campaign::sweep(system, experiment, options)
    }

    /// Runs every experiment of the system called `name` and its report.
    pub fn reproduce(&self, name: &str, options: &ExperimentOptions) -> Result<String, HarnessError> {
        let system = self.experimenter(name)?;
        campaign::reproduce(system, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy;
    static TOY_VARIANTS: [Variant; 2] =
        [Variant { name: "toy", summary: "the toy" }, Variant { name: "baseline", summary: "without the toy" }];

    impl System for Toy {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn paper(&self) -> &'static str {
            "none"
        }
        fn summary(&self) -> &'static str {
            "a toy"
        }
        fn variants(&self) -> &'static [Variant] {
            &TOY_VARIANTS
        }
        fn default_settings(&self) -> Value {
            serde_json::json!({ "nodes": 2 })
        }
        fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
            Ok(PointReport {
                system: "toy",
                variant: self.variant(variant)?.name.to_string(),
                figures: settings.clone(),
                row: vec![],
                events: 0,
                trace_hash: String::new(),
            })
        }
        fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
            &[]
        }
    }

    static TOY: Toy = Toy;

    #[test]
    fn systems_and_variants_are_found_by_name_and_errors_list_the_known_ones() {
        let registry = Registry::new(vec![&TOY]);
        assert_eq!(registry.get("toy").map(|s| s.name()), Ok("toy"));
        let Err(err) = registry.get("gothard") else { panic!("gothard is not registered") };
        assert_eq!(err.to_string(), "unknown system `gothard`; known systems: toy");
        let Err(err) = TOY.variant("fast") else { panic!("the toy has no variant `fast`") };
        assert_eq!(err.to_string(), "system `toy` has no variant `fast`; its variants: toy, baseline");
        let point = TOY.run_point("baseline", &TOY.default_settings()).expect("runs");
        assert_eq!(point.variant, "baseline");
    }

    struct Fuzzy;

    fn fuzzy_case(seed: u64) -> FuzzReport {
        FuzzReport {
            seed,
            case: "fuzzy".into(),
            faults: "none".into(),
            committed: 1,
            lost: 0,
            duplicated: 0,
            crashes: 0,
            detail: String::new(),
            failure: None,
            report: Value::Null,
        }
    }

    impl System for Fuzzy {
        fn name(&self) -> &'static str {
            "fuzzy"
        }
        fn paper(&self) -> &'static str {
            "none"
        }
        fn summary(&self) -> &'static str {
            "a toy with fault-injection cases"
        }
        fn variants(&self) -> &'static [Variant] {
            &TOY_VARIANTS
        }
        fn default_settings(&self) -> Value {
            Value::Null
        }
        fn run_point(&self, _variant: &str, _settings: &Value) -> Result<PointReport, HarnessError> {
            Err(HarnessError::Run { system: "fuzzy".into(), why: "no points".into() })
        }
        fn fuzz_case(&self) -> Option<FuzzCaseFn> {
            Some(fuzzy_case)
        }
        fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
            &[]
        }
    }

    static FUZZY: Fuzzy = Fuzzy;

    #[test]
    fn fuzz_cases_are_found_by_system_and_a_system_without_them_names_those_with() {
        let registry = Registry::new(vec![&TOY, &FUZZY]);
        let run = registry.fuzzer("fuzzy").expect("fuzzy has cases");
        assert_eq!(run(7).seed, 7);
        let Err(err) = registry.fuzzer("toy") else { panic!("the toy has no cases") };
        assert_eq!(
            err.to_string(),
            "system `toy` has no fault-injection cases (systems with fault-injection cases: fuzzy)"
        );
    }
}
