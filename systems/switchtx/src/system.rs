//! SwitchTx as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set threads=8`, `--set workload.theta=0.99`,
//! …); a point builds the rack of [`crate::rack`] for the variant, runs warm-up, window and
//! drain, checks the run and prints throughput, latency, lock time and aborts.

use crate::rack::{run, variant_of, RackConfig};
use pisadb_harness::{ExperimentName, ExperimentOptions, FuzzCaseFn, HarnessError, PointReport, System, Variant};
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
        serde_json::to_value(RackConfig::default()).unwrap_or(Value::Null)
    }

    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        variant_of(variant).map_err(run_error)?;
        let cfg: RackConfig = serde_json::from_value(settings.clone()).map_err(|e| run_error(e.to_string()))?;
        let f = run(variant, &cfg).map_err(run_error)?;
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

    fn sweep(&self, experiment: &str, options: &ExperimentOptions) -> Result<String, HarnessError> {
        crate::experiments::sweep(experiment, options).map_err(run_error)
    }

    fn reproduce(&self, options: &ExperimentOptions) -> Result<String, HarnessError> {
        crate::experiments::reproduce(options).map_err(run_error)
    }
}
