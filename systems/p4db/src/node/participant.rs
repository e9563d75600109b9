//! The participant side: lock-and-read requests, 2PC votes, commits and aborts served for coordinators.

use super::events::*;
use super::machine::Node;
use super::timer::Timer;
use super::worker::*;
use crate::node::wal::LogRecord;
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::cc::{Concurrency, Grant, Intent, Read, TxnError, Work};
use pisadb_engine::id::TxnId;
use pisadb_wire::node::{LockMode, NodeMsg};

/// Who asked for a lock-and-read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Requester {
    Local(u16),
    Remote(u16),
}

/// A transaction this node serves as a participant (also its own workers' local part).
#[derive(Debug)]
pub(super) struct Served {
    pub(super) requester: Requester,
    pub(super) entries: Vec<(TupleKey, LockMode)>,
    /// Entries handled so far.
    pub(super) next: usize,
    pub(super) values: Vec<(i64, u64)>,
    /// Voted yes (a remote coordinator's `Prepare`): only the coordinator may end it now.
    pub(super) voted: bool,
}

impl Node {
    pub(super) fn serve(&mut self, now: Nanos, from: Requester, msg: NodeMsg, out: &mut Outbox) {
        let txn = TxnId::from_bits(msg.txn());
        match msg {
            NodeMsg::LockRead { ts, on_conflict, entries, .. } => {
                if self.served.contains_key(&txn) {
                    return self.reject("duplicate_lock_read");
                }
                let values = Vec::with_capacity(entries.len());
                let served = Served { requester: from, entries, next: 0, values, voted: false };
                self.served.insert(txn, served);
                self.cc.begin_with(txn, ts, on_conflict).expect("the participant and concurrency control agree");
                if self.cfg.peer_timeout_ns > 0 && matches!(from, Requester::Remote(_)) {
                    out.timers.push((now + self.retry_interval_ns(), Timer::Lease { txn }));
                }
                self.continue_lock_read(now, txn, out);
            }
            NodeMsg::Prepare { writes, .. } => {
                let Requester::Remote(coordinator) = from else { return };
                // Yes only for a request this node still serves, with every lock granted.
                let yes = match self.served.get_mut(&txn) {
                    Some(s) if s.next == s.entries.len() && !s.voted => {
                        if self.cfg.log {
                            out.log.push(LogRecord::Prepared { txn: txn.bits(), coordinator, writes: writes.clone() });
                        }
                        for (key, value) in writes {
                            let written = self.cc.write(txn, key, value, &mut Work::default());
                            debug_assert!(written.is_ok(), "{txn}: a prepared write of {key:?}: {written:?}");
                        }
                        s.voted = true;
                        true
                    }
                    _ => false,
                };
                self.send_node(coordinator, &NodeMsg::Vote { txn: txn.bits(), yes }, out);
            }
            NodeMsg::Inquire { .. } => {
                let Requester::Remote(asker) = from else { return };
                match self.outcome(txn) {
                    Some(true) => self.send_node(asker, &NodeMsg::Commit { txn: txn.bits() }, out),
                    Some(false) => self.send_node(asker, &NodeMsg::Abort { txn: txn.bits() }, out),
                    None => {} // not decided yet: the participant asks again
                }
            }
            NodeMsg::Commit { .. } => {
                if self.served.contains_key(&txn) {
                    self.commit_served(now, txn, out);
                }
            }
            NodeMsg::Abort { .. } => self.abort_served(now, txn, out),
            NodeMsg::LockReadReply { .. } | NodeMsg::Vote { .. } => self.reject("reply_as_request"),
        }
    }

    /// The outcome of a transaction this node coordinates, for a participant that asks:
    /// committed, aborted, or not decided yet (`None`). A transaction it neither committed nor
    /// still runs was aborted (presumed abort: a commit is always logged first). A warm one
    /// waiting for the switch is decided but not answered until the switch has run its hot
    /// part, so that no one sees its cold writes before its hot ones are ordered.
    pub(super) fn outcome(&self, txn: TxnId) -> Option<bool> {
        if self.decided.contains(&txn) {
            return Some(true);
        }
        if self.recovering.contains_key(&txn) {
            return None;
        }
        let worker = self.workers.get(usize::from(txn.worker())).filter(|_| txn.node() == self.cfg.id);
        match worker.and_then(|w| w.current.as_ref()).filter(|a| a.id == txn) {
            Some(a) if matches!(a.phase, Phase::Prepare | Phase::WarmSwitch) => None,
            _ => Some(false),
        }
    }

    /// Takes the locks of a lock-and-read request from where it stopped, until it waits, is
    /// denied, or has them all (then replies).
    pub(super) fn continue_lock_read(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.get_mut(&txn) else { return };
        while s.next < s.entries.len() {
            let (key, mode) = s.entries[s.next];
            let mut work = Work::default();
            let read = self.cc.read(&self.store, txn, key, intent_of(mode), &mut work);
            out.cpu_ns += self.cfg.costs.work_ns(work);
            match read {
                Ok(Read::Done(tuple)) => {
                    s.values.push((tuple.value, tuple.version));
                    s.next += 1;
                }
                Ok(Read::Waiting) => return,
                Err(e) => {
                    debug_assert!(matches!(e, TxnError::Abort(_)), "{txn}: {e}");
                    let requester = s.requester;
                    self.abort_served(now, txn, out);
                    let reply = NodeMsg::LockReadReply { txn: txn.bits(), granted: false, values: Vec::new() };
                    return self.reply(now, requester, reply, out);
                }
            }
        }
        let reply = NodeMsg::LockReadReply { txn: txn.bits(), granted: true, values: s.values.clone() };
        let requester = s.requester;
        self.reply(now, requester, reply, out);
    }

    pub(super) fn reply(&mut self, now: Nanos, to: Requester, msg: NodeMsg, out: &mut Outbox) {
        match to {
            Requester::Remote(node) => self.send_node(node, &msg, out),
            Requester::Local(worker) => {
                let w = &self.workers[usize::from(worker)];
                let waiting_here = w.current.as_ref().is_some_and(|a| a.id.bits() == msg.txn());
                if waiting_here {
                    self.workers[usize::from(worker)].local_replies.push(msg);
                    out.timers.push((now, Timer::Resume { worker }));
                }
            }
        }
    }

    pub(super) fn commit_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.remove(&txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn: txn.bits(), commit: true });
        }
        let mut work = Work::default();
        let committed = self.cc.commit(&mut self.store, txn, &mut work);
        out.cpu_ns += self.cfg.costs.work_ns(work);
        match committed {
            Ok(grants) => self.continue_granted(now, grants, out),
            Err(e) => {
                debug_assert!(false, "node {}: commit of {txn}: {e}", self.cfg.id);
                self.reject("commit_refused");
            }
        }
    }

    pub(super) fn abort_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.remove(&txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn: txn.bits(), commit: false });
        }
        let mut work = Work::default();
        let grants = self.cc.abort(&self.store, txn, &mut work);
        out.cpu_ns += self.cfg.costs.work_ns(work);
        self.continue_granted(now, grants, out);
    }

    /// Lock-and-read requests that waited for a lock a commit or abort let go of go on, in
    /// the order the locks were handed over.
    fn continue_granted(&mut self, now: Nanos, grants: Vec<Grant>, out: &mut Outbox) {
        for Grant { txn, key, tuple } in grants {
            let Some(s) = self.served.get_mut(&txn) else { continue };
            debug_assert_eq!(
                s.entries.get(s.next).map(|e| e.0),
                Some(key),
                "{txn} was granted what it did not wait for"
            );
            s.values.push((tuple.value, tuple.version));
            s.next += 1;
            // Later requests of this transaction may now wait again or finish.
            self.continue_lock_read(now, txn, out);
        }
    }
}

/// What a lock-and-read entry's lock mode asks of concurrency control.
pub(super) fn intent_of(mode: LockMode) -> Intent {
    match mode {
        LockMode::None => Intent::Unguarded,
        LockMode::Shared => Intent::Read,
        LockMode::Exclusive => Intent::Write,
    }
}
