//! What a node reports: committed transactions, their records, recovery, counters.
//!
//! A handler's outputs go into an [`Outbox`]; besides sends, timers and log records it carries
//! [`NodeEvent`]s for the driver's metrics and the oracles. A committed transaction is
//! reported once, by the worker that ran it ([`Finished`]), with where its latency went
//! ([`PhaseTimes`]) and, for checkers, what it read and wrote ([`Record`]). A switch
//! transaction with a log counts as committed when its intent is logged, before its answer:
//! it is reported then as [`NodeEvent::Committing`], and completed by `Finished` or, across a
//! crash, by [`NodeEvent::Recovered`]. Ids in these reports are raw [`TxnId`] bits, as they
//! travel and are logged.
//!
//! [`TxnId`]: pisadb_engine::id::TxnId

use super::timer::Timer;
use crate::node::wal::LogRecord;
use crate::node::CommittedTxn;
use pisadb_core::{Nanos, TupleKey, Txn};
use pisadb_workload::GeneratedTxn;
use std::collections::BTreeMap;

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
    /// The committed attempt's id ([`TxnId::bits`](pisadb_engine::id::TxnId::bits)).
    pub id: u64,
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
    /// The transaction ([`TxnId::bits`](pisadb_engine::id::TxnId::bits)).
    pub txn: u64,
    /// The GID the switch gave it.
    pub gid: u64,
    /// Each operation's output (cold ones from the log, hot ones from the answer).
    pub outputs: Vec<i64>,
    /// Rows inserted at commit, with their values.
    pub inserted: Vec<(TupleKey, i64)>,
}

/// What [`Node::recover`](crate::node::Node::recover) found in the log.
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
    /// Transactions begun (drawn by a worker; a retry is not a new one).
    pub begun: u64,
    /// Transactions committed (each once, however many attempts it took).
    pub committed: u64,
    /// [`Engine::Prototype`](crate::node::Engine::Prototype): transactions aborted and skipped,
    /// never retried. Once the node is quiet, `begun = committed + skipped`.
    pub skipped: u64,
    /// [`Engine::Prototype`](crate::node::Engine::Prototype): workers that ran all their
    /// pre-generated transactions and stopped.
    pub workers_done: u64,
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
