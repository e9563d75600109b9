//! A P4DB node as a process: the node planned from the rack's config, recovered from its
//! write-ahead log, run by the runtime's host loop ([`pisadb_runtime::host_proc`]), and its
//! report.
//!
//! ## Start, stop, restart
//!
//! At start the node opens its log in its data directory. An empty log is a fresh node;
//! otherwise [`Node::recover`] redoes what the log holds and the node carries on in a new
//! incarnation. The runtime's loop runs it until the stop time and the drain (see "Leaving
//! together" there); the node then writes its report (`report.json`) to the data directory,
//! with its store and its committed transactions if the rack verifies.
//!
//! ## The ledger
//!
//! A node's workers are the rack's clients, and they die with it. So when the rack verifies,
//! the node streams every commit to the supervisor's ledger ([`pisadb_runtime::ledger`]) as a
//! [`LedgerRecord`]: before the log records of its round are synced and again once they are,
//! which is what the end-of-run checks hold the logs and the final state against.

use crate::node::{Finished, Node, NodeEvent, NodeStats, Record, RecoveryReport};
use crate::real::{P4dbRackConfig, RealError, Result};
use pisadb_core::{Insert, Nanos, TupleKey, Txn};
use pisadb_report::latency::{Latency, LatencySummary};
use pisadb_runtime::host_proc::{self, HostRun, Ledgered};
use pisadb_runtime::ledger::LedgerClient;
use pisadb_runtime::{write_json, RuntimeError};
use pisadb_workload::TxnClass;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A committed transaction, as the end-of-run checks want it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommittedTxn {
    /// Its type.
    pub kind: String,
    /// Hot, cold or warm.
    pub class: TxnClass,
    /// Whether it spanned nodes.
    pub distributed: bool,
    /// Its coordinator.
    pub home: u16,
    /// Its operations.
    pub txn: Txn,
    /// The rows it inserted.
    pub inserts: Vec<Insert>,
    /// Each operation's output.
    pub outputs: Vec<i64>,
}

impl CommittedTxn {
    /// The transaction a worker's record describes.
    fn of(r: &Record) -> Self {
        CommittedTxn {
            kind: r.gen.kind.to_string(),
            class: r.gen.class,
            distributed: r.gen.distributed,
            home: r.gen.home,
            txn: r.gen.txn.clone(),
            inserts: r.gen.inserts.clone(),
            outputs: r.outputs.clone(),
        }
    }
}

/// What a node streams to the supervisor's ledger ([`pisadb_runtime::ledger`]) with `verify`:
/// every commit, as a client would remember it, under its transaction id (the id its log
/// records carry).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LedgerRecord {
    /// A switch transaction logged, and so committed; its switch outputs are not known yet.
    Committing {
        /// Its id.
        id: u64,
        /// What it is (outputs of its switch operations 0).
        txn: CommittedTxn,
    },
    /// A transaction committed, with every output.
    Committed {
        /// Its id.
        id: u64,
        /// What it is.
        txn: CommittedTxn,
    },
    /// A switch transaction logged before a crash, answered after the restart.
    Recovered {
        /// Its id.
        id: u64,
        /// Each operation's output.
        outputs: Vec<i64>,
    },
}

impl LedgerRecord {
    /// The ledger's entry for `event`, if it is a commit with its record.
    pub fn entry(event: &NodeEvent) -> Option<Vec<u8>> {
        let record = match event {
            NodeEvent::Committing(r) => LedgerRecord::Committing { id: r.id, txn: CommittedTxn::of(r) },
            NodeEvent::Finished(f) => {
                let r = f.record.as_ref()?;
                LedgerRecord::Committed { id: r.id, txn: CommittedTxn::of(r) }
            }
            NodeEvent::Recovered(r) => LedgerRecord::Recovered { id: r.txn, outputs: r.outputs.clone() },
        };
        Some(serde_json::to_vec(&record).expect("a ledger record serializes"))
    }
}

/// What a node reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node.
    pub id: u16,
    /// Its incarnation (0 unless it was restarted).
    pub incarnation: u16,
    /// Committed transactions reported by workers, in this incarnation.
    pub committed: u64,
    /// Of those, on the switch.
    pub on_switch: u64,
    /// Of those, all-hot.
    pub hot: u64,
    /// Aborted attempts.
    pub aborts: u64,
    /// Commit latency, µs (`latency_us_mean`, `_p50`, `_p99`).
    #[serde(flatten)]
    pub latency: LatencySummary,
    /// Seconds between the first round and the stop time.
    pub seconds: f64,
    /// Switch transactions sent again after a timeout.
    pub switch_resends: u64,
    /// Attempts aborted on a peer timeout.
    pub peer_timeouts: u64,
    /// Served transactions dropped when their lease ran out.
    pub leases_expired: u64,
    /// Datagrams rejected, by reason.
    pub rejected: Vec<(String, u64)>,
    /// Datagrams from an address other than the switch's.
    pub not_from_switch: u64,
    /// Log: `fdatasync` calls in this incarnation.
    pub log_syncs: u64,
    /// Log records written in this incarnation.
    pub log_records: u64,
    /// What recovery found (a restarted node).
    pub recovered_committed: u64,
    /// Switch transactions without a logged answer at restart.
    pub recovered_switch_pending: usize,
    /// Prepared transactions without a logged outcome at restart.
    pub recovered_in_doubt: usize,
    /// Whether every transaction in flight finished before the rack's drain ended (else it stalled).
    pub drained: bool,
    /// If not: what was still in flight ([`Node::in_flight`]) and the timers pending.
    #[serde(default)]
    pub stuck: Vec<String>,
    /// With `verify`: every tuple of the node at the end.
    pub store: Vec<(TupleKey, i64)>,
    /// With `verify`: every transaction committed in this incarnation.
    pub committed_txns: Vec<CommittedTxn>,
}

/// The node's commits as they become durable.
struct Commits {
    latency: Latency,
    committed: u64,
    on_switch: u64,
    hot: u64,
    txns: Vec<CommittedTxn>,
}

impl Commits {
    fn count(&mut self, now: Nanos, f: Finished) {
        self.committed += 1;
        self.on_switch += u64::from(f.on_switch);
        self.hot += u64::from(f.hot);
        self.latency.record_ns(now.saturating_sub(f.started).max(1));
        if let Some(r) = f.record {
            self.txns.push(CommittedTxn::of(&r));
        }
    }
}

/// Runs node `id` of `cfg` until it is stopped; writes its report to `<data_dir>/report.json`
/// and returns it.
pub fn run_node(cfg: &P4dbRackConfig, id: u16, data_dir: &Path) -> Result<NodeReport> {
    let run = &cfg.spec.run;
    if id >= run.nodes {
        return Err(RuntimeError::bad_setting("--id", id, format!("a node of the rack: 0..{}", run.nodes)).into());
    }
    let plan = crate::plan(run)?;
    let mut node_cfg = plan.node_config(run, id);
    node_cfg.log = cfg.durable;
    node_cfg.peer_timeout_ns = cfg.spec.peer_timeout_ms * 1_000_000;
    node_cfg.record_history = cfg.spec.verify;
    let name = format!("node {id}");
    let (mut wal, records) = host_proc::open_log(cfg.durable, data_dir, &name)?;
    let (mut node, recovery) =
        Node::recover(node_cfg, plan.node_workload(run, id), plan.switch_view(), run.seed, &records)
            .map_err(|why| RealError::Node { node: id, why })?;
    if !records.is_empty() {
        eprintln!(
            "{name}: recovered from {} log records: {} committed transactions redone, {} switch transactions \
             to finish, {} prepared transactions to resolve; now incarnation {}",
            records.len(),
            recovery.committed,
            recovery.switch_pending,
            recovery.in_doubt,
            recovery.incarnation
        );
    }
    drop(records);
    let mut commits = Commits { latency: Latency::new(), committed: 0, on_switch: 0, hot: 0, txns: Vec::new() };
    let mut client = match (&cfg.rendezvous, cfg.spec.verify) {
        (Some(dir), true) => Some(LedgerClient::connect(dir, id)?),
        _ => None,
    };
    let ledger = client.as_mut().map(|client| Ledgered { client, entry: LedgerRecord::entry });
    let host_run = host_proc::serve_ledgered(cfg, id, &name, &mut node, wal.as_mut(), ledger, |now, event| {
        // Records kept for the simulator's oracles have no use here.
        if let NodeEvent::Finished(f) = event {
            commits.count(now, f);
        }
    })?;
    let mut stuck = Vec::new();
    if let Some(timers) = &host_run.timers_pending {
        stuck = node.in_flight();
        stuck.push(timers.clone());
        stuck.iter().for_each(|line| eprintln!("{name}:   {line}"));
    }
    let log = wal.as_ref().map_or((0, 0), |w| (w.syncs, w.records));
    let mut report = report(id, &node, &recovery, &host_run, commits, log, stuck);
    if cfg.spec.verify {
        report.store = node.store().iter().map(|(k, t)| (k, t.value)).collect();
    }
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// The report of a node that ran as `host_run` says.
fn report(
    id: u16,
    node: &Node,
    recovery: &RecoveryReport,
    host_run: &HostRun,
    commits: Commits,
    (log_syncs, log_records): (u64, u64),
    stuck: Vec<String>,
) -> NodeReport {
    let stats: &NodeStats = node.stats();
    NodeReport {
        id,
        incarnation: node.config().incarnation,
        committed: commits.committed,
        on_switch: commits.on_switch,
        hot: commits.hot,
        aborts: stats.aborts,
        latency: commits.latency.summary(),
        seconds: host_run.seconds,
        switch_resends: stats.switch_resends,
        peer_timeouts: stats.peer_timeouts,
        leases_expired: stats.leases_expired,
        rejected: stats.rejected.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        not_from_switch: host_run.not_from_switch,
        log_syncs,
        log_records,
        recovered_committed: recovery.committed,
        recovered_switch_pending: recovery.switch_pending,
        recovered_in_doubt: recovery.in_doubt,
        drained: host_run.drained,
        stuck,
        store: Vec::new(),
        committed_txns: commits.txns,
    }
}
