//! Real mode: `pisadb cluster` (the supervisor), the `switch` and `node` processes it starts,
//! and `pisadb switch-bench` (the switch process alone under a load generator, beside the
//! simulator running the same load).
//!
//! `switch` and `node` serve any rack the runtime can run: they read the rack config's system
//! and hand over to that system's real mode (`pisadb_harness::real::RealMode`, one table of
//! them here: the five systems' and the runtime's own echo system that its tests run).
//!
//! `cluster` takes one flag vocabulary for every system (`--system --variant --preset --set
//! --seconds --loss --delay-us --jitter-us --port-wire --kill-node N@S --kill-switch [ID@]S
//! --down --netns --no-log --json`, and P4DB's own `--mode --cc --nodes --workers …`, `--mode`
//! an alias of `--variant`). Before anything starts, the contract's
//! `RealModes::check_request` refuses a flag the system cannot honour (naming the systems that
//! take it), a kill outside the run or of a process the rack does not have, and settings the
//! rack cannot hold. Each system's cluster and its report are then its own.

use crate::commands::bench::{CcArg, FineLocksArg, LayoutArg, ModeArg, PartitioningArg, Preset, RackArgs, WorkloadArg};
use clap::Args as ClapArgs;
use pisadb_harness::real::{RealFlag, RealKill, RealMode, RealModes, RealRequest};
use pisadb_p4db::real::cluster::{node_dir, run_cluster, ClusterOptions, ClusterResult, Fault};
use pisadb_p4db::real::loadgen::{run_switch_bench, BenchOptions, BenchResult, Side};
use pisadb_p4db::real::RealError;
use pisadb_runtime::wire::{PortWire, WireCounts};
use pisadb_runtime::{echo, install_stop_signals, system_of, RuntimeError};
use std::path::{Path, PathBuf};

/// A flag's value out of range: names the flag, the value and what is accepted.
fn bad_flag(flag: &str, value: impl ToString, accepted: impl Into<String>) -> RuntimeError {
    RuntimeError::bad_setting(flag, value, accepted)
}

/// `e` about a setting of the flag `flag` (`--port-wire 2:…: loss 1.5: expected …`).
fn within_flag(flag: &str, e: RuntimeError) -> RuntimeError {
    match e {
        RuntimeError::BadSetting { setting, value, accepted } => {
            RuntimeError::BadSetting { setting: format!("{flag}: {setting}"), value, accepted }
        }
        other => other,
    }
}

/// The `pisadb` binary itself, to start the rack's processes from.
fn this_binary() -> Result<PathBuf, RuntimeError> {
    std::env::current_exe().map_err(|e| RuntimeError::io("the pisadb binary (/proc/self/exe)", e))
}

/// `pisadb switch`.
#[derive(ClapArgs, Debug)]
pub(crate) struct SwitchArgs {
    /// The rack's config file (`pisadb cluster` writes one: `<data-dir>/rack.json`).
    #[arg(long)]
    config: PathBuf,
    /// Which switch of the rack's network this process is (0 in a rack of one switch).
    #[arg(long, default_value_t = 0)]
    id: u16,
    /// Rebuild the registers from these nodes' data directories before serving (after a crash);
    /// give every node's.
    #[arg(long)]
    recover_from: Vec<PathBuf>,
    /// This switch's incarnation, stamped on every answer: a node drops answers from an older
    /// one than it has seen (a killed switch's, still in flight). Count the switch's restarts.
    #[arg(long, default_value_t = 0)]
    epoch: u16,
    /// Write the switch's counters and final hot values here (JSON) when it stops.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// `pisadb node`.
#[derive(ClapArgs, Debug)]
pub(crate) struct NodeArgs {
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

/// The load of a real rack: the same flags for `cluster` and `switch-bench`.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct LoadArgs {
    /// The workload.
    #[arg(long, value_enum, default_value = "smallbank")]
    workload: WorkloadArg,
    /// Rows over all nodes: YCSB keys or SmallBank accounts.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// TPC-C warehouses (a multiple of the nodes).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    warehouses: u16,
    /// Percent of distributed transactions (see `bench --help`).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    remote: Option<u8>,
    /// Seed of the workload and layout.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl LoadArgs {
    /// The rack of `nodes` × `workers` under this load.
    fn rack(&self, nodes: u16, workers: u16, cc: CcArg, hot_prob: Option<u8>) -> RackArgs {
        RackArgs {
            // Real mode runs PisaDB's engine (the prototype's has no log and no timeouts).
            preset: Preset::Pisadb,
            engine: None,
            txns_per_worker: None,
            cc,
            nodes,
            workers,
            workload: self.workload,
            remote: self.remote,
            hot_prob,
            hot_per_node: None,
            rows: Some(self.rows),
            warehouses: self.warehouses,
            partitioning: Some(PartitioningArg::RoundRobin),
            layout: LayoutArg::Declustered,
            fine_locks: FineLocksArg::Stages,
            recirculation: None,
            seed: self.seed,
            measure_ms: 1,
            warmup_ms: 0,
        }
    }
}

/// Refuses a run length outside (0, 3600] seconds.
fn check_seconds(seconds: f64) -> Result<(), RuntimeError> {
    if seconds > 0.0 && seconds <= 3600.0 {
        Ok(())
    } else {
        Err(bad_flag("--seconds", seconds, "a number in (0, 3600]"))
    }
}

/// `pisadb cluster`.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct ClusterArgs {
    /// The settings `--set` edits: the real mode's defaults with `--preset` applied (not a flag).
    #[arg(skip)]
    base: Option<serde_json::Value>,
    /// The system whose rack runs (`pisadb systems` lists them).
    #[arg(long, default_value = "p4db")]
    system: String,
    /// P4DB: database nodes (one process each; default 4).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    nodes: Option<u16>,
    /// P4DB: workers per node (logical: one transaction each, one thread per node process;
    /// default 4).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: Option<u16>,
    /// P4DB: its mode (an alias of `--variant`; default p4db).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// P4DB: concurrency control for transactions on the nodes (default no-wait).
    #[arg(long, value_enum)]
    cc: Option<CcArg>,
    #[command(flatten)]
    load: LoadArgs,
    /// Seconds of load.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Where logs, config and reports go (must not hold an earlier run's logs); default: a new
    /// directory under the system's temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run without write-ahead logs (no fsync; no recovery possible).
    #[arg(long)]
    no_log: bool,
    /// P4DB: skip the end-of-run checks (they keep every committed transaction in memory).
    #[arg(long)]
    no_verify: bool,
    /// P4DB: a worker aborts an attempt another node has not answered within this many ms
    /// (default 50).
    #[arg(long)]
    peer_timeout_ms: Option<u64>,
    /// `kill -9` a node mid-run and restart it: NODE@SECONDS, e.g. 1@2.5 (repeatable).
    /// (SwitchTx: a server, restarted from its write-ahead log; every server then logs.)
    #[arg(long, value_parser = parse_kill_node)]
    kill_node: Vec<(u16, f64)>,
    /// `kill -9` a switch at SECONDS into the run and restart it: `[ID@]SECONDS`, switch 0 if no
    /// ID (P4DB: rebuilt from the logs; SwitchTx: restarted with zeroed registers; repeatable).
    #[arg(long, value_parser = parse_kill_switch)]
    kill_switch: Vec<(u16, f64)>,
    /// Seconds a killed process stays down (default 0.5).
    #[arg(long)]
    down: Option<f64>,
    /// A named set of settings (`pisadb presets --system NAME` lists them): the real mode's
    /// defaults with the preset's values, which `--set` then edits. Printed before the run; a
    /// value the real rack cannot hold is refused, naming it.
    #[arg(long)]
    preset: Option<String>,
    /// Probability that the switch loses a datagram it sends to a node (every port; 0 to 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Delay the switch adds to every datagram it sends to a node (every port; µs).
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Each datagram's delay is drawn from delay ± jitter (every port; µs); reorders datagrams.
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// One port's wire instead: NODE:SETTING=VALUE,… with settings loss, delay-us, jitter-us,
    /// e.g. 2:loss=0.05,delay-us=300 (repeatable).
    #[arg(long, value_parser = parse_port_wire)]
    port_wire: Vec<(u16, Vec<(String, f64)>)>,
    /// Run the switch and each node in its own Linux network namespace, joined by veth pairs
    /// (10.77.x addresses that exist only there), instead of on loopback; needs root and
    /// iproute2. The namespaces are removed afterwards.
    #[arg(long)]
    netns: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// For a system other than P4DB: its variant (default: its first, `pisadb systems` lists them).
    #[arg(long)]
    variant: Option<String>,
    /// For a system other than P4DB: edit one of its settings (`--set write_share=0.25`);
    /// repeatable. SwitchTx's real mode starts from 8 servers x 2 threads (not the paper's 24:
    /// 12 processes share this machine's cores), a 100 ms timeout and 10 ms epochs.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// For NetAccel: the least time between two tuples a segment streams, in ns (on loopback
    /// nothing else paces the segments, and a software switch fed faster than it forwards
    /// loses datagrams, which fails the query). NetAccel's query ends by itself; `--seconds`
    /// is then its deadline beyond the time this pacing needs.
    /// (Default: `pisadb_netaccel::real::TUPLE_GAP_NS`.)
    #[arg(long)]
    tuple_gap_ns: Option<u64>,
}

impl ClusterArgs {
    /// P4DB's nodes.
    fn nodes(&self) -> u16 {
        self.nodes.unwrap_or(4)
    }

    /// P4DB's workers per node.
    fn workers(&self) -> u16 {
        self.workers.unwrap_or(4)
    }

    /// Seconds a killed process stays down.
    fn down(&self) -> f64 {
        self.down.unwrap_or(0.5)
    }

    /// P4DB's mode: `--variant`, or its alias `--mode`; both must agree.
    fn mode(&self) -> Result<ModeArg, RuntimeError> {
        use clap::ValueEnum;
        let variant = match &self.variant {
            Some(v) => Some(
                ModeArg::from_str(v, false).map_err(|_| bad_flag("--variant", v, "p4db, no-switch or lm-switch"))?,
            ),
            None => None,
        };
        match (variant, self.mode) {
            (Some(v), Some(m)) if v != m => {
                Err(bad_flag("--mode", format!("{m:?}"), "the same mode as --variant (--mode is its alias)"))
            }
            (v, m) => Ok(v.or(m).unwrap_or(ModeArg::P4db)),
        }
    }
}

fn parse_kill_node(s: &str) -> Result<(u16, f64), RuntimeError> {
    let accepted = "NODE@SECONDS with a node number and a number of seconds, e.g. 1@2.5";
    let (node, at) = s.split_once('@').ok_or_else(|| bad_flag("--kill-node", s, accepted))?;
    let node = node.parse().map_err(|_| bad_flag("--kill-node", s, accepted))?;
    let at: f64 = at.parse().map_err(|_| bad_flag("--kill-node", s, accepted))?;
    Ok((node, at))
}

fn parse_kill_switch(s: &str) -> Result<(u16, f64), RuntimeError> {
    let accepted = "[ID@]SECONDS with a switch number and a number of seconds, e.g. 0.8 or 1@0.8";
    let bad = || bad_flag("--kill-switch", s, accepted);
    match s.split_once('@') {
        Some((id, at)) => Ok((id.parse().map_err(|_| bad())?, at.parse().map_err(|_| bad())?)),
        None => Ok((0, s.parse().map_err(|_| bad())?)),
    }
}

fn parse_port_wire(s: &str) -> Result<(u16, Vec<(String, f64)>), RuntimeError> {
    let accepted = "NODE:SETTING=VALUE,… with a node number, settings loss, delay-us, jitter-us and \
                    non-negative numbers, e.g. 2:loss=0.05,delay-us=300";
    let bad = || bad_flag("--port-wire", s, accepted);
    let (node, settings) = s.split_once(':').ok_or_else(bad)?;
    let node = node.parse().map_err(|_| bad())?;
    let settings = settings
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            if !matches!(k, "loss" | "delay-us" | "jitter-us") {
                return Err(bad());
            }
            let v: f64 = v.parse().map_err(|_| bad())?;
            if v < 0.0 {
                return Err(bad());
            }
            Ok((k.to_string(), v))
        })
        .collect::<Result<_, _>>()?;
    Ok((node, settings))
}

/// Each node's wire from the flags: `--loss`/`--delay-us`/`--jitter-us` for every port, then
/// each `--port-wire` on top.
fn port_wires(args: &ClusterArgs) -> Result<Vec<PortWire>, RuntimeError> {
    let every = PortWire { loss: args.loss, delay_us: args.delay_us, jitter_us: args.jitter_us };
    every.validate().map_err(|e| within_flag("--loss/--delay-us/--jitter-us", e))?;
    let mut wires = vec![every; usize::from(args.nodes())];
    for (node, settings) in &args.port_wire {
        let accepted = format!("a node of the rack: 0..{}", args.nodes());
        let w = wires.get_mut(usize::from(*node)).ok_or_else(|| bad_flag("--port-wire", node, accepted))?;
        for (k, v) in settings {
            match k.as_str() {
                "loss" => w.loss = *v,
                "delay-us" => w.delay_us = *v as u64,
                _ => w.jitter_us = *v as u64,
            }
        }
        w.validate().map_err(|e| within_flag(&format!("--port-wire {node}:…"), e))?;
    }
    if wires.iter().all(PortWire::is_perfect) {
        wires.clear();
    }
    Ok(wires)
}

/// The runtime's own echo system in the table of real modes (its tests run it through this
/// binary).
struct EchoReal;

static ECHO: EchoReal = EchoReal;

impl RealMode for EchoReal {
    fn name(&self) -> &'static str {
        echo::SYSTEM
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[]
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| echo::serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| echo::serve_host(cfg, id, data_dir))
    }
}

/// Every real mode this binary runs: the systems' and the runtime's echo.
fn real_modes() -> RealModes {
    RealModes::new(vec![
        &pisadb_p4db::real::REAL,
        &pisadb_gotthard::real::REAL,
        &pisadb_netaccel::real::REAL,
        &pisadb_switchtx::real::REAL,
        &pisadb_transkv::real::REAL,
        &ECHO,
    ])
}

/// Runs `pisadb switch`: the switch process of the config's system.
pub(crate) fn run_switch(args: &SwitchArgs) -> Result<(), String> {
    install_stop_signals().map_err(|e| e.to_string())?;
    let system = system_of(&args.config).map_err(|e| e.to_string())?;
    real_modes().get(&system)?.serve_switch(
        &args.config,
        args.id,
        &args.recover_from,
        args.epoch,
        args.report.as_deref(),
    )
}

/// Runs `pisadb node`: a host process of the config's system.
pub(crate) fn run_node(args: &NodeArgs) -> Result<(), String> {
    install_stop_signals().map_err(|e| e.to_string())?;
    let system = system_of(&args.config).map_err(|e| e.to_string())?;
    real_modes().get(&system)?.serve_host(&args.config, args.id, &args.data_dir)
}

/// The flags given that not every system honours, and the kills, as the contract's request;
/// the settings with every `--set` applied if the system takes `--set` (`takes_set`).
fn real_request(args: &ClusterArgs, takes_set: bool, base: &serde_json::Value) -> Result<RealRequest, String> {
    let mut flags = Vec::new();
    let given = [
        (args.loss > 0.0, RealFlag::Loss),
        (args.delay_us > 0, RealFlag::DelayUs),
        (args.jitter_us > 0, RealFlag::JitterUs),
        (!args.port_wire.is_empty(), RealFlag::PortWire),
        (!args.kill_node.is_empty(), RealFlag::KillNode),
        (!args.kill_switch.is_empty(), RealFlag::KillSwitch),
        (args.down.is_some(), RealFlag::Down),
        (args.netns, RealFlag::Netns),
        (args.no_log, RealFlag::NoLog),
        (args.preset.is_some(), RealFlag::Preset),
        (!args.sets.is_empty(), RealFlag::Set),
        (args.mode.is_some(), RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[0])),
        (args.cc.is_some(), RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[1])),
        (args.nodes.is_some(), RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[2])),
        (args.workers.is_some(), RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[3])),
        (args.peer_timeout_ms.is_some(), RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[4])),
        (args.no_verify, RealFlag::Own(pisadb_p4db::real::OWN_FLAGS[5])),
        (args.tuple_gap_ns.is_some(), RealFlag::Own("--tuple-gap-ns")),
    ];
    flags.extend(given.iter().filter(|g| g.0).map(|g| g.1));
    let mut kills: Vec<RealKill> = args.kill_node.iter().map(|&(id, at_s)| RealKill::Node { id, at_s }).collect();
    kills.extend(args.kill_switch.iter().map(|&(id, at_s)| RealKill::Switch { id, at_s }));
    let system = crate::systems::registry().get(&args.system).map_err(|e| e.to_string())?;
    let variant = match &args.variant {
        Some(v) => system.variant(v).map_err(|e| e.to_string())?.name,
        None => system.variants()[0].name,
    };
    let settings = if args.sets.is_empty() || !takes_set {
        base.clone()
    } else {
        pisadb_harness::read_back(base.clone(), &args.sets).map_err(|e| e.to_string())?
    };
    Ok(RealRequest { seconds: args.seconds, flags, kills, variant: variant.to_string(), settings })
}

/// Runs `pisadb cluster`.
pub(crate) fn run_cluster_command(args: &ClusterArgs) -> Result<(), String> {
    // Everything a system cannot honour or its rack cannot hold is refused before anything starts.
    let modes = real_modes();
    let mode = modes.get(&args.system)?;
    let takes_set = mode.flags().contains(&RealFlag::Set);
    let system = crate::systems::registry().get(&args.system).map_err(|e| e.to_string())?;
    let mut base = mode.defaults().unwrap_or_else(|| system.default_settings());
    let preset = match &args.preset {
        Some(name) if mode.flags().contains(&RealFlag::Preset) => {
            let preset = pisadb_harness::preset::find_preset(system, name).map_err(|e| e.to_string())?;
            preset
                .apply(&mut base)
                .map_err(|e| format!("--preset {name}: a value it sets cannot hold in real mode: {e}"))?;
            Some(preset)
        }
        _ => None,
    };
    modes.check_request(&args.system, &real_request(args, takes_set, &base)?)?;
    if let Some(preset) = &preset {
        // What the preset chose, before anything starts (on stderr beside --json's object).
        let chose = pisadb_harness::preset::describe(system, preset);
        match args.json {
            true => eprint!("{chose}"),
            false => println!("{chose}"),
        }
    }
    let args = &ClusterArgs { base: Some(base), ..args.clone() };
    if args.system == pisadb_gotthard::real::SYSTEM {
        return gotthard_cluster(args);
    }
    if args.system == pisadb_netaccel::real::SYSTEM {
        return netaccel_cluster(args);
    }
    if args.system == pisadb_switchtx::real::SYSTEM {
        return switchtx_cluster(args);
    }
    if args.system == pisadb_transkv::real::SYSTEM {
        return transkv_cluster(args);
    }
    super::bench::require_p4db(&args.system, "real mode")?;
    cluster(args).map_err(|e| e.to_string())
}

/// The processes `--kill-node` and `--kill-switch` name, as the supervisor's crashes.
fn kills(args: &ClusterArgs) -> Vec<pisadb_runtime::supervisor::Crash> {
    use pisadb_runtime::{supervisor::Crash, Role};
    let nodes = args.kill_node.iter().map(|&(id, at_s)| (Role::Host(id), at_s));
    let switches = args.kill_switch.iter().map(|&(id, at_s)| (Role::Switch(id), at_s));
    nodes.chain(switches).map(|(role, at_s)| Crash { role, at_s, down_s: args.down() }).collect()
}

/// `pisadb cluster --system gotthard`: Gotthard's rack as processes on loopback.
fn gotthard_cluster(args: &ClusterArgs) -> Result<(), String> {
    use pisadb_gotthard::real::{run_cluster, ClusterOptions, Spec};
    let (variant, rack, data_dir) = system_cluster_inputs(&pisadb_gotthard::SYSTEM, args)?;
    install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { variant: variant.to_string(), rack },
        seconds: args.seconds,
        data_dir,
        exe: this_binary().map_err(|e| e.to_string())?,
        extra: PortWire { loss: args.loss, delay_us: 0, jitter_us: args.jitter_us },
        crashes: kills(args),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("a result serializes"));
    } else {
        let (f, rack) = (&r.figures, &opts.spec.rack);
        println!(
            "Gotthard ({variant}) on loopback: {} clients, {:.0}% writes, {} s; port delays {} µs (clients) and {} µs \
             (store), each its link's round trip\n",
            rack.clients,
            rack.write_share * 100.0,
            args.seconds,
            2 * rack.near_us,
            2 * rack.far_us
        );
        println!(
            "commits {} ({} writes)   aborts store/switch/opt {}/{}/{}   retries {}   retransmits {}   mean {:.1} ms   p99 {:.1} ms",
            f.commits,
            f.write_commits,
            f.aborts_store,
            f.aborts_switch,
            f.aborts_switch_optimistic,
            f.retries,
            f.retransmissions,
            f.latency.latency_us_mean / 1e3,
            f.latency.latency_us_p99 / 1e3
        );
        println!("store's hot key: {}   switch: {} passes", r.final_value, r.switch.passes);
        for (role, at_s, down_s) in &r.crashes {
            println!("{role:?} killed (kill -9) at {at_s} s, restarted from its log {down_s} s later");
        }
    }
    let ok = "serializable, nothing committed or counted twice, every client finished";
    cluster_verdict(r.failure, ok, &opts.data_dir, args.json)
}

/// `pisadb cluster --system netaccel`: NetAccel's rack as processes on loopback, until the
/// query is answered.
fn netaccel_cluster(args: &ClusterArgs) -> Result<(), String> {
    use pisadb_netaccel::real::{run_cluster, ClusterOptions, Spec};
    let (variant, rack, data_dir) =
        system_cluster_inputs::<pisadb_netaccel::rack::RackConfig>(&pisadb_netaccel::SYSTEM, args)?;
    let plan = pisadb_netaccel::system::plan_of(variant)?;
    rack.check().map_err(|e| format!("--set: {e}"))?;
    let tuple_gap_ns = args.tuple_gap_ns.unwrap_or(pisadb_netaccel::real::TUPLE_GAP_NS);
    if tuple_gap_ns > 1_000_000 {
        return Err(bad_flag("--tuple-gap-ns", tuple_gap_ns, "at most 1000000 (1 ms)").to_string());
    }
    install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { plan, rack, tuple_gap_ns },
        seconds: args.seconds,
        data_dir,
        exe: this_binary().map_err(|e| e.to_string())?,
        crashes: kills(args),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("a result serializes"));
    } else {
        for (role, at_s, down_s) in &r.crashes {
            println!("{role:?} killed (kill -9) at {at_s} s and restarted {down_s} s later, with nothing of its part");
        }
        let rack = &opts.spec.rack;
        println!(
            "NetAccel ({variant}, {:?}) on loopback: SF {}, {} segments, split {}x{}, one tuple per {} ns per segment\n",
            rack.query, rack.sf, rack.segments, r.split[0], r.split[1], tuple_gap_ns
        );
        let response = r.response_ms.map_or("–".to_string(), |ms| format!("{ms:.1} ms"));
        println!(
            "response {response}   groups {}   answer rows {}   tuples {}/{}   overflow i/ii/iii {:.2}/{:.2}/{:.2}%",
            r.groups, r.answer_rows, r.tuples[0], r.tuples[1], r.overflow_pct[0], r.overflow_pct[1], r.overflow_pct[2]
        );
        println!("switch: {} datagrams in, {} out", r.switch.datagrams_in, r.switch.datagrams_out);
    }
    cluster_verdict(r.failure, "the answer equals the plain reference; every host drained", &opts.data_dir, args.json)
}

/// `pisadb cluster --system transkv`: TransKV's data center (8 switch processes, 16 storage
/// nodes over fjall, 4 client hosts, the controller) on loopback.
fn transkv_cluster(args: &ClusterArgs) -> Result<(), String> {
    use pisadb_transkv::real::{run_cluster, ClusterOptions, Spec};
    let (variant, rack, data_dir) =
        system_cluster_inputs::<pisadb_transkv::rack::RackConfig>(&pisadb_transkv::SYSTEM, args)?;
    install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { variant: variant.to_string(), rack },
        seconds: args.seconds,
        data_dir,
        exe: this_binary().map_err(|e| e.to_string())?,
        kills: args.kill_node.clone(),
        down_s: args.down(),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("a result serializes"));
    } else {
        let rack = &opts.spec.rack;
        for (node, at) in &r.killed {
            println!("storage node {node} killed (kill -9) at {at} s and restarted from its log");
        }
        println!(
            "TransKV ({variant}) on loopback: 8 switch processes, 16 storage nodes (fjall), 4 client hosts, the \
             controller; {} records, Zipf {}, {:.0}% writes, {} s\n",
            rack.records,
            rack.zipf,
            rack.write_ratio * 100.0,
            args.seconds
        );
        println!(
            "commits {} ({} writes, {} answered by a switch)   {:.1} ktxn/s   aborts switch/node {}/{}   resolves {}",
            r.commits[0], r.commits[1], r.commits[2], r.ktps, r.aborts[0], r.aborts[1], r.aborts[2]
        );
        println!(
            "read µs mean/p50/p99 {:.0}/{:.0}/{:.0}   write µs {:.0}/{:.0}/{:.0}",
            r.read_latency.latency_us_mean,
            r.read_latency.latency_us_p50,
            r.read_latency.latency_us_p99,
            r.write_latency.latency_us_mean,
            r.write_latency.latency_us_p50,
            r.write_latency.latency_us_p99
        );
        let passes: u64 = r.switches.iter().map(|s| s.passes).sum();
        println!(
            "keys in the fjall stores {}   cached keys compared {} (+{} holding only timestamps)   switch passes {}",
            r.stored_keys, r.cached_compared.0, r.cached_compared.1, passes
        );
    }
    let ok = "serializable in timestamp order, clients and nodes agree, every cached value equals its node's, \
              nothing pending, every host drained";
    cluster_verdict(r.failure, ok, &opts.data_dir, args.json)
}

/// What a registered system's `cluster` takes from the flags: its variant (`--variant`, or
/// its first), its settings (the defaults with every `--set` applied) and the data directory
/// (`--data-dir`, or a new one under the temporary directory). Checks `--seconds` too.
fn system_cluster_inputs<T: serde::de::DeserializeOwned>(
    system: &dyn pisadb_harness::System,
    args: &ClusterArgs,
) -> Result<(&'static str, T, PathBuf), String> {
    check_seconds(args.seconds).map_err(|e| e.to_string())?;
    let variant = match &args.variant {
        Some(v) => system.variant(v).map_err(|e| e.to_string())?.name,
        None => system.variants()[0].name,
    };
    let base = args.base.clone().unwrap_or_else(|| system.default_settings());
    let settings = pisadb_harness::read_back(base, &args.sets).map_err(|e| match &args.preset {
        Some(name) => format!("--preset {name} or --set: {e} (a value real mode's rack cannot hold)"),
        None => e.to_string(),
    })?;
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        let unique = format!("pisadb-{}-{}-{}", system.name(), std::process::id(), pisadb_runtime::unix_now_ns());
        std::env::temp_dir().join(unique)
    });
    Ok((variant, settings, data_dir))
}

/// A system cluster's last lines (the verdict and where its data is, unless `json`) and the
/// command's outcome: an error naming the check that failed.
fn cluster_verdict(failure: Option<String>, ok: &str, data_dir: &std::path::Path, json: bool) -> Result<(), String> {
    if !json {
        match &failure {
            None => println!("ok   {ok}"),
            Some(why) => println!("FAIL {why}"),
        }
        let reports = pisadb_runtime::supervisor::ConfigLaunch::host_dir(data_dir, 0);
        println!("\ndata: {} (reports in {}/…)", data_dir.display(), reports.display());
    }
    match failure {
        None => Ok(()),
        Some(why) => Err(format!("the checks failed: {why}")),
    }
}

/// `pisadb cluster --system switchtx`: SwitchTx's servers and its four switches (S0 over three
/// ToRs) as processes on loopback, from real mode's defaults (8 servers x 2 threads) with
/// every `--set` applied; `--loss`, `--delay-us` and `--jitter-us` on every server's port;
/// `--kill-switch` kills S0 and restarts it after `--down` with zeroed registers;
/// `--kill-node N@S` kills server N (`kill -9`) S seconds in and restarts it after `--down`
/// from its write-ahead log (every server then logs: `durable` is set).
fn switchtx_cluster(args: &ClusterArgs) -> Result<(), String> {
    use pisadb_runtime::supervisor::Crash;
    use pisadb_runtime::Role;
    use pisadb_switchtx::real::{run_cluster, ClusterOptions, Spec};
    if !args.port_wire.is_empty() || args.netns {
        return Err("--system switchtx: --port-wire and --netns are not supported; \
                    --loss/--delay-us/--jitter-us, --kill-switch and --kill-node are"
            .into());
    }
    let (variant, _, data_dir) = system_cluster_inputs::<serde_json::Value>(&pisadb_switchtx::SYSTEM, args)?;
    let (_, mut rack, _) = system_cluster_inputs::<pisadb_switchtx::rack::RackConfig>(&pisadb_switchtx::SYSTEM, args)?;
    // A server that is killed must restart from its log; so must every server's data, since
    // a survivor's answers may be all a restarted one's client has.
    rack.durable |= !args.kill_node.is_empty();
    let mut crashes: Vec<Crash> = args
        .kill_switch
        .iter()
        .map(|&(id, at_s)| Crash { role: Role::Switch(id), at_s, down_s: args.down() })
        .collect();
    crashes.extend(args.kill_node.iter().map(|&(node, at_s)| Crash {
        role: Role::Host(node),
        at_s,
        down_s: args.down(),
    }));
    install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { variant: variant.to_string(), rack },
        seconds: args.seconds,
        data_dir,
        exe: this_binary().map_err(|e| e.to_string())?,
        extra: PortWire { loss: args.loss, delay_us: args.delay_us, jitter_us: args.jitter_us },
        crashes,
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("a result serializes"));
    } else {
        let (f, rack) = (&r.figures, &opts.spec.rack);
        println!(
            "SwitchTx ({variant}) on loopback: {} server processes x {} threads, {} switch processes, theta {}, {} s\n",
            r.hosts.len(),
            rack.threads,
            r.switches.len(),
            rack.workload.theta,
            args.seconds
        );
        println!(
            "commits/s {:.0}   p50 {:.0} us   p99 {:.0} us   aborts {} ({:.1}%, {:?})   timeouts {}   mpl {:.1}",
            f.commits_per_s,
            f.p50_us,
            f.p99_us,
            f.aborts,
            f.abort_rate * 100.0,
            f.aborts_by_reason,
            f.timeouts,
            f.mpl_mean
        );
        println!(
            "switches: {} gathered, {} stale/aborted dropped; wires: {} lost, {} delayed; {} commits checked, {} \
             acknowledged ones found in the final state by the supervisor's ledger",
            f.switch_gathered, f.switch_filtered, r.wire.0, r.wire.1, f.checked_commits, r.acknowledged
        );
        for (role, at_s, down_s) in &r.crashes {
            match role {
                pisadb_runtime::Role::Switch(id) => {
                    println!("switch {id} killed at {at_s} s, restarted with zeroed registers {down_s} s later")
                }
                pisadb_runtime::Role::Host(id) => {
                    println!("server {id} killed at {at_s} s, restarted from its write-ahead log {down_s} s later")
                }
            }
        }
    }
    let ok = if r.replicated {
        "committed history serializable, no commit lost, every backup equals its primary, no lock left, every server drained"
    } else {
        "committed history serializable, no lock left, every server drained (eris keeps no backups)"
    };
    cluster_verdict(r.failure, ok, &opts.data_dir, args.json)
}

fn cluster(args: &ClusterArgs) -> Result<(), RealError> {
    check_seconds(args.seconds)?;
    let rack = args.load.rack(args.nodes(), args.workers(), args.cc.unwrap_or(CcArg::NoWait), None);
    let mut run = rack.config(args.mode()?.into());
    // Real round trips include a kernel UDP stack and an fsync: far above the simulated ones.
    run.switch_timeout_ns = 20_000_000;
    run.backoff_max_ns = 200_000;
    let mut faults: Vec<Fault> = args
        .kill_node
        .iter()
        .map(|&(node, at_s)| {
            if node >= args.nodes() {
                let accepted = format!("a node of the rack: 0..{}", args.nodes());
                return Err(bad_flag("--kill-node", format!("{node}@{at_s}"), accepted));
            }
            Ok(Fault::KillNode { node, at_s, down_s: args.down() })
        })
        .collect::<Result<_, _>>()?;
    for &(id, at_s) in &args.kill_switch {
        if id != 0 {
            return Err(
                bad_flag("--kill-switch", format!("{id}@{at_s}"), "switch 0: a P4DB rack has one switch").into()
            );
        }
        faults.push(Fault::KillSwitch { at_s, down_s: args.down() });
    }
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pisadb-cluster-{}-{}", std::process::id(), pisadb_runtime::unix_now_ns()))
    });
    let opts = ClusterOptions {
        run,
        seconds: args.seconds,
        data_dir,
        durable: !args.no_log,
        verify: !args.no_verify,
        peer_timeout_ms: args.peer_timeout_ms.unwrap_or(50),
        faults,
        wire: port_wires(args)?,
        netns: args.netns,
        exe: this_binary()?,
    };
    let result = run_cluster(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(args, &opts, &result)).expect("serializes"));
    } else {
        print_table(args, &opts, &result);
    }
    if result.checks.iter().any(|c| !c.1) {
        return Err(RealError::CheckFailed);
    }
    Ok(())
}

fn print_table(args: &ClusterArgs, opts: &ClusterOptions, r: &ClusterResult) {
    println!(
        "{:?} on {} node processes x {} workers and a software switch {}, {}, {} s, {}\n",
        args.load.workload,
        args.nodes(),
        args.workers(),
        if r.namespaces.is_empty() { "on loopback" } else { "in network namespaces" },
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
            n.latency.latency_us_p50,
            n.latency.latency_us_p99,
            n.switch_resends,
            n.peer_timeouts,
            n.log_syncs,
            n.drained
        );
    }
    let s = &r.switch.traffic;
    println!(
        "\ncommitted/s: {:.0}   aborts: {:.1}%   switch: {:.0} datagrams/s in, {:.0} out, {} passes, {} answers replayed, {} unregistered",
        r.committed_per_s,
        r.abort_rate * 100.0,
        s.datagrams_in as f64 / s.seconds.max(1e-9),
        s.datagrams_out as f64 / s.seconds.max(1e-9),
        s.passes,
        r.switch.replayed_answers,
        s.unregistered
    );
    if !opts.wire.is_empty() {
        let sum = |f: fn(&WireCounts) -> u64| s.ports.iter().map(|p| f(&p.counts)).sum::<u64>();
        println!(
            "wires: {} datagrams lost, {} delayed, {} dropped on a full delay queue (switch to node, all ports)",
            sum(|p| p.lost),
            sum(|p| p.delayed),
            sum(|p| p.queue_full)
        );
    }
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
                "latency_us_p50": n.latency.latency_us_p50, "latency_us_p99": n.latency.latency_us_p99,
                "switch_resends": n.switch_resends, "peer_timeouts": n.peer_timeouts,
                "log_syncs": n.log_syncs, "log_records": n.log_records, "drained": n.drained,
                "not_from_switch": n.not_from_switch,
                "rejected": n.rejected,
            })
        })
        .collect();
    let s = &r.switch.traffic;
    serde_json::json!({
        "workload": format!("{:?}", args.load.workload), "mode": opts.run.mode.name(), "seconds": args.seconds,
        "durable": opts.durable, "committed_per_s": r.committed_per_s, "abort_rate": r.abort_rate,
        "nodes": nodes,
        "switch": {
            "datagrams_in_per_s": s.datagrams_in as f64 / s.seconds.max(1e-9),
            "datagrams_out_per_s": s.datagrams_out as f64 / s.seconds.max(1e-9),
            "passes": s.passes, "recirculations": s.recirculations, "replayed_answers": r.switch.replayed_answers,
            "unregistered": s.unregistered, "rejected": s.rejected, "dropped": s.dropped,
            "ports": s.ports,
        },
        "checks": r.checks.iter().map(|(w, ok, d)| serde_json::json!({"check": w, "ok": ok, "detail": d})).collect::<Vec<_>>(),
        "wire": opts.wire,
        "netns": r.namespaces,
        "data_dir": opts.data_dir,
    })
}

/// `pisadb switch-bench`.
#[derive(ClapArgs, Debug)]
pub(crate) struct SwitchBenchArgs {
    /// The system whose switch is measured (`pisadb systems` lists them).
    #[arg(long, default_value = "p4db")]
    system: String,
    /// Senders: node addresses the load generator plays (the rack's nodes).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    senders: u16,
    /// Messages in flight per sender (each a worker slot, as a node's workers).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    window: u16,
    #[command(flatten)]
    load: LoadArgs,
    /// Percent of transactions on the hot set (see `bench --help`).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    hot_prob: Option<u8>,
    /// Seconds of load on the switch process (after a 0.3 s warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Virtual milliseconds the simulator's switch model runs the same load.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    model_ms: u64,
    /// A slot gives up on an answer after this many ms and sends its next message.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
    /// Where the config and the switch's report go; default: a new temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `pisadb switch-bench`.
pub(crate) fn run_switch_bench_command(args: &SwitchBenchArgs) -> Result<(), String> {
    super::bench::require_p4db(&args.system, "switch benchmark")?;
    switch_bench(args).map_err(|e| e.to_string())
}

fn switch_bench(args: &SwitchBenchArgs) -> Result<(), RealError> {
    check_seconds(args.seconds)?;
    let rack = args.load.rack(args.senders, args.window, CcArg::NoWait, args.hot_prob);
    let run = rack.config(pisadb_p4db::node::Mode::P4db);
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "pisadb-switch-bench-{}-{}",
            std::process::id(),
            pisadb_runtime::unix_now_ns()
        ))
    });
    let opts = BenchOptions {
        run,
        seconds: args.seconds,
        window: args.window,
        pool: 4096,
        timeout_ms: args.timeout_ms,
        model_ms: args.model_ms,
        data_dir,
        exe: this_binary()?,
    };
    let r = run_switch_bench(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serializes"));
    } else {
        print_bench_table(&r, &opts);
    }
    Ok(())
}

fn print_bench_table(r: &BenchResult, opts: &BenchOptions) {
    let m = &r.mix;
    println!(
        "{} load from {} senders x {} in flight: {:.0}% switch transactions ({:.2} passes, {:.1} instructions each), \
         {:.0}% forwarded lock requests; {:.0} bytes per datagram\n",
        r.workload,
        r.senders,
        r.window,
        m.switch_txn_share * 100.0,
        m.passes_per_txn,
        m.instructions_per_txn,
        (1.0 - m.switch_txn_share) * 100.0,
        m.datagram_bytes
    );
    let (a, b) = (&r.measured, &r.model);
    println!("{:<36} {:>20} {:>26}", "", "measured: process", "model: simulator");
    println!(
        "{:<36} {:>20} {:>26}",
        "",
        "(loopback UDP)",
        format!("({}, {} GbE links)", opts.run.profile.name, r.ceilings.link_gbps)
    );
    let row = |what: &str, f: &dyn Fn(&Side) -> f64, digits: usize| {
        println!("{what:<36} {:>20.digits$} {:>26.digits$}", f(a), f(b));
    };
    row("seconds measured (model: virtual)", &|s| s.seconds, 3);
    row("datagrams to the switch /s", &|s| s.offered_per_s, 0);
    row("datagrams from the switch /s", &|s| s.answered_per_s, 0);
    row("switch transactions answered /s", &|s| s.switch_txn_per_s, 0);
    row("forwarded lock round trips /s", &|s| s.lock_round_trips_per_s, 0);
    row("pipeline passes /s", &|s| s.passes_per_s, 0);
    row("switch txn latency p50 (us)", &|s| s.txn_latency.latency_us_p50, 1);
    row("switch txn latency p99 (us)", &|s| s.txn_latency.latency_us_p99, 1);
    row("lock round trip p50 (us)", &|s| s.lock_latency.latency_us_p50, 1);
    row("slots timed out", &|s| s.timed_out as f64, 0);
    let c = &r.ceilings;
    println!(
        "\nmodel ceilings: pipe entry {:.3e} passes/s (one per clock) = {:.3e} switch txn/s at {:.2} passes each; \
         one {} GbE link {:.3e} datagrams/s at {:.0} bytes",
        c.pipeline_passes_per_s,
        c.pipeline_switch_txn_per_s,
        m.passes_per_txn,
        c.link_gbps,
        c.link_datagrams_per_s,
        m.datagram_bytes
    );
    println!("measured / model, datagrams from the switch: {:.4}", a.answered_per_s / b.answered_per_s.max(1e-9));
    let s = &r.switch.traffic;
    println!(
        "\nswitch process report: {} datagrams in, {} out, {} passes, {} recirculations, {} forwarded, {} emitted, \
         {} unregistered, dropped {:?}, rejected {:?}",
        s.datagrams_in,
        s.datagrams_out,
        s.passes,
        s.recirculations,
        s.forwarded,
        s.emitted,
        s.unregistered,
        s.dropped,
        s.rejected
    );
    println!(
        "switch process CPU: {:.2} s serving ({:.0} datagrams in per CPU-second; {:.1} datagrams per receive call)",
        s.cpu_s,
        s.datagrams_in as f64 / s.cpu_s.max(1e-9),
        s.datagrams_in as f64 / (s.batches_in.max(1)) as f64
    );
    println!("data: {}", r.data_dir.display());
}
