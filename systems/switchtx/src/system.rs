//! SwitchTx as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set threads=8`, `--set workload.theta=0.99`,
//! …) and an optional fault plan, `faults` (null by default; the failover experiment's points
//! carry one); a point builds the rack of [`crate::rack`] for the variant, runs warm-up, window and
//! drain, checks the run and prints throughput, latency, lock time and aborts.

use crate::rack::{run_with, variant_of, RackConfig, EVENTS_MAX};
use pisadb_harness::{
    Experiment, ExperimentName, ExperimentOptions, FuzzCaseFn, HarnessError, PointReport, Preset, Reproduction, System,
    Variant,
};
use pisadb_sim::Faults;
use serde_json::Value;

/// The system, for the registry.
pub static SYSTEM: SwitchTx = SwitchTx;

/// SwitchTx and its baselines and ablations.
#[derive(Debug)]
pub struct SwitchTx;

const VARIANTS: &[Variant] = &[
    Variant {
        name: "switchtx",
        summary: "tree gather-and-scatter, priority queues, adaptive admission control (+MPL)",
    },
    Variant { name: "fasst", summary: "FaSST-like: the client coordinates every phase over the network" },
    Variant { name: "gas", summary: "+GaS: only the core switch S0 gathers and scatters" },
    Variant { name: "tree-gas", summary: "+Tree-GaS: a tree of switches per transaction" },
    Variant { name: "reorder", summary: "+Reorder: three semantic priority classes on every port" },
    Variant {
        name: "eris",
        summary:
            "Eris-like: a sequencer switch stamps one-shot transactions per shard (at most 40 shards: threads <= 5)",
    },
];

fn run_error(why: impl Into<String>) -> HarnessError {
    HarnessError::Run { system: "switchtx".into(), why: why.into() }
}

/// The rack of `settings`, without the optional `faults` (a fault plan is not part of the
/// rack: the failover experiment's points carry one).
pub fn rack_config(settings: &Value) -> Result<RackConfig, String> {
    let mut settings = settings.clone();
    if let Value::Object(map) = &mut settings {
        map.remove("faults");
    }
    serde_json::from_value(settings).map_err(|e| e.to_string())
}

/// The fault plan of `settings`, if it has one (`faults`, null by default).
fn faults_of(settings: &Value) -> Result<Option<Faults>, String> {
    match settings.get("faults") {
        None | Some(Value::Null) => Ok(None),
        Some(f) => serde_json::from_value(f.clone()).map(Some).map_err(|e| format!("faults: {e}")),
    }
}

impl System for SwitchTx {
    fn name(&self) -> &'static str {
        "switchtx"
    }

    fn paper(&self) -> &'static str {
        "SwitchTx (in-network transaction coordination), seed 001"
    }

    fn summary(&self) -> &'static str {
        "switches gather each commit phase's replies and scatter the next phase, on a tree of switches"
    }

    fn variants(&self) -> &'static [Variant] {
        VARIANTS
    }

    fn default_settings(&self) -> Value {
        let mut settings = serde_json::to_value(RackConfig::default()).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut settings {
            // The measured costs are left out when a rack is written; listed here, `--set
            // costs.stack_ns=…` and the presets can name them.
            map.insert("costs".into(), serde_json::to_value(crate::costs::COSTS).unwrap_or(Value::Null));
            // Listing 1's constants, likewise (`--set admission.alpha=…`).
            let listing = crate::admission::Listing1::default();
            map.insert("admission".into(), serde_json::to_value(listing).unwrap_or(Value::Null));
            let network = crate::network::Network::default();
            map.insert("network".into(), serde_json::to_value(network).unwrap_or(Value::Null));
            map.insert("faults".into(), Value::Null);
        }
        settings
    }

    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
        crate::wire::KINDS
    }
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        variant_of(variant).map_err(run_error)?;
        let cfg = rack_config(settings).map_err(run_error)?;
        let faults = faults_of(settings).map_err(run_error)?;
        let (f, _) = run_with(variant, &cfg, faults, EVENTS_MAX).map_err(run_error)?;
        let row = vec![
            ("variant".to_string(), variant.to_string()),
            ("threads".to_string(), cfg.threads.to_string()),
            ("theta".to_string(), format!("{:.2}", cfg.workload.theta)),
            ("Mtxn/s".to_string(), format!("{:.3}", f.mtps)),
            ("p50".to_string(), format!("{:.1} µs", f.p50_us)),
            ("p99".to_string(), format!("{:.1} µs", f.p99_us)),
            ("lock".to_string(), format!("{:.1} µs", f.lock_us_mean)),
            ("aborts".to_string(), f.aborts.to_string()),
            ("mpl".to_string(), format!("{:.1}", f.mpl_mean)),
            ("checked".to_string(), f.checked_commits.to_string()),
        ];
        Ok(PointReport {
            system: "switchtx",
            variant: variant.to_string(),
            events: f.events,
            trace_hash: f.trace_hash.clone(),
            figures: serde_json::to_value(&f).map_err(|e| run_error(e.to_string()))?,
            row,
        })
    }

    fn fuzz_case(&self) -> Option<FuzzCaseFn> {
        Some(crate::fuzz::fuzz_report)
    }

    fn experiments(&self) -> &'static [ExperimentName] {
        crate::experiments::EXPERIMENTS
    }

    fn experiment(&self, name: &str, base: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
        crate::experiments::experiment(name, base, options)
    }

    fn reproduction(&self, options: &ExperimentOptions) -> Reproduction {
        crate::experiments::reproduction(&self.default_settings(), options)
    }

    fn presets(&self) -> Vec<Preset> {
        crate::presets::presets()
    }
}
