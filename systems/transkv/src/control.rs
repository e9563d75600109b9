//! The controller host (§III, §IV-F): the transaction coordinator for keys no switch caches
//! (and, in the Tranx-Coor baseline, for every transaction).
//!
//! A client sends `Coordinate`; the controller sends `Prepare` to the transaction's storage
//! node, and the switches on that path decide the ops on keys they cache (so a transaction
//! mixing cached and uncached keys is decided by both); the node votes on the others:
//!
//! ```text
//! client ──Coordinate──▶ controller ──Prepare──▶ [switches] ──▶ node
//! client ◀──Committed── controller ◀─Committed── [switches] ◀── node ◀──Commit── controller ◀──Voted── node
//! ```
//!
//! A `Voted` is answered with `Commit`; `Committed` goes on to the client; `Aborted` (the node
//! refused) and `SwitchAborted` (a switch refused on the way) go on to the client as they are;
//! `Served` (every op a read a switch answered) becomes `Committed`. Transactions span one
//! node (`client.rs`), so one vote decides; the controller keeps which client waits for which
//! timestamp, and the final answer of each.
//!
//! **Lost messages.** A client that waits too long sends `Resolve`. A decided transaction gets
//! its final answer again; one whose vote came gets its `Commit` again (the node answers a
//! second `Commit` with the same `Committed`); one still preparing is resolved by the node
//! (`store.rs`: its outcome, its vote, or — never seen — aborted for good). Nothing is ever
//! prepared twice, so every transaction crosses the switches as one copy.
//!
//! **The log** (variant `transkv-log`, §IV-E): switches copy every transaction they accept to
//! the controller, and storage nodes copy every commit with the before images of its writes;
//! the controller keeps one record per transaction with its reads, before and after images
//! and whether its commit is confirmed ([`Controller::txn_log`]); recovery by undo/redo with
//! cascading rollback runs over it (`crate::recovery`).
//!
//! The cache fill from the workload's popularity is done at setup by the rack
//! (`layout::Hierarchy` and `program::fill`), as the control plane would before the run.
//!
//! **Cache refresh** (§IV-D, setting `refresh_epoch_us`): the controller drives
//! [`crate::refresh::Refresher`] from one timer ([`ControllerTimer::Refresh`]) and from the
//! replies it gets: control replies (`Kind::Control`) from the switches, which it addresses by
//! id hop by hop (`pisadb_wire::control::switch_address`: every switch, not only the core it
//! hangs off), and the storage nodes' `HandedOff`, `TookBack` and `Misses` messages. Any client
//! message wakes a refresh loop that went to sleep after an epoch without requests.

use crate::costs;
use crate::layout::Hierarchy;
use crate::recovery::{LogRecord, Outcome, TxnLog};
use crate::refresh::Refresher;
use crate::wire::{Message, OpType, Rejections, Status};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route, Send};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the controller reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerEvent {
    /// A transaction was coordinated to its end (committed or not).
    Decided {
        /// Whether it committed.
        committed: bool,
    },
    /// A switch's copy of a transaction it accepted was appended to the log.
    Logged,
    /// A datagram rejected, with the reason.
    Rejected(&'static str),
}

/// The controller's timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerTimer {
    /// The cache refresh's tick (`crate::refresh::Refresher::tick`).
    Refresh,
    /// A restarted controller asks the nodes again about what it still coordinates.
    Retry,
}

impl pisadb_core::TraceBytes for ControllerTimer {
    fn trace(&self, hash: &mut pisadb_core::TraceHash) {
        hash.write(match self {
            ControllerTimer::Refresh => b"refresh",
            ControllerTimer::Retry => b"retry  ",
        });
    }
}

/// How often a restarted controller asks the nodes again about the transactions it still
/// coordinates ([`Controller::restarted`]).
pub const RETRY_NS: Nanos = 1_000_000;

/// Where a coordinated transaction is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// `Prepare` (or `Resolve`) sent, no vote yet: the request as it came.
    Preparing(Message),
    /// Voted yes, `Commit` sent: the message to send again.
    Committing(Message),
}

/// The controller.
#[derive(Debug)]
pub struct Controller {
    /// Its host id.
    address: u16,
    /// Keys and nodes.
    hierarchy: Arc<Hierarchy>,
    /// Transactions being coordinated: T-TS → (client, phase).
    waiting: BTreeMap<u32, (u16, Phase)>,
    /// Transactions decided: T-TS → the final answer sent to the client.
    decided: BTreeMap<u32, Message>,
    /// The transaction log (§IV-E, variant `transkv-log`; `crate::recovery`).
    log: TxnLog,
    /// The cache refresh, if the run has one.
    refresh: Option<Box<Refresher>>,
    /// A restarted controller drives what it coordinates itself ([`Controller::restarted`]).
    drives_retries: bool,
    /// A `Retry` timer is pending.
    retry_armed: bool,
    /// Rejected datagrams by reason.
    pub rejections: Rejections,
}

impl Controller {
    /// This controller as restarted after a crash: it forgot the outcomes it decided, so a
    /// client's request that was delayed past its answer (a `Resolve` sent just before the
    /// answer came) makes it coordinate a transaction no client waits for any more; if the
    /// node's reply to it is lost, nobody would ask again. A restarted controller therefore
    /// asks the node again itself every [`RETRY_NS`] while it coordinates anything. One that
    /// never crashed answers late requests from its decided outcomes and needs no timer.
    pub fn restarted(mut self) -> Self {
        self.drives_retries = true;
        self
    }

    fn arm_retry(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        if self.drives_retries && !self.retry_armed && !self.waiting.is_empty() {
            self.retry_armed = true;
            out.timers.push((now + RETRY_NS, ControllerTimer::Retry));
        }
    }

    fn retry(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        self.retry_armed = false;
        let again: Vec<Message> = self
            .waiting
            .values()
            .map(|(_, phase)| match phase {
                Phase::Preparing(m) => Message { status: Status::Resolve, ..m.clone() },
                Phase::Committing(v) => Message { status: Status::Commit, ..v.clone() },
            })
            .collect();
        for m in again {
            let node = self.hierarchy.node_of(m.ops[0].key as u64);
            let status = m.status;
            self.send(m, status, node, out);
        }
        out.cpu_ns += costs::CONTROLLER_MESSAGE_NS * out.sends.len() as u64;
        self.arm_retry(now, out);
    }

    /// This controller refreshing the cache with `refresher` (`crate::refresh`).
    pub fn refreshing(mut self, refresher: Refresher) -> Self {
        self.refresh = Some(Box::new(refresher));
        self
    }

    /// The cache refresh, if the run has one.
    pub fn refresher(&self) -> Option<&Refresher> {
        self.refresh.as_deref()
    }

    fn refresh_tick(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        let Some(r) = self.refresh.as_mut() else { return };
        let before = out.sends.len();
        if let Some(at) = r.tick(now, &mut out.sends) {
            out.timers.push((at, ControllerTimer::Refresh));
        }
        out.cpu_ns += costs::CONTROLLER_MESSAGE_NS * (out.sends.len() - before) as u64;
    }

    /// A control reply (`Kind::Control`) for the refresh.
    fn control_reply(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let decoded = pisadb_wire::Frame::decode(bytes).map_err(|e| e.reason()).and_then(|(frame, payload)| {
            Ok((frame, pisadb_wire::control::ControlMessage::decode(payload).map_err(|e| e.reason())?))
        });
        match (decoded, self.refresh.as_mut()) {
            (Ok((frame, reply)), Some(r)) => r.on_control(now, frame.src, reply, &mut out.sends),
            (Ok(_), None) => self.reject("control_reply_without_refresh", out),
            (Err(reason), _) => self.reject(reason, out),
        }
    }
    /// A controller with nothing to coordinate yet.
    pub fn new(address: u16, hierarchy: Arc<Hierarchy>) -> Self {
        Controller {
            address,
            hierarchy,
            waiting: BTreeMap::new(),
            decided: BTreeMap::new(),
            log: TxnLog::default(),
            refresh: None,
            drives_retries: false,
            retry_armed: false,
            rejections: Rejections::default(),
        }
    }

    /// Transactions in the log.
    pub fn logged(&self) -> usize {
        self.log.records.len()
    }

    /// The transaction log with its before and after images (`crate::recovery`).
    pub fn txn_log(&self) -> &TxnLog {
        &self.log
    }

    /// Appends a copy to the log. A storage node's copy (`from` a node) is a commit with its
    /// before images in the write ops' value slots: it makes the record `Committed`. A
    /// switch's copy is the transaction as the switch accepted it: `Committed` if the switch
    /// answered it whole (every op a read it served), else `Unknown` until its node's copy
    /// comes; a later switch copy never replaces a record.
    fn append(&mut self, from: u16, msg: &Message) {
        let version = |op: &crate::wire::Op| crate::wire::version_of(&op.value);
        let reads = msg.ops.iter().filter(|o| o.op_type == OpType::Read).map(|o| (o.key as u64, version(o)));
        if from < crate::layout::NODES {
            let writes = msg.ops.iter().filter(|o| o.op_type == OpType::Write);
            let record = LogRecord {
                reads: reads.collect(),
                writes: writes.map(|o| (o.key as u64, version(o), u64::from(msg.ts))).collect(),
                outcome: Outcome::Committed,
            };
            self.log.records.insert(msg.ts, record);
        } else if let std::collections::btree_map::Entry::Vacant(slot) = self.log.records.entry(msg.ts) {
            let answered = msg.ops.iter().all(|o| o.op_type == OpType::Read && o.served());
            slot.insert(LogRecord {
                reads: reads.filter(|_| answered).collect(),
                writes: Vec::new(),
                outcome: if answered { Outcome::Committed } else { Outcome::Unknown },
            });
        }
    }

    /// Transactions still being coordinated.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn send(&self, mut msg: Message, status: Status, dst: u16, out: &mut HostOutbox<Self>) {
        msg.status = status;
        out.sends.push(Send { dst, bytes: msg.datagram(self.address, dst) });
    }

    fn reject(&mut self, reason: &'static str, out: &mut HostOutbox<Self>) {
        self.rejections.count(reason);
        out.events.push(ControllerEvent::Rejected(reason));
    }

    fn coordinate(&mut self, now: Nanos, src: u16, msg: Message, out: &mut HostOutbox<Self>) {
        if matches!(msg.status, Status::HandedOff | Status::TookBack | Status::Misses) {
            match self.refresh.as_mut() {
                Some(r) => r.on_node(now, src, &msg, &mut out.sends),
                None => self.reject("refresh_reply_without_refresh", out),
            }
            return;
        }
        if let Some(at) = self.refresh.as_mut().and_then(|r| r.wake(now)) {
            out.timers.push((at, ControllerTimer::Refresh));
        }
        let node = self.hierarchy.node_of(msg.ops[0].key as u64);
        if msg.ts == 0 {
            return self.reject("bad_coordinate", out);
        }
        match msg.status {
            Status::Log => {
                self.append(src, &msg);
                out.events.push(ControllerEvent::Logged);
            }
            Status::Coordinate | Status::Resolve => {
                if let Some(done) = self.decided.get(&msg.ts) {
                    let done = done.clone();
                    let status = done.status;
                    return self.send(done, status, src, out);
                }
                match self.waiting.get(&msg.ts) {
                    Some((_, Phase::Committing(voted))) => {
                        let voted = voted.clone();
                        self.send(voted, Status::Commit, node, out);
                    }
                    // A client resolving: the node says what it knows (and refuses the
                    // timestamp from now on if it knows nothing).
                    Some((_, Phase::Preparing(_))) => self.send(msg, Status::Resolve, node, out),
                    None => {
                        let status = if msg.status == Status::Coordinate { Status::Prepare } else { Status::Resolve };
                        self.waiting.insert(msg.ts, (src, Phase::Preparing(msg.clone())));
                        self.send(msg, status, node, out);
                    }
                }
            }
            Status::Voted => match self.waiting.get_mut(&msg.ts) {
                Some((_, phase)) => {
                    *phase = Phase::Committing(msg.clone());
                    self.send(msg, Status::Commit, node, out);
                }
                None => self.reject("unknown_vote", out),
            },
            Status::Committed | Status::Served | Status::Aborted | Status::SwitchAborted => {
                let Some((client, phase)) = self.waiting.remove(&msg.ts) else {
                    return self.reject("unknown_outcome", out);
                };
                if msg.status == Status::SwitchAborted && matches!(phase, Phase::Committing(_)) {
                    // Cannot happen with one copy per transaction; keep the vote.
                    self.waiting.insert(msg.ts, (client, phase));
                    return self.reject("abort_after_vote", out);
                }
                let committed = matches!(msg.status, Status::Committed | Status::Served);
                out.events.push(ControllerEvent::Decided { committed });
                // An abort keeps its source (a switch's or a node's) for the client's figures.
                let status = if committed { Status::Committed } else { msg.status };
                let mut done = msg;
                done.status = status;
                self.decided.insert(done.ts, done.clone());
                self.send(done, status, client, out);
            }
            _ => self.reject("unexpected_status", out),
        }
    }
}

impl Host for Controller {
    type Timer = ControllerTimer;
    type Log = ();
    type Event = ControllerEvent;

    fn cores(&self) -> u16 {
        costs::CONTROLLER_CORES
    }

    fn start(&mut self, _now: Nanos, out: &mut HostOutbox<Self>) {
        if let Some(r) = &self.refresh {
            out.timers.push((r.first_tick(), ControllerTimer::Refresh));
        }
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, _timer: &Self::Timer) -> u16 {
        0
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += costs::CONTROLLER_MESSAGE_NS;
        if pisadb_wire::Frame::decode(bytes).is_ok_and(|(frame, _)| frame.kind == pisadb_wire::Kind::Control) {
            return self.control_reply(now, bytes, out);
        }
        match Message::open(bytes) {
            Ok((frame, msg)) => self.coordinate(now, frame.src, msg, out),
            Err(e) => self.reject(e.reason(), out),
        }
        self.arm_retry(now, out);
    }

    fn handle_timer(&mut self, now: Nanos, timer: Self::Timer, out: &mut HostOutbox<Self>) {
        match timer {
            ControllerTimer::Refresh => self.refresh_tick(now, out),
            ControllerTimer::Retry => self.retry(now, out),
        }
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.refresh.as_ref().is_none_or(|r| r.is_idle())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Op;

    #[test]
    fn coordinate_prepare_vote_commit_answer() {
        let h = Arc::new(Hierarchy::new(1_600, 0).unwrap());
        let mut c = Controller::new(20, h);
        let msg = Message { ts: 8, status: Status::Coordinate, client: 16, seq: 1, ops: vec![Op::read(1_599)] };
        let step = |c: &mut Controller, m: &Message, from: u16| {
            let mut out = HostOutbox::<Controller>::default();
            c.handle_datagram(0, &m.datagram(from, 20), &mut out);
            out.sends.iter().map(|s| (s.dst, Message::open(&s.bytes).unwrap().1.status)).collect::<Vec<_>>()
        };
        assert_eq!(step(&mut c, &msg, 16), vec![(15, Status::Prepare)]);
        let voted = Message { status: Status::Voted, ..msg.clone() };
        assert_eq!(step(&mut c, &voted, 15), vec![(15, Status::Commit)]);
        let done = Message { status: Status::Committed, ..msg.clone() };
        assert_eq!(step(&mut c, &done, 15), vec![(16, Status::Committed)]);
        assert!(c.is_idle());
        assert_eq!(step(&mut c, &done, 15), vec![], "no second answer");
        assert_eq!(c.rejections.total(), 1);
    }

    #[test]
    fn a_restarted_controller_asks_the_node_again_about_what_no_client_drives() {
        let h = Arc::new(Hierarchy::new(1_600, 0).unwrap());
        let resolve = Message { ts: 8, status: Status::Resolve, client: 16, seq: 1, ops: vec![Op::read(1_599)] };
        // A late resolve reaches a controller that forgot the outcome; its ask is lost.
        let mut c = Controller::new(20, Arc::clone(&h)).restarted();
        let mut out = HostOutbox::<Controller>::default();
        c.handle_datagram(0, &resolve.datagram(16, 20), &mut out);
        assert_eq!(out.timers, vec![(RETRY_NS, ControllerTimer::Retry)], "a retry is armed");
        let mut again = HostOutbox::<Controller>::default();
        c.handle_timer(RETRY_NS, ControllerTimer::Retry, &mut again);
        let sent: Vec<(u16, Status)> =
            again.sends.iter().map(|s| (s.dst, Message::open(&s.bytes).unwrap().1.status)).collect();
        assert_eq!(sent, vec![(15, Status::Resolve)], "asked again");
        assert_eq!(again.timers.len(), 1, "and again later while it waits");
        // The node's answer ends it: no more retries.
        let mut done = HostOutbox::<Controller>::default();
        let aborted = Message { status: Status::Aborted, ..resolve.clone() };
        c.handle_datagram(RETRY_NS + 1, &aborted.datagram(15, 20), &mut done);
        assert!(c.is_idle());
        let mut last = HostOutbox::<Controller>::default();
        c.handle_timer(2 * RETRY_NS, ControllerTimer::Retry, &mut last);
        assert!(last.sends.is_empty() && last.timers.is_empty());
        // A controller that never crashed sets no timer.
        let mut fresh = Controller::new(20, h);
        let mut out = HostOutbox::<Controller>::default();
        fresh.handle_datagram(0, &resolve.datagram(16, 20), &mut out);
        assert!(out.timers.is_empty());
    }
}
