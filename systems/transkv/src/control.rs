//! The controller host (§III, §IV-F): the transaction coordinator for keys no switch caches
//! (and, in the Tranx-Coor baseline, for every transaction).
//!
//! A client sends `Coordinate`; the controller splits the transaction into shares, one per
//! storage node its keys live on, and sends each node its `Prepare`. The switches on each
//! node's path decide the share's ops on keys they cache (so a transaction mixing cached and
//! uncached keys is decided by both), and the node votes on the others. This is two-phase
//! commit with the switches as voters on the way:
//!
//! ```text
//! client ──Coordinate──▶ controller ──Prepare──▶ [switches] ──▶ node      (one per share)
//! client ◀──Committed── controller ◀─Committed── [switches] ◀── node ◀──Commit── controller ◀──Voted── node
//! ```
//!
//! When every share has voted, each gets `Commit`, and once every node has answered
//! `Committed` the client gets `Committed` with every share's read values in its op order.
//! The first refusal (`Aborted` from a node, `SwitchAborted` from a switch on the way) aborts
//! the transaction: every share that voted gets `Aborted`, which releases the switches'
//! claims on its way and the node's prepared state, and a share not heard from yet is left to
//! answer by itself (an `Aborted` overtaking its `Prepare` could release claims the `Prepare`
//! takes later, `Controller::push`); the client gets the refusal's status once every share
//! has ended, so a retry never meets its own earlier attempt. A share a switch refused has
//! ended only once its node confirms it (`Aborted` sent, `Aborted` back; `Part::Refused`):
//! the network duplicates, and another copy of its `Prepare` may have crossed the switches
//! later and left a vote at the node, which would hold its keys for good if its `Voted` or
//! the `Aborted` answering it were lost (fuzz seed 1980: every later writer of the key was
//! refused by the node, and the clients retried until the event bound). An `Aborted` that
//! overtakes such a copy leaves at worst a claim of a timestamp its node has decided
//! aborted, which the switch's lease ends (`crate::program`). A share is never
//! answered by a switch, even if it only reads cached keys (`program.rs`, `verdict`): its
//! node's vote is what lets a restarted controller find out how the transaction ended.
//!
//! **Lost messages.** A client that waits too long sends `Resolve`, and the controller moves
//! every share on again: a decided transaction gets its final answer again; a voted share
//! gets its `Commit` again once all voted (the node answers a second `Commit` with the same
//! `Committed`); a share of an aborted transaction gets its `Aborted` again; a share not yet
//! heard from is resolved by its node (`store.rs`: its outcome, its vote, or — never seen —
//! aborted for good). Nothing is ever prepared twice, so every share crosses the switches as
//! one copy. A restarted controller knows nothing: the client's `Resolve` becomes a new
//! coordination that asks every node, and the nodes' answers (outcome or vote, each decided
//! once) rebuild the decision: a share that committed means the commit was decided.
//!
//! **The log** (variant `transkv-log`, §IV-E): switches copy every transaction they accept to
//! the controller, and storage nodes copy every commit with the before images of its writes;
//! the controller keeps one record per transaction with its reads, before and after images
//! and whether its commit is confirmed, by every node it spans ([`Controller::txn_log`]);
//! recovery by undo/redo with
//! cascading rollback runs over it (`crate::recovery`). The log survives a controller crash
//! ([`Controller::logging`]): the controller writes a [`ControllerRecord`] through its host's
//! write-ahead log for each copy it appends, and one with the node count for each transaction
//! it coordinates (before its `Prepare`s leave, so before any copy of it can arrive: a
//! restored controller never confirms a commit by one share, nor a coordinated share by a
//! switch's copy). A restarted
//! controller replays them ([`Controller::restore`]) into the same records, spans and shares
//! confirmed; what it coordinated is not logged (the nodes hold every vote and outcome, above).
//! Copies that reach it while it is down are lost, as on a lossy link: their commits stay
//! unconfirmed (`Unknown`) and any recovery rolls them back.
//!
//! The cache fill from the workload's popularity is done at setup by the rack
//! (`layout::Hierarchy` and `program::fill`), as the control plane would before the run.
//!
//! **Cache refresh** (§IV-D, setting `refresh_epoch_us`): the controller drives
//! [`crate::refresh::Refresher`] from one timer ([`ControllerTimer::Refresh`]) and from the
//! replies it gets: control replies (`Kind::CONTROL`) from the switches, which it addresses by
//! id hop by hop (`pisadb_wire::control::switch_address`: every switch, not only the core it
//! hangs off), and the storage nodes' `HandedOff`, `TookBack` and `Misses` messages. Any client
//! message wakes a refresh loop that went to sleep after an epoch without requests.
//! Whatever the variant, a refreshing controller writes its placement's changes through its
//! host's write-ahead log ([`ControllerRecord::Placement`], each before the handler's sends),
//! and a restarted one comes back with its placement (`crate::rack::restored_controller`,
//! `crate::refresh`, "Crashes").

use crate::costs;
use crate::layout::Hierarchy;
use crate::recovery::{LogRecord, Outcome, TxnLog};
use crate::refresh::Refresher;
use crate::wire::{Message, OpType, Rejections, Status, LEASE_CLIENT};
use pisadb_core::Nanos;
use pisadb_engine::twopc::{Round, Tally};
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

/// What the controller writes to its write-ahead log (variant `transkv-log`): enough to
/// rebuild its transaction log after a crash ([`Controller::restore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerRecord {
    /// A transaction coordinated over `nodes` storage nodes, written before its `Prepare`s
    /// leave, so before any copy of it can arrive: a commit is confirmed once each of its
    /// nodes confirmed its share.
    Span {
        /// Its T-TS.
        ts: u32,
        /// The nodes it spans.
        nodes: u8,
    },
    /// A copy appended to the log: a switch's (`Status::Log`) or a node's (`Status::CommitLog`).
    Copy(Message),
    /// A change of the cache refresh's placement (`crate::refresh`), written whatever the
    /// variant when the run refreshes.
    Placement(crate::refresh::PlacementRecord),
}

/// How often a restarted controller asks the nodes again about the transactions it still
/// coordinates ([`Controller::restarted`]).
pub const RETRY_NS: Nanos = 1_000_000;

/// Where one node's share of a coordinated transaction is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    /// `Prepare` (or `Resolve`) sent, no answer yet.
    Preparing,
    /// The node voted yes: its message, read values filled (what `Commit` carries).
    Voted(Message),
    /// The node committed: its answer.
    Committed(Message),
    /// Refused by a switch on the way (`SwitchAborted`), and `Aborted` sent to the node to
    /// confirm it: another copy of the `Prepare` (the network duplicates) may have crossed the
    /// switches and left a vote at the node that only this `Aborted` ends. Final once the
    /// node answers.
    Refused,
    /// Aborted here (by the node, a switch, or the controller's `Aborted`): final.
    Aborted,
}

/// A transaction being coordinated.
#[derive(Clone, Debug)]
struct Coordination {
    /// The client that waits for it.
    client: u16,
    /// The transaction as the client sent it (the order of its ops).
    msg: Message,
    /// Its share on each node (the ops of that node's keys) and where that share is.
    parts: BTreeMap<u16, (Message, Part)>,
    /// Aborted: the first abort (a switch's or a node's; its status goes to the client, for
    /// its figures).
    abort: Option<Message>,
    /// The vote round (the engine's two-phase-commit tally): a share's first answer out of
    /// `Preparing` is its vote, yes (voted, or already committed) or no (aborted).
    votes: Round,
}

impl Coordination {
    /// Every share voted yes and none aborted since: the commit is decided.
    fn all_yes(&self) -> bool {
        self.abort.is_none() && self.votes.state() == Tally::AllYes
    }

    /// Counts `node`'s vote (`yes` or not) once; a later answer from it is no vote.
    fn vote(&mut self, node: u16, yes: bool) {
        let _ = self.votes.answer(node, yes);
    }

    fn all_final(&self) -> bool {
        self.parts.values().all(|(_, p)| match p {
            Part::Committed(_) => self.abort.is_none(),
            Part::Aborted => self.abort.is_some(),
            Part::Preparing | Part::Voted(_) | Part::Refused => false,
        })
    }
}

/// The controller.
#[derive(Debug)]
pub struct Controller {
    /// Its host id.
    address: u16,
    /// Keys and nodes.
    hierarchy: Arc<Hierarchy>,
    /// Transactions being coordinated, by T-TS.
    waiting: BTreeMap<u32, Coordination>,
    /// Transactions decided: T-TS → the final answer sent to the client.
    decided: BTreeMap<u32, Message>,
    /// Nodes spanned by each transaction this controller coordinated (a commit is confirmed
    /// in the log once each of them confirmed its share, by the node's copy).
    spans: BTreeMap<u32, u8>,
    /// Shares confirmed in the log so far, per T-TS: the nodes whose share a copy confirmed
    /// (a share's switch copy and its node's copy confirm the same share once).
    confirmed: BTreeMap<u32, std::collections::BTreeSet<u16>>,
    /// Writes of commits not confirmed yet, per T-TS: (key, before image, after image) from
    /// the node copies heard so far. They enter the log only with the commit's confirmation:
    /// a record holding one share's writes of a commit over two nodes would have any recovery
    /// undo half a committed transaction ([`Controller::append`]).
    held: BTreeMap<u32, Vec<(u64, u64, u64)>>,
    /// The transaction log (§IV-E, variant `transkv-log`; `crate::recovery`).
    log: TxnLog,
    /// The cache refresh, if the run has one.
    refresh: Option<Box<Refresher>>,
    /// A restarted controller drives what it coordinates itself ([`Controller::restarted`]).
    drives_retries: bool,
    /// A `Retry` timer is pending.
    retry_armed: bool,
    /// Variant `transkv-log`: it writes [`ControllerRecord`]s ([`Controller::logging`]).
    durable: bool,
    /// Rejected datagrams by reason.
    pub rejections: Rejections,
    /// Cores it runs on (the `controller_cores` setting).
    cores: u16,
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
        let unfinished: Vec<Coordination> = self.waiting.values().cloned().collect();
        for c in &unfinished {
            self.push(c, true, out);
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
        self.log_placement(out);
    }

    /// Writes the refresh's placement records, ahead of the handler's sends.
    fn log_placement(&mut self, out: &mut HostOutbox<Self>) {
        if let Some(r) = self.refresh.as_mut() {
            out.log.extend(r.take_log().into_iter().map(ControllerRecord::Placement));
        }
    }

    /// A control reply (`Kind::CONTROL`) for the refresh.
    fn control_reply(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let decoded = pisadb_wire::Frame::decode(bytes).map_err(|e| e.reason()).and_then(|(frame, payload)| {
            Ok((frame, pisadb_wire::control::ControlMessage::decode(payload).map_err(|e| e.reason())?))
        });
        match (decoded, self.refresh.as_mut()) {
            (Ok((frame, reply)), Some(r)) => {
                r.on_control(now, frame.src, reply, &mut out.sends);
                self.log_placement(out);
            }
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
            spans: BTreeMap::new(),
            confirmed: BTreeMap::new(),
            held: BTreeMap::new(),
            log: TxnLog::default(),
            refresh: None,
            drives_retries: false,
            retry_armed: false,
            durable: false,
            rejections: Rejections::default(),
            cores: costs::CONTROLLER_CORES,
        }
    }

    /// This controller running on `cores` cores (the `controller_cores` setting).
    pub fn with_cores(mut self, cores: u16) -> Self {
        self.cores = cores.max(1);
        self
    }

    /// This controller keeping its transaction log durable (variant `transkv-log`): it writes
    /// a [`ControllerRecord::Span`] for each transaction it coordinates and
    /// a [`ControllerRecord::Copy`] for each copy it appends, each before the handler's sends.
    pub fn logging(mut self) -> Self {
        self.durable = true;
        self
    }

    /// A logging controller rebuilt after a crash from its records, in log order: the same
    /// transaction log (records, spans, confirmed shares) as the crashed one had when its last
    /// record became durable. What it coordinated is not in the log (the nodes hold every vote
    /// and outcome); make it [`Controller::restarted`] to drive what it learns of again.
    pub fn restore(address: u16, hierarchy: Arc<Hierarchy>, records: &[ControllerRecord]) -> Self {
        let mut c = Controller::new(address, hierarchy).logging();
        for record in records {
            match record {
                ControllerRecord::Span { ts, nodes } => {
                    c.spans.insert(*ts, *nodes);
                }
                ControllerRecord::Copy(msg) => c.append(msg),
                // The refresh's: `Refresher::restore`.
                ControllerRecord::Placement(_) => {}
            }
        }
        c
    }

    /// The refresh's placement records among `records`, in log order.
    pub fn placement_records(records: &[ControllerRecord]) -> Vec<crate::refresh::PlacementRecord> {
        records
            .iter()
            .filter_map(|r| match r {
                ControllerRecord::Placement(p) => Some(*p),
                _ => None,
            })
            .collect()
    }

    /// Transactions in the log.
    pub fn logged(&self) -> usize {
        self.log.records.len()
    }

    /// The transaction log with its before and after images (`crate::recovery`).
    pub fn txn_log(&self) -> &TxnLog {
        &self.log
    }

    /// Appends a copy to the log. A storage node's copy (`CommitLog`) is its share of a
    /// commit with the before images in the write ops' value slots; a switch's copy is the
    /// share as the switch accepted it, which confirms that share if the switch answered it
    /// whole (every op a read it served). A record gathers its shares' reads and writes (by
    /// key) and is `Committed` once every node the transaction spans confirmed its share
    /// (one, unless this controller coordinated it over several), else `Unknown`.
    ///
    /// A record's writes come in only with its confirmation (until then they are `held`), so
    /// an `Unknown` record holds none. Recovery rolls every `Unknown` record back, and a node
    /// copy is sent once: when one share's copy of a commit over two nodes reaches the log and
    /// the other's is lost (it met this controller down), the commit did happen at both nodes,
    /// and undoing the one share the log knew would leave half of it installed. Held back, the
    /// commit is one the log lacks, as a single-node commit whose copy was lost is: recovery
    /// leaves it alone.
    fn append(&mut self, msg: &Message) {
        let version = |op: &crate::wire::Op| crate::wire::version_of(&op.value);
        let from_node = msg.status == Status::CommitLog;
        let answered = !from_node && msg.ops.iter().all(|o| o.op_type == OpType::Read && o.served());
        let record = self.log.records.entry(msg.ts).or_insert_with(|| LogRecord {
            reads: Vec::new(),
            writes: Vec::new(),
            outcome: Outcome::Unknown,
        });
        // A share of a read-only transaction over several nodes (`FLAG_SHARE`): its reads go
        // in, but no copy of one share can confirm the transaction, so it stays `Unknown`
        // (rolled back by any recovery, which for a reader undoes nothing).
        let share = msg.ops.iter().any(|o| o.flags & crate::wire::FLAG_SHARE != 0);
        // A switch's answered copy confirms only a client's request the switch answered
        // whole; a share this controller coordinates goes on to its node even when every op
        // was served there (`program.rs`, `verdict`), and the node may still refuse it, so
        // only the node's copy confirms it.
        let coordinated = self.spans.contains_key(&msg.ts);
        if !(from_node || (answered && !coordinated)) {
            return;
        }
        let held = self.held.entry(msg.ts).or_default();
        for op in &msg.ops {
            let key = op.key as u64;
            match op.op_type {
                OpType::Read if !record.reads.iter().any(|r| r.0 == key) => record.reads.push((key, version(op))),
                OpType::Write if from_node && !held.iter().chain(&record.writes).any(|w| w.0 == key) => {
                    held.push((key, version(op), u64::from(msg.ts)))
                }
                _ => {}
            }
        }
        record.reads.sort_unstable();
        let confirmed = self.confirmed.entry(msg.ts).or_default();
        confirmed.insert(self.hierarchy.node_of(msg.ops[0].key as u64));
        if !share && confirmed.len() >= usize::from(self.spans.get(&msg.ts).copied().unwrap_or(1)) {
            record.outcome = Outcome::Committed;
        }
        if record.outcome == Outcome::Committed {
            record.writes.extend(self.held.remove(&msg.ts).unwrap_or_default());
            record.writes.sort_unstable();
        } else if self.held.get(&msg.ts).is_some_and(Vec::is_empty) {
            self.held.remove(&msg.ts);
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

    /// Splits a transaction into its shares, one per node its keys live on, in key order.
    fn shares(&self, msg: &Message) -> BTreeMap<u16, (Message, Part)> {
        let shares = self.hierarchy.ops_by_node(&msg.ops);
        shares.into_iter().map(|(node, ops)| (node, (Message { ops, ..msg.clone() }, Part::Preparing))).collect()
    }

    /// Sends each unfinished share what moves it on: `Commit` to a voted one once all voted,
    /// `Aborted` to a voted one once the transaction aborted, and, when `resolving` (a
    /// client's resolve, a restarted controller's retry), a `Resolve` — or, once aborted,
    /// `Aborted` — to a node not yet heard from.
    ///
    /// A share not yet heard from is left alone otherwise: its `Prepare` may still be on its
    /// way, and an `Aborted` that overtook it (a reordering link) would release the switches'
    /// claims before the `Prepare` takes them; were that `Prepare` then lost before its node,
    /// its claim would stay (found by fuzz seed 294: a key wedged for good). Its own answer
    /// comes back instead, or the client's resolve, one timeout later, asks for it.
    fn push(&self, c: &Coordination, resolving: bool, out: &mut HostOutbox<Self>) {
        let all_yes = c.all_yes();
        for (&node, (share, part)) in &c.parts {
            match part {
                Part::Voted(_) if c.abort.is_some() => self.send(share.clone(), Status::Aborted, node, out),
                Part::Voted(voted) if all_yes => self.send(voted.clone(), Status::Commit, node, out),
                Part::Preparing if resolving => {
                    let status = if c.abort.is_some() { Status::Aborted } else { Status::Resolve };
                    self.send(share.clone(), status, node, out)
                }
                Part::Refused if resolving => self.send(share.clone(), Status::Aborted, node, out),
                _ => {}
            }
        }
    }

    /// Answers the client once every share is final: `Committed` with every share's read
    /// values in the client's op order, or the first abort's status.
    fn finish_if_done(&mut self, ts: u32, out: &mut HostOutbox<Self>) {
        if !self.waiting.get(&ts).is_some_and(Coordination::all_final) {
            return;
        }
        let Some(c) = self.waiting.remove(&ts) else { return };
        let committed = c.abort.is_none();
        out.events.push(ControllerEvent::Decided { committed });
        let mut done = c.abort.clone().unwrap_or_else(|| Message { status: Status::Committed, ..c.msg.clone() });
        if committed {
            let answers: Vec<&Message> = c
                .parts
                .values()
                .filter_map(|(_, p)| match p {
                    Part::Committed(m) => Some(m),
                    _ => None,
                })
                .collect();
            for op in done.ops.iter_mut() {
                if let Some(answered) = answers.iter().flat_map(|m| &m.ops).find(|o| o.key == op.key) {
                    *op = *answered;
                }
            }
        }
        self.decided.insert(ts, done.clone());
        let status = done.status;
        self.send(done, status, c.client, out);
    }

    fn coordinate(&mut self, now: Nanos, src: u16, msg: Message, out: &mut HostOutbox<Self>) {
        if matches!(msg.status, Status::HandedOff | Status::TookBack | Status::Misses) {
            match self.refresh.as_mut() {
                Some(r) => {
                    r.on_node(now, src, &msg, &mut out.sends);
                    self.log_placement(out);
                }
                None => self.reject("refresh_reply_without_refresh", out),
            }
            return;
        }
        if let Some(at) = self.refresh.as_mut().and_then(|r| r.wake(now)) {
            out.timers.push((at, ControllerTimer::Refresh));
        }
        if msg.ts == 0 || msg.ops.is_empty() {
            return self.reject("bad_coordinate", out);
        }
        if msg.client == LEASE_CLIENT {
            // The answer to a switch's lease query, which passed the switches on its way
            // here because a request of ours met the claim: nothing for the coordinator.
            return;
        }
        match msg.status {
            Status::Log | Status::CommitLog => {
                self.append(&msg);
                if self.durable {
                    out.log.push(ControllerRecord::Copy(msg));
                }
                out.events.push(ControllerEvent::Logged);
            }
            Status::Coordinate | Status::Resolve => {
                if let Some(done) = self.decided.get(&msg.ts) {
                    let done = done.clone();
                    let status = done.status;
                    return self.send(done, status, src, out);
                }
                if let Some(c) = self.waiting.get(&msg.ts) {
                    // A client resolving: move every share on again (a node that knows
                    // nothing of its share refuses the timestamp from now on).
                    return self.push(c, true, out);
                }
                let parts = self.shares(&msg);
                // Every coordinated transaction's span, one node or several: its shares are
                // confirmed by their nodes' copies only (below, `append`).
                self.spans.insert(msg.ts, parts.len() as u8);
                if self.durable {
                    out.log.push(ControllerRecord::Span { ts: msg.ts, nodes: parts.len() as u8 });
                }
                let status = if msg.status == Status::Coordinate { Status::Prepare } else { Status::Resolve };
                for (&node, (share, _)) in &parts {
                    self.send(share.clone(), status, node, out);
                }
                let votes = Round::new(parts.len());
                self.waiting.insert(msg.ts, Coordination { client: src, msg, parts, abort: None, votes });
            }
            Status::Voted | Status::Committed | Status::Aborted | Status::SwitchAborted => {
                let node = self.hierarchy.node_of(msg.ops[0].key as u64);
                let ts = msg.ts;
                let aborted = |c: Option<&Coordination>| c.is_some_and(|c| c.abort.is_some());
                let decided_abort = self.decided.get(&ts).is_some_and(|d| d.status != Status::Committed);
                if msg.status == Status::Voted && (decided_abort || aborted(self.waiting.get(&ts))) {
                    // A vote for an aborted transaction: a copy of its share reached the node
                    // after another copy was refused on the way (the network duplicates), so
                    // the node holds a vote nobody would end. End it.
                    let part = self.waiting.get(&ts).and_then(|c| c.parts.get(&node));
                    if part.is_none_or(|(_, p)| matches!(p, Part::Aborted | Part::Refused)) {
                        return self.send(msg, Status::Aborted, node, out);
                    }
                }
                let Some(c) = self.waiting.get_mut(&ts) else {
                    return self.reject("unknown_outcome", out);
                };
                let commit_decided = c.abort.is_none() && c.all_yes();
                let Some((share, part)) = c.parts.get_mut(&node) else {
                    return self.reject("unknown_outcome", out);
                };
                let share = share.clone();
                match (msg.status, &*part) {
                    (Status::Voted, Part::Preparing) => {
                        *part = Part::Voted(msg);
                        c.vote(node, true);
                        if c.abort.is_some() {
                            self.send(share, Status::Aborted, node, out);
                        } else if c.all_yes() {
                            let c = c.clone();
                            self.push(&c, false, out);
                        }
                    }
                    (Status::Committed, Part::Voted(_)) => *part = Part::Committed(msg),
                    // A node that committed its share before this controller heard its vote
                    // (a restarted controller resolving): the commit was decided, so the
                    // other shares commit too once they have voted.
                    (Status::Committed, Part::Preparing) => {
                        *part = Part::Committed(msg);
                        c.vote(node, true);
                        if c.all_yes() {
                            let c = c.clone();
                            self.push(&c, false, out);
                        }
                    }
                    (Status::Aborted | Status::SwitchAborted, Part::Preparing | Part::Voted(_)) if !commit_decided => {
                        // A switch's refusal is confirmed by the node (`Part::Refused`): a
                        // copy of the share may hold a vote there (fuzz seed 1980).
                        let refused = msg.status == Status::SwitchAborted;
                        *part = if refused { Part::Refused } else { Part::Aborted };
                        c.vote(node, false);
                        if c.abort.is_none() {
                            c.abort = Some(msg);
                            let c = c.clone();
                            self.push(&c, false, out);
                        }
                        if refused {
                            self.send(share, Status::Aborted, node, out);
                        }
                    }
                    // The node confirms a switch's refusal: the share is over there too.
                    (Status::Aborted, Part::Refused) => *part = Part::Aborted,
                    // Every share voted yes: the commit is decided, an abort cannot be.
                    (Status::Aborted | Status::SwitchAborted, _) if c.abort.is_none() => {
                        return self.reject("abort_after_vote", out)
                    }
                    // A second answer to a share already past it (a resend crossed it).
                    _ => return,
                }
                self.finish_if_done(ts, out);
            }
            _ => self.reject("unexpected_status", out),
        }
    }
}

impl Host for Controller {
    type Timer = ControllerTimer;
    type Log = ControllerRecord;
    type Event = ControllerEvent;

    fn cores(&self) -> u16 {
        self.cores
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        if let Some(r) = &self.refresh {
            out.timers.push((r.first_tick(now), ControllerTimer::Refresh));
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
        if pisadb_wire::Frame::decode(bytes).is_ok_and(|(frame, _)| frame.kind == pisadb_wire::Kind::CONTROL) {
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

    type Step = Vec<(u16, Status, Vec<u128>)>;

    /// A controller over 1,600 keys (100 per node) and a function that hands it a message and
    /// returns what it sent: (destination, status, keys).
    fn two_node_setup() -> (Controller, impl Fn(&mut Controller, &Message, u16) -> Step) {
        let h = Arc::new(Hierarchy::new(1_600, 0).unwrap());
        assert_ne!(h.node_of(5), h.node_of(1_599), "the keys live on two nodes");
        let step = |c: &mut Controller, m: &Message, from: u16| {
            let mut out = HostOutbox::<Controller>::default();
            c.handle_datagram(0, &m.datagram(from, 20), &mut out);
            out.sends
                .iter()
                .map(|s| {
                    let m = Message::open(&s.bytes).unwrap().1;
                    (s.dst, m.status, m.ops.iter().map(|o| o.key).collect())
                })
                .collect::<Vec<_>>()
        };
        (Controller::new(20, h), step)
    }

    #[test]
    fn a_transaction_over_two_nodes_commits_only_when_both_voted_and_answers_once_both_committed() {
        let (mut c, step) = two_node_setup();
        let (a, b) = (c.hierarchy.node_of(5), c.hierarchy.node_of(1_599));
        let ops = vec![Op::write(1_599, [1; 48]), Op::write(5, [2; 48])];
        let msg = Message { ts: 8, status: Status::Coordinate, client: 16, seq: 1, ops };
        let mut sent = step(&mut c, &msg, 16);
        sent.sort();
        assert_eq!(sent, vec![(a, Status::Prepare, vec![5]), (b, Status::Prepare, vec![1_599])], "one share per node");
        let share = |keys: u128, status| Message { status, ops: vec![Op::write(keys, [0; 48])], ..msg.clone() };
        assert_eq!(step(&mut c, &share(5, Status::Voted), a), vec![], "one vote is not a decision");
        let mut sent = step(&mut c, &share(1_599, Status::Voted), b);
        sent.sort();
        assert_eq!(sent, vec![(a, Status::Commit, vec![5]), (b, Status::Commit, vec![1_599])]);
        assert_eq!(step(&mut c, &share(5, Status::Committed), a), vec![], "the other node has not installed yet");
        // The client resolving meanwhile: the unconfirmed share gets its Commit again.
        assert_eq!(
            step(&mut c, &Message { status: Status::Resolve, ..msg.clone() }, 16),
            vec![(b, Status::Commit, vec![1_599])]
        );
        let answer = step(&mut c, &share(1_599, Status::Committed), b);
        assert_eq!(answer, vec![(16, Status::Committed, vec![1_599, 5])], "in the client's op order");
        assert!(c.is_idle());
    }

    #[test]
    fn a_refused_share_aborts_the_others_and_the_client_hears_once_every_share_ended() {
        let (mut c, step) = two_node_setup();
        let (a, b) = (c.hierarchy.node_of(5), c.hierarchy.node_of(1_599));
        let ops = vec![Op::write(5, [2; 48]), Op::write(1_599, [1; 48])];
        let msg = Message { ts: 8, status: Status::Coordinate, client: 16, seq: 1, ops };
        step(&mut c, &msg, 16);
        let share = |keys: u128, status| Message { status, ops: vec![Op::write(keys, [0; 48])], ..msg.clone() };
        assert_eq!(step(&mut c, &share(5, Status::Voted), a), vec![]);
        // A switch on b's path refuses b's share: a's prepared share is aborted, and b is
        // asked to confirm the refusal (a copy of its share may have reached it).
        let mut sent = step(&mut c, &share(1_599, Status::SwitchAborted), b);
        sent.sort();
        assert_eq!(sent, vec![(a, Status::Aborted, vec![5]), (b, Status::Aborted, vec![1_599])]);
        assert!(!c.is_idle(), "a still holds its share");
        assert_eq!(step(&mut c, &share(5, Status::Aborted), a), vec![], "b has not confirmed yet");
        let answer = step(&mut c, &share(1_599, Status::Aborted), b);
        assert_eq!(answer, vec![(16, Status::SwitchAborted, vec![1_599])], "the first refusal's status");
        assert!(c.is_idle());
        // A late vote for an aborted transaction is ended (a copy of the share may have
        // reached the node after it answered; here it had aborted, and says so again).
        assert_eq!(step(&mut c, &share(5, Status::Voted), a), vec![(a, Status::Aborted, vec![5])]);
        assert_eq!(step(&mut c, &share(5, Status::Aborted), a), vec![]);
        assert_eq!(c.rejections.total(), 1, "counted as an outcome for no transaction");
    }

    /// The network duplicates a share's `Prepare`: one copy is refused by a switch (the
    /// transaction aborts), the other reaches the node, which votes. Before, that vote was
    /// ignored and the node held its prepared writes for good (fuzz seeds 1049 and 1052 then
    /// ran until the event bound, every later writer of those keys refused); the controller
    /// now ends such a vote with `Aborted`, during the coordination and after it.
    #[test]
    fn a_vote_from_a_copy_of_a_refused_share_is_ended() {
        let (mut c, step) = two_node_setup();
        let (a, b) = (c.hierarchy.node_of(5), c.hierarchy.node_of(1_599));
        let ops = vec![Op::write(5, [2; 48]), Op::write(1_599, [1; 48])];
        let msg = Message { ts: 8, status: Status::Coordinate, client: 16, seq: 1, ops };
        step(&mut c, &msg, 16);
        let share = |keys: u128, status| Message { status, ops: vec![Op::write(keys, [0; 48])], ..msg.clone() };
        assert_eq!(step(&mut c, &share(1_599, Status::Voted), b), vec![]);
        let mut sent = step(&mut c, &share(5, Status::SwitchAborted), a);
        sent.sort();
        assert_eq!(sent, vec![(a, Status::Aborted, vec![5]), (b, Status::Aborted, vec![1_599])]);
        assert_eq!(step(&mut c, &share(5, Status::Voted), a), vec![(a, Status::Aborted, vec![5])], "the copy's vote");
        assert_eq!(step(&mut c, &share(1_599, Status::Aborted), b), vec![], "a has not confirmed");
        let answer = step(&mut c, &share(5, Status::Aborted), a);
        assert_eq!(answer, vec![(16, Status::SwitchAborted, vec![5])]);
        assert!(c.is_idle());
        assert_eq!(step(&mut c, &share(5, Status::Voted), a), vec![(a, Status::Aborted, vec![5])], "once decided too");
    }

    /// Fuzz seed 1980: a copy of a refused share left a vote at its node, and its `Voted` was
    /// lost, so the controller never heard of it; the node held key 306 for good and every
    /// later writer of it was refused. The refusal is now confirmed by the node, and the
    /// confirmation sent again whenever the client resolves, until the node answers.
    #[test]
    fn a_switch_refusal_is_confirmed_by_the_node_even_when_the_copys_vote_is_lost() {
        let (mut c, step) = two_node_setup();
        let (a, b) = (c.hierarchy.node_of(5), c.hierarchy.node_of(1_599));
        let ops = vec![Op::write(5, [2; 48]), Op::write(1_599, [1; 48])];
        let msg = Message { ts: 8, status: Status::Coordinate, client: 16, seq: 1, ops };
        step(&mut c, &msg, 16);
        let share = |keys: u128, status| Message { status, ops: vec![Op::write(keys, [0; 48])], ..msg.clone() };
        assert_eq!(step(&mut c, &share(1_599, Status::Aborted), b), vec![], "b's node refused");
        assert_eq!(step(&mut c, &share(5, Status::SwitchAborted), a), vec![(a, Status::Aborted, vec![5])]);
        // That `Aborted` is lost: the client resolves, and the confirmation goes again.
        let resolve = Message { status: Status::Resolve, ..msg.clone() };
        assert_eq!(step(&mut c, &resolve, 16), vec![(a, Status::Aborted, vec![5])]);
        assert!(!c.is_idle(), "no answer to the client before a's node confirms");
        let answer = step(&mut c, &share(5, Status::Aborted), a);
        assert_eq!(answer, vec![(16, Status::Aborted, vec![1_599])], "the first refusal's status");
        assert!(c.is_idle());
    }

    #[test]
    fn a_restarted_controller_rebuilds_the_decision_from_the_nodes() {
        let (mut c, step) = two_node_setup();
        let (a, b) = (c.hierarchy.node_of(5), c.hierarchy.node_of(1_599));
        let ops = vec![Op::write(5, [2; 48]), Op::write(1_599, [1; 48])];
        // The client resolves at a controller that never saw the transaction: every node is asked.
        let msg = Message { ts: 8, status: Status::Resolve, client: 16, seq: 1, ops };
        let mut sent = step(&mut c, &msg, 16);
        sent.sort();
        assert_eq!(sent, vec![(a, Status::Resolve, vec![5]), (b, Status::Resolve, vec![1_599])]);
        let share = |keys: u128, status| Message { status, ops: vec![Op::write(keys, [0; 48])], ..msg.clone() };
        // a had committed (the lost controller's decision), b still holds its vote.
        assert_eq!(step(&mut c, &share(5, Status::Committed), a), vec![]);
        assert_eq!(step(&mut c, &share(1_599, Status::Voted), b), vec![(b, Status::Commit, vec![1_599])]);
        assert_eq!(step(&mut c, &share(1_599, Status::Committed), b)[0].1, Status::Committed);
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

    #[test]
    fn a_controller_restored_from_its_records_has_the_same_transaction_log_and_goes_on_the_same() {
        use crate::wire::{value_of, FLAG_SERVED, FLAG_SHARE};
        let h = Arc::new(Hierarchy::new(1_600, 0).unwrap());
        let (a, b) = (h.node_of(5), h.node_of(1_599));
        let served = |key: u128, version: u64| Op { flags: FLAG_SERVED, ..Op::write(key, value_of(key, version)) };
        let served = |key, version| Op { op_type: OpType::Read, ..served(key, version) };
        let msg = |ts: u32, status, ops: Vec<Op>| Message { ts, status, client: 16, seq: 1, ops };
        // T8 writes 5 and 1_599 (two nodes); T12 writes 5 alone and reads 7 from a switch;
        // T16 is a reader over both nodes, sent as shares by its client (never coordinated); T20
        // a share a switch accepted that never committed. Each message comes from the host that
        // would send it.
        let w = |key: u128, before: u64| Op::write(key, value_of(key, before));
        let share = |op: Op| Op { flags: op.flags | FLAG_SHARE, ..op };
        let inputs: Vec<(Message, u16)> = vec![
            (msg(8, Status::Coordinate, vec![w(5, 0), w(1_599, 0)]), 16),
            (msg(8, Status::CommitLog, vec![w(5, 0)]), a),
            (msg(12, Status::Log, vec![served(7, 4)]), 0),
            (msg(12, Status::CommitLog, vec![w(5, 8)]), a),
            (msg(16, Status::Log, vec![share(served(6, 0))]), 0),
            (msg(8, Status::CommitLog, vec![w(1_599, 0)]), b),
            (msg(16, Status::Log, vec![share(served(1_598, 0))]), 0),
            (msg(20, Status::Log, vec![served(9, 0), w(10, 0)]), 0),
        ];
        let mut live = Controller::new(20, Arc::clone(&h)).logging();
        let k_is_first_share_of_8 = |m: &Message| m.ts == 8 && m.status == Status::CommitLog && m.ops[0].key == 5;
        let mut records = Vec::new();
        // After each input: the records so far, and the log, spans and shares confirmed then.
        let mut states = Vec::new();
        for (m, from) in &inputs {
            let mut out = HostOutbox::<Controller>::default();
            live.handle_datagram(0, &m.datagram(*from, 20), &mut out);
            records.extend(out.log);
            states.push((records.len(), live.log.clone(), live.spans.clone(), live.confirmed.clone()));
            if k_is_first_share_of_8(m) {
                let t8 = &live.txn_log().records[&8];
                assert!(t8.outcome == Outcome::Unknown && t8.writes.is_empty(), "one share's writes are held: {t8:?}");
                assert_eq!(live.held[&8], vec![(5, 0, 8)]);
            }
        }
        assert_eq!(live.txn_log().records[&8].outcome, Outcome::Committed, "both shares confirmed");
        assert_eq!(live.txn_log().records[&8].writes, vec![(5, 0, 8), (1_599, 0, 8)]);
        assert_eq!(live.txn_log().records[&12].outcome, Outcome::Committed);
        assert_eq!(live.txn_log().records[&16].outcome, Outcome::Unknown, "a reader's shares confirm nothing");
        assert_eq!(live.txn_log().records[&20].outcome, Outcome::Unknown);
        assert_eq!(records.len(), 1 + 7, "a span per coordinated transaction, a copy per copy");
        // A crash after any input: the restored controller has the log the live one had then…
        for (k, (n, log, spans, confirmed)) in states.iter().enumerate() {
            let mut back = Controller::restore(20, Arc::clone(&h), &records[..*n]).restarted();
            assert_eq!((&back.log, &back.spans, &back.confirmed), (log, spans, confirmed), "after input {k}");
            assert!(back.log.records.values().all(|r| r.outcome == Outcome::Committed || r.writes.is_empty()));
            // …and the copies that come after the crash make it end with the live one's log
            // (T8's second share confirms it only if the span came back: no early commit).
            for (m, from) in inputs[k + 1..].iter().filter(|(m, _)| matches!(m.status, Status::Log | Status::CommitLog))
            {
                back.handle_datagram(0, &m.datagram(*from, 20), &mut HostOutbox::<Controller>::default());
            }
            assert_eq!(back.txn_log(), live.txn_log(), "a crash after input {k}, the rest of the copies");
        }
        // A controller that does not log (every other variant) writes nothing.
        let mut plain = Controller::new(20, h);
        let mut out = HostOutbox::<Controller>::default();
        plain.handle_datagram(0, &inputs[0].0.datagram(16, 20), &mut out);
        assert!(out.log.is_empty() && !out.sends.is_empty());
    }
}
