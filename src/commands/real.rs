//! Real mode: `pisadb cluster` (the supervisor), and the `switch` and `node` processes it starts.

use crate::commands::bench::{CcArg, LayoutArg, ModeArg, PartitioningArg, RackArgs, WorkloadArg};
use clap::Args as ClapArgs;
use pisadb_runtime::cluster::{node_dir, run_cluster, ClusterOptions, ClusterResult, Fault};
use pisadb_runtime::{install_stop_signals, RealConfig};
use std::path::PathBuf;

/// `pisadb switch`.
#[derive(ClapArgs, Debug)]
pub struct SwitchArgs {
    /// The rack's config file (`pisadb cluster` writes one: <data-dir>/rack.json).
    #[arg(long)]
    config: PathBuf,
    /// Rebuild the registers from these nodes' data directories before serving (after a crash);
    /// give every node's.
    #[arg(long)]
    recover_from: Vec<PathBuf>,
    /// Write the switch's counters and final hot values here (JSON) when it stops.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// `pisadb node`.
#[derive(ClapArgs, Debug)]
pub struct NodeArgs {
    /// The rack's config file.
    #[arg(long)]
    config: PathBuf,
    /// This node's id (its address is the config's address number `id`).
    #[arg(long)]
    id: u16,
    /// Where the write-ahead log and the report go; a log already there is recovered.
    #[arg(long)]
    data_dir: PathBuf,
}

/// `pisadb cluster`.
#[derive(ClapArgs, Debug)]
pub struct ClusterArgs {
    /// Database nodes (one process each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    nodes: u16,
    /// Workers per node (logical: one transaction each, one thread per node process).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,
    /// The workload.
    #[arg(long, value_enum, default_value = "smallbank")]
    workload: WorkloadArg,
    /// The system.
    #[arg(long, value_enum, default_value = "p4db")]
    mode: ModeArg,
    /// Concurrency control for transactions on the nodes.
    #[arg(long, value_enum, default_value = "no-wait")]
    cc: CcArg,
    /// Rows over all nodes: YCSB keys or SmallBank accounts.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// TPC-C warehouses (a multiple of --nodes).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    warehouses: u16,
    /// Percent of distributed transactions (see `bench --help`).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    remote: Option<u8>,
    /// Seconds of load.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Seed of the workload and layout.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where logs, config and reports go (must not hold an earlier run's logs); default: a new
    /// directory under the system's temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run without write-ahead logs (no fsync; no recovery possible).
    #[arg(long)]
    no_log: bool,
    /// Skip the end-of-run checks (they keep every committed transaction in memory).
    #[arg(long)]
    no_verify: bool,
    /// A worker aborts an attempt another node has not answered within this many ms.
    #[arg(long, default_value_t = 50)]
    peer_timeout_ms: u64,
    /// `kill -9` a node mid-run and restart it: NODE@SECONDS, e.g. 1@2.5 (repeatable).
    #[arg(long, value_parser = parse_kill_node)]
    kill_node: Vec<(u16, f64)>,
    /// `kill -9` the switch at SECONDS into the run and restart it, rebuilt from the logs.
    #[arg(long)]
    kill_switch: Option<f64>,
    /// Seconds a killed process stays down.
    #[arg(long, default_value_t = 0.5)]
    down: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn parse_kill_node(s: &str) -> Result<(u16, f64), String> {
    let (node, at) = s.split_once('@').ok_or_else(|| format!("--kill-node {s}: expected NODE@SECONDS, e.g. 1@2.5"))?;
    let node = node.parse().map_err(|_| format!("--kill-node {s}: node {node:?} is not a number"))?;
    let at: f64 = at.parse().map_err(|_| format!("--kill-node {s}: seconds {at:?} is not a number"))?;
    Ok((node, at))
}

/// Runs `pisadb switch`.
pub fn run_switch(args: &SwitchArgs) -> Result<(), String> {
    install_stop_signals()?;
    let cfg = RealConfig::load(&args.config)?;
    pisadb_runtime::switch_proc::run_switch(&cfg, &args.recover_from, args.report.as_deref()).map(|_| ())
}

/// Runs `pisadb node`.
pub fn run_node(args: &NodeArgs) -> Result<(), String> {
    install_stop_signals()?;
    let cfg = RealConfig::load(&args.config)?;
    if args.id >= cfg.run.nodes {
        return Err(format!("--id {}: the rack has nodes 0..{}", args.id, cfg.run.nodes));
    }
    pisadb_runtime::node_proc::run_node(&cfg, args.id, &args.data_dir).map(|_| ())
}

/// Runs `pisadb cluster`.
pub fn run_cluster_command(args: &ClusterArgs) -> Result<(), String> {
    if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(format!("--seconds {}: expected a number in (0, 3600]", args.seconds));
    }
    let rack = RackArgs {
        cc: args.cc,
        nodes: args.nodes,
        workers: args.workers,
        workload: args.workload,
        remote: args.remote,
        hot_prob: None,
        hot_per_node: None,
        rows: args.rows,
        warehouses: args.warehouses,
        partitioning: PartitioningArg::RoundRobin,
        layout: LayoutArg::Declustered,
        seed: args.seed,
        measure_ms: 1,
        warmup_ms: 0,
    };
    let mut run = rack.config(args.mode.into());
    // Real round trips include a kernel UDP stack and an fsync: far above the simulated ones.
    run.switch_timeout_ns = 20_000_000;
    run.backoff_max_ns = 200_000;
    let mut faults: Vec<Fault> = args
        .kill_node
        .iter()
        .map(|&(node, at_s)| {
            if node >= args.nodes {
                return Err(format!("--kill-node {node}@{at_s}: the rack has nodes 0..{}", args.nodes));
            }
            Ok(Fault::KillNode { node, at_s, down_s: args.down })
        })
        .collect::<Result<_, String>>()?;
    faults.extend(args.kill_switch.map(|at_s| Fault::KillSwitch { at_s, down_s: args.down }));
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pisadb-cluster-{}-{}", std::process::id(), pisadb_runtime::unix_now_ns()))
    });
    let opts = ClusterOptions {
        run,
        seconds: args.seconds,
        data_dir,
        durable: !args.no_log,
        verify: !args.no_verify,
        peer_timeout_ms: args.peer_timeout_ms,
        faults,
        exe: std::env::current_exe().map_err(|e| format!("cannot find the pisadb binary: {e}"))?,
    };
    let result = run_cluster(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(args, &opts, &result)).expect("serializes"));
    } else {
        print_table(args, &opts, &result);
    }
    if result.checks.iter().any(|c| !c.1) {
        return Err("a check failed (see above)".into());
    }
    Ok(())
}

fn print_table(args: &ClusterArgs, opts: &ClusterOptions, r: &ClusterResult) {
    println!(
        "{:?} on {} node processes x {} workers and a software switch on loopback, {}, {} s, {}\n",
        args.workload,
        args.nodes,
        args.workers,
        opts.run.mode.name(),
        args.seconds,
        if opts.durable { "write-ahead logs with fdatasync" } else { "no logs" }
    );
    println!("node  incarnation  committed   aborts   p50 us   p99 us  resends  timeouts  log syncs  drained");
    for n in &r.nodes {
        println!(
            "{:>4}  {:>11}  {:>9}  {:>7}  {:>7.1}  {:>7.1}  {:>7}  {:>8}  {:>9}  {:>7}",
            n.id,
            n.incarnation,
            n.committed,
            n.aborts,
            n.latency_p50_us,
            n.latency_p99_us,
            n.switch_resends,
            n.peer_timeouts,
            n.log_syncs,
            n.drained
        );
    }
    let s = &r.switch;
    println!(
        "\ncommitted/s: {:.0}   aborts: {:.1}%   switch: {:.0} datagrams/s in, {:.0} out, {} passes, {} answers replayed, {} unregistered",
        r.committed_per_s,
        r.abort_rate * 100.0,
        s.datagrams_in as f64 / s.seconds.max(1e-9),
        s.datagrams_out as f64 / s.seconds.max(1e-9),
        s.passes,
        s.replayed_answers,
        s.unregistered
    );
    if r.nodes.iter().any(|n| n.incarnation > 0) {
        println!("(a restarted node reports only its last incarnation's commits)");
    }
    for (what, ok, detail) in &r.checks {
        println!("{} {what}: {detail}", if *ok { "ok  " } else { "FAIL" });
    }
    println!("\ndata: {} (node logs in {}/…)", opts.data_dir.display(), node_dir(&opts.data_dir, 0).display());
}

fn to_json(args: &ClusterArgs, opts: &ClusterOptions, r: &ClusterResult) -> serde_json::Value {
    let nodes: Vec<_> = r
        .nodes
        .iter()
        .map(|n| {
            serde_json::json!({
                "id": n.id, "incarnation": n.incarnation, "committed": n.committed, "aborts": n.aborts,
                "latency_p50_us": n.latency_p50_us, "latency_p99_us": n.latency_p99_us,
                "switch_resends": n.switch_resends, "peer_timeouts": n.peer_timeouts,
                "log_syncs": n.log_syncs, "log_records": n.log_records, "drained": n.drained,
                "not_from_switch": n.not_from_switch,
                "rejected": n.rejected,
            })
        })
        .collect();
    let s = &r.switch;
    serde_json::json!({
        "workload": format!("{:?}", args.workload), "mode": opts.run.mode.name(), "seconds": args.seconds,
        "durable": opts.durable, "committed_per_s": r.committed_per_s, "abort_rate": r.abort_rate,
        "nodes": nodes,
        "switch": {
            "datagrams_in_per_s": s.datagrams_in as f64 / s.seconds.max(1e-9),
            "datagrams_out_per_s": s.datagrams_out as f64 / s.seconds.max(1e-9),
            "passes": s.passes, "recirculations": s.recirculations, "replayed_answers": s.replayed_answers,
            "unregistered": s.unregistered, "rejected": s.rejected, "dropped": s.dropped,
        },
        "checks": r.checks.iter().map(|(w, ok, d)| serde_json::json!({"check": w, "ok": ok, "detail": d})).collect::<Vec<_>>(),
        "data_dir": opts.data_dir,
    })
}
