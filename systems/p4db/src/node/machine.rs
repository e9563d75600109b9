//! The node itself: what it is made of, and where each input goes.
//!
//! A P4DB node is a composition. The shared host machinery comes from `pisadb-engine` and
//! names no system:
//!
//! | piece | engine type | what it does here |
//! |---|---|---|
//! | storage | [`Store`] | the node's partition of every table |
//! | concurrency control | [`TwoPhaseLocking`] | NO_WAIT or WAIT_DIE over the lock table |
//! | participant | [`Participant`] | transactions served for coordinators: votes, leases |
//! | coordinator | [`Decisions`], `Round` | rounds of replies and votes; answers to inquiries |
//! | workers | [`Workers`], [`Backoff`] | one lane per worker, attempt ids, seeded retry waits |
//!
//! P4DB's own parts are in the files beside this one, each a few screens long:
//!
//! - `worker.rs`: a worker's transaction from begin to commit or abort (2PL + 2PC on
//!   the nodes, and the hand-offs to the switch);
//! - `participant.rs`: lock-and-read requests, votes, commits and aborts served here;
//! - `switch_txn.rs`: hot and warm transactions in P4DB's switch;
//! - `lm_switch.rs`: LM-Switch's lock requests to the switch's lock manager;
//! - `recovery.rs`: restart from the write-ahead log, in-doubt transactions, switch
//!   transactions logged before a crash;
//! - `fencing.rs`: answers from a crashed switch's epoch are dropped.
//!
//! ## Inputs and outputs
//!
//! [`Node::handle_datagram`] and [`Node::handle_timer`] take the current time and append to an
//! [`Outbox`]: datagrams to send, timers to set, log records, events, and the CPU time the
//! handler used. The driver decides which core runs a handler ([`Node::route`]): a worker's
//! own events run on its core; requests from other nodes run on whichever core is free first.
//! Under [`Engine::Prototype`] the node has one more core, its message handler, which
//! receives every datagram (as the prototype's single receive thread does): requests are
//! served there, and an answer to a worker is handed to the worker's core (`Handoff`,
//! through a `Resume` timer), which goes on with the transaction.
//! Everything a node does is a function of its inputs and its seed: its only random draws are
//! the retry backoffs, from one generator in abort order.

use super::events::*;
use super::ids::*;
use super::latch::Latches;
use super::participant::LockReading;
use super::recovery::PendingSwitchTxn;
use super::timer::Timer;
use super::worker::Attempt;
use crate::node::config::{Engine, NodeConfig};
use crate::node::wal::LogRecord;
use crate::programs::lock_manager::LockManager;
use crate::programs::p4db::P4dbEngine;
use crate::wire::lock::LockPacket;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{rng, Nanos, TupleKey};
use pisadb_engine::cc::TwoPhaseLocking;
use pisadb_engine::id::TxnId;
use pisadb_engine::store::Store;
use pisadb_engine::twopc::{Decisions, Origin, Participant};
use pisadb_engine::worker::{Backoff, Workers};
use pisadb_host::{Host, Route, Send};
use pisadb_p4db_layout::Layout;
use pisadb_wire::node::NodeMsg;
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use pisadb_workload::Workload;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Old paths of the id helpers, kept for the runtime's load generator.
pub use super::ids::{owner_node, txn_id, worker_of};

/// A database node (see the module documentation).
pub struct Node {
    /// How it runs.
    pub(super) cfg: NodeConfig,
    /// Where its transactions come from.
    pub(super) workload: Box<dyn Workload>,
    /// What the switch offers: hot-tuple placements and packet builders.
    pub(super) switch: SwitchView,
    /// Its partition of every table.
    pub(super) store: Store,
    /// Two-phase locking over its tuples.
    pub(super) cc: TwoPhaseLocking,
    /// Transactions it serves as a participant (its own workers' local parts included).
    pub(super) served: Participant<LockReading>,
    /// Its workers (one lane each) and the attempts they run.
    pub(super) workers: Workers<Attempt>,
    /// Per worker: answers waiting for the worker's core — to its local lock-and-read requests,
    /// and under [`Engine::Prototype`] every answer the handler core received for it.
    pub(super) local_replies: Vec<Vec<Handoff>>,
    /// [`Engine::Prototype`]: per worker, pre-generated transactions it has not begun yet.
    pub(super) pregenerated_left: Vec<u64>,
    /// [`Engine::Prototype`]: the rows' latches, to tell when two cores meet at one.
    pub(super) latches: Latches,
    /// The core running the current handler (the prototype's engine charges latches by core).
    pub(super) core: u16,
    /// The wait before an aborted transaction is retried.
    pub(super) backoff: Backoff,
    /// Transactions it coordinated that committed with remote writers (for inquiries).
    pub(super) decisions: Decisions,
    /// Counters.
    pub(super) stats: NodeStats,
    /// Whether it starts no new transactions.
    pub(super) stopped: bool,
    /// Next number for rows keyed by a node sequence ([`pisadb_core::InsertRow::Sequence`]).
    pub(super) insert_seq: u64,
    /// After a restart: logged switch transactions still waiting for their answer.
    pub(super) recovering: BTreeMap<TxnId, PendingSwitchTxn>,
    /// The newest switch epoch this node knows of: answers from older ones are dropped.
    pub(super) switch_epoch: u16,
}

/// An answer for a worker, waiting for the worker's core.
#[derive(Clone, Debug)]
pub(super) enum Handoff {
    /// A node's answer (this node's own, for a local request).
    Node {
        /// The node that answered.
        from: u16,
        /// The answer.
        msg: NodeMsg,
    },
    /// The switch's answer to a switch transaction ([`Engine::Prototype`]).
    Switch(TxnPacket),
    /// The lock manager's answer (LM-Switch, [`Engine::Prototype`]).
    Lock(LockPacket),
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
        let workers = Workers::new(cfg.id, cfg.incarnation, cfg.workers, LANES).map_err(|e| e.to_string())?;
        Ok(Node {
            store: Store::load(cfg.id, workload.as_ref()),
            cc: TwoPhaseLocking::new(cfg.cc.on_conflict()),
            served: Participant::new(),
            workers,
            local_replies: vec![Vec::new(); usize::from(cfg.workers)],
            pregenerated_left: vec![
                if cfg.txns_per_worker == 0 { u64::MAX } else { cfg.txns_per_worker };
                usize::from(cfg.workers)
            ],
            latches: Latches::default(),
            core: 0,
            backoff: Backoff::new(rng::derive(seed, &format!("node/{}", cfg.id)), cfg.backoff_max_ns),
            decisions: Decisions::new(),
            stats: NodeStats::default(),
            stopped: false,
            insert_seq: 0,
            recovering: BTreeMap::new(),
            switch_epoch: 0,
            switch,
            workload,
            cfg,
        })
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    /// Whether the node runs the P4DB prototype's engine.
    pub(super) fn prototype(&self) -> bool {
        self.cfg.engine == Engine::Prototype
    }

    /// The core of the prototype's message handler (the one after the workers').
    fn handler_core(&self) -> u16 {
        self.cfg.workers
    }

    /// Cores the node has: one per worker, and the prototype's message handler.
    pub fn cores(&self) -> u16 {
        self.cfg.workers + u16::from(self.prototype())
    }

    /// Contended row latches the prototype's engine charged so far.
    pub fn contended_latches(&self) -> u64 {
        self.latches.contended
    }

    /// Under [`Engine::Prototype`], the extra CPU of taking `key`'s latch `cpu_so_far` into a
    /// handler that began at `now` (see `latch.rs`); nothing under PisaDB's engine.
    pub(super) fn latch_ns(&mut self, now: Nanos, cpu_so_far: Nanos, key: TupleKey) -> Nanos {
        if !self.prototype() {
            return 0;
        }
        self.latches.take(now + cpu_so_far, self.core, key, self.cfg.costs.latch_ns)
    }

    /// Gives `handoff` to `worker`'s core, which takes it up right after this handler.
    pub(super) fn hand_off(&mut self, now: Nanos, worker: u16, handoff: Handoff, out: &mut Outbox) {
        self.local_replies[usize::from(worker)].push(handoff);
        out.timers.push((now, Timer::Resume { worker }));
    }

    /// The worker whose running attempt is `id`, if it is one of this node's.
    fn own_worker(&self, id: TxnId) -> Option<u16> {
        (!id.is_tagged() && started_on(id, self.cfg.id) && id.worker() < self.cfg.workers).then(|| id.worker())
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
        self.workers.all_idle() && self.served.is_empty() && self.recovering.is_empty()
    }

    /// What is in flight, one line each (for a driver to say why a node does not go idle).
    pub fn in_flight(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (worker, _, a) in self.workers.running() {
            lines.push(format!(
                "worker {worker}: attempt {:#x} ({}, attempt {}) in {:?}, waiting for {} replies from {:?}, writers {:?}",
                a.id,
                a.job.txn.kind,
                a.job.attempts,
                a.phase,
                a.round.pending(),
                a.contacted,
                a.writers
            ));
        }
        for (txn, s) in self.served.iter() {
            lines.push(format!(
                "serving {txn:#x} for {:?}: {}/{} locks, {} held, voted {}",
                s.origin,
                s.progress.next,
                s.progress.entries.len(),
                self.cc.held_by(txn),
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
        for txn in self.served.in_doubt() {
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

    /// Which core runs the handler for `bytes`: the worker's whose attempt it answers, else any.
    pub fn route(&self, bytes: &[u8]) -> Route {
        if self.prototype() {
            return Route::Core(self.handler_core());
        }
        let Ok((frame, payload)) = Frame::decode(bytes) else { return Route::AnyCore };
        let txn = match frame.kind {
            crate::wire::TXN_KIND => TxnPacket::decode(payload).map(|p| TxnId::from_bits(p.txn_id)).ok(),
            crate::wire::LOCK_KIND => LockPacket::decode(payload).map(|p| TxnId::from_bits(p.txn_id)).ok(),
            Kind::FORWARD => NodeMsg::decode(payload).ok().filter(NodeMsg::is_reply).map(|m| TxnId::from_bits(m.txn())),
            // A node is no controller: the datagram is rejected by whichever core takes it.
            _ => None,
        };
        match txn {
            Some(id) if !id.is_tagged() && started_on(id, self.cfg.id) => Route::Core(id.worker()),
            _ => Route::AnyCore,
        }
    }

    /// Runs a timer.
    pub fn handle_timer(&mut self, now: Nanos, timer: Timer, out: &mut Outbox) {
        self.core = timer.worker();
        match timer {
            Timer::Begin { .. } if self.stopped => {}
            Timer::Begin { worker } => self.begin_next(now, worker, out),
            Timer::Retry { worker } => self.retry(now, worker, out),
            Timer::Resume { worker } => {
                let replies = std::mem::take(&mut self.local_replies[usize::from(worker)]);
                for handoff in replies {
                    match handoff {
                        Handoff::Node { from, msg } => self.on_reply(now, worker, from, msg, out),
                        Handoff::Switch(pkt) => self.on_switch_txn_reply(now, pkt, out),
                        Handoff::Lock(pkt) => self.on_switch_lock_reply(now, pkt, out),
                    }
                }
            }
            Timer::SwitchTimeout { worker, txn } => self.on_switch_timeout(now, worker, txn, out),
            Timer::PeerTimeout { worker, txn } => self.on_peer_timeout(now, worker, txn, out),
            Timer::Lease { txn } => self.on_lease_expired(now, txn, out),
            Timer::RecoveredSwitchTxn { txn } => self.resend_recovered(now, txn, out),
        }
    }

    /// Handles a datagram from the network.
    pub fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut Outbox) {
        self.core = self.handler_core();
        out.cpu_ns += self.cfg.costs.stack_ns + self.cfg.costs.message_ns;
        let (frame, payload) = match Frame::decode(bytes) {
            Ok(parts) => parts,
            Err(e) => return self.reject(e.reason()),
        };
        if frame.dst != self.cfg.id {
            return self.reject("not_for_this_node");
        }
        match frame.kind {
            crate::wire::TXN_KIND => match TxnPacket::decode(payload) {
                Ok(pkt) if self.accept_switch_epoch(pkt.epoch) => {
                    match self.own_worker(TxnId::from_bits(pkt.txn_id)).filter(|_| self.prototype()) {
                        Some(worker) => self.hand_off(now, worker, Handoff::Switch(pkt), out),
                        None => self.on_switch_txn_reply(now, pkt, out),
                    }
                }
                Ok(_) => self.reject("stale_switch_epoch"),
                Err(e) => self.reject(e.reason()),
            },
            crate::wire::LOCK_KIND => match LockPacket::decode(payload) {
                Ok(pkt) => match self.own_worker(TxnId::from_bits(pkt.txn_id)).filter(|_| self.prototype()) {
                    Some(worker) => self.hand_off(now, worker, Handoff::Lock(pkt), out),
                    None => self.on_switch_lock_reply(now, pkt, out),
                },
                Err(e) => self.reject(e.reason()),
            },
            Kind::FORWARD => match NodeMsg::decode(payload) {
                Ok(msg) if msg.is_reply() => match self.workers.lane_of(TxnId::from_bits(msg.txn())) {
                    Some((worker, _)) if self.prototype() => {
                        self.hand_off(now, worker, Handoff::Node { from: frame.src, msg }, out)
                    }
                    Some((worker, _)) => self.on_reply(now, worker, frame.src, msg, out),
                    None => self.reject("reply_for_unknown_worker"),
                },
                Ok(msg) => self.serve(now, Origin::Remote(frame.src), msg, out),
                Err(e) => self.reject(e.reason()),
            },
            Kind::CONTROL => self.reject("control_message_to_a_node"),
            // Another system's kind, or one no system declares.
            _ => self.reject("wrong_kind"),
        }
    }

    /// Counts a datagram dropped for `reason`.
    pub(super) fn reject(&mut self, reason: &'static str) {
        *self.stats.rejected.entry(reason).or_default() += 1;
    }

    /// Sends `msg` to node `dst`.
    pub(super) fn send_node(&mut self, dst: u16, msg: &NodeMsg, out: &mut Outbox) {
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + msg.encoded_len());
        Frame { kind: Kind::FORWARD, src: self.cfg.id, dst }.encode(&mut bytes);
        msg.encode(&mut bytes);
        out.sends.push(Send { dst, bytes });
    }

    /// Sends a packet of `kind` to the switch (its CPU cost is the caller's to charge).
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
        Node::cores(self)
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
