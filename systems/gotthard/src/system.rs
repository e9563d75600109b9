//! Gotthard as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set write_share=0.25`, `--set clients=2`, …);
//! a point builds the rack of [`crate::rack`] in the variant's switch mode and runs it to
//! completion. The row shows what Fig. 2 of the paper plots (the completion time) beside the
//! commits, the aborts by source, the retries and the latency.

use crate::rack::{mode_of, run, RackConfig};
use pisadb_harness::{
    Experiment, ExperimentName, ExperimentOptions, FuzzCaseFn, HarnessError, PointReport, Preset, Reproduction, System,
    Variant,
};
use serde_json::Value;

/// The system, for the registry.
pub static SYSTEM: Gotthard = Gotthard;

/// Gotthard and its baselines.
#[derive(Debug)]
pub struct Gotthard;

const VARIANTS: &[Variant] = &[
    Variant { name: "gotthard", summary: "the switch aborts doomed requests and logs forwarded writes optimistically" },
    Variant { name: "forward", summary: "the switch only forwards" },
    Variant { name: "read-cache", summary: "the switch answers all-READ requests from values seen in store replies" },
    Variant {
        name: "early-abort",
        summary: "the switch aborts doomed requests against committed values, logging nothing",
    },
];

/// A duration of `s` seconds in the largest readable unit (s, ms or µs).
fn readable(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.1} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn run_error(why: impl Into<String>) -> HarnessError {
    HarnessError::Run { system: "gotthard".into(), why: why.into() }
}

impl System for Gotthard {
    fn name(&self) -> &'static str {
        "gotthard"
    }

    fn paper(&self) -> &'static str {
        "Gotthard (optimistic abort in the network), seed 004"
    }

    fn summary(&self) -> &'static str {
        "a switch near the clients aborts transactions whose compares already fail, logging forwarded writes optimistically"
    }

    fn variants(&self) -> &'static [Variant] {
        VARIANTS
    }

    fn default_settings(&self) -> Value {
        serde_json::to_value(RackConfig::default()).unwrap_or(Value::Null)
    }

    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
        crate::wire::KINDS
    }
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        let cfg: RackConfig = serde_json::from_value(settings.clone()).map_err(|e| run_error(e.to_string()))?;
        let mode = mode_of(variant).map_err(run_error)?;
        let f = run(mode, &cfg).map_err(run_error)?;
        let aborts = f.aborts_store + f.aborts_switch + f.aborts_switch_optimistic;
        let row = vec![
            ("variant".to_string(), variant.to_string()),
            ("clients".to_string(), cfg.clients.to_string()),
            ("writes".to_string(), format!("{:.0}%", cfg.write_share * 100.0)),
            ("completion".to_string(), readable(f.completion_s)),
            ("commits".to_string(), f.commits.to_string()),
            ("aborts".to_string(), aborts.to_string()),
            (
                "store/switch/opt".to_string(),
                format!("{}/{}/{}", f.aborts_store, f.aborts_switch, f.aborts_switch_optimistic),
            ),
            ("retries".to_string(), f.retries.to_string()),
            ("retransmits".to_string(), f.retransmissions.to_string()),
            ("mean".to_string(), readable(f.latency.latency_us_mean / 1e6)),
            ("p99".to_string(), readable(f.latency.latency_us_p99 / 1e6)),
        ];
        Ok(PointReport {
            system: "gotthard",
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
