//! NetAccel as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set sf=0.1`, `--set join_positions=4`,
//! `--set link_gbps=100`, `--set query=q20`, …), range-checked with errors that name the
//! setting and the accepted values. The variants are the two plans of pattern 1: `accelerated`
//! (both relations through the switch) and `normal` (broadcast, hash join, hash aggregation on
//! the segments). The hosts' CPU costs are settings too (`costs`, [`CpuCosts::MEASURED`] by
//! default: `--set costs.stack_ns_per_datagram=500`). The TPC-H data of a scale factor is
//! generated once per process and shared by every point that uses it.

use crate::calibration::CpuCosts;
use crate::hosts::Plan;
use crate::rack::{build_with, finish, RackConfig};
use pisadb_harness::{
    Experiment, ExperimentName, ExperimentOptions, HarnessError, PointReport, Preset, Reproduction, System, Variant,
};
use pisadb_olap::tpch::{generate, Q20Data, Q20Params};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// The system, for the registry.
pub static SYSTEM: NetAccelSystem = NetAccelSystem;

/// NetAccel and its baseline.
#[derive(Debug)]
pub struct NetAccelSystem;

const VARIANTS: &[Variant] = &[
    Variant {
        name: "accelerated",
        summary: "segments deparse part_FP and lineitem_FP through the switch's join and group-by",
    },
    Variant { name: "normal", summary: "broadcast part_FP, hash join and hash aggregation on the segments" },
    Variant {
        name: "orig",
        summary:
            "Greenplum's own Q20 plan: part_FP joins partsupp first, all of lineitem_FP is aggregated (query=q20 only)",
    },
];

fn run_error(why: impl Into<String>) -> HarnessError {
    HarnessError::Run { system: "netaccel".into(), why: why.into() }
}

/// The rack of `settings`, its `costs` included.
pub fn rack_config(settings: &Value) -> Result<RackConfig, String> {
    serde_json::from_value(settings.clone()).map_err(|e| e.to_string())
}

/// Q20's data at scale factor `sf`, generated once per process (tpchgen is deterministic).
pub(crate) fn data(sf: f64) -> Result<Arc<Q20Data>, String> {
    static CACHE: Mutex<Vec<(u64, Arc<Q20Data>)>> = Mutex::new(Vec::new());
    if let Some((_, d)) = CACHE.lock().map_err(|e| e.to_string())?.iter().find(|(bits, _)| *bits == sf.to_bits()) {
        return Ok(d.clone());
    }
    // Generated outside the lock: two threads may both generate one scale factor, and one copy wins.
    let d = Arc::new(generate(sf, &Q20Params::validation()).map_err(|e| e.to_string())?);
    let mut cache = CACHE.lock().map_err(|e| e.to_string())?;
    if !cache.iter().any(|(bits, _)| *bits == sf.to_bits()) {
        cache.push((sf.to_bits(), d.clone()));
    }
    Ok(d)
}

/// The plan of a variant name, or the accepted names.
pub fn plan_of(variant: &str) -> Result<Plan, String> {
    match variant {
        "accelerated" => Ok(Plan::Accelerated),
        "normal" => Ok(Plan::Normal),
        "orig" => Ok(Plan::Orig),
        other => Err(format!("variant `{other}`: accepted accelerated, normal, orig")),
    }
}

impl System for NetAccelSystem {
    fn name(&self) -> &'static str {
        "netaccel"
    }

    fn paper(&self) -> &'static str {
        "NetAccel (The Case for Network-Accelerated Query Processing, CIDR'19), seed 002"
    }

    fn summary(&self) -> &'static str {
        "the switch joins part_FP with lineitem_FP and groups by (partkey, suppkey) for TPC-H Q20, overflowing to its control plane"
    }

    fn variants(&self) -> &'static [Variant] {
        VARIANTS
    }

    fn default_settings(&self) -> Value {
        let mut settings = serde_json::to_value(RackConfig::default()).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut settings {
            map.insert("costs".into(), serde_json::to_value(CpuCosts::MEASURED).unwrap_or(Value::Null));
        }
        settings
    }

    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
        crate::wire::KINDS
    }
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        let cfg = rack_config(settings).map_err(run_error)?;
        let plan = plan_of(variant).map_err(run_error)?;
        cfg.check().map_err(run_error)?;
        let data = data(cfg.sf).map_err(run_error)?;
        let world = build_with(plan, &cfg, &data, cfg.costs).map_err(run_error)?;
        let f = finish(plan, &cfg, world, &data).map_err(run_error)?;
        let lower_bound_ms = crate::experiments::lower_bound_ms(&data, cfg.segments, cfg.link_gbps);
        let row = vec![
            ("variant".to_string(), variant.to_string()),
            ("sf".to_string(), format!("{}", cfg.sf)),
            ("JxG".to_string(), format!("{}x{}", f.split[0], f.split[1])),
            ("link".to_string(), format!("{} Gbps", cfg.link_gbps)),
            ("response".to_string(), format!("{:.3} ms", f.response_ms)),
            ("groups".to_string(), f.groups.to_string()),
            ("answer".to_string(), if f.answer_ok { "= reference".into() } else { "WRONG".into() }),
            (
                "overflow i/ii/iii".to_string(),
                format!("{:.2}/{:.2}/{:.2}%", f.overflow_pct[0], f.overflow_pct[1], f.overflow_pct[2]),
            ),
            ("passes".to_string(), f.passes.to_string()),
        ];
        Ok(PointReport {
            system: "netaccel",
            variant: variant.to_string(),
            events: f.events,
            trace_hash: f.trace_hash.clone(),
            figures: {
                let mut figures = serde_json::to_value(&f).map_err(|e| run_error(e.to_string()))?;
                if let Value::Object(map) = &mut figures {
                    map.insert("lower_bound_ms".into(), Value::from(lower_bound_ms));
                }
                figures
            },
            row,
        })
    }

    fn experiments(&self) -> &'static [ExperimentName] {
        crate::experiments::EXPERIMENTS
    }

    fn experiment(&self, name: &str, base: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
        crate::experiments::experiment(name, base, options)
    }

    fn reproduction(&self, options: &ExperimentOptions) -> Reproduction {
        // The preset's settings, so the report's reasoning uses the costs its runs charge.
        let settings = pisadb_harness::preset_settings(self, &options.preset)
            .map_or_else(|_| self.default_settings(), |(settings, _)| settings);
        crate::experiments::reproduction(&settings, options)
    }

    fn presets(&self) -> Vec<Preset> {
        crate::presets::presets()
    }
}
