//! `pisadb bench ycsb` (one simulated point) and `pisadb compare` (the three systems side by
//! side): the rack in the simulator, with the figures a user reads.

use clap::{Args as ClapArgs, ValueEnum};
use pisadb_node::{Cc, Mode};
use pisadb_sim::{run, RunConfig, RunResult, WorkloadSpec};
use pisadb_workload::{Scheme, YcsbConfig, YcsbMix};
use serde::Serialize;

/// The system under test, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeArg {
    /// Hot transactions run in the switch.
    P4db,
    /// The switch only forwards.
    NoSwitch,
    /// The switch is a lock manager for hot tuples.
    LmSwitch,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::P4db => Mode::P4db,
            ModeArg::NoSwitch => Mode::NoSwitch,
            ModeArg::LmSwitch => Mode::LmSwitch,
        }
    }
}

/// Concurrency control, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CcArg {
    /// Abort on any lock conflict.
    NoWait,
    /// Older transactions wait, younger ones abort.
    WaitDie,
}

impl From<CcArg> for Cc {
    fn from(c: CcArg) -> Cc {
        match c {
            CcArg::NoWait => Cc::NoWait,
            CcArg::WaitDie => Cc::WaitDie,
        }
    }
}

/// YCSB workload letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MixArg {
    /// 50% writes.
    A,
    /// 5% writes.
    B,
    /// Read only.
    C,
}

impl From<MixArg> for YcsbMix {
    fn from(m: MixArg) -> YcsbMix {
        match m {
            MixArg::A => YcsbMix::A,
            MixArg::B => YcsbMix::B,
            MixArg::C => YcsbMix::C,
        }
    }
}

/// Partitioning scheme, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitioningArg {
    /// Row r on node r % nodes.
    RoundRobin,
    /// Consecutive blocks of rows per node.
    Range,
}

/// The rack and workload flags shared by `bench ycsb`, `compare` and `sweep`.
#[derive(ClapArgs, Debug, Clone, Serialize)]
pub struct RackArgs {
    /// Concurrency control for transactions on the nodes.
    #[arg(long, value_enum, default_value = "no-wait")]
    pub cc: CcArg,
    /// Database nodes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub nodes: u16,
    /// Worker cores per node, each running one transaction at a time.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// Percent of transactions that span several nodes.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub remote: u8,
    /// Percent of transactions on the hot set (50 keys per node).
    #[arg(long, default_value_t = 75, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub hot_prob: u8,
    /// YCSB workload: a (50% writes), b (5%), c (read only).
    #[arg(long, value_enum, default_value = "a")]
    pub workload: MixArg,
    /// How rows are spread over the nodes.
    #[arg(long, value_enum, default_value = "round-robin")]
    pub partitioning: PartitioningArg,
    /// Rows of the YCSB table over all nodes (loaded in well under a second at the default).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub rows: u64,
    /// Seed of everything; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated milliseconds measured (after the warm-up).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub measure_ms: u64,
    /// Simulated milliseconds of warm-up, not measured.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub warmup_ms: u64,
}

impl RackArgs {
    /// The run configuration for `mode`.
    pub fn config(&self, mode: Mode) -> RunConfig {
        let ycsb = YcsbConfig {
            nodes: self.nodes,
            rows: self.rows,
            hot_prob: f64::from(self.hot_prob) / 100.0,
            remote_prob: f64::from(self.remote) / 100.0,
            mix: self.workload.into(),
            partitioning: match self.partitioning {
                PartitioningArg::RoundRobin => Scheme::RoundRobin,
                PartitioningArg::Range => Scheme::Range,
            },
            ..YcsbConfig::default()
        };
        RunConfig {
            nodes: self.nodes,
            workers: self.workers,
            mode,
            cc: self.cc.into(),
            workload: WorkloadSpec::Ycsb(ycsb),
            seed: self.seed,
            warmup_ns: self.warmup_ms * 1_000_000,
            measure_ns: self.measure_ms * 1_000_000,
            ..RunConfig::ycsb_default()
        }
    }
}

/// Flags of `pisadb bench ycsb`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The system under test.
    #[arg(long, value_enum, default_value = "p4db")]
    mode: ModeArg,
    #[command(flatten)]
    rack: RackArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// A run's figures with the simulator's speed and the inputs.
#[derive(Serialize)]
pub struct Point {
    /// The mode.
    pub mode: ModeArg,
    /// The figures.
    #[serde(flatten)]
    pub result: RunResult,
    /// Simulated committed transactions per wall-clock second (the simulator's speed).
    pub sim_txn_per_wall_s: f64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// The inputs.
    pub inputs: RackArgs,
}

/// Runs one point and measures the simulator's speed (the only wall clock in the program).
pub fn run_point(mode: ModeArg, rack: &RackArgs) -> Result<Point, String> {
    #[allow(clippy::disallowed_methods)] // the simulator's own speed is a wall-clock figure
    let started = std::time::Instant::now();
    let out = run(&rack.config(mode.into())).map_err(|e| e.to_string())?;
    let wall_s = started.elapsed().as_secs_f64();
    let committed = out.result.hot_committed + out.result.cold_committed;
    let sim_txn_per_wall_s = committed as f64 / wall_s.max(1e-9);
    Ok(Point { mode, result: out.result, sim_txn_per_wall_s, wall_s, inputs: rack.clone() })
}

/// Runs `pisadb bench ycsb`.
pub fn run_bench(args: &Args) -> Result<(), String> {
    let point = run_point(args.mode, &args.rack)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&point).map_err(|e| e.to_string())?);
        return Ok(());
    }
    print_header(&args.rack);
    print_table(&[point]);
    Ok(())
}

/// Flags of `pisadb compare`.
#[derive(clap::Parser, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    rack: RackArgs,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `pisadb compare`: the three systems on the same workload and seed.
pub fn run_compare(args: &CompareArgs) -> Result<(), String> {
    if !args.json {
        print_header(&args.rack);
    }
    let mut points = Vec::new();
    for mode in [ModeArg::NoSwitch, ModeArg::LmSwitch, ModeArg::P4db] {
        if !args.json {
            eprintln!("simulating {} ...", Mode::from(mode).name());
        }
        points.push(run_point(mode, &args.rack)?);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points).map_err(|e| e.to_string())?);
    } else {
        print_table(&points);
    }
    Ok(())
}

fn print_header(r: &RackArgs) {
    println!(
        "YCSB-{:?} on {} nodes x {} workers, {}% hot, {}% distributed, {:?}, seed {}; {} ms simulated after {} ms warm-up",
        r.workload, r.nodes, r.workers, r.hot_prob, r.remote, r.cc, r.seed, r.measure_ms, r.warmup_ms
    );
    println!();
}

fn print_table(points: &[Point]) {
    let base = points.iter().find(|p| p.mode == ModeArg::NoSwitch).map(|p| p.result.committed_per_s);
    println!(
        "{:<10} {:>12} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
        "system", "commits/s", "speedup", "aborts", "hot", "cold", "p50 us", "p99 us", "passes", "recircs", "sim txn/s"
    );
    for p in points {
        let r = &p.result;
        let speedup = base.map_or("-".to_string(), |b| format!("{:.2}x", r.committed_per_s / b));
        println!(
            "{:<10} {:>12.0} {:>8} {:>6.1}% {:>9} {:>9} {:>9.1} {:>9.1} {:>10} {:>10} {:>11.0}",
            Mode::from(p.mode).name(),
            r.committed_per_s,
            speedup,
            r.abort_rate * 100.0,
            r.hot_committed,
            r.cold_committed,
            r.latency_p50_us,
            r.latency_p99_us,
            r.switch_passes,
            r.recirculations,
            p.sim_txn_per_wall_s
        );
    }
}
