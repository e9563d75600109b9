//! One database node: its workers (coordinators) and its served transactions (participant).
//!
//! ## Inputs and outputs
//!
//! [`Node::handle_datagram`] and [`Node::handle_timer`] take the current time and append to an
//! [`Outbox`]: datagrams to send, timers to set, finished transactions, and the CPU time the
//! handler used. The driver decides which core runs a handler ([`Node::route`]): a worker's
//! own events run on its core; requests from other nodes run on whichever core is free first.
//!
//! ## A transaction's life (closed loop, one per worker)
//!
//! A worker draws a transaction from the workload and classifies it with the hot-set index
//! (the layout every node holds, paper §6.1):
//!
//! - **Hot, P4DB mode**: one switch packet (built from the layout), sent to the switch; the
//!   reply carries the results and the transaction is committed — half a round trip to the
//!   switch and back, no locks, no 2PC. A packet the switch dropped (full recirculation queue)
//!   is sent again after `switch_timeout_ns`.
//! - **Warm, P4DB mode** (hot and cold tuples together, paper §6.2): the cold part runs as
//!   below up to the point where it can no longer abort (locks held, operations executed,
//!   remote writers prepared and voted yes); only then is the switch sub-transaction sent, in
//!   the same packet format as a hot one. The switch multicasts its result to the coordinator
//!   and every prepared participant (a group per set of nodes, [`multicast_group`]), and each
//!   commits on receipt: no separate commit round. With no remote writer there is no voting
//!   round at all. Rows keyed by a switch output (TPC-C's order id) are inserted then.
//!   The cold and hot parts must not feed each other through the accumulator (a cold tuple
//!   written from a hot read is offloaded with the hot set instead, §6.2); a transaction that
//!   breaks this is refused and counted (`warm_dependency`).
//! - **Otherwise** (cold, or any transaction in No-Switch and LM-Switch mode): 2PL + 2PC.
//!   1. *LM-Switch only*: the locks of hot tuples are requested from the switch's lock
//!      manager in one packet; a partial grant is released and the attempt aborts.
//!   2. *Lock and read*: one `LockRead` per owner node (the worker's own node is served by a
//!      direct call, not a message); shared locks for tuples only read, exclusive for tuples
//!      written; LM-Switch's hot tuples are only read, their lock is in the switch.
//!   3. *Execute*: the operations run in order on the values read ([`pisadb_core::Op::apply`]).
//!   4. *Commit*: a participant that only read is released at once (all locks are held by
//!      now, so this is still two-phase locking); a participant with writes gets `Prepare`,
//!      votes, and on all-yes gets `Commit`, which applies the writes and releases. With no
//!      remote writer there is no voting round. The worker's own node commits by direct call.
//!      Rows the transaction creates ([`pisadb_core::Insert`]) are inserted on the
//!      coordinator's node at commit; they need no locks, nobody can name them before.
//!
//! ## Aborts
//!
//! A denied lock (NO_WAIT: any conflict; WAIT_DIE: a younger requester) aborts the attempt:
//! every contacted node gets `Abort` (which also withdraws waiting requests), switch locks are
//! released, and the **same transaction is retried** with its original WAIT_DIE timestamp (so
//! it eventually becomes the oldest and cannot starve) after a seeded random backoff. Both
//! commits and aborted attempts are counted; latency runs from the first attempt's start.

use crate::node::config::{Cc, Mode, NodeConfig};
use crate::node::wal::LogRecord;
use crate::node::CommittedTxn;
use crate::programs::lock_manager::LockManager;
use crate::programs::p4db::{multicast_group, P4dbEngine};
use crate::wire::lock::{LockOp, LockPacket};
use crate::wire::p4db::TxnPacket;
use pisadb_core::{rng, InsertRow, Nanos, OpKind, TraceBytes, TraceHash, TupleKey, Txn};
use pisadb_engine::locks::{Acquire, LockTable, TxnId};
use pisadb_engine::store::{Store, Tuple};
use pisadb_host::{Host, Route, Send};
use pisadb_layout::Layout;
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict};
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use pisadb_workload::{GeneratedTxn, TxnClass, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Tag on lock-manager packets that release locks: their replies are not waited for.
const RELEASE_TAG: u64 = 1 << 63;

/// A timer a node asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Worker starts its next transaction.
    Begin {
        /// The worker.
        worker: u16,
    },
    /// Worker retries its aborted transaction.
    Retry {
        /// The worker.
        worker: u16,
    },
    /// Worker continues after a lock it waited for on its own node was granted.
    Resume {
        /// The worker.
        worker: u16,
    },
    /// A switch transaction may have been dropped.
    SwitchTimeout {
        /// The worker.
        worker: u16,
        /// The attempt it was for.
        txn: TxnId,
    },
    /// Another node has not answered an attempt in time (with `peer_timeout_ns`).
    PeerTimeout {
        /// The worker.
        worker: u16,
        /// The attempt it was for.
        txn: TxnId,
    },
    /// A transaction this node serves for another has outlived its lease (with
    /// `peer_timeout_ns`): drop it if unprepared, else ask its coordinator for the outcome.
    Lease {
        /// The transaction.
        txn: TxnId,
    },
    /// After a restart: a logged switch transaction whose answer is not in the log is sent
    /// (again) until it is answered.
    RecoveredSwitchTxn {
        /// The transaction.
        txn: TxnId,
    },
}

impl Timer {
    /// The worker whose core runs this timer.
    pub fn worker(&self) -> u16 {
        match *self {
            Timer::Begin { worker } | Timer::Retry { worker } | Timer::Resume { worker } => worker,
            Timer::SwitchTimeout { worker, .. } | Timer::PeerTimeout { worker, .. } => worker,
            // Work for no particular worker runs on the first core.
            Timer::Lease { .. } | Timer::RecoveredSwitchTxn { .. } => 0,
        }
    }
}

/// A timer's trace bytes spell it as `Name { field: value, … }` with decimal numbers: the text
/// the trace hashed before it had explicit bytes, kept so the pinned trace hashes hold. It is
/// written out here field by field, independent of the `Debug` derive.
impl TraceBytes for Timer {
    fn trace(&self, h: &mut TraceHash) {
        let (name, worker, txn) = match *self {
            Timer::Begin { worker } => ("Begin", Some(worker), None),
            Timer::Retry { worker } => ("Retry", Some(worker), None),
            Timer::Resume { worker } => ("Resume", Some(worker), None),
            Timer::SwitchTimeout { worker, txn } => ("SwitchTimeout", Some(worker), Some(txn)),
            Timer::PeerTimeout { worker, txn } => ("PeerTimeout", Some(worker), Some(txn)),
            Timer::Lease { txn } => ("Lease", None, Some(txn)),
            Timer::RecoveredSwitchTxn { txn } => ("RecoveredSwitchTxn", None, Some(txn)),
        };
        h.write(name.as_bytes());
        h.write(b" { ");
        if let Some(worker) = worker {
            h.write(b"worker: ");
            h.write_decimal(u64::from(worker));
            h.write(if txn.is_some() { b", " } else { b" }" });
        }
        if let Some(txn) = txn {
            h.write(b"txn: ");
            h.write_decimal(txn);
            h.write(b" }");
        }
    }
}

/// A committed transaction, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// The worker that ran it.
    pub worker: u16,
    /// Its type ("ycsb", "SendPayment", …).
    pub kind: &'static str,
    /// Whether it ran as one switch transaction.
    pub on_switch: bool,
    /// Whether its keys were all hot (it may still have run on the nodes, e.g. No-Switch).
    pub hot: bool,
    /// When its first attempt began.
    pub started: Nanos,
    /// Attempts, the committed one included.
    pub attempts: u32,
    /// Where its latency went.
    pub phases: PhaseTimes,
    /// With `record_history`: what it did.
    pub record: Option<Box<Record>>,
}

/// Where a committed transaction's latency went (paper Fig. 18a), in nanoseconds. The phases
/// are the committed attempt's; what the four do not cover (running on a core, waiting for one,
/// local work between phases) is the latency minus their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTimes {
    /// Earlier, aborted attempts and the backoff after each.
    pub retry_ns: Nanos,
    /// Taking locks and reading tuples, on this node and remote ones (the lock acquisition and
    /// remote access of the paper's breakdown).
    pub lock_read_ns: Nanos,
    /// The 2PC voting round.
    pub commit_ns: Nanos,
    /// Waiting for the switch: a switch transaction or sub-transaction, or LM-Switch's locks.
    pub switch_ns: Nanos,
}

impl std::ops::AddAssign for PhaseTimes {
    fn add_assign(&mut self, other: PhaseTimes) {
        self.retry_ns += other.retry_ns;
        self.lock_read_ns += other.lock_read_ns;
        self.commit_ns += other.commit_ns;
        self.switch_ns += other.switch_ns;
    }
}

/// What a committed transaction did, for checkers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The committed attempt's id.
    pub id: TxnId,
    /// The transaction as the workload generated it.
    pub gen: GeneratedTxn,
    /// Each operation's output.
    pub outputs: Vec<i64>,
    /// The switch's global transaction id (hot and warm transactions in P4DB mode).
    pub gid: Option<u64>,
    /// Indices of the operations the switch executed (all of a hot one's, a warm one's hot
    /// part), in program order.
    pub switch_ops: Vec<usize>,
    /// Rows inserted at commit, with their values.
    pub inserted: Vec<(TupleKey, i64)>,
    /// Reads and writes with versions of the part on the nodes (`None` for hot transactions).
    pub history: Option<CommittedTxn>,
}

impl Record {
    /// The sub-transaction the switch executed, with its outputs (empty if none).
    pub fn switch_part(&self) -> (Txn, Vec<i64>) {
        let ops = self.switch_ops.iter().map(|&i| self.gen.txn.ops[i]).collect();
        (Txn::new(ops), self.switch_ops.iter().map(|&i| self.outputs[i]).collect())
    }
}

/// What a node's handler produced (see [`pisadb_host::Outbox`]): its events are [`NodeEvent`]s.
pub type Outbox = pisadb_host::Outbox<Timer, LogRecord, NodeEvent>;

/// What a node reports to the driver's metrics and oracles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// With `record_history` and `log`: the record of a switch transaction as it is logged,
    /// which is when it counts as committed (§6.1). Its switch outputs and GID are not known
    /// yet; they come with [`NodeEvent::Finished`] or, if the node crashed first, with
    /// [`NodeEvent::Recovered`]. A checker keeps it, as a client remembers what it submitted.
    Committing(Box<Record>),
    /// A switch transaction logged before a crash got its answer after the restart.
    Recovered(RecoveredCommit),
    /// A transaction committed.
    Finished(Finished),
}

/// A switch transaction whose node crashed after logging it, answered after the restart: what
/// completes the record a checker kept from [`NodeEvent::Committing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredCommit {
    /// The transaction.
    pub txn: TxnId,
    /// The GID the switch gave it.
    pub gid: u64,
    /// Each operation's output (cold ones from the log, hot ones from the answer).
    pub outputs: Vec<i64>,
    /// Rows inserted at commit, with their values.
    pub inserted: Vec<(TupleKey, i64)>,
}

/// What [`Node::recover`] found in the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The node's incarnation from now on.
    pub incarnation: u16,
    /// Committed transactions redone.
    pub committed: u64,
    /// Switch transactions logged as sent whose answer is not in the log (sent again).
    pub switch_pending: usize,
    /// Transactions prepared here whose outcome is not in the log (their coordinator is asked).
    pub in_doubt: usize,
}

/// Counters of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Aborted attempts, by reason.
    pub aborts: u64,
    /// Switch transactions sent again after a timeout.
    pub switch_resends: u64,
    /// Attempts aborted because another node did not answer in time.
    pub peer_timeouts: u64,
    /// Served transactions dropped, unprepared, when their lease ran out.
    pub leases_expired: u64,
    /// Outcome inquiries sent for prepared transactions.
    pub inquiries: u64,
    /// Switch transactions recovered from the log that committed after a restart.
    pub recovered_commits: u64,
    /// Datagrams dropped because they were malformed or unexpected, by reason.
    pub rejected: BTreeMap<&'static str, u64>,
}

/// Who asked for a lock-and-read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Requester {
    Local(u16),
    Remote(u16),
}

/// A transaction this node serves as a participant (also its own workers' local part).
#[derive(Debug)]
struct Served {
    requester: Requester,
    ts: u64,
    policy: OnConflict,
    entries: Vec<(TupleKey, LockMode)>,
    /// Entries handled so far.
    next: usize,
    values: Vec<(i64, u64)>,
    held: Vec<TupleKey>,
    prepared: Vec<(TupleKey, i64)>,
    /// Voted yes (a remote coordinator's `Prepare`): only the coordinator may end it now.
    voted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// A hot transaction waits for the switch.
    SwitchTxn,
    /// LM-Switch: waiting for the switch's lock manager.
    SwitchLocks,
    LockRead,
    Prepare,
    /// A warm transaction's cold part is ready; its switch sub-transaction is out.
    WarmSwitch,
    /// Aborted, waiting out the backoff before the retry: late replies and timers of this
    /// attempt are ignored (acting on them would abort twice, or commit what was aborted).
    Aborted,
}

/// One distinct tuple of a transaction on the nodes.
#[derive(Clone, Copy, Debug)]
struct Access {
    key: TupleKey,
    owner: u16,
    /// The lock to take on the owner node (`None` when the switch holds it).
    mode: LockMode,
    write: bool,
    locked_in_switch: bool,
    value: i64,
    version: u64,
}

/// The current attempt of a worker.
#[derive(Debug)]
struct Attempt {
    id: TxnId,
    ts: u64,
    gen: GeneratedTxn,
    started: Nanos,
    attempts: u32,
    phase: Phase,
    accesses: Vec<Access>,
    /// Remote nodes sent a `LockRead`.
    contacted: Vec<u16>,
    /// Replies still expected.
    pending: usize,
    /// Nodes that replied in this phase: a duplicated reply must not count twice.
    replied: Vec<u16>,
    denied: bool,
    /// LM-Switch: the lock request, and which entries were granted.
    switch_locks: Option<(LockPacket, u32)>,
    /// Remote nodes sent a `Prepare`.
    writers: Vec<u16>,
    outputs: Vec<i64>,
    /// P4DB: index of the operation behind each instruction.
    instr_order: Vec<usize>,
    /// P4DB: the operations the switch executes, in program order (empty: none).
    switch_ops: Vec<usize>,
    /// P4DB: the switch packet, kept to send again after a timeout.
    switch_packet: Option<TxnPacket>,
    /// Rows inserted at commit.
    inserted: Vec<(TupleKey, i64)>,
    /// When the current phase began, and the time of the phases so far.
    phase_started: Nanos,
    phases: PhaseTimes,
}

impl Attempt {
    /// Moves to `phase` at `now`, charging the time since the last move to the phase left.
    fn enter(&mut self, now: Nanos, phase: Phase) {
        self.close_phase(now);
        self.phase = phase;
    }

    fn close_phase(&mut self, now: Nanos) {
        let spent = now.saturating_sub(self.phase_started);
        self.phase_started = now;
        let t = &mut self.phases;
        match self.phase {
            Phase::LockRead => t.lock_read_ns += spent,
            Phase::Prepare => t.commit_ns += spent,
            Phase::SwitchTxn | Phase::SwitchLocks | Phase::WarmSwitch => t.switch_ns += spent,
            Phase::Aborted => {} // the next attempt counts it as retry time
        }
    }
}

#[derive(Debug)]
struct Worker {
    seq: u32,
    current: Option<Attempt>,
    /// Replies to the worker's local lock requests that completed while it waited.
    local_replies: Vec<NodeMsg>,
}

/// A database node.
pub struct Node {
    cfg: NodeConfig,
    workload: Box<dyn Workload>,
    layout: Arc<Layout>,
    lock_layout: Arc<Layout>,
    engine: P4dbEngine,
    lock_manager: LockManager,
    store: Store,
    locks: LockTable,
    served: BTreeMap<TxnId, Served>,
    workers: Vec<Worker>,
    rng: ChaCha8Rng,
    stats: NodeStats,
    stopped: bool,
    /// Next number for rows keyed by a node sequence ([`pisadb_core::InsertRow::Sequence`]).
    insert_seq: u64,
    /// Transactions this node coordinated that committed with remote writers (the answer to
    /// a participant's inquiry; anything else it does not run any more is presumed aborted).
    decided: BTreeSet<TxnId>,
    /// After a restart: logged switch transactions still waiting for their answer.
    recovering: BTreeMap<TxnId, PendingSwitchTxn>,
    /// The newest switch epoch this node knows of: answers from older ones are dropped.
    switch_epoch: u16,
}

/// A switch transaction recovered from the log whose answer was not logged yet.
#[derive(Clone, Debug)]
struct PendingSwitchTxn {
    packet: TxnPacket,
    writers: Vec<u16>,
    outputs: Vec<i64>,
    instr_order: Vec<u16>,
    inserts: Vec<pisadb_core::Insert>,
}

/// What the switch offers a node (one of the engines is used, depending on the mode).
pub struct SwitchView {
    /// Where each hot tuple lives in the P4DB engine's data arrays.
    pub layout: Arc<Layout>,
    /// The P4DB engine (packet building).
    pub engine: P4dbEngine,
    /// Where each hot tuple's lock lives in the lock manager.
    pub lock_layout: Arc<Layout>,
    /// The lock manager (packet building).
    pub lock_manager: LockManager,
}

impl Node {
    /// A node with its partition loaded from `workload`; `seed` drives its own random choices.
    pub fn new(cfg: NodeConfig, workload: Box<dyn Workload>, switch: SwitchView, seed: u64) -> Result<Self, String> {
        cfg.validate()?;
        if workload.partitioning().nodes != cfg.nodes {
            return Err(format!(
                "workload is for {} nodes, node config for {}",
                workload.partitioning().nodes,
                cfg.nodes
            ));
        }
        let store = Store::load(cfg.id, workload.as_ref());
        let workers = (0..cfg.workers).map(|_| Worker { seq: 0, current: None, local_replies: Vec::new() }).collect();
        let rng = rng::derive(seed, &format!("node/{}", cfg.id));
        Ok(Node {
            layout: switch.layout,
            lock_layout: switch.lock_layout,
            engine: switch.engine,
            lock_manager: switch.lock_manager,
            cfg,
            workload,
            store,
            locks: LockTable::default(),
            served: BTreeMap::new(),
            workers,
            rng,
            stats: NodeStats::default(),
            stopped: false,
            insert_seq: 0,
            decided: BTreeSet::new(),
            recovering: BTreeMap::new(),
            switch_epoch: 0,
        })
    }

    /// A node restarted from its write-ahead log (P4DB §6.1, A.3 case 2): the partition is
    /// loaded as at first start and every committed transaction's writes are redone in log
    /// order: transactions on the nodes committed here, prepared ones resolved as committed,
    /// and switch transactions whose intent was logged (they count as committed once logged).
    /// What stays open is finished after [`Node::start`]: a switch transaction without its
    /// logged answer is sent again (the switch answers a copy of one it already ran from its
    /// memory, or runs it), and a transaction prepared here without a logged outcome keeps its
    /// locks and asks its coordinator. The new incarnation is one past the last logged one.
    pub fn recover(
        mut cfg: NodeConfig,
        workload: Box<dyn Workload>,
        switch: SwitchView,
        seed: u64,
        log: &[LogRecord],
    ) -> Result<(Self, RecoveryReport), String> {
        let last = log.iter().rev().find_map(|r| match r {
            LogRecord::Started { incarnation } => Some(*incarnation),
            _ => None,
        });
        cfg.incarnation = last.map_or(0, |i| i.wrapping_add(1) % NodeConfig::INCARNATIONS);
        let rng_seed = seed ^ u64::from(cfg.incarnation).rotate_left(40);
        let mut node = Node::new(cfg, workload, switch, rng_seed)?;
        let mut report = RecoveryReport { incarnation: node.cfg.incarnation, ..RecoveryReport::default() };
        let mut prepared: BTreeMap<TxnId, (u16, Vec<(TupleKey, i64)>)> = BTreeMap::new();
        for record in log {
            match record {
                LogRecord::Started { .. } => {}
                LogRecord::Committed { txn, writes, inserted, insert_seq } => {
                    node.redo(*txn, writes, inserted, *insert_seq);
                    node.decided.insert(*txn);
                    report.committed += 1;
                }
                LogRecord::Prepared { txn, coordinator, writes } => {
                    prepared.insert(*txn, (*coordinator, writes.clone()));
                }
                LogRecord::Resolved { txn, commit } => {
                    if let Some((_, writes)) = prepared.remove(txn).filter(|_| *commit) {
                        node.redo(*txn, &writes, &[], node.insert_seq);
                        report.committed += 1;
                    }
                }
                LogRecord::SwitchIntent { txn, packet, local_writes, writers, outputs, instr_order, inserts } => {
                    node.redo(*txn, local_writes, &[], node.insert_seq);
                    let packet =
                        TxnPacket::decode(packet).map_err(|e| format!("log: switch transaction {txn:#x}: {e}"))?;
                    let pending = PendingSwitchTxn {
                        packet,
                        writers: writers.clone(),
                        outputs: outputs.clone(),
                        instr_order: instr_order.clone(),
                        inserts: inserts.clone(),
                    };
                    node.recovering.insert(*txn, pending);
                }
                LogRecord::SwitchResult { txn, inserted, insert_seq, .. } => {
                    let Some(p) = node.recovering.remove(txn) else {
                        return Err(format!("log: answer of switch transaction {txn:#x} without its intent"));
                    };
                    node.redo(*txn, &[], inserted, *insert_seq);
                    if !p.writers.is_empty() {
                        node.decided.insert(*txn);
                    }
                    report.committed += 1;
                }
            }
        }
        report.switch_pending = node.recovering.len();
        report.in_doubt = prepared.len();
        for (txn, (coordinator, writes)) in prepared {
            node.hold_in_doubt(txn, coordinator, writes);
        }
        Ok((node, report))
    }

    /// Redoes a committed transaction's writes and inserts.
    fn redo(&mut self, txn: TxnId, writes: &[(TupleKey, i64)], inserted: &[(TupleKey, i64)], insert_seq: u64) {
        for &(key, value) in writes {
            self.store.set(key, Tuple { value, version: txn });
        }
        for &(key, value) in inserted {
            self.store.insert(key, Tuple { value, version: txn });
        }
        self.insert_seq = self.insert_seq.max(insert_seq);
    }

    /// Takes back the locks of a transaction prepared before the crash, whose outcome only its
    /// coordinator knows; its writes wait for that outcome.
    fn hold_in_doubt(&mut self, txn: TxnId, coordinator: u16, writes: Vec<(TupleKey, i64)>) {
        let keys: Vec<TupleKey> = writes.iter().map(|&(k, _)| k).collect();
        for &key in &keys {
            // Two prepared transactions never hold the same tuple: both had it locked exclusively.
            let granted = self.locks.acquire(key, txn, 0, LockMode::Exclusive, OnConflict::Deny);
            debug_assert_eq!(granted, Acquire::Granted, "in-doubt transactions overlap on {key:?}");
        }
        let entries = keys.iter().map(|&k| (k, LockMode::Exclusive)).collect::<Vec<_>>();
        let served = Served {
            requester: Requester::Remote(coordinator),
            ts: 0,
            policy: OnConflict::Deny,
            next: entries.len(),
            entries,
            values: Vec::new(),
            held: keys,
            prepared: writes,
            voted: true,
        };
        self.served.insert(txn, served);
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    /// The node's counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// The node's tuples.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Tuples locked right now (0 once the node is quiet).
    pub fn locked_tuples(&self) -> usize {
        self.locks.len()
    }

    /// Whether nothing is in flight: no worker runs a transaction, none is served for another
    /// node, no recovered switch transaction waits for its answer.
    pub fn is_idle(&self) -> bool {
        self.workers.iter().all(|w| w.current.is_none()) && self.served.is_empty() && self.recovering.is_empty()
    }

    /// What is in flight, one line each (for a driver to say why a node does not go idle).
    pub fn in_flight(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            if let Some(a) = &w.current {
                lines.push(format!(
                    "worker {i}: attempt {:#x} ({}, attempt {}) in {:?}, waiting for {} replies from {:?}, writers {:?}",
                    a.id, a.gen.kind, a.attempts, a.phase, a.pending, a.contacted, a.writers
                ));
            }
        }
        for (txn, s) in &self.served {
            lines.push(format!(
                "serving {txn:#x} for {:?}: {}/{} locks, {} held, voted {}",
                s.requester,
                s.next,
                s.entries.len(),
                s.held.len(),
                s.voted
            ));
        }
        for txn in self.recovering.keys() {
            lines.push(format!("recovered switch transaction {txn:#x} waits for its answer"));
        }
        lines
    }

    /// Stops starting new transactions; those in flight (and their retries) still finish.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Starts every worker, and finishes what recovery left open: switch transactions without
    /// their answer are sent again, prepared transactions ask their coordinator.
    pub fn start(&mut self, now: Nanos, out: &mut Outbox) {
        if self.cfg.log {
            out.log.push(LogRecord::Started { incarnation: self.cfg.incarnation });
        }
        for &txn in self.recovering.keys() {
            out.timers.push((now, Timer::RecoveredSwitchTxn { txn }));
        }
        for (&txn, _) in self.served.iter().filter(|(_, s)| s.voted) {
            out.timers.push((now, Timer::Lease { txn }));
        }
        for worker in 0..self.cfg.workers {
            out.timers.push((now, Timer::Begin { worker }));
        }
    }

    /// How long to wait before asking again (an inquiry, a recovered switch transaction).
    fn retry_interval_ns(&self) -> Nanos {
        if self.cfg.peer_timeout_ns > 0 {
            2 * self.cfg.peer_timeout_ns
        } else {
            self.cfg.switch_timeout_ns
        }
    }

    /// Which core runs the handler for `bytes`.
    pub fn route(&self, bytes: &[u8]) -> Route {
        let Ok((frame, payload)) = Frame::decode(bytes) else { return Route::AnyCore };
        let txn = match frame.kind {
            Kind::P4dbTxn => TxnPacket::decode(payload).map(|p| p.txn_id).ok(),
            Kind::Lock => LockPacket::decode(payload).map(|p| p.txn_id).ok(),
            Kind::Forward => NodeMsg::decode(payload).ok().filter(NodeMsg::is_reply).map(|m| m.txn()),
            // A node is no controller: the datagram is rejected by whichever core takes it.
            Kind::Control => None,
        };
        match txn {
            Some(id) if id & RELEASE_TAG == 0 && owner_node(id) == self.cfg.id => Route::Core(worker_of(id)),
            _ => Route::AnyCore,
        }
    }

    /// Runs a timer.
    pub fn handle_timer(&mut self, now: Nanos, timer: Timer, out: &mut Outbox) {
        match timer {
            Timer::Begin { .. } if self.stopped => {}
            Timer::Begin { worker } => {
                out.cpu_ns += self.cfg.costs.txn_begin_ns;
                let gen = self.workload.next_txn(self.cfg.id);
                let ts = timestamp(now, self.cfg.id, worker);
                self.begin(now, worker, gen, ts, now, 1, out);
            }
            Timer::Retry { worker } => {
                let w = &mut self.workers[usize::from(worker)];
                if let Some(a) = w.current.take() {
                    self.begin(now, worker, a.gen, a.ts, a.started, a.attempts + 1, out);
                }
            }
            Timer::Resume { worker } => {
                let replies = std::mem::take(&mut self.workers[usize::from(worker)].local_replies);
                let me = self.cfg.id;
                for msg in replies {
                    self.on_reply(now, worker, me, msg, out);
                }
            }
            Timer::SwitchTimeout { worker, txn } => {
                let w = &self.workers[usize::from(worker)];
                let waiting = |a: &&Attempt| a.id == txn && matches!(a.phase, Phase::SwitchTxn | Phase::WarmSwitch);
                if let Some(pkt) = w.current.as_ref().filter(waiting).and_then(|a| a.switch_packet.clone()) {
                    self.stats.switch_resends += 1;
                    self.send_switch(Kind::P4dbTxn, |b| pkt.encode(b), out);
                    out.timers.push((now + self.cfg.switch_timeout_ns, Timer::SwitchTimeout { worker, txn }));
                }
            }
            Timer::PeerTimeout { worker, txn } => {
                let w = &self.workers[usize::from(worker)];
                let waiting = w
                    .current
                    .as_ref()
                    .is_some_and(|a| a.id == txn && matches!(a.phase, Phase::LockRead | Phase::Prepare));
                if waiting {
                    self.stats.peer_timeouts += 1;
                    self.abort(now, worker, out);
                }
            }
            Timer::Lease { txn } => {
                let Some(s) = self.served.get(&txn) else { return };
                let Requester::Remote(coordinator) = s.requester else { return };
                if s.voted {
                    // Only the coordinator may end a prepared transaction: ask it.
                    self.stats.inquiries += 1;
                    self.send_node(coordinator, &NodeMsg::Inquire { txn }, out);
                    out.timers.push((now + self.retry_interval_ns(), Timer::Lease { txn }));
                } else {
                    // Its coordinator gave up on it (or crashed): it will vote no if asked.
                    self.stats.leases_expired += 1;
                    self.abort_served(now, txn, out);
                }
            }
            Timer::RecoveredSwitchTxn { txn } => {
                let Some(p) = self.recovering.get(&txn) else { return };
                let pkt = p.packet.clone();
                self.stats.switch_resends += 1;
                self.send_switch(Kind::P4dbTxn, |b| pkt.encode(b), out);
                out.timers.push((now + self.cfg.switch_timeout_ns, Timer::RecoveredSwitchTxn { txn }));
            }
        }
    }

    /// Fences off a crashed switch: the switch rebuilt from the nodes' logs answers with
    /// `epoch`, and once this node has handed over its log it drops answers from older
    /// epochs, which the crashed switch may still have in flight.
    pub fn fence_switch(&mut self, epoch: u16) {
        self.switch_epoch = self.switch_epoch.max(epoch);
    }

    /// Handles a datagram from the network.
    pub fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut Outbox) {
        out.cpu_ns += self.cfg.costs.stack_ns + self.cfg.costs.message_ns;
        let (frame, payload) = match Frame::decode(bytes) {
            Ok(parts) => parts,
            Err(e) => return self.reject(e.reason()),
        };
        if frame.dst != self.cfg.id {
            return self.reject("not_for_this_node");
        }
        match frame.kind {
            Kind::P4dbTxn => match TxnPacket::decode(payload) {
                // Sent by a switch that crashed before the rebuild, which may have decided
                // this transaction differently: the rebuilt switch answers it again.
                Ok(pkt) if pkt.epoch < self.switch_epoch => self.reject("stale_switch_epoch"),
                Ok(pkt) => {
                    self.switch_epoch = pkt.epoch;
                    self.on_switch_txn_reply(now, pkt, out)
                }
                Err(e) => self.reject(e.reason()),
            },
            Kind::Lock => match LockPacket::decode(payload) {
                Ok(pkt) => self.on_switch_lock_reply(now, pkt, out),
                Err(e) => self.reject(e.reason()),
            },
            Kind::Forward => match NodeMsg::decode(payload) {
                Ok(msg) if msg.is_reply() => {
                    let id = msg.txn();
                    if owner_node(id) != self.cfg.id || worker_of(id) >= self.cfg.workers {
                        return self.reject("reply_for_unknown_worker");
                    }
                    self.on_reply(now, worker_of(id), frame.src, msg, out);
                }
                Ok(msg) => self.serve(now, Requester::Remote(frame.src), msg, out),
                Err(e) => self.reject(e.reason()),
            },
            Kind::Control => self.reject("control_message_to_a_node"),
        }
    }

    fn reject(&mut self, reason: &'static str) {
        *self.stats.rejected.entry(reason).or_default() += 1;
    }

    // ----- the coordinator (worker) side -----

    #[allow(clippy::too_many_arguments)]
    fn begin(
        &mut self,
        now: Nanos,
        worker: u16,
        gen: GeneratedTxn,
        ts: u64,
        started: Nanos,
        attempts: u32,
        out: &mut Outbox,
    ) {
        let w = &mut self.workers[usize::from(worker)];
        w.seq = w.seq.wrapping_add(1);
        let id = txn_id(self.cfg.id, self.cfg.incarnation, worker, w.seq);
        let mut attempt = Attempt {
            id,
            ts,
            gen,
            started,
            attempts,
            phase: Phase::LockRead,
            accesses: Vec::new(),
            contacted: Vec::new(),
            pending: 0,
            replied: Vec::new(),
            denied: false,
            switch_locks: None,
            writers: Vec::new(),
            outputs: Vec::new(),
            instr_order: Vec::new(),
            switch_ops: Vec::new(),
            switch_packet: None,
            inserted: Vec::new(),
            phase_started: now,
            phases: PhaseTimes { retry_ns: now - started, ..PhaseTimes::default() },
        };
        let txn = &attempt.gen.txn;
        if self.cfg.mode == Mode::P4db {
            let on_switch: Vec<usize> = (0..txn.ops.len()).filter(|&i| self.layout.contains(txn.ops[i].key)).collect();
            if !on_switch.is_empty() {
                let sub = Txn::new(on_switch.iter().map(|&i| txn.ops[i]).collect());
                let refused = if on_switch.len() < txn.ops.len() && !parts_independent(txn, &on_switch) {
                    Some("warm_dependency")
                } else {
                    match self.engine.packet_for(&sub, &self.layout, id) {
                        Ok((pkt, order)) => {
                            attempt.instr_order = order.iter().map(|&k| on_switch[k]).collect();
                            attempt.switch_packet = Some(pkt);
                            None
                        }
                        // Too many operations or out-of-range values for one packet.
                        Err(_) => Some("switch_packet_unbuildable"),
                    }
                };
                if let Some(reason) = refused {
                    // The hot tuples live only on the switch: the nodes cannot run it instead.
                    self.reject(reason);
                    out.timers.push((now, Timer::Begin { worker }));
                    return;
                }
                let hot = on_switch.len() == txn.ops.len();
                attempt.switch_ops = on_switch;
                if hot {
                    attempt.enter(now, Phase::SwitchTxn);
                    self.workers[usize::from(worker)].current = Some(attempt);
                    return self.send_switch_txn(now, worker, 0, out);
                }
            }
        }
        attempt.accesses = self.accesses(txn, &attempt.switch_ops);
        let hot_locks: Vec<(TupleKey, LockOp)> = attempt
            .accesses
            .iter()
            .filter(|a| a.locked_in_switch)
            .map(|a| (a.key, if a.write { LockOp::AcquireExclusive } else { LockOp::AcquireShared }))
            .collect();
        if !hot_locks.is_empty() {
            if let Some(pkt) = self.lock_manager.request_for(id, &hot_locks, &self.lock_layout) {
                out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
                self.send_switch(Kind::Lock, |b| pkt.encode(b), out);
                attempt.enter(now, Phase::SwitchLocks);
                attempt.switch_locks = Some((pkt, 0));
                self.workers[usize::from(worker)].current = Some(attempt);
                return;
            }
            // Too many locks for one packet: lock them on the nodes instead.
            for a in attempt.accesses.iter_mut() {
                a.locked_in_switch = false;
                a.mode = if a.write { LockMode::Exclusive } else { LockMode::Shared };
            }
        }
        self.workers[usize::from(worker)].current = Some(attempt);
        self.lock_and_read(now, worker, out);
    }

    /// The distinct tuples of `txn` in first-access order, with owner and lock mode, leaving
    /// out the operations `on_switch` (sorted indices) that the switch executes.
    fn accesses(&self, txn: &Txn, on_switch: &[usize]) -> Vec<Access> {
        let mut accesses: Vec<Access> = Vec::with_capacity(txn.ops.len());
        let partitioning = self.workload.partitioning();
        for (i, op) in txn.ops.iter().enumerate() {
            if on_switch.binary_search(&i).is_ok() {
                continue;
            }
            let write = op.kind != OpKind::Read;
            if let Some(a) = accesses.iter_mut().find(|a| a.key == op.key) {
                a.write |= write;
            } else {
                let locked_in_switch = self.cfg.mode == Mode::LmSwitch && self.lock_layout.contains(op.key);
                accesses.push(Access {
                    key: op.key,
                    owner: partitioning.node_of(op.key),
                    mode: LockMode::None,
                    write,
                    locked_in_switch,
                    value: 0,
                    version: 0,
                });
            }
        }
        for a in &mut accesses {
            a.mode = match (a.locked_in_switch, a.write) {
                (true, _) => LockMode::None,
                (false, true) => LockMode::Exclusive,
                (false, false) => LockMode::Shared,
            };
        }
        accesses
    }

    fn lock_and_read(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let policy = self.policy();
        let (id, ts, by_owner) = {
            let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
            a.enter(now, Phase::LockRead);
            let mut by_owner: BTreeMap<u16, Vec<(TupleKey, LockMode)>> = BTreeMap::new();
            for acc in &a.accesses {
                by_owner.entry(acc.owner).or_default().push((acc.key, acc.mode));
            }
            a.pending = by_owner.len();
            a.replied.clear();
            a.contacted = by_owner.keys().copied().filter(|&n| n != self.cfg.id).collect();
            if self.cfg.peer_timeout_ns > 0 && !a.contacted.is_empty() {
                // One deadline for the attempt's remote work: locks, reads and votes.
                out.timers.push((now + self.cfg.peer_timeout_ns, Timer::PeerTimeout { worker, txn: a.id }));
            }
            (a.id, a.ts, by_owner)
        };
        for (owner, entries) in by_owner {
            if owner == self.cfg.id {
                let msg = NodeMsg::LockRead { txn: id, ts, on_conflict: policy, entries };
                self.serve(now, Requester::Local(worker), msg, out);
            } else {
                self.send_node(owner, &NodeMsg::LockRead { txn: id, ts, on_conflict: policy, entries }, out);
            }
        }
    }

    fn policy(&self) -> OnConflict {
        match self.cfg.cc {
            Cc::NoWait => OnConflict::Deny,
            Cc::WaitDie => OnConflict::WaitDie,
        }
    }

    fn on_reply(&mut self, now: Nanos, worker: u16, from: u16, msg: NodeMsg, out: &mut Outbox) {
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
        if a.id != msg.txn() {
            return; // a reply to an earlier, aborted attempt
        }
        if matches!(a.phase, Phase::LockRead | Phase::Prepare) {
            if a.replied.contains(&from) {
                return self.reject("duplicate_reply");
            }
            a.replied.push(from);
        }
        match (a.phase, msg) {
            (Phase::LockRead, NodeMsg::LockReadReply { granted, values, .. }) => {
                if granted {
                    // Values come in the order of the entries sent to that owner, which is the
                    // order of its accesses.
                    let mine = a.accesses.iter_mut().filter(|x| x.owner == from);
                    for (x, &(value, version)) in mine.zip(&values) {
                        (x.value, x.version) = (value, version);
                    }
                } else {
                    a.denied = true;
                }
                a.pending -= 1;
                if a.pending == 0 {
                    if a.denied {
                        self.abort(now, worker, out);
                    } else {
                        self.execute_and_commit(now, worker, out);
                    }
                }
            }
            (Phase::Prepare, NodeMsg::Vote { yes, .. }) => {
                a.denied |= !yes;
                a.pending -= 1;
                if a.pending == 0 {
                    if a.denied {
                        self.abort(now, worker, out);
                    } else if !a.switch_ops.is_empty() {
                        // Warm: nothing can abort any more; the switch's multicast commits.
                        let group = multicast_group(std::iter::once(self.cfg.id).chain(a.writers.iter().copied()));
                        a.enter(now, Phase::WarmSwitch);
                        self.send_switch_txn(now, worker, group.unwrap_or(0), out);
                    } else {
                        let (id, writers) = (a.id, a.writers.clone());
                        self.send_commit(id, &writers, out);
                        self.commit_coordinator(now, worker, None, out);
                    }
                }
            }
            (Phase::Aborted, _) => {} // a late reply to the aborted attempt
            _ => self.reject("unexpected_reply"),
        }
    }

    fn execute_and_commit(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let me = self.cfg.id;
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        // Execute in program order on the values read.
        // A warm transaction's switch operations are skipped: their outputs come from the switch.
        let mut values: BTreeMap<TupleKey, i64> = a.accesses.iter().map(|x| (x.key, x.value)).collect();
        let mut acc = 0;
        a.outputs.clear();
        for op in &a.gen.txn.ops {
            let Some(slot) = values.get_mut(&op.key) else {
                a.outputs.push(0);
                continue;
            };
            let outcome = op.apply(*slot, acc);
            *slot = outcome.new;
            acc = outcome.acc;
            a.outputs.push(outcome.out);
        }
        out.cpu_ns += self.cfg.costs.tuple_ns * a.accesses.len() as u64;
        let mut writes: BTreeMap<u16, Vec<(TupleKey, i64)>> = BTreeMap::new();
        for x in a.accesses.iter().filter(|x| x.write) {
            writes.entry(x.owner).or_default().push((x.key, values[&x.key]));
        }
        let id = a.id;
        // Remote participants that only read are released now; writers are prepared.
        let readers: Vec<u16> = a.contacted.iter().copied().filter(|n| !writes.contains_key(n)).collect();
        a.writers = writes.keys().copied().filter(|&n| n != me).collect();
        let local_writes = writes.remove(&me).unwrap_or_default();
        self.send_commit(id, &readers, out);
        if let Some(s) = self.served.get_mut(&id) {
            s.prepared = local_writes;
        }
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        if a.writers.is_empty() {
            if a.switch_ops.is_empty() {
                return self.commit_coordinator(now, worker, None, out);
            }
            // Warm with no remote writer: no voting round; the switch's reply commits.
            a.enter(now, Phase::WarmSwitch);
            return self.send_switch_txn(now, worker, 0, out);
        }
        a.enter(now, Phase::Prepare);
        a.pending = a.writers.len();
        a.replied.clear();
        a.denied = false;
        let writers = a.writers.clone();
        for n in writers {
            let w = writes.remove(&n).unwrap_or_default();
            self.send_node(n, &NodeMsg::Prepare { txn: id, writes: w }, out);
        }
    }

    /// Sends the attempt's switch packet (hot, or a warm transaction's hot part) with its
    /// result going to multicast `group` (0: back to this node only).
    fn send_switch_txn(&mut self, now: Nanos, worker: u16, group: u16, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let pkt = a.switch_packet.as_mut().expect("a switch packet");
        pkt.multicast = group;
        let (id, pkt) = (a.id, pkt.clone());
        if self.cfg.log {
            // From here on it counts as committed: it can no longer abort (§6.1).
            let mut packet = Vec::with_capacity(pkt.encoded_len());
            pkt.encode(&mut packet);
            let local_writes = self.served.get(&id).map(|s| s.prepared.clone()).unwrap_or_default();
            out.log.push(LogRecord::SwitchIntent {
                txn: id,
                packet,
                local_writes,
                writers: a.writers.clone(),
                outputs: a.outputs.clone(),
                instr_order: a.instr_order.iter().map(|&i| i as u16).collect(),
                inserts: a.gen.inserts.clone(),
            });
            if self.cfg.record_history {
                out.events.push(NodeEvent::Committing(record_of(a, None)));
            }
        }
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(Kind::P4dbTxn, |b| pkt.encode(b), out);
        out.timers.push((now + self.cfg.switch_timeout_ns, Timer::SwitchTimeout { worker, txn: id }));
    }

    /// Commits the worker's attempt on this node once every other participant is told or will
    /// be (by `Commit` or the switch's multicast): inserts the rows it creates, applies its
    /// local writes and releases its local locks, and reports it. `answer` is the switch's, for
    /// a hot or warm transaction.
    fn commit_coordinator(&mut self, now: Nanos, worker: u16, answer: Option<&TxnPacket>, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let (id, inserts, outputs) = (a.id, std::mem::take(&mut a.gen.inserts), std::mem::take(&mut a.outputs));
        let inserted = self.insert_rows(id, &inserts, &outputs, out);
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        (a.gen.inserts, a.outputs, a.inserted) = (inserts, outputs, inserted.clone());
        let has_remote_writers = !a.writers.is_empty();
        self.note_decided(id, has_remote_writers);
        if self.cfg.log {
            let local_writes = self.served.get(&id).map(|s| s.prepared.clone()).unwrap_or_default();
            out.log.extend(self.commit_record(id, answer, local_writes, inserted, has_remote_writers));
        }
        self.commit_local(now, id, out);
        self.finish(now, worker, answer.map(|p| p.gid), out);
    }

    /// Remembers that `txn`, which this node coordinated, committed, if remote writers may ask
    /// about it: only with a log or peer timeouts can a participant come to ask, so the
    /// default simulation keeps no such set.
    fn note_decided(&mut self, txn: TxnId, has_remote_writers: bool) {
        if has_remote_writers && (self.cfg.log || self.cfg.peer_timeout_ns > 0) {
            self.decided.insert(txn);
        }
    }

    /// Tells each of `nodes` that `txn` committed.
    fn send_commit(&mut self, txn: TxnId, nodes: &[u16], out: &mut Outbox) {
        for &n in nodes {
            self.send_node(n, &NodeMsg::Commit { txn }, out);
        }
    }

    /// The log record of a commit: the switch's answer, or the redo record of a transaction on
    /// the nodes (none for one that wrote nothing and has no remote writers to decide for).
    fn commit_record(
        &self,
        txn: TxnId,
        answer: Option<&TxnPacket>,
        writes: Vec<(TupleKey, i64)>,
        inserted: Vec<(TupleKey, i64)>,
        has_remote_writers: bool,
    ) -> Option<LogRecord> {
        let insert_seq = self.insert_seq;
        match answer {
            Some(p) => Some(LogRecord::SwitchResult {
                txn,
                gid: p.gid,
                results: p.instrs.iter().map(|i| i.data).collect(),
                acc: p.acc,
                inserted,
                insert_seq,
            }),
            None if writes.is_empty() && inserted.is_empty() && !has_remote_writers => None,
            None => Some(LogRecord::Committed { txn, writes, inserted, insert_seq }),
        }
    }

    /// Inserts the rows `inserts` create, keyed from `outputs` and the node's sequence.
    fn insert_rows(
        &mut self,
        txn: TxnId,
        inserts: &[pisadb_core::Insert],
        outputs: &[i64],
        out: &mut Outbox,
    ) -> Vec<(TupleKey, i64)> {
        let mut inserted = Vec::with_capacity(inserts.len());
        for insert in inserts {
            let sequence = matches!(insert.row, InsertRow::Sequence { .. });
            let key = insert.key(outputs, self.insert_seq);
            self.insert_seq += u64::from(sequence && key.is_some());
            out.cpu_ns += self.cfg.costs.tuple_ns;
            match key {
                Some(key) if self.store.insert(key, Tuple { value: insert.value, version: txn }) => {
                    inserted.push((key, insert.value));
                }
                _ => {
                    debug_assert!(false, "node {}: an insert of {txn:#x} was refused", self.cfg.id);
                    self.reject("insert_refused");
                }
            }
        }
        inserted
    }

    /// A switch transaction recovered from the log got its answer: it commits now, as it would
    /// have before the crash (its coordinator's attempt is gone, so nothing is reported).
    fn finish_recovered(&mut self, txn: TxnId, p: PendingSwitchTxn, answer: &TxnPacket, out: &mut Outbox) {
        let mut outputs = p.outputs;
        // A hot transaction logs no outputs of its own: make room for the switch's.
        let ops = p.instr_order.iter().map(|&op| usize::from(op) + 1).max().unwrap_or(0);
        if outputs.len() < ops {
            outputs.resize(ops, 0);
        }
        for (instr, &op) in answer.instrs.iter().zip(&p.instr_order) {
            if let Some(slot) = outputs.get_mut(usize::from(op)) {
                *slot = i64::from(instr.data);
            }
        }
        let inserted = self.insert_rows(txn, &p.inserts, &outputs, out);
        if answer.multicast == 0 {
            // No multicast group covered the participants: tell them here.
            self.send_commit(txn, &p.writers, out);
        }
        self.note_decided(txn, !p.writers.is_empty());
        if self.cfg.log {
            out.log.extend(self.commit_record(txn, Some(answer), Vec::new(), inserted.clone(), !p.writers.is_empty()));
        }
        if self.cfg.record_history {
            out.events.push(NodeEvent::Recovered(RecoveredCommit { txn, gid: answer.gid, outputs, inserted }));
        }
        self.stats.recovered_commits += 1;
    }

    fn commit_local(&mut self, now: Nanos, id: TxnId, out: &mut Outbox) {
        if self.served.contains_key(&id) {
            self.commit_served(now, id, out);
        }
    }

    fn abort(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        self.stats.aborts += 1;
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        a.enter(now, Phase::Aborted);
        let (id, contacted) = (a.id, a.contacted.clone());
        for n in contacted {
            self.send_node(n, &NodeMsg::Abort { txn: id }, out);
        }
        self.abort_served(now, id, out);
        self.release_switch_locks(worker, out);
        let backoff = self.rng.random_range(0..=self.cfg.backoff_max_ns);
        out.timers.push((now + backoff, Timer::Retry { worker }));
    }

    fn release_switch_locks(&mut self, worker: u16, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let Some((request, granted)) = a.switch_locks.take() else { return };
        let entries: Vec<_> = request
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| granted & (1 << i) != 0)
            .map(|(_, e)| {
                let op =
                    if e.op == LockOp::AcquireExclusive { LockOp::ReleaseExclusive } else { LockOp::ReleaseShared };
                crate::wire::lock::LockEntry { op, ..*e }
            })
            .collect();
        if entries.is_empty() {
            return;
        }
        let pkt = LockPacket { txn_id: request.txn_id | RELEASE_TAG, granted: 0, entries };
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(Kind::Lock, |b| pkt.encode(b), out);
    }

    fn finish(&mut self, now: Nanos, worker: u16, gid: Option<u64>, out: &mut Outbox) {
        self.release_switch_locks(worker, out);
        let mut a = self.workers[usize::from(worker)].current.take().expect("an attempt");
        a.close_phase(now);
        let on_switch = a.phase == Phase::SwitchTxn;
        let record = self.cfg.record_history.then(|| record_of(&a, gid));
        out.events.push(NodeEvent::Finished(Finished {
            worker,
            kind: a.gen.kind,
            on_switch,
            hot: a.gen.class == TxnClass::Hot,
            started: a.started,
            attempts: a.attempts,
            phases: a.phases,
            record,
        }));
        out.timers.push((now, Timer::Begin { worker }));
    }

    fn on_switch_txn_reply(&mut self, now: Nanos, pkt: TxnPacket, out: &mut Outbox) {
        let id = pkt.txn_id;
        if owner_node(id) != self.cfg.id {
            // Another node's warm transaction, which this node prepared: the result commits it.
            if pkt.multicast == 0 || !self.served.contains_key(&id) {
                return self.reject("stale_multicast");
            }
            return self.commit_served(now, id, out);
        }
        if let Some(p) = self.recovering.remove(&id) {
            return self.finish_recovered(id, p, &pkt, out);
        }
        if worker_of(id) >= self.cfg.workers {
            return self.reject("reply_for_unknown_worker");
        }
        let worker = worker_of(id);
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
        let waiting = matches!(a.phase, Phase::SwitchTxn | Phase::WarmSwitch);
        if a.id != id || !waiting || pkt.instrs.len() != a.instr_order.len() {
            return self.reject("stale_switch_reply");
        }
        a.outputs.resize(a.gen.txn.ops.len(), 0);
        for (instr, &op) in pkt.instrs.iter().zip(&a.instr_order) {
            a.outputs[op] = i64::from(instr.data);
        }
        if a.phase == Phase::WarmSwitch && pkt.multicast == 0 && !a.writers.is_empty() {
            // No multicast group covers the participants: tell them here.
            let (writers, id) = (a.writers.clone(), a.id);
            self.send_commit(id, &writers, out);
        }
        self.commit_coordinator(now, worker, Some(&pkt), out);
    }

    fn on_switch_lock_reply(&mut self, now: Nanos, pkt: LockPacket, out: &mut Outbox) {
        if pkt.txn_id & RELEASE_TAG != 0 {
            return; // a release needs no answer
        }
        let id = pkt.txn_id;
        if owner_node(id) != self.cfg.id || worker_of(id) >= self.cfg.workers {
            return self.reject("reply_for_unknown_worker");
        }
        let worker = worker_of(id);
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
        if a.id != id || a.phase != Phase::SwitchLocks {
            return self.reject("stale_switch_reply");
        }
        let Some((request, granted)) = a.switch_locks.as_mut() else { return };
        *granted = pkt.granted;
        let all = if request.entries.len() == 32 { u32::MAX } else { (1u32 << request.entries.len()) - 1 };
        if pkt.granted & all == all {
            self.lock_and_read(now, worker, out);
        } else {
            // Nothing else was contacted yet: release what the switch granted and retry.
            self.abort(now, worker, out);
        }
    }

    // ----- the participant side -----

    fn serve(&mut self, now: Nanos, from: Requester, msg: NodeMsg, out: &mut Outbox) {
        match msg {
            NodeMsg::LockRead { txn, ts, on_conflict, entries } => {
                if self.served.contains_key(&txn) {
                    return self.reject("duplicate_lock_read");
                }
                let values = Vec::with_capacity(entries.len());
                let served = Served {
                    requester: from,
                    ts,
                    policy: on_conflict,
                    entries,
                    next: 0,
                    values,
                    held: Vec::new(),
                    prepared: Vec::new(),
                    voted: false,
                };
                self.served.insert(txn, served);
                if self.cfg.peer_timeout_ns > 0 && matches!(from, Requester::Remote(_)) {
                    out.timers.push((now + self.retry_interval_ns(), Timer::Lease { txn }));
                }
                self.continue_lock_read(now, txn, out);
            }
            NodeMsg::Prepare { txn, writes } => {
                let Requester::Remote(coordinator) = from else { return };
                // Yes only for a request this node still serves, with every lock granted.
                let yes = match self.served.get_mut(&txn) {
                    Some(s) if s.next == s.entries.len() && !s.voted => {
                        if self.cfg.log {
                            out.log.push(LogRecord::Prepared { txn, coordinator, writes: writes.clone() });
                        }
                        s.prepared = writes;
                        s.voted = true;
                        true
                    }
                    _ => false,
                };
                self.send_node(coordinator, &NodeMsg::Vote { txn, yes }, out);
            }
            NodeMsg::Inquire { txn } => {
                let Requester::Remote(asker) = from else { return };
                match self.outcome(txn) {
                    Some(true) => self.send_node(asker, &NodeMsg::Commit { txn }, out),
                    Some(false) => self.send_node(asker, &NodeMsg::Abort { txn }, out),
                    None => {} // not decided yet: the participant asks again
                }
            }
            NodeMsg::Commit { txn } => {
                if self.served.contains_key(&txn) {
                    self.commit_served(now, txn, out);
                }
            }
            NodeMsg::Abort { txn } => self.abort_served(now, txn, out),
            NodeMsg::LockReadReply { .. } | NodeMsg::Vote { .. } => self.reject("reply_as_request"),
        }
    }

    /// The outcome of a transaction this node coordinates, for a participant that asks:
    /// committed, aborted, or not decided yet (`None`). A transaction it neither committed nor
    /// still runs was aborted (presumed abort: a commit is always logged first). A warm one
    /// waiting for the switch is decided but not answered until the switch has run its hot
    /// part, so that no one sees its cold writes before its hot ones are ordered.
    fn outcome(&self, txn: TxnId) -> Option<bool> {
        if self.decided.contains(&txn) {
            return Some(true);
        }
        if self.recovering.contains_key(&txn) {
            return None;
        }
        let worker = self.workers.get(usize::from(worker_of(txn))).filter(|_| owner_node(txn) == self.cfg.id);
        match worker.and_then(|w| w.current.as_ref()).filter(|a| a.id == txn) {
            Some(a) if matches!(a.phase, Phase::Prepare | Phase::WarmSwitch) => None,
            _ => Some(false),
        }
    }

    /// Takes the locks of a lock-and-read request from where it stopped, until it waits, is
    /// denied, or has them all (then replies).
    fn continue_lock_read(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let (lock_ns, tuple_ns) = (self.cfg.costs.lock_ns, self.cfg.costs.tuple_ns);
        let Some(s) = self.served.get_mut(&txn) else { return };
        while s.next < s.entries.len() {
            let (key, mode) = s.entries[s.next];
            if mode != LockMode::None {
                out.cpu_ns += lock_ns;
                match self.locks.acquire(key, txn, s.ts, mode, s.policy) {
                    Acquire::Granted => s.held.push(key),
                    Acquire::Waiting => return,
                    Acquire::Denied => {
                        let requester = s.requester;
                        self.abort_served(now, txn, out);
                        let reply = NodeMsg::LockReadReply { txn, granted: false, values: Vec::new() };
                        return self.reply(now, requester, reply, out);
                    }
                }
            }
            out.cpu_ns += tuple_ns;
            let tuple = self.store.get(key).unwrap_or_default();
            s.values.push((tuple.value, tuple.version));
            s.next += 1;
        }
        let reply = NodeMsg::LockReadReply { txn, granted: true, values: s.values.clone() };
        let requester = s.requester;
        self.reply(now, requester, reply, out);
    }

    fn reply(&mut self, now: Nanos, to: Requester, msg: NodeMsg, out: &mut Outbox) {
        match to {
            Requester::Remote(node) => self.send_node(node, &msg, out),
            Requester::Local(worker) => {
                let w = &self.workers[usize::from(worker)];
                let waiting_here = w.current.as_ref().is_some_and(|a| a.id == msg.txn());
                if waiting_here {
                    self.workers[usize::from(worker)].local_replies.push(msg);
                    out.timers.push((now, Timer::Resume { worker }));
                }
            }
        }
    }

    fn commit_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.remove(&txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn, commit: true });
        }
        for (key, value) in s.prepared {
            out.cpu_ns += self.cfg.costs.tuple_ns;
            let stored = self.store.set(key, Tuple { value, version: txn });
            debug_assert!(stored, "node {} asked to write {key:?} it does not own", self.cfg.id);
        }
        self.release_all(now, txn, &s.held, out);
    }

    fn abort_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.remove(&txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn, commit: false });
        }
        let mut keys = s.held;
        // A request parked in a queue is withdrawn too.
        if let Some(&(key, mode)) = s.entries.get(s.next) {
            if mode != LockMode::None && !keys.contains(&key) {
                keys.push(key);
            }
        }
        self.release_all(now, txn, &keys, out);
    }

    fn release_all(&mut self, now: Nanos, txn: TxnId, keys: &[TupleKey], out: &mut Outbox) {
        let mut woken = Vec::new();
        for &key in keys {
            out.cpu_ns += self.cfg.costs.lock_ns;
            woken.extend(self.locks.release(key, txn));
        }
        for w in woken {
            if let Some(s) = self.served.get_mut(&w) {
                let (key, _) = s.entries[s.next];
                s.held.push(key);
                s.values.push({
                    let t = self.store.get(key).unwrap_or_default();
                    (t.value, t.version)
                });
                s.next += 1;
                // Later requests of this transaction may now wait again or finish.
                self.continue_lock_read(now, w, out);
            }
        }
    }

    // ----- sending -----

    fn send_node(&mut self, dst: u16, msg: &NodeMsg, out: &mut Outbox) {
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + msg.encoded_len());
        Frame { kind: Kind::Forward, src: self.cfg.id, dst }.encode(&mut bytes);
        msg.encode(&mut bytes);
        out.sends.push(Send { dst, bytes });
    }

    fn send_switch(&self, kind: Kind, encode: impl FnOnce(&mut Vec<u8>), out: &mut Outbox) {
        let mut bytes = Vec::new();
        Frame { kind, src: self.cfg.id, dst: SWITCH_ID }.encode(&mut bytes);
        encode(&mut bytes);
        out.sends.push(Send { dst: SWITCH_ID, bytes });
    }
}

/// Whether a warm transaction's switch part (`on_switch`, sorted indices) and node part can run
/// apart: no operation of one reads or changes the accumulator that an operation of the other
/// changes or reads (their tuples differ, so the accumulator is the only link).
fn parts_independent(txn: &Txn, on_switch: &[usize]) -> bool {
    if !txn.ops.iter().any(|op| op.reads_acc() || op.writes_acc()) {
        return true;
    }
    let switch = |i: usize| on_switch.binary_search(&i).is_ok();
    txn.dependencies().iter().all(|&(i, j)| switch(i) == switch(j))
}

/// What attempt `a` did, for checkers: the reads and writes on the nodes with the versions they
/// saw and replaced (none for a transaction wholly on the switch), and the switch's part.
fn record_of(a: &Attempt, gid: Option<u64>) -> Box<Record> {
    let on_switch = a.phase == Phase::SwitchTxn;
    let updates = a.accesses.iter().filter(|x| x.write).map(|x| (x.key, x.version));
    let history = (!on_switch).then(|| CommittedTxn {
        id: a.id,
        reads: a.accesses.iter().map(|x| (x.key, x.version)).collect(),
        // A created row overwrites no version: it is the first.
        writes: updates.chain(a.inserted.iter().map(|&(key, _)| (key, 0))).collect(),
    });
    Box::new(Record {
        id: a.id,
        gen: a.gen.clone(),
        outputs: a.outputs.clone(),
        gid,
        switch_ops: a.switch_ops.clone(),
        inserted: a.inserted.clone(),
        history,
    })
}

/// The drivers run a node through the host interface; each method is the node's own.
impl Host for Node {
    type Timer = Timer;
    type Log = LogRecord;
    type Event = NodeEvent;

    fn cores(&self) -> u16 {
        self.cfg.workers
    }
    fn start(&mut self, now: Nanos, out: &mut Outbox) {
        Node::start(self, now, out)
    }
    fn route(&self, bytes: &[u8]) -> Route {
        Node::route(self, bytes)
    }
    fn timer_core(&self, timer: &Timer) -> u16 {
        timer.worker()
    }
    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut Outbox) {
        Node::handle_datagram(self, now, bytes, out)
    }
    fn handle_timer(&mut self, now: Nanos, timer: Timer, out: &mut Outbox) {
        Node::handle_timer(self, now, timer, out)
    }
    fn stop(&mut self) {
        Node::stop(self)
    }
    fn is_idle(&self) -> bool {
        Node::is_idle(self)
    }
    fn fence_switch(&mut self, epoch: u16) {
        Node::fence_switch(self, epoch)
    }
}

/// A transaction attempt id: node (bits 48..63), the node's incarnation (38..47), worker
/// (32..37) and the worker's attempt counter (0..31). The upper half names a worker slot of
/// one incarnation, which is how the switch tells a resent transaction from a new one.
pub fn txn_id(node: u16, incarnation: u16, worker: u16, seq: u32) -> TxnId {
    let incarnation = incarnation % NodeConfig::INCARNATIONS;
    (u64::from(node) << 48) | (u64::from(incarnation) << 38) | (u64::from(worker) << 32) | u64::from(seq)
}

/// The node of an attempt id.
pub fn owner_node(id: TxnId) -> u16 {
    ((id >> 48) & 0x7FFF) as u16
}

/// The worker of an attempt id.
pub fn worker_of(id: TxnId) -> u16 {
    ((id >> 32) & 0x3F) as u16
}

/// The WAIT_DIE timestamp of a transaction first started at `now` by `worker` of `node`:
/// start time first, ties broken by node and worker, so timestamps are unique.
fn timestamp(now: Nanos, node: u16, worker: u16) -> u64 {
    (now << 16) | (u64::from(node) << 6) | u64::from(worker)
}
