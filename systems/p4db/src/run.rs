//! One simulated experiment point: build the rack, run it, report.
//!
//! Building a rack: every node gets its own workload generator (same configuration, seed
//! derived per node), loads its partition, and shares the hot-set index. The hot set is laid out
//! on the switch by the run's [`LayoutChoice`] (by default P4DB's declustered layout, fitted on
//! a sample of hot transactions); in P4DB mode the switch's registers are loaded with the hot
//! tuples' initial values. LM-Switch places one lock per hot tuple in the lock manager's arrays.
//!
//! ## Layouts, and what the paper's prototype ran
//!
//! `declustered` is P4DB's algorithm (§4), the default. The other three follow the prototype's
//! public code, which never ran that algorithm in its measurements:
//!
//! - `random` is the prototype's "worst layout" (Fig. 16, Fig. 15c's first steps): tuple
//!   `idx` in array `idx % N`, `N` being the data arrays the prototype gives the workload
//!   ([`WorkloadSpec::prototype_data_arrays`]: 20 for YCSB, 10 for SmallBank and TPC-C), with
//!   real multi-pass transactions under the pipeline lock ([`pisadb_p4db_layout::modulo`]). The
//!   prototype range-partitions its rows, so a node's hot keys are consecutive ids and spread
//!   evenly; under round-robin partitioning (PisaDB's default) node `n`'s rows are `n` modulo
//!   the node count and fall into only `N / gcd(N, nodes)` arrays (5 of 20 on 8 nodes), a
//!   worse layout than the prototype's. Use range partitioning to compare with the paper.
//! - `ideal` is the prototype's `SWITCH_NO_CONFLICT`, under which every headline figure ran and
//!   which the paper calls the optimal (declustered) layout: the same `idx % N` placement, but
//!   every hot transaction is sent as one pass with no locks and the switch executes only its
//!   first pass; the operations after it are not executed at all
//!   ([`P4dbConfig::first_pass_only`]). No register layout achieves this; the run reports
//!   what it left out ([`RunResult::ideal`]).
//! - `shuffled` drops tuples into uniformly random arrays (what `random` meant before).

use crate::metrics::Metrics;
use crate::node::rebuild::rebuild_switch;
use crate::node::{Cc, CpuCosts, Engine, LogRecord, Mode, Node, NodeConfig, SwitchView};
use crate::switch::RackSwitch;
use pisadb_core::{rng::splitmix64, Nanos, SerialStore, TupleKey, Txn};
use pisadb_p4db_layout::Layout;
use pisadb_report::latency::LatencySummary;
use pisadb_sim::faults::Faults;
use pisadb_sim::net::LinkParams;
use pisadb_sim::world::{Restarts, SimError, World};

/// A simulated P4DB rack: nodes on one switch running P4DB's engine or the lock manager.
pub type Cluster = World<Node, RackSwitch, Metrics>;
use crate::programs::lock_manager::{LockManager, LockManagerConfig};
use crate::programs::p4db::{multicast_groups, P4dbConfig, P4dbEngine};
use pisadb_switch::{Switch, SwitchProfile};
use pisadb_workload::{GeneratedTxn, SmallBank, SmallBankConfig, Tpcc, TpccConfig, Workload, Ycsb, YcsbConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Which workload, with its configuration (its `nodes` is overridden by the run's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WorkloadSpec {
    /// YCSB.
    Ycsb(YcsbConfig),
    /// SmallBank.
    SmallBank(SmallBankConfig),
    /// TPC-C's NewOrder and Payment.
    Tpcc(TpccConfig),
}

impl WorkloadSpec {
    /// The workload's name.
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Ycsb(_) => "ycsb",
            WorkloadSpec::SmallBank(_) => "smallbank",
            WorkloadSpec::Tpcc(_) => "tpcc",
        }
    }

    /// The data arrays the prototype's switch program gives this workload, over which its
    /// `idx % N` layout spreads tuples: 20 for YCSB, 10 for SmallBank and TPC-C (`NUM_REGS` in
    /// its `switch.hpp` of each benchmark).
    pub fn prototype_data_arrays(&self) -> usize {
        match self {
            WorkloadSpec::Ycsb(_) => 20,
            WorkloadSpec::SmallBank(_) | WorkloadSpec::Tpcc(_) => 10,
        }
    }

    /// A generator for a rack of `nodes`.
    pub fn build(&self, nodes: u16, seed: u64) -> Result<Box<dyn Workload>, String> {
        Ok(match self {
            WorkloadSpec::Ycsb(c) => {
                Box::new(Ycsb::new(YcsbConfig { nodes, ..c.clone() }, seed).map_err(|e| e.to_string())?)
            }
            WorkloadSpec::SmallBank(c) => {
                Box::new(SmallBank::new(SmallBankConfig { nodes, ..c.clone() }, seed).map_err(|e| e.to_string())?)
            }
            WorkloadSpec::Tpcc(c) => {
                Box::new(Tpcc::new(TpccConfig { nodes, ..c.clone() }, seed).map_err(|e| e.to_string())?)
            }
        })
    }
}

/// How the hot set is laid out on the switch's register arrays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutChoice {
    /// P4DB's declustered layout, fitted on a sample of hot transactions (§4).
    #[default]
    Declustered,
    /// The prototype's "worst layout": tuple `idx` in array `idx % N` of the workload's `N`
    /// arrays ([`WorkloadSpec::prototype_data_arrays`]), multi-pass under the pipeline lock.
    Random,
    /// Tuples dropped into arrays uniformly at random.
    Shuffled,
    /// The prototype's `SWITCH_NO_CONFLICT` runs: `random`'s placement, every hot transaction
    /// one pass with no locks, the operations beyond its first pass not executed. An upper
    /// bound no register layout achieves.
    Ideal,
}

impl LayoutChoice {
    /// What a report should say about runs under this layout, if anything.
    pub fn warning(self) -> Option<&'static str> {
        (self == LayoutChoice::Ideal).then_some(
            "note: --layout ideal reproduces the prototype's SWITCH_NO_CONFLICT runs: every hot transaction \
             takes one pass with no locks and the operations beyond its first pass are NOT executed. It is \
             an upper bound that no register layout achieves, not a result of P4DB",
        )
    }
}

/// Everything one simulated point needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    /// Database nodes.
    pub nodes: u16,
    /// Worker cores per node.
    pub workers: u16,
    /// System under test.
    pub mode: Mode,
    /// How the nodes' workers run transactions (PisaDB's engine, or the P4DB prototype's).
    #[serde(default)]
    pub engine: Engine,
    /// The prototype's engine: transactions pre-generated per worker (0: no limit).
    #[serde(default)]
    pub txns_per_worker: u64,
    /// Concurrency control on the nodes.
    pub cc: Cc,
    /// The workload.
    pub workload: WorkloadSpec,
    /// The switch.
    pub profile: SwitchProfile,
    /// Every link of the rack.
    pub link: LinkParams,
    /// CPU costs.
    pub costs: CpuCosts,
    /// The seed of everything.
    pub seed: u64,
    /// Virtual time before measuring (queues fill, caches of the model warm up).
    pub warmup_ns: Nanos,
    /// Virtual time measured.
    pub measure_ns: Nanos,
    /// Step limit: more events than this is reported as a livelock.
    pub max_events: u64,
    /// Record every committed transaction for checkers (tests).
    pub record_history: bool,
    /// Backoff before retrying an aborted transaction: uniform in `0..=backoff_max_ns`.
    pub backoff_max_ns: Nanos,
    /// Re-send a switch transaction after this long without a reply.
    pub switch_timeout_ns: Nanos,
    /// Hot transactions sampled to fit the declustered layout.
    pub layout_sample: usize,
    /// Which layout places the hot set.
    pub layout: LayoutChoice,
    /// The P4DB engine's shape and optimizations; `None`: the prototype's on `profile`
    /// ([`P4dbConfig::for_profile`]).
    pub p4db: Option<P4dbConfig>,
}

impl RunConfig {
    /// P4DB's YCSB setup (seed 000 §7.1) at a size that simulates quickly: 8 nodes, 20
    /// workers, workload A, 75% hot, 20% distributed; 1 ms warm-up, 10 ms measured.
    pub fn ycsb_default() -> Self {
        RunConfig {
            nodes: 8,
            workers: 20,
            mode: Mode::P4db,
            engine: Engine::Pisadb,
            txns_per_worker: 0,
            cc: Cc::NoWait,
            workload: WorkloadSpec::Ycsb(YcsbConfig::default()),
            profile: SwitchProfile::tofino1(),
            link: LinkParams::ten_gbe(),
            costs: CpuCosts::calibrated(),
            seed: 1,
            warmup_ns: 1_000_000,
            measure_ns: 10_000_000,
            max_events: 200_000_000,
            record_history: false,
            // A few round trips: long enough to let a conflicting holder finish.
            backoff_max_ns: 20_000,
            // Far above any switch round trip (a few µs) even with deep recirculation queues.
            switch_timeout_ns: 1_000_000,
            layout_sample: 20_000,
            layout: LayoutChoice::Declustered,
            p4db: None,
        }
    }

    /// The P4DB engine configuration in effect (the `ideal` layout turns on
    /// [`P4dbConfig::first_pass_only`]).
    pub fn p4db_config(&self) -> P4dbConfig {
        let mut config = self.p4db.clone().unwrap_or_else(|| P4dbConfig::for_profile(&self.profile));
        config.first_pass_only |= self.layout == LayoutChoice::Ideal;
        config
    }
}

/// The figures of one point (`pisadb bench --json` prints them under these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Committed transactions per simulated second.
    pub committed_per_s: f64,
    /// Aborted attempts / (committed + aborted attempts).
    pub abort_rate: f64,
    /// Committed transactions whose tuples were all hot.
    pub hot_committed: u64,
    /// Committed transactions with cold tuples.
    pub cold_committed: u64,
    /// Committed transactions executed as one switch transaction.
    pub switch_committed: u64,
    /// Latency from first attempt to commit, µs (`latency_us_mean`, `_p50`, `_p99`); the mean
    /// is exact (the sum over the commits), so that the breakdown's parts add up to it.
    #[serde(flatten)]
    pub latency: LatencySummary,
    /// Where the mean latency went, µs.
    pub latency_breakdown: LatencyBreakdown,
    /// Switch pipeline passes in the window.
    pub switch_passes: u64,
    /// Recirculations in the window.
    pub recirculations: u64,
    /// Packets the switch dropped in the window.
    pub switch_drops: u64,
    /// Aborted attempts in the window.
    pub aborts: u64,
    /// Events the simulator processed (the whole run).
    pub events: u64,
    /// The prototype's engine: what became of the transactions it began (absent for
    /// PisaDB's engine, whose aborted transactions are retried until they commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prototype: Option<PrototypeCounts>,
    /// Hash of the event trace: equal seeds give equal hashes.
    pub trace_hash: String,
    /// What the `ideal` layout did not execute, in the window (absent under other layouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal: Option<IdealLoss>,
}

/// The work the `ideal` layout (the prototype's `SWITCH_NO_CONFLICT`) left undone: the
/// operations beyond a packet's first pass, which the switch never executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdealLoss {
    /// Operations not executed.
    pub dropped_ops: u64,
    /// Switch transactions that lost at least one operation.
    pub truncated_txns: u64,
}

impl RunResult {
    /// Committed hot transactions per simulated second.
    pub fn hot_committed_per_s(&self) -> f64 {
        self.committed_per_s * self.share(self.hot_committed)
    }

    /// Committed cold transactions per simulated second.
    pub fn cold_committed_per_s(&self) -> f64 {
        self.committed_per_s * self.share(self.cold_committed)
    }

    /// `count` as a share of the committed transactions.
    fn share(&self, count: u64) -> f64 {
        let committed = self.hot_committed + self.cold_committed;
        if committed == 0 {
            0.0
        } else {
            count as f64 / committed as f64
        }
    }
}

/// What became of the transactions the prototype's engine began. A run ends when its measure
/// window ends (simulated time, as for PisaDB's engine); a worker that ran all its
/// pre-generated transactions before that stops early and is counted in `workers_done`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrototypeCounts {
    /// Transactions begun in the window.
    pub started: u64,
    /// Transactions aborted and skipped (never retried) in the window.
    pub skipped: u64,
    /// Transactions pre-generated per worker.
    pub txns_per_worker: u64,
    /// Workers (over all nodes) that had run all their transactions by the window's end.
    pub workers_done: u64,
}

/// The mean latency of committed transactions split by phase (paper Fig. 18a), µs. The parts
/// add up to the mean latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBreakdown {
    /// Aborted attempts and backoff before the committed attempt.
    pub retry_us: f64,
    /// Lock acquisition and reads, local and remote.
    pub lock_read_us: f64,
    /// The 2PC voting round.
    pub commit_us: f64,
    /// Waiting for the switch (switch transactions, sub-transactions, LM-Switch locks).
    pub switch_us: f64,
    /// The rest: CPU work and waiting for a core.
    pub other_us: f64,
}

/// A finished run: the figures and the rack (for checks).
pub struct RunOutput {
    /// The figures.
    pub result: RunResult,
    /// The rack after the run.
    pub cluster: Cluster,
    /// The P4DB layout of the hot set.
    pub layout: Arc<Layout>,
    /// The system that ran.
    pub mode: Mode,
    /// The workload's database and invariants (its stream is not the nodes').
    pub workload: Box<dyn Workload>,
}

impl RunOutput {
    /// Every tuple of the database as it stands: each node's partition (inserted rows
    /// included), with the hot tuples as the switch holds them in P4DB mode (where the nodes'
    /// copies are not used). Meaningful once the rack is quiet ([`Cluster::drain`]).
    pub fn snapshot(&self) -> SerialStore {
        let mut db = SerialStore::default();
        for node in self.cluster.hosts() {
            for (key, tuple) in node.store().iter() {
                db.set(key, tuple.value);
            }
        }
        if self.mode == Mode::P4db {
            for (key, _) in self.layout.iter() {
                if let Some(value) = switch_value(&self.cluster, &self.layout, key) {
                    db.set(key, value);
                }
            }
        }
        db
    }

    /// Drains the rack and checks the workload's invariants (money conserved, TPC-C's
    /// consistency conditions) on the [`snapshot`](Self::snapshot) against the committed
    /// transactions. Needs a run with `record_history`, so that every commit is known.
    pub fn check_invariants(&mut self, max_events: u64) -> Result<(), String> {
        self.cluster.drain(max_events).map_err(|e| e.to_string())?;
        let db = self.snapshot();
        let committed: Vec<(&GeneratedTxn, &[i64])> =
            self.cluster.observer().records().iter().map(|r| (&r.gen, r.outputs.as_slice())).collect();
        self.workload.check_invariants(&db, &committed)
    }
}

/// The declustered layout is a pure function of the workload, the switch, the sample size and
/// the seed, and fitting it costs more than a short run: sweeps compute it once per key.
fn cached_layout(cfg: &RunConfig, fit: impl FnOnce() -> Layout) -> Arc<Layout> {
    static CACHE: Mutex<BTreeMap<String, Arc<Layout>>> = Mutex::new(BTreeMap::new());
    let key = format!(
        "{:?}|{}|{}|{}|{}|{:?}|{:?}",
        cfg.workload,
        cfg.nodes,
        cfg.profile.name,
        cfg.layout_sample,
        cfg.seed,
        cfg.layout,
        cfg.p4db_config().layout_target(&cfg.profile)
    );
    if let Some(layout) = CACHE.lock().expect("layout cache").get(&key) {
        return layout.clone();
    }
    let layout = Arc::new(fit());
    CACHE.lock().expect("layout cache").insert(key, layout.clone());
    layout
}

/// The tuples to offload to the switch: the workload's hot set, plus every cold tuple that a
/// sampled transaction links to a hot operation through the accumulator (paper §6.2: a cold
/// write that depends on a hot read cannot run on the nodes before the switch answers, so that
/// tuple moves to the switch with the hot set). Repeated until nothing new joins, since a
/// tuple that joins can link further ones. Sorted.
pub fn offload_set(hot: &[TupleKey], sample: &[Txn]) -> Vec<TupleKey> {
    let mut set: BTreeSet<TupleKey> = hot.iter().copied().collect();
    let linked: Vec<&Txn> =
        sample.iter().filter(|t| t.ops.iter().any(|op| op.reads_acc() || op.writes_acc())).collect();
    loop {
        let before = set.len();
        for txn in &linked {
            for (i, j) in txn.dependencies() {
                let (a, b) = (txn.ops[i].key, txn.ops[j].key);
                if set.contains(&a) != set.contains(&b) {
                    set.insert(a);
                    set.insert(b);
                }
            }
        }
        if set.len() == before {
            return set.into_iter().collect();
        }
    }
}

/// A rack built from a [`RunConfig`], ready to run.
pub struct Rack {
    /// The nodes, the switch and the network.
    pub cluster: Cluster,
    /// The P4DB layout of the hot set.
    pub layout: Arc<Layout>,
    /// The workload's database and invariants (its stream is not the nodes').
    pub workload: Box<dyn Workload>,
}

/// Everything the switch and the nodes of a rack are built from: the same on every process of
/// the real runtime, which each build their part from the same [`RunConfig`].
pub struct RackPlan {
    /// The workload's database and invariants (its stream is not the nodes').
    pub workload: Box<dyn Workload>,
    /// The P4DB layout of the hot set.
    pub layout: Arc<Layout>,
    /// Where each hot tuple's lock lives in the LM-Switch lock manager.
    pub lock_layout: Arc<Layout>,
    /// The P4DB engine.
    pub engine: P4dbEngine,
    /// The lock manager.
    pub lock_manager: LockManager,
}

/// Plans the rack of `cfg`: generates the workload and fits the layouts (No-Switch's places no
/// hot tuple: the whole hot set is its overflow, left on the nodes).
pub fn plan(cfg: &RunConfig) -> Result<RackPlan, SimError> {
    let mut base = cfg.workload.build(cfg.nodes, cfg.seed).map_err(SimError::Config)?;
    // A sample of whole transactions from the base generator (the nodes have their own).
    let homes = (0..cfg.nodes).cycle().take(cfg.layout_sample);
    let whole: Vec<Txn> = homes.map(|home| base.next_txn(home).txn).collect();
    let hot = offload_set(&base.hot_tuples(), &whole);
    let p4db_config = cfg.p4db_config();
    let target = p4db_config.layout_target(&cfg.profile);
    let layout = if cfg.mode == Mode::NoSwitch {
        // No-Switch places nothing on the switch, and the fit is most of a short run's time:
        // the whole hot set stays on the nodes. (Hot and cold are the workload's classes, not
        // the layout's; the fit draws its sample from a stream of its own, so skipping it moves
        // no figure.)
        Arc::new(Layout::with_overflow(hot.clone()))
    } else {
        cached_layout(cfg, || {
            let sample = base.hot_sample(cfg.layout_sample, splitmix64(cfg.seed ^ 0x1a70));
            match cfg.layout {
                LayoutChoice::Declustered => pisadb_p4db_layout::declustered(&hot, &sample, &target, cfg.seed),
                LayoutChoice::Random | LayoutChoice::Ideal => {
                    pisadb_p4db_layout::modulo(&hot, &target, cfg.workload.prototype_data_arrays())
                }
                LayoutChoice::Shuffled => pisadb_p4db_layout::random(&hot, &target, cfg.seed),
            }
        })
    };
    let lm_config = LockManagerConfig::for_profile(&cfg.profile);
    let lock_layout = Arc::new(pisadb_p4db_layout::random(&hot, &lm_config.layout_target(&cfg.profile), cfg.seed));
    let engine = P4dbEngine::new(p4db_config);
    let lock_manager = LockManager::new(lm_config);
    Ok(RackPlan { workload: base, layout, lock_layout, engine, lock_manager })
}

impl RackPlan {
    /// The switch with its program loaded, multicast groups set and (P4DB) the hot tuples'
    /// initial values in its registers; nodes still have to be attached.
    pub fn switch(&self, cfg: &RunConfig) -> Result<RackSwitch, SimError> {
        let config_error = |e: String| SimError::Config(e);
        Ok(match cfg.mode {
            Mode::P4db | Mode::NoSwitch => {
                let profile = self.engine.config().switch_profile(&cfg.profile);
                let mut s = Switch::new(profile, self.engine.clone()).map_err(|e| config_error(e.to_string()))?;
                if cfg.mode == Mode::P4db {
                    for (group, members) in multicast_groups(cfg.nodes) {
                        s.set_multicast_group(group, members);
                    }
                    for (key, p) in self.layout.iter() {
                        s.registers_mut()
                            .write(p.register, p.index, self.workload.initial_value(key), 0)
                            .map_err(|e| config_error(e.to_string()))?;
                    }
                }
                RackSwitch::P4db(s)
            }
            Mode::LmSwitch => RackSwitch::LockManager(
                Switch::new(cfg.profile.clone(), self.lock_manager.clone()).map_err(|e| config_error(e.to_string()))?,
            ),
        })
    }

    /// Node `id`'s configuration.
    pub fn node_config(&self, cfg: &RunConfig, id: u16) -> NodeConfig {
        NodeConfig {
            id,
            nodes: cfg.nodes,
            workers: cfg.workers,
            mode: cfg.mode,
            engine: cfg.engine,
            txns_per_worker: cfg.txns_per_worker,
            cc: cfg.cc,
            costs: cfg.costs.clone(),
            backoff_max_ns: cfg.backoff_max_ns,
            switch_timeout_ns: cfg.switch_timeout_ns,
            record_history: cfg.record_history,
            log: false,
            peer_timeout_ns: 0,
            incarnation: 0,
        }
    }

    /// Node `id`'s workload: the same database on every node, each with its own stream.
    pub fn node_workload(&self, cfg: &RunConfig, id: u16) -> Box<dyn Workload> {
        self.workload.with_stream(splitmix64(cfg.seed ^ (u64::from(id) << 32)))
    }

    /// What the switch offers a node.
    pub fn switch_view(&self) -> SwitchView {
        SwitchView {
            layout: self.layout.clone(),
            engine: self.engine.clone(),
            lock_layout: self.lock_layout.clone(),
            lock_manager: self.lock_manager.clone(),
        }
    }
}

/// Builds the rack of `cfg` without running it.
pub fn build(cfg: &RunConfig) -> Result<Rack, SimError> {
    let plan = plan(cfg)?;
    let switch = plan.switch(cfg)?;
    let nodes = (0..cfg.nodes)
        .map(|id| Node::new(plan.node_config(cfg, id), plan.node_workload(cfg, id), plan.switch_view(), cfg.seed))
        .collect::<Result<Vec<_>, String>>()
        .map_err(SimError::Config)?;
    Ok(Rack {
        cluster: Cluster::rack(nodes, switch, &cfg.link, Metrics::default()),
        layout: plan.layout,
        workload: plan.workload,
    })
}

/// Builds the rack of `cfg` subjected to `faults`: its nodes log (the cluster keeps the logs as
/// their disks), abort attempts another node leaves unanswered for `peer_timeout_ns`, and are
/// restarted from their logs after a crash, as the switch is from all of them.
pub fn build_faulty(cfg: &RunConfig, faults: Faults, peer_timeout_ns: Nanos) -> Result<Rack, SimError> {
    let restarts = PlanRestarts::new(cfg, peer_timeout_ns)?;
    let switch = restarts.plan.switch(cfg)?;
    let nodes = (0..cfg.nodes)
        .map(|id| {
            Node::new(
                restarts.node_config(id),
                restarts.plan.node_workload(cfg, id),
                restarts.plan.switch_view(),
                cfg.seed,
            )
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(SimError::Config)?;
    let layout = restarts.plan.layout.clone();
    let workload = restarts.plan.workload.with_stream(cfg.seed);
    let mut cluster = Cluster::rack(nodes, switch, &cfg.link, Metrics::default());
    cluster.inject(faults, Box::new(restarts));
    Ok(Rack { cluster, layout, workload })
}

/// Restarts nodes and the switch of a rack planned from a [`RunConfig`].
pub struct PlanRestarts {
    cfg: RunConfig,
    plan: RackPlan,
    peer_timeout_ns: Nanos,
}

impl PlanRestarts {
    /// Restarts for the rack of `cfg` whose nodes use `peer_timeout_ns`.
    pub fn new(cfg: &RunConfig, peer_timeout_ns: Nanos) -> Result<Self, SimError> {
        Ok(PlanRestarts { cfg: cfg.clone(), plan: plan(cfg)?, peer_timeout_ns })
    }

    fn node_config(&self, id: u16) -> NodeConfig {
        NodeConfig { log: true, peer_timeout_ns: self.peer_timeout_ns, ..self.plan.node_config(&self.cfg, id) }
    }
}

impl Restarts<Node, RackSwitch> for PlanRestarts {
    fn host(&mut self, id: u16, log: &[LogRecord]) -> Result<Node, String> {
        let workload = self.plan.node_workload(&self.cfg, id);
        let (node, _) = Node::recover(self.node_config(id), workload, self.plan.switch_view(), self.cfg.seed, log)?;
        Ok(node)
    }

    fn switch(&mut self, _id: u16, logs: &[Vec<LogRecord>], epoch: u16) -> Result<RackSwitch, String> {
        let mut switch = self.plan.switch(&self.cfg).map_err(|e| e.to_string())?;
        if let RackSwitch::P4db(s) = &mut switch {
            for id in 0..self.cfg.nodes {
                s.attach(id);
            }
            if self.cfg.mode == Mode::P4db {
                rebuild_switch(s, logs)?;
            }
            s.program_mut().set_epoch(epoch);
        }
        Ok(switch)
    }
}

/// The value of hot tuple `key` in the switch's registers under `layout`.
pub fn switch_value(cluster: &Cluster, layout: &Layout, key: TupleKey) -> Option<i64> {
    let p = layout.get(key)?;
    cluster.switch(0).register_value(p.register, p.index)
}

/// Runs one point.
pub fn run(cfg: &RunConfig) -> Result<RunOutput, SimError> {
    run_rack(cfg, build(cfg)?)
}

/// Runs a built rack as `cfg` says.
pub fn run_rack(cfg: &RunConfig, rack: Rack) -> Result<RunOutput, SimError> {
    let Rack { mut cluster, layout, workload } = rack;
    cluster.run(cfg.warmup_ns, cfg.measure_ns, cfg.max_events)?;
    let w = cluster.observer().window();
    if w.committed == 0 {
        return Err(SimError::Stalled { at_ns: cluster.now() });
    }
    let seconds = cfg.measure_ns as f64 / 1e9;
    let attempts = w.committed + w.aborts;
    let mean_us = |ns: u64| if w.committed == 0 { 0.0 } else { ns as f64 / w.committed as f64 / 1000.0 };
    let p = &w.phases_sum;
    let accounted = p.retry_ns + p.lock_read_ns + p.commit_ns + p.switch_ns;
    let latency_breakdown = LatencyBreakdown {
        retry_us: mean_us(p.retry_ns),
        lock_read_us: mean_us(p.lock_read_ns),
        commit_us: mean_us(p.commit_ns),
        switch_us: mean_us(p.switch_ns),
        other_us: mean_us(w.latency_sum_ns.saturating_sub(accounted)),
    };
    let result = RunResult {
        committed_per_s: w.committed as f64 / seconds,
        abort_rate: if attempts == 0 { 0.0 } else { w.aborts as f64 / attempts as f64 },
        hot_committed: w.hot_committed,
        cold_committed: w.committed - w.hot_committed,
        switch_committed: w.switch_committed,
        latency: w.latency.summary().with_mean_us(mean_us(w.latency_sum_ns)),
        latency_breakdown,
        switch_passes: w.switch_passes,
        recirculations: w.recirculations,
        switch_drops: w.switch_drops,
        aborts: w.aborts,
        events: cluster.events_processed(),
        trace_hash: format!("{:016x}", cluster.trace_hash()),
        ideal: (cfg.mode == Mode::P4db && cfg.p4db_config().first_pass_only).then_some(IdealLoss {
            dropped_ops: w.first_pass_dropped_ops,
            truncated_txns: w.first_pass_truncated_txns,
        }),
        prototype: (cfg.engine == Engine::Prototype).then(|| PrototypeCounts {
            started: w.started,
            skipped: w.skipped,
            txns_per_worker: cfg.txns_per_worker,
            workers_done: cluster.hosts().iter().map(|n| n.stats().workers_done).sum(),
        }),
    };
    Ok(RunOutput { result, cluster, layout, mode: cfg.mode, workload })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::{AccOut, Op, OpKind};

    fn key(row: u64) -> TupleKey {
        TupleKey::new(0, row)
    }

    #[test]
    fn cold_tuples_fed_by_hot_reads_join_the_offloaded_set_transitively() {
        // Hot 1 is read into the accumulator and added to cold 2; a second transaction feeds
        // 2 into cold 3. Cold 4 is touched beside hot 1 with no accumulator link: it stays.
        let feed = |from: u64, to: u64| {
            Txn::new(vec![
                Op::read(key(from)).with_acc_out(AccOut::Set),
                Op::new(key(to), OpKind::Add, 0).with_acc_in(),
                Op::read(key(4)),
            ])
        };
        let sample = [feed(1, 2), feed(2, 3), Txn::new(vec![Op::read(key(1)), Op::write(key(4), 1)])];
        assert_eq!(offload_set(&[key(1)], &sample), vec![key(1), key(2), key(3)]);
        assert_eq!(offload_set(&[key(7)], &sample), vec![key(7)], "no link, no growth");
    }
}
