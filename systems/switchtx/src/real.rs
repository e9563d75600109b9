//! SwitchTx in real mode: the servers as host processes and the four switches (S0 over three
//! ToRs, or S0 over one ToR with `multi_rack=false`) as software-switch processes on loopback,
//! through the generic runtime (`pisadb_runtime`: host and switch processes, supervisor,
//! rendezvous).
//!
//! The same state machines as the simulator run here: a [`Server`] per host process, built
//! from the same [`ServerConfig`] as in [`crate::rack`], and a [`Switch`] running
//! [`crate::program::GatherScatter`] per switch process, programmable or not and with the same
//! multicast groups as the variant gives it in the simulator. The switch processes are joined
//! by trunks as the simulated topology ([`crate::rack::topology_of`]), so a cross-rack control
//! message really crosses its ToR's process, S0's and the far ToR's, and the tree gathers and
//! scatters hop by hop.
//!
//! **Semantic priority (§3.4.1).** With `reorder` and `switchtx`, every port of every switch
//! process (host ports and trunks) has the simulator's three strict-priority classes sharing
//! `buffer_kb`, draining at the simulated links' 100 Gbit/s and classified by
//! [`crate::wire::classify`] (`pisadb_runtime::wire`, "Egress queues"), and every server sorts
//! each batch it drains from its socket by the same classes before handling it
//! (`pisadb_runtime::host_proc`, "Receive batches"). On loopback a 100 Gbit/s port rarely
//! backs up: the queues order what a switch round sends out of one port, and the servers'
//! sort is where a backlog meets priority (a server busy with one round finds the next
//! round's datagrams waiting in its socket). The servers' costs are not charged (their
//! processes spend what they spend).
//!
//! **Defaults.** The simulator's defaults are the paper's testbed (8 servers × 24 threads); the
//! project machine has 2 cores for 12 processes, so real mode starts from [`real_defaults`]:
//! 2 threads per server, a 100 ms timeout (loopback round trips through three switch processes
//! on a busy machine reach milliseconds; the simulator's 2 ms would resolve live transactions)
//! and 10 ms admission epochs. `--set` edits these.
//!
//! **Switch crashes.** A switch process can be `kill -9`ed mid-run and restarted
//! ([`ClusterOptions::crashes`]): it comes back with zeroed registers, as §3.5 has it (a switch
//! stores no data, only coordination state); old messages fail the tag check and their clients
//! time out, ask the participants and retry.
//!
//! **Server crashes.** With `durable` (which `--kill-node` sets) every server writes its
//! write-ahead log ([`crate::wal`]) to `wal.log` in its data directory, synced before the
//! round's sends leave. A server process can be `kill -9`ed and restarted: it finds its log,
//! replays it ([`Server::recover`]) and its clients resolve the attempts they had logged. Its
//! report's ledger is then read from the whole log ([`crate::wal::ledger_of`]), so the checks
//! also cover what the killed life did (its commits counted before the kill are not in the
//! throughput figures: that life wrote no report).
//!
//! **A witness.** A server's clients live in its process and die with it, so each server
//! streams every commit it acknowledges to a client to the supervisor's ledger
//! ([`pisadb_runtime::ledger`]); at the end every acknowledged commit must be in the servers'
//! record of commits (read from their logs when they log) and, unless read only, installed.
//!
//! **Checks.** Each server process keeps a [`Ledger`] of its events and writes it with the
//! image of its stores ([`ShardImage`]) in its report; the cluster merges them and runs the
//! simulator's end-of-run checks ([`check_ledger`]): the committed history serializable, no
//! install without a commit, every backup equal to its primary, no lock left. The servers stop
//! starting transactions at the stop time; the run ends once everything in flight has finished
//! and every server is idle.

use crate::program::GatherScatter;
use crate::rack::{
    check_ledger, layout_of, make_switch, server_config, topology_of, variant_of, Ledger, RackConfig, ShardImage,
};
use crate::server::{AbortReason, Server, ServerConfig, ServerEvent, COSTS};
use crate::wal::{ledger_of, WalRecord};
use pisadb_core::Nanos;
use pisadb_harness::real::{ClusterOutcome, ClusterRun, RealFlag};
use pisadb_runtime::host_proc::open_log;
use pisadb_runtime::host_proc::{self, HostRun, Ledgered};
use pisadb_runtime::ledger::{read_ledger, Entry, LedgerClient, LedgerServer, Stage};
use pisadb_runtime::supervisor::{free_ports, ConfigLaunch, Crash};
use pisadb_runtime::switch_proc::{self, SwitchReport};
use pisadb_runtime::wal_file::read_dir_log;
use pisadb_runtime::wire::{EgressQueues, PortWire};
use pisadb_runtime::{write_json, Network, RackConfig as RealConfig, Role, RuntimeError};
use pisadb_switch::Switch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The system name in a SwitchTx rack's config.
pub const SYSTEM: &str = "switchtx";

/// What every process of a real SwitchTx rack is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The variant: `switchtx`, `fasst`, `gas`, `tree-gas`, `reorder`, `eris`.
    pub variant: String,
    /// The rack's settings, as the simulator takes them (warm-up and window unused: the run
    /// lasts as long as the cluster says).
    pub rack: RackConfig,
}

/// Real mode's starting settings (see the module docs): the simulator's with 2 threads per
/// server, a 100 ms timeout and 10 ms admission epochs.
pub fn real_defaults() -> RackConfig {
    RackConfig { threads: 2, timeout_us: 100_000, epoch_us: 10_000, ..RackConfig::default() }
}

/// The servers' configurations of `spec`, checked.
fn configs(spec: &Spec) -> Result<Vec<ServerConfig>, RuntimeError> {
    let v = variant_of(&spec.variant).map_err(|e| RuntimeError::bad_setting("variant", &spec.variant, e))?;
    let layout = layout_of(&spec.rack);
    let configs: Vec<ServerConfig> =
        (0..layout.servers()).map(|id| server_config(id, &v, &spec.rack, &layout, COSTS)).collect();
    for c in &configs {
        c.check().map_err(|e| RuntimeError::bad_setting("rack settings", "the config's spec", e))?;
    }
    Ok(configs)
}

/// The network of `spec`'s racks at `switches` (S0 first, then the ToRs) and `hosts` (the
/// servers, by id), with the wire `extra` (loss, delay, jitter) behind every server's port
/// (what its ToR sends it; the trunks are perfect), and strict-priority egress queues on
/// every port for the variants with semantic priority.
pub fn network(
    spec: &Spec,
    switches: Vec<std::net::SocketAddr>,
    hosts: Vec<std::net::SocketAddr>,
    extra: &PortWire,
) -> Result<Network, RuntimeError> {
    let mut network = Network::from_topology(&topology_of(&layout_of(&spec.rack)), switches, hosts)?;
    if !extra.is_perfect() {
        network.wire = vec![extra.clone(); network.hosts.len()];
    }
    let v = variant_of(&spec.variant).map_err(|e| RuntimeError::bad_setting("variant", &spec.variant, e))?;
    if v.priority {
        // The simulator's ports (`crate::rack::build`): three classes sharing `buffer_kb`.
        let gbps = pisadb_net::LinkParams::hundred_gbe().gbps;
        network.egress = Some(EgressQueues { classes: 3, buffer_bytes: spec.rack.buffer_kb * 1024, gbps });
    }
    network.validate()?;
    Ok(network)
}

/// What a server process reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The server.
    pub id: u16,
    /// Its clients' commits before the stop time.
    pub commits: u64,
    /// Its clients' aborted attempts before the stop time, by reason.
    pub aborts: BTreeMap<String, u64>,
    /// Attempts that timed out, in the whole run.
    pub timeouts: u64,
    /// Datagrams it did not understand.
    pub rejected: u64,
    /// Commit latencies (from the first attempt) before the stop time: µs → commits.
    pub latency_us: BTreeMap<u64, u64>,
    /// Seconds between its first round and the stop time.
    pub seconds: f64,
    /// Mean MPL of its threads at the end.
    pub mpl_mean: f64,
    /// What the checks need from its events.
    pub ledger: Ledger,
    /// Its stores after the drain.
    pub image: ShardImage,
    /// Whether it drained: nothing in flight when it left.
    pub drained: bool,
    /// Datagrams from addresses other than its switch.
    pub not_from_switch: u64,
}

/// A client's commit as the supervisor's ledger keeps it: its id (u64 LE) and whether it was
/// read only (one byte).
fn acknowledged_commit(event: &ServerEvent) -> Option<Vec<u8>> {
    match event {
        ServerEvent::Committed { txn, read_only, .. } => {
            let mut entry = txn.to_le_bytes().to_vec();
            entry.push(u8::from(*read_only));
            Some(entry)
        }
        _ => None,
    }
}

/// Every commit the supervisor's ledger holds as acknowledged to its client is in the
/// servers' record of commits (read from their logs when they log) and, unless read only,
/// installed in a store; the number of them.
fn check_acknowledged(entries: &[Entry], ledger: &Ledger) -> Result<u64, String> {
    let mut acked = 0;
    for e in entries.iter().filter(|e| e.stage == Stage::Acked) {
        let (Some(txn), Some(&read_only)) = (e.payload.get(..8), e.payload.get(8)) else {
            return Err(format!("a ledger entry of server {} that is not a SwitchTx commit", e.host));
        };
        let txn = u64::from_le_bytes(txn.try_into().expect("8 bytes"));
        acked += 1;
        if !ledger.reads.contains_key(&txn) {
            return Err(format!(
                "commit {txn:#x}, acknowledged to its client at server {}, is not in the servers' record: lost",
                e.host
            ));
        }
        if read_only == 0 && !ledger.installed.contains_key(&txn) {
            return Err(format!(
                "commit {txn:#x}, acknowledged to its client at server {}, wrote nothing into any store: lost",
                e.host
            ));
        }
    }
    Ok(acked)
}

fn bad_id(id: u16, what: &str, count: usize) -> RuntimeError {
    RuntimeError::bad_setting("--id", id, format!("{what} of the rack: 0..{count}"))
}

/// Runs server `id` of the rack `cfg` until it stops and drains; writes its report to
/// `<data_dir>/report.json` and returns it.
pub fn serve_host(cfg: &RealConfig<Spec>, id: u16, data_dir: &Path) -> Result<HostReport, RuntimeError> {
    let mut configs = configs(&cfg.spec)?;
    if usize::from(id) >= configs.len() {
        return Err(bad_id(id, "a server", configs.len()));
    }
    let config = configs.swap_remove(usize::from(id));
    let name = format!("switchtx server {id}");
    // A durable server logs to `wal.log` in its data directory and, restarted after a
    // `kill -9`, recovers from it; its ledger is then read from the whole log at the end, so
    // what it did in its earlier life is checked too.
    let (mut wal, records) = open_log::<WalRecord>(config.durable, data_dir, &name)?;
    let restarted = !records.is_empty();
    let mut server = if restarted { Server::recover(config, &records) } else { Server::new(config) };
    drop(records);
    let mut ledger = Ledger::default();
    let mut refused = None;
    let (mut timeouts, mut rejected) = (0, 0);
    // (rack time, latency) of each commit and (rack time, reason) of each abort: the stop
    // time is known only once the run has started.
    let mut committed: Vec<(Nanos, Nanos)> = Vec::new();
    let mut aborted: Vec<(Nanos, AbortReason)> = Vec::new();
    let mut witness = LedgerClient::of_rack(cfg, id)?;
    let witnessed = witness.as_mut().map(|client| Ledgered { client, entry: acknowledged_commit });
    let run: HostRun =
        host_proc::serve_ledgered(cfg, id, &name, &mut server, wal.as_mut(), witnessed, |now, event| {
            if let Err(e) = ledger.record(&event) {
                refused.get_or_insert(e);
            }
            match event {
                ServerEvent::Committed { latency_ns, .. } => committed.push((now, latency_ns)),
                ServerEvent::Aborted(reason) => aborted.push((now, reason)),
                ServerEvent::Timeout => timeouts += 1,
                ServerEvent::Rejected(_) => rejected += 1,
                _ => {}
            }
        })?;
    if let Some(why) = refused {
        return Err(RuntimeError::bad_setting("server events", format!("server {id}"), why));
    }
    if wal.is_some() {
        drop(wal);
        ledger = ledger_of(&read_dir_log::<WalRecord>(data_dir)?);
    }
    let stop_ns = run.started_ns + (run.seconds * 1e9) as Nanos;
    let mut latency_us: BTreeMap<u64, u64> = BTreeMap::new();
    let mut commits = 0;
    for &(_, latency_ns) in committed.iter().filter(|(at, _)| *at <= stop_ns) {
        commits += 1;
        *latency_us.entry(latency_ns / 1_000).or_default() += 1;
    }
    let mut aborts: BTreeMap<String, u64> = BTreeMap::new();
    for &(_, reason) in aborted.iter().filter(|(at, _)| *at <= stop_ns) {
        *aborts.entry(reason_name(reason).into()).or_default() += 1;
    }
    let mpls = server.mpls();
    let report = HostReport {
        id,
        commits,
        aborts,
        timeouts,
        rejected,
        latency_us,
        seconds: run.seconds,
        mpl_mean: mpls.iter().map(|&m| f64::from(m)).sum::<f64>() / mpls.len().max(1) as f64,
        ledger,
        image: ShardImage::of(&server),
        drained: run.drained,
        not_from_switch: run.not_from_switch,
    };
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// An abort reason's name in reports.
fn reason_name(reason: AbortReason) -> &'static str {
    match reason {
        AbortReason::ReadLocked => "read_locked",
        AbortReason::Fail => "fail",
        AbortReason::Timeout => "timeout",
    }
}

/// Runs switch `id` of the rack `cfg` (S0 is 0, the ToRs follow; the gather-and-scatter
/// program, programmable or not per variant, with its multicast groups) until SIGINT/SIGTERM;
/// writes its report to `report` if given.
pub fn serve_switch(cfg: &RealConfig<Spec>, id: u16, report: Option<&Path>) -> Result<SwitchReport, RuntimeError> {
    let spec = &cfg.spec;
    let v = variant_of(&spec.variant).map_err(|e| RuntimeError::bad_setting("variant", &spec.variant, e))?;
    let layout = layout_of(&spec.rack);
    if usize::from(id) >= layout.switches() {
        return Err(bad_id(id, "a switch", layout.switches()));
    }
    let mut switch: Switch<GatherScatter> =
        make_switch(id, &v, &layout).map_err(|e| RuntimeError::bad_setting("program", "gather-and-scatter", e))?;
    switch_proc::serve_and_report_classified(cfg, id, &mut switch, spec.rack.seed, crate::wire::classify, report)
}

/// What to run with [`run_cluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The rack.
    pub spec: Spec,
    /// Seconds until the servers stop starting transactions.
    pub seconds: f64,
    /// Where the config, the reports and the hosts' data directories go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Loss, delay and jitter behind every server's port.
    pub extra: PortWire,
    /// Switches to `kill -9` mid-run and restart (with zeroed registers, §3.5), S0 is 0.
    pub crashes: Vec<Crash>,
}

/// The run's figures, over every server's clients.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterFigures {
    /// Commits before the stop time.
    pub commits: u64,
    /// Commits per second of the run.
    pub commits_per_s: f64,
    /// Median commit latency, µs.
    pub p50_us: f64,
    /// 99th-percentile commit latency, µs.
    pub p99_us: f64,
    /// Aborted attempts before the stop time.
    pub aborts: u64,
    /// Of them, by reason.
    pub aborts_by_reason: BTreeMap<String, u64>,
    /// Aborted attempts per attempt that ended.
    pub abort_rate: f64,
    /// Timeouts in the whole run.
    pub timeouts: u64,
    /// Datagrams the servers rejected.
    pub rejected: u64,
    /// Mean MPL per thread at the end.
    pub mpl_mean: f64,
    /// Control messages the switches absorbed while gathering.
    pub switch_gathered: u64,
    /// Messages the switches dropped as stale or of an aborted transaction.
    pub switch_filtered: u64,
    /// Committed transactions in the whole run, checked.
    pub checked_commits: u64,
}

/// What [`run_cluster`] saw.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterResult {
    /// The variant.
    pub variant: String,
    /// The run's figures.
    pub figures: ClusterFigures,
    /// Each server's report, by id.
    pub hosts: Vec<HostReport>,
    /// Each switch's report, by id (S0 first).
    pub switches: Vec<SwitchReport>,
    /// Whether backups were compared with their primaries (not for `eris`, which keeps none).
    pub replicated: bool,
    /// What the wires behind the servers' ports did, summed over the ToRs: lost, delayed.
    pub wire: (u64, u64),
    /// The crashes carried out: (switch or server, seconds into the run, seconds down).
    pub crashes: Vec<(Role, f64, f64)>,
    /// Commits acknowledged to their clients, each found in the final state, by the
    /// supervisor's ledger ([`pisadb_runtime::ledger`]).
    pub acknowledged: u64,
    /// The first check that failed, if any.
    pub failure: Option<String>,
}

/// The `q` quantile of a histogram `value → count`, 0 if empty.
fn quantile(histogram: &BTreeMap<u64, u64>, q: f64) -> f64 {
    let total: u64 = histogram.values().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (&value, &count) in histogram {
        seen += count;
        if seen >= rank {
            return value as f64;
        }
    }
    0.0
}

/// The figures of a run from its reports.
fn figures(hosts: &[HostReport], switches: &[SwitchReport], seconds: f64) -> ClusterFigures {
    let mut f = ClusterFigures::default();
    let mut latency: BTreeMap<u64, u64> = BTreeMap::new();
    for h in hosts {
        f.commits += h.commits;
        f.timeouts += h.timeouts;
        f.rejected += h.rejected;
        for (reason, n) in &h.aborts {
            *f.aborts_by_reason.entry(reason.clone()).or_default() += n;
        }
        for (us, n) in &h.latency_us {
            *latency.entry(*us).or_default() += n;
        }
    }
    f.aborts = f.aborts_by_reason.values().sum();
    f.commits_per_s = f.commits as f64 / seconds.max(1e-9);
    f.p50_us = quantile(&latency, 0.5);
    f.p99_us = quantile(&latency, 0.99);
    f.abort_rate = f.aborts as f64 / (f.aborts + f.commits).max(1) as f64;
    f.mpl_mean = hosts.iter().map(|h| h.mpl_mean).sum::<f64>() / hosts.len().max(1) as f64;
    let dropped = |s: &SwitchReport, why: &str| s.dropped.get(why).copied().unwrap_or(0);
    f.switch_gathered = switches.iter().map(|s| dropped(s, "gathering")).sum();
    f.switch_filtered = switches.iter().map(|s| dropped(s, "stale") + dropped(s, "aborted")).sum();
    f
}

/// Runs a real SwitchTx rack on loopback for `opts.seconds`, collects every process's report
/// and runs the end-of-run checks. A caller that wants Ctrl-C to stop the rack in order
/// installs `pisadb_runtime::install_stop_signals` first.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult, RuntimeError> {
    let servers = configs(&opts.spec)?.len();
    let v =
        variant_of(&opts.spec.variant).map_err(|e| RuntimeError::bad_setting("--variant", &opts.spec.variant, e))?;
    if opts.spec.rack.lease_us > 0 {
        return Err(RuntimeError::bad_setting(
            "lease_us",
            opts.spec.rack.lease_us.to_string(),
            "0 in real mode: leases and promotion run in the simulator only (a crashed server restarts from its log)",
        ));
    }
    let switches = layout_of(&opts.spec.rack).switches();
    let addrs = free_ports(switches + servers)?;
    opts.extra.validate()?;
    let network = network(&opts.spec, addrs[..switches].to_vec(), addrs[switches..].to_vec(), &opts.extra)?;
    // The witness of every commit acknowledged to a client, which no kill touches.
    let witness = LedgerServer::start(&opts.data_dir)?;
    let mut supervisor = ConfigLaunch::start(SYSTEM, opts.spec.clone(), network, &opts.data_dir, opts.exe.clone())?;
    let durable = opts.spec.rack.durable && !v.eris;
    let fits = |role: Role| match role {
        Role::Switch(id) => usize::from(id) < switches,
        Role::Host(id) => usize::from(id) < servers && durable,
    };
    if let Some(c) = opts.crashes.iter().find(|c| !fits(c.role)) {
        let accepted = format!(
            "a switch of the rack: 0..{switches}, or a server 0..{servers} if the servers log (durable=true; not eris)"
        );
        return Err(RuntimeError::bad_setting("crash", format!("{:?}", c.role), accepted));
    }
    let go = supervisor.start_together(opts.seconds)?;
    let crashes =
        supervisor.inject(go.epoch_unix_ns, &opts.crashes)?.into_iter().map(|c| (c.role, c.at_s, c.down_s)).collect();
    supervisor.wait_for_hosts()?;
    supervisor.stop_switches()?;
    witness.finish()?;
    let hosts: Vec<HostReport> = ConfigLaunch::host_reports(&opts.data_dir, servers as u16)?;
    let switch_reports = ConfigLaunch::switch_reports(&opts.data_dir, switches as u16)?;
    let seconds = hosts.iter().map(|h| h.seconds).fold(0.0, f64::max);
    let mut figures = figures(&hosts, &switch_reports, if seconds > 0.0 { seconds } else { opts.seconds });
    let mut ledger = Ledger::default();
    let mut failure = hosts.iter().try_for_each(|h| ledger.merge(h.ledger.clone())).err();
    let mut acknowledged = 0;
    if failure.is_none() {
        match check_acknowledged(&read_ledger(&opts.data_dir)?, &ledger) {
            Ok(n) => acknowledged = n,
            Err(why) => failure = Some(why),
        }
    }
    if failure.is_none() {
        let images: Vec<ShardImage> = hosts.iter().map(|h| h.image.clone()).collect();
        match check_ledger(&ledger, &images, &crate::config::ShardMap::initial(servers as u8), !v.eris) {
            Ok(n) => figures.checked_commits = n,
            Err(why) => failure = Some(why),
        }
    }
    if let Some(h) = hosts.iter().find(|h| !h.drained) {
        failure.get_or_insert(format!("server {} left with work in flight", h.id));
    }
    let ports = switch_reports.iter().flat_map(|s| &s.ports);
    let wire = ports.fold((0, 0), |(l, d), p| (l + p.counts.lost, d + p.counts.delayed));
    Ok(ClusterResult {
        variant: opts.spec.variant.clone(),
        figures,
        hosts,
        switches: switch_reports,
        replicated: !v.eris,
        wire,
        crashes,
        acknowledged,
        failure,
    })
}

/// SwitchTx's real mode in the system contract ([`pisadb_harness::real`]).
pub struct Real;

/// SwitchTx's [`Real`], for the binary's table of real modes.
pub static REAL: Real = Real;

/// `pisadb cluster --system switchtx`: SwitchTx's servers and its four switches (S0 over three
/// ToRs) as processes on loopback, from real mode's defaults (8 servers x 2 threads) with
/// `--preset` and every `--set` applied; `--loss`, `--delay-us` and `--jitter-us` on every
/// server's port; `--kill-switch` kills S0 and restarts it after `--down` with zeroed
/// registers; `--kill-node N@S` kills server N (`kill -9`) S seconds in and restarts it after
/// `--down` from its write-ahead log (every server then logs: `durable` is set). Checked, and
/// its report.
pub fn cluster(run: &ClusterRun) -> Result<ClusterOutcome, String> {
    let mut rack: RackConfig = run.read_settings()?;
    // A server that is killed must restart from its log; so must every server's data, since
    // a survivor's answers may be all a restarted one's client has.
    let crashes = Crash::of_run(run);
    rack.durable |= crashes.iter().any(|c| matches!(c.role, Role::Host(_)));
    pisadb_runtime::install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { variant: run.variant.clone(), rack },
        seconds: run.seconds,
        data_dir: run.data_dir.clone(),
        exe: run.exe.clone(),
        extra: PortWire::from(run.wire),
        crashes,
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    let (f, rack) = (&r.figures, &opts.spec.rack);
    let mut lines = vec![
        format!(
            "SwitchTx ({}) on loopback: {} server processes x {} threads, {} switch processes, theta {}, {} s\n",
            run.variant,
            r.hosts.len(),
            rack.threads,
            r.switches.len(),
            rack.workload.theta,
            run.seconds
        ),
        format!(
            "commits/s {:.0}   p50 {:.0} us   p99 {:.0} us   aborts {} ({:.1}%, {:?})   timeouts {}   mpl {:.1}",
            f.commits_per_s,
            f.p50_us,
            f.p99_us,
            f.aborts,
            f.abort_rate * 100.0,
            f.aborts_by_reason,
            f.timeouts,
            f.mpl_mean
        ),
        format!(
            "switches: {} gathered, {} stale/aborted dropped; wires: {} lost, {} delayed; {} commits checked, {} \
             acknowledged ones found in the final state by the supervisor's ledger",
            f.switch_gathered, f.switch_filtered, r.wire.0, r.wire.1, f.checked_commits, r.acknowledged
        ),
    ];
    lines.extend(r.crashes.iter().map(|(role, at_s, down_s)| match role {
        Role::Switch(id) => format!("switch {id} killed at {at_s} s, restarted with zeroed registers {down_s} s later"),
        Role::Host(id) => {
            format!("server {id} killed at {at_s} s, restarted from its write-ahead log {down_s} s later")
        }
    }));
    let ok = if r.replicated {
        "committed history serializable, no commit lost, every backup equals its primary, no lock left, every server drained"
    } else {
        "committed history serializable, no lock left, every server drained (eris keeps no backups)"
    };
    let json = serde_json::to_value(&r).expect("a result serializes");
    let reports = ConfigLaunch::host_dir(&opts.data_dir, 0);
    Ok(ClusterOutcome::checked(lines.join("\n") + "\n", json, r.failure.clone(), ok, &opts.data_dir, &reports))
}

impl pisadb_harness::real::RealMode for Real {
    fn name(&self) -> &'static str {
        SYSTEM
    }

    fn defaults(&self) -> Option<serde_json::Value> {
        Some(serde_json::to_value(real_defaults()).expect("settings serialize"))
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[
            RealFlag::Loss,
            RealFlag::DelayUs,
            RealFlag::JitterUs,
            RealFlag::KillNode,
            RealFlag::KillSwitch,
            RealFlag::Down,
            RealFlag::Set,
            RealFlag::Preset,
        ]
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_host(cfg, id, data_dir))
    }

    fn run_cluster(&self, run: &ClusterRun) -> Result<ClusterOutcome, String> {
        cluster(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    #[test]
    fn a_commit_acknowledged_to_a_client_but_missing_from_the_servers_record_is_lost() {
        let commit =
            ServerEvent::Committed { txn: 9, latency_ns: 1, retries: 0, reads: vec![(1, 0)], read_only: false };
        let acked =
            |event: &ServerEvent| Entry { host: 2, stage: Stage::Acked, payload: acknowledged_commit(event).unwrap() };
        let entries = vec![acked(&commit)];
        // A server whose log forgot the commit: the witness catches it.
        let err = check_acknowledged(&entries, &Ledger::default()).unwrap_err();
        assert!(err.contains("commit 0x9, acknowledged to its client at server 2") && err.ends_with("lost"), "{err}");
        let mut ledger = Ledger::default();
        ledger.record(&commit).unwrap();
        assert!(check_acknowledged(&entries, &ledger).unwrap_err().contains("wrote nothing"), "not installed");
        ledger.record(&ServerEvent::Installed(9, 1, 0)).unwrap();
        assert_eq!(check_acknowledged(&entries, &ledger), Ok(1));
        // An intent alone was never acknowledged: nothing to hold the servers to.
        let intent = Entry { stage: Stage::Intent, ..acked(&commit) };
        assert_eq!(check_acknowledged(&[intent], &Ledger::default()), Ok(0));
    }

    #[test]
    fn the_real_network_is_the_simulated_tree_s0_over_three_tors() {
        let spec = Spec { variant: "switchtx".into(), rack: real_defaults() };
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let perfect = PortWire::default();
        let n = network(&spec, (0..4).map(addr).collect(), (10..18).map(addr).collect(), &perfect).unwrap();
        assert_eq!(n.host_switch, vec![1, 1, 1, 2, 2, 2, 3, 3], "servers {{0,1,2}}, {{3,4,5}}, {{6,7}}");
        assert_eq!(n.trunks, vec![(0, 1), (0, 2), (0, 3)], "every ToR under S0");
        let single = Spec { rack: RackConfig { multi_rack: false, ..real_defaults() }, ..spec };
        let lossy = PortWire { loss: 0.01, ..PortWire::default() };
        let n = network(&single, (0..2).map(addr).collect(), (10..18).map(addr).collect(), &lossy).unwrap();
        assert_eq!((n.host_switch.clone(), n.trunks.clone()), (vec![1; 8], vec![(0, 1)]), "one ToR under S0");
        assert!((0..8).all(|h| n.wire_of(h).loss == 0.01), "every server's port loses");
        assert!(n.egress.is_some(), "switchtx has priority queues");
        let fifo = Spec { variant: "tree-gas".into(), ..single };
        let n = network(&fifo, (0..2).map(addr).collect(), (10..18).map(addr).collect(), &perfect).unwrap();
        assert_eq!(n.egress, None, "tree-gas has FIFO ports");
    }

    #[test]
    fn quantiles_rank_the_merged_histogram() {
        let h: BTreeMap<u64, u64> = [(10, 50), (20, 49), (500, 1)].into_iter().collect();
        assert_eq!((quantile(&h, 0.5), quantile(&h, 0.99), quantile(&h, 1.0)), (10.0, 20.0, 500.0));
        assert_eq!(quantile(&BTreeMap::new(), 0.5), 0.0);
    }

    #[test]
    fn real_defaults_keep_the_machine_small_and_pass_the_servers_checks() {
        let spec = Spec { variant: "switchtx".into(), rack: real_defaults() };
        let configs = configs(&spec).unwrap();
        assert_eq!(configs.len(), 8);
        assert!(configs.iter().all(|c| c.threads == 2));
        let bad = Spec { variant: "nope".into(), ..spec };
        assert!(configs_err(&bad).contains("nope"));
    }

    fn configs_err(spec: &Spec) -> String {
        configs(spec).unwrap_err().to_string()
    }
}
