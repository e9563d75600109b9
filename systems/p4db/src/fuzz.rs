//! Deterministic fault-injection testing: many short racks, each shaped and harmed by its seed,
//! each checked by the same oracles.
//!
//! ## One seed, one case
//!
//! [`FuzzCase::from_seed`] derives everything from the seed: the rack's size, the system
//! (P4DB, No-Switch, LM-Switch), the concurrency control, the workload (YCSB, SmallBank or
//! TPC-C, small and contended), sometimes a switch too small for the hot set (warm
//! transactions), and a [`Faults`] plan: lossy, duplicating and reordering links, a slow link,
//! crashes of nodes and of the switch. The plan heals part-way through, and the run goes on
//! healthy for a while. A failing seed replays exactly: the simulator reads no clock.
//!
//! LM-Switch, the paper's lock-manager baseline, keeps its locks in the switch without leases
//! or a log: a lost release or a crashed holder leaves a lock held forever, which is that
//! design's limit, not a bug to find. It also releases a lock in the switch while the Commit to
//! the tuple's node may still be on its way, so it relies on links that keep datagrams in
//! order (the fuzzer found a lost update when they do not), and on paths that are equally
//! fast: a slow link of one node lost an update too. Its cases get only jitter that queues.
//!
//! ## The oracles ([`check`])
//!
//! After the run the rack is drained (no new transactions; everything in flight finishes).
//! Then:
//!
//! 1. **Nothing is stuck**: the drain ends within the step limit, every node is idle, and every
//!    switch transaction that was logged (so counts as committed) was reported committed.
//! 2. **Serializable on the nodes**: the committed transactions' reads and writes, with the
//!    versions they saw and replaced, form an acyclic serialization graph ([`pisadb_check`]).
//! 3. **Serializable on the switch**: the switch parts, replayed one at a time in GID order
//!    from the initial values, give every output the nodes saw and the switch's final values.
//! 4. **Nothing lost**: every tuple's value on its node was written by the last transaction in
//!    its committed version chain, and the switch rebuilt from the final logs equals the
//!    switch as it stands (every logged switch transaction is in the registers, once).
//! 5. **The workload's invariants** (SmallBank's money, TPC-C's consistency conditions).
//! 6. **Progress**: once the faults have healed, no worker goes longer than
//!    [`FuzzCase::progress_bound_ns`] without committing.

use crate::node::{Cc, Mode};
use crate::programs::p4db::P4dbConfig;
use crate::run::{build_faulty, run_rack, LayoutChoice, PlanRestarts, RunConfig, RunOutput, WorkloadSpec};
use pisadb_check::History;
use pisadb_core::rng::{derive, SeededRng};
use pisadb_core::{Nanos, SerialStore, TupleKey};
use pisadb_sim::faults::Faults;
use pisadb_sim::swarm::{Crashes, FaultKind, Pick, SlowLinks, Spacing, Swarm, TargetPick, Tolerated};
use pisadb_sim::Restarts;
use pisadb_workload::{Scheme, SmallBankConfig, TpccConfig, YcsbConfig};
use rand::Rng;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One seed's rack, faults and bounds.
#[derive(Clone, Debug)]
pub struct FuzzCase {
    /// The seed everything came from.
    pub seed: u64,
    /// The rack and workload.
    pub config: RunConfig,
    /// What goes wrong.
    pub faults: Faults,
    /// Nodes abort an attempt another node leaves unanswered this long.
    pub peer_timeout_ns: Nanos,
    /// Once healed, no worker may go longer than this without a commit.
    pub progress_bound_ns: Nanos,
}

/// What one case did.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// The seed.
    pub seed: u64,
    /// A one-line description of the rack.
    pub rack: String,
    /// A one-line description of the faults.
    pub faults: String,
    /// Committed transactions.
    pub committed: usize,
    /// Datagrams lost on a hop.
    pub lost: u64,
    /// Datagrams duplicated.
    pub duplicated: u64,
    /// Datagrams that reached a crashed node or switch.
    pub to_down: u64,
    /// Node and switch crashes.
    pub crashes: u64,
    /// The longest a worker went without committing once healed, µs.
    pub longest_gap_us: f64,
    /// Events simulated.
    pub events: u64,
    /// The trace hash.
    pub trace_hash: String,
    /// The first oracle that failed, if any.
    pub failure: Option<String>,
}

/// How long a case runs after its faults healed. Every worker must commit in that time. It is
/// no tighter because contention alone, with no fault at all, keeps a worker of these small,
/// hot TPC-C racks from committing for up to about 2 ms (NO_WAIT retries by chance; WAIT_DIE
/// lets the oldest through, but only once it is the oldest).
const HEALTHY_TAIL_NS: Nanos = 3_000_000;

/// The step limit of a case (run and drain each).
const MAX_EVENTS: u64 = 20_000_000;

impl FuzzCase {
    /// The case of `seed`.
    pub fn from_seed(seed: u64) -> FuzzCase {
        let mut rng = derive(seed, "fuzz-case");
        let nodes = rng.random_range(2..=4u16);
        let workers = rng.random_range(1..=3u16);
        let mode = match rng.random_range(0..4) {
            0 => Mode::NoSwitch,
            1 => Mode::LmSwitch,
            _ => Mode::P4db,
        };
        let cc = if rng.random_bool(0.5) { Cc::NoWait } else { Cc::WaitDie };
        let partitioning = if rng.random_bool(0.5) { Scheme::Range } else { Scheme::RoundRobin };
        let workload = match rng.random_range(0..3) {
            0 => WorkloadSpec::Ycsb(YcsbConfig {
                nodes,
                rows: 500,
                hot_per_node: 8,
                hot_prob: 0.5,
                partitioning,
                ..YcsbConfig::default()
            }),
            1 => WorkloadSpec::SmallBank(SmallBankConfig {
                nodes,
                accounts: 500,
                hot_per_node: 4,
                initial_balance_min: 0,
                initial_balance_max: 300,
                partitioning,
                ..SmallBankConfig::default()
            }),
            _ => WorkloadSpec::Tpcc(TpccConfig {
                nodes,
                warehouses: nodes,
                items: 500,
                customers_per_district: 30,
                hot_items: 6,
                remote_item_prob: 0.1,
                remote_customer_prob: 0.15,
                ..TpccConfig::default()
            }),
        };
        let heal_at_ns = 1_500_000;
        let mut config = RunConfig {
            nodes,
            workers,
            mode,
            cc,
            seed,
            workload,
            layout: LayoutChoice::Declustered,
            warmup_ns: 0,
            measure_ns: heal_at_ns + HEALTHY_TAIL_NS,
            max_events: MAX_EVENTS,
            record_history: true,
            switch_timeout_ns: 40_000,
            layout_sample: 500,
            ..RunConfig::ycsb_default()
        };
        if mode == Mode::P4db && rng.random_bool(0.3) {
            // A switch too small for the hot set: warm transactions.
            config.p4db = Some(P4dbConfig { entries_per_array: 1, ..config.p4db_config() });
        }
        let faults = draw_faults(&mut rng, seed, mode, nodes, heal_at_ns);
        FuzzCase { seed, config, faults, peer_timeout_ns: 30_000, progress_bound_ns: HEALTHY_TAIL_NS }
    }

    /// A one-line description of the rack.
    pub fn describe_rack(&self) -> String {
        let c = &self.config;
        let warm = if c.p4db.is_some() { " (small switch)" } else { "" };
        format!("{} {}{warm} {} {}x{}", c.workload.name(), c.mode.name(), c.cc.name(), c.nodes, c.workers)
    }
}

/// The faults P4DB's racks tolerate: everything the swarm draws, except that LM-Switch (see
/// the module doc) gets only jitter that queues, and only P4DB's switch is rebuilt after a
/// crash (the baselines' switches keep no state worth a crash).
pub fn tolerated(mode: Mode) -> Tolerated {
    use FaultKind::*;
    match mode {
        Mode::LmSwitch => Tolerated::of(&[Jitter]),
        Mode::P4db => Tolerated::of(&[Loss, Duplication, Jitter, Reordering, SlowLink, NodeCrash, SwitchCrash]),
        _ => Tolerated::of(&[Loss, Duplication, Jitter, Reordering, SlowLink, NodeCrash]),
    }
}

/// A case's faults, drawn by the swarm in the order P4DB's cases always drew them.
fn draw_faults(rng: &mut SeededRng, seed: u64, mode: Mode, nodes: u16, heal_at_ns: Nanos) -> Faults {
    use FaultKind::*;
    let mut swarm = Swarm::new(rng, seed, tolerated(mode));
    swarm.heal(Pick::Fixed(heal_at_ns));
    swarm.toggle(&[(Loss, 0.6), (Duplication, 0.4), (Jitter, 0.5), (SlowLink, 0.3)]);
    swarm.loss(Pick::Range(0.001, 0.05));
    swarm.duplicate(Pick::Range(0.001, 0.05));
    swarm.jitter(Pick::Range(1_000, 20_000));
    swarm.slow_links(&SlowLinks {
        count: Pick::Fixed(1),
        from_ns: Pick::Range(0, heal_at_ns / 2),
        node: Pick::Range(0, nodes),
        length_ns: Pick::Fixed(400_000),
        extra_ns: Pick::Range(5_000, 50_000),
    });
    let node = TargetPick::Node(Pick::Range(0, nodes));
    let target = match mode {
        Mode::P4db => TargetPick::Coin(0.4, Box::new(TargetPick::Switch(Pick::Fixed(0))), Box::new(node)),
        _ => node,
    };
    swarm.crashes(&Crashes {
        count: Pick::Range(0, 3),
        target,
        at_ns: Pick::Range(100_000, 1_100_000),
        down_ns: Pick::Range(20_000, 300_000),
        // One crash of a target at a time.
        spacing: Spacing::AfterEarlierDraws,
    });
    // LM-Switch releases a lock in the switch while the Commit to the tuple's node may
    // still be on its way: it relies on in-order links, so its jitter keeps the order.
    swarm.reorder(0.5);
    swarm.finish()
}

/// Runs `case` and every oracle on it.
pub fn run_case(case: &FuzzCase) -> CaseReport {
    let mut report = CaseReport {
        seed: case.seed,
        rack: case.describe_rack(),
        faults: case.faults.describe(),
        committed: 0,
        lost: 0,
        duplicated: 0,
        to_down: 0,
        crashes: 0,
        longest_gap_us: 0.0,
        events: 0,
        trace_hash: String::new(),
        failure: None,
    };
    let out = build_faulty(&case.config, case.faults.clone(), case.peer_timeout_ns)
        .and_then(|rack| run_rack(&case.config, rack));
    let mut out = match out {
        Ok(out) => out,
        Err(e) => {
            report.failure = Some(format!("run: {e}"));
            return report;
        }
    };
    let failure = check(case, &mut out).err();
    let stats = out.cluster.fault_stats();
    report.committed = out.cluster.observer().records().len();
    report.lost = stats.lost;
    report.duplicated = stats.duplicated;
    report.to_down = stats.to_down;
    report.crashes = stats.node_crashes + stats.switch_crashes;
    report.longest_gap_us = out.cluster.observer().longest_progress_gap().0 as f64 / 1_000.0;
    report.events = out.cluster.events_processed();
    report.trace_hash = format!("{:016x}", out.cluster.trace_hash());
    report.failure = failure;
    report
}

/// The oracles, in the order of the module's list; the first that fails says why.
pub fn check(case: &FuzzCase, out: &mut RunOutput) -> Result<(), String> {
    let (gap, node, worker) = out.cluster.observer().longest_progress_gap();
    // 1. Nothing stuck (the drain also checks the workload's invariants, 5).
    out.check_invariants(MAX_EVENTS).map_err(|e| {
        let stuck: Vec<String> = out
            .cluster
            .hosts()
            .iter()
            .flat_map(|n| n.in_flight().into_iter().take(3).map(move |l| format!("node {}: {l}", n.config().id)))
            .take(6)
            .collect();
        format!("after the drain: {e}; in flight: {}", stuck.join("; "))
    })?;
    for n in out.cluster.hosts() {
        if !n.is_idle() {
            return Err(format!("node {} still has work in flight after the drain", n.config().id));
        }
        if let Some(count) = n.stats().rejected.get("insert_refused") {
            return Err(format!("node {}: {count} rows inserted twice", n.config().id));
        }
    }
    if let Some(r) = out.cluster.observer().unfinished_commits().next() {
        return Err(format!("switch transaction {:#x} was logged but never committed", r.id));
    }
    // 2. Serializable on the nodes.
    let mut history = History::new();
    out.cluster.observer().records().iter().filter_map(|r| r.history.clone()).for_each(|t| history.record(t));
    history.check().map_err(|v| format!("not serializable on the nodes: {v}"))?;
    // 3. Serializable on the switch, in GID order.
    if out.mode == Mode::P4db {
        check_switch_order(out)?;
    }
    // 4. Nothing lost.
    check_version_chains(out)?;
    if out.mode == Mode::P4db {
        let mut restarts = PlanRestarts::new(&case.config, case.peer_timeout_ns).map_err(|e| e.to_string())?;
        let rebuilt = restarts.switch(0, out.cluster.logs(), 0).map_err(|e| format!("rebuilding the switch: {e}"))?;
        for (key, p) in out.layout.iter() {
            let live = crate::run::switch_value(&out.cluster, &out.layout, key);
            let from_logs = rebuilt.register_value(p.register, p.index);
            if live != from_logs {
                return Err(format!(
                    "hot tuple {key:?}: the switch holds {live:?}, its rebuild from the logs {from_logs:?}"
                ));
            }
        }
    }
    // 6. Progress once healed.
    if gap > case.progress_bound_ns {
        return Err(format!(
            "no progress: worker {worker} of node {node} went {} µs without a commit after the faults healed \
             (bound {} µs)",
            gap / 1_000,
            case.progress_bound_ns / 1_000
        ));
    }
    Ok(())
}

/// The switch parts of the committed transactions, replayed serially in GID order from the
/// initial values, give the outputs the nodes saw and the switch's final values.
fn check_switch_order(out: &RunOutput) -> Result<(), String> {
    let mut by_gid: Vec<_> = out.cluster.observer().records().iter().filter(|r| r.gid.is_some()).collect();
    by_gid.sort_by_key(|r| r.gid);
    if let Some(w) = by_gid.windows(2).find(|w| w[0].gid == w[1].gid) {
        return Err(format!("GID {:?} given to both {:#x} and {:#x}", w[0].gid, w[0].id, w[1].id));
    }
    let mut store = SerialStore::default();
    for (key, _) in out.layout.iter() {
        store.set(key, out.workload.initial_value(key));
    }
    for r in by_gid {
        let (txn, outputs) = r.switch_part();
        let replayed = txn.execute_serial(&mut store);
        if replayed != outputs {
            return Err(format!(
                "switch transaction {:#x} (GID {:?}) saw {outputs:?}, a serial replay in GID order gives {replayed:?}",
                r.id, r.gid
            ));
        }
    }
    for (key, _) in out.layout.iter() {
        let live = crate::run::switch_value(&out.cluster, &out.layout, key);
        if live != Some(store.get(key)) {
            return Err(format!(
                "hot tuple {key:?}: the switch holds {live:?}, the GID-order replay {}",
                store.get(key)
            ));
        }
    }
    Ok(())
}

/// Every tuple a committed transaction wrote on the nodes holds the version of the last writer
/// in its chain: a commit lost in a crash (or applied twice, late) shows as another version.
fn check_version_chains(out: &RunOutput) -> Result<(), String> {
    let mut overwritten: BTreeSet<(TupleKey, u64)> = BTreeSet::new();
    let mut writers: BTreeMap<TupleKey, Vec<u64>> = BTreeMap::new();
    for h in out.cluster.observer().records().iter().filter_map(|r| r.history.as_ref()) {
        for &(key, prev) in &h.writes {
            overwritten.insert((key, prev));
            writers.entry(key).or_default().push(h.id);
        }
    }
    for (key, ids) in writers {
        let last: Vec<u64> = ids.into_iter().filter(|id| !overwritten.contains(&(key, *id))).collect();
        let stored = out.cluster.hosts().iter().find_map(|n| n.store().get(key)).map(|t| t.version);
        if last.len() != 1 || stored != Some(last[0]) {
            return Err(format!(
                "tuple {key:?}: stored version {stored:x?}, but the committed chain ends with {last:x?} (a lost commit)"
            ));
        }
    }
    Ok(())
}

/// Runs `case` twice and says whether both runs hashed the same trace.
pub fn replays_identically(case: &FuzzCase) -> bool {
    let (a, b) = (run_case(case), run_case(case));
    a.trace_hash == b.trace_hash && a.events == b.events
}
