//! The simulated rack: nodes with cores, links and the switch, driven by one event heap.
//!
//! ## Time and order
//!
//! Virtual time is integer nanoseconds. Events wait in a binary heap ordered by (time, sequence
//! number), the sequence number being the order in which they were scheduled, so ties break the
//! same way every run: one seed, one history, one trace hash.
//!
//! ## CPU
//!
//! Every node has one core per worker. A handler runs on a core ([`pisadb_node::Route`]: the
//! worker's own core for its transaction's events, the first free core for requests from other
//! nodes); if the core is busy the event waits until it is free. The handler's effects on the
//! node's state happen when it starts; its outputs (datagrams, timers, commits) take effect when
//! it ends, `cpu_ns` later, and the core is busy until then.
//!
//! ## Network and switch
//!
//! A datagram leaves a node after its NIC latency, is serialized on the node's uplink behind
//! earlier frames, propagates, and enters the switch model, which executes or forwards it and
//! says when each output leaves; the output is serialized on the downlink to its destination,
//! propagates, and reaches the node after the NIC latency. See [`crate::net`].
//!
//! ## Faults
//!
//! A rack may be given a [`Faults`] plan ([`Cluster::inject`]): lossy, duplicating, reordering
//! and slow links, and crashes of nodes and of the switch, each restarted from the nodes'
//! write-ahead logs, which the cluster keeps as the nodes' disks. A crash discards the outputs
//! of a handler that had not finished (its records were not durable). Events meant for a
//! crashed incarnation (its timers, the switch's wake-ups) are dropped by an epoch number.
//! A node that crashed after logging a switch transaction commits it after its restart; the
//! record a checker needs for it was kept when it was logged ([`Outbox::committing`]).
//!
//! ## Bounds
//!
//! A run stops at its end time, or with [`SimError::StepLimit`] when it processed more events
//! than its limit (a livelock or a runaway configuration), or with [`SimError::Stalled`] when
//! the measurement window saw no commit at all.

use crate::faults::{FaultStats, Faults, Target};
use crate::net::{Endpoint, LinkParams, Topology};
use crate::switch::RackSwitch;
use hdrhistogram::Histogram;
use pisadb_core::rng::SeededRng;
use pisadb_core::{Nanos, Scheduler, TupleKey};
use pisadb_layout::Layout;
use pisadb_node::{Finished, LogRecord, Node, Outbox, PhaseTimes, Record, Route, Timer};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a run did not finish normally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// More events than the step limit: the run is livelocked or far larger than intended.
    StepLimit {
        /// Events processed.
        events: u64,
        /// Virtual time reached.
        at_ns: Nanos,
    },
    /// No transaction committed in the measurement window.
    Stalled {
        /// Virtual time reached.
        at_ns: Nanos,
    },
    /// The configuration cannot run.
    Config(String),
    /// A crashed node or switch could not be restarted from the logs.
    Recovery(String),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::StepLimit { events, at_ns } => write!(
                f,
                "step limit reached: {events} events by {at_ns} ns of virtual time (livelock, or raise the limit)"
            ),
            SimError::Stalled { at_ns } => {
                write!(f, "no transaction committed in the measurement window (by {at_ns} ns)")
            }
            SimError::Config(why) => write!(f, "{why}"),
            SimError::Recovery(why) => write!(f, "recovery failed: {why}"),
        }
    }
}

impl std::error::Error for SimError {}

enum Event {
    NodeTimer { node: u16, epoch: u32, timer: Timer },
    Deliver { node: u16, bytes: Vec<u8> },
    AtSwitch { from: u16, bytes: Vec<u8> },
    SwitchWake { epoch: u32 },
    WindowStart,
    Crash(Target),
    Restart(Target),
}

/// Builds what a crash destroyed: a node from its log, the switch from every node's log.
pub trait Restarts {
    /// Node `id`, recovered from its log.
    fn node(&mut self, id: u16, log: &[LogRecord]) -> Result<Node, String>;
    /// The switch, with its program and the hot set's initial values, rebuilt from `logs`
    /// (one per node); nodes are attached by the caller.
    fn switch(&mut self, logs: &[Vec<LogRecord>]) -> Result<RackSwitch, String>;
}

/// The fault plan in force and what it needs.
struct FaultState {
    plan: Faults,
    rng: SeededRng,
    restarts: Box<dyn Restarts>,
    stats: FaultStats,
    /// When progress is demanded from: the network has healed and every restart is done.
    healthy_from: Nanos,
}

/// What the measurement window saw.
#[derive(Clone, Debug)]
pub struct Window {
    /// Committed transactions that ended in the window.
    pub committed: u64,
    /// Of those, transactions whose tuples were all hot.
    pub hot_committed: u64,
    /// Of those, transactions executed as one switch transaction.
    pub switch_committed: u64,
    /// Aborted attempts in the window.
    pub aborts: u64,
    /// Latency from first attempt to commit, in ns.
    pub latency: Histogram<u64>,
    /// Sum of the committed transactions' latencies, ns.
    pub latency_sum_ns: u64,
    /// Sum of their phase times (where the latency went).
    pub phases_sum: PhaseTimes,
    /// Switch pipeline passes in the window.
    pub switch_passes: u64,
    /// Recirculations in the window.
    pub recirculations: u64,
    /// Packets the switch dropped in the window (full recirculation queues, …).
    pub switch_drops: u64,
}

/// A simulated rack.
pub struct Cluster {
    nodes: Vec<Node>,
    /// Per node, per core: busy until.
    cores: Vec<Vec<Nanos>>,
    switch: RackSwitch,
    topology: Topology,
    nic_ns: Nanos,
    events: Scheduler<Event>,
    now: Nanos,
    processed: u64,
    switch_wake: Option<Nanos>,
    trace: u64,
    window_start: Option<Nanos>,
    aborts_at_start: u64,
    switch_at_start: (u64, u64, u64),
    window: Window,
    records: Vec<Record>,
    stopping: bool,
    faults: Option<FaultState>,
    /// Each node's write-ahead log (its disk: survives crashes).
    logs: Vec<Vec<LogRecord>>,
    /// Per node: the incarnation's number, and whether it is down.
    node_epoch: Vec<u32>,
    node_down: Vec<bool>,
    switch_epoch: u32,
    switch_down: bool,
    /// Records of logged switch transactions not finished yet, by transaction id.
    committing: BTreeMap<u64, Record>,
    /// Per node, per worker: the last commit.
    last_commit: Vec<Vec<Nanos>>,
    /// The longest a worker went without committing while the rack was healthy: (gap, node,
    /// worker).
    longest_gap: (Nanos, u16, u16),
    failure: Option<String>,
}

/// FNV-1a, 64 bit: a stable hash for the trace (the standard library's may change).
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Cluster {
    /// A rack of `nodes` (node `i` has id `i`) on one switch, links with `link`.
    pub fn new(nodes: Vec<Node>, switch: RackSwitch, link: &LinkParams) -> Self {
        let n = nodes.len() as u16;
        let cores = nodes.iter().map(|node| vec![0; usize::from(node.config().workers)]).collect();
        let mut switch = switch;
        for id in 0..n {
            switch.attach(id);
        }
        Cluster {
            nodes,
            cores,
            switch,
            topology: Topology::rack(n, link),
            nic_ns: link.nic_ns,
            events: Scheduler::new(),
            now: 0,
            processed: 0,
            switch_wake: None,
            trace: 0xcbf2_9ce4_8422_2325,
            window_start: None,
            aborts_at_start: 0,
            switch_at_start: (0, 0, 0),
            window: Window {
                committed: 0,
                hot_committed: 0,
                switch_committed: 0,
                aborts: 0,
                // 1 ns to 100 s at 3 significant figures; longer latencies are clamped.
                latency: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds"),
                latency_sum_ns: 0,
                phases_sum: PhaseTimes::default(),
                switch_passes: 0,
                recirculations: 0,
                switch_drops: 0,
            },
            records: Vec::new(),
            stopping: false,
            faults: None,
            logs: vec![Vec::new(); usize::from(n)],
            node_epoch: vec![0; usize::from(n)],
            node_down: vec![false; usize::from(n)],
            switch_epoch: 0,
            switch_down: false,
            committing: BTreeMap::new(),
            last_commit: vec![Vec::new(); usize::from(n)],
            longest_gap: (0, 0, 0),
            failure: None,
        }
    }

    /// Subjects the rack to `faults`, restarting what crashes with `restarts`. Call before
    /// [`Cluster::run`]. The nodes should log (their logs are what restarts read).
    pub fn inject(&mut self, faults: Faults, restarts: Box<dyn Restarts>) {
        for c in &faults.crashes {
            self.schedule(c.at_ns, Event::Crash(c.target));
            self.schedule(c.at_ns + c.down_ns, Event::Restart(c.target));
        }
        let rng = pisadb_core::rng::derive(faults.seed, "faults");
        let healthy_from = faults.heal_at_ns.max(faults.last_restart_ns());
        self.faults = Some(FaultState { plan: faults, rng, restarts, stats: FaultStats::default(), healthy_from });
    }

    /// What the faults did (zeros without a plan).
    pub fn fault_stats(&self) -> FaultStats {
        self.faults.as_ref().map(|f| f.stats.clone()).unwrap_or_default()
    }

    /// Each node's write-ahead log, by node id.
    pub fn logs(&self) -> &[Vec<LogRecord>] {
        &self.logs
    }

    /// Records of switch transactions that count as committed (logged) but whose node has not
    /// reported them yet: empty once the rack is drained, unless one was lost.
    pub fn unfinished_commits(&self) -> impl Iterator<Item = &Record> {
        self.committing.values()
    }

    /// The longest time a worker went without a commit while the rack was healthy (after
    /// the fault plan healed), up to the end of the measured window: (ns, node, worker).
    pub fn longest_progress_gap(&self) -> (Nanos, u16, u16) {
        self.longest_gap
    }

    /// Runs from time 0: warm-up until `warmup_ns`, then measures until `warmup_ns + measure_ns`.
    pub fn run(&mut self, warmup_ns: Nanos, measure_ns: Nanos, max_events: u64) -> Result<&Window, SimError> {
        for id in 0..self.nodes.len() {
            let mut out = Outbox::default();
            self.nodes[id].start(0, &mut out);
            self.last_commit[id] = vec![0; usize::from(self.nodes[id].config().workers)];
            self.apply(id as u16, 0, 0, out);
        }
        self.schedule(warmup_ns, Event::WindowStart);
        let end = warmup_ns + measure_ns;
        self.run_until(end, max_events)?;
        for node in 0..self.last_commit.len() {
            for worker in 0..self.last_commit[node].len() {
                self.note_progress(end, node as u16, worker as u16);
            }
        }
        let (passes, recircs, drops) = self.switch_counters();
        // A restarted switch counts from zero again.
        self.window.aborts = self.total_aborts().saturating_sub(self.aborts_at_start);
        self.window.switch_passes = passes.saturating_sub(self.switch_at_start.0);
        self.window.recirculations = recircs.saturating_sub(self.switch_at_start.1);
        self.window.switch_drops = drops.saturating_sub(self.switch_at_start.2);
        if self.window.committed == 0 {
            return Err(SimError::Stalled { at_ns: self.now });
        }
        Ok(&self.window)
    }

    /// Stops the workers from starting new transactions and runs until every transaction in
    /// flight has finished and the network is empty (for end-of-run checks).
    pub fn drain(&mut self, max_events: u64) -> Result<(), SimError> {
        self.stopping = true;
        for node in &mut self.nodes {
            node.stop();
        }
        self.run_until(Nanos::MAX, max_events)
    }

    fn run_until(&mut self, end: Nanos, max_events: u64) -> Result<(), SimError> {
        while let Some((at, event)) = self.events.pop_due(end) {
            self.now = at;
            self.processed += 1;
            if self.processed > max_events {
                return Err(SimError::StepLimit { events: self.processed, at_ns: at });
            }
            self.handle(at, event);
            if let Some(why) = self.failure.take() {
                return Err(SimError::Recovery(why));
            }
        }
        if end != Nanos::MAX {
            self.now = end;
        }
        Ok(())
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        self.events.push(at, event);
    }

    fn handle(&mut self, now: Nanos, event: Event) {
        match event {
            Event::NodeTimer { node, epoch, timer } => {
                if self.node_down[usize::from(node)] || epoch != self.node_epoch[usize::from(node)] {
                    return; // set by an incarnation that crashed
                }
                self.trace = fnv(
                    self.trace,
                    &[&now.to_le_bytes()[..], &node.to_le_bytes(), format!("{timer:?}").as_bytes()].concat(),
                );
                let core = usize::from(timer.worker());
                if self.wait_for_core(now, node, core, || Event::NodeTimer { node, epoch, timer }) {
                    return;
                }
                let mut out = Outbox::default();
                self.nodes[usize::from(node)].handle_timer(now, timer, &mut out);
                self.finish_handler(node, core, now, out);
            }
            Event::Deliver { node, bytes } => {
                if self.node_down[usize::from(node)] {
                    return self.count(|s| s.to_down += 1);
                }
                let core = match self.nodes[usize::from(node)].route(&bytes) {
                    Route::Worker(w) => usize::from(w),
                    Route::AnyCore => self.first_free_core(node),
                };
                if self.cores[usize::from(node)][core] > now {
                    let at = self.cores[usize::from(node)][core];
                    self.schedule(at, Event::Deliver { node, bytes });
                    return;
                }
                self.trace_event(now, node, b"deliver", &bytes);
                let mut out = Outbox::default();
                self.nodes[usize::from(node)].handle_datagram(now, &bytes, &mut out);
                self.finish_handler(node, core, now, out);
            }
            Event::AtSwitch { from, bytes } => {
                if self.switch_down {
                    return self.count(|s| s.to_down += 1);
                }
                self.trace_event(now, from, b"switch", &bytes);
                self.switch.handle_datagram(now, from, &bytes);
                self.drain_switch(now);
            }
            Event::SwitchWake { epoch } => {
                if epoch != self.switch_epoch {
                    return;
                }
                self.switch_wake = None;
                self.switch.handle_timeout(now);
                self.drain_switch(now);
            }
            Event::WindowStart => {
                self.window_start = Some(now);
                self.aborts_at_start = self.total_aborts();
                self.switch_at_start = self.switch_counters();
            }
            Event::Crash(target) => {
                self.trace_event(now, 0, format!("crash {target}").as_bytes(), &[]);
                self.crash(target);
            }
            Event::Restart(target) => {
                self.trace_event(now, 0, format!("restart {target}").as_bytes(), &[]);
                if let Err(why) = self.restart(now, target) {
                    self.failure = Some(format!("{target} at {now} ns: {why}"));
                }
            }
        }
    }

    fn count(&mut self, what: impl FnOnce(&mut FaultStats)) {
        if let Some(f) = self.faults.as_mut() {
            what(&mut f.stats);
        }
    }

    fn crash(&mut self, target: Target) {
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                self.node_down[i] = true;
                self.node_epoch[i] += 1;
                self.count(|s| s.node_crashes += 1);
            }
            Target::Switch => {
                self.switch_down = true;
                self.switch_epoch += 1;
                self.switch_wake = None;
                self.count(|s| s.switch_crashes += 1);
            }
        }
    }

    fn restart(&mut self, now: Nanos, target: Target) -> Result<(), String> {
        let Some(f) = self.faults.as_mut() else { return Err("no restart plan".into()) };
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                let mut node = f.restarts.node(n, &self.logs[i])?;
                if self.stopping {
                    node.stop();
                }
                node.fence_switch(self.rebuilt_switch_epoch());
                let mut out = Outbox::default();
                node.start(now, &mut out);
                self.nodes[i] = node;
                self.cores[i].iter_mut().for_each(|c| *c = now);
                self.node_down[i] = false;
                self.apply(n, now, now, out);
            }
            Target::Switch => {
                let mut switch = f.restarts.switch(&self.logs)?;
                for id in 0..self.nodes.len() as u16 {
                    switch.attach(id);
                }
                // The control plane collected every log: each node has fenced off the crashed
                // switch, whose answers may still be on the wire (a node down now is fenced as
                // it restarts).
                let epoch = self.rebuilt_switch_epoch();
                if let RackSwitch::P4db(s) = &mut switch {
                    s.program_mut().set_epoch(epoch);
                }
                for (node, down) in self.nodes.iter_mut().zip(&self.node_down) {
                    if !down {
                        node.fence_switch(epoch);
                    }
                }
                self.switch = switch;
                self.switch_down = false;
            }
        }
        Ok(())
    }

    /// The epoch of the switch rebuilt after the latest crash: its number of crashes.
    fn rebuilt_switch_epoch(&self) -> u16 {
        u16::try_from(self.switch_epoch).unwrap_or(u16::MAX)
    }

    /// Whether a crash of `target` planned in `[start, end)` cuts short what happens then.
    fn crashes_within(&self, target: Target, start: Nanos, end: Nanos) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.plan.crashes.iter().any(|c| c.target == target && (start..end).contains(&c.at_ns)))
    }

    /// The copies of a datagram that enter a link to or from `node` at `now`: none if lost,
    /// two if duplicated; each with its delay before the link (in order) and after it
    /// (overtaking, with `reorder`).
    fn network_fate(&mut self, now: Nanos, node: u16) -> [Option<(Nanos, Nanos)>; 2] {
        let Some(f) = self.faults.as_mut() else { return [Some((0, 0)), None] };
        let slow = f.plan.slow_ns(node, now);
        if !f.plan.network_faulty(now) {
            return [Some((slow, 0)), None];
        }
        if f.rng.random_bool(f.plan.loss) {
            f.stats.lost += 1;
            return [None, None];
        }
        let (jitter, reorder) = (f.plan.jitter_ns, f.plan.reorder);
        let delay = |rng: &mut SeededRng| {
            let j = rng.random_range(0..=jitter);
            if reorder {
                (slow, j)
            } else {
                (slow + j, 0)
            }
        };
        let first = Some(delay(&mut f.rng));
        let second = f.rng.random_bool(f.plan.duplicate).then(|| delay(&mut f.rng));
        if second.is_some() {
            f.stats.duplicated += 1;
        }
        [first, second]
    }

    /// Notes that `worker` of `node` made progress at `now` (a commit, or the end of the
    /// window), measuring the gap since its last commit while the rack was healthy.
    fn note_progress(&mut self, now: Nanos, node: u16, worker: u16) {
        let healthy_from = self.faults.as_ref().map_or(0, |f| f.healthy_from);
        let Some(last) = self.last_commit.get_mut(usize::from(node)).and_then(|w| w.get_mut(usize::from(worker)))
        else {
            return;
        };
        if now >= healthy_from {
            // `last` may be later than `now`: a commit is noted when its handler ends.
            let gap = now.saturating_sub((*last).max(healthy_from));
            if gap > self.longest_gap.0 {
                self.longest_gap = (gap, node, worker);
            }
        }
        *last = now;
    }

    /// Folds one event into the trace hash (no allocation: this is the simulator's hot loop).
    fn trace_event(&mut self, now: Nanos, who: u16, what: &[u8], bytes: &[u8]) {
        let h = fnv(self.trace, &now.to_le_bytes());
        let h = fnv(h, &who.to_le_bytes());
        self.trace = fnv(fnv(h, what), bytes);
    }

    /// If `core` of `node` is busy, re-schedules the event for when it is free and says so.
    fn wait_for_core(&mut self, now: Nanos, node: u16, core: usize, event: impl FnOnce() -> Event) -> bool {
        let free = self.cores[usize::from(node)][core];
        if free > now {
            self.schedule(free, event());
            return true;
        }
        false
    }

    fn first_free_core(&self, node: u16) -> usize {
        let cores = &self.cores[usize::from(node)];
        (0..cores.len()).min_by_key(|&c| (cores[c], c)).unwrap_or(0)
    }

    fn finish_handler(&mut self, node: u16, core: usize, now: Nanos, out: Outbox) {
        let end = now + out.cpu_ns;
        self.cores[usize::from(node)][core] = end;
        self.apply(node, now, end, out);
    }

    /// Carries out the outputs of a handler that ran from `start` to `end`: its log records
    /// become durable and its datagrams leave at `end`, unless the node crashed first.
    fn apply(&mut self, node: u16, start: Nanos, end: Nanos, out: Outbox) {
        if self.crashes_within(Target::Node(node), start, end) {
            return self.count(|s| s.cut_short += 1);
        }
        self.logs[usize::from(node)].extend(out.log);
        for record in out.committing {
            self.committing.insert(record.id, *record);
        }
        for done in out.recovered {
            self.finish_recovered(done);
        }
        for send in out.sends {
            let fates = self.network_fate(end, node);
            let link = self.topology.link(Endpoint::Host(node), Endpoint::Switch(0)).expect("every node has an uplink");
            let arrivals = fates
                .map(|f| f.map(|(before, after)| link.carry(end + self.nic_ns + before, send.bytes.len()) + after));
            let [first, copy] = arrivals;
            if let Some(at) = copy {
                self.schedule(at, Event::AtSwitch { from: node, bytes: send.bytes.clone() });
            }
            if let Some(at) = first {
                self.schedule(at, Event::AtSwitch { from: node, bytes: send.bytes });
            }
        }
        let epoch = self.node_epoch[usize::from(node)];
        for (at, timer) in out.timers {
            self.schedule(at.max(end), Event::NodeTimer { node, epoch, timer });
        }
        for f in out.finished {
            self.record(node, end, f);
        }
    }

    /// A switch transaction logged before its node crashed committed after the restart: its
    /// record, kept when it was logged, is completed with the answer.
    fn finish_recovered(&mut self, done: pisadb_node::RecoveredCommit) {
        let Some(mut record) = self.committing.remove(&done.txn) else {
            self.failure = Some(format!("transaction {:#x} committed after a restart but was never logged", done.txn));
            return;
        };
        record.outputs = done.outputs;
        record.gid = Some(done.gid);
        if let Some(h) = record.history.as_mut() {
            h.writes.extend(done.inserted.iter().map(|&(key, _)| (key, 0)));
        }
        record.inserted = done.inserted;
        self.records.push(record);
    }

    fn record(&mut self, node: u16, end: Nanos, f: Finished) {
        if let Some(record) = f.record {
            self.committing.remove(&record.id);
            self.records.push(*record);
        }
        if !self.stopping {
            self.note_progress(end, node, f.worker);
        }
        if self.window_start.is_none() || self.stopping {
            return;
        }
        self.window.committed += 1;
        self.window.hot_committed += u64::from(f.hot);
        self.window.switch_committed += u64::from(f.on_switch);
        self.window.latency.saturating_record(end - f.started);
        self.window.latency_sum_ns += end - f.started;
        self.window.phases_sum += f.phases;
    }

    fn drain_switch(&mut self, now: Nanos) {
        while let Some(t) = self.switch.poll_transmit() {
            if self.crashes_within(Target::Switch, now, t.at_ns) {
                self.count(|s| s.cut_short += 1);
                continue; // still inside the switch when it crashed
            }
            let fates = self.network_fate(t.at_ns, t.dst);
            let Some(link) = self.topology.link(Endpoint::Switch(0), Endpoint::Host(t.dst)) else { continue };
            let arrivals = fates.map(|f| f.map(|(before, after)| link.carry(t.at_ns + before, t.bytes.len()) + after));
            let [first, copy] = arrivals;
            if let Some(at) = copy {
                self.schedule(at + self.nic_ns, Event::Deliver { node: t.dst, bytes: t.bytes.clone() });
            }
            if let Some(at) = first {
                self.schedule(at + self.nic_ns, Event::Deliver { node: t.dst, bytes: t.bytes });
            }
        }
        if let Some(at) = self.switch.poll_timeout() {
            let at = at.max(now);
            if self.switch_wake.is_none_or(|w| at < w) {
                self.switch_wake = Some(at);
                self.schedule(at, Event::SwitchWake { epoch: self.switch_epoch });
            }
        }
    }

    fn total_aborts(&self) -> u64 {
        // A restarted node counts from zero again; the sum may shrink (window figures saturate).
        self.nodes.iter().map(|n| n.stats().aborts).sum()
    }

    fn switch_counters(&self) -> (u64, u64, u64) {
        let s = self.switch.stats();
        (s.passes, s.recirculations, s.dropped.values().sum())
    }

    /// The hash of every event processed so far: equal for equal seeds.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.processed
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The switch.
    pub fn switch(&self) -> &RackSwitch {
        &self.switch
    }

    /// Records of committed transactions (with `record_history`).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The value of hot tuple `key` in the switch's registers under `layout`.
    pub fn switch_value(&self, layout: &Arc<Layout>, key: TupleKey) -> Option<i64> {
        let p = layout.get(key)?;
        self.switch.register_value(p.register, p.index)
    }
}
