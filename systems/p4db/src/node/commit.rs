//! The coordinator's commit: inserts, the commit record, the local commit, and the decisions
//! participants may ask about.
//!
//! A transaction commits on its coordinator's node once every other participant is told or
//! will be — by `Commit`, or by the switch's multicast of a warm transaction's result. In one
//! handler the node then inserts the rows the transaction creates (keyed by its outputs or the
//! node's sequence; nobody can name them before, so they need no locks), logs the commit (the
//! switch's answer for a hot or warm transaction, else the redo record of the writes), commits
//! its own part through concurrency control, and reports the transaction.
//!
//! Presumed abort: a participant that prepared and lost touch asks the coordinator, which
//! answers from [`pisadb_engine::twopc::Decisions`]. Only transactions with remote writers can
//! be asked about, and only when a log or peer timeouts make asking possible; the default
//! simulation therefore records nothing.

use super::events::*;
use super::ids::LANE;
use super::machine::Node;
use super::worker::record_of;
use crate::node::wal::LogRecord;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{InsertRow, Nanos, TupleKey};
use pisadb_engine::id::TxnId;
use pisadb_engine::store::Tuple;
use pisadb_wire::node::NodeMsg;

impl Node {
    /// Commits the worker's attempt on this node once every other participant is told or will
    /// be (by `Commit` or the switch's multicast): inserts the rows it creates, applies its
    /// local writes and releases its local locks, and reports it. `answer` is the switch's, for
    /// a hot or warm transaction.
    pub(super) fn commit_coordinator(&mut self, now: Nanos, worker: u16, answer: Option<&TxnPacket>, out: &mut Outbox) {
        let a = self.attempt_mut(worker);
        let (id, inserts, outputs) = (a.id, std::mem::take(&mut a.job.txn.inserts), std::mem::take(&mut a.outputs));
        let inserted = self.insert_rows(id, &inserts, &outputs, out);
        let a = self.attempt_mut(worker);
        (a.job.txn.inserts, a.outputs, a.inserted) = (inserts, outputs, inserted.clone());
        let has_remote_writers = !a.writers.is_empty();
        self.note_decided(id, has_remote_writers);
        if self.cfg.log {
            let local_writes = self.cc.writes_of(id).to_vec();
            out.log.extend(self.commit_record(id, answer, local_writes, inserted, has_remote_writers));
        }
        if self.served.contains(id) {
            self.commit_served(now, id, out);
        }
        self.finish(now, worker, answer.map(|p| p.gid), out);
    }

    /// Remembers that `txn`, which this node coordinated, committed, if remote writers may ask
    /// about it: only with a log or peer timeouts can a participant come to ask, so the
    /// default simulation keeps no such set.
    pub(super) fn note_decided(&mut self, txn: TxnId, has_remote_writers: bool) {
        if has_remote_writers && (self.cfg.log || self.cfg.peer_timeout_ns > 0) {
            self.decisions.commit(txn);
        }
    }

    /// Tells each of `nodes` that `txn` committed.
    pub(super) fn send_commit(&mut self, txn: TxnId, nodes: &[u16], out: &mut Outbox) {
        for &n in nodes {
            self.send_node(n, &NodeMsg::Commit { txn: txn.bits() }, out);
        }
    }

    /// The log record of a commit: the switch's answer, or the redo record of a transaction on
    /// the nodes (none for one that wrote nothing and has no remote writers to decide for).
    pub(super) fn commit_record(
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
                txn: txn.bits(),
                gid: p.gid,
                results: p.instrs.iter().map(|i| i.data).collect(),
                acc: p.acc,
                inserted,
                insert_seq,
            }),
            None if writes.is_empty() && inserted.is_empty() && !has_remote_writers => None,
            None => Some(LogRecord::Committed { txn: txn.bits(), writes, inserted, insert_seq }),
        }
    }

    /// Inserts the rows `inserts` create, keyed from `outputs` and the node's sequence.
    pub(super) fn insert_rows(
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
                Some(key) if self.store.insert(key, Tuple { value: insert.value, version: txn.bits() }) => {
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

    /// With `record_history` and `log`: reports the worker's switch transaction as committing
    /// (it is logged and can no longer abort), for checkers.
    pub(super) fn report_committing(&self, worker: u16, out: &mut Outbox) {
        if self.cfg.record_history {
            let a = self.workers.current(worker, LANE).expect("the worker runs an attempt");
            out.events.push(NodeEvent::Committing(record_of(a, None)));
        }
    }
}
