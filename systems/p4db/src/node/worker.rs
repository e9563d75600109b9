//! The coordinator side: a worker's transaction from begin to commit or abort.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::participant::*;
use super::switch_txn::parts_independent;
use super::timer::Timer;
use crate::node::config::Mode;
use crate::node::wal::LogRecord;
use crate::node::CommittedTxn;
use crate::programs::p4db::multicast_group;
use crate::wire::lock::{LockOp, LockPacket};
use crate::wire::p4db::TxnPacket;
use pisadb_core::{InsertRow, Nanos, OpKind, TupleKey, Txn};
use pisadb_engine::cc::{Concurrency, Work};
use pisadb_engine::id::TxnId;
use pisadb_engine::store::Tuple;
use pisadb_wire::node::{LockMode, NodeMsg};
use pisadb_wire::Kind;
use pisadb_workload::{GeneratedTxn, TxnClass};
use rand::Rng;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
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
pub(super) struct Access {
    pub(super) key: TupleKey,
    pub(super) owner: u16,
    /// The lock to take on the owner node (`None` when the switch holds it).
    pub(super) mode: LockMode,
    pub(super) write: bool,
    pub(super) locked_in_switch: bool,
    pub(super) value: i64,
    pub(super) version: u64,
}

/// The current attempt of a worker.
#[derive(Debug)]
pub(super) struct Attempt {
    pub(super) id: TxnId,
    pub(super) ts: u64,
    pub(super) gen: GeneratedTxn,
    pub(super) started: Nanos,
    pub(super) attempts: u32,
    pub(super) phase: Phase,
    pub(super) accesses: Vec<Access>,
    /// Remote nodes sent a `LockRead`.
    pub(super) contacted: Vec<u16>,
    /// Replies still expected.
    pub(super) pending: usize,
    /// Nodes that replied in this phase: a duplicated reply must not count twice.
    pub(super) replied: Vec<u16>,
    pub(super) denied: bool,
    /// LM-Switch: the lock request, and which entries were granted.
    pub(super) switch_locks: Option<(LockPacket, u32)>,
    /// Remote nodes sent a `Prepare`.
    pub(super) writers: Vec<u16>,
    pub(super) outputs: Vec<i64>,
    /// P4DB: index of the operation behind each instruction.
    pub(super) instr_order: Vec<usize>,
    /// P4DB: the operations the switch executes, in program order (empty: none).
    pub(super) switch_ops: Vec<usize>,
    /// P4DB: the switch packet, kept to send again after a timeout.
    pub(super) switch_packet: Option<TxnPacket>,
    /// Rows inserted at commit.
    pub(super) inserted: Vec<(TupleKey, i64)>,
    /// When the current phase began, and the time of the phases so far.
    pub(super) phase_started: Nanos,
    pub(super) phases: PhaseTimes,
}

impl Attempt {
    /// Moves to `phase` at `now`, charging the time since the last move to the phase left.
    pub(super) fn enter(&mut self, now: Nanos, phase: Phase) {
        self.close_phase(now);
        self.phase = phase;
    }

    pub(super) fn close_phase(&mut self, now: Nanos) {
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
pub(super) struct Worker {
    pub(super) seq: u32,
    pub(super) current: Option<Attempt>,
    /// Replies to the worker's local lock requests that completed while it waited.
    pub(super) local_replies: Vec<NodeMsg>,
}

impl Node {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn begin(
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
        let id = slot(self.cfg.id, self.cfg.incarnation, worker).attempt(w.seq);
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
                    match self.engine.packet_for(&sub, &self.layout, id.bits()) {
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
            if let Some(pkt) = self.lock_manager.request_for(id.bits(), &hot_locks, &self.lock_layout) {
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
    pub(super) fn accesses(&self, txn: &Txn, on_switch: &[usize]) -> Vec<Access> {
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

    pub(super) fn lock_and_read(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let policy = self.cfg.cc.on_conflict();
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
                let msg = NodeMsg::LockRead { txn: id.bits(), ts, on_conflict: policy, entries };
                self.serve(now, Requester::Local(worker), msg, out);
            } else {
                self.send_node(owner, &NodeMsg::LockRead { txn: id.bits(), ts, on_conflict: policy, entries }, out);
            }
        }
    }

    pub(super) fn on_reply(&mut self, now: Nanos, worker: u16, from: u16, msg: NodeMsg, out: &mut Outbox) {
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
        if a.id.bits() != msg.txn() {
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

    pub(super) fn execute_and_commit(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
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
        if self.cc.is_active(id) {
            for &(key, value) in &local_writes {
                let written = self.cc.write(id, key, value, &mut Work::default());
                debug_assert!(written.is_ok(), "{id}: a local write of {key:?}: {written:?}");
            }
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
            self.send_node(n, &NodeMsg::Prepare { txn: id.bits(), writes: w }, out);
        }
    }

    /// Commits the worker's attempt on this node once every other participant is told or will
    /// be (by `Commit` or the switch's multicast): inserts the rows it creates, applies its
    /// local writes and releases its local locks, and reports it. `answer` is the switch's, for
    /// a hot or warm transaction.
    pub(super) fn commit_coordinator(&mut self, now: Nanos, worker: u16, answer: Option<&TxnPacket>, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let (id, inserts, outputs) = (a.id, std::mem::take(&mut a.gen.inserts), std::mem::take(&mut a.outputs));
        let inserted = self.insert_rows(id, &inserts, &outputs, out);
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        (a.gen.inserts, a.outputs, a.inserted) = (inserts, outputs, inserted.clone());
        let has_remote_writers = !a.writers.is_empty();
        self.note_decided(id, has_remote_writers);
        if self.cfg.log {
            let local_writes = self.cc.writes_of(id).to_vec();
            out.log.extend(self.commit_record(id, answer, local_writes, inserted, has_remote_writers));
        }
        self.commit_local(now, id, out);
        self.finish(now, worker, answer.map(|p| p.gid), out);
    }

    /// Remembers that `txn`, which this node coordinated, committed, if remote writers may ask
    /// about it: only with a log or peer timeouts can a participant come to ask, so the
    /// default simulation keeps no such set.
    pub(super) fn note_decided(&mut self, txn: TxnId, has_remote_writers: bool) {
        if has_remote_writers && (self.cfg.log || self.cfg.peer_timeout_ns > 0) {
            self.decided.insert(txn);
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

    pub(super) fn commit_local(&mut self, now: Nanos, id: TxnId, out: &mut Outbox) {
        if self.served.contains_key(&id) {
            self.commit_served(now, id, out);
        }
    }

    pub(super) fn abort(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        self.stats.aborts += 1;
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        a.enter(now, Phase::Aborted);
        let (id, contacted) = (a.id, a.contacted.clone());
        for n in contacted {
            self.send_node(n, &NodeMsg::Abort { txn: id.bits() }, out);
        }
        self.abort_served(now, id, out);
        self.release_switch_locks(worker, out);
        let backoff = self.rng.random_range(0..=self.cfg.backoff_max_ns);
        out.timers.push((now + backoff, Timer::Retry { worker }));
    }

    pub(super) fn finish(&mut self, now: Nanos, worker: u16, gid: Option<u64>, out: &mut Outbox) {
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
}

/// What attempt `a` did, for checkers: the reads and writes on the nodes with the versions they
/// saw and replaced (none for a transaction wholly on the switch), and the switch's part.
pub(super) fn record_of(a: &Attempt, gid: Option<u64>) -> Box<Record> {
    let on_switch = a.phase == Phase::SwitchTxn;
    let updates = a.accesses.iter().filter(|x| x.write).map(|x| (x.key, x.version));
    let history = (!on_switch).then(|| CommittedTxn {
        id: a.id.bits(),
        reads: a.accesses.iter().map(|x| (x.key, x.version)).collect(),
        // A created row overwrites no version: it is the first.
        writes: updates.chain(a.inserted.iter().map(|&(key, _)| (key, 0))).collect(),
    });
    Box::new(Record {
        id: a.id.bits(),
        gen: a.gen.clone(),
        outputs: a.outputs.clone(),
        gid,
        switch_ops: a.switch_ops.clone(),
        inserted: a.inserted.clone(),
        history,
    })
}
