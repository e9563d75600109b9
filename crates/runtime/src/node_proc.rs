//! A database node as a process: [`pisadb_p4db::node::Node`] driven by a UDP socket, a timer heap and
//! the wall clock, with its write-ahead log on disk.
//!
//! ## The event loop
//!
//! One thread runs rounds. A round reads the clock once, runs the timers that are due, receives
//! a batch of datagrams (waiting at most until the next timer) and hands each to the node. The
//! log records all these handlers produced are then written and made durable with one
//! `fdatasync` (group commit), and only then are their datagrams sent and their commits
//! counted: nothing anyone can see is ahead of the log. A node's workers are logical (each runs
//! one transaction at a time, closed loop); they share the thread, as they share the state
//! machine.
//!
//! ## Start, stop, restart
//!
//! At start the node opens its log in its data directory. An empty log is a fresh node;
//! otherwise [`pisadb_p4db::node::Node::recover`] redoes what the log holds and the node carries on
//! in a new incarnation. At the config's stop time the workers stop starting transactions; the
//! node keeps serving until nothing is in flight (or a grace period ends) and writes its report
//! (`report.json`) to the data directory. SIGINT or SIGTERM stops it the same way.
//!
//! ## Leaving together
//!
//! A node that is idle may still be needed: another node's transaction, aborted and retried,
//! may send it a lock request a moment later. A node that left as soon as it was idle would
//! leave that transaction retrying until its grace period ran out, undrained. So in a rack
//! with a rendezvous a stopping node reports whether it is idle, and how many datagrams it has
//! moved, to the supervisor every few milliseconds, and leaves once idle and the supervisor
//! has seen every node idle with no datagram moving between two looks (`done`). That state
//! is stable: every message in flight has a sender or a receiver that is not idle (a waiting
//! worker, or locks held for a transaction until its Commit or Abort arrives).

use crate::udp::BatchSocket;
use crate::wal_file::WalFile;
use crate::{stop_requested, unix_now_ns, RealConfig, DONE_FILE, DRAIN_DIR};
use hdrhistogram::Histogram;
use pisadb_core::{Insert, Nanos, Scheduler, TupleKey, Txn};
use pisadb_p4db::node::{Finished, Node, NodeEvent, NodeStats, Outbox, RecoveryReport, Timer};
use pisadb_wire::SWITCH_ID;
use pisadb_workload::TxnClass;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// How long a stopping node keeps serving others' transactions and finishing its own.
/// Long enough for a restarted switch to plan the rack and rebuild from the logs.
const DRAIN_GRACE_NS: u64 = 15_000_000_000;

/// How often a stopping node tells the supervisor whether it is idle.
const DRAIN_REPORT_NS: Nanos = 5_000_000;

/// A stopping node's standing, in `<rendezvous>/drain/node-N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainStatus {
    /// Nothing in flight: no transaction of its own, none served for others.
    pub idle: bool,
    /// Datagrams received and sent so far.
    pub activity: u64,
}

/// Writes `value` as JSON to `path` whole (a rename), creating the directory.
pub(crate) fn write_atomically<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(value).expect("serializes"))
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

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
    /// Latency percentiles, µs.
    pub latency_p50_us: f64,
    /// 99th percentile, µs.
    pub latency_p99_us: f64,
    /// Seconds between the first round and the stop time.
    pub seconds: f64,
    /// Counters of the state machine.
    pub switch_resends: u64,
    /// Attempts aborted on a peer timeout.
    pub peer_timeouts: u64,
    /// Served transactions dropped when their lease ran out.
    pub leases_expired: u64,
    /// Datagrams rejected, by reason.
    pub rejected: Vec<(String, u64)>,
    /// Datagrams from an address other than the switch's.
    pub not_from_switch: u64,
    /// Log: `fdatasync` calls and records written in this incarnation.
    pub log_syncs: u64,
    /// Log records written.
    pub log_records: u64,
    /// What recovery found (a restarted node).
    pub recovered_committed: u64,
    /// Switch transactions without a logged answer at restart.
    pub recovered_switch_pending: usize,
    /// Prepared transactions without a logged outcome at restart.
    pub recovered_in_doubt: usize,
    /// Whether every transaction in flight finished before the grace period ended.
    pub drained: bool,
    /// If not: what was still in flight ([`Node::in_flight`]) and the timers pending.
    #[serde(default)]
    pub stuck: Vec<String>,
    /// With `verify`: every tuple of the node at the end.
    pub store: Vec<(TupleKey, i64)>,
    /// With `verify`: every transaction committed in this incarnation.
    pub committed_txns: Vec<CommittedTxn>,
}

/// Runs node `id` of `cfg` until it is stopped; writes and returns its report.
pub fn run_node(cfg: &RealConfig, id: u16, data_dir: &Path) -> Result<NodeReport, String> {
    let plan = pisadb_p4db::plan(&cfg.run).map_err(|e| e.to_string())?;
    let mut node_cfg = plan.node_config(&cfg.run, id);
    node_cfg.log = cfg.durable;
    node_cfg.peer_timeout_ns = cfg.peer_timeout_ms * 1_000_000;
    node_cfg.record_history = cfg.verify;
    let listen = *cfg.nodes.get(usize::from(id)).ok_or_else(|| format!("node {id}: no address in the config"))?;
    let mut wal = None;
    let mut records = Vec::new();
    if cfg.durable {
        let opened = WalFile::open(data_dir)?;
        if let Some((why, bytes)) = &opened.torn_tail {
            eprintln!("node {id}: the log ended in a torn record ({why}, {bytes} bytes): cut off, as a crash mid-write leaves it");
        }
        records = opened.records;
        wal = Some(opened.wal);
    }
    let (mut node, recovery) =
        Node::recover(node_cfg, plan.node_workload(&cfg.run, id), plan.switch_view(), cfg.run.seed, &records)?;
    if !records.is_empty() {
        eprintln!(
            "node {id}: recovered from {} log records: {} committed transactions redone, {} switch transactions \
             to finish, {} prepared transactions to resolve; now incarnation {}",
            records.len(),
            recovery.committed,
            recovery.switch_pending,
            recovery.in_doubt,
            recovery.incarnation
        );
    }
    drop(records);
    let mut socket = BatchSocket::bind(listen)?;
    let cfg = &cfg.ready(&format!("node-{id}"))?;
    // Every node starts its workers at the rack's epoch (a restarted one at once).
    let wait = cfg.epoch_unix_ns.saturating_sub(unix_now_ns());
    std::thread::sleep(Duration::from_nanos(wait));
    let mut driver = Driver::new(cfg, id, recovery);
    driver.run(&mut node, &mut socket, wal.as_mut())?;
    let mut report = driver.report(&node, wal.as_ref());
    if cfg.verify {
        report.store = node.store().iter().map(|(k, t)| (k, t.value)).collect();
    }
    let path = data_dir.join("report.json");
    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    std::fs::write(&path, serde_json::to_vec(&report).expect("report serializes"))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(report)
}

struct Driver<'a> {
    cfg: &'a RealConfig,
    id: u16,
    timers: Scheduler<Timer>,
    latency: Histogram<u64>,
    committed: u64,
    on_switch: u64,
    hot: u64,
    not_from_switch: u64,
    committed_txns: Vec<CommittedTxn>,
    recovery: RecoveryReport,
    started_ns: Nanos,
    drained: bool,
    stuck: Vec<String>,
    /// Datagrams received from the switch and sent: a stopping node reports it, so the
    /// supervisor can tell a quiet rack from one whose messages are still moving.
    activity: u64,
    next_drain_report: Nanos,
}

impl<'a> Driver<'a> {
    fn new(cfg: &'a RealConfig, id: u16, recovery: RecoveryReport) -> Self {
        Driver {
            cfg,
            id,
            timers: Scheduler::new(),
            latency: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds"),
            committed: 0,
            on_switch: 0,
            hot: 0,
            not_from_switch: 0,
            committed_txns: Vec::new(),
            recovery,
            started_ns: 0,
            drained: false,
            stuck: Vec::new(),
            activity: 0,
            next_drain_report: 0,
        }
    }

    /// The rack's time: nanoseconds since its epoch.
    fn now(&self) -> Nanos {
        unix_now_ns().saturating_sub(self.cfg.epoch_unix_ns)
    }

    fn run(&mut self, node: &mut Node, socket: &mut BatchSocket, mut wal: Option<&mut WalFile>) -> Result<(), String> {
        let stop_at = self.cfg.stop_unix_ns.saturating_sub(self.cfg.epoch_unix_ns);
        let mut now = self.now();
        self.started_ns = now;
        let mut out = Outbox::default();
        node.start(now, &mut out);
        let mut stopping_since = None;
        loop {
            self.flush(&mut out, socket, wal.as_deref_mut())?;
            now = self.now().max(now);
            if stopping_since.is_none() && (now >= stop_at || stop_requested()) {
                node.stop();
                stopping_since = Some(now);
            }
            if let Some(since) = stopping_since {
                if self.may_leave(now, node.is_idle())? {
                    self.drained = true;
                    return Ok(());
                }
                if now - since > DRAIN_GRACE_NS {
                    eprintln!("node {}: transactions still in flight after the grace period; stopping anyway", self.id);
                    self.stuck = node.in_flight();
                    let next_timer = self.timers.peek().map(|(at, t)| format!("{t:?} in {} ns", at - now));
                    self.stuck.push(format!("{} timers pending, next: {next_timer:?}", self.timers.len()));
                    for line in &self.stuck {
                        eprintln!("node {}:   {line}", self.id);
                    }
                    return Ok(());
                }
            }
            if self.timers.peek_time().is_some_and(|at| at <= now) {
                // Replies that arrived while this node was busy (a slow log write) count before
                // the timeouts waiting for them: otherwise the node resends what was answered.
                self.receive(node, socket, now, Duration::ZERO, &mut out)?;
            }
            while let Some((_, timer)) = self.timers.pop_due(now) {
                node.handle_timer(now, timer, &mut out);
            }
            if !out.timers.is_empty() || !out.sends.is_empty() {
                continue; // flush first: a timer due now must not wait for the socket
            }
            let next_timer = self.timers.peek_time().unwrap_or(now + 1_000_000);
            let wait = Duration::from_nanos(next_timer.saturating_sub(now).clamp(1_000, 1_000_000));
            self.receive(node, socket, now, wait, &mut out)?;
        }
    }

    /// Hands the datagrams that arrive within `wait` (none: only those already there) to the
    /// node.
    fn receive(
        &mut self,
        node: &mut Node,
        socket: &mut BatchSocket,
        now: Nanos,
        wait: Duration,
        out: &mut Outbox,
    ) -> Result<usize, String> {
        let switch = self.cfg.switch;
        socket.recv_batch(wait, |from, bytes| {
            if from == switch {
                self.activity += 1;
                node.handle_datagram(now, bytes, out);
            } else {
                self.not_from_switch += 1;
            }
        })
    }

    /// Whether a stopping node may leave now that it is `idle` or not. Alone, as soon as it is
    /// idle. In a rack with a rendezvous, only once the supervisor says every node is idle
    /// (see "Leaving together" in the module documentation): until then it tells the
    /// supervisor how it stands, every [`DRAIN_REPORT_NS`].
    fn may_leave(&mut self, now: Nanos, idle: bool) -> Result<bool, String> {
        let Some(dir) = &self.cfg.rendezvous else { return Ok(idle) };
        if now < self.next_drain_report {
            return Ok(false);
        }
        self.next_drain_report = now + DRAIN_REPORT_NS;
        let status = DrainStatus { idle, activity: self.activity };
        write_atomically(&dir.join(DRAIN_DIR).join(format!("node-{}", self.id)), &status)?;
        Ok(idle && dir.join(DONE_FILE).exists())
    }

    /// Group commit: makes the round's log records durable, then sends, sets timers and counts
    /// commits.
    fn flush(&mut self, out: &mut Outbox, socket: &mut BatchSocket, wal: Option<&mut WalFile>) -> Result<(), String> {
        if let Some(wal) = wal {
            wal.commit(&out.log)?;
        }
        out.log.clear();
        let switch = self.cfg.switch;
        let datagrams: Vec<_> = out
            .sends
            .drain(..)
            .map(|s| {
                debug_assert!(s.dst == SWITCH_ID || usize::from(s.dst) < self.cfg.nodes.len());
                (switch, s.bytes)
            })
            .collect();
        self.activity += datagrams.len() as u64;
        socket.send_batch(&datagrams);
        for (at, timer) in out.timers.drain(..) {
            self.timers.push(at, timer);
        }
        let now = self.now();
        for event in out.events.drain(..) {
            // Records kept for the simulator's oracles have no use here.
            if let NodeEvent::Finished(f) = event {
                self.count(now, f);
            }
        }
        out.cpu_ns = 0;
        Ok(())
    }

    fn count(&mut self, now: Nanos, f: Finished) {
        self.committed += 1;
        self.on_switch += u64::from(f.on_switch);
        self.hot += u64::from(f.hot);
        self.latency.saturating_record(now.saturating_sub(f.started).max(1));
        if let Some(r) = f.record {
            self.committed_txns.push(CommittedTxn {
                kind: r.gen.kind.to_string(),
                class: r.gen.class,
                distributed: r.gen.distributed,
                home: r.gen.home,
                txn: r.gen.txn,
                inserts: r.gen.inserts,
                outputs: r.outputs,
            });
        }
    }

    fn report(&mut self, node: &Node, wal: Option<&WalFile>) -> NodeReport {
        let stats: &NodeStats = node.stats();
        let stop_at = self.cfg.stop_unix_ns.saturating_sub(self.cfg.epoch_unix_ns);
        NodeReport {
            id: self.id,
            incarnation: node.config().incarnation,
            committed: self.committed,
            on_switch: self.on_switch,
            hot: self.hot,
            aborts: stats.aborts,
            latency_p50_us: self.latency.value_at_quantile(0.5) as f64 / 1e3,
            latency_p99_us: self.latency.value_at_quantile(0.99) as f64 / 1e3,
            seconds: stop_at.saturating_sub(self.started_ns) as f64 / 1e9,
            switch_resends: stats.switch_resends,
            peer_timeouts: stats.peer_timeouts,
            leases_expired: stats.leases_expired,
            rejected: stats.rejected.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            not_from_switch: self.not_from_switch,
            log_syncs: wal.map_or(0, |w| w.syncs),
            log_records: wal.map_or(0, |w| w.records),
            recovered_committed: self.recovery.committed,
            recovered_switch_pending: self.recovery.switch_pending,
            recovered_in_doubt: self.recovery.in_doubt,
            drained: self.drained,
            stuck: std::mem::take(&mut self.stuck),
            store: Vec::new(),
            committed_txns: std::mem::take(&mut self.committed_txns),
        }
    }
}
