//! TransKV as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set zipf=1.2`, `--set write_ratio=0.5`, …); a
//! point builds the data center of [`crate::rack`] in the variant's mode and runs it to
//! completion. The row shows the throughput (what Figs. 9–10 plot) beside the commits, the
//! switch's answers, the aborts by source and the read and write latencies (Tables I–II).

use crate::rack::{run, variant_of, RackConfig};
use pisadb_harness::{ExperimentName, ExperimentOptions, FuzzCaseFn, HarnessError, PointReport, System, Variant};
use pisadb_report::latency::LatencySummary;
use serde_json::Value;

/// The system, for the registry.
pub static SYSTEM: TransKv = TransKv;

/// TransKV and its baselines.
#[derive(Debug)]
pub struct TransKv;

const VARIANTS: &[Variant] = &[
    Variant {
        name: "transkv",
        summary: "switches cache hot keys and decide transactions on them by timestamp ordering; the controller coordinates the rest",
    },
    Variant { name: "tranx-coor", summary: "every transaction through the controller-coordinator; switches only forward" },
    Variant { name: "no-cache", summary: "non-transactional reads; switches only forward" },
    Variant { name: "transkv-cache", summary: "non-transactional reads answered from the switches' caches, no TSO" },
    Variant {
        name: "transkv-log",
        summary: "TransKV whose switches clone every transaction they accept to the controller's log (§IV-E)",
    },
];

fn run_error(why: impl Into<String>) -> HarnessError {
    HarnessError::Run { system: "transkv".into(), why: why.into() }
}

impl System for TransKv {
    fn name(&self) -> &'static str {
        "transkv"
    }

    fn paper(&self) -> &'static str {
        "TransKV (network support for transactions in distributed key-value stores), seed 003"
    }

    fn summary(&self) -> &'static str {
        "a hierarchy of switches caches hot keys and accepts or aborts transactions on them by timestamp ordering"
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
        let us =
            |v: LatencySummary| format!("{:.1}/{:.1}/{:.1}", v.latency_us_mean, v.latency_us_p50, v.latency_us_p99);
        let row = vec![
            ("variant".to_string(), variant.to_string()),
            ("zipf".to_string(), format!("{}", cfg.zipf)),
            ("writes".to_string(), format!("{:.0}%", cfg.write_ratio * 100.0)),
            ("Mtxn/s".to_string(), format!("{:.3}", f.mtps)),
            ("commits".to_string(), f.commits.to_string()),
            ("by switch".to_string(), f.switch_answers.to_string()),
            ("aborts sw/node".to_string(), format!("{}/{}", f.aborts_switch, f.aborts_store)),
            ("read µs mean/p50/p99".to_string(), us(f.read_latency)),
            ("write µs mean/p50/p99".to_string(), us(f.write_latency)),
        ];
        Ok(PointReport {
            system: "transkv",
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
