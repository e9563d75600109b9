//! Real mode: `pisadb cluster` (the supervisor), the `switch` and `node` processes it starts,
//! and `pisadb switch-bench` (a system's switch process alone under a load generator, beside
//! the simulator running the same load).
//!
//! Nothing here knows a system: each offers its real mode through the harness
//! (`pisadb_harness::real::RealMode`), and the binary keeps one table of them
//! ([`crate::systems::real_modes`]). `switch` and `node` read the rack config's system and hand
//! over to its real mode. `cluster` takes one flag vocabulary for every system (`--system
//! --variant --preset --set --seconds --loss --delay-us --jitter-us --port-wire --kill-node N@S
//! --kill-switch [ID@]S --down --netns --no-log --json`); a system's settings are edited by
//! `--set`, and the flags a system kept for some of them (P4DB's `--nodes`, `--mode`, …) are
//! rewritten to `--set KEY=VALUE` (or `--variant`) from the system's own table before the
//! command line is parsed ([`rewrite_aliases`]). Before anything starts, the contract's
//! `RealModes::check_request` refuses a flag the system cannot honour (naming the systems that
//! take it), a kill outside the run or of a process the rack does not have, and settings the
//! rack cannot hold. The system then runs and checks its cluster and returns its report, which
//! this module prints as a table or, with `--json`, one JSON object.

use crate::systems::{real_modes, registry};
use clap::Args as ClapArgs;
use pisadb_harness::real::{
    ClusterOutcome, ClusterRun, RealFlag, RealKill, RealMode, RealModes, RealRequest, RealWire, SwitchBenchRun,
    FOREIGN_ALIAS_ARG,
};
use pisadb_runtime::wire::PortWire;
use pisadb_runtime::{install_stop_signals, system_of, RuntimeError};
use std::ffi::OsString;
use std::path::PathBuf;

/// The real mode of `--system`, or without one the first of the table (the system `cluster`
/// and `switch-bench` run by default).
fn mode_named(modes: &RealModes, system: Option<&str>) -> Result<&'static dyn RealMode, String> {
    match system {
        Some(system) => modes.get(system),
        None => Ok(modes.all()[0]),
    }
}

/// A flag's value out of range: names the flag, the value and what is accepted.
fn bad_flag(flag: &str, value: impl ToString, accepted: impl Into<String>) -> RuntimeError {
    RuntimeError::bad_setting(flag, value, accepted)
}

/// The `pisadb` binary itself, to start the rack's processes from.
fn this_binary() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| RuntimeError::io("the pisadb binary (/proc/self/exe)", e).to_string())
}

/// A new directory under the temporary directory for a run of `what`.
fn new_data_dir(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pisadb-{what}-{}-{}", std::process::id(), pisadb_runtime::unix_now_ns()))
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

/// `pisadb cluster`.
#[derive(ClapArgs, Debug, Clone)]
pub(crate) struct ClusterArgs {
    /// The system whose rack runs (`pisadb systems` lists them) [default: p4db].
    #[arg(long)]
    system: Option<String>,
    /// Its variant (default: its first; `pisadb systems` lists them).
    #[arg(long)]
    variant: Option<String>,
    /// A named set of settings (`pisadb systems --presets NAME` lists them): the real mode's
    /// defaults with the preset's values, which `--set` then edits. Printed before the run; a
    /// value the real rack cannot hold is refused, naming it.
    #[arg(long)]
    preset: Option<String>,
    /// Edit one of the system's real-mode settings, e.g. `--set nodes=3` (P4DB) or `--set
    /// write_share=0.25`; repeatable. A key the system does not have is refused with the keys it
    /// has. Real mode may start smaller than the simulator (its processes share this machine's
    /// cores): P4DB from 4 nodes x 4 workers on SmallBank, SwitchTx from 8 servers x 2 threads.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Seconds of load (for a run that ends by itself: its deadline).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Where logs, config and reports go (must not hold an earlier run's logs); default: a new
    /// directory under the system's temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run without write-ahead logs (no fsync; no recovery possible).
    #[arg(long)]
    no_log: bool,
    /// `kill -9` a host mid-run and restart it: HOST@SECONDS, e.g. 1@2.5 (repeatable).
    #[arg(long, value_parser = parse_kill_node)]
    kill_node: Vec<(u16, f64)>,
    /// `kill -9` a switch at SECONDS into the run and restart it: `[ID@]SECONDS`, switch 0 if no
    /// ID (repeatable).
    #[arg(long, value_parser = parse_kill_switch)]
    kill_switch: Vec<(u16, f64)>,
    /// Seconds a killed process stays down (default 0.5).
    #[arg(long)]
    down: Option<f64>,
    /// Probability that the switch loses a datagram it sends to a host (every port; 0 to 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Delay the switch adds to every datagram it sends to a host (every port; µs).
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Each datagram's delay is drawn from delay ± jitter (every port; µs); reorders datagrams.
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// One port's wire instead: HOST:SETTING=VALUE,… with settings loss, delay-us, jitter-us,
    /// e.g. 2:loss=0.05,delay-us=300 (repeatable).
    #[arg(long, value_parser = parse_port_wire)]
    port_wire: Vec<(u16, Vec<(String, f64)>)>,
    /// Run the switch and each host in its own Linux network namespace, joined by veth pairs
    /// (10.77.x addresses that exist only there), instead of on loopback; needs root and
    /// iproute2. The namespaces are removed afterwards.
    #[arg(long)]
    netns: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Another system's alias flag, left by the rewriting of alias flags to be refused by name.
    #[arg(long = FOREIGN_ALIAS_ARG, hide = true, allow_hyphen_values = true)]
    foreign_aliases: Vec<String>,
}

impl ClusterArgs {
    /// Seconds a killed process stays down.
    fn down(&self) -> f64 {
        self.down.unwrap_or(0.5)
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

/// `e` about a setting of the flag `flag` (`--port-wire 2:…: loss 1.5: expected …`).
fn within_flag(flag: &str, e: RuntimeError) -> String {
    match e {
        RuntimeError::BadSetting { setting, value, accepted } => {
            RuntimeError::BadSetting { setting: format!("{flag}: {setting}"), value, accepted }.to_string()
        }
        other => other.to_string(),
    }
}

/// The wires from the flags: `--loss`/`--delay-us`/`--jitter-us` for every port, and each
/// `--port-wire`'s port with its values on top; each checked.
fn wires(args: &ClusterArgs) -> Result<(RealWire, Vec<(u16, RealWire)>), String> {
    let every = RealWire { loss: args.loss, delay_us: args.delay_us, jitter_us: args.jitter_us };
    PortWire::from(every).validate().map_err(|e| within_flag("--loss/--delay-us/--jitter-us", e))?;
    let mut ports: Vec<(u16, RealWire)> = Vec::new();
    for (port, settings) in &args.port_wire {
        let at = match ports.iter().position(|p| p.0 == *port) {
            Some(at) => at,
            None => {
                ports.push((*port, every));
                ports.len() - 1
            }
        };
        let w = &mut ports[at].1;
        for (k, v) in settings {
            match k.as_str() {
                "loss" => w.loss = *v,
                "delay-us" => w.delay_us = *v as u64,
                _ => w.jitter_us = *v as u64,
            }
        }
        PortWire::from(*w).validate().map_err(|e| within_flag(&format!("--port-wire {port}:…"), e))?;
    }
    Ok((every, ports))
}

/// Rewrites the alias flags of `cluster`'s and `switch-bench`'s system in the command line
/// `args` (`RealModes::rewrite_aliases`: `--nodes 4` to `--set nodes=4`); any other command
/// line is left as it is.
pub(crate) fn rewrite_aliases(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(strings) = args.iter().map(|a| a.to_str().map(String::from)).collect::<Option<Vec<String>>>() else {
        return Ok(args);
    };
    let Some(at) = strings.iter().skip(1).position(|a| !a.starts_with('-')).map(|p| p + 1) else {
        return Ok(args);
    };
    if !matches!(strings[at].as_str(), "cluster" | "switch-bench") {
        return Ok(args);
    }
    let rest = &strings[at + 1..];
    let named = rest.iter().position(|a| a == "--system").and_then(|p| rest.get(p + 1)).cloned();
    let inline = rest.iter().find_map(|a| a.strip_prefix("--system=").map(String::from));
    let modes = real_modes();
    let system = named.or(inline).unwrap_or_else(|| modes.all()[0].name().to_string());
    let rewritten = modes.rewrite_aliases(&system, rest)?;
    Ok(strings[..=at].iter().cloned().chain(rewritten).map(OsString::from).collect())
}

/// The settings of `mode`'s runs: its real-mode defaults (or the system's), `preset`'s values,
/// then every `--set`; and where they came from, for errors. The preset too, if given.
fn settings_of(
    mode: &dyn RealMode,
    preset: Option<&str>,
    sets: &[String],
) -> Result<(serde_json::Value, String, Option<pisadb_harness::preset::Preset>), String> {
    let system = registry().get(mode.name()).map_err(|e| e.to_string())?;
    let mut settings = mode.defaults().unwrap_or_else(|| system.default_settings());
    let mut edits = Vec::new();
    let preset = match preset {
        Some(name) if mode.flags().contains(&RealFlag::Preset) => {
            let preset = pisadb_harness::preset::find_preset(system, name).map_err(|e| e.to_string())?;
            preset
                .apply(&mut settings)
                .map_err(|e| format!("--preset {name}: a value it sets cannot hold in real mode: {e}"))?;
            edits.push(format!("--preset {name}"));
            Some(preset)
        }
        _ => None,
    };
    if mode.flags().contains(&RealFlag::Set) {
        for set in sets {
            pisadb_harness::apply_set(&mut settings, set).map_err(|e| e.to_string())?;
            edits.push(format!("--set {set}"));
        }
    }
    Ok((settings, edits.join(" "), preset))
}

/// Another system's alias flags in `foreign`, as the contract's flags (each named by the table
/// that has it).
fn foreign_flags(modes: &RealModes, foreign: &[String]) -> Vec<RealFlag> {
    let aliases = || modes.all().iter().flat_map(|m| m.flag_aliases());
    foreign.iter().filter_map(|f| aliases().find(|a| a.flag == f).map(|a| RealFlag::Own(a.flag))).collect()
}

/// The flags given that not every system honours, the kills, the variant and the settings, as
/// the contract's request.
fn real_request(
    args: &ClusterArgs,
    system: &str,
    modes: &RealModes,
    settings: &serde_json::Value,
) -> Result<RealRequest, String> {
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
    ];
    let mut flags: Vec<RealFlag> = given.iter().filter(|g| g.0).map(|g| g.1).collect();
    flags.extend(foreign_flags(modes, &args.foreign_aliases));
    let mut kills: Vec<RealKill> = args.kill_node.iter().map(|&(id, at_s)| RealKill::Node { id, at_s }).collect();
    kills.extend(args.kill_switch.iter().map(|&(id, at_s)| RealKill::Switch { id, at_s }));
    let system = registry().get(system).map_err(|e| e.to_string())?;
    let variant = match &args.variant {
        Some(v) => system.variant(v).map_err(|e| e.to_string())?.name,
        None => system.variants()[0].name,
    };
    Ok(RealRequest { seconds: args.seconds, flags, kills, variant: variant.to_string(), settings: settings.clone() })
}

/// Prints `outcome` (its table, or with `json` its JSON object) and returns the command's
/// result.
fn print_outcome(outcome: &ClusterOutcome, json: bool) -> Result<(), String> {
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome.json).expect("a JSON value prints"));
    } else {
        print!("{}", outcome.text());
    }
    outcome.result()
}

/// Runs `pisadb cluster`.
pub(crate) fn run_cluster_command(args: &ClusterArgs) -> Result<(), String> {
    // Everything a system cannot honour or its rack cannot hold is refused before anything starts.
    let modes = real_modes();
    let mode = mode_named(&modes, args.system.as_deref())?;
    let (settings, edits, preset) = settings_of(mode, args.preset.as_deref(), &args.sets)?;
    let request = real_request(args, mode.name(), &modes, &settings)?;
    modes.check_request(mode.name(), &request)?;
    let (wire, port_wires) = wires(args)?;
    if let Some(preset) = &preset {
        // What the preset chose, before anything starts (on stderr beside --json's object).
        let chose = pisadb_harness::preset::describe(registry().get(mode.name()).map_err(|e| e.to_string())?, preset);
        match args.json {
            true => eprint!("{chose}"),
            false => println!("{chose}"),
        }
    }
    let run = ClusterRun {
        variant: request.variant,
        settings,
        edits,
        seconds: args.seconds,
        data_dir: args.data_dir.clone().unwrap_or_else(|| new_data_dir(mode.name())),
        exe: this_binary()?,
        wire,
        port_wires,
        kills: request.kills,
        down_s: args.down(),
        netns: args.netns,
        no_log: args.no_log,
    };
    print_outcome(&mode.run_cluster(&run)?, args.json)
}

/// `pisadb switch-bench`.
#[derive(ClapArgs, Debug)]
pub(crate) struct SwitchBenchArgs {
    /// The system whose switch is measured (`pisadb systems` lists them) [default: p4db].
    #[arg(long)]
    system: Option<String>,
    /// Senders: host addresses the load generator plays (the rack's hosts).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    senders: u16,
    /// Messages in flight per sender (each a worker slot, as a host's workers).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    window: u16,
    /// Edit one of the system's real-mode settings (the load: e.g. `--set workload=ycsb-a`,
    /// `--set rows=2000`, `--set hot_prob=50` for P4DB); repeatable.
    #[arg(long = "set")]
    sets: Vec<String>,
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
    /// Another system's alias flag, left by the rewriting of alias flags to be refused by name.
    #[arg(long = FOREIGN_ALIAS_ARG, hide = true, allow_hyphen_values = true)]
    foreign_aliases: Vec<String>,
}

/// Runs `pisadb switch-bench`.
pub(crate) fn run_switch_bench_command(args: &SwitchBenchArgs) -> Result<(), String> {
    let modes = real_modes();
    let mode = mode_named(&modes, args.system.as_deref())?;
    if let Some(flag) = foreign_flags(&modes, &args.foreign_aliases).first() {
        let who = modes.taking(*flag).join(", ");
        return Err(format!("{}: {} cannot honour it; the systems that take it: {who}", flag.name(), mode.name()));
    }
    if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(bad_flag("--seconds", args.seconds, "a number in (0, 3600]").to_string());
    }
    let (settings, edits, _) = settings_of(mode, None, &args.sets)?;
    let run = SwitchBenchRun {
        settings,
        edits,
        seconds: args.seconds,
        senders: args.senders,
        window: args.window,
        model_ms: args.model_ms,
        timeout_ms: args.timeout_ms,
        data_dir: args.data_dir.clone().unwrap_or_else(|| new_data_dir("switch-bench")),
        exe: this_binary()?,
    };
    let outcome = mode
        .switch_bench(&run)
        .unwrap_or_else(|| Err(format!("system `{}` has no switch benchmark in this build", mode.name())))?;
    print_outcome(&outcome, args.json)
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
