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

use super::events::*;
use super::ids::*;
use super::participant::*;
use super::recovery::*;
use super::timer::Timer;
use super::worker::*;
use crate::node::config::NodeConfig;
use crate::node::wal::LogRecord;
use crate::programs::lock_manager::LockManager;
use crate::programs::p4db::P4dbEngine;
use crate::wire::lock::LockPacket;
use crate::wire::p4db::TxnPacket;
use pisadb_core::rng;
use pisadb_core::Nanos;
use pisadb_engine::cc::TwoPhaseLocking;
use pisadb_engine::id::TxnId;
use pisadb_engine::store::Store;
use pisadb_host::{Host, Route, Send};
use pisadb_layout::Layout;
use pisadb_wire::node::NodeMsg;
use pisadb_wire::Kind;
use pisadb_wire::{Frame, SWITCH_ID};
use pisadb_workload::Workload;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A database node.
pub struct Node {
    pub(super) cfg: NodeConfig,
    pub(super) workload: Box<dyn Workload>,
    pub(super) layout: Arc<Layout>,
    pub(super) lock_layout: Arc<Layout>,
    pub(super) engine: P4dbEngine,
    pub(super) lock_manager: LockManager,
    pub(super) store: Store,
    pub(super) cc: TwoPhaseLocking,
    pub(super) served: BTreeMap<TxnId, Served>,
    pub(super) workers: Vec<Worker>,
    pub(super) rng: ChaCha8Rng,
    pub(super) stats: NodeStats,
    pub(super) stopped: bool,
    /// Next number for rows keyed by a node sequence ([`pisadb_core::InsertRow::Sequence`]).
    pub(super) insert_seq: u64,
    /// Transactions this node coordinated that committed with remote writers (the answer to
    /// a participant's inquiry; anything else it does not run any more is presumed aborted).
    pub(super) decided: BTreeSet<TxnId>,
    /// After a restart: logged switch transactions still waiting for their answer.
    pub(super) recovering: BTreeMap<TxnId, PendingSwitchTxn>,
    /// The newest switch epoch this node knows of: answers from older ones are dropped.
    pub(super) switch_epoch: u16,
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
            cc: TwoPhaseLocking::new(cfg.cc.on_conflict()),
            cfg,
            workload,
            store,
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
        self.cc.lock_table().len()
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
                self.cc.held_by(*txn),
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
    pub(super) fn retry_interval_ns(&self) -> Nanos {
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
            Kind::P4dbTxn => TxnPacket::decode(payload).map(|p| TxnId::from_bits(p.txn_id)).ok(),
            Kind::Lock => LockPacket::decode(payload).map(|p| TxnId::from_bits(p.txn_id)).ok(),
            Kind::Forward => NodeMsg::decode(payload).ok().filter(NodeMsg::is_reply).map(|m| TxnId::from_bits(m.txn())),
            // A node is no controller: the datagram is rejected by whichever core takes it.
            Kind::Control => None,
        };
        match txn {
            Some(id) if !id.is_tagged() && started_on(id, self.cfg.id) => Route::Core(id.worker()),
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
                let ts = timestamp(slot(self.cfg.id, self.cfg.incarnation, worker), now);
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
                    self.send_node(coordinator, &NodeMsg::Inquire { txn: txn.bits() }, out);
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
                    let id = TxnId::from_bits(msg.txn());
                    if !started_on(id, self.cfg.id) || id.worker() >= self.cfg.workers {
                        return self.reject("reply_for_unknown_worker");
                    }
                    self.on_reply(now, id.worker(), frame.src, msg, out);
                }
                Ok(msg) => self.serve(now, Requester::Remote(frame.src), msg, out),
                Err(e) => self.reject(e.reason()),
            },
            Kind::Control => self.reject("control_message_to_a_node"),
        }
    }

    pub(super) fn reject(&mut self, reason: &'static str) {
        *self.stats.rejected.entry(reason).or_default() += 1;
    }

    pub(super) fn send_node(&mut self, dst: u16, msg: &NodeMsg, out: &mut Outbox) {
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + msg.encoded_len());
        Frame { kind: Kind::Forward, src: self.cfg.id, dst }.encode(&mut bytes);
        msg.encode(&mut bytes);
        out.sends.push(Send { dst, bytes });
    }

    pub(super) fn send_switch(&self, kind: Kind, encode: impl FnOnce(&mut Vec<u8>), out: &mut Outbox) {
        let mut bytes = Vec::new();
        Frame { kind, src: self.cfg.id, dst: SWITCH_ID }.encode(&mut bytes);
        encode(&mut bytes);
        out.sends.push(Send { dst: SWITCH_ID, bytes });
    }
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

pub use super::ids::{owner_node, txn_id, worker_of};
