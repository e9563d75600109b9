//! The participant side: what a node does for the transactions it serves.
//!
//! Every node serves the lock-and-read requests of coordinators — other nodes' workers, and
//! its own (by direct call, answered through a `Resume` timer on the worker's core). The 2PC
//! bookkeeping (admission, one yes vote, leases) is the engine's
//! [`Participant`](pisadb_engine::twopc::Participant); locking, buffered writes, commit and
//! abort go through its [`TwoPhaseLocking`](pisadb_engine::cc::TwoPhaseLocking). What is P4DB's
//! is the message flow:
//!
//! - `LockRead`: lock and read the entries in order ([`LockReading`] is how far it got). A
//!   request that waits (WAIT_DIE) goes on when a commit or abort hands it the lock; a denied
//!   one aborts here at once and answers *denied* (its coordinator will abort everywhere).
//!   With peer timeouts, a remote request gets a lease.
//! - `Prepare`: a yes vote (logged first) only for a request still served whose reads are all
//!   done; the writes are buffered for the commit.
//! - `Commit` / `Abort`: install the writes or drop them, and release; the outcome of a
//!   prepared transaction is logged.
//! - `Inquire` (this node as coordinator): presumed abort from the engine's
//!   [`Decisions`](pisadb_engine::twopc::Decisions), withheld while still deciding.
//! - A lease running out: an unprepared transaction is dropped, a prepared one asks its
//!   coordinator.
//!
//! Under the prototype's engine ([`Engine::Prototype`](crate::node::Engine::Prototype)) a
//! coordinator sends one `LockRead` per tuple, so a transaction served here grows by one entry
//! per request, and each answer carries only the values not sent before. It ends with one
//! `Release` per tuple (the write-back, if written): each is acknowledged with `Released`,
//! and once every granted tuple is released the transaction commits here (a rollback releases
//! with no values, so its commit installs nothing). Commit, and so unlocking, is per
//! transaction, not per tuple: the tuples a coordinator releases together are unlocked when
//! the last of their messages arrives, a few hundred nanoseconds after the first.

use super::events::*;
use super::ids::LANE;
use super::machine::{Handoff, Node};
use super::timer::Timer;
use super::worker::Phase;
use crate::node::config::Engine;
use crate::node::wal::LogRecord;
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::cc::{Concurrency, Grant, Intent, Read, TxnError, Work};
use pisadb_engine::id::TxnId;
use pisadb_engine::twopc::{LeaseAction, Origin, Outcome};
use pisadb_wire::node::{LockMode, NodeMsg};

/// How far a served lock-and-read request got.
#[derive(Debug)]
pub(super) struct LockReading {
    /// The tuples, each with the lock it needs, in the coordinator's order.
    pub(super) entries: Vec<(TupleKey, LockMode)>,
    /// Entries handled so far.
    pub(super) next: usize,
    /// Per entry handled: the value and version read.
    pub(super) values: Vec<(i64, u64)>,
    /// Values already sent to the coordinator (the prototype's engine asks entry by entry).
    pub(super) replied: usize,
    /// Tuples the coordinator has released (the prototype's engine).
    pub(super) released: usize,
}

impl LockReading {
    /// Whether every entry is locked and read.
    fn done(&self) -> bool {
        self.next == self.entries.len()
    }
}

impl Node {
    /// A request from a coordinator (`Origin::Local`: this node's own worker).
    pub(super) fn serve(&mut self, now: Nanos, from: Origin, msg: NodeMsg, out: &mut Outbox) {
        let txn = TxnId::from_bits(msg.txn());
        match msg {
            NodeMsg::LockRead { entries, .. } if self.prototype() && self.served.contains(txn) => {
                // The prototype's coordinator asks for one more tuple of the same transaction.
                if let Some(s) = self.served.get_mut(txn) {
                    s.progress.entries.extend(entries);
                }
                self.continue_lock_read(now, txn, out);
            }
            NodeMsg::LockRead { ts, on_conflict, entries, .. } => {
                let values = Vec::with_capacity(entries.len());
                let reading = LockReading { entries, next: 0, values, replied: 0, released: 0 };
                if !self.served.admit(txn, from, reading) {
                    return self.reject("duplicate_lock_read");
                }
                self.cc.begin_with(txn, ts, on_conflict).expect("the participant and concurrency control agree");
                if self.cfg.peer_timeout_ns > 0 && matches!(from, Origin::Remote(_)) {
                    out.timers.push((now + self.retry_interval_ns(), Timer::Lease { txn }));
                }
                self.continue_lock_read(now, txn, out);
            }
            NodeMsg::Prepare { writes, .. } => {
                let Origin::Remote(coordinator) = from else { return };
                // Yes only for a request this node still serves, with every lock granted.
                let yes = self.served.vote(txn, LockReading::done);
                if yes {
                    if self.cfg.log {
                        out.log.push(LogRecord::Prepared { txn: txn.bits(), coordinator, writes: writes.clone() });
                    }
                    for (key, value) in writes {
                        let written = self.cc.write(txn, key, value, &mut Work::default());
                        debug_assert!(written.is_ok(), "{txn}: a prepared write of {key:?}: {written:?}");
                    }
                }
                self.send_node(coordinator, &NodeMsg::Vote { txn: txn.bits(), yes }, out);
            }
            NodeMsg::Inquire { .. } => {
                let Origin::Remote(asker) = from else { return };
                match self.outcome(txn) {
                    Some(Outcome::Commit) => self.send_node(asker, &NodeMsg::Commit { txn: txn.bits() }, out),
                    Some(Outcome::Abort) => self.send_node(asker, &NodeMsg::Abort { txn: txn.bits() }, out),
                    None => {} // not decided yet: the participant asks again
                }
            }
            NodeMsg::Commit { .. } => {
                if self.served.contains(txn) {
                    self.commit_served(now, txn, out);
                }
            }
            NodeMsg::Abort { .. } => self.abort_served(now, txn, out),
            NodeMsg::Release { key, write, .. } => {
                let Origin::Remote(coordinator) = from else { return };
                self.release(now, txn, key, write, out);
                self.send_node(coordinator, &NodeMsg::Released { txn: txn.bits() }, out);
            }
            NodeMsg::LockReadReply { .. } | NodeMsg::Vote { .. } | NodeMsg::Released { .. } => {
                self.reject("reply_as_request")
            }
        }
    }

    /// The outcome of a transaction this node coordinates, for a participant that asks. A
    /// transaction it neither committed nor still decides was aborted (presumed abort: a commit
    /// is always logged first). A warm one waiting for the switch is decided but not answered
    /// until the switch has run its hot part, so that no one sees its cold writes before its
    /// hot ones are ordered; a recovered switch transaction likewise.
    fn outcome(&self, txn: TxnId) -> Option<Outcome> {
        let running = self.workers.lane_of(txn).and_then(|(worker, lane)| self.workers.current(worker, lane));
        let deciding = running.is_some_and(|a| a.id == txn && matches!(a.phase, Phase::Prepare | Phase::WarmSwitch));
        self.decisions.outcome(txn, deciding || self.recovering.contains_key(&txn))
    }

    /// Takes the locks of a lock-and-read request from where it stopped, until it waits, is
    /// denied, or has them all (then replies).
    pub(super) fn continue_lock_read(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.get_mut(txn) else { return };
        let r = &mut s.progress;
        while r.next < r.entries.len() {
            let (key, mode) = r.entries[r.next];
            let mut work = Work::default();
            let read = self.cc.read(&self.store, txn, key, intent_of(mode), &mut work);
            out.cpu_ns += self.cfg.costs.work_ns(work);
            if work.cc_ops > 0 && self.cfg.engine == Engine::Prototype {
                // The row's latch, shared locks included (another core may be at it too).
                out.cpu_ns += self.latches.take(now + out.cpu_ns, self.core, key, self.cfg.costs.latch_ns);
            }
            match read {
                Ok(Read::Done(tuple)) => {
                    r.values.push((tuple.value, tuple.version));
                    r.next += 1;
                }
                Ok(Read::Waiting) => return,
                Err(e) => {
                    debug_assert!(matches!(e, TxnError::Abort(_)), "{txn}: {e}");
                    let origin = s.origin;
                    self.abort_served(now, txn, out);
                    let reply = NodeMsg::LockReadReply { txn: txn.bits(), granted: false, values: Vec::new() };
                    return self.reply(now, origin, reply, out);
                }
            }
        }
        // Only the values not sent before (all of them, unless the prototype asks entry by entry).
        let reply = NodeMsg::LockReadReply { txn: txn.bits(), granted: true, values: r.values[r.replied..].to_vec() };
        r.replied = r.values.len();
        let origin = s.origin;
        self.reply(now, origin, reply, out);
    }

    /// Answers a lock-and-read request: by message, or to this node's own worker through a
    /// `Resume` timer on its core (if the attempt still waits).
    fn reply(&mut self, now: Nanos, to: Origin, msg: NodeMsg, out: &mut Outbox) {
        match to {
            Origin::Remote(node) => self.send_node(node, &msg, out),
            Origin::Local => {
                let worker = TxnId::from_bits(msg.txn()).worker();
                let waiting_here = self.workers.current(worker, LANE).is_some_and(|a| a.id.bits() == msg.txn());
                if waiting_here {
                    let from = self.cfg.id;
                    self.hand_off(now, worker, Handoff::Node { from, msg }, out);
                }
            }
        }
    }

    /// The prototype's end of transaction `txn` on tuple `key`: its new value, if written, is
    /// buffered, and once every tuple granted here is released the transaction commits here.
    /// A `Release` for a transaction no longer served (this node denied it a lock and dropped
    /// it already) changes nothing.
    fn release(&mut self, now: Nanos, txn: TxnId, key: TupleKey, write: Option<i64>, out: &mut Outbox) {
        let Some(s) = self.served.get_mut(txn) else { return };
        s.progress.released += 1;
        let all_released = s.progress.released >= s.progress.next;
        if let Some(value) = write {
            let written = self.cc.write(txn, key, value, &mut Work::default());
            debug_assert!(written.is_ok(), "{txn}: a written-back {key:?}: {written:?}");
        }
        if all_released {
            self.commit_served(now, txn, out);
        }
    }

    /// Commits served transaction `txn`: its writes go in, its locks go.
    pub(super) fn commit_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.end(txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn: txn.bits(), commit: true });
        }
        let mut work = Work::default();
        let committed = self.cc.commit(&mut self.store, txn, &mut work);
        out.cpu_ns += self.cfg.costs.work_ns(work);
        self.unlatch(now, &s.progress, out);
        match committed {
            Ok(grants) => self.continue_granted(now, grants, out),
            Err(e) => {
                debug_assert!(false, "node {}: commit of {txn}: {e}", self.cfg.id);
                self.reject("commit_refused");
            }
        }
    }

    /// Aborts served transaction `txn`: its writes are dropped, its locks and waiting request go.
    pub(super) fn abort_served(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(s) = self.served.end(txn) else { return };
        if s.voted && self.cfg.log {
            out.log.push(LogRecord::Resolved { txn: txn.bits(), commit: false });
        }
        let mut work = Work::default();
        let grants = self.cc.abort(&self.store, txn, &mut work);
        out.cpu_ns += self.cfg.costs.work_ns(work);
        self.unlatch(now, &s.progress, out);
        self.continue_granted(now, grants, out);
    }

    /// Under the prototype's engine, the latches of the unlocks of `reading`'s granted tuples.
    fn unlatch(&mut self, now: Nanos, reading: &LockReading, out: &mut Outbox) {
        let locked = reading.entries[..reading.next].iter().filter(|&&(_, mode)| mode != LockMode::None);
        for &(key, _) in locked {
            out.cpu_ns += self.latch_ns(now, out.cpu_ns, key);
        }
    }

    /// Lock-and-read requests that waited for a lock a commit or abort let go of go on, in
    /// the order the locks were handed over.
    fn continue_granted(&mut self, now: Nanos, grants: Vec<Grant>, out: &mut Outbox) {
        for Grant { txn, key, tuple } in grants {
            let Some(s) = self.served.get_mut(txn) else { continue };
            let r = &mut s.progress;
            debug_assert_eq!(r.entries.get(r.next).map(|e| e.0), Some(key), "{txn} got what it did not wait for");
            r.values.push((tuple.value, tuple.version));
            r.next += 1;
            // Later requests of this transaction may now wait again or finish.
            self.continue_lock_read(now, txn, out);
        }
    }

    /// Served transaction `txn`'s lease ran out: drop it if unprepared, else ask its
    /// coordinator (again after another lease).
    pub(super) fn on_lease_expired(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        match self.served.lease_expired(txn) {
            LeaseAction::Nothing => {}
            LeaseAction::Inquire { coordinator } => {
                // Only the coordinator may end a prepared transaction: ask it.
                self.stats.inquiries += 1;
                self.send_node(coordinator, &NodeMsg::Inquire { txn: txn.bits() }, out);
                out.timers.push((now + self.retry_interval_ns(), Timer::Lease { txn }));
            }
            LeaseAction::Expire => {
                // Its coordinator gave up on it (or crashed): it will vote no if asked.
                self.stats.leases_expired += 1;
                self.abort_served(now, txn, out);
            }
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
