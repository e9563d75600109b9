//! `pisadb bench` (one simulated point) and `pisadb compare` (the three systems side by side):
//! the rack in the simulator, with the figures a user reads.

use clap::{Args as ClapArgs, ValueEnum};
use pisadb_p4db::node::{Cc, Mode};
use pisadb_p4db::{run, LayoutChoice, RunConfig, RunResult, WorkloadSpec};
use pisadb_workload::{Scheme, SmallBankConfig, TpccConfig, YcsbConfig, YcsbMix};
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

/// The workload, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadArg {
    /// YCSB-A: 8 operations, 50% writes.
    #[value(alias = "a")]
    YcsbA,
    /// YCSB-B: 5% writes.
    #[value(alias = "b")]
    YcsbB,
    /// YCSB-C: read only.
    #[value(alias = "c")]
    YcsbC,
    /// SmallBank's six transaction types.
    Smallbank,
    /// TPC-C NewOrder and Payment, 50/50, with warm transactions.
    Tpcc,
}

/// How the hot set is laid out, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutArg {
    /// P4DB's declustered layout.
    Declustered,
    /// Uniformly random arrays.
    Random,
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

/// The rack and workload flags shared by `bench` and `compare`.
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
    /// The workload.
    #[arg(long, value_enum, default_value = "ycsb-a")]
    pub workload: WorkloadArg,
    /// Percent of distributed transactions (YCSB, SmallBank; default 20). For TPC-C, the
    /// remote-item and remote-customer probability (default: the standard's 1% and 15%).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub remote: Option<u8>,
    /// Percent of transactions on the hot set (YCSB default 75, SmallBank 90; not TPC-C).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub hot_prob: Option<u8>,
    /// Hot tuples per node (YCSB default 50 keys, SmallBank 15 accounts; not TPC-C).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub hot_per_node: Option<u64>,
    /// Rows over all nodes: YCSB keys or SmallBank accounts.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub rows: u64,
    /// TPC-C warehouses (a multiple of --nodes).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub warehouses: u16,
    /// How rows are spread over the nodes (YCSB, SmallBank; TPC-C is always by warehouse).
    #[arg(long, value_enum, default_value = "round-robin")]
    pub partitioning: PartitioningArg,
    /// How the hot set is laid out on the switch (P4DB mode).
    #[arg(long, value_enum, default_value = "declustered")]
    pub layout: LayoutArg,
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
        let pct = |p: u8| f64::from(p) / 100.0;
        let partitioning = match self.partitioning {
            PartitioningArg::RoundRobin => Scheme::RoundRobin,
            PartitioningArg::Range => Scheme::Range,
        };
        let ycsb = |mix| {
            let d = YcsbConfig::default();
            WorkloadSpec::Ycsb(YcsbConfig {
                nodes: self.nodes,
                rows: self.rows,
                hot_per_node: self.hot_per_node.unwrap_or(d.hot_per_node),
                hot_prob: self.hot_prob.map_or(d.hot_prob, pct),
                remote_prob: self.remote.map_or(d.remote_prob, pct),
                mix,
                partitioning,
                ..d
            })
        };
        let workload = match self.workload {
            WorkloadArg::YcsbA => ycsb(YcsbMix::A),
            WorkloadArg::YcsbB => ycsb(YcsbMix::B),
            WorkloadArg::YcsbC => ycsb(YcsbMix::C),
            WorkloadArg::Smallbank => {
                let d = SmallBankConfig::default();
                WorkloadSpec::SmallBank(SmallBankConfig {
                    nodes: self.nodes,
                    accounts: self.rows,
                    hot_per_node: self.hot_per_node.unwrap_or(d.hot_per_node),
                    hot_prob: self.hot_prob.map_or(d.hot_prob, pct),
                    remote_prob: self.remote.map_or(d.remote_prob, pct),
                    partitioning,
                    ..d
                })
            }
            WorkloadArg::Tpcc => {
                let d = TpccConfig::default();
                WorkloadSpec::Tpcc(TpccConfig {
                    nodes: self.nodes,
                    warehouses: self.warehouses,
                    remote_item_prob: self.remote.map_or(d.remote_item_prob, pct),
                    remote_customer_prob: self.remote.map_or(d.remote_customer_prob, pct),
                    ..d
                })
            }
        };
        RunConfig {
            nodes: self.nodes,
            workers: self.workers,
            mode,
            cc: self.cc.into(),
            workload,
            seed: self.seed,
            warmup_ns: self.warmup_ms * 1_000_000,
            measure_ns: self.measure_ms * 1_000_000,
            layout: match self.layout {
                LayoutArg::Declustered => LayoutChoice::Declustered,
                LayoutArg::Random => LayoutChoice::Random,
            },
            ..RunConfig::ycsb_default()
        }
    }

    /// One line describing the rack and workload.
    pub fn describe(&self) -> String {
        let cfg = self.config(Mode::P4db);
        let workload = match &cfg.workload {
            WorkloadSpec::Ycsb(c) => format!(
                "YCSB-{:?}, {} rows, {} hot per node, {:.0}% hot, {:.0}% distributed, {:?}",
                c.mix,
                c.rows,
                c.hot_per_node,
                c.hot_prob * 100.0,
                c.remote_prob * 100.0,
                c.partitioning
            ),
            WorkloadSpec::SmallBank(c) => format!(
                "SmallBank, {} accounts, {} hot per node, {:.0}% hot, {:.0}% distributed, {:?}",
                c.accounts,
                c.hot_per_node,
                c.hot_prob * 100.0,
                c.remote_prob * 100.0,
                c.partitioning
            ),
            WorkloadSpec::Tpcc(c) => format!(
                "TPC-C NewOrder/Payment, {} warehouses, {:.0}% remote items, {:.0}% remote customers",
                c.warehouses,
                c.remote_item_prob * 100.0,
                c.remote_customer_prob * 100.0
            ),
        };
        format!(
            "{workload} on {} nodes x {} workers, {:?}, {:?} layout, seed {}; {} ms simulated after {} ms warm-up",
            self.nodes, self.workers, self.cc, self.layout, self.seed, self.measure_ms, self.warmup_ms
        )
    }
}

/// Flags of `pisadb bench`.
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

/// Runs `pisadb bench`.
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
    println!("{}", r.describe());
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
