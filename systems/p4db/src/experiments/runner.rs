//! P4DB's runner: every point of a [`Plan`] under several seeds on a pool of threads, each
//! configuration run once, and the CSV, SVG and terminal summary made of the results.
//!
//! Every point is an independent, seeded simulation, so running them on several threads
//! changes nothing but the wall time. [`Runner`] also remembers the points it ran: `pisadb
//! reproduce` shares one runner across experiments, so a configuration two figures need (the
//! YCSB worker sweep feeds Fig. 11 and Fig. 12) is simulated once.
//!
//! Each point runs under several seeds (`--seeds`, `seed`, `seed + 1`, …). A figure is the
//! mean over them and its error bar their standard deviation; a speedup is the mean of the
//! per-seed ratios to the baseline run under the same seed (paired, so the noise both share
//! cancels). The thread pool and [`Stat`] are the harness's; what is P4DB's own is the CSV
//! schema (pinned by the `reproduce p4db --quick` digests), the prototype's measured points
//! drawn beside ours, and speedups of an ablation against its first step.

use super::{prototype_point, Baseline, Chart, Plan, PointSpec};
use crate::{run, RunConfig, RunResult};
use pisadb_harness::pool::run_parallel;
use pisadb_report::{write_csv, write_svg, Panel, Progress, Series, Unit};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The mean and the sample standard deviation of a figure over a point's seeds: the
/// harness's, as every system's experiments use.
pub use pisadb_harness::runner::Stat;

/// A point's figures under each of its seeds, and what running them cost.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The figures, one per seed in seed order (never empty).
    pub runs: Vec<RunResult>,
    /// Wall-clock seconds the simulations took, together.
    pub wall_s: f64,
}

impl Measured {
    /// `figure` over the seeds.
    pub fn stat(&self, figure: impl Fn(&RunResult) -> f64) -> Stat {
        Stat::of(self.runs.iter().map(figure))
    }

    /// The mean of `figure` over the seeds.
    pub fn mean(&self, figure: impl Fn(&RunResult) -> f64) -> f64 {
        self.stat(figure).mean
    }

    /// Simulated committed transactions per wall-clock second (the simulator's speed).
    pub fn sim_txn_per_wall_s(&self) -> f64 {
        let committed: u64 = self.runs.iter().map(|r| r.hot_committed + r.cold_committed).sum();
        committed as f64 / self.wall_s.max(1e-9)
    }
}

/// Runs points on a pool of threads, each under `seeds` seeds, remembering every
/// configuration it ran.
pub struct Runner {
    threads: usize,
    seeds: u32,
    /// Figures and wall seconds by configuration (its `Debug` text, seed included).
    done: BTreeMap<String, (RunResult, f64)>,
}

/// What one simulation gives: its figures and the wall seconds it took, or why it failed.
type Outcome = Result<(RunResult, f64), String>;

/// One simulation: a point under one seed.
struct Job<'a> {
    point: &'a PointSpec,
    cfg: RunConfig,
    key: String,
}

impl Runner {
    /// A runner with `threads` threads running every point under `seeds` seeds.
    pub fn new(threads: usize, seeds: u32) -> Self {
        Runner { threads: threads.max(1), seeds: seeds.max(1), done: BTreeMap::new() }
    }

    /// Point `p` under its `k`-th seed.
    fn job(p: &PointSpec, k: u32) -> Job<'_> {
        let cfg = RunConfig { seed: p.cfg.seed.wrapping_add(u64::from(k)), ..p.cfg.clone() };
        let key = format!("{cfg:?}");
        Job { point: p, cfg, key }
    }

    /// Runs the simulations of `plan` not run before; results in the order of the plan's points.
    pub fn run(&mut self, plan: &Plan) -> Result<Vec<Measured>, String> {
        let mut todo: Vec<Job<'_>> = Vec::new();
        let mut queued = BTreeSet::new();
        let all = plan.points.iter().flat_map(|p| (0..self.seeds).map(move |k| Self::job(p, k)));
        let total = plan.points.len() * self.seeds as usize;
        for job in all {
            if !self.done.contains_key(&job.key) && queued.insert(job.key.clone()) {
                todo.push(job);
            }
        }
        let name = plan.experiment.name();
        eprintln!(
            "{name}: {} simulations ({} points x {} seeds; {} already run) on {} threads",
            todo.len(),
            plan.points.len(),
            self.seeds,
            total - todo.len(),
            self.threads
        );
        let progress = Progress::new(todo.len() as u64, name);
        let slots = run_parallel(
            &todo,
            self.threads,
            &progress,
            |job| run_one(&job.cfg),
            |job, _| {
                let p = job.point;
                format!("{} {} x={} seed {}", p.panel, p.series, p.x, job.cfg.seed)
            },
        );
        progress.finish("done");
        for (job, r) in todo.iter().zip(slots) {
            let p = job.point;
            let r = r.map_err(|e| format!("{name}, {} {} x={} seed {}: {e}", p.panel, p.series, p.x, job.cfg.seed))?;
            self.done.insert(job.key.clone(), r);
        }
        Ok(plan
            .points
            .iter()
            .map(|p| {
                let runs: Vec<&(RunResult, f64)> = (0..self.seeds).map(|k| &self.done[&Self::job(p, k).key]).collect();
                Measured {
                    runs: runs.iter().map(|(r, _)| r.clone()).collect(),
                    wall_s: runs.iter().map(|(_, w)| w).sum(),
                }
            })
            .collect())
    }
}

/// Runs one simulation, measuring the wall clock (the simulator's own speed; nothing
/// simulated reads it).
fn run_one(cfg: &RunConfig) -> Outcome {
    #[allow(clippy::disallowed_methods)] // the simulator's speed is a wall-clock figure
    let started = std::time::Instant::now();
    let out = run(cfg).map_err(|e| e.to_string())?;
    Ok((out.result, started.elapsed().as_secs_f64()))
}

/// The speedup of point `i` over its baseline: the mean and deviation of the per-seed ratios
/// (NaN without a baseline).
pub fn speedup_stat(plan: &Plan, results: &[Measured], i: usize) -> Stat {
    let Some(b) = baseline_of(plan, i) else { return Stat { mean: f64::NAN, sd: f64::NAN } };
    let pairs = results[i].runs.iter().zip(&results[b].runs);
    Stat::of(pairs.map(|(run, base)| run.committed_per_s / base.committed_per_s))
}

/// The index of point `i`'s baseline, if the plan has one for it.
fn baseline_of(plan: &Plan, i: usize) -> Option<usize> {
    let p = &plan.points[i];
    match &plan.baseline {
        Baseline::Series(name) => {
            plan.points.iter().position(|b| b.series == *name && b.panel == p.panel && b.x == p.x)
        }
        Baseline::FirstOfPanel => plan.points.iter().position(|b| b.panel == p.panel),
    }
}

/// What the P4DB prototype measured for point `i`: mean and deviation over its runs.
pub fn prototype_committed(plan: &Plan, i: usize) -> Option<Stat> {
    prototype_point(plan.experiment, &plan.points[i])
        .map(|q| Stat { mean: q.commits_per_s_mean, sd: q.commits_per_s_sd })
}

/// The prototype's speedup at point `i`: its mean throughput there over its mean at the
/// baseline's configuration.
pub fn prototype_speedup(plan: &Plan, i: usize) -> Option<f64> {
    let b = baseline_of(plan, i)?;
    Some(prototype_committed(plan, i)?.mean / prototype_committed(plan, b)?.mean)
}

/// The mean speedup of point `i` over its baseline (NaN without one).
pub fn speedup(plan: &Plan, results: &[Measured], i: usize) -> f64 {
    speedup_stat(plan, results, i).mean
}

const HEADER: [&str; 33] = [
    "experiment",
    "panel",
    "series",
    "x",
    "x_name",
    "workload",
    "mode",
    "workers",
    "seeds",
    "committed_per_s",
    "committed_per_s_sd",
    "speedup",
    "speedup_sd",
    "hot_committed_per_s",
    "cold_committed_per_s",
    "abort_rate",
    "latency_p50_us",
    "latency_p99_us",
    "latency_mean_us",
    "latency_mean_us_sd",
    "retry_us",
    "lock_read_us",
    "commit_us",
    "switch_us",
    "other_us",
    "switch_passes",
    "recirculations",
    "switch_drops",
    "sim_txn_per_wall_s",
    "prototype_committed_per_s",
    "prototype_committed_per_s_sd",
    "prototype_committed_per_s_best",
    "prototype_speedup",
];

/// Writes `<out>/<experiment>.csv` and `.svg`; returns their paths.
pub fn write_outputs(plan: &Plan, results: &[Measured], out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let name = plan.experiment.name();
    let rows: Vec<Vec<String>> = plan
        .points
        .iter()
        .zip(results)
        .enumerate()
        .map(|(i, (p, m))| {
            let f = |figure: fn(&RunResult) -> f64, digits: usize| format!("{:.digits$}", m.mean(figure));
            let speedup = speedup_stat(plan, results, i);
            let committed = m.stat(|r| r.committed_per_s);
            let latency = m.stat(|r| r.latency.latency_us_mean);
            let count = |figure: fn(&RunResult) -> u64| format!("{:.0}", m.mean(|r| figure(r) as f64));
            let prototype = prototype_point(plan.experiment, p);
            vec![
                name.to_string(),
                p.panel.clone(),
                p.series.clone(),
                format!("{}", p.x),
                p.x_name.clone(),
                p.cfg.workload.name().to_string(),
                p.cfg.mode.name().to_string(),
                p.cfg.workers.to_string(),
                m.runs.len().to_string(),
                format!("{:.0}", committed.mean),
                format!("{:.0}", committed.sd),
                format!("{:.3}", speedup.mean),
                format!("{:.3}", speedup.sd),
                f(RunResult::hot_committed_per_s, 0),
                f(RunResult::cold_committed_per_s, 0),
                f(|r| r.abort_rate, 4),
                f(|r| r.latency.latency_us_p50, 2),
                f(|r| r.latency.latency_us_p99, 2),
                format!("{:.2}", latency.mean),
                format!("{:.2}", latency.sd),
                f(|r| r.latency_breakdown.retry_us, 2),
                f(|r| r.latency_breakdown.lock_read_us, 2),
                f(|r| r.latency_breakdown.commit_us, 2),
                f(|r| r.latency_breakdown.switch_us, 2),
                f(|r| r.latency_breakdown.other_us, 2),
                count(|r| r.switch_passes),
                count(|r| r.recirculations),
                count(|r| r.switch_drops),
                format!("{:.0}", m.sim_txn_per_wall_s()),
                prototype.map_or(String::new(), |q| format!("{:.0}", q.commits_per_s_mean)),
                prototype.map_or(String::new(), |q| format!("{:.0}", q.commits_per_s_sd)),
                prototype.map_or(String::new(), |q| format!("{:.0}", q.commits_per_s_max)),
                prototype_speedup(plan, i).map_or(String::new(), |s| format!("{s:.3}")),
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
            // A line of `series` with the mean and deviation `y` gives each of its points.
            let line = |name: String, series: &String, y: &dyn Fn(usize) -> Stat| {
                let of_series: Vec<usize> =
                    members.iter().copied().filter(|&i| plan.points[i].series == *series).collect();
                let stats: Vec<Stat> = of_series.iter().map(|&i| y(i)).collect();
                Series {
                    name,
                    points: of_series.iter().zip(&stats).map(|(&i, st)| (plan.points[i].x, st.mean)).collect(),
                    errors: stats.iter().map(|st| st.sd).collect(),
                    reference_of: None,
                }
            };
            let scaled = |st: Stat, k: f64| Stat { mean: st.mean * k, sd: st.sd * k };
            // The prototype's measurements of `series`, where it ran the same points.
            let measured = |series: &String, y: &dyn Fn(usize) -> Option<Stat>| {
                let of_series = members.iter().copied().filter(|&i| plan.points[i].series == *series);
                let stats: Vec<(f64, Stat)> = of_series.filter_map(|i| Some((plan.points[i].x, y(i)?))).collect();
                Series {
                    name: format!("{series} (prototype)"),
                    points: stats.iter().map(|(x, st)| (*x, st.mean)).collect(),
                    errors: stats.iter().map(|(_, st)| st.sd).collect(),
                    reference_of: Some(series.clone()),
                }
            };

            let names = distinct(members.iter().map(|&i| &plan.points[i].series));
            let with_prototype = |ours: Vec<Series>, y: &dyn Fn(usize) -> Option<Stat>| {
                let theirs = names.iter().map(|s| measured(s, y)).filter(|s| !s.points.is_empty());
                ours.into_iter().chain(theirs).collect::<Vec<_>>()
            };
            let series: Vec<Series> = match chart {
                Chart::Speedup => {
                    let shown: Vec<&&String> = names.iter().filter(|s| !plan.baseline.is_series(s)).collect();
                    let ours = shown.iter().map(|s| line((**s).clone(), s, &|i| speedup_stat(plan, results, i)));
                    let theirs = shown
                        .iter()
                        .map(|s| measured(s, &|i| prototype_speedup(plan, i).map(|mean| Stat { mean, sd: 0.0 })));
                    ours.chain(theirs.filter(|s| !s.points.is_empty())).collect()
                }
                Chart::Throughput => with_prototype(
                    names.iter().map(|s| line((*s).clone(), s, &|i| results[i].stat(|r| r.committed_per_s))).collect(),
                    &|i| prototype_committed(plan, i),
                ),
                Chart::MeanLatency => names
                    .iter()
                    .map(|s| {
                        line((*s).clone(), s, &|i| scaled(results[i].stat(|r| r.latency.latency_us_mean), S_PER_US))
                    })
                    .collect(),
                Chart::HotCold => names
                    .iter()
                    .flat_map(|s| {
                        [
                            line(format!("{s} hot"), s, &|i| results[i].stat(RunResult::hot_committed_per_s)),
                            line(format!("{s} cold"), s, &|i| results[i].stat(RunResult::cold_committed_per_s)),
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
                        .map(|(part, f)| {
                            let stats: Vec<(f64, Stat)> = names
                                .iter()
                                .enumerate()
                                .filter_map(|(k, s)| {
                                    let i = members.iter().copied().find(|&i| plan.points[i].series == **s)?;
                                    Some(((k + 1) as f64, scaled(results[i].stat(f), S_PER_US)))
                                })
                                .collect();
                            Series {
                                name: (*part).to_string(),
                                points: stats.iter().map(|(x, st)| (*x, st.mean)).collect(),
                                errors: stats.iter().map(|(_, st)| st.sd).collect(),
                                reference_of: None,
                            }
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

/// One line per point, as `sweep` prints them.
pub fn summary(plan: &Plan, results: &[Measured]) -> String {
    let mut s = String::new();
    let seeds = results.first().map_or(0, |m| m.runs.len());
    let _ = writeln!(s, "means over {seeds} seeds, ± one standard deviation");
    let _ = writeln!(
        s,
        "{:<24} {:<30} {:>22} {:>20} {:>14} {:>7} {:>9} {:>9}",
        "panel", "series", "x", "commits/s", "speedup", "aborts", "mean us", "p99 us"
    );
    for (i, (p, m)) in plan.points.iter().zip(results).enumerate() {
        let x = if p.x_name.is_empty() { format!("{}", p.x) } else { p.x_name.clone() };
        let (committed, speedup) = (m.stat(|r| r.committed_per_s), speedup_stat(plan, results, i));
        let _ = writeln!(
            s,
            "{:<24} {:<30} {:>22} {:>20} {:>14} {:>6.1}% {:>9.1} {:>9.1}",
            p.panel,
            p.series,
            x,
            format!("{:.0} ± {:.0}", committed.mean, committed.sd),
            format!("{:.2}x ± {:.2}", speedup.mean, speedup.sd),
            m.mean(|r| r.abort_rate) * 100.0,
            m.mean(|r| r.latency.latency_us_mean),
            m.mean(|r| r.latency.latency_us_p99),
        );
    }
    s
}
