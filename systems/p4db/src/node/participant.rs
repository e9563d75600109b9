//! The participant side: lock-and-read requests, 2PC votes, commits and aborts served for coordinators.

use super::events::*;
use super::machine::Node;
use super::timer::Timer;
use super::worker::*;
use crate::node::wal::LogRecord;
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::id::TxnId;
use pisadb_engine::locks::Acquire;
use pisadb_engine::store::Tuple;
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict};

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
    pub(super) ts: u64,
    pub(super) policy: OnConflict,
    pub(super) entries: Vec<(TupleKey, LockMode)>,
    /// Entries handled so far.
    pub(super) next: usize,
    pub(super) values: Vec<(i64, u64)>,
    pub(super) held: Vec<TupleKey>,
    pub(super) prepared: Vec<(TupleKey, i64)>,
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
            NodeMsg::Prepare { writes, .. } => {
                let Requester::Remote(coordinator) = from else { return };
                // Yes only for a request this node still serves, with every lock granted.
                let yes = match self.served.get_mut(&txn) {
                    Some(s) if s.next == s.entries.len() && !s.voted => {
                        if self.cfg.log {
                            out.log.push(LogRecord::Prepared { txn: txn.bits(), coordinator, writes: writes.clone() });
                        }
                        s.prepared = writes;
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
                        let reply = NodeMsg::LockReadReply { txn: txn.bits(), granted: false, values: Vec::new() };
                        return self.reply(now, requester, reply, out);
                    }
                }
            }
            out.cpu_ns += tuple_ns;
            let tuple = self.store.get(key).unwrap_or_default();
            s.values.push((tuple.value, tuple.version));
            s.next += 1;
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
        for (key, value) in s.prepared {
            out.cpu_ns += self.cfg.costs.tuple_ns;
            let stored = self.store.set(key, Tuple { value, version: txn.bits() });
            debug_assert!(stored, "node {} asked to write {key:?} it does not own", self.cfg.id);
        }
        self.release_all(now, txn, &s.held, out);
    }

    pub(super) fn abort_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.remove(&txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn: txn.bits(), commit: false });
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

    pub(super) fn release_all(&mut self, now: Nanos, txn: TxnId, keys: &[TupleKey], out: &mut Outbox) {
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
}
