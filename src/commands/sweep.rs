//! `pisadb sweep <experiment>`: one experiment of the P4DB paper ([`super::experiments`]),
//! its simulated points run in parallel with a progress bar, written to
//! `results/<experiment>.csv` and `.svg`, and summarised on stdout.
//!
//! Every point is an independent, seeded simulation, so running them on several threads
//! changes nothing but the wall time. [`Runner`] also remembers the points it ran: `pisadb
//! reproduce` shares one runner across experiments, so a configuration two figures need (the
//! YCSB worker sweep feeds Fig. 11 and Fig. 12) is simulated once.

use super::bench::{CcArg, FineLocksArg, LayoutArg, RecirculationArg, SwitchChoices};
use super::experiments::{plan, Baseline, Chart, Experiment, Options, Plan, PointSpec};
use clap::Args as ClapArgs;
use pisadb_p4db::{run, RunResult};
use pisadb_report::{write_csv, write_svg, Panel, Progress, Series, Unit};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Flags of `pisadb sweep`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The experiment to run.
    #[arg(value_enum)]
    experiment: Experiment,
    /// The system whose experiments run (`pisadb systems` lists them).
    #[arg(long, default_value = "p4db")]
    system: String,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    switch: SweepSwitchArgs,
}

/// The switch-side flags of `pisadb sweep`: each replaces the choice of every point whose
/// experiment does not set it itself (`layout` compares its own layouts; the ablation
/// `switch-optimizations` takes only the lock rule of its fine-grained step and the
/// recirculation model).
#[derive(ClapArgs, Debug)]
pub(crate) struct SweepSwitchArgs {
    /// The hot set's layout: declustered (P4DB's algorithm), random (the prototype's idx % N),
    /// ideal (the prototype's SWITCH_NO_CONFLICT upper bound: one pass, no locks, operations
    /// past the first pass not executed), shuffled. Default: declustered.
    #[arg(long, value_enum)]
    layout: Option<LayoutArg>,
    /// Which pipeline-lock halves a multi-pass transaction takes: stages (P4DB §5.3), parity
    /// (the prototype's Fig. 15c; not serializable), whole-pipeline. Default: stages.
    #[arg(long, value_enum)]
    fine_locks: Option<FineLocksArg>,
    /// How the switch recirculates: priority (every port, long waiters first) or fifo (the
    /// prototype's one slow and one fast port). Default: priority.
    #[arg(long, value_enum)]
    recirculation: Option<RecirculationArg>,
}

impl SweepSwitchArgs {
    fn choices(&self) -> SwitchChoices {
        SwitchChoices {
            layout: self.layout.map(Into::into),
            fine_locks: self.fine_locks.map(Into::into),
            recirculation: self.recirculation.map(Into::into),
        }
    }
}

/// Flags shared by `sweep` and `reproduce`.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct CommonArgs {
    /// Fewer points and shorter simulated windows, for a first look.
    #[arg(long)]
    pub quick: bool,
    /// Directory for the CSV and SVG files.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Simulations run side by side (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Seed of every point.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Concurrency control on the nodes.
    #[arg(long, value_enum, default_value = "no-wait")]
    pub cc: CcArg,
}

impl CommonArgs {
    /// The plan options these flags mean.
    pub(crate) fn options(&self) -> Options {
        Options { quick: self.quick, seed: self.seed, cc: self.cc.into(), switch: Default::default() }
    }

    /// Threads to use.
    pub(crate) fn threads(&self) -> usize {
        self.threads.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// A point's figures and what running it cost.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    /// The figures.
    pub result: RunResult,
    /// Wall-clock seconds the simulation took.
    pub wall_s: f64,
}

impl Measured {
    /// Simulated committed transactions per wall-clock second (the simulator's speed).
    pub(crate) fn sim_txn_per_wall_s(&self) -> f64 {
        (self.result.hot_committed + self.result.cold_committed) as f64 / self.wall_s.max(1e-9)
    }
}

/// Runs points on a pool of threads, remembering every configuration it ran.
pub(crate) struct Runner {
    threads: usize,
    done: BTreeMap<String, Measured>,
}

impl Runner {
    /// A runner with `threads` threads.
    pub(crate) fn new(threads: usize) -> Self {
        Runner { threads: threads.max(1), done: BTreeMap::new() }
    }

    /// Runs the points of `plan` not run before; results in the order of the plan's points.
    pub(crate) fn run(&mut self, plan: &Plan) -> Result<Vec<Measured>, String> {
        let mut todo: Vec<&PointSpec> = Vec::new();
        for p in &plan.points {
            if !self.done.contains_key(&p.key()) && !todo.iter().any(|t| t.key() == p.key()) {
                todo.push(p);
            }
        }
        let name = plan.experiment.name();
        eprintln!(
            "{name}: {} simulated points ({} already run) on {} threads",
            todo.len(),
            plan.points.len() - todo.len(),
            self.threads
        );
        let progress = Progress::new(todo.len() as u64, name);
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<Result<Measured, String>>>> = Mutex::new(vec![None; todo.len()]);
        std::thread::scope(|s| {
            for _ in 0..self.threads.min(todo.len().max(1)) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = todo.get(i) else { break };
                    let result = run_one(p);
                    progress.inc(&format!("{} {} x={}", p.panel, p.series, p.x));
                    slots.lock().expect("no panics while holding")[i] = Some(result);
                });
            }
        });
        progress.finish("done");
        let slots = slots.into_inner().expect("threads joined");
        for (p, r) in todo.iter().zip(slots) {
            let r =
                r.expect("every point ran").map_err(|e| format!("{name}, {} {} x={}: {e}", p.panel, p.series, p.x))?;
            self.done.insert(p.key(), r);
        }
        Ok(plan.points.iter().map(|p| self.done[&p.key()].clone()).collect())
    }
}

/// Runs one point, measuring the wall clock (the simulator's own speed; nothing simulated
/// reads it).
fn run_one(p: &PointSpec) -> Result<Measured, String> {
    #[allow(clippy::disallowed_methods)] // the simulator's speed is a wall-clock figure
    let started = std::time::Instant::now();
    let out = run(&p.cfg).map_err(|e| e.to_string())?;
    Ok(Measured { result: out.result, wall_s: started.elapsed().as_secs_f64() })
}

/// Runs `pisadb sweep`.
pub(crate) fn run_sweep(args: &Args) -> Result<(), String> {
    super::bench::require_p4db(&args.system, "experiments")?;
    let options = Options { switch: args.switch.choices(), ..args.common.options() };
    for warning in options.switch.warnings() {
        println!("{warning}");
    }
    let plan = plan(args.experiment, &options);
    let mut runner = Runner::new(args.common.threads());
    let results = runner.run(&plan)?;
    let (csv, svg) = write_outputs(&plan, &results, &args.common.out)?;
    print_summary(&plan, &results);
    let losses: Vec<_> = results.iter().filter_map(|m| m.result.ideal).collect();
    if !losses.is_empty() {
        let dropped: u64 = losses.iter().map(|l| l.dropped_ops).sum();
        let truncated: u64 = losses.iter().map(|l| l.truncated_txns).sum();
        println!(
            "\nthe ideal layout did not execute {dropped} operations of {truncated} switch transactions over {} points",
            losses.len()
        );
    }
    println!("\nwrote {} and {}", csv.display(), svg.display());
    Ok(())
}

/// The speedup of point `i` over its baseline (NaN without one).
pub(crate) fn speedup(plan: &Plan, results: &[Measured], i: usize) -> f64 {
    let p = &plan.points[i];
    let base = match &plan.baseline {
        Baseline::Series(name) => {
            plan.points.iter().position(|b| b.series == *name && b.panel == p.panel && b.x == p.x)
        }
        Baseline::FirstOfPanel => plan.points.iter().position(|b| b.panel == p.panel),
    };
    base.map_or(f64::NAN, |b| results[i].result.committed_per_s / results[b].result.committed_per_s)
}

const HEADER: [&str; 25] = [
    "experiment",
    "panel",
    "series",
    "x",
    "x_name",
    "workload",
    "mode",
    "workers",
    "committed_per_s",
    "speedup",
    "hot_committed_per_s",
    "cold_committed_per_s",
    "abort_rate",
    "latency_p50_us",
    "latency_p99_us",
    "latency_mean_us",
    "retry_us",
    "lock_read_us",
    "commit_us",
    "switch_us",
    "other_us",
    "switch_passes",
    "recirculations",
    "switch_drops",
    "sim_txn_per_wall_s",
];

/// Writes `<out>/<experiment>.csv` and `.svg`; returns their paths.
pub(crate) fn write_outputs(plan: &Plan, results: &[Measured], out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let name = plan.experiment.name();
    let rows: Vec<Vec<String>> = plan
        .points
        .iter()
        .zip(results)
        .enumerate()
        .map(|(i, (p, m))| {
            let r = &m.result;
            let b = &r.latency_breakdown;
            vec![
                name.to_string(),
                p.panel.clone(),
                p.series.clone(),
                format!("{}", p.x),
                p.x_name.clone(),
                p.cfg.workload.name().to_string(),
                p.cfg.mode.name().to_string(),
                p.cfg.workers.to_string(),
                format!("{:.0}", r.committed_per_s),
                format!("{:.3}", speedup(plan, results, i)),
                format!("{:.0}", r.hot_committed_per_s()),
                format!("{:.0}", r.cold_committed_per_s()),
                format!("{:.4}", r.abort_rate),
                format!("{:.2}", r.latency_p50_us),
                format!("{:.2}", r.latency_p99_us),
                format!("{:.2}", r.latency_mean_us),
                format!("{:.2}", b.retry_us),
                format!("{:.2}", b.lock_read_us),
                format!("{:.2}", b.commit_us),
                format!("{:.2}", b.switch_us),
                format!("{:.2}", b.other_us),
                r.switch_passes.to_string(),
                r.recirculations.to_string(),
                r.switch_drops.to_string(),
                format!("{:.0}", m.sim_txn_per_wall_s()),
            ]
        })
        .collect();
    let csv = out.join(format!("{name}.csv"));
    let svg = out.join(format!("{name}.svg"));
    write_csv(&csv, &HEADER, &rows).map_err(|e| e.to_string())?;
    let panels: Vec<Panel> = plan.charts.iter().flat_map(|&chart| panels(plan, results, chart)).collect();
    let columns = panels.len() / plan.charts.len().max(1);
    write_svg(&svg, &plan.title, columns.max(1), &panels).map_err(|e| e.to_string())?;
    Ok((csv, svg))
}

/// Labels in order of first appearance.
fn distinct<'a>(labels: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    let mut seen: Vec<&String> = Vec::new();
    for l in labels {
        if !seen.contains(&l) {
            seen.push(l);
        }
    }
    seen
}

/// Seconds per microsecond: the results' latencies are in µs, the charts' time axes in seconds.
const S_PER_US: f64 = 1e-6;

/// One panel per panel label for `chart`.
fn panels(plan: &Plan, results: &[Measured], chart: Chart) -> Vec<Panel> {
    distinct(plan.points.iter().map(|p| &p.panel))
        .into_iter()
        .map(|panel| {
            let members: Vec<usize> = (0..plan.points.len()).filter(|&i| plan.points[i].panel == *panel).collect();
            let line = |name: String, series: &String, y: &dyn Fn(usize) -> f64| Series {
                name,
                points: members
                    .iter()
                    .filter(|&&i| plan.points[i].series == *series)
                    .map(|&i| (plan.points[i].x, y(i)))
                    .collect(),
            };
            let names = distinct(members.iter().map(|&i| &plan.points[i].series));
            let series: Vec<Series> = match chart {
                Chart::Speedup => names
                    .iter()
                    .filter(|s| !plan.baseline.is_series(s))
                    .map(|s| line((*s).clone(), s, &|i| speedup(plan, results, i)))
                    .collect(),
                Chart::Throughput => {
                    names.iter().map(|s| line((*s).clone(), s, &|i| results[i].result.committed_per_s)).collect()
                }
                Chart::MeanLatency => names
                    .iter()
                    .map(|s| line((*s).clone(), s, &|i| results[i].result.latency_mean_us * S_PER_US))
                    .collect(),
                Chart::HotCold => names
                    .iter()
                    .flat_map(|s| {
                        [
                            line(format!("{s} hot"), s, &|i| results[i].result.hot_committed_per_s()),
                            line(format!("{s} cold"), s, &|i| results[i].result.cold_committed_per_s()),
                        ]
                    })
                    .collect(),
                Chart::LatencyBreakdown => {
                    type Part = (&'static str, fn(&RunResult) -> f64);
                    let parts: [Part; 5] = [
                        ("retries", |r| r.latency_breakdown.retry_us),
                        ("lock + read", |r| r.latency_breakdown.lock_read_us),
                        ("2PC vote", |r| r.latency_breakdown.commit_us),
                        ("switch", |r| r.latency_breakdown.switch_us),
                        ("other", |r| r.latency_breakdown.other_us),
                    ];
                    // One line per phase across the systems (x = 1, 2, … in series order).
                    parts
                        .iter()
                        .map(|(part, f)| Series {
                            name: (*part).to_string(),
                            points: names
                                .iter()
                                .enumerate()
                                .filter_map(|(k, s)| {
                                    let i = members.iter().copied().find(|&i| plan.points[i].series == **s)?;
                                    Some(((k + 1) as f64, f(&results[i].result) * S_PER_US))
                                })
                                .collect(),
                        })
                        .collect()
                }
            };
            let (x_label, x_unit) = match chart {
                Chart::LatencyBreakdown => {
                    let systems: Vec<String> =
                        names.iter().enumerate().map(|(k, s)| format!("{} = {s}", k + 1)).collect();
                    (format!("system ({})", systems.join(", ")), Unit::Integer)
                }
                _ => (plan.x_label.clone(), plan.x_unit),
            };
            Panel { title: panel.clone(), x_label, x_unit, y_label: chart.label().into(), y_unit: chart.unit(), series }
        })
        .collect()
}

/// Prints one line per point.
pub(crate) fn print_summary(plan: &Plan, results: &[Measured]) {
    println!(
        "{:<24} {:<30} {:>10} {:>12} {:>8} {:>7} {:>9} {:>9}",
        "panel", "series", "x", "commits/s", "speedup", "aborts", "mean us", "p99 us"
    );
    for (i, (p, m)) in plan.points.iter().zip(results).enumerate() {
        let x = if p.x_name.is_empty() { format!("{}", p.x) } else { p.x_name.clone() };
        println!(
            "{:<24} {:<30} {:>10} {:>12.0} {:>7.2}x {:>6.1}% {:>9.1} {:>9.1}",
            p.panel,
            p.series,
            x,
            m.result.committed_per_s,
            speedup(plan, results, i),
            m.result.abort_rate * 100.0,
            m.result.latency_mean_us,
            m.result.latency_p99_us,
        );
    }
}
