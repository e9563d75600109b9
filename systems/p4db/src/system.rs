//! P4DB as the harness sees it: one [`System`] with three variants (P4DB and its two
//! baselines), whose settings are a [`RunConfig`] and whose points are [`run`]s.

use crate::node::Mode;
use crate::run::{run, RunConfig, RunResult};
use pisadb_harness::{
    read_back, BenchPoint, Experiment, ExperimentName, ExperimentOptions, FlagAlias, FuzzCaseFn, FuzzReport,
    HarnessError, PointReport, Preset, Reproduction, System, Variant,
};
use serde_json::Value;

/// P4DB in the registry.
pub struct P4db;

/// The registry's instance.
pub static SYSTEM: P4db = P4db;

/// The three contenders of P4DB's §7, in the order `compare` runs them.
static VARIANTS: [Variant; 3] = [
    Variant {
        name: "p4db",
        summary: "hot transactions run in the switch; cold and warm ones with 2PL + 2PC on the nodes",
    },
    Variant { name: "no-switch", summary: "the switch only forwards; every transaction runs on the nodes" },
    Variant {
        name: "lm-switch",
        summary: "the switch grants locks on hot tuples (NetLock-style); data stays on the nodes",
    },
];

/// The mode a variant name means.
pub fn mode_of(variant: &str) -> Result<Mode, HarnessError> {
    SYSTEM.variant(variant)?;
    Ok(match variant {
        "no-switch" => Mode::NoSwitch,
        "lm-switch" => Mode::LmSwitch,
        _ => Mode::P4db,
    })
}

impl P4db {
    /// The configuration `settings` describe, run as `variant`.
    pub fn config(&self, variant: &str, settings: &Value) -> Result<RunConfig, HarnessError> {
        let mode = mode_of(variant)?;
        let mut settings = settings.clone();
        if let Some(fields) = settings.as_object_mut() {
            fields.insert("mode".into(), serde_json::to_value(mode).expect("a mode serializes"));
        }
        Ok(read_back(settings, &[])?)
    }

    /// A point's table row: the figures `pisadb compare` prints.
    pub fn row(variant: &str, r: &RunResult) -> Vec<(String, String)> {
        let cells = [
            ("system", variant.to_string()),
            ("commits/s", format!("{:.0}", r.committed_per_s)),
            ("aborts", format!("{:.1}%", r.abort_rate * 100.0)),
            ("hot", r.hot_committed.to_string()),
            ("cold", r.cold_committed.to_string()),
            ("p50 us", format!("{:.1}", r.latency.latency_us_p50)),
            ("p99 us", format!("{:.1}", r.latency.latency_us_p99)),
            ("passes", r.switch_passes.to_string()),
            ("recircs", r.recirculations.to_string()),
        ];
        cells.into_iter().map(|(h, c)| (h.to_string(), c)).collect()
    }
}

/// `settings` without the `mode` key: the variant decides the mode, not a setting.
pub fn without_mode(mut settings: Value) -> Value {
    if let Some(fields) = settings.as_object_mut() {
        fields.remove("mode");
    }
    settings
}

impl System for P4db {
    fn name(&self) -> &'static str {
        "p4db"
    }
    fn paper(&self) -> &'static str {
        "P4DB: the case for in-network OLTP (SIGMOD'22), seed 000"
    }
    fn summary(&self) -> &'static str {
        "hot tuples in the switch's registers; single-pass lock-free and pipeline-locked multi-pass transactions, warm transactions across switch and nodes"
    }
    fn variants(&self) -> &'static [Variant] {
        &VARIANTS
    }
    /// The default run configuration without its `mode`, which the variant decides.
    fn default_settings(&self) -> Value {
        without_mode(serde_json::to_value(RunConfig::ycsb_default()).expect("a run configuration serializes"))
    }
    fn presets(&self) -> Vec<Preset> {
        crate::presets::presets()
    }
    fn experiments(&self) -> &'static [ExperimentName] {
        &crate::experiments::EXPERIMENT_NAMES
    }
    /// Its switch and concurrency-control choices ([`crate::experiments::EXPERIMENT_KEYS`]).
    fn experiment_keys(&self) -> &'static [&'static str] {
        &crate::experiments::EXPERIMENT_KEY_NAMES
    }
    /// P4DB's points start from their plans' configurations ([`crate::experiments::plan`]),
    /// not from `base`: the preset chooses the model or the testbed, and `--set` takes only
    /// [`System::experiment_keys`] ([`crate::experiments::reproduce::experiment`]).
    fn experiment(&self, name: &str, _base: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
        crate::experiments::reproduce::experiment(name, options)
    }
    /// Every experiment in three setups ([`crate::experiments::reproduce`]).
    fn reproduction(&self, options: &ExperimentOptions) -> Reproduction {
        crate::experiments::reproduce::reproduction(options)
    }
    /// A rack of `factor` times the default's nodes on its one switch.
    fn scaled(&self, factor: u32) -> Option<pisadb_harness::perf::Scaled> {
        let nodes = u64::from(RunConfig::ycsb_default().nodes) * u64::from(factor);
        Some(pisadb_harness::perf::Scaled { sets: vec![format!("nodes={nodes}")], hosts: nodes })
    }
    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
        crate::wire::KINDS
    }
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        let cfg = self.config(variant, settings)?;
        let out = run(&cfg).map_err(|e| HarnessError::Run { system: "p4db".into(), why: e.to_string() })?;
        let r = out.result;
        Ok(PointReport {
            system: "p4db",
            variant: variant.to_string(),
            row: P4db::row(variant, &r),
            events: r.events,
            trace_hash: r.trace_hash.clone(),
            figures: serde_json::to_value(&r).expect("results serialize"),
        })
    }
    fn fuzz_case(&self) -> Option<FuzzCaseFn> {
        Some(fuzz_report)
    }
    /// `--workload`, `--nodes`, `--layout`, …: its rack keys under their flag names.
    fn flag_aliases(&self) -> &'static [FlagAlias] {
        &crate::flags::FLAG_ALIASES
    }
    /// The rack keys build the configuration, the other keys edit it ([`crate::flags`]).
    fn settings(&self, preset: &str, sets: &[String]) -> Result<Value, HarnessError> {
        crate::flags::settings(preset, sets)
    }
    /// What the testbed preset selected (under `paper`) and the rack and workload, one line each.
    fn describe_point(&self, preset: &str, _sets: &[String], settings: &Value) -> Vec<String> {
        let Ok(cfg) = self.config("p4db", settings) else { return Vec::new() };
        let testbed = crate::flags::is_testbed(preset).unwrap_or(false).then(|| crate::testbed::describe(&cfg));
        testbed.into_iter().chain([crate::flags::describe(&cfg)]).collect()
    }
    fn warnings(&self, settings: &Value) -> Vec<String> {
        self.config("p4db", settings).map(|cfg| crate::flags::warnings(&cfg)).unwrap_or_default()
    }
    fn bench_table(&self, points: &[BenchPoint]) -> String {
        crate::table::bench_table(points)
    }
}

/// The fault-injection case of `seed` ([`crate::fuzz`]), run and checked, for the harness.
fn fuzz_report(seed: u64) -> FuzzReport {
    let r = crate::fuzz::run_case(&crate::fuzz::FuzzCase::from_seed(seed));
    FuzzReport {
        seed,
        case: r.rack.clone(),
        faults: r.faults.clone(),
        committed: r.committed as u64,
        lost: r.lost,
        duplicated: r.duplicated,
        crashes: r.crashes,
        detail: format!("longest gap {:>7.1} µs", r.longest_gap_us),
        failure: r.failure.clone(),
        report: serde_json::to_value(&r).expect("a case report serializes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_map_to_modes_and_unknown_ones_are_refused_with_the_list() {
        assert_eq!(mode_of("no-switch").ok(), Some(Mode::NoSwitch));
        assert_eq!(mode_of("lm-switch").ok(), Some(Mode::LmSwitch));
        assert_eq!(mode_of("p4db").ok(), Some(Mode::P4db));
        let err = mode_of("netlock").unwrap_err().to_string();
        assert!(err.contains("p4db, no-switch, lm-switch"), "{err}");
    }

    #[test]
    fn default_settings_read_back_to_the_default_configuration() {
        let cfg = SYSTEM.config("no-switch", &SYSTEM.default_settings()).expect("valid");
        let expected = RunConfig { mode: Mode::NoSwitch, ..RunConfig::ycsb_default() };
        assert_eq!(serde_json::to_value(cfg).unwrap(), serde_json::to_value(expected).unwrap());
    }

    #[test]
    fn settings_can_be_edited_by_key() {
        let mut settings = SYSTEM.default_settings();
        pisadb_harness::apply_set(&mut settings, "workers=4").unwrap();
        pisadb_harness::apply_set(&mut settings, "cc=WaitDie").unwrap();
        pisadb_harness::apply_set(&mut settings, "workload.Ycsb.hot_prob=0.5").unwrap();
        let cfg = SYSTEM.config("p4db", &settings).expect("valid");
        assert_eq!(cfg.workers, 4);
        assert_eq!(cfg.cc, crate::node::Cc::WaitDie);
        let crate::WorkloadSpec::Ycsb(y) = cfg.workload else { panic!("still YCSB") };
        assert_eq!(y.hot_prob, 0.5);
    }
}
