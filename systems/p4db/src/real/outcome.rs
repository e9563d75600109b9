//! What P4DB's real-mode commands run and report: `pisadb cluster` (its rack under the
//! supervisor, [`super::cluster`]) and `pisadb switch-bench` (its switch alone under a load
//! generator, [`super::loadgen`]), each from P4DB's real-mode settings
//! ([`super::settings::RealSettings`]) and the shared words of a run
//! ([`pisadb_harness::real::ClusterRun`]), each returning its report as a table and as one
//! JSON value for the binary to print.
//!
//! A cluster's report is a row per node (its incarnation, commits, aborts, latencies, resends,
//! timeouts, log syncs), the switch's traffic, the wires' counts, and each end-of-run check on
//! a line of its own (`ok  ` or `FAIL`); the run fails when one check does.

use super::cluster::{node_dir, run_cluster, ClusterOptions, ClusterResult, Fault};
use super::loadgen::{run_switch_bench, BenchOptions, BenchResult, Side};
use super::settings::RealSettings;
use crate::node::Mode;
use pisadb_harness::real::{read_settings, ClusterOutcome, ClusterRun, RealKill, SwitchBenchRun};
use pisadb_runtime::wire::{PortWire, WireCounts};
use pisadb_runtime::RuntimeError;
use std::fmt::Write;

/// `writeln!` into a `String`, which cannot fail.
macro_rules! out {
    ($t:expr, $($line:tt)*) => {
        writeln!($t, $($line)*).expect("a String takes any text")
    };
}

/// Messages each sender of the switch benchmark prepares (then reuses in a loop).
const BENCH_POOL: usize = 4096;

/// Each node's wire: `run`'s wire for every port, each `--port-wire` on top (none when every
/// wire is perfect); a port of a node the rack lacks is refused.
fn port_wires(run: &ClusterRun, nodes: u16) -> Result<Vec<PortWire>, RuntimeError> {
    let mut wires = vec![PortWire::from(run.wire); usize::from(nodes)];
    for (node, w) in &run.port_wires {
        let accepted = format!("a node of the rack: 0..{nodes}");
        let port = wires
            .get_mut(usize::from(*node))
            .ok_or_else(|| RuntimeError::bad_setting("--port-wire", node, accepted))?;
        *port = PortWire::from(*w);
    }
    if wires.iter().all(PortWire::is_perfect) {
        wires.clear();
    }
    Ok(wires)
}

/// `pisadb cluster --system p4db`: the rack of `run`, checked.
pub fn cluster(run: &ClusterRun) -> Result<ClusterOutcome, String> {
    let settings: RealSettings = run.read_settings()?;
    settings.check()?;
    let mode = crate::system::mode_of(&run.variant).map_err(|e| e.to_string())?;
    let mut config = settings.run_config(mode);
    // Real round trips include a kernel UDP stack and an fsync: far above the simulated ones.
    config.switch_timeout_ns = 20_000_000;
    config.backoff_max_ns = 200_000;
    let faults = run
        .kills
        .iter()
        .map(|kill| match *kill {
            RealKill::Node { id, at_s } => Fault::KillNode { node: id, at_s, down_s: run.down_s },
            RealKill::Switch { at_s, .. } => Fault::KillSwitch { at_s, down_s: run.down_s },
        })
        .collect();
    let opts = ClusterOptions {
        run: config,
        seconds: run.seconds,
        data_dir: run.data_dir.clone(),
        durable: !run.no_log,
        verify: settings.verify,
        peer_timeout_ms: settings.peer_timeout_ms,
        faults,
        wire: port_wires(run, settings.nodes).map_err(|e| e.to_string())?,
        netns: run.netns,
        exe: run.exe.clone(),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    let failed: Vec<&str> = r.checks.iter().filter(|c| !c.1).map(|c| c.0.as_str()).collect();
    Ok(ClusterOutcome {
        table: table(&settings, run.seconds, &opts, &r),
        json: to_json(&settings, run.seconds, &opts, &r),
        failure: (!failed.is_empty()).then(|| failed.join("; ")),
        ok: None,
        data: format!("data: {} (node logs in {}/…)", opts.data_dir.display(), node_dir(&opts.data_dir, 0).display()),
    })
}

/// `pisadb switch-bench --system p4db`: the switch process under P4DB's load from `run`'s
/// senders (the rack's nodes) and window (each a worker).
pub fn switch_bench(run: &SwitchBenchRun) -> Result<ClusterOutcome, String> {
    let mut settings: RealSettings = read_settings(&run.settings, &run.edits)?;
    settings.nodes = run.senders;
    settings.workers = run.window;
    settings.check()?;
    let opts = BenchOptions {
        run: settings.run_config(Mode::P4db),
        seconds: run.seconds,
        window: run.window,
        pool: BENCH_POOL,
        timeout_ms: run.timeout_ms,
        model_ms: run.model_ms,
        data_dir: run.data_dir.clone(),
        exe: run.exe.clone(),
    };
    let r = run_switch_bench(&opts).map_err(|e| e.to_string())?;
    Ok(ClusterOutcome {
        table: bench_table(&r, &opts),
        json: serde_json::to_value(&r).expect("a result serializes"),
        failure: None,
        ok: None,
        data: String::new(),
    })
}

/// The cluster's report as a table: a row per node, the switch, the wires, each check.
fn table(settings: &RealSettings, seconds: f64, opts: &ClusterOptions, r: &ClusterResult) -> String {
    let mut t = String::new();
    out!(
        t,
        "{:?} on {} node processes x {} workers and a software switch {}, {}, {} s, {}\n",
        settings.workload,
        settings.nodes,
        settings.workers,
        if r.namespaces.is_empty() { "on loopback" } else { "in network namespaces" },
        opts.run.mode.name(),
        seconds,
        if opts.durable { "write-ahead logs with fdatasync" } else { "no logs" }
    );
    out!(t, "node  incarnation  committed   aborts   p50 us   p99 us  resends  timeouts  log syncs  drained");
    for n in &r.nodes {
        out!(
            t,
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
    out!(t,
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
        out!(
            t,
            "wires: {} datagrams lost, {} delayed, {} dropped on a full delay queue (switch to node, all ports)",
            sum(|p| p.lost),
            sum(|p| p.delayed),
            sum(|p| p.queue_full)
        );
    }
    if r.nodes.iter().any(|n| n.incarnation > 0) {
        out!(t, "(a restarted node reports only its last incarnation's commits)");
    }
    for (what, ok, detail) in &r.checks {
        out!(t, "{} {what}: {detail}", if *ok { "ok  " } else { "FAIL" });
    }
    t
}

/// The cluster's report as one JSON object.
fn to_json(settings: &RealSettings, seconds: f64, opts: &ClusterOptions, r: &ClusterResult) -> serde_json::Value {
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
        "workload": format!("{:?}", settings.workload), "mode": opts.run.mode.name(), "seconds": seconds,
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

/// The switch benchmark's report: the process measured beside the model, then its own counters.
fn bench_table(r: &BenchResult, opts: &BenchOptions) -> String {
    let mut t = String::new();
    let m = &r.mix;
    out!(
        t,
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
    out!(t, "{:<36} {:>20} {:>26}", "", "measured: process", "model: simulator");
    out!(
        t,
        "{:<36} {:>20} {:>26}",
        "",
        "(loopback UDP)",
        format!("({}, {} GbE links)", opts.run.profile.name, r.ceilings.link_gbps)
    );
    let mut row = |what: &str, f: &dyn Fn(&Side) -> f64, digits: usize| {
        out!(t, "{what:<36} {:>20.digits$} {:>26.digits$}", f(a), f(b));
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
    out!(
        t,
        "\nmodel ceilings: pipe entry {:.3e} passes/s (one per clock) = {:.3e} switch txn/s at {:.2} passes each; \
         one {} GbE link {:.3e} datagrams/s at {:.0} bytes",
        c.pipeline_passes_per_s,
        c.pipeline_switch_txn_per_s,
        m.passes_per_txn,
        c.link_gbps,
        c.link_datagrams_per_s,
        m.datagram_bytes
    );
    out!(t, "measured / model, datagrams from the switch: {:.4}", a.answered_per_s / b.answered_per_s.max(1e-9));
    let s = &r.switch.traffic;
    out!(
        t,
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
    out!(
        t,
        "switch process CPU: {:.2} s serving ({:.0} datagrams in per CPU-second; {:.1} datagrams per receive call)",
        s.cpu_s,
        s.datagrams_in as f64 / s.cpu_s.max(1e-9),
        s.datagrams_in as f64 / (s.batches_in.max(1)) as f64
    );
    out!(t, "data: {}", r.data_dir.display());
    t
}
