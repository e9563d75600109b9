//! SwitchTx's experiments (`pisadb sweep switchtx NAME`, `pisadb reproduce switchtx`): sets of
//! simulated racks run in parallel, written as CSV and SVG, and a report that puts our ratios
//! beside the paper's headline figures.
//!
//! - `fig10`: YCSB-T at θ 0.8 and 0.99: throughput, P50/P99 latency and lock time of every
//!   variant (FaSST and the cumulative ablation +GaS, +Tree-GaS, +Reorder, +MPL).
//! - `fig11`: every thread of every server runs one transaction at a time (MPL 1, uniform
//!   keys) over 2..8 servers: P50 and P99 of coordinating in a server (FaSST) against in the
//!   switches (+Tree-GaS), in one rack (one switch) and in three (S0 over the ToRs).
//! - `fig13`: static MPL 1..16 per thread (the +Reorder configuration) against the adaptive
//!   admission control, YCSB-T θ 0.99.
//! - `fig14`: threads per server: YCSB-T in three racks and in one, TPC-C in three.
//! - `fig15`: Zipf θ from 0.5 to 0.99.
//! - `fig17`: servers per transaction (1..8), FaSST against SwitchTx.
//!
//! - `fig10cd`: TPC-C NewOrder + Payment (every NewOrder item from a remote warehouse), 24 and
//!   4 warehouses per server, static MPL 1, every variant.
//! - `fig16`: TPC-C against warehouses per server.
//!
//! - `fig17b`: TPC-C at 24 warehouses per server against the share of remote NewOrder items.
//!
//! - `failover` (not a paper figure; §3.5): server 2 fails as the window opens and stays down;
//!   throughput and latency during the outage with promotion of its backup (against the lease
//!   the manager grants) and without (the transactions that touch it wait for its restart).
//!
//! Eris is not covered. Every point is an independent
//! seeded simulation, so the thread count changes only the wall time. `quick` runs 8 threads
//! per server and shorter windows; the full runs use the paper's 24.

use crate::rack::{run, run_with, RackConfig, RackFigures, ABLATION, EVENTS_MAX};
use crate::server::Workload;
use pisadb_harness::{ExperimentName, ExperimentOptions};
use pisadb_report::{run_all, write_csv, write_svg, Panel, Series, Unit};
use pisadb_sim::{Crash, Faults, Target};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// The experiments, as `pisadb sweep switchtx NAME` names them.
pub const EXPERIMENTS: &[ExperimentName] = &[
    ExperimentName {
        name: "fig10",
        summary: "Fig. 10a/b: YCSB-T θ 0.8 and 0.99, every variant: throughput, P50/P99, lock time",
    },
    ExperimentName {
        name: "fig10cd",
        summary: "Fig. 10c/d: TPC-C, 24 and 4 warehouses per server, MPL 1, every variant",
    },
    ExperimentName {
        name: "fig11",
        summary: "Fig. 11: P50/P99 over 2..8 servers per transaction: in-server vs in-switch, one switch vs several",
    },
    ExperimentName {
        name: "fig13",
        summary: "Fig. 13: static MPL 1..16 per thread vs adaptive admission control, θ 0.99",
    },
    ExperimentName {
        name: "fig14",
        summary: "Fig. 14a/b/c: throughput against threads per server: YCSB-T in three racks and one, TPC-C",
    },
    ExperimentName { name: "fig15", summary: "Fig. 15: throughput and P50 against Zipf θ 0.5..0.99" },
    ExperimentName { name: "fig16", summary: "Fig. 16: TPC-C throughput and P50 against warehouses per server, MPL 1" },
    ExperimentName {
        name: "fig17",
        summary: "Fig. 17a: throughput against servers per transaction, FaSST vs SwitchTx",
    },
    ExperimentName {
        name: "failover",
        summary:
            "§3.5: a server fails; throughput during the outage with backup promotion (against the lease) and without",
    },
    ExperimentName {
        name: "fig17b",
        summary: "Fig. 17b: TPC-C throughput against the share of remote NewOrder items, FaSST vs SwitchTx",
    },
];

/// What `reproduce --quick` runs (the full reproduction runs every experiment, in order).
pub const QUICK: [&str; 4] = ["fig10", "fig10cd", "fig11", "fig13"];

/// One simulated point.
#[derive(Clone, Debug)]
struct Point {
    /// The panel group (θ, rack shape, …).
    panel: String,
    /// The line.
    series: String,
    /// The variant run.
    variant: &'static str,
    /// The x value.
    x: f64,
    /// The rack.
    cfg: RackConfig,
    /// What goes wrong in it, if anything.
    faults: Option<Faults>,
}

/// What a chart shows of each point.
#[derive(Clone, Copy, Debug)]
enum Metric {
    Throughput,
    P50,
    P99,
    Lock,
}

impl Metric {
    fn value(self, f: &RackFigures) -> f64 {
        match self {
            Metric::Throughput => f.mtps * 1e6,
            Metric::P50 => f.p50_us * 1e-6,
            Metric::P99 => f.p99_us * 1e-6,
            Metric::Lock => f.lock_us_mean * 1e-6,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput, txn/s",
            Metric::P50 => "P50 latency",
            Metric::P99 => "P99 latency",
            Metric::Lock => "mean lock time",
        }
    }
    fn unit(self) -> Unit {
        match self {
            Metric::Throughput => Unit::Count,
            _ => Unit::Seconds,
        }
    }
}

/// An experiment's points and charts.
struct Plan {
    name: &'static str,
    title: String,
    x_label: &'static str,
    x_unit: Unit,
    metrics: Vec<Metric>,
    points: Vec<Point>,
}

/// The paper's YCSB-T setup; `quick` runs 8 threads per server and a shorter window.
pub fn base(options: &ExperimentOptions) -> RackConfig {
    RackConfig {
        threads: if options.quick { 8 } else { 24 },
        warmup_us: if options.quick { 200 } else { 500 },
        measure_us: if options.quick { 500 } else { 2_000 },
        seed: options.seed,
        ..RackConfig::default()
    }
}

fn with_theta(cfg: &RackConfig, theta: f64) -> RackConfig {
    RackConfig { workload: Workload { theta, ..cfg.workload.clone() }, ..cfg.clone() }
}

fn plan(name: &str, options: &ExperimentOptions) -> Result<Plan, String> {
    let base = base(options);
    let mut points = Vec::new();
    let mut add = |panel: &str, series: &str, variant: &'static str, x: f64, cfg: RackConfig| {
        points.push(Point { panel: panel.into(), series: series.into(), variant, x, cfg, faults: None });
    };
    let all = |x: f64| ABLATION.iter().map(move |&v| (v, x));
    let (title, x_label, x_unit, metrics) = match name {
        "fig10" => {
            for theta in [0.8, 0.99] {
                for (v, _) in all(theta) {
                    add("YCSB-T", v, v, theta, with_theta(&base, theta));
                }
                // Eris: 40 shards at most, so 5 threads per server (the paper's setup).
                add("YCSB-T", "eris", "eris", theta, RackConfig { threads: 5, ..with_theta(&base, theta) });
            }
            (
                "SwitchTx Fig. 10a/b: YCSB-T, every variant".to_string(),
                "Zipf θ",
                Unit::Count,
                vec![Metric::Throughput, Metric::P50, Metric::P99, Metric::Lock],
            )
        }
        "fig10cd" | "fig16" => {
            let warehouses: &[u16] = match (name, options.quick) {
                ("fig10cd", _) => &[24, 4],
                (_, true) => &[2, 8, 24],
                _ => &[1, 2, 4, 8, 16, 24],
            };
            for &w in warehouses {
                let workload = Workload { tpcc_warehouses: w, ..base.workload.clone() };
                for (v, _) in all(f64::from(w)) {
                    add("TPC-C", v, v, f64::from(w), RackConfig { mpl: 1, workload: workload.clone(), ..base.clone() });
                }
            }
            let title = if name == "fig10cd" {
                "SwitchTx Fig. 10c/d: TPC-C NewOrder + Payment (every item remote), every variant"
            } else {
                "SwitchTx Fig. 16: TPC-C against warehouses per server"
            };
            let metrics = if name == "fig10cd" {
                vec![Metric::Throughput, Metric::P50, Metric::P99, Metric::Lock]
            } else {
                vec![Metric::Throughput, Metric::P50]
            };
            (title.to_string(), "warehouses per server", Unit::Integer, metrics)
        }
        "fig17b" => {
            let shares: &[f64] = if options.quick { &[0.0, 0.5, 1.0] } else { &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0] };
            for &share in shares {
                let workload = Workload { tpcc_warehouses: 24, remote_items: share, ..base.workload.clone() };
                for v in ["fasst", "switchtx"] {
                    let cfg = RackConfig { mpl: 1, workload: workload.clone(), ..base.clone() };
                    add("TPC-C, 24 warehouses per server", v, v, share * 100.0, cfg);
                }
            }
            (
                "SwitchTx Fig. 17b: TPC-C against remote NewOrder items".to_string(),
                "remote NewOrder items",
                Unit::Percent,
                vec![Metric::Throughput],
            )
        }
        "fig11" => {
            // §5.3.1: every thread of every server runs one GaS-coordinated operation at a
            // time (MPL 1) over n servers; uniform keys keep contention out of the latency.
            // Ours is a whole write transaction (its lock, validate, replicate and commit
            // gathers), not a bare barrier: the paper's GaS microbenchmark has no data.
            let threads = base.threads;
            for multi_rack in [false, true] {
                let panel = if multi_rack { "several switches (S0 + ToRs)" } else { "one switch (one rack)" };
                for n in 2..=8u8 {
                    let workload =
                        Workload { theta: 0.0, keys: n, partitions: n, write_fraction: 1.0, ..base.workload.clone() };
                    let cfg = RackConfig { threads, mpl: 1, multi_rack, workload, ..base.clone() };
                    for (series, v) in [("in-server (FaSST)", "fasst"), ("in-switch", "tree-gas")] {
                        add(panel, series, v, f64::from(n), cfg.clone());
                    }
                }
            }
            (
                "SwitchTx Fig. 11: P50 and P99 latency of switch-coordinated transactions against their servers"
                    .to_string(),
                "servers per transaction",
                Unit::Integer,
                vec![Metric::P50, Metric::P99],
            )
        }
        "fig13" => {
            let hot = with_theta(&base, 0.99);
            for mpl in [1u8, 2, 4, 8, 16] {
                add("θ 0.99", "static MPL", "reorder", f64::from(mpl), RackConfig { mpl, ..hot.clone() });
            }
            // The adaptive run does not depend on x: one run, drawn across the static range.
            for x in [1.0, 16.0] {
                add("θ 0.99", "adaptive", "switchtx", x, RackConfig { mpl_max: 16, ..hot.clone() });
            }
            (
                "SwitchTx Fig. 13: static MPL per thread vs adaptive admission control".to_string(),
                "MPL per thread (static)",
                Unit::Integer,
                vec![Metric::Throughput, Metric::P50],
            )
        }
        "fig14" => {
            let threads: &[u16] = if options.quick { &[2, 4, 8] } else { &[4, 8, 16, 24] };
            for multi_rack in [true, false] {
                let panel = if multi_rack { "YCSB-T, three racks" } else { "YCSB-T, one rack" };
                for &t in threads {
                    for v in ["fasst", "tree-gas", "switchtx"] {
                        add(panel, v, v, f64::from(t), RackConfig { threads: t, multi_rack, ..base.clone() });
                    }
                }
            }
            // Fig. 14c: TPC-C (24 warehouses per server, MPL 1, as Fig. 10c) in three racks.
            let tpcc = Workload { tpcc_warehouses: 24, ..base.workload.clone() };
            for &t in threads {
                for v in ["fasst", "tree-gas", "switchtx"] {
                    let cfg = RackConfig { threads: t, mpl: 1, workload: tpcc.clone(), ..base.clone() };
                    add("TPC-C 24 wh/server, three racks", v, v, f64::from(t), cfg);
                }
            }
            (
                "SwitchTx Fig. 14a/b/c: throughput against threads per server".to_string(),
                "threads per server",
                Unit::Integer,
                vec![Metric::Throughput],
            )
        }
        "fig15" => {
            for theta in [0.5, 0.6, 0.7, 0.8, 0.9, 0.99] {
                for (v, _) in all(theta) {
                    add("YCSB-T", v, v, theta, with_theta(&base, theta));
                }
            }
            (
                "SwitchTx Fig. 15: YCSB-T against Zipf θ".to_string(),
                "Zipf θ",
                Unit::Count,
                vec![Metric::Throughput, Metric::P50],
            )
        }
        "failover" => {
            // Server 2 fails as the window opens and is down until well after the drain; the
            // servers log (a restart needs it). The window is twice the usual, and the timeout a
            // quarter of it (1 ms in the full run: the default 2 ms would outlast half of it,
            // and much less than 1 ms times out loaded transactions that are only slow).
            let base = RackConfig { measure_us: 2 * base.measure_us, ..base.clone() };
            let down_ns = 20 * base.measure_us * 1_000;
            let crash = Crash { target: Target::Node(2), at_ns: base.warmup_us * 1_000, down_ns };
            let faults = Faults {
                seed: options.seed,
                loss: 0.0,
                duplicate: 0.0,
                jitter_ns: 0,
                reorder: false,
                slow: Vec::new(),
                crashes: vec![crash],
                heal_at_ns: 0,
            };
            let cfg = RackConfig { durable: true, timeout_us: base.measure_us / 4, ..base.clone() };
            let leases: &[u64] = if options.quick { &[25, 100, 400] } else { &[25, 50, 100, 200, 400] };
            let panel = "YCSB-T θ 0.8, server 2 down";
            let mut with = |series: &str, x: u64, lease_us: u64| {
                let cfg = RackConfig { lease_us, ..cfg.clone() };
                points.push(Point {
                    panel: panel.into(),
                    series: series.into(),
                    variant: "switchtx",
                    x: x as f64,
                    cfg,
                    faults: Some(faults.clone()),
                });
            };
            for &lease in leases {
                with("promotion", lease, lease);
            }
            // Without leases the run does not depend on x: one run, drawn across the range.
            for x in [leases[0], leases[leases.len() - 1]] {
                with("restart from the log", x, 0);
            }
            (
                "SwitchTx failover (§3.5): a server fails, with and without promotion of its backup".to_string(),
                "lease, µs",
                Unit::Count,
                vec![Metric::Throughput, Metric::P50, Metric::P99],
            )
        }
        "fig17" => {
            for n in 1..=8u8 {
                let workload = Workload { partitions: n, ..base.workload.clone() };
                for v in ["fasst", "switchtx"] {
                    add("YCSB-T θ 0.8", v, v, f64::from(n), RackConfig { workload: workload.clone(), ..base.clone() });
                }
            }
            (
                "SwitchTx Fig. 17a: throughput against servers per transaction".to_string(),
                "servers per transaction",
                Unit::Integer,
                vec![Metric::Throughput],
            )
        }
        other => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            return Err(format!("no experiment `{other}`; accepted: {}", names.join(", ")));
        }
    };
    let name = EXPERIMENTS.iter().find(|e| e.name == name).map_or("", |e| e.name);
    Ok(Plan { name, title, x_label, x_unit, metrics, points })
}

/// Runs every point of `plan` on `threads` threads; results in the plan's order.
fn run_plan(plan: &Plan, threads: usize) -> Result<Vec<RackFigures>, String> {
    let describe = |p: &Point| format!("{} {} x={}", p.panel, p.series, p.x);
    run_all(&plan.points, threads, plan.name, describe, |p| {
        let f = match &p.faults {
            None => run(p.variant, &p.cfg),
            Some(faults) => run_with(p.variant, &p.cfg, Some(faults.clone()), EVENTS_MAX).map(|(f, _)| f),
        };
        f.map_err(|e| format!("{} {} {} x={}: {e}", plan.name, p.panel, p.series, p.x))
    })
    .into_iter()
    .collect()
}

const HEADER: [&str; 20] = [
    "experiment",
    "panel",
    "series",
    "variant",
    "x",
    "threads",
    "theta",
    "mpl",
    "multi_rack",
    "mtps",
    "p50_us",
    "p99_us",
    "lock_us_mean",
    "aborts",
    "commits",
    "timeouts",
    "mpl_mean",
    "checked_commits",
    "events",
    "trace_hash",
];

/// Writes `<out>/switchtx-<experiment>.csv` and `.svg`.
fn write_outputs(plan: &Plan, results: &[RackFigures], out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let rows: Vec<Vec<String>> = plan
        .points
        .iter()
        .zip(results)
        .map(|(p, f)| {
            vec![
                plan.name.to_string(),
                p.panel.clone(),
                p.series.clone(),
                p.variant.to_string(),
                p.x.to_string(),
                p.cfg.threads.to_string(),
                p.cfg.workload.theta.to_string(),
                p.cfg.mpl.to_string(),
                p.cfg.multi_rack.to_string(),
                format!("{:.4}", f.mtps),
                format!("{:.2}", f.p50_us),
                format!("{:.2}", f.p99_us),
                format!("{:.2}", f.lock_us_mean),
                f.aborts.to_string(),
                f.commits.to_string(),
                f.timeouts.to_string(),
                format!("{:.2}", f.mpl_mean),
                f.checked_commits.to_string(),
                f.events.to_string(),
                f.trace_hash.clone(),
            ]
        })
        .collect();
    write_csv(&out.join(format!("switchtx-{}.csv", plan.name)), &HEADER, &rows).map_err(|e| e.to_string())?;
    let mut panels: Vec<Panel> = Vec::new();
    for &metric in &plan.metrics {
        for (p, f) in plan.points.iter().zip(results) {
            let title = format!("{}: {}", p.panel, metric.label());
            let k = match panels.iter().position(|q| q.title == title) {
                Some(k) => k,
                None => {
                    panels.push(Panel {
                        title,
                        x_label: plan.x_label.into(),
                        x_unit: plan.x_unit,
                        y_label: metric.label().into(),
                        y_unit: metric.unit(),
                        series: Vec::new(),
                    });
                    panels.len() - 1
                }
            };
            let y = metric.value(f);
            match panels[k].series.iter_mut().find(|s| s.name == p.series) {
                Some(s) => s.points.push((p.x, y)),
                None => panels[k].series.push(Series::new(p.series.clone(), vec![(p.x, y)])),
            }
        }
    }
    write_svg(&out.join(format!("switchtx-{}.svg", plan.name)), &plan.title, panels.len().min(2), &panels)
        .map_err(|e| e.to_string())
}

fn find<'a>(plan: &Plan, r: &'a [RackFigures], series: &str, x: f64) -> Option<&'a RackFigures> {
    plan.points.iter().position(|p| p.series == series && (p.x - x).abs() < 1e-9).map(|i| &r[i])
}

/// A table of every point of `plan`.
fn table(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = format!(
        "| {} | {} | Mtxn/s | P50 µs | P99 µs | lock µs | aborts | MPL |\n|---|---|---|---|---|---|---|---|\n",
        plan.x_label, "line"
    );
    // Name the panel too when there are several (fig11, fig14 share series names across them).
    let panels: BTreeSet<&str> = plan.points.iter().map(|p| p.panel.as_str()).collect();
    for (p, f) in plan.points.iter().zip(r) {
        let line = if panels.len() > 1 { format!("{}: {}", p.panel, p.series) } else { p.series.clone() };
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {:.1} | {:.1} | {:.1} | {} | {:.1} |",
            p.x, line, f.mtps, f.p50_us, f.p99_us, f.lock_us_mean, f.aborts, f.mpl_mean
        );
    }
    s
}

/// Our ratios beside the paper's headline figures (fig10).
fn fig10_claims(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = String::from("| paper (§5.2) | ours | note |\n|---|---|---|\n");
    let get = |v: &str, theta: f64| find(plan, r, v, theta);
    for theta in [0.8, 0.99] {
        if let (Some(e), Some(f), Some(x)) = (get("eris", theta), get("fasst", theta), get("switchtx", theta)) {
            let _ = writeln!(
                s,
                "| θ {theta}: Eris at 37.7% (0.8) / 55.0% (0.99) of FaSST, 21.1% / 30.3% of SwitchTx | {:.1}% of FaSST, {:.1}% of SwitchTx | Eris on 40 threads, the others on all |",
                e.mtps / f.mtps * 100.0,
                e.mtps / x.mtps * 100.0
            );
        }
        let (Some(f), Some(g), Some(t), Some(o), Some(x)) = (
            get("fasst", theta),
            get("gas", theta),
            get("tree-gas", theta),
            get("reorder", theta),
            get("switchtx", theta),
        ) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| θ {theta}: SwitchTx up to 1.81× FaSST's throughput | {:.2}× | all four techniques |",
            x.mtps / f.mtps
        );
        let _ = writeln!(
            s,
            "| θ {theta}: +GaS 1.63× (0.8) / 1.48× (0.99) FaSST | {:.2}× | S0 alone coordinates |",
            g.mtps / f.mtps
        );
        let _ =
            writeln!(s, "| θ {theta}: +Tree-GaS +2.1%..7.8% over +GaS | {:+.1}% | |", (t.mtps / g.mtps - 1.0) * 100.0);
        let _ = writeln!(
            s,
            "| θ {theta}: +Reorder up to +7.2% | {:+.1}% | strict-priority ports and servers sorting their receive batches |",
            (o.mtps / t.mtps - 1.0) * 100.0
        );
        let _ = writeln!(
            s,
            "| θ {theta}: +MPL +5.0% (0.8) / +13.4% (0.99) | {:+.1}% | Listing 1, epochs of 100 µs |",
            (x.mtps / o.mtps - 1.0) * 100.0
        );
        let _ = writeln!(
            s,
            "| θ {theta}: in-switch GaS cuts P50 latency by up to 40.4% | {:+.1}% (+Tree-GaS vs FaSST) | |",
            (t.p50_us / f.p50_us - 1.0) * 100.0
        );
        let _ = writeln!(
            s,
            "| θ {theta}: lock time −41.5% with +GaS (θ 0.8) | {:+.1}% | |",
            (g.lock_us_mean / f.lock_us_mean - 1.0) * 100.0
        );
    }
    s
}

/// One of our figures at a warehouse count.
type Figure<'a> = Box<dyn Fn(f64) -> Option<f64> + 'a>;

/// Our TPC-C ratios beside the paper's (fig10cd): 24 (low) and 4 (high contention)
/// warehouses per server.
fn fig10cd_claims(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = String::from("| paper (§5.2, TPC-C) | ours 24 wh/server | ours 4 wh/server |\n|---|---|---|\n");
    let get = |v: &str, w: f64| find(plan, r, v, w);
    let ratio = |a: &str, b: &str, w: f64| Some(get(a, w)?.mtps / get(b, w)?.mtps);
    let cell = |x: Option<f64>, pct: bool| match (x, pct) {
        (Some(x), true) => format!("{:+.1}%", (x - 1.0) * 100.0),
        (Some(x), false) => format!("{x:.2}×"),
        (None, _) => "—".into(),
    };
    let p50 = |w: f64| Some(get("tree-gas", w)?.p50_us / get("fasst", w)?.p50_us);
    let rows: [(&str, Figure<'_>, bool); 6] = [
        ("SwitchTx up to 1.87× FaSST", Box::new(|w| ratio("switchtx", "fasst", w)), false),
        ("+GaS 1.54× (low) / 1.35× (high) FaSST", Box::new(|w| ratio("gas", "fasst", w)), false),
        ("+Tree-GaS +2.1%..7.8% over +GaS", Box::new(|w| ratio("tree-gas", "gas", w)), true),
        ("+Reorder up to +7.2%", Box::new(|w| ratio("reorder", "tree-gas", w)), true),
        ("+MPL +4.8% (low) / +28.6% (high)", Box::new(|w| ratio("switchtx", "reorder", w)), true),
        ("in-switch GaS cuts P50 by up to 21.6%", Box::new(p50), true),
    ];
    for (claim, f, pct) in rows {
        let _ = writeln!(s, "| {claim} | {} | {} |", cell(f(24.0), pct), cell(f(4.0), pct));
    }
    s
}

/// Fig. 11's claim (§5.3.1): in-switch GaS cuts P99 by up to 48.4% with several switches and
/// 45.2% with one; ours is the largest cut over 2..8 servers in each panel, and P50's beside it.
fn fig11_claims(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = String::from(
        "| paper (§5.3.1) | ours: largest P99 cut (servers) | ours: largest P50 cut (servers) |\n|---|---|---|\n",
    );
    for (panel, claim) in [
        ("several switches (S0 + ToRs)", "P99 −48.4% with several switches"),
        ("one switch (one rack)", "P99 −45.2% with one switch"),
    ] {
        let get = |series: &str, x: f64| {
            plan.points.iter().zip(r).find(|(p, _)| p.panel == panel && p.series == series && p.x == x).map(|(_, f)| f)
        };
        let best = |metric: fn(&RackFigures) -> f64| {
            (2..=8u8)
                .filter_map(|n| {
                    let (a, b) = (get("in-server (FaSST)", f64::from(n))?, get("in-switch", f64::from(n))?);
                    Some((1.0 - metric(b) / metric(a), n))
                })
                .max_by(|x, y| x.0.total_cmp(&y.0))
                .map_or("—".to_string(), |(cut, n)| format!("{:.1}% ({n})", cut * 100.0))
        };
        let _ = writeln!(s, "| {claim} | {} | {} |", best(|f| f.p99_us), best(|f| f.p50_us));
    }
    s
}

/// Runs `experiment`, writes its files and returns a summary.
pub fn sweep(experiment: &str, options: &ExperimentOptions) -> Result<String, String> {
    let plan = plan(experiment, options)?;
    let results = run_plan(&plan, options.threads)?;
    write_outputs(&plan, &results, &options.out)?;
    let mut s = format!("{}\n\n{}", plan.title, table(&plan, &results));
    if plan.name == "fig10" {
        s.push('\n');
        s.push_str(&fig10_claims(&plan, &results));
    }
    if plan.name == "fig10cd" {
        s.push('\n');
        s.push_str(&fig10cd_claims(&plan, &results));
    }
    if plan.name == "fig11" {
        s.push('\n');
        s.push_str(&fig11_claims(&plan, &results));
    }
    let _ = writeln!(s, "\nwrote {}", options.out.join(format!("switchtx-{}.{{csv,svg}}", plan.name)).display());
    Ok(s)
}

/// Runs every experiment, writes the files and `switchtx.md`.
pub fn reproduce(options: &ExperimentOptions) -> Result<String, String> {
    let names: Vec<&str> = if options.quick { QUICK.to_vec() } else { EXPERIMENTS.iter().map(|e| e.name).collect() };
    let mut report = format!(
        "# SwitchTx on PisaDB: reproduction report\n\nSeed {}, {} mode ({} threads per server, {} µs window). \
         Figures are simulated, not fitted; see systems/switchtx/RESULTS.md for how the model differs from the testbed.\n",
        options.seed,
        if options.quick { "quick" } else { "full" },
        base(options).threads,
        base(options).measure_us
    );
    for name in &names {
        let plan = plan(name, options)?;
        let results = run_plan(&plan, options.threads)?;
        write_outputs(&plan, &results, &options.out)?;
        let _ = write!(report, "\n## {}\n\n{}", plan.title, table(&plan, &results));
        if *name == "fig10" {
            let _ = write!(report, "\n{}", fig10_claims(&plan, &results));
        }
        if *name == "fig10cd" {
            let _ = write!(report, "\n{}", fig10cd_claims(&plan, &results));
        }
        if *name == "fig11" {
            let _ = write!(report, "\n{}", fig11_claims(&plan, &results));
        }
    }
    let path = options.out.join("switchtx.md");
    std::fs::write(&path, &report).map_err(|e| e.to_string())?;
    Ok(format!("{report}\nwrote {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_experiment_has_a_plan_and_every_reproduced_one_is_listed() {
        let options = ExperimentOptions { quick: true, seed: 1, threads: 1, out: "/nonexistent".into() };
        for e in EXPERIMENTS {
            assert!(plan(e.name, &options).is_ok(), "{}", e.name);
        }
        for name in QUICK {
            assert!(EXPERIMENTS.iter().any(|e| e.name == name), "{name} is not listed");
        }
        assert_eq!(EXPERIMENTS.len(), 10);
    }
}
