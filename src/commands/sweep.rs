//! `pisadb sweep <experiment>`: one experiment of the P4DB paper ([`super::experiments`]),
//! its simulated points run in parallel with a progress bar, written to
//! `results/<experiment>.csv` and `.svg`, and summarised on stdout. With `--system NAME`
//! another system runs one of its own experiments ([`pisadb_harness::Registry::sweep`]).
//!
//! Every point is an independent, seeded simulation, so running them on several threads
//! changes nothing but the wall time. [`Runner`] also remembers the points it ran: `pisadb
//! reproduce` shares one runner across experiments, so a configuration two figures need (the
//! YCSB worker sweep feeds Fig. 11 and Fig. 12) is simulated once.
//!
//! Each point runs under several seeds (`--seeds`, `seed`, `seed + 1`, …). A figure is the
//! mean over them and its error bar their standard deviation; a speedup is the mean of the
//! per-seed ratios to the baseline run under the same seed (paired, so the noise both share
//! cancels).

use super::bench::{CcArg, FineLocksArg, LayoutArg, Preset, RecirculationArg, SwitchChoices};
use super::experiments::{plan, prototype_point, Baseline, Chart, Experiment, Options, Plan, PointSpec};
use crate::systems::registry;
use clap::{Args as ClapArgs, ValueEnum};
use pisadb_harness::pool::run_parallel;
use pisadb_harness::ExperimentOptions;
use pisadb_p4db::{run, RunConfig, RunResult};
use pisadb_report::{write_csv, write_svg, Panel, Progress, Series, Unit};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Flags of `pisadb sweep`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The experiment to run: one of P4DB's or, with `--system`, one of that system's (a name
    /// only one other system has is found without `--system`).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(experiment_names()))]
    experiment: String,
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
    /// Seed of every point's first run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per point, under seeds seed, seed+1, ...: figures are their mean, error bars their
    /// standard deviation [default: 3, or 1 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub seeds: Option<u32>,
    /// Concurrency control on the nodes (P4DB's).
    #[arg(long, value_enum, default_value = "no-wait")]
    pub cc: CcArg,
    /// Defaults for every point: `pisadb` (PisaDB's model) or `paper` (the paper's testbed as
    /// far as it states it; P4DB's old name `p4db-testbed`), or another preset of the system
    /// (`pisadb systems --presets NAME` lists them with where each value comes from). The
    /// experiment's own knobs stay. Results under another preset than pisadb go to
    /// `<out>/<preset>/`.
    #[arg(long, default_value = "pisadb", value_parser = Preset::parse)]
    pub preset: Preset,
    /// Run only the K-th of N deterministic slices of the runs and write them raw to
    /// `<out>/shard-SYSTEM-K-of-N.json`; `pisadb merge DIR...` then writes the CSVs, charts and
    /// report (run the N shards on N machines: see the README).
    #[arg(long, value_name = "K/N", value_parser = pisadb_harness::Shard::parse)]
    pub shard: Option<pisadb_harness::Shard>,
}

impl CommonArgs {
    /// The plan options these flags mean.
    pub(crate) fn options(&self) -> Options {
        let (switch, preset) = (Default::default(), Preset::Pisadb);
        Options {
            quick: self.quick,
            seed: self.seed,
            seeds: self.seeds(),
            cc: self.cc.into(),
            switch,
            preset,
            as_run: false,
        }
    }

    /// Runs per point: `--seeds`, or 3 (1 with `--quick`).
    pub(crate) fn seeds(&self) -> u32 {
        self.seeds.unwrap_or(if self.quick { 1 } else { 3 })
    }

    /// Refuses what P4DB's experiments, still run by the binary, do not take yet.
    pub(crate) fn check_p4db(&self) -> Result<(), String> {
        if let Preset::Other(name) = self.preset {
            return Err(format!("P4DB has no preset `{name}`; its presets: pisadb, paper (old name p4db-testbed)"));
        }
        if self.shard.is_some() {
            return Err("--shard: P4DB's experiments still run in the binary, not on the harness's runner, and are not sharded yet".into());
        }
        Ok(())
    }

    /// Threads to use.
    pub(crate) fn threads(&self) -> usize {
        self.threads.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// The mean and the sample standard deviation of a figure over a point's seeds: the
/// harness's, as every system's experiments use.
pub(crate) use pisadb_harness::runner::Stat;

/// A point's figures under each of its seeds, and what running them cost.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    /// The figures, one per seed in seed order (never empty).
    pub runs: Vec<RunResult>,
    /// Wall-clock seconds the simulations took, together.
    pub wall_s: f64,
}

impl Measured {
    /// `figure` over the seeds.
    pub(crate) fn stat(&self, figure: impl Fn(&RunResult) -> f64) -> Stat {
        Stat::of(self.runs.iter().map(figure))
    }

    /// The mean of `figure` over the seeds.
    pub(crate) fn mean(&self, figure: impl Fn(&RunResult) -> f64) -> f64 {
        self.stat(figure).mean
    }

    /// Simulated committed transactions per wall-clock second (the simulator's speed).
    pub(crate) fn sim_txn_per_wall_s(&self) -> f64 {
        let committed: u64 = self.runs.iter().map(|r| r.hot_committed + r.cold_committed).sum();
        committed as f64 / self.wall_s.max(1e-9)
    }
}

/// Runs points on a pool of threads, each under `seeds` seeds, remembering every
/// configuration it ran.
pub(crate) struct Runner {
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
    pub(crate) fn new(threads: usize, seeds: u32) -> Self {
        Runner { threads: threads.max(1), seeds: seeds.max(1), done: BTreeMap::new() }
    }

    /// Point `p` under its `k`-th seed.
    fn job(p: &PointSpec, k: u32) -> Job<'_> {
        let cfg = RunConfig { seed: p.cfg.seed.wrapping_add(u64::from(k)), ..p.cfg.clone() };
        let key = format!("{cfg:?}");
        Job { point: p, cfg, key }
    }

    /// Runs the simulations of `plan` not run before; results in the order of the plan's points.
    pub(crate) fn run(&mut self, plan: &Plan) -> Result<Vec<Measured>, String> {
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

/// Runs `pisadb sweep`.
pub(crate) fn run_sweep(args: &Args) -> Result<(), String> {
    let system = system_of(&args.system, &args.experiment)?;
    if system != "p4db" {
        let summary =
            registry().sweep(&system, &args.experiment, &system_options(&args.common)).map_err(|e| e.to_string())?;
        println!("{summary}");
        return Ok(());
    }
    let experiment = Experiment::from_str(&args.experiment, false).map_err(|_| {
        let names: Vec<String> = Experiment::value_variants()
            .iter()
            .filter_map(|e| e.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        format!("no P4DB experiment `{}`; accepted: {}", args.experiment, names.join(", "))
    })?;
    args.common.check_p4db()?;
    let options = Options { switch: args.switch.choices(), preset: args.common.preset, ..args.common.options() };
    for warning in options.switch.warnings() {
        println!("{warning}");
    }
    let plan = plan(experiment, &options);
    let mut out = args.common.out.clone();
    if args.common.preset == Preset::P4dbTestbed {
        if let Some(first) = plan.points.first() {
            println!("{}", pisadb_p4db::testbed::describe(&first.cfg));
        }
        out = out.join(args.common.preset.name());
    }
    let mut runner = Runner::new(args.common.threads(), options.seeds);
    let results = runner.run(&plan)?;
    let (csv, svg) = write_outputs(&plan, &results, &out)?;
    print_summary(&plan, &results);
    let losses: Vec<_> = results.iter().flat_map(|m| &m.runs).filter_map(|r| r.ideal).collect();
    if !losses.is_empty() {
        let dropped: u64 = losses.iter().map(|l| l.dropped_ops).sum();
        let truncated: u64 = losses.iter().map(|l| l.truncated_txns).sum();
        println!(
            "\nthe ideal layout did not execute {dropped} operations of {truncated} switch transactions over {} runs",
            losses.len()
        );
    }
    println!("\nwrote {} and {}", csv.display(), svg.display());
    Ok(())
}

/// The system whose `experiment` to run: the one `--system` names; without it (the default,
/// `p4db`), P4DB if the experiment is P4DB's, else the one other system that has it. An
/// experiment several systems share must be asked with `--system`.
fn system_of(asked: &str, experiment: &str) -> Result<String, String> {
    let is_p4db = Experiment::from_str(experiment, false).is_ok();
    if asked != "p4db" || is_p4db {
        return Ok(asked.to_string());
    }
    let owners = owners_of(experiment);
    match owners.as_slice() {
        [only] => Ok(only.to_string()),
        [] => Ok(asked.to_string()),
        several => Err(format!(
            "`{experiment}` is an experiment of {}: say which with --system {}",
            several.join(" and "),
            several.join("|")
        )),
    }
}

/// The systems other than P4DB that have an experiment called `experiment`, in registry order.
fn owners_of(experiment: &str) -> Vec<&'static str> {
    registry()
        .systems()
        .iter()
        .filter(|s| s.experiments().iter().any(|e| e.name == experiment))
        .map(|s| s.name())
        .collect()
}

/// Every experiment name `sweep` accepts, for `--help`: P4DB's, then each other system's, once
/// per name (a name two systems share lists both).
fn experiment_names() -> Vec<clap::builder::PossibleValue> {
    let p4db = Experiment::value_variants().iter().filter_map(ValueEnum::to_possible_value);
    let mut others: Vec<(&'static str, Vec<String>)> = Vec::new();
    for s in registry().systems() {
        for e in s.experiments() {
            let help = format!("{}: {}", s.name(), e.summary);
            match others.iter_mut().find(|(name, _)| *name == e.name) {
                Some((_, helps)) => helps.push(help),
                None => others.push((e.name, vec![help])),
            }
        }
    }
    let others = others.into_iter().map(|(name, helps)| clap::builder::PossibleValue::new(name).help(helps.join("; ")));
    p4db.chain(others).collect()
}

/// The harness's experiment options from the shared flags (`--cc` is P4DB's alone).
fn system_options(common: &CommonArgs) -> ExperimentOptions {
    ExperimentOptions {
        quick: common.quick,
        seed: common.seed,
        seeds: common.seeds(),
        threads: common.threads(),
        out: common.out.clone(),
        shard: common.shard,
        preset: common.preset.harness_name().to_string(),
    }
}

/// `pisadb reproduce NAME` for a system that runs its own experiments.
pub(crate) fn run_system_reproduce(name: &str, common: &CommonArgs) -> Result<(), String> {
    let summary = registry().reproduce(name, &system_options(common)).map_err(|e| e.to_string())?;
    println!("{summary}");
    Ok(())
}

/// The speedup of point `i` over its baseline: the mean and deviation of the per-seed ratios
/// (NaN without a baseline).
pub(crate) fn speedup_stat(plan: &Plan, results: &[Measured], i: usize) -> Stat {
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
pub(crate) fn prototype_committed(plan: &Plan, i: usize) -> Option<Stat> {
    prototype_point(plan.experiment, &plan.points[i])
        .map(|q| Stat { mean: q.commits_per_s_mean, sd: q.commits_per_s_sd })
}

/// The prototype's speedup at point `i`: its mean throughput there over its mean at the
/// baseline's configuration.
pub(crate) fn prototype_speedup(plan: &Plan, i: usize) -> Option<f64> {
    let b = baseline_of(plan, i)?;
    Some(prototype_committed(plan, i)?.mean / prototype_committed(plan, b)?.mean)
}

/// The mean speedup of point `i` over its baseline (NaN without one).
pub(crate) fn speedup(plan: &Plan, results: &[Measured], i: usize) -> f64 {
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
pub(crate) fn write_outputs(plan: &Plan, results: &[Measured], out: &Path) -> Result<(PathBuf, PathBuf), String> {
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

/// Prints one line per point.
pub(crate) fn print_summary(plan: &Plan, results: &[Measured]) {
    let seeds = results.first().map_or(0, |m| m.runs.len());
    println!("means over {seeds} seeds, ± one standard deviation");
    println!(
        "{:<24} {:<30} {:>22} {:>20} {:>14} {:>7} {:>9} {:>9}",
        "panel", "series", "x", "commits/s", "speedup", "aborts", "mean us", "p99 us"
    );
    for (i, (p, m)) in plan.points.iter().zip(results).enumerate() {
        let x = if p.x_name.is_empty() { format!("{}", p.x) } else { p.x_name.clone() };
        let (committed, speedup) = (m.stat(|r| r.committed_per_s), speedup_stat(plan, results, i));
        println!(
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
}
