//! `pisadb cluster` for P4DB: a switch and N node processes under the runtime's supervisor
//! ([`pisadb_runtime::supervisor`]), with the crashes asked for, and P4DB's checks after the
//! run.
//!
//! ## Checks after a run
//!
//! - *Nothing committed is lost*: every node's store, rebuilt from its log alone
//!   ([`Node::recover`]), equals the store the node ended with.
//! - *The switch's state is what its transactions imply*: a fresh switch rebuilt from all nodes'
//!   logs ([`crate::node::rebuild`]) holds the same hot values as the live one at the end.
//! - *Every acknowledged commit is in the final state*, against the supervisor's ledger
//!   ([`pisadb_runtime::ledger`]), which the nodes stream every commit to and which no kill
//!   touches: each commit the ledger holds as acknowledged is in its coordinator's log (whose
//!   rebuilt store is the live one, above), unless it wrote nothing; and each commit a log
//!   holds was announced to the ledger before it was logged.
//! - *Workload invariants* (SmallBank's money, TPC-C's consistency) on the union of the stores
//!   and the switch, given the committed transactions: those the logs hold and those
//!   acknowledged, each as the ledger describes it. Kills or not: a killed node's own list
//!   dies with it, the ledger does not.

use crate::node::{LogRecord, Mode, Node};
use crate::real::node::{CommittedTxn, LedgerRecord, NodeReport};
use crate::real::switch::{fresh_switch, hot_values, P4dbSwitchReport};
use crate::real::{P4dbRackConfig, P4dbSpec, RealError, Result, SYSTEM};
use crate::{RackPlan, RackSwitch, RunConfig};
use pisadb_core::SerialStore;
use pisadb_runtime::ledger::{read_ledger, LedgerServer, Stage};
use pisadb_runtime::netns::Netns;
use pisadb_runtime::supervisor::{free_ports, Crash, Launch, Supervisor};
use pisadb_runtime::wal_file::{read_dir_log, LOG_FILE};
use pisadb_runtime::wire::PortWire;
use pisadb_runtime::{install_stop_signals, read_json, Network, RackConfig, Role, RuntimeError};
use pisadb_workload::GeneratedTxn;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A crash to inject.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// `kill -9` node `node` this many seconds into the run, restart it after `down_s`.
    KillNode {
        /// The node.
        node: u16,
        /// When, in seconds after the start.
        at_s: f64,
        /// How long it stays down.
        down_s: f64,
    },
    /// `kill -9` the switch, restart it (rebuilt from the nodes' logs) after `down_s`.
    KillSwitch {
        /// When, in seconds after the start.
        at_s: f64,
        /// How long it stays down.
        down_s: f64,
    },
}

impl Fault {
    /// The fault as the supervisor carries it out.
    fn crash(self) -> Crash {
        match self {
            Fault::KillNode { node, at_s, down_s } => Crash { role: Role::Host(node), at_s, down_s },
            Fault::KillSwitch { at_s, down_s } => Crash { role: Role::Switch(0), at_s, down_s },
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The rack, as for the simulator.
    pub run: RunConfig,
    /// Seconds of load.
    pub seconds: f64,
    /// Where the nodes' data directories, the config and the reports go.
    pub data_dir: PathBuf,
    /// Write-ahead logs with fdatasync.
    pub durable: bool,
    /// Keep committed transactions and stores for the checks.
    pub verify: bool,
    /// Peer timeout in ms.
    pub peer_timeout_ms: u64,
    /// Crashes to inject.
    pub faults: Vec<Fault>,
    /// The wire behind each node's switch port (loss, delay), by node id.
    pub wire: Vec<PortWire>,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Run the switch and each node in its own network namespace
    /// ([`pisadb_runtime::netns`]) instead of all on loopback.
    pub netns: bool,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct ClusterResult {
    /// Each node's last report.
    pub nodes: Vec<NodeReport>,
    /// The switch's last report.
    pub switch: P4dbSwitchReport,
    /// Committed transactions per second over all nodes.
    pub committed_per_s: f64,
    /// Aborted attempts over all attempts.
    pub abort_rate: f64,
    /// The checks: (what, passed, detail).
    pub checks: Vec<(String, bool, String)>,
    /// The network namespaces the rack ran in (removed since), if any.
    pub namespaces: Vec<String>,
}

/// A node's data directory.
pub fn node_dir(data_dir: &Path, id: u16) -> PathBuf {
    data_dir.join(format!("node-{id}"))
}

/// How a P4DB rack's processes start: `pisadb switch` and `pisadb node`.
pub struct P4dbLaunch {
    /// The rack's config file.
    pub config: PathBuf,
    /// Where the reports and the nodes' data directories go.
    pub data_dir: PathBuf,
    /// Nodes in the rack.
    pub nodes: u16,
}

impl Launch for P4dbLaunch {
    /// The switch in `epoch` = its life: 0 at first, and after its `epoch`-th kill rebuilt
    /// from every node's log; it writes its report to `<data_dir>/switch.json` when stopped.
    fn args(&self, role: Role, life: u16) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        match role {
            Role::Switch(_) => {
                args.extend(["switch".into(), "--config".into(), self.config.clone().into()]);
                args.extend(["--report".into(), self.data_dir.join("switch.json").into()]);
                if life > 0 {
                    args.extend(["--epoch".into(), life.to_string().into()]);
                    for id in 0..self.nodes {
                        args.extend(["--recover-from".into(), node_dir(&self.data_dir, id).into()]);
                    }
                }
            }
            Role::Host(id) => {
                args.extend(["node".into(), "--config".into(), self.config.clone().into()]);
                args.extend(["--id".into(), id.to_string().into()]);
                args.extend(["--data-dir".into(), node_dir(&self.data_dir, id).into()]);
            }
        }
        args
    }

    fn name(&self, role: Role) -> String {
        match role {
            Role::Switch(_) => "switch".into(),
            Role::Host(id) => format!("node {id}"),
        }
    }

    fn restart_note(&self, role: Role) -> String {
        match role {
            Role::Switch(_) => ", rebuilt from the nodes' logs".into(),
            Role::Host(_) => String::new(),
        }
    }
}

/// Runs a P4DB rack as processes; see the module documentation.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult> {
    install_stop_signals()?;
    std::fs::create_dir_all(&opts.data_dir).map_err(|e| RuntimeError::io(&opts.data_dir, e))?;
    let nodes = opts.run.nodes;
    for id in 0..nodes {
        let dir = node_dir(&opts.data_dir, id);
        if dir.join(LOG_FILE).exists() {
            return Err(RuntimeError::EarlierRun { dir }.into());
        }
    }
    let netns = if opts.netns { Some(Netns::create(nodes)?) } else { None };
    let mut network = match &netns {
        Some(ns) => Network::rack(ns.switch_addr(), ns.host_addrs()),
        None => {
            let addrs = free_ports(usize::from(nodes) + 1)?;
            Network::rack(addrs[0], addrs[1..].to_vec())
        }
    };
    network.wire = opts.wire.clone();
    let namespaces = netns.as_ref().map(Netns::names);
    let plan = crate::plan(&opts.run)?;
    let cfg = RackConfig {
        system: SYSTEM.to_string(),
        spec: P4dbSpec { run: opts.run.clone(), peer_timeout_ms: opts.peer_timeout_ms, verify: opts.verify },
        network,
        // Set by the go, once every process is ready.
        epoch_unix_ns: 0,
        stop_unix_ns: 0,
        durable: opts.durable,
        rendezvous: Some(opts.data_dir.clone()),
    };
    cfg.network.validate()?;
    let config = opts.data_dir.join("rack.json");
    cfg.save(&config)?;
    let ledger = if opts.verify { Some(LedgerServer::start(&opts.data_dir)?) } else { None };
    let launch = P4dbLaunch { config, data_dir: opts.data_dir.clone(), nodes };
    let exe = opts.exe.clone();
    let mut rack = Supervisor::new("cluster", exe, launch, &opts.data_dir, netns);
    rack.spawn(Role::Switch(0))?;
    for id in 0..nodes {
        rack.spawn(Role::Host(id))?;
    }
    eprintln!(
        "cluster: switch on {} and {} nodes {}, planning the rack; data in {}",
        cfg.network.switches[0],
        nodes,
        if namespaces.is_some() { "in network namespaces" } else { "on loopback" },
        opts.data_dir.display()
    );
    let go = rack.start_together(opts.seconds)?;
    eprintln!("cluster: every process is ready; load runs {:.1} s", opts.seconds);
    let crashes: Vec<Crash> = opts.faults.iter().map(|f| f.crash()).collect();
    let done = rack.inject(go.epoch_unix_ns, &crashes)?;
    let node_killed = done.iter().any(|c| matches!(c.role, Role::Host(_)));
    let killed = if node_killed { "after a node kill, " } else { "" };
    // Stopped early (SIGINT/SIGTERM): the load ran until then, not the whole time asked for.
    let load_s = match rack.wait_for_hosts()? {
        Some(at) => (at.saturating_sub(go.epoch_unix_ns) as f64 / 1e9).clamp(1e-3, opts.seconds),
        None => opts.seconds,
    };
    rack.stop_switches()?;
    // Every node has exited: its stream to the ledger has ended.
    let ledger_entries = ledger.map(LedgerServer::finish).transpose()?;
    let reports = (0..nodes)
        .map(|id| read_json::<NodeReport>(&node_dir(&opts.data_dir, id).join("report.json")))
        .collect::<Result<Vec<_>, _>>()?;
    let switch_report: P4dbSwitchReport = read_json(&opts.data_dir.join("switch.json"))?;
    let committed: u64 = reports.iter().map(|r| r.committed).sum();
    let aborts: u64 = reports.iter().map(|r| r.aborts).sum();
    let mut checks = Vec::new();
    if let (true, Some(entries)) = (opts.durable, ledger_entries) {
        checks = verify(&cfg, &plan, &opts.data_dir, &reports, &switch_report)?;
        eprintln!("cluster: {killed}the ledger holds {entries} entries");
    }
    Ok(ClusterResult {
        committed_per_s: committed as f64 / load_s,
        abort_rate: if committed + aborts == 0 { 0.0 } else { aborts as f64 / (committed + aborts) as f64 },
        nodes: reports,
        switch: switch_report,
        checks,
        namespaces: namespaces.unwrap_or_default(),
    })
}

/// The end-of-run checks of the module documentation.
fn verify(
    cfg: &P4dbRackConfig,
    plan: &RackPlan,
    data_dir: &Path,
    reports: &[NodeReport],
    switch: &P4dbSwitchReport,
) -> Result<Vec<(String, bool, String)>> {
    let run = &cfg.spec.run;
    let mut checks = Vec::new();
    let mut logs = Vec::new();
    for r in reports {
        let log = read_dir_log::<LogRecord>(&node_dir(data_dir, r.id))?;
        let node_cfg = plan.node_config(run, r.id);
        let (node, _) = Node::recover(node_cfg, plan.node_workload(run, r.id), plan.switch_view(), run.seed, &log)
            .map_err(|why| RealError::Node { node: r.id, why })?;
        let recovered: BTreeMap<_, _> = node.store().iter().map(|(k, t)| (k, t.value)).collect();
        let live: BTreeMap<_, _> = r.store.iter().copied().collect();
        let differing = live.iter().filter(|(k, v)| recovered.get(k) != Some(v)).count()
            + recovered.keys().filter(|k| !live.contains_key(k)).count();
        checks.push((
            format!("node {}: store rebuilt from its log ({} records) equals its live store", r.id, log.len()),
            differing == 0,
            format!("{} tuples, {differing} differ", live.len()),
        ));
        logs.push(log);
    }
    if run.mode == Mode::P4db {
        checks.push(check_switch(cfg, plan, &logs, switch)?);
    }
    let ledger = Ledger::read(data_dir)?;
    checks.push(ledger.check_acknowledged(&logs));
    checks.push(check_invariants(plan, reports, switch, &ledger, &logs));
    Ok(checks)
}

/// What the supervisor's ledger says about each transaction, by id.
#[derive(Default)]
struct Ledger {
    /// Each transaction announced: its record (with every output once they are known).
    txns: BTreeMap<u64, CommittedTxn>,
    /// Whether its outputs are all known (a `Committing` record's switch outputs are not).
    complete: BTreeSet<u64>,
    /// The transactions acknowledged (durable at their node), with the node.
    acked: BTreeMap<u64, u16>,
}

impl Ledger {
    /// The ledger in `data_dir`.
    fn read(data_dir: &Path) -> Result<Ledger> {
        let mut ledger = Ledger::default();
        for entry in read_ledger(data_dir)? {
            let record: LedgerRecord = serde_json::from_slice(&entry.payload).map_err(|e| RealError::Node {
                node: entry.host,
                why: format!("a ledger entry that is not a P4DB commit: {e}"),
            })?;
            let id = match record {
                LedgerRecord::Committing { id, txn } => {
                    if !ledger.complete.contains(&id) {
                        ledger.txns.insert(id, txn);
                    }
                    id
                }
                LedgerRecord::Committed { id, txn } => {
                    ledger.txns.insert(id, txn);
                    ledger.complete.insert(id);
                    id
                }
                LedgerRecord::Recovered { id, outputs } => {
                    if let Some(txn) = ledger.txns.get_mut(&id) {
                        txn.outputs = outputs;
                        ledger.complete.insert(id);
                    }
                    id
                }
            };
            if entry.stage == Stage::Acked {
                ledger.acked.insert(id, entry.host);
            }
        }
        Ok(ledger)
    }

    /// Every acknowledged transaction that wrote is in a log: no acknowledged commit lost.
    fn check_acknowledged(&self, logs: &[Vec<LogRecord>]) -> (String, bool, String) {
        let logged = committed_in(logs);
        let lost: Vec<String> = self
            .acked
            .iter()
            .filter(|(id, _)| !logged.contains(id))
            .filter(|(id, _)| self.txns.get(id).is_some_and(|t| !t.txn.is_read_only() || !t.inserts.is_empty()))
            .map(|(id, node)| format!("{id:#x} of node {node}"))
            .collect();
        (
            format!("ledger: every one of {} acknowledged commits is in the final state", self.acked.len()),
            lost.is_empty(),
            match lost.len() {
                0 => format!("{} commits in the logs, {} announced", logged.len(), self.txns.len()),
                n => format!("{n} lost, e.g. {}", lost.iter().take(5).cloned().collect::<Vec<_>>().join(", ")),
            },
        )
    }
}

/// The transactions the logs hold as committed: a coordinator's commit, or a switch
/// transaction logged (which counts as committed, §6.1).
fn committed_in(logs: &[Vec<LogRecord>]) -> BTreeSet<u64> {
    logs.iter()
        .flatten()
        .filter_map(|r| match r {
            LogRecord::Committed { txn, .. } | LogRecord::SwitchIntent { txn, .. } => Some(*txn),
            _ => None,
        })
        .collect()
}

/// A fresh switch rebuilt from `logs` holds the live switch's hot values.
fn check_switch(
    cfg: &P4dbRackConfig,
    plan: &RackPlan,
    logs: &[Vec<LogRecord>],
    switch: &P4dbSwitchReport,
) -> Result<(String, bool, String)> {
    let mut fresh = fresh_switch(plan, cfg)?;
    let rebuilt = match &mut fresh {
        RackSwitch::P4db(s) => crate::node::rebuild::rebuild_switch(s, logs).map(|_| ()),
        RackSwitch::LockManager(_) => Ok(()),
    };
    let (ok, detail) = match rebuilt {
        Ok(()) => {
            let expected = hot_values(plan, &fresh);
            let differing = expected.iter().zip(&switch.hot_values).filter(|(a, b)| a != b).count();
            (
                differing == 0 && expected.len() == switch.hot_values.len(),
                format!("{} hot tuples, {differing} differ", expected.len()),
            )
        }
        Err(e) => (false, e),
    };
    Ok(("switch: registers rebuilt from all logs equal the live switch's".into(), ok, detail))
}

/// The workload's invariants over the union of the stores and the switch, given the
/// transactions committed: those the logs hold and those acknowledged, as the ledger
/// describes them.
fn check_invariants(
    plan: &RackPlan,
    reports: &[NodeReport],
    switch: &P4dbSwitchReport,
    ledger: &Ledger,
    logs: &[Vec<LogRecord>],
) -> (String, bool, String) {
    let undrained: Vec<u16> = reports.iter().filter(|r| !r.drained).map(|r| r.id).collect();
    if !undrained.is_empty() {
        let stuck: Vec<String> =
            reports.iter().flat_map(|r| r.stuck.iter().map(move |l| format!("node {}: {l}", r.id))).collect();
        return (
            "workload invariants".into(),
            false,
            format!(
                "nodes {undrained:?} stopped with transactions in flight, so what they committed is unsettled; {}",
                stuck.join("; ")
            ),
        );
    }
    let mut ids = committed_in(logs);
    ids.extend(ledger.acked.keys().copied());
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !ledger.complete.contains(id))
        .map(|id| match ledger.txns.contains_key(id) {
            true => format!("{id:#x} (its switch outputs never reached the ledger)"),
            false => format!("{id:#x} (never announced to the ledger)"),
        })
        .collect();
    if !unknown.is_empty() {
        return (
            "workload invariants".into(),
            false,
            format!(
                "{} committed transactions the ledger cannot describe, e.g. {}",
                unknown.len(),
                unknown.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    let mut db = SerialStore::default();
    for r in reports {
        r.store.iter().for_each(|&(k, v)| db.set(k, v));
    }
    switch.hot_values.iter().for_each(|&(k, v)| db.set(k, v));
    let mut kinds: BTreeMap<String, &'static str> = BTreeMap::new();
    let gens: Vec<(GeneratedTxn, &[i64])> = ids
        .iter()
        .map(|id| {
            let c = &ledger.txns[id];
            // Transaction types are a handful of names: intern each once.
            let kind = *kinds.entry(c.kind.clone()).or_insert_with(|| Box::leak(c.kind.clone().into_boxed_str()));
            let gen = GeneratedTxn {
                txn: c.txn.clone(),
                class: c.class,
                inserts: c.inserts.clone(),
                distributed: c.distributed,
                home: c.home,
                kind,
            };
            (gen, c.outputs.as_slice())
        })
        .collect();
    let committed: Vec<(&GeneratedTxn, &[i64])> = gens.iter().map(|(g, o)| (g, *o)).collect();
    let result = plan.workload.check_invariants(&db, &committed);
    (
        format!("workload invariants over {} committed transactions (from the ledger)", committed.len()),
        result.is_ok(),
        result.err().unwrap_or_else(|| "hold".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::{Op, TupleKey, Txn};
    use pisadb_workload::TxnClass;

    fn txn(ops: Vec<Op>) -> CommittedTxn {
        let outputs = vec![0; ops.len()];
        CommittedTxn {
            kind: "t".into(),
            class: TxnClass::Cold,
            distributed: false,
            home: 0,
            txn: Txn::new(ops),
            inserts: vec![],
            outputs,
        }
    }

    fn committed(id: u64) -> LogRecord {
        LogRecord::Committed { txn: id, writes: vec![], inserted: vec![], insert_seq: 0 }
    }

    #[test]
    fn an_acknowledged_write_missing_from_every_log_fails_the_ledger_check_and_a_read_only_one_does_not() {
        let key = TupleKey::new(0, 1);
        let mut ledger = Ledger::default();
        ledger.txns.insert(7, txn(vec![Op::write(key, 5)]));
        ledger.txns.insert(8, txn(vec![Op::read(key)]));
        ledger.acked.extend([(7, 0), (8, 0)]);
        // A node that forgot to log commit 7 (or a log that lost it): the ledger catches it.
        let (_, ok, detail) = ledger.check_acknowledged(&[vec![]]);
        assert!(!ok, "{detail}");
        assert_eq!(detail, "1 lost, e.g. 0x7 of node 0");
        // With its record in a log, nothing acknowledged is lost (8 read only, writes nothing).
        let (_, ok, detail) = ledger.check_acknowledged(&[vec![committed(7)]]);
        assert!(ok, "{detail}");
    }
}
