//! NetAccel as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set sf=0.1`, `--set join_positions=4`,
//! `--set link_gbps=100`, `--set query=q20`, …), range-checked with errors that name the
//! setting and the accepted values. The variants are the two plans of pattern 1: `accelerated`
//! (both relations through the switch) and `normal` (broadcast, hash join, hash aggregation on
//! the segments).

use crate::hosts::Plan;
use crate::rack::{run, RackConfig};
use pisadb_harness::{ExperimentName, ExperimentOptions, HarnessError, PointReport, System, Variant};
use serde_json::Value;

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
        serde_json::to_value(RackConfig::default()).unwrap_or(Value::Null)
    }

    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        let cfg: RackConfig = serde_json::from_value(settings.clone()).map_err(|e| run_error(e.to_string()))?;
        let plan = plan_of(variant).map_err(run_error)?;
        let f = run(plan, &cfg).map_err(run_error)?;
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
            figures: serde_json::to_value(&f).map_err(|e| run_error(e.to_string()))?,
            row,
        })
    }

    fn experiments(&self) -> &'static [ExperimentName] {
        const NAMES: [ExperimentName; 4] = {
            let e = crate::experiments::EXPERIMENTS;
            [
                ExperimentName { name: e[0].0, summary: e[0].1 },
                ExperimentName { name: e[1].0, summary: e[1].1 },
                ExperimentName { name: e[2].0, summary: e[2].1 },
                ExperimentName { name: e[3].0, summary: e[3].1 },
            ]
        };
        &NAMES
    }

    /// One experiment, its section written to `<out>/netaccel-<experiment>.md`.
    fn sweep(&self, experiment: &str, options: &ExperimentOptions) -> Result<String, HarnessError> {
        let section = crate::experiments::sweep(experiment, options.quick, options.seed).map_err(run_error)?;
        let path = options.out.join(format!("netaccel-{experiment}.md"));
        let written = std::fs::create_dir_all(&options.out).and_then(|()| std::fs::write(&path, &section));
        written.map_err(|e| run_error(format!("cannot write {}: {e}", path.display())))?;
        Ok(format!("{section}\nwrote {}", path.display()))
    }

    /// Fig. 7, Tables 1–2, Fig. 8 and the scale-factor sweep, reported in
    /// `<out>/netaccel.md` (SF 0.1 with `--quick`, else SF 1).
    fn reproduce(&self, options: &ExperimentOptions) -> Result<String, HarnessError> {
        eprintln!("NetAccel: about 10 s (--quick, SF 0.1) or 1 minute (SF 1) on a 2-core machine");
        let report = crate::experiments::reproduce(options.quick, options.seed).map_err(run_error)?;
        let path = options.out.join("netaccel.md");
        let written = std::fs::create_dir_all(&options.out).and_then(|()| std::fs::write(&path, &report));
        written.map_err(|e| run_error(format!("cannot write {}: {e}", path.display())))?;
        Ok(format!("{report}\nwrote {}", path.display()))
    }
}
