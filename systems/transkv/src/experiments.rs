//! TransKV's experiments (§VI) as data: each a list of simulated data centers that the
//! harness's runner runs under N seeds and writes as CSV, SVG and `pisadb reproduce
//! transkv`'s report, whose claims table (`claims`) puts our ratios beside the paper's.
//!
//! - `fig9a`: throughput against skew (uniform, Zipf 0.95, 0.99, 1.2), transactional
//!   read-only: TransKV against Tranx-Coor.
//! - `fig9b`: the same for non-transactional reads: TransKV-cache against No-Cache.
//! - `fig10`: throughput against the write ratio (0–100% write transactions), uniform and
//!   Zipf 0.99 (the paper's "skewed" panel does not name its exponent).
//! - `latency`: Fig. 11 and Tables I–II: read-only transactions (uniform, Zipf 0.99, 1.2) and
//!   write-only ones (uniform, Zipf 1.2), mean / p50 / p99 and CDFs.
//! - `ops` (ours, not in the paper): throughput against the ops per transaction (TLength 1–6,
//!   keys drawn independently, so spanning nodes), Zipf 0.99, read-only and 25% writes: what
//!   multi-key transactions cost in recirculations and coordination, and how often all their
//!   keys are cached.
//! - `log` (ours): TransKV with every transaction a switch accepts cloned to the controller's
//!   log (§IV-E, variant `transkv-log`) beside TransKV and Tranx-Coor, Zipf 0.99: §VI does not
//!   say whether its runs logged; the log puts one controller message on every such
//!   transaction and one on every commit at a node (its before images).
//! - `refresh` (ours, §IV-D): the hot set moves at a given time (every client's popularity
//!   ranks shift onto other keys); the share of transactions the switches decide whole, per
//!   millisecond, with the controller's cache refresh and without: a point per setting whose
//!   figures carry the per-millisecond timeline (`crate::system`), charted as time series.
//!
//! The setup is the paper's: 8 switches of 64K cached keys, 16 storage nodes, 4 client hosts,
//! YCSB keys of 16 bytes with 48-byte values over 10M records, one op per transaction (the
//! paper's transactions are single key-value operations as far as §VI tells). `--quick`
//! shrinks the key space to 1M records and the caches in proportion (6,554 keys per switch:
//! the same 5% cached) and runs fewer transactions. Every point is an independent seeded
//! simulation ([`crate::rack::run`]); threads change only the wall time.

use crate::rack::RackConfig;
use pisadb_harness::experiment::{Chart, Claim, Column, Experiment, Format, Holds, Measure, Point, Y};
use pisadb_harness::{ExperimentName, ExperimentOptions, Reproduction};
use pisadb_report::Unit;
use serde_json::Value;

/// The experiments, as `pisadb sweep --system transkv NAME` names them.
pub const EXPERIMENTS: &[ExperimentName] = &[
    ExperimentName {
        name: "fig9a",
        summary: "Fig. 9a: throughput vs skew, transactional reads, TransKV vs Tranx-Coor",
    },
    ExperimentName {
        name: "fig9b",
        summary: "Fig. 9b: throughput vs skew, non-transactional reads, TransKV-cache vs No-Cache",
    },
    ExperimentName { name: "fig10", summary: "Fig. 10: throughput vs write ratio, uniform and Zipf 0.99" },
    ExperimentName {
        name: "latency",
        summary: "Fig. 11 and Tables I-II: read and write latency (mean, p50, p99, CDF), TransKV vs Tranx-Coor",
    },
    ExperimentName { name: "ops", summary: "ours: throughput vs ops per transaction (TLength 1-6), Zipf 0.99" },
    ExperimentName {
        name: "log",
        summary: "ours: TransKV with every accepted transaction cloned to the controller's log (§IV-E), Zipf 0.99",
    },
    ExperimentName {
        name: "refresh",
        summary: "ours: switch hit rate over time when the hot set moves, with and without cache refresh (§IV-D)",
    },
];

/// When the hot set moves in the `refresh` experiment (µs).
const REFRESH_SHIFT_US: u64 = 30_000;

/// Refresh epochs of the `refresh` experiment, in µs (0: no refresh).
const REFRESH_EPOCHS_US: [u64; 3] = [0, 10_000, 40_000];

/// The `refresh` experiment's line name for epoch `e` µs.
fn refresh_label(e: u64) -> String {
    if e == 0 {
        "no refresh".to_string()
    } else {
        format!("refresh every {} ms", e / 1_000)
    }
}

/// The `refresh` experiment's data center: a smaller cache than the other experiments',
/// because a refresh moves keys one control operation at a time (about 23 per key, 20 µs
/// each): 64 keys per switch turn over in about 30 ms of simulated time, 64K would take
/// about 30 s. The hot set moves at [`REFRESH_SHIFT_US`]; the runs last about 150 ms
/// (`--quick`) or 300 ms of simulated time.
fn refresh_config(base: &RackConfig, options: &ExperimentOptions, refresh_epoch_us: u64) -> RackConfig {
    RackConfig {
        records: 100_000,
        cache_per_switch: 64,
        zipf: 0.99,
        write_ratio: 0.05,
        txns_per_client: if options.quick { 150_000 } else { 300_000 },
        refresh_epoch_us,
        hot_shift_at_us: REFRESH_SHIFT_US,
        hot_shift_ranks: 50_000,
        seed: options.seed,
        ..base.clone()
    }
}

/// Ops per transaction of the `ops` experiment.
const OPS: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 6.0];

/// Skews of Fig. 9 (0: uniform).
const SKEWS: [f64; 4] = [0.0, 0.95, 0.99, 1.2];
/// Write ratios of Fig. 10, in percent.
const WRITE_RATIOS: [f64; 6] = [0.0, 10.0, 25.0, 50.0, 75.0, 100.0];

/// The paper's data center from the preset's settings `base`; `quick` shrinks it.
fn base(base: &Value, options: &ExperimentOptions) -> Result<RackConfig, String> {
    let cfg: RackConfig = serde_json::from_value(base.clone()).map_err(|e| e.to_string())?;
    let quick = options.quick;
    Ok(RackConfig {
        records: if quick { 1_000_000 } else { 10_000_000 },
        cache_per_switch: if quick { 6_554 } else { 65_536 },
        txns_per_client: if quick { 1_000 } else { 5_000 },
        seed: options.seed,
        ..cfg
    })
}

fn skew_label(s: f64) -> String {
    if s == 0.0 {
        "uniform".into()
    } else {
        format!("Zipf {s}")
    }
}

/// The CSV columns of the point experiments.
fn columns() -> Vec<Column> {
    let mut c: Vec<Column> = ["zipf", "write_ratio", "records", "cache_per_switch"].map(Column::setting).to_vec();
    c.extend(["mtps", "commits", "switch_answers", "aborts_switch", "aborts_store"].map(Column::figure));
    let latencies = [
        ("read_latency_us_mean", "read_latency.latency_us_mean"),
        ("read_latency_us_p50", "read_latency.latency_us_p50"),
        ("read_latency_us_p99", "read_latency.latency_us_p99"),
        ("write_latency_us_mean", "write_latency.latency_us_mean"),
        ("write_latency_us_p50", "write_latency.latency_us_p50"),
        ("write_latency_us_p99", "write_latency.latency_us_p99"),
    ];
    c.extend(latencies.map(|(header, key)| Column::Figure { header, key, format: Format::Plain }));
    c.extend(["recirculations", "events"].map(Column::figure));
    c.push(Column::Text { header: "trace_hash", key: "trace_hash" });
    c
}

/// Experiment `name` as data, from the preset's settings `base`.
pub fn experiment(name: &str, base: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
    let base = self::base(base, options)?;
    let mut points = Vec::new();
    let mut add = |panel: &str, variants: &[&str], x: f64, cfg: RackConfig| -> Result<(), String> {
        let settings = serde_json::to_value(&cfg).map_err(|e| e.to_string())?;
        points.extend(variants.iter().map(|v| Point::new(panel, v, x, settings.clone()).x_name(skew_label(cfg.zipf))));
        Ok(())
    };
    let tx: &[&str] = &["transkv", "tranx-coor"];
    let throughput = Chart::figure("mtps", 1e6, "throughput (txn/s)", Unit::Count);
    let (title, x_label, x_unit, charts) = match name {
        "fig9a" => {
            for s in SKEWS {
                add("transactional reads", tx, s, RackConfig { zipf: s, write_ratio: 0.0, ..base.clone() })?;
            }
            (
                "TransKV Fig. 9a: throughput vs skew, read-only transactions",
                "Zipf exponent (0: uniform)",
                Unit::Count,
                vec![throughput],
            )
        }
        "fig9b" => {
            for s in SKEWS {
                let cfg = RackConfig { zipf: s, write_ratio: 0.0, ..base.clone() };
                add("non-transactional reads", &["transkv-cache", "no-cache"], s, cfg)?;
            }
            (
                "TransKV Fig. 9b: throughput vs skew, non-transactional reads",
                "Zipf exponent (0: uniform)",
                Unit::Count,
                vec![throughput],
            )
        }
        "fig10" => {
            for s in [0.0, 0.99] {
                for w in WRITE_RATIOS {
                    add(&skew_label(s), tx, w, RackConfig { zipf: s, write_ratio: w / 100.0, ..base.clone() })?;
                }
            }
            ("TransKV Fig. 10: throughput vs write ratio", "write transactions", Unit::Percent, vec![throughput])
        }
        "latency" => {
            for s in [0.0, 0.99, 1.2] {
                add("reads", tx, s, RackConfig { zipf: s, write_ratio: 0.0, ..base.clone() })?;
            }
            for s in [0.0, 1.2] {
                add("writes", tx, s, RackConfig { zipf: s, write_ratio: 1.0, ..base.clone() })?;
            }
            let cdf = |key, label: &str| Chart {
                y_label: label.into(),
                y_unit: Unit::Seconds,
                y: Y::Distribution { key, scale: 1e-6 },
            };
            let charts = vec![
                cdf("read_cdf_us", "read latency"),
                cdf("write_cdf_us", "write latency"),
                Chart::figure("read_latency.latency_us_mean", 1e-6, "mean read latency", Unit::Seconds),
                Chart::figure("write_latency.latency_us_mean", 1e-6, "mean write latency", Unit::Seconds),
            ];
            ("TransKV Fig. 11: latency CDFs", "Zipf exponent (0: uniform)", Unit::Count, charts)
        }
        "log" => {
            for w in [0.0, 25.0, 100.0] {
                let cfg = RackConfig { write_ratio: w / 100.0, ..base.clone() };
                add("Zipf 0.99", &["transkv", "transkv-log", "tranx-coor"], w, cfg)?;
            }
            (
                "TransKV: the cost of cloning every transaction to the controller's log (§IV-E)",
                "write transactions",
                Unit::Percent,
                vec![throughput],
            )
        }
        "ops" => {
            for (panel, w) in [("read-only", 0.0), ("25% writes", 0.25)] {
                for n in OPS {
                    add(panel, tx, n, RackConfig { write_ratio: w, ops_per_txn: n as u8, ..base.clone() })?;
                }
            }
            (
                "TransKV: throughput vs ops per transaction, Zipf 0.99",
                "ops per transaction",
                Unit::Integer,
                vec![throughput],
            )
        }
        "refresh" => return refresh(&base, options),
        other => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            return Err(format!("no experiment `{other}`; accepted: {}", names.join(", ")));
        }
    };
    let name = EXPERIMENTS.iter().find(|e| e.name == name).map_or("", |e| e.name);
    let mut e = Experiment::new("transkv", name, title, x_label, x_unit);
    e.points = points;
    e.charts = charts;
    e.columns = columns();
    e.claims = claims(name);
    Ok(e)
}

/// The `refresh` experiment: one point per refresh epoch, charted as time series of the share
/// of transactions the switches decide whole and of the commit rate.
fn refresh(base: &RackConfig, options: &ExperimentOptions) -> Result<Experiment, String> {
    let title = "TransKV: the hot set moves at 30 ms (ours, §IV-D)";
    let mut e = Experiment::new("transkv", "refresh", title, "simulated time", Unit::Seconds);
    for epoch in REFRESH_EPOCHS_US {
        let cfg = refresh_config(base, options, epoch);
        let settings = serde_json::to_value(&cfg).map_err(|err| err.to_string())?;
        e.points
            .push(Point::new("hot set moves at 30 ms", "transkv", epoch as f64, settings).series(refresh_label(epoch)));
    }
    let step = crate::rack::TIMELINE_BUCKET_NS as f64 * 1e-9;
    e.charts = vec![
        Chart {
            y_label: "decided wholly in the switches".into(),
            y_unit: Unit::Percent,
            y: Y::Timeline { key: "timeline.share_pct", step },
        },
        Chart {
            y_label: "commits per second".into(),
            y_unit: Unit::Count,
            y: Y::Timeline { key: "timeline.commits_per_s", step },
        },
    ];
    e.chart_columns = 2;
    let mut columns: Vec<Column> =
        ["refresh_epoch_us", "hot_shift_at_us", "cache_per_switch"].map(Column::setting).to_vec();
    columns.extend(["commits", "timeline.keys_inserted"].map(Column::figure));
    for (header, key) in [
        ("share_before_pct", "timeline.share_before_pct"),
        ("share_first_10ms_after_pct", "timeline.share_first_10ms_after_pct"),
        ("share_last_10ms_pct", "timeline.share_last_10ms_pct"),
    ] {
        columns.push(Column::Figure { header, key, format: Format::Fixed(1) });
    }
    columns.push(Column::Text { header: "trace_hash", key: "trace_hash" });
    e.columns = columns;
    Ok(e)
}

/// The paper's claims (§VI) an experiment checks.
fn claims(name: &str) -> Vec<Claim> {
    let mtps = |panel: &str, a: &str, b: &str, x: f64| Measure::ratio(panel, a, b, x, "mtps");
    let mut claims = Vec::new();
    match name {
        "fig9a" => {
            let p = "transactional reads";
            claims.push(Claim::ratio(
                "TransKV over Tranx-Coor, read-only transactions, uniform: 1.2×",
                "Fig. 9a",
                1.2,
                mtps(p, "transkv", "tranx-coor", 0.0),
            ));
            claims.push(Claim::ratio(
                "TransKV over Tranx-Coor, read-only transactions, skewed: up to 4.4× (ours at Zipf 1.2)",
                "Fig. 9a",
                4.4,
                mtps(p, "transkv", "tranx-coor", 1.2),
            ));
        }
        "fig9b" => {
            let p = "non-transactional reads";
            claims.push(Claim::ratio(
                "TransKV-cache over No-Cache, uniform: 1.07×",
                "Fig. 9b",
                1.07,
                mtps(p, "transkv-cache", "no-cache", 0.0),
            ));
            claims.push(Claim::ratio(
                "TransKV-cache over No-Cache, skewed: up to 5× (ours at Zipf 1.2)",
                "Fig. 9b",
                5.0,
                mtps(p, "transkv-cache", "no-cache", 1.2),
            ));
        }
        "fig10" => {
            for w in WRITE_RATIOS {
                claims.push(Claim {
                    words: format!("uniform: TransKV over Tranx-Coor 1.15×–1.25× (at {w}% writes)"),
                    source: "Fig. 10a".into(),
                    paper: Some(1.2),
                    ours: mtps("uniform", "transkv", "tranx-coor", w),
                    holds: Holds::Above(1.0),
                    reason: None,
                });
            }
            for w in WRITE_RATIOS {
                claims.push(Claim {
                    words: format!("skewed: TransKV over Tranx-Coor 1.5×–3× (ours at Zipf 0.99, {w}% writes)"),
                    source: "Fig. 10b".into(),
                    paper: None,
                    ours: mtps("Zipf 0.99", "transkv", "tranx-coor", w),
                    holds: Holds::Above(1.0),
                    reason: None,
                });
            }
        }
        "latency" => {
            for (x, paper) in [(0.0, 0.92), (0.99, 0.85), (1.2, 0.68)] {
                claims.push(Claim::ratio(
                    format!(
                        "mean read latency, TransKV over Tranx-Coor, {}: {:+.0}%",
                        skew_label(x),
                        (paper - 1.0) * 100.0
                    ),
                    "Table I",
                    paper,
                    Measure::ratio("reads", "transkv", "tranx-coor", x, "read_latency.latency_us_mean"),
                ));
            }
            claims.push(Claim {
                words: "mean write latency, TransKV over Tranx-Coor, uniform: about equal".into(),
                source: "Table II".into(),
                paper: Some(1.0),
                ours: Measure::ratio("writes", "transkv", "tranx-coor", 0.0, "write_latency.latency_us_mean"),
                holds: Holds::Within(0.9, 1.1),
                reason: None,
            });
            claims.push(Claim::ratio(
                "mean write latency, Zipf 1.2: −24%",
                "Table II",
                0.76,
                Measure::ratio("writes", "transkv", "tranx-coor", 1.2, "write_latency.latency_us_mean"),
            ));
            claims.push(Claim::ratio(
                "p50 write latency, Zipf 1.2: −34%",
                "Table II",
                0.66,
                Measure::ratio("writes", "transkv", "tranx-coor", 1.2, "write_latency.latency_us_p50"),
            ));
        }
        _ => {}
    }
    claims
}

/// What `pisadb reproduce transkv` runs and says.
pub fn reproduction(base: &Value, options: &ExperimentOptions) -> Reproduction {
    let b = self::base(base, options).unwrap_or_default();
    Reproduction {
        title: "TransKV (seed 003) on PisaDB".into(),
        intro: format!(
            "`pisadb reproduce transkv{}` (seed {}): {} records, {} cached keys per switch × 8 switches, {} transactions \
             per client host × 4, {} in flight each, one op per transaction.",
            if options.quick { " --quick" } else { "" },
            options.seed,
            b.records,
            b.cache_per_switch,
            b.txns_per_client,
            b.outstanding
        ),
        experiments: EXPERIMENTS.iter().map(|e| e.name).filter(|n| *n != "refresh").collect(),
        notes: format!("## Where the model and the paper's prototype must differ\n\n{DIFFERENCES}\n"),
    }
}

/// What the report says about the model against the BMv2 prototype.
const DIFFERENCES: &str = "- The paper ran eight BMv2 software switches on Mininet with Python (Scapy) clients and a Python shim over LevelDB: every hop and every host was a software process, so its latencies are tens of milliseconds (Tables I–II: 50–120 ms). Ours are modelled Tofino switches (sub-microsecond passes), 10 GbE links and host costs measured by `benches/costs.rs` (a real LSM store's get and put, our own handlers; `CALIBRATION.md`), so absolute numbers are microseconds and not comparable; only ratios are.\n- Tranx-Coor's cost is the controller: every transaction takes four of its messages. Its throughput is the controller's message rate over four (2 cores in our model), so TransKV's gain grows with the share of transactions the switches decide without it — the hit ratio of the cache, set by the skew. The paper's controller was one Python process; its bottleneck may have been elsewhere.\n- Our routing gives each pod a home core (a tree), so the core switch of the other pod only forwards; the paper's fat tree does not say how it kept a key's timestamps in one switch.\n- Under the uniform workload the switches answer about 10% of reads although they cache 5% of the keys: YCSB's scrambling hashes ranks onto keys, so some keys are drawn twice as often and about a third never; the cached ones are the hottest of those.
- With writes under skew, TransKV's switches abort more than Tranx-Coor's nodes do (Fig. 10b's rows): a switch sees a hot key's requests microseconds apart and in arrival order, so out-of-order timestamps meet often; an abort costs only a round trip to the switch.
- Transactions are one operation each (the paper's read and write transactions); multi-op ones work (tests) but are not charted.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_has_points_and_its_claims_name_them() {
        let options = ExperimentOptions::new(true, 1, "/nonexistent");
        let defaults = serde_json::to_value(RackConfig::default()).unwrap();
        for e in EXPERIMENTS {
            let experiment = experiment(e.name, &defaults, &options).unwrap();
            assert!(!experiment.points.is_empty(), "{}", e.name);
            for claim in &experiment.claims {
                let Measure::Ratio { panel, series, over, x, .. } = &claim.ours else { panic!("ratios only") };
                assert!(experiment.find(panel, series, *x).is_some(), "{}: {claim:?}", e.name);
                assert!(experiment.find(panel, over, *x).is_some(), "{}: {claim:?}", e.name);
            }
        }
        assert!(experiment("nope", &defaults, &options).is_err());
    }
}
