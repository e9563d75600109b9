//! The SwitchTx testbed on the simulator, its figures and its end-of-run checks.
//!
//! Eight servers on three ToRs under a core switch (§5.1, Figure 9: the testbed's one Tofino
//! split into four switches), 100 GbE everywhere, every switch running the gather-and-scatter
//! program (programmable or not, per variant). Variants, cumulative as the paper's ablation:
//!
//! | variant | coordination | priority queues | MPL |
//! |---|---|---|---|
//! | `fasst` | the client | no | static |
//! | `gas` | S0 only | no | static |
//! | `tree-gas` | the tree | no | static |
//! | `reorder` | the tree | three strict-priority classes, servers sort batches | static |
//! | `switchtx` | the tree | three classes, servers sort batches | adaptive (Listing 1) |
//! | `eris` | a sequencer switch (S0) | no | static |
//!
//! `eris` is the Eris-like baseline: a shard is a thread; the client sends its whole
//! transaction in one message whose header holds one sequence number per shard (40 at most:
//! the parser limit), the sequencer switch stamps them in one pass and multicasts the message to
//! the shards' servers, and each shard executes its keys in sequence order, waiting on gaps, and
//! answers the client. Only independent one-shot transactions (YCSB-T read-modify-writes); no
//! replication, no recovery from loss (not among the fuzz cases).
//!
//! Without priority every port is a FIFO; with it every port (hosts' uplinks, switch egress)
//! has three strict-priority classes sharing `buffer_kb` that tail-drops, and the servers
//! reorder their receive batches (§3.4.1): the datagrams that waited for a busy thread are
//! handled as one batch sorted by the same classes (the simulator's per-core receive queues,
//! `pisadb_sim::world`, "Receive queues"; the server only names the class).
//!
//! A run warms up, measures, then drains (no new transactions; everything in flight ends).
//! [`RackObserver`] counts the window's commits, aborts, latencies and lock times, and keeps
//! the whole run's history. [`check`] then holds the run to: the committed history is
//! serializable (`pisadb_check`, versions as writer ids, each committed transaction's writes
//! as the primaries installed them); no primary installed for a transaction its client never
//! saw commit; every shard's backup equals its primary; no lock is left held.

use crate::admission::Listing1;
use crate::config::ShardMap;
pub use crate::ledger::Ledger;
pub use crate::network::Network;
use crate::program::GatherScatter;
use crate::server::{AbortReason, Costs, Mpl, Server, ServerConfig, ServerEvent, Workload, COSTS};
use crate::tree::{Coordination, Layout};
use crate::wal::WalRecord;
use pisadb_check::{CommittedTxn, History};
use pisadb_core::TupleKey;
use pisadb_net::{Endpoint, LinkParams, PortDiscipline, Topology};
use pisadb_report::Latency;
use pisadb_sim::{FaultStats, Faults, Moment, Observer, Restarts, World};
use pisadb_switch::{Switch, SwitchProfile};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Bound on simulated events of one run.
pub const EVENTS_MAX: u64 = 400_000_000;

/// The settings of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackConfig {
    /// Whether the servers sit in three racks (S0 over three ToRs) or all in one.
    pub multi_rack: bool,
    /// Worker threads per server.
    pub threads: u16,
    /// Static MPL per thread (non-adaptive variants).
    pub mpl: u8,
    /// Adaptive MPL cap per thread (`switchtx`).
    pub mpl_max: u8,
    /// Admission-control epoch in microseconds.
    pub epoch_us: u64,
    /// Listing 1's α and initial slow start (`admission.alpha`, `admission.slow_start`; left
    /// out when written while they are Listing 1's own).
    #[serde(default, skip_serializing_if = "Listing1::is_listing")]
    pub admission: Listing1,
    /// The workload.
    pub workload: Workload,
    /// The seed.
    pub seed: u64,
    /// Warm-up in microseconds (not counted).
    pub warmup_us: u64,
    /// Measurement window in microseconds.
    pub measure_us: u64,
    /// A transaction without an outcome this long is resolved (0: never).
    pub timeout_us: u64,
    /// The shared buffer of each strict-priority port, in KiB.
    pub buffer_kb: u64,
    /// Whether servers write their write-ahead log (needed when servers crash; the paper's
    /// system logs nothing, so the figures' runs do not).
    #[serde(default)]
    pub durable: bool,
    /// Leases from a configuration manager and promotion of a failed server's backup, in
    /// microseconds of lease (`crate::config`; 0: off, the initial shard map for good). Needs
    /// `durable`.
    #[serde(default)]
    pub lease_us: u64,
    /// The CPU time a server charges ([`Costs`]; each field defaults to the measured figure,
    /// and the measured ones are left out when the settings are written).
    #[serde(default, skip_serializing_if = "Costs::is_measured")]
    pub costs: Costs,
    /// The NIC's latency and the spread of each hop's delay ([`Network`]; the shared 100 GbE
    /// link without variance unless named, and then left out when the settings are written).
    #[serde(default, skip_serializing_if = "Network::is_default")]
    pub network: Network,
}

impl Default for RackConfig {
    fn default() -> Self {
        RackConfig {
            multi_rack: true,
            threads: 24,
            mpl: 2,
            mpl_max: 16,
            epoch_us: 100,
            admission: Listing1::default(),
            workload: Workload::default(),
            seed: 1,
            warmup_us: 300,
            measure_us: 1_000,
            timeout_us: 2_000,
            buffer_kb: 4_096,
            durable: false,
            lease_us: 0,
            costs: COSTS,
            network: Network::default(),
        }
    }
}

/// What a variant turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Who coordinates.
    pub coord: Coordination,
    /// Strict-priority classes on every port.
    pub priority: bool,
    /// Listing 1's admission control.
    pub adaptive: bool,
    /// The Eris baseline (a sequencer switch, one-shot transactions).
    pub eris: bool,
}

/// The variants' names: the ablation, in order, then the Eris baseline.
pub const VARIANT_NAMES: [&str; 6] = ["fasst", "gas", "tree-gas", "reorder", "switchtx", "eris"];
/// The five-phase variants (FaSST and the cumulative ablation up to SwitchTx).
pub const ABLATION: [&str; 5] = ["fasst", "gas", "tree-gas", "reorder", "switchtx"];

/// The variant called `name`, or the accepted names.
pub fn variant_of(name: &str) -> Result<Variant, String> {
    let v = |coord, priority, adaptive| Ok(Variant { coord, priority, adaptive, eris: false });
    match name {
        "fasst" => v(Coordination::Client, false, false),
        "gas" => v(Coordination::Core, false, false),
        "tree-gas" => v(Coordination::Tree, false, false),
        "reorder" => v(Coordination::Tree, true, false),
        "switchtx" => v(Coordination::Tree, true, true),
        "eris" => Ok(Variant { coord: Coordination::Client, priority: false, adaptive: false, eris: true }),
        other => Err(format!("variant `{other}`: accepted {}", VARIANT_NAMES.join(", "))),
    }
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RackFigures {
    /// Commits in the window per second, in millions.
    pub mtps: f64,
    /// Commits in the window.
    pub commits: u64,
    /// Aborted attempts in the window.
    pub aborts: u64,
    /// Of them, reads that found a lock.
    pub aborts_read_locked: u64,
    /// Of them, a participant's fail.
    pub aborts_fail: u64,
    /// Of them, resolved after a timeout.
    pub aborts_timeout: u64,
    /// Timeouts in the whole run.
    pub timeouts: u64,
    /// Median commit latency, µs (from the first attempt).
    pub p50_us: f64,
    /// 99th percentile commit latency, µs.
    pub p99_us: f64,
    /// Mean time a write primary held an attempt's locks, µs.
    pub lock_us_mean: f64,
    /// Mean MPL per thread at the end.
    pub mpl_mean: f64,
    /// Datagrams the servers rejected.
    pub rejected: u64,
    /// Control messages the switches dropped while gathering (absorbed by GaS).
    pub switch_gathered: u64,
    /// Dropped as stale or aborted by the switches.
    pub switch_filtered: u64,
    /// Frames the priority ports dropped (buffer full).
    pub port_drops: u64,
    /// Committed transactions in the whole run (checked).
    pub checked_commits: u64,
    /// Simulated events.
    pub events: u64,
    /// The trace hash, hex.
    pub trace_hash: String,
}

/// The rack's observer: window figures and the whole run's history.
#[derive(Debug)]
pub struct RackObserver {
    /// Commit latencies in the window (the project's one recorder).
    latency: Latency,
    /// How long write primaries held an attempt's locks, in the window.
    lock_ns: Latency,
    commits: u64,
    aborts: BTreeMap<AbortReason, u64>,
    timeouts: u64,
    rejected: u64,
    /// What the end-of-run checks need from the whole run.
    ledger: Ledger,
}

impl Default for RackObserver {
    fn default() -> Self {
        RackObserver {
            latency: Latency::new(),
            lock_ns: Latency::new(),
            commits: 0,
            aborts: BTreeMap::new(),
            timeouts: 0,
            rejected: 0,
            ledger: Ledger::default(),
        }
    }
}

impl Observer<Server, Switch<GatherScatter>> for RackObserver {
    fn on_event(&mut self, _host: u16, event: ServerEvent, moment: Moment) -> Result<(), String> {
        let counted = moment.in_window && !moment.stopping;
        self.ledger.record(&event)?;
        match event {
            ServerEvent::Committed { latency_ns, .. } if counted => {
                self.commits += 1;
                self.latency.record_ns(latency_ns.max(1));
            }
            ServerEvent::Aborted(reason) if counted => *self.aborts.entry(reason).or_default() += 1,
            ServerEvent::LockTime(ns) if counted => self.lock_ns.record_ns(ns.max(1)),
            ServerEvent::Timeout => self.timeouts += 1,
            ServerEvent::Rejected(_) => self.rejected += 1,
            _ => {}
        }
        Ok(())
    }
}

/// A server's stores after a drain, as the checks compare them: its primary shard's written
/// records and its backup (of the previous server's shard), each key → (value, version), and
/// the keys of its primary still locked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardImage {
    /// Records of its primary shard ever written (version not 0).
    pub primary: BTreeMap<u64, (u64, u64)>,
    /// Records of its backup ever written (version not 0).
    pub backup: BTreeMap<u64, (u64, u64)>,
    /// Keys of its primary shard still locked, with the holder (slot, attempt).
    pub locked: Vec<(u64, (u16, u32))>,
}

impl ShardImage {
    /// The image of `server`.
    pub fn of(server: &Server) -> Self {
        ShardImage {
            primary: server
                .primary()
                .iter()
                .filter(|(_, r)| r.version != 0)
                .map(|(&k, r)| (k, (r.value, r.version)))
                .collect(),
            backup: server.backup().iter().filter(|(_, v)| v.1 != 0).map(|(&k, &v)| (k, v)).collect(),
            locked: server.locked(),
        }
    }
}

/// The world of one run.
pub type RackWorld = World<Server, Switch<GatherScatter>, RackObserver>;

/// Restarts a crashed switch with zeroed registers (§3.5: it stores no data, only
/// coordination state; old messages then fail the tag check and their clients time out and
/// retry) and its multicast groups preloaded again; restarts a crashed server from its
/// write-ahead log ([`Server::recover`]), which it must have kept (`durable`).
#[derive(Debug)]
pub struct SwitchRestarts {
    /// The variant (which switches are programmable).
    pub variant: Variant,
    /// The racks.
    pub layout: Layout,
    /// Each server's configuration, by id.
    pub servers: Vec<ServerConfig>,
}

impl Restarts<Server, Switch<GatherScatter>> for SwitchRestarts {
    fn host(&mut self, id: u16, log: &[WalRecord]) -> Result<Server, String> {
        let cfg = self.servers.get(usize::from(id)).ok_or_else(|| format!("no server {id}"))?;
        if !cfg.durable {
            return Err(format!("server {id} crashed, but servers keep no log in this run (set durable)"));
        }
        Ok(Server::recover(cfg.clone(), log))
    }
    fn switch(&mut self, id: u16, _logs: &[Vec<WalRecord>], _epoch: u16) -> Result<Switch<GatherScatter>, String> {
        make_switch(id, &self.variant, &self.layout)
    }
}

/// Switch `id` of a rack: its program and its multicast groups.
pub(crate) fn make_switch(id: u16, v: &Variant, layout: &Layout) -> Result<Switch<GatherScatter>, String> {
    let programmable = match v.coord {
        Coordination::Client => false,
        Coordination::Core => id == 0 || layout.racks.len() == 1,
        Coordination::Tree => true,
    };
    let up = (id > 0).then(|| layout.anchor(layout.racks[usize::from(id) - 1][0]));
    let mut program = GatherScatter::new(id, programmable, up);
    // Eris's sequencer: S0, which every cross-rack message crosses (the one ToR in one rack).
    if v.eris && id == u16::from(layout.racks.len() == 1) {
        program = program.with_sequencer();
    }
    let mut sw = Switch::new(SwitchProfile::tofino1(), program).map_err(|e| e.to_string())?;
    for (group, members) in layout.groups(id) {
        sw.set_multicast_group(group, members);
    }
    Ok(sw)
}

/// The racks of a configuration.
pub fn layout_of(cfg: &RackConfig) -> Layout {
    if cfg.multi_rack {
        Layout::paper()
    } else {
        Layout::single_rack(8)
    }
}

/// The servers' configuration of a run.
pub(crate) fn server_config(id: u8, v: &Variant, cfg: &RackConfig, layout: &Layout, costs: Costs) -> ServerConfig {
    let coord = if layout.racks.len() == 1 && v.coord == Coordination::Core { Coordination::Tree } else { v.coord };
    ServerConfig {
        id,
        layout: layout.clone(),
        threads: cfg.threads,
        coord,
        priority: v.priority,
        mpl: if v.adaptive {
            Mpl::Adaptive { max: cfg.mpl_max, epoch_ns: cfg.epoch_us * 1_000, listing: cfg.admission }
        } else {
            Mpl::Static(cfg.mpl)
        },
        workload: cfg.workload.clone(),
        seed: cfg.seed,
        timeout_ns: if v.eris { 0 } else { cfg.timeout_us * 1_000 },
        costs,
        eris: v.eris,
        durable: cfg.durable && !v.eris,
        lease_ns: cfg.lease_us * 1_000,
    }
}

/// The network of `layout`: each rack's servers under its ToR (switch `r + 1`), every ToR under
/// S0 (switch 0), 100 GbE links with FIFO ports.
pub fn topology_of(layout: &Layout) -> Topology {
    topology_with(layout, &LinkParams::hundred_gbe())
}

/// As [`topology_of`], every link with the figures `link`.
pub fn topology_with(layout: &Layout, link: &LinkParams) -> Topology {
    let mut topology = Topology::default();
    for (r, servers) in layout.racks.iter().enumerate() {
        let tor = r as u16 + 1;
        topology.connect(Endpoint::Switch(tor), Endpoint::Switch(0), link);
        for &s in servers {
            topology.connect(Endpoint::Host(u16::from(s)), Endpoint::Switch(tor), link);
        }
    }
    topology
}

/// The world of one run, not started.
pub fn build(variant: &str, cfg: &RackConfig) -> Result<RackWorld, String> {
    let v = variant_of(variant)?;
    let layout = layout_of(cfg);
    let configs: Vec<ServerConfig> =
        (0..layout.servers()).map(|id| server_config(id, &v, cfg, &layout, cfg.costs)).collect();
    for c in &configs {
        c.check()?;
    }
    cfg.admission.check()?;
    let mut topology = topology_with(&layout, &cfg.network.link());
    if v.priority {
        let discipline = PortDiscipline::StrictPriority { classes: 3, buffer_bytes: cfg.buffer_kb * 1024 };
        let pairs: Vec<(Endpoint, Endpoint)> = topology.links.iter().map(|l| (l.from, l.to)).collect();
        for (from, to) in pairs {
            topology.set_discipline(from, to, discipline.clone()).map_err(|e| e.to_string())?;
        }
    }
    let switches =
        (0..layout.switches() as u16).map(|id| make_switch(id, &v, &layout)).collect::<Result<Vec<_>, String>>()?;
    let hosts = configs.into_iter().map(Server::new).collect();
    let mut world = World::new(topology, hosts, switches, RackObserver::default()).map_err(|e| e.to_string())?;
    world.set_classifier(crate::wire::classify);
    Ok(world)
}

/// Runs one point (warm-up, window, drain), checks it and returns its figures.
pub fn run(variant: &str, cfg: &RackConfig) -> Result<RackFigures, String> {
    run_with(variant, cfg, None, EVENTS_MAX).map(|(f, _)| f)
}

/// As [`run`], under a fault plan, within `max_events`; the figures and what the faults did.
pub fn run_with(
    variant: &str,
    cfg: &RackConfig,
    faults: Option<Faults>,
    max_events: u64,
) -> Result<(RackFigures, FaultStats), String> {
    let (world, f) = run_world(variant, cfg, faults, max_events)?;
    Ok((f, world.fault_stats()))
}

/// [`run_with`], keeping the drained world for a closer look (its servers' stores and maps).
pub fn run_world(
    variant: &str,
    cfg: &RackConfig,
    faults: Option<Faults>,
    max_events: u64,
) -> Result<(RackWorld, RackFigures), String> {
    let mut world = build(variant, cfg)?;
    let window_end_ns = (cfg.warmup_us + cfg.measure_us) * 1_000;
    if let Some(f) = cfg.network.with_jitter(faults, cfg.seed, window_end_ns) {
        let (v, layout) = (variant_of(variant)?, layout_of(cfg));
        let servers = (0..layout.servers()).map(|id| server_config(id, &v, cfg, &layout, cfg.costs)).collect();
        world.inject(f, Box::new(SwitchRestarts { variant: v, layout, servers }));
    }
    world.run(cfg.warmup_us * 1_000, cfg.measure_us * 1_000, max_events).map_err(|e| e.to_string())?;
    let mut f = figures(&world, cfg);
    world.drain(max_events).map_err(|e| e.to_string())?;
    f.checked_commits = check(&world, !variant_of(variant)?.eris)?;
    f.events = world.events_processed();
    f.trace_hash = format!("{:016x}", world.trace_hash());
    Ok((world, f))
}

/// The window's figures.
pub fn figures(world: &RackWorld, cfg: &RackConfig) -> RackFigures {
    let o = world.observer();
    let abort = |r| o.aborts.get(&r).copied().unwrap_or(0);
    let mut gathered = 0;
    let mut filtered = 0;
    for id in 0..world.topology().switches().len() as u16 {
        let stats = world.switch(id).stats();
        gathered += stats.dropped.get("gathering").copied().unwrap_or(0);
        filtered += ["stale", "aborted"].iter().map(|r| stats.dropped.get(r).copied().unwrap_or(0)).sum::<u64>();
    }
    let mut port_drops = 0;
    let links: Vec<(Endpoint, Endpoint)> = world.topology().links.iter().map(|l| (l.from, l.to)).collect();
    for (from, to) in links {
        if let Some(classes) = world.port_counters(from, to) {
            port_drops += classes.iter().map(|c| c.dropped_frames).sum::<u64>();
        }
    }
    let mpls: Vec<u8> = world.hosts().iter().flat_map(|h| h.mpls()).collect();
    RackFigures {
        mtps: o.commits as f64 / (cfg.measure_us as f64 * 1e-6) / 1e6,
        commits: o.commits,
        aborts: o.aborts.values().sum(),
        aborts_read_locked: abort(AbortReason::ReadLocked),
        aborts_fail: abort(AbortReason::Fail),
        aborts_timeout: abort(AbortReason::Timeout),
        timeouts: o.timeouts,
        p50_us: o.latency.quantile_us(0.5),
        p99_us: o.latency.quantile_us(0.99),
        lock_us_mean: if o.lock_ns.is_empty() { 0.0 } else { o.lock_ns.mean_ns() / 1e3 },
        mpl_mean: mpls.iter().map(|&m| f64::from(m)).sum::<f64>() / mpls.len().max(1) as f64,
        rejected: o.rejected,
        switch_gathered: gathered,
        switch_filtered: filtered,
        port_drops,
        checked_commits: 0,
        events: world.events_processed(),
        trace_hash: format!("{:016x}", world.trace_hash()),
    }
}

/// The end-of-run checks (after a drain); the number of committed transactions checked.
/// `replicated`: whether backups must equal primaries (the Eris baseline keeps no backups).
pub fn check(world: &RackWorld, replicated: bool) -> Result<u64, String> {
    let images: Vec<ShardImage> = world.hosts().iter().map(ShardImage::of).collect();
    let map = final_map(world.hosts().iter().map(Server::map));
    check_ledger(&world.observer().ledger, &images, &map, replicated)
}

/// The newest of the servers' shard maps (the manager's, unless a grant is still on its way).
pub fn final_map<'a>(maps: impl Iterator<Item = &'a ShardMap>) -> ShardMap {
    let mut newest: Option<&ShardMap> = None;
    for m in maps {
        if newest.is_none_or(|n| m.epoch > n.epoch) {
            newest = Some(m);
        }
    }
    newest.cloned().unwrap_or_else(|| ShardMap::initial(1))
}

/// The records of `shard` among `records`.
fn shard_part<V: Clone>(records: &BTreeMap<u64, V>, shard: u8) -> BTreeMap<u64, V> {
    let first = u64::from(shard) << 40;
    records.range(first..first + (1 << 40)).map(|(&k, v)| (k, v.clone())).collect()
}

/// No lost commit: every write of every transaction a client counted committed is in the
/// final state, or was overwritten by a later committed transaction (one that installed over
/// it). A crash that loses a committed write fails here even if what is left is serializable.
pub fn no_lost_commit(o: &Ledger, images: &[ShardImage], map: &ShardMap) -> Result<(), String> {
    let overwritten: BTreeSet<(u64, u64)> = o
        .installed
        .iter()
        .filter(|(txn, _)| o.reads.contains_key(txn))
        .flat_map(|(_, writes)| writes.iter().map(|&(k, over)| (k, over)))
        .collect();
    for (&txn, writes) in o.installed.iter().filter(|(txn, _)| o.reads.contains_key(txn)) {
        for &(k, _) in writes {
            let primary = usize::from(map.primary_of(crate::server::shard_of(k)));
            let now = images.get(primary).and_then(|s| s.primary.get(&k)).map_or(0, |v| v.1);
            if now != txn && !overwritten.contains(&(k, txn)) {
                return Err(format!(
                    "lost commit: transaction {txn:#x} committed a write of key {k:#x}, but the key holds version {now:#x} and nothing committed over it"
                ));
            }
        }
    }
    Ok(())
}

/// The end-of-run checks on a run's ledger and its servers' images (by server id, after a
/// drain) under the final shard map: the committed history is serializable, no primary
/// installed for a transaction its client never saw commit, every shard's backup (if it still
/// has one) equals its primary if `replicated`, no lock is left at a shard's primary, no lost
/// commit ([`no_lost_commit`]). The number of committed transactions checked.
pub fn check_ledger(o: &Ledger, images: &[ShardImage], map: &ShardMap, replicated: bool) -> Result<u64, String> {
    let mut history = History::new();
    let key = |k: u64| TupleKey::new(u16::from(crate::server::shard_of(k)), k & ((1 << 40) - 1));
    for (&txn, reads) in &o.reads {
        let none = Vec::new();
        let writes = match o.installed.get(&txn) {
            Some(w) if !o.read_only.contains(&txn) => w,
            None if o.read_only.contains(&txn) => &none,
            Some(_) => return Err(format!("read-only transaction {txn:#x} installed writes")),
            None => return Err(format!("transaction {txn:#x} committed but no primary installed its writes")),
        };
        history.record(CommittedTxn {
            id: txn,
            reads: reads.iter().map(|&(k, v)| (key(k), v)).collect(),
            writes: writes.iter().map(|&(k, v)| (key(k), v)).collect(),
        });
    }
    if let Some(txn) = o.installed.keys().find(|t| !o.reads.contains_key(t)) {
        return Err(format!("a primary installed transaction {txn:#x}, which its client never saw commit"));
    }
    history.check().map_err(|v| format!("the committed history is not serializable: {v}"))?;
    no_lost_commit(o, images, map)?;
    for shard in 0..images.len() as u8 {
        let Some(image) = images.get(usize::from(map.primary_of(shard))) else { continue };
        let primary = shard_part(&image.primary, shard);
        if let Some(copied) = map.backup_of(shard).and_then(|b| images.get(usize::from(b))).filter(|_| replicated) {
            let copied = shard_part(&copied.backup, shard);
            if primary != copied {
                let diff = primary.iter().find(|(k, v)| copied.get(k) != Some(v)).map(|(k, _)| *k);
                return Err(format!("shard {shard}: backup differs from primary (first key {diff:?})"));
            }
        }
        if let Some((k, holder)) = image.locked.iter().find(|(k, _)| crate::server::shard_of(*k) == shard) {
            return Err(format!("shard {shard}: key {k:#x} still locked by {holder:?} after the drain"));
        }
    }
    Ok(o.reads.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_write_missing_from_the_final_state_is_a_lost_commit() {
        let key = crate::server::key_of(2, 5, 1, 24);
        let mut ledger = Ledger::default();
        ledger.reads.insert(7, vec![(key, 0)]);
        ledger.installed.insert(7, vec![(key, 0)]);
        let mut shards = vec![ShardImage::default(); 8];
        let map = ShardMap::initial(8);
        assert!(
            no_lost_commit(&ledger, &shards, &map).unwrap_err().contains("lost commit"),
            "the key was never written"
        );
        shards[2].primary.insert(key, (1, 7));
        assert_eq!(no_lost_commit(&ledger, &shards, &map), Ok(()));
        // A later committed transaction 9 wrote over 7: the final version is 9's.
        ledger.reads.insert(9, vec![(key, 7)]);
        ledger.installed.insert(9, vec![(key, 7)]);
        shards[2].primary.insert(key, (2, 9));
        assert_eq!(no_lost_commit(&ledger, &shards, &map), Ok(()));
        // 9 only installed, never counted committed: 7's write is gone.
        ledger.reads.remove(&9);
        assert!(no_lost_commit(&ledger, &shards, &map).is_err());
    }
}
