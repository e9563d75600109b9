//! Faults a simulated rack can suffer, planned up front from a seed.
//!
//! ## What can go wrong
//!
//! - **The network** loses, duplicates and delays datagrams. Every hop (node to switch, switch
//!   to node) draws from the plan's seeded generator: lost with probability `loss`, sent twice
//!   with probability `duplicate`, and held for an extra delay uniform in `0..=jitter_ns`. With
//!   `reorder`, the delay is added after the link, so a later datagram can overtake an earlier
//!   one; without, it is added before, so datagrams queue behind a delayed one, as on a
//!   congested link, and stay in order (on a strict-priority link, in order within each
//!   class: a class's datagrams queue behind its delayed one). A slow link adds a fixed delay to one node's traffic
//!   for a while, in order.
//! - **A node crashes**: its memory is gone, its timers never fire, datagrams to it are lost.
//!   Only its write-ahead log survives. A handler that was still running when the crash came
//!   did not finish: its log records, datagrams and commits are all dropped, as they would be
//!   by a process killed before its `fsync` returned. After `down_ns` the node restarts from
//!   its log (the system's [`crate::Restarts`]).
//! - **The switch crashes**: its registers, queues and memory of answers are gone, and
//!   datagrams reaching it are lost. After `down_ns` it restarts with the hot set's initial
//!   values and is rebuilt from every node's log (by the system's [`crate::Restarts`]; P4DB's
//!   is `pisadb_p4db::node::rebuild`).
//!
//! ## Healing
//!
//! From `heal_at_ns` on the network is healthy and no crash begins: a checker can then demand
//! that every worker makes progress within a bound, which a protocol that livelocks, or that
//! waits forever for an answer lost earlier, cannot meet.
//!
//! ## Determinism
//!
//! The plan is data, and the generator that draws per-datagram faults is seeded from it: one
//! seed, one history, one trace hash, however the faults fall.

use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::Host;
use serde::{Deserialize, Serialize};

/// What the plan does to the rack.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Seed of the per-datagram draws.
    pub seed: u64,
    /// Probability that a datagram is lost on a hop.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
    /// Extra delay per datagram, uniform in `0..=jitter_ns`.
    pub jitter_ns: Nanos,
    /// Whether the jitter may reorder a link's datagrams (else they queue, in order).
    pub reorder: bool,
    /// Links slowed for a while.
    pub slow: Vec<SlowLink>,
    /// Crashes, each followed by a restart.
    pub crashes: Vec<Crash>,
    /// From here on the network is healthy and no crash begins. Loss, duplication, jitter and
    /// slow links apply only before it, so a plan that sets them must set this too: the
    /// default, 0, is healthy from the start (`..Faults::default()` alone injects nothing).
    pub heal_at_ns: Nanos,
}

/// The [`crate::Restarts`] of a plan with no crash in it ([`Faults::network_jitter`]): asked to
/// restart anything, it refuses, naming what was asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRestarts;

impl<H: Host, S> crate::Restarts<H, S> for NoRestarts {
    fn host(&mut self, id: u16, _log: &[H::Log]) -> Result<H, String> {
        Err(format!("host {id} was asked to restart, but this plan crashes nothing"))
    }
    fn switch(&mut self, id: u16, _logs: &[Vec<H::Log>], _epoch: u16) -> Result<S, String> {
        Err(format!("switch {id} was asked to restart, but this plan crashes nothing"))
    }
}

/// One node's links (both ways) slowed down for a while.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowLink {
    /// The node.
    pub node: u16,
    /// When it starts.
    pub from_ns: Nanos,
    /// When it ends.
    pub until_ns: Nanos,
    /// Extra delay of each datagram.
    pub extra_ns: Nanos,
}

/// What crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// A database node.
    Node(u16),
    /// A switch, by id (0: a rack's only switch).
    Switch(u16),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Node(n) => write!(f, "node {n}"),
            // Switch 0 keeps its short name: it is a rack's only switch, and pinned traces
            // spell it so.
            Target::Switch(0) => write!(f, "switch"),
            Target::Switch(s) => write!(f, "switch {s}"),
        }
    }
}

/// A crash target's trace bytes spell it as its `Display` does (`node 3`, `switch`), written
/// out explicitly so the trace does not depend on formatting code.
impl TraceBytes for Target {
    fn trace(&self, h: &mut TraceHash) {
        match *self {
            Target::Node(n) => {
                h.write(b"node ");
                h.write_decimal(u64::from(n));
            }
            Target::Switch(0) => h.write(b"switch"),
            Target::Switch(s) => {
                h.write(b"switch ");
                h.write_decimal(u64::from(s));
            }
        }
    }
}

/// A crash and, `down_ns` later, the restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crash {
    /// What crashes.
    pub target: Target,
    /// When.
    pub at_ns: Nanos,
    /// For how long.
    pub down_ns: Nanos,
}

impl Faults {
    /// A plan that only delays: every hop adds a delay uniform in `0..=jitter_ns`, for the
    /// whole run (a network with latency variance, not a fault a checker must ride out), in
    /// order or, with `reorder`, letting datagrams overtake. A system whose model charges
    /// latency variance uses this rather than a jitter of its own.
    pub fn network_jitter(seed: u64, jitter_ns: Nanos, reorder: bool) -> Self {
        Faults { seed, jitter_ns, reorder, heal_at_ns: Nanos::MAX, ..Faults::default() }
    }

    /// Whether the network misbehaves at `now`.
    pub fn network_faulty(&self, now: Nanos) -> bool {
        now < self.heal_at_ns && (self.loss > 0.0 || self.duplicate > 0.0 || self.jitter_ns > 0)
    }

    /// The extra delay of a datagram to or from `node` at `now` (slow links).
    pub fn slow_ns(&self, node: u16, now: Nanos) -> Nanos {
        self.slow
            .iter()
            .filter(|s| s.node == node && (s.from_ns..s.until_ns).contains(&now) && now < self.heal_at_ns)
            .map(|s| s.extra_ns)
            .sum()
    }

    /// When the last restart happens (0 without crashes).
    pub fn last_restart_ns(&self) -> Nanos {
        self.crashes.iter().map(|c| c.at_ns + c.down_ns).max().unwrap_or(0)
    }

    /// A one-line description (for the fuzzer's progress lines).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.loss > 0.0 {
            parts.push(format!("loss {:.1}%", self.loss * 100.0));
        }
        if self.duplicate > 0.0 {
            parts.push(format!("dup {:.1}%", self.duplicate * 100.0));
        }
        if self.jitter_ns > 0 {
            let order = if self.reorder { "reordering" } else { "in order" };
            parts.push(format!("jitter {} µs {order}", self.jitter_ns / 1_000));
        }
        for s in &self.slow {
            parts.push(format!("slow node {} +{} µs", s.node, s.extra_ns / 1_000));
        }
        for c in &self.crashes {
            parts.push(format!("crash {} at {} µs for {} µs", c.target, c.at_ns / 1_000, c.down_ns / 1_000));
        }
        if parts.is_empty() {
            "no faults".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What the faults did in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FaultStats {
    /// Datagrams lost on a hop.
    pub lost: u64,
    /// Datagrams delivered twice.
    pub duplicated: u64,
    /// Datagrams lost because their destination was down.
    pub to_down: u64,
    /// Handlers whose outputs a crash discarded.
    pub cut_short: u64,
    /// Node crashes.
    pub node_crashes: u64,
    /// Switch crashes.
    pub switch_crashes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jitter_only_plan_delays_for_the_whole_run_and_loses_nothing() {
        let plan = Faults::network_jitter(7, 1_000, true);
        assert!(plan.network_faulty(0) && plan.network_faulty(Nanos::MAX - 1));
        assert_eq!((plan.loss, plan.duplicate, plan.crashes.len(), plan.slow.len()), (0.0, 0.0, 0, 0));
        assert!(plan.reorder && plan.jitter_ns == 1_000 && plan.seed == 7);
        // No jitter: no fault at all, so a system may inject it unconditionally.
        assert!(!Faults::network_jitter(7, 0, true).network_faulty(0));
    }
}
