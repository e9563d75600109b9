//! A worker's transaction, from its draw to its commit or abort (the coordinator side).
//!
//! A worker runs one transaction at a time, closed loop, in the one lane the engine's
//! [`pisadb_engine::worker::Workers`] gives it. It draws a transaction from the workload and
//! classifies it with the hot-set index (the layout every node holds, paper §6.1):
//!
//! - **Hot, P4DB mode**: one switch packet, no locks, no 2PC ([`super::switch_txn`]).
//! - **Warm, P4DB mode** (hot and cold tuples together, §6.2): the cold part runs as below up
//!   to the point where it can no longer abort; then the switch runs the hot part and its
//!   answer commits everyone ([`super::switch_txn`]).
//! - **Otherwise** (cold, or any transaction in No-Switch and LM-Switch mode): 2PL + 2PC.
//!   1. *LM-Switch only*: the locks of hot tuples are requested from the switch's lock
//!      manager in one packet ([`super::lm_switch`]); a partial grant aborts the attempt.
//!   2. *Lock and read*: one `LockRead` per owner node (the worker's own node is served by a
//!      direct call, not a message, and answers through a `Resume` timer on the worker's
//!      core); shared locks for tuples only read, exclusive for tuples written; LM-Switch's
//!      hot tuples are only read, their lock is in the switch. The answers are one 2PC
//!      [`Round`]: a duplicated answer does not count, one denial aborts.
//!   3. *Execute*: the operations run in order on the values read ([`pisadb_core::Op::apply`]).
//!   4. *Commit* ([`super::commit`]): a participant that only read is released at once (all
//!      locks are held by now, so this is still two-phase locking); a participant with writes
//!      gets `Prepare` and votes in a second round, and on all-yes gets `Commit`. With no
//!      remote writer there is no voting round.
//!
//! ## Aborts
//!
//! A denied lock (NO_WAIT: any conflict; WAIT_DIE: a younger requester), a no vote or a peer
//! that does not answer in time aborts the attempt: every contacted node gets `Abort` (which
//! also withdraws waiting requests), switch locks are released, and the **same transaction is
//! retried** ([`Job::retry`]: its first timestamp, so it eventually becomes the oldest and
//! cannot starve) after a seeded random backoff. Late answers and timers of an aborted attempt
//! find it in [`Phase::Aborted`] (or gone) and are ignored.
//!
//! ## The prototype's engine
//!
//! Under [`Engine::Prototype`] the same attempt runs as the P4DB prototype ran it
//! (`src/db/transaction.hpp`, `undolog.hpp` of DataManagementLab/p4db):
//!
//! - Step 2 takes one tuple at a time, in first-access order: its own node's directly, a
//!   remote one with a one-entry `LockRead` and a wait for its answer ([`Node::lock_next`]).
//! - Commit: no voting round. Local writes go in and local locks go at once; each remote tuple
//!   gets one `Release` (its new value if written), and the transaction commits when every
//!   `Released` is back ([`Phase::Releasing`]). A warm transaction sends its hot part to the
//!   switch before that, and waits for the answer.
//! - Abort: the tuples granted so far are released the same way ([`Phase::RollingBack`]),
//!   then the transaction is counted as skipped and the worker begins its next one: no
//!   backoff, no retry.
//! - Beginning a transaction costs no CPU (the prototype generated them all before the clock
//!   started) and a worker runs at most `txns_per_worker` of them. The draws come from the
//!   node's seeded stream as workers reach them, which in a deterministic simulation differs
//!   from drawing them all first only in which worker gets which transaction.

use super::events::*;
use super::ids::*;
use super::switch_txn::SwitchPart;
use super::timer::Timer;
use crate::node::config::{Engine, Mode};
use crate::node::CommittedTxn;
use crate::programs::p4db::multicast_group;
use crate::wire::lock::LockPacket;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{Nanos, OpKind, TupleKey, Txn};
use pisadb_engine::cc::{Concurrency, Work};
use pisadb_engine::id::TxnId;
use pisadb_engine::twopc::{Origin, Round, Tally};
use pisadb_engine::worker::Job;
use pisadb_wire::node::{LockMode, NodeMsg};
use pisadb_workload::GeneratedTxn;
use std::collections::BTreeMap;

use super::machine::Node;

/// Where an attempt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// A hot transaction waits for the switch.
    SwitchTxn,
    /// LM-Switch: waiting for the switch's lock manager.
    SwitchLocks,
    /// Waiting for the lock-and-read round.
    LockRead,
    /// Waiting for the votes of the remote writers.
    Prepare,
    /// A warm transaction's cold part is ready; its switch sub-transaction is out.
    WarmSwitch,
    /// Aborted, waiting out the backoff before the retry: late replies and timers of this
    /// attempt are ignored (acting on them would abort twice, or commit what was aborted).
    Aborted,
    /// [`Engine::Prototype`]: committing; waiting for every remote tuple's `Released`.
    Releasing,
    /// [`Engine::Prototype`]: aborted; waiting for the `Released` of every remote tuple granted
    /// so far before the worker skips to its next transaction.
    RollingBack,
}

/// One distinct tuple of a transaction on the nodes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Access {
    /// The tuple.
    pub(super) key: TupleKey,
    /// The node that owns it.
    pub(super) owner: u16,
    /// The lock to take on the owner node (`None` when the switch holds it).
    pub(super) mode: LockMode,
    /// Whether the transaction writes it.
    pub(super) write: bool,
    /// LM-Switch: whether its lock is in the switch's lock manager.
    pub(super) locked_in_switch: bool,
    /// The value read.
    pub(super) value: i64,
    /// The version read (the id of its last writer).
    pub(super) version: u64,
}

/// The attempt a worker runs.
#[derive(Debug)]
pub(super) struct Attempt {
    /// Its id.
    pub(super) id: TxnId,
    /// The transaction, kept across attempts.
    pub(super) job: Job<GeneratedTxn>,
    /// Where it is.
    pub(super) phase: Phase,
    /// Its distinct tuples on the nodes, in first-access order.
    pub(super) accesses: Vec<Access>,
    /// Remote nodes sent a `LockRead`.
    pub(super) contacted: Vec<u16>,
    /// The round of answers it waits for (lock-and-read replies, then votes).
    pub(super) round: Round,
    /// LM-Switch: the lock request, and which entries were granted.
    pub(super) switch_locks: Option<(LockPacket, u32)>,
    /// Remote nodes sent a `Prepare`.
    pub(super) writers: Vec<u16>,
    /// Each operation's output.
    pub(super) outputs: Vec<i64>,
    /// P4DB: the part the switch executes (hot and warm transactions).
    pub(super) switch: Option<SwitchPart>,
    /// Rows inserted at commit.
    pub(super) inserted: Vec<(TupleKey, i64)>,
    /// [`Engine::Prototype`]: accesses locked and read so far (the next one is in flight).
    pub(super) next_access: usize,
    /// [`Engine::Prototype`]: the `Release` of each remote tuple, sent once it commits or aborts:
    /// (owner, tuple, value written back).
    pub(super) releases: Vec<(u16, TupleKey, Option<i64>)>,
    /// [`Engine::Prototype`]: `Released` answers still missing.
    pub(super) releases_pending: usize,
    /// [`Engine::Prototype`]: a warm transaction's switch answer, kept through its releases.
    pub(super) answer: Option<TxnPacket>,
    /// When the current phase began.
    pub(super) phase_started: Nanos,
    /// The time of the phases so far.
    pub(super) phases: PhaseTimes,
}

impl Attempt {
    /// Attempt `id` of `job`, starting at `now` (the time since the job's first attempt is
    /// retry time).
    fn new(id: TxnId, job: Job<GeneratedTxn>, now: Nanos) -> Self {
        let phases = PhaseTimes { retry_ns: now - job.first_start_ns, ..PhaseTimes::default() };
        Attempt {
            id,
            job,
            phase: Phase::LockRead,
            accesses: Vec::new(),
            contacted: Vec::new(),
            round: Round::new(0),
            switch_locks: None,
            writers: Vec::new(),
            outputs: Vec::new(),
            switch: None,
            inserted: Vec::new(),
            next_access: 0,
            releases: Vec::new(),
            releases_pending: 0,
            answer: None,
            phase_started: now,
            phases,
        }
    }

    /// Moves to `phase` at `now`, charging the time since the last move to the phase left.
    pub(super) fn enter(&mut self, now: Nanos, phase: Phase) {
        self.close_phase(now);
        self.phase = phase;
    }

    /// Charges the time since the last move to the current phase.
    pub(super) fn close_phase(&mut self, now: Nanos) {
        let spent = now.saturating_sub(self.phase_started);
        self.phase_started = now;
        let t = &mut self.phases;
        match self.phase {
            Phase::LockRead => t.lock_read_ns += spent,
            Phase::Prepare | Phase::Releasing => t.commit_ns += spent,
            Phase::SwitchTxn | Phase::SwitchLocks | Phase::WarmSwitch => t.switch_ns += spent,
            // The next attempt counts it as retry time; a skipped transaction reports nothing.
            Phase::Aborted | Phase::RollingBack => {}
        }
    }
}

impl Node {
    /// The worker's attempt.
    pub(super) fn attempt_mut(&mut self, worker: u16) -> &mut Attempt {
        self.workers.current_mut(worker, LANE).expect("the worker runs an attempt")
    }

    /// The worker draws its next transaction and starts it.
    pub(super) fn begin_next(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        if self.cfg.engine == Engine::Prototype {
            // Pre-generated before the clock started: no CPU now, and only so many.
            let left = &mut self.pregenerated_left[usize::from(worker)];
            if *left == 0 {
                self.stats.workers_done += 1;
                return;
            }
            *left -= 1;
        } else {
            out.cpu_ns += self.cfg.costs.txn_begin_ns;
        }
        self.stats.begun += 1;
        let gen = self.workload.next_txn(self.cfg.id);
        let ts = timestamp(self.workers.slot(worker, LANE), now);
        self.begin(now, worker, Job::new(gen, ts, now), out);
    }

    /// The worker's aborted transaction starts its next attempt.
    pub(super) fn retry(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        if let Some(a) = self.workers.take(worker, LANE) {
            self.begin(now, worker, a.job.retry(), out);
        }
    }

    /// Starts an attempt of `job`: in the switch, or with the switch's locks, or on the nodes.
    fn begin(&mut self, now: Nanos, worker: u16, job: Job<GeneratedTxn>, out: &mut Outbox) {
        let id = self.workers.next_id(worker, LANE);
        let mut attempt = Attempt::new(id, job, now);
        if self.cfg.mode == Mode::P4db {
            match self.switch_part(&attempt.job.txn.txn, id) {
                Err(reason) => {
                    // The hot tuples live only on the switch: the nodes cannot run it instead.
                    self.reject(reason);
                    out.timers.push((now, Timer::Begin { worker }));
                    return;
                }
                Ok(Some(part)) => {
                    let hot = part.ops.len() == attempt.job.txn.txn.ops.len();
                    attempt.switch = Some(part);
                    if hot {
                        attempt.enter(now, Phase::SwitchTxn);
                        self.workers.run(worker, LANE, attempt);
                        return self.send_switch_txn(now, worker, 0, out);
                    }
                }
                Ok(None) => {}
            }
        }
        let on_switch = attempt.switch.as_ref().map_or(&[][..], |p| &p.ops[..]);
        attempt.accesses = self.accesses(&attempt.job.txn.txn, on_switch);
        let locking_in_switch = self.request_switch_locks(now, &mut attempt, out);
        self.workers.run(worker, LANE, attempt);
        if !locking_in_switch {
            self.lock_and_read(now, worker, out);
        }
    }

    /// [`Engine::Prototype`]: locks and reads the attempt's next tuple — on this node directly,
    /// on another with a one-entry `LockRead` and a wait for its answer — or, with every tuple
    /// read, executes and commits.
    fn lock_next(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let (me, policy) = (self.cfg.id, self.cfg.cc.on_conflict());
        let a = self.workers.current_mut(worker, LANE).expect("the worker runs an attempt");
        a.enter(now, Phase::LockRead);
        let Some(&acc) = a.accesses.get(a.next_access) else {
            return self.execute_and_commit(now, worker, out);
        };
        a.round = Round::new(1);
        if acc.owner != me && !a.contacted.contains(&acc.owner) {
            a.contacted.push(acc.owner);
        }
        let msg = NodeMsg::LockRead {
            txn: a.id.bits(),
            ts: a.job.ts,
            on_conflict: policy,
            entries: vec![(acc.key, acc.mode)],
        };
        if acc.owner == me {
            self.serve(now, Origin::Local, msg, out);
        } else {
            self.send_node(acc.owner, &msg, out);
        }
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
                let locked_in_switch = self.cfg.mode == Mode::LmSwitch && self.switch.lock_layout.contains(op.key);
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

    /// Sends one `LockRead` per owner node (serving its own node's directly) and waits for the
    /// round of answers.
    pub(super) fn lock_and_read(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        if self.prototype() {
            return self.lock_next(now, worker, out);
        }
        let (me, policy) = (self.cfg.id, self.cfg.cc.on_conflict());
        let a = self.workers.current_mut(worker, LANE).expect("the worker runs an attempt");
        a.enter(now, Phase::LockRead);
        let mut by_owner: BTreeMap<u16, Vec<(TupleKey, LockMode)>> = BTreeMap::new();
        for acc in &a.accesses {
            by_owner.entry(acc.owner).or_default().push((acc.key, acc.mode));
        }
        a.round = Round::new(by_owner.len());
        a.contacted = by_owner.keys().copied().filter(|&n| n != me).collect();
        if self.cfg.peer_timeout_ns > 0 && !a.contacted.is_empty() {
            // One deadline for the attempt's remote work: locks, reads and votes.
            out.timers.push((now + self.cfg.peer_timeout_ns, Timer::PeerTimeout { worker, txn: a.id }));
        }
        let (txn, ts) = (a.id.bits(), a.job.ts);
        for (owner, entries) in by_owner {
            let msg = NodeMsg::LockRead { txn, ts, on_conflict: policy, entries };
            if owner == me {
                self.serve(now, Origin::Local, msg, out);
            } else {
                self.send_node(owner, &msg, out);
            }
        }
    }

    /// An answer from node `from` to the worker's attempt: a lock-and-read reply or a vote.
    pub(super) fn on_reply(&mut self, now: Nanos, worker: u16, from: u16, msg: NodeMsg, out: &mut Outbox) {
        let Some(a) = self.workers.current_mut(worker, LANE) else { return };
        if a.id.bits() != msg.txn() {
            return; // a reply to an earlier, aborted attempt
        }
        if let NodeMsg::Released { .. } = msg {
            return self.on_released(now, worker, out);
        }
        let prototype = self.cfg.engine == Engine::Prototype;
        if matches!(a.phase, Phase::LockRead | Phase::Prepare) && a.round.sender(from).is_err() {
            return self.reject("duplicate_reply");
        }
        let tally = match (a.phase, msg) {
            (Phase::LockRead, NodeMsg::LockReadReply { granted, values, .. }) => {
                if granted && prototype {
                    // The answer for the one tuple asked for.
                    if let (Some(x), Some(&(value, version))) = (a.accesses.get_mut(a.next_access), values.first()) {
                        (x.value, x.version) = (value, version);
                    }
                } else if granted {
                    // Values come in the order of the entries sent to that owner, which is the
                    // order of its accesses.
                    let mine = a.accesses.iter_mut().filter(|x| x.owner == from);
                    for (x, &(value, version)) in mine.zip(&values) {
                        (x.value, x.version) = (value, version);
                    }
                }
                a.round.tally(granted)
            }
            (Phase::Prepare, NodeMsg::Vote { yes, .. }) => a.round.tally(yes),
            (Phase::Aborted, _) => return, // a late reply to the aborted attempt
            _ => return self.reject("unexpected_reply"),
        };
        match (tally, a.phase) {
            (Tally::Waiting, _) => {}
            (Tally::SomeNo, _) => self.abort(now, worker, out),
            (Tally::AllYes, Phase::LockRead) if prototype => {
                a.next_access += 1;
                self.lock_next(now, worker, out)
            }
            (Tally::AllYes, Phase::LockRead) => self.execute_and_commit(now, worker, out),
            (Tally::AllYes, _) if a.switch.is_some() => {
                // Warm: nothing can abort any more; the switch's multicast commits.
                let group = multicast_group(std::iter::once(self.cfg.id).chain(a.writers.iter().copied()));
                a.enter(now, Phase::WarmSwitch);
                self.send_switch_txn(now, worker, group.unwrap_or(0), out);
            }
            (Tally::AllYes, _) => {
                let (id, writers) = (a.id, a.writers.clone());
                self.send_commit(id, &writers, out);
                self.commit_coordinator(now, worker, None, out);
            }
        }
    }

    /// Runs the operations on the values read and starts the commit: readers are released,
    /// remote writers prepared, local writes buffered.
    fn execute_and_commit(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let me = self.cfg.id;
        let a = self.workers.current_mut(worker, LANE).expect("the worker runs an attempt");
        // Execute in program order on the values read.
        // A warm transaction's switch operations are skipped: their outputs come from the switch.
        let mut values: BTreeMap<TupleKey, i64> = a.accesses.iter().map(|x| (x.key, x.value)).collect();
        let mut acc = 0;
        a.outputs.clear();
        for op in &a.job.txn.txn.ops {
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
        if self.cfg.engine == Engine::Prototype {
            return self.commit_prototype(now, worker, &values, out);
        }
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
        let a = self.attempt_mut(worker);
        if a.writers.is_empty() {
            if a.switch.is_none() {
                return self.commit_coordinator(now, worker, None, out);
            }
            // Warm with no remote writer: no voting round; the switch's reply commits.
            a.enter(now, Phase::WarmSwitch);
            return self.send_switch_txn(now, worker, 0, out);
        }
        a.enter(now, Phase::Prepare);
        a.round = Round::new(a.writers.len());
        let writers = a.writers.clone();
        for n in writers {
            let w = writes.remove(&n).unwrap_or_default();
            self.send_node(n, &NodeMsg::Prepare { txn: id.bits(), writes: w }, out);
        }
    }

    /// Another node has not answered attempt `txn` in time: abort it, if it still waits.
    pub(super) fn on_peer_timeout(&mut self, now: Nanos, worker: u16, txn: TxnId, out: &mut Outbox) {
        let waiting = self
            .workers
            .current(worker, LANE)
            .is_some_and(|a| a.id == txn && matches!(a.phase, Phase::LockRead | Phase::Prepare));
        if waiting {
            self.stats.peer_timeouts += 1;
            self.abort(now, worker, out);
        }
    }

    /// [`Engine::Prototype`]: the commit of the worker's executed attempt, with `values` its
    /// tuples' new values: local writes go in, then (a warm transaction) the switch runs the hot
    /// part, then every remote tuple is released.
    fn commit_prototype(&mut self, now: Nanos, worker: u16, values: &BTreeMap<TupleKey, i64>, out: &mut Outbox) {
        let me = self.cfg.id;
        let a = self.workers.current_mut(worker, LANE).expect("the worker runs an attempt");
        let id = a.id;
        let mut local_writes = Vec::new();
        for x in &a.accesses {
            let write = x.write.then(|| values[&x.key]);
            match (x.owner == me, write) {
                (true, Some(value)) => local_writes.push((x.key, value)),
                (true, None) => {}
                (false, _) => a.releases.push((x.owner, x.key, write)),
            }
        }
        if self.cc.is_active(id) {
            for (key, value) in local_writes {
                let written = self.cc.write(id, key, value, &mut Work::default());
                debug_assert!(written.is_ok(), "{id}: a local write of {key:?}: {written:?}");
            }
        }
        let a = self.attempt_mut(worker);
        if a.switch.is_some() {
            // Warm: the switch's answer comes first (on_switch_txn_reply releases after it).
            a.enter(now, Phase::WarmSwitch);
            return self.send_switch_txn(now, worker, 0, out);
        }
        self.release_remote(now, worker, true, out);
    }

    /// [`Engine::Prototype`]: ends the worker's attempt on every node — committing or rolling
    /// back. This node's part ends at once; each remote tuple gets its `Release`, and the
    /// attempt ends when every `Released` is back.
    pub(super) fn release_remote(&mut self, now: Nanos, worker: u16, commit: bool, out: &mut Outbox) {
        let a = self.attempt_mut(worker);
        let (id, releases) = (a.id, std::mem::take(&mut a.releases));
        a.releases_pending = releases.len();
        a.enter(now, if commit { Phase::Releasing } else { Phase::RollingBack });
        for (owner, key, write) in releases {
            self.send_node(owner, &NodeMsg::Release { txn: id.bits(), key, write }, out);
        }
        if commit {
            if self.served.contains(id) {
                self.commit_served(now, id, out);
            }
        } else {
            self.abort_served(now, id, out);
        }
        if self.attempt_mut(worker).releases_pending == 0 {
            self.released(now, worker, out);
        }
    }

    /// [`Engine::Prototype`]: one `Released` for the worker's attempt.
    fn on_released(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let a = self.attempt_mut(worker);
        if !matches!(a.phase, Phase::Releasing | Phase::RollingBack) || a.releases_pending == 0 {
            return self.reject("unexpected_reply");
        }
        a.releases_pending -= 1;
        if a.releases_pending == 0 {
            self.released(now, worker, out);
        }
    }

    /// [`Engine::Prototype`]: every remote tuple of the worker's attempt is released: it
    /// commits, or it is skipped.
    fn released(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        let a = self.attempt_mut(worker);
        if a.phase == Phase::Releasing {
            let answer = a.answer.take();
            return self.commit_coordinator(now, worker, answer.as_ref(), out);
        }
        // Rolled back: counted, never retried; the worker goes on with its next transaction.
        self.stats.skipped += 1;
        self.workers.take(worker, LANE);
        out.timers.push((now, Timer::Begin { worker }));
    }

    /// Aborts the worker's attempt everywhere and schedules the retry (under
    /// [`Engine::Prototype`]: rolls it back and skips it).
    pub(super) fn abort(&mut self, now: Nanos, worker: u16, out: &mut Outbox) {
        self.stats.aborts += 1;
        if self.cfg.engine == Engine::Prototype {
            let me = self.cfg.id;
            let a = self.attempt_mut(worker);
            // The tuples granted so far (the one in flight was denied, or never asked for).
            let granted = a.accesses.iter().take(a.next_access).filter(|x| x.owner != me);
            a.releases = granted.map(|x| (x.owner, x.key, None)).collect();
            self.release_switch_locks(worker, out);
            return self.release_remote(now, worker, false, out);
        }
        let a = self.attempt_mut(worker);
        a.enter(now, Phase::Aborted);
        let (id, contacted) = (a.id, a.contacted.clone());
        for n in contacted {
            self.send_node(n, &NodeMsg::Abort { txn: id.bits() }, out);
        }
        self.abort_served(now, id, out);
        self.release_switch_locks(worker, out);
        out.timers.push((now + self.backoff.draw_ns(), Timer::Retry { worker }));
    }

    /// Reports the worker's committed attempt and lets the worker draw its next transaction.
    pub(super) fn finish(&mut self, now: Nanos, worker: u16, gid: Option<u64>, out: &mut Outbox) {
        self.release_switch_locks(worker, out);
        let mut a = self.workers.take(worker, LANE).expect("the worker runs an attempt");
        a.close_phase(now);
        self.stats.committed += 1;
        let on_switch = a.phase == Phase::SwitchTxn;
        let record = self.cfg.record_history.then(|| record_of(&a, gid));
        out.events.push(NodeEvent::Finished(Finished {
            worker,
            kind: a.job.txn.kind,
            on_switch,
            hot: a.job.txn.class == pisadb_workload::TxnClass::Hot,
            started: a.job.first_start_ns,
            attempts: a.job.attempts,
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
        gen: a.job.txn.clone(),
        outputs: a.outputs.clone(),
        gid,
        switch_ops: a.switch.as_ref().map_or_else(Vec::new, |p| p.ops.clone()),
        inserted: a.inserted.clone(),
        history,
    })
}
