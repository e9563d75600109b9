//! TransKV as the harness sees it: name, variants, settings, one point.
//!
//! The settings are [`RackConfig`] as JSON (`--set zipf=1.2`, `--set write_ratio=0.5`, …); a
//! point builds the data center of [`crate::rack`] in the variant's mode and runs it to
//! completion. The row shows the throughput (what Figs. 9–10 plot) beside the commits, the
//! switch's answers, the aborts by source and the read and write latencies (Tables I–II).
//! A point whose hot set moves (`hot_shift_at_us`) is checked and also reports its timeline
//! ([`timeline`]): per millisecond, the commit rate and the share of transactions the switches
//! decided whole, and how that share stood before and after the move.

use crate::rack::{run_world, variant_of, RackConfig, RackFigures, RackWorld};
use pisadb_harness::{
    Experiment, ExperimentName, ExperimentOptions, FuzzCaseFn, HarnessError, PointReport, Preset, Reproduction, System,
    Variant,
};
use pisadb_report::latency::LatencySummary;
use serde_json::{json, Value};

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

/// The timeline figures of a run whose hot set moved: per millisecond bucket the commit rate
/// and the share decided wholly in the switches, that share before the move, in the first 10
/// ms after it and in the last 10 ms, and the keys the refresh inserted.
pub fn timeline(world: &RackWorld, cfg: &RackConfig) -> Value {
    let buckets = world.observer().timeline();
    let bucket_s = crate::rack::TIMELINE_BUCKET_NS as f64 * 1e-9;
    let share = |b: &[(u64, u64)]| {
        let commits: u64 = b.iter().map(|x| x.0).sum();
        100.0 * b.iter().map(|x| x.1).sum::<u64>() as f64 / commits.max(1) as f64
    };
    let part = |from: usize, to: usize| share(&buckets[from.min(buckets.len())..to.min(buckets.len())]);
    let shift = usize::try_from(cfg.hot_shift_at_us / 1_000).unwrap_or(0);
    let n = buckets.len();
    let inserted = match &world.hosts()[usize::from(crate::layout::CONTROLLER)] {
        crate::rack::RackHost::Controller(c) => c.refresher().map_or(0, |r| r.figures.inserted),
        _ => 0,
    };
    json!({
        "share_pct": buckets.iter().map(|b| share(std::slice::from_ref(b))).collect::<Vec<f64>>(),
        "commits_per_s": buckets.iter().map(|b| b.0 as f64 / bucket_s).collect::<Vec<f64>>(),
        "share_before_pct": part(0, shift),
        "share_first_10ms_after_pct": part(shift, shift + 10),
        "share_last_10ms_pct": part(n.saturating_sub(10), n),
        "keys_inserted": inserted,
    })
}

/// Runs one point: its figures, with its timeline and checked if its hot set moves.
fn run_figures(variant: &str, cfg: &RackConfig) -> Result<(RackFigures, Value), String> {
    let (world, hierarchy, f) = run_world(variant, cfg)?;
    let mut figures = serde_json::to_value(&f).map_err(|e| e.to_string())?;
    if cfg.hot_shift_at_us > 0 {
        crate::rack::check(&world, &hierarchy)?;
        if let Value::Object(map) = &mut figures {
            map.insert("timeline".into(), timeline(&world, cfg));
        }
    }
    Ok((f, figures))
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

    fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
        crate::wire::KINDS
    }
    fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
        self.variant(variant)?;
        variant_of(variant).map_err(run_error)?;
        let cfg: RackConfig = serde_json::from_value(settings.clone()).map_err(|e| run_error(e.to_string()))?;
        let (f, figures) = run_figures(variant, &cfg).map_err(run_error)?;
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
            figures,
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
