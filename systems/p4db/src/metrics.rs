//! What a P4DB rack's run measures and records: the [`Observer`] of its nodes' events.
//!
//! The measurement [`Window`] counts commits (hot, on the switch), aborts, latency and its
//! phases, and the switch's passes between the window's start and end. For the fuzzer's
//! oracles it keeps each committed transaction's [`Record`], the records of switch
//! transactions logged but not answered yet (they count as committed once logged), and the
//! longest time a worker went without committing once the rack was healthy.

use crate::node::{Finished, Node, NodeEvent, PhaseTimes, Record, RecoveredCommit};
use crate::switch::RackSwitch;
use pisadb_core::Nanos;
use pisadb_report::latency::Latency;
use pisadb_sim::world::{Moment, Observer};
use pisadb_switch::SwitchDevice;
use std::collections::BTreeMap;

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
    /// Transactions begun in the window.
    pub started: u64,
    /// Transactions skipped after an abort in the window (the prototype's engine).
    pub skipped: u64,
    /// Latency from first attempt to commit, in ns.
    pub latency: Latency,
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
    /// Instructions the engine did not execute because they lay beyond their packet's first
    /// pass (the `ideal` layout only).
    pub first_pass_dropped_ops: u64,
    /// Switch transactions that lost an instruction that way.
    pub first_pass_truncated_txns: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            committed: 0,
            hot_committed: 0,
            switch_committed: 0,
            aborts: 0,
            started: 0,
            skipped: 0,
            latency: Latency::new(),
            latency_sum_ns: 0,
            phases_sum: PhaseTimes::default(),
            switch_passes: 0,
            recirculations: 0,
            switch_drops: 0,
            first_pass_dropped_ops: 0,
            first_pass_truncated_txns: 0,
        }
    }
}

/// The observer of a P4DB rack.
#[derive(Debug, Default)]
pub struct Metrics {
    /// What the window saw (complete once the run returned).
    window: Window,
    /// (aborts, begun, skipped) summed over the nodes when the window began.
    aborts_at_start: (u64, u64, u64),
    /// Switch (passes, recirculations, drops) when the window began.
    switch_at_start: (u64, u64, u64),
    /// The engine's first-pass-only (dropped instructions, truncated transactions) when the
    /// window began.
    first_pass_at_start: (u64, u64),
    /// Records of committed transactions (with `record_history`).
    records: Vec<Record>,
    /// Records of logged switch transactions not finished yet, by transaction id.
    committing: BTreeMap<u64, Record>,
    /// Per node, per worker: the last commit.
    last_commit: Vec<Vec<Nanos>>,
    /// The longest a worker went without committing while the rack was healthy: (gap, node,
    /// worker).
    longest_gap: (Nanos, u16, u16),
}

impl Metrics {
    /// What the measurement window saw.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// Records of committed transactions (with `record_history`).
    pub fn records(&self) -> &[Record] {
        &self.records
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

    /// Notes that `worker` of `node` made progress at `now` (a commit, or the end of the
    /// window), measuring the gap since its last commit while the rack was healthy.
    fn note_progress(&mut self, now: Nanos, healthy_from: Nanos, node: u16, worker: u16) {
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

    /// A switch transaction logged before its node crashed committed after the restart: its
    /// record, kept when it was logged, is completed with the answer.
    fn finish_recovered(&mut self, done: RecoveredCommit) -> Result<(), String> {
        let Some(mut record) = self.committing.remove(&done.txn) else {
            return Err(format!("transaction {:#x} committed after a restart but was never logged", done.txn));
        };
        record.outputs = done.outputs;
        record.gid = Some(done.gid);
        if let Some(h) = record.history.as_mut() {
            h.writes.extend(done.inserted.iter().map(|&(key, _)| (key, 0)));
        }
        record.inserted = done.inserted;
        self.records.push(record);
        Ok(())
    }

    fn finished(&mut self, node: u16, f: Finished, moment: Moment) {
        if let Some(record) = f.record {
            self.committing.remove(&record.id);
            self.records.push(*record);
        }
        if !moment.stopping {
            self.note_progress(moment.at, moment.healthy_from, node, f.worker);
        }
        if !moment.in_window || moment.stopping {
            return;
        }
        let latency_ns = moment.at - f.started;
        self.window.committed += 1;
        self.window.hot_committed += u64::from(f.hot);
        self.window.switch_committed += u64::from(f.on_switch);
        self.window.latency.record_ns(latency_ns);
        self.window.latency_sum_ns += latency_ns;
        self.window.phases_sum += f.phases;
    }
}

/// (aborts, begun, skipped) summed over the nodes.
fn total_aborts(nodes: &[Node]) -> (u64, u64, u64) {
    // A restarted node counts from zero again; the sum may shrink (window figures saturate).
    let sum = |f: fn(&crate::node::NodeStats) -> u64| nodes.iter().map(|n| f(n.stats())).sum();
    (sum(|s| s.aborts), sum(|s| s.begun), sum(|s| s.skipped))
}

/// The P4DB engine's (instructions dropped, transactions truncated) under
/// [`first_pass_only`](crate::programs::p4db::P4dbConfig::first_pass_only); zeros otherwise.
fn first_pass_counters(switches: &[&RackSwitch]) -> (u64, u64) {
    match switches[0] {
        RackSwitch::P4db(s) => (s.program().first_pass_dropped_ops, s.program().first_pass_truncated_txns),
        RackSwitch::LockManager(_) => (0, 0),
    }
}

/// The rack's switch's (passes, recirculations, drops).
fn switch_counters(switches: &[&RackSwitch]) -> (u64, u64, u64) {
    let s = switches[0].stats();
    (s.passes, s.recirculations, s.dropped.values().sum())
}

impl Observer<Node, RackSwitch> for Metrics {
    fn on_event(&mut self, node: u16, event: NodeEvent, moment: Moment) -> Result<(), String> {
        match event {
            NodeEvent::Committing(record) => {
                self.committing.insert(record.id, *record);
            }
            NodeEvent::Recovered(done) => self.finish_recovered(done)?,
            NodeEvent::Finished(f) => self.finished(node, f, moment),
        }
        Ok(())
    }

    fn on_start(&mut self, nodes: &[Node]) {
        self.last_commit = nodes.iter().map(|n| vec![0; usize::from(n.config().workers)]).collect();
    }

    fn on_window_start(&mut self, _at: Nanos, nodes: &[Node], switches: &[&RackSwitch]) {
        self.aborts_at_start = total_aborts(nodes);
        self.switch_at_start = switch_counters(switches);
        self.first_pass_at_start = first_pass_counters(switches);
    }

    fn on_window_end(&mut self, at: Nanos, nodes: &[Node], switches: &[&RackSwitch], moment: Moment) {
        for node in 0..self.last_commit.len() {
            for worker in 0..self.last_commit[node].len() {
                self.note_progress(at, moment.healthy_from, node as u16, worker as u16);
            }
        }
        let (passes, recircs, drops) = switch_counters(switches);
        // A restarted switch counts from zero again.
        let (aborts, begun, skipped) = total_aborts(nodes);
        self.window.aborts = aborts.saturating_sub(self.aborts_at_start.0);
        self.window.started = begun.saturating_sub(self.aborts_at_start.1);
        self.window.skipped = skipped.saturating_sub(self.aborts_at_start.2);
        self.window.switch_passes = passes.saturating_sub(self.switch_at_start.0);
        self.window.recirculations = recircs.saturating_sub(self.switch_at_start.1);
        self.window.switch_drops = drops.saturating_sub(self.switch_at_start.2);
        let (dropped, truncated) = first_pass_counters(switches);
        self.window.first_pass_dropped_ops = dropped.saturating_sub(self.first_pass_at_start.0);
        self.window.first_pass_truncated_txns = truncated.saturating_sub(self.first_pass_at_start.1);
    }
}
