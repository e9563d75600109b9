//! `pisadb sweep <experiment>`: a named experiment of the P4DB paper, many simulated points,
//! run in parallel with a progress bar, written to `results/<experiment>.csv` and `.svg`.
//!
//! Each experiment is a list of points (a mode and the rack flags); every point is an
//! independent, seeded simulation, so running them on several threads changes nothing but the
//! wall time. The chart puts each mode's figure against the swept knob, one panel per YCSB
//! workload, as the paper's figures do.

use crate::commands::bench::{run_point, CcArg, MixArg, ModeArg, PartitioningArg, Point, RackArgs};
use clap::{Args as ClapArgs, ValueEnum};
use pisadb_node::Mode;
use pisadb_report::{write_csv, write_svg, Panel, Progress, Series};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[allow(clippy::enum_variant_names)] // more experiments (SmallBank, TPC-C) join in later issues
pub enum Experiment {
    /// Speedup over No-Switch as workers per node grow, YCSB A/B/C (paper Fig. 11, upper row).
    YcsbWorkers,
    /// Speedup over No-Switch as the share of distributed transactions grows (Fig. 11, lower).
    YcsbRemote,
    /// Committed hot and cold transactions per second by system (Fig. 12).
    YcsbBreakdown,
    /// Throughput as the share of hot transactions grows, YCSB A and C (Fig. 15a/b).
    YcsbHot,
}

impl Experiment {
    fn name(self) -> &'static str {
        match self {
            Experiment::YcsbWorkers => "ycsb-workers",
            Experiment::YcsbRemote => "ycsb-remote",
            Experiment::YcsbBreakdown => "ycsb-breakdown",
            Experiment::YcsbHot => "ycsb-hot",
        }
    }
}

/// Flags of `pisadb sweep`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The experiment to run.
    #[arg(value_enum)]
    experiment: Experiment,
    /// Fewer points and a shorter measurement, for a first look.
    #[arg(long)]
    quick: bool,
    /// Directory for the CSV and SVG files.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Simulations run side by side (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of every point.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrency control on the nodes.
    #[arg(long, value_enum, default_value = "no-wait")]
    cc: CcArg,
}

/// The knob an experiment sweeps.
#[derive(Clone, Copy)]
enum Knob {
    Workers,
    Remote,
    HotProb,
}

impl Knob {
    fn label(self) -> &'static str {
        match self {
            Knob::Workers => "workers per node",
            Knob::Remote => "distributed transactions (%)",
            Knob::HotProb => "hot transactions (%)",
        }
    }

    fn value(self, r: &RackArgs) -> f64 {
        match self {
            Knob::Workers => f64::from(r.workers),
            Knob::Remote => f64::from(r.remote),
            Knob::HotProb => f64::from(r.hot_prob),
        }
    }
}

const MODES: [ModeArg; 3] = [ModeArg::NoSwitch, ModeArg::LmSwitch, ModeArg::P4db];

/// Runs `pisadb sweep`.
pub fn run(args: &Args) -> Result<(), String> {
    let base = RackArgs {
        cc: args.cc,
        nodes: 8,
        workers: 20,
        remote: 20,
        hot_prob: 75,
        workload: MixArg::A,
        partitioning: PartitioningArg::RoundRobin,
        rows: 1_000_000,
        seed: args.seed,
        measure_ms: if args.quick { 2 } else { 5 },
        warmup_ms: 1,
    };
    let (knob, values, mixes): (Knob, Vec<u32>, Vec<MixArg>) = match (args.experiment, args.quick) {
        (Experiment::YcsbWorkers | Experiment::YcsbBreakdown, false) => {
            (Knob::Workers, vec![1, 2, 4, 8, 12, 16, 20], vec![MixArg::A, MixArg::B, MixArg::C])
        }
        (Experiment::YcsbWorkers | Experiment::YcsbBreakdown, true) => {
            (Knob::Workers, vec![1, 8, 20], vec![MixArg::A, MixArg::B, MixArg::C])
        }
        (Experiment::YcsbRemote, false) => {
            (Knob::Remote, vec![0, 20, 40, 60, 80, 100], vec![MixArg::A, MixArg::B, MixArg::C])
        }
        (Experiment::YcsbRemote, true) => (Knob::Remote, vec![0, 50, 100], vec![MixArg::A, MixArg::C]),
        (Experiment::YcsbHot, false) => (Knob::HotProb, vec![0, 25, 50, 75, 90, 100], vec![MixArg::A, MixArg::C]),
        (Experiment::YcsbHot, true) => (Knob::HotProb, vec![0, 50, 100], vec![MixArg::A]),
    };
    let mut points: Vec<(ModeArg, RackArgs)> = Vec::new();
    for &mix in &mixes {
        for &v in &values {
            for mode in MODES {
                let mut r = RackArgs { workload: mix, ..base.clone() };
                match knob {
                    Knob::Workers => r.workers = v as u16,
                    Knob::Remote => r.remote = v as u8,
                    Knob::HotProb => r.hot_prob = v as u8,
                }
                points.push((mode, r));
            }
        }
    }
    let results = run_all(&points, args.threads, args.experiment.name())?;
    let name = args.experiment.name();
    let csv = args.out.join(format!("{name}.csv"));
    let svg = args.out.join(format!("{name}.svg"));
    write_csv(&csv, &HEADER, &results.iter().map(|p| row(name, knob, p)).collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    let panels = match args.experiment {
        Experiment::YcsbBreakdown => breakdown_panels(&mixes, knob, &results),
        Experiment::YcsbHot => {
            value_panels(&mixes, knob, &results, "committed transactions / s", |p, _| p.result.committed_per_s)
        }
        _ => value_panels(&mixes, knob, &results, "speedup over No-Switch", speedup),
    };
    write_svg(&svg, &title(args.experiment), panels.len().min(3), &panels).map_err(|e| e.to_string())?;
    print_summary(knob, &results);
    println!("\nwrote {} and {}", csv.display(), svg.display());
    Ok(())
}

fn title(e: Experiment) -> String {
    match e {
        Experiment::YcsbWorkers => "YCSB: speedup over No-Switch by workers per node (cf. P4DB Fig. 11, upper row)",
        Experiment::YcsbRemote => "YCSB: speedup over No-Switch by distributed share (cf. P4DB Fig. 11, lower row)",
        Experiment::YcsbBreakdown => "YCSB: committed hot and cold transactions per second (cf. P4DB Fig. 12)",
        Experiment::YcsbHot => "YCSB: throughput by share of hot transactions (cf. P4DB Fig. 15a/b)",
    }
    .to_string()
}

/// Runs every point on `threads` threads; results in the order of `points`.
fn run_all(points: &[(ModeArg, RackArgs)], threads: Option<usize>, name: &str) -> Result<Vec<Point>, String> {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    eprintln!("{name}: {} simulated points on {threads} threads", points.len());
    let progress = Progress::new(points.len() as u64, name);
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<Point, String>>>> = Mutex::new((0..points.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((mode, rack)) = points.get(i) else { break };
                let result = run_point(*mode, rack);
                progress.inc(&format!(
                    "{} {:?} workers={} remote={}%",
                    Mode::from(*mode).name(),
                    rack.workload,
                    rack.workers,
                    rack.remote
                ));
                slots.lock().expect("no panics while holding")[i] = Some(result);
            });
        }
    });
    progress.finish("done");
    slots.into_inner().expect("threads joined").into_iter().map(|r| r.expect("every point ran")).collect()
}

const HEADER: [&str; 17] = [
    "experiment",
    "workload",
    "mode",
    "knob",
    "value",
    "workers",
    "remote_pct",
    "hot_pct",
    "committed_per_s",
    "hot_committed_per_s",
    "cold_committed_per_s",
    "abort_rate",
    "latency_p50_us",
    "latency_p99_us",
    "switch_passes",
    "recirculations",
    "sim_txn_per_wall_s",
];

fn row(name: &str, knob: Knob, p: &Point) -> Vec<String> {
    let r = &p.result;
    let seconds = p.inputs.measure_ms as f64 / 1000.0;
    vec![
        name.to_string(),
        format!("{:?}", p.inputs.workload),
        Mode::from(p.mode).name().to_string(),
        knob.label().to_string(),
        knob.value(&p.inputs).to_string(),
        p.inputs.workers.to_string(),
        p.inputs.remote.to_string(),
        p.inputs.hot_prob.to_string(),
        format!("{:.0}", r.committed_per_s),
        format!("{:.0}", r.hot_committed as f64 / seconds),
        format!("{:.0}", r.cold_committed as f64 / seconds),
        format!("{:.4}", r.abort_rate),
        format!("{:.2}", r.latency_p50_us),
        format!("{:.2}", r.latency_p99_us),
        r.switch_passes.to_string(),
        r.recirculations.to_string(),
        format!("{:.0}", p.sim_txn_per_wall_s),
    ]
}

/// The No-Switch point with the same inputs as `p`.
fn baseline<'a>(p: &Point, all: &'a [Point]) -> Option<&'a Point> {
    all.iter().find(|b| {
        b.mode == ModeArg::NoSwitch
            && b.inputs.workload == p.inputs.workload
            && b.inputs.workers == p.inputs.workers
            && b.inputs.remote == p.inputs.remote
            && b.inputs.hot_prob == p.inputs.hot_prob
    })
}

fn speedup(p: &Point, all: &[Point]) -> f64 {
    baseline(p, all).map_or(f64::NAN, |b| p.result.committed_per_s / b.result.committed_per_s)
}

fn value_panels(
    mixes: &[MixArg],
    knob: Knob,
    all: &[Point],
    y: &str,
    f: impl Fn(&Point, &[Point]) -> f64,
) -> Vec<Panel> {
    mixes
        .iter()
        .map(|&mix| Panel {
            title: format!("YCSB-{mix:?}"),
            x_label: knob.label().into(),
            y_label: y.into(),
            series: MODES
                .iter()
                .map(|&mode| Series {
                    name: Mode::from(mode).name().into(),
                    points: all
                        .iter()
                        .filter(|p| p.mode == mode && p.inputs.workload == mix)
                        .map(|p| (knob.value(&p.inputs), f(p, all)))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

fn breakdown_panels(mixes: &[MixArg], knob: Knob, all: &[Point]) -> Vec<Panel> {
    let per_s = |p: &Point, n: u64| n as f64 / (p.inputs.measure_ms as f64 / 1000.0);
    mixes
        .iter()
        .map(|&mix| Panel {
            title: format!("YCSB-{mix:?}"),
            x_label: knob.label().into(),
            y_label: "committed transactions / s".into(),
            series: MODES
                .iter()
                .flat_map(|&mode| {
                    let of = move |hot: bool| Series {
                        name: format!("{} {}", Mode::from(mode).name(), if hot { "hot" } else { "cold" }),
                        points: all
                            .iter()
                            .filter(|p| p.mode == mode && p.inputs.workload == mix)
                            .map(|p| {
                                let n = if hot { p.result.hot_committed } else { p.result.cold_committed };
                                (knob.value(&p.inputs), per_s(p, n))
                            })
                            .collect(),
                    };
                    [of(true), of(false)]
                })
                .collect(),
        })
        .collect()
}

fn print_summary(knob: Knob, all: &[Point]) {
    println!(
        "{:<9} {:>8} {:<10} {:>12} {:>8} {:>7} {:>9} {:>9}",
        "workload",
        match knob {
            Knob::Workers => "workers",
            Knob::Remote => "remote%",
            Knob::HotProb => "hot%",
        },
        "system",
        "commits/s",
        "speedup",
        "aborts",
        "p50 us",
        "p99 us"
    );
    for p in all {
        println!(
            "{:<9} {:>8} {:<10} {:>12.0} {:>7.2}x {:>6.1}% {:>9.1} {:>9.1}",
            format!("YCSB-{:?}", p.inputs.workload),
            knob.value(&p.inputs),
            Mode::from(p.mode).name(),
            p.result.committed_per_s,
            speedup(p, all),
            p.result.abort_rate * 100.0,
            p.result.latency_p50_us,
            p.result.latency_p99_us
        );
    }
}
