//! The paper's setup on the simulator: one client host — one switch — one store.
//!
//! Host 0 carries the N clients, host 1 is the store, host 2 is the switch's controller, which
//! installs the variant's mode and the hot key's cell over the control channel; switch 0 runs
//! [`Gotthard`]. The client–switch link has a one-way delay of `near_us` and the switch–store
//! link `far_us` (10 ms and 40 ms: the 50 ms split 20/80 of the authors' script), both WAN links of
//! `pisadb_net` (10 Gbit/s); microseconds so that data-center delays can be asked too. The
//! controller sits on a 10 GbE link beside the switch. The run goes until every client has its
//! commits and the network is empty (the clients' retransmission timers and the controller's
//! resend timer stop re-arming once nothing waits on them, so the scheduler drains); the
//! completion time is when the last client finished.
//!
//! [`RackObserver`] turns the hosts' events into the figures: commits, aborts by source,
//! retries, retransmissions, latency (mean and p99 from an HDR histogram) and rejected
//! datagrams. It also keeps, in a [`Ledger`], what the oracles of [`Ledger::check`] need: the store's
//! committed history (versions read and overwritten, for `pisadb_check`) and which
//! transactions the store committed and the clients counted, so that a run — with or without
//! faults — can be checked for serializability, for every client finishing its commits, and
//! for no transaction committed or counted twice.

use crate::client::{AbortSource, ClientConfig, ClientEvent, ClientHost, ClientTimer, HOT_KEY};
use crate::control::{ControlPlane, Controller, ControllerEvent, Resend};
use crate::costs::Costs;
use crate::program::{Gotthard, Mode};
use crate::store::{Store, StoreEvent, StoreRecord};
use pisadb_check::{CommittedTxn, History};
use pisadb_core::Nanos;
use pisadb_core::TupleKey;
use pisadb_host::{Host, HostOutbox, Route, TraceBytes, TraceHash};
use pisadb_net::{Endpoint, LinkParams, Topology};
use pisadb_report::latency::{Latency, LatencySummary};
use pisadb_sim::{Faults, Moment, NoRestarts, Observer, World};
use pisadb_switch::{Switch, SwitchProfile};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Host id of the client host.
pub const CLIENT_HOST: u16 = 0;
/// Host id of the store.
pub const STORE_HOST: u16 = 1;
/// Host id of the switch's controller.
pub const CONTROLLER_HOST: u16 = 2;
/// Bound on simulated events of one run.
pub const EVENTS_MAX: u64 = 200_000_000;

/// The settings of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackConfig {
    /// Clients on the client host (N in the authors' scripts).
    pub clients: u32,
    /// Share of write transactions, 0..=1.
    pub write_share: f64,
    /// Commits each client makes.
    pub commits_per_client: u32,
    /// One-way client–switch delay in microseconds.
    pub near_us: u64,
    /// One-way switch–store delay in microseconds.
    pub far_us: u64,
    /// The seed of every random choice.
    pub seed: u64,
    /// A client sends an attempt again after this many microseconds without an answer; 0:
    /// the larger of three round trips (`6 × (near_us + far_us)`) and 1 ms.
    #[serde(default)]
    pub retransmit_us: u64,
    /// Latency variance: every hop adds a delay uniform in `0..=jitter_us` µs, and datagrams
    /// may overtake each other (the simulator's [`Faults::network_jitter`]). 0: fixed delays,
    /// under which the N closed-loop clients run in lockstep (see the crate's `RESULTS.md`).
    #[serde(default)]
    pub jitter_us: u64,
    /// The CPU time the hosts' handlers charge (default: measured, `CALIBRATION.md`).
    #[serde(default)]
    pub costs: Costs,
}

impl RackConfig {
    /// The retransmission timeout in nanoseconds (see `retransmit_us`).
    pub fn retransmit_ns(&self) -> Nanos {
        let us = match self.retransmit_us {
            0 => (6 * (self.near_us + self.far_us)).max(1_000),
            us => us,
        };
        us.saturating_mul(1_000)
    }
}

impl Default for RackConfig {
    fn default() -> Self {
        RackConfig {
            clients: 8,
            write_share: 0.25,
            commits_per_client: 1000,
            near_us: 10_000,
            far_us: 40_000,
            seed: 1,
            retransmit_us: 0,
            jitter_us: 0,
            costs: Costs::MEASURED,
        }
    }
}

/// A host of the rack.
#[derive(Debug)]
pub enum RackHost {
    /// The client host.
    Client(ClientHost),
    /// The store.
    Store(Store),
    /// The switch's controller (the control plane).
    Controller(Controller),
}

/// What a rack host reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RackEvent {
    /// From the client host.
    Client(ClientEvent),
    /// From the store.
    Store(StoreEvent),
    /// From the controller.
    Controller(ControllerEvent),
}

/// A timer of a rack host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RackTimer {
    /// The client host's.
    Client(ClientTimer),
    /// The controller's.
    Controller(Resend),
}

impl TraceBytes for RackTimer {
    fn trace(&self, hash: &mut TraceHash) {
        match self {
            RackTimer::Client(t) => t.trace(hash),
            RackTimer::Controller(t) => t.trace(hash),
        }
    }
}

/// Runs `f` on an inner host with its own outbox and moves what it produced into `out` (its
/// log records through `log`: only the store logs).
fn inner<H: Host, R>(
    host: &mut H,
    out: &mut HostOutbox<RackHost>,
    timer: fn(H::Timer) -> RackTimer,
    event: fn(H::Event) -> RackEvent,
    log: fn(H::Log) -> Option<StoreRecord>,
    f: impl FnOnce(&mut H, &mut HostOutbox<H>) -> R,
) -> R {
    let mut o = HostOutbox::<H>::default();
    let r = f(host, &mut o);
    out.sends.extend(o.sends);
    out.timers.extend(o.timers.into_iter().map(|(at, t)| (at, timer(t))));
    out.events.extend(o.events.into_iter().map(event));
    out.log.extend(o.log.into_iter().filter_map(log));
    out.cpu_ns += o.cpu_ns;
    r
}

/// The log mapper of a host that logs nothing.
fn no_log(_: ()) -> Option<StoreRecord> {
    None
}

impl Host for RackHost {
    type Timer = RackTimer;
    type Log = StoreRecord;
    type Event = RackEvent;

    fn cores(&self) -> u16 {
        match self {
            RackHost::Client(c) => c.cores(),
            RackHost::Store(s) => s.cores(),
            RackHost::Controller(c) => c.cores(),
        }
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        match self {
            RackHost::Client(c) => inner(c, out, RackTimer::Client, RackEvent::Client, no_log, |h, o| h.start(now, o)),
            RackHost::Store(s) => inner(s, out, |t| match t {}, RackEvent::Store, Some, |h, o| h.start(now, o)),
            RackHost::Controller(c) => {
                inner(c, out, RackTimer::Controller, RackEvent::Controller, no_log, |h, o| h.start(now, o))
            }
        }
    }

    fn route(&self, bytes: &[u8]) -> Route {
        match self {
            RackHost::Client(c) => c.route(bytes),
            RackHost::Store(s) => s.route(bytes),
            RackHost::Controller(c) => c.route(bytes),
        }
    }

    fn timer_core(&self, timer: &RackTimer) -> u16 {
        match (self, timer) {
            (RackHost::Client(c), RackTimer::Client(t)) => c.timer_core(t),
            _ => 0,
        }
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        match self {
            RackHost::Client(c) => {
                inner(c, out, RackTimer::Client, RackEvent::Client, no_log, |h, o| h.handle_datagram(now, bytes, o))
            }
            RackHost::Store(s) => {
                inner(s, out, |t| match t {}, RackEvent::Store, Some, |h, o| h.handle_datagram(now, bytes, o))
            }
            RackHost::Controller(c) => inner(c, out, RackTimer::Controller, RackEvent::Controller, no_log, |h, o| {
                h.handle_datagram(now, bytes, o)
            }),
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: RackTimer, out: &mut HostOutbox<Self>) {
        match (self, timer) {
            (RackHost::Client(c), RackTimer::Client(t)) => {
                inner(c, out, RackTimer::Client, RackEvent::Client, no_log, |h, o| h.handle_timer(now, t, o))
            }
            (RackHost::Controller(c), RackTimer::Controller(t)) => {
                inner(c, out, RackTimer::Controller, RackEvent::Controller, no_log, |h, o| h.handle_timer(now, t, o))
            }
            // A host only gets its own timers back.
            _ => {}
        }
    }

    fn stop(&mut self) {
        match self {
            RackHost::Client(c) => c.stop(),
            RackHost::Store(s) => s.stop(),
            RackHost::Controller(c) => c.stop(),
        }
    }

    fn is_idle(&self) -> bool {
        match self {
            RackHost::Client(c) => c.is_idle(),
            RackHost::Store(s) => s.is_idle(),
            RackHost::Controller(c) => c.is_idle(),
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RackFigures {
    /// When the last client finished, in seconds of simulated time.
    pub completion_s: f64,
    /// Commits counted (the initial write excluded).
    pub commits: u64,
    /// Of them, write transactions.
    pub write_commits: u64,
    /// Aborts answered by the store.
    pub aborts_store: u64,
    /// Aborts answered by the switch against a committed value.
    pub aborts_switch: u64,
    /// Aborts answered by the switch against an optimistically logged value.
    pub aborts_switch_optimistic: u64,
    /// Retries (attempts beyond the first) of committed transactions.
    pub retries: u64,
    /// Attempts sent again after a timeout.
    pub retransmissions: u64,
    /// Replies the clients ignored as answers to older ids or attempts.
    pub stale_replies: u64,
    /// Requests the store answered from a remembered commit.
    pub store_replays: u64,
    /// Commit latency (mean, p50, p99 in µs, under the shared names `latency_us_*`).
    #[serde(flatten)]
    pub latency: LatencySummary,
    /// Datagrams the hosts ignored or rejected.
    pub rejected: u64,
    /// The store's final value of the hot key.
    pub final_value: i32,
    /// Simulated events.
    pub events: u64,
    /// The trace hash, hex.
    pub trace_hash: String,
}

/// What the oracles need from a run's events: kept per process in real mode and merged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Clients that finished.
    pub finished: Vec<u32>,
    /// The store's commits: (client, request id, whether it wrote).
    pub store_commits: Vec<(u32, u32, bool)>,
    /// The clients' counted commits: (client, request id, whether a write, whether the switch
    /// answered it).
    pub counted: Vec<(u32, u32, bool, bool)>,
    /// The store's committed history (versions read and overwritten).
    pub history: Vec<CommittedTxn>,
    /// Whether the controller saw its whole configuration acknowledged.
    pub installed: bool,
}

impl Ledger {
    /// Notes what `event` tells the oracles.
    pub fn record(&mut self, event: &RackEvent) {
        match event {
            RackEvent::Client(ClientEvent::Committed { client, request, write, by_switch, .. }) => {
                self.counted.push((*client, *request, *write, *by_switch));
            }
            RackEvent::Client(ClientEvent::Finished(c)) => self.finished.push(*c),
            RackEvent::Store(StoreEvent::Committed { client, request, id, writes, read_versions, write_versions }) => {
                self.store_commits.push((*client, *request, !writes.is_empty()));
                let key = |k: u32| TupleKey::new(0, u64::from(k));
                self.history.push(CommittedTxn {
                    id: *id,
                    reads: read_versions.iter().map(|&(k, v)| (key(k), v)).collect(),
                    writes: write_versions.iter().map(|&(k, v)| (key(k), v)).collect(),
                });
            }
            RackEvent::Controller(ControllerEvent::Installed) => self.installed = true,
            _ => {}
        }
    }

    /// Adds another process's ledger.
    pub fn merge(&mut self, other: Ledger) {
        self.finished.extend(other.finished);
        self.store_commits.extend(other.store_commits);
        self.counted.extend(other.counted);
        self.history.extend(other.history);
        self.installed |= other.installed;
    }

    /// The oracles, after a run that drained: the store's history is serializable; no
    /// transaction committed twice at the store or was counted twice by its client; the
    /// clients counted exactly the write transactions the store committed (the initial write
    /// aside), so no commit was lost or taken for an abort; the hot key holds one increment
    /// per counted write; every one of `clients` finished; the control plane's configuration
    /// was acknowledged.
    pub fn check(&self, clients: u32, final_value: i32) -> Result<(), String> {
        let mut history = History::new();
        self.history.iter().cloned().for_each(|t| history.record(t));
        history.check().map_err(|v| format!("the store's history is not serializable: {v}"))?;
        let mut store: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for &(c, r, _) in &self.store_commits {
            *store.entry((c, r)).or_insert(0) += 1;
        }
        if let Some(((c, r), n)) = store.iter().find(|(_, n)| **n > 1) {
            return Err(format!("the store committed request {r} of client {c} {n} times"));
        }
        let mut counted: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for &(c, r, _, _) in &self.counted {
            *counted.entry((c, r)).or_insert(0) += 1;
        }
        if let Some(((c, r), n)) = counted.iter().find(|(_, n)| **n > 1) {
            return Err(format!("client {c} counted the commit of request {r} {n} times"));
        }
        let counted_writes: BTreeSet<(u32, u32)> =
            self.counted.iter().filter(|t| t.2).map(|&(c, r, _, _)| (c, r)).collect();
        let store_writes: BTreeSet<(u32, u32)> =
            self.store_commits.iter().filter(|t| t.2 && (t.0, t.1) != INIT).map(|&(c, r, _)| (c, r)).collect();
        if let Some((c, r)) = store_writes.difference(&counted_writes).next() {
            return Err(format!("the store committed request {r} of client {c}, which its client never counted"));
        }
        if let Some((c, r)) = counted_writes.difference(&store_writes).next() {
            return Err(format!("client {c} counted request {r} as committed, which the store never committed"));
        }
        if let Some(&(c, r, _, _)) = self.counted.iter().find(|t| !t.3 && !store.contains_key(&(t.0, t.1))) {
            return Err(format!("client {c} counted request {r} as committed by the store, which never committed it"));
        }
        if i64::from(final_value) != i64::try_from(counted_writes.len()).unwrap_or(i64::MAX) {
            return Err(format!(
                "the hot key holds {final_value}, but {} increments were counted (lost or doubled)",
                counted_writes.len()
            ));
        }
        if let Some(c) = (0..clients).find(|c| !self.finished.contains(c)) {
            return Err(format!("client {c} did not finish its commits"));
        }
        if !self.installed {
            return Err("the control plane's configuration was never acknowledged".into());
        }
        Ok(())
    }
}

/// The initial, uncounted write: client 0's first request.
const INIT: (u32, u32) = (0, 1);

/// Collects the figures from the hosts' events.
#[derive(Debug)]
pub struct RackObserver {
    /// Commit latencies.
    latency: Latency,
    /// Running counters (the figures not derived at the end).
    figures: RackFigures,
    /// When the last client finished.
    finished_ns: Nanos,
    /// What the oracles check.
    ledger: Ledger,
}

impl RackObserver {
    /// An observer with nothing seen yet.
    pub fn new() -> Self {
        RackObserver {
            latency: Latency::new(),
            figures: RackFigures {
                completion_s: 0.0,
                commits: 0,
                write_commits: 0,
                aborts_store: 0,
                aborts_switch: 0,
                aborts_switch_optimistic: 0,
                retries: 0,
                retransmissions: 0,
                stale_replies: 0,
                store_replays: 0,
                latency: LatencySummary::default(),
                rejected: 0,
                final_value: 0,
                events: 0,
                trace_hash: String::new(),
            },
            finished_ns: 0,
            ledger: Ledger::default(),
        }
    }

    /// What the oracles check.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The oracles ([`Ledger::check`]).
    pub fn check(&self, clients: u32, final_value: i32) -> Result<(), String> {
        self.ledger.check(clients, final_value)
    }

    /// Counts `event`, which a handler that ended at `at` reported.
    pub fn count(&mut self, event: RackEvent, at: Nanos) -> Result<(), String> {
        self.ledger.record(&event);
        let f = &mut self.figures;
        match event {
            RackEvent::Client(ClientEvent::Committed { write, latency_ns, retries, .. }) => {
                f.commits += 1;
                f.write_commits += u64::from(write);
                f.retries += u64::from(retries);
                self.latency.record_ns(latency_ns.max(1));
            }
            RackEvent::Client(ClientEvent::Aborted(AbortSource::Store)) => f.aborts_store += 1,
            RackEvent::Client(ClientEvent::Aborted(AbortSource::Switch)) => f.aborts_switch += 1,
            RackEvent::Client(ClientEvent::Aborted(AbortSource::SwitchOptimistic)) => f.aborts_switch_optimistic += 1,
            RackEvent::Client(ClientEvent::Retransmitted) => f.retransmissions += 1,
            RackEvent::Client(ClientEvent::Stale) => f.stale_replies += 1,
            RackEvent::Client(ClientEvent::Finished(_)) => self.finished_ns = self.finished_ns.max(at),
            RackEvent::Client(ClientEvent::Ignored(_)) | RackEvent::Store(StoreEvent::Rejected(_)) => f.rejected += 1,
            RackEvent::Store(StoreEvent::Replayed) => f.store_replays += 1,
            RackEvent::Store(StoreEvent::Committed { .. } | StoreEvent::Aborted) => {}
            RackEvent::Controller(ControllerEvent::Installed) => {}
            RackEvent::Controller(ControllerEvent::Refused(status)) => {
                return Err(format!("the switch refused the control plane's configuration: {status:?}"));
            }
            RackEvent::Controller(ControllerEvent::Rejected(_)) => f.rejected += 1,
        }
        Ok(())
    }

    /// The figures so far (completion, latency and the final value filled in).
    pub fn figures(&self, final_value: i32) -> RackFigures {
        let mut f = self.figures.clone();
        f.completion_s = self.finished_ns as f64 / 1e9;
        f.latency = self.latency.summary();
        f.final_value = final_value;
        f
    }
}

impl Default for RackObserver {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer<RackHost, Switch<Gotthard>> for RackObserver {
    fn on_event(&mut self, _host: u16, event: RackEvent, moment: Moment) -> Result<(), String> {
        self.count(event, moment.at)
    }
}

/// The switch mode of a variant name, or the accepted names.
pub fn mode_of(variant: &str) -> Result<Mode, String> {
    match variant {
        "forward" => Ok(Mode::Forward),
        "read-cache" => Ok(Mode::ReadCache),
        "gotthard" => Ok(Mode::OptimisticAbort),
        "early-abort" => Ok(Mode::EarlyAbort),
        other => Err(format!("variant `{other}`: accepted forward, read-cache, gotthard, early-abort")),
    }
}

/// The world of one run, not started.
pub fn build(mode: Mode, cfg: &RackConfig) -> Result<RackWorld, String> {
    if !(0.0..=1.0).contains(&cfg.write_share) {
        return Err(format!("write_share {}: accepted 0..=1", cfg.write_share));
    }
    if cfg.clients == 0 || cfg.clients > 1024 {
        return Err(format!("clients {}: accepted 1..=1024", cfg.clients));
    }
    let wan_us = |us: u64| LinkParams { propagation_ns: us.saturating_mul(1_000), ..LinkParams::wan(0) };
    let mut topology = Topology::default();
    topology.connect(Endpoint::Host(CLIENT_HOST), Endpoint::Switch(0), &wan_us(cfg.near_us));
    topology.connect(Endpoint::Host(STORE_HOST), Endpoint::Switch(0), &wan_us(cfg.far_us));
    // The controller sits beside the switch (its CPU port).
    topology.connect(Endpoint::Host(CONTROLLER_HOST), Endpoint::Switch(0), &LinkParams::ten_gbe());
    let client = ClientHost::new(ClientConfig {
        address: CLIENT_HOST,
        store: STORE_HOST,
        clients: cfg.clients,
        write_share: cfg.write_share,
        commits_per_client: cfg.commits_per_client,
        seed: cfg.seed,
        retransmit_ns: cfg.retransmit_ns(),
    })
    .with_reply_ns(cfg.costs.client_reply_ns);
    let controller = Controller::new(CONTROLLER_HOST, &control_plane(mode))?;
    let hosts = vec![
        RackHost::Client(client),
        RackHost::Store(Store::new(STORE_HOST).with_costs(cfg.costs)),
        RackHost::Controller(controller),
    ];
    let switch = Switch::new(SwitchProfile::tofino1(), Gotthard::new()).map_err(|e| e.to_string())?;
    let mut world = World::new(topology, hosts, vec![switch], RackObserver::new()).map_err(|e| e.to_string())?;
    world.set_controller(0, CONTROLLER_HOST);
    if cfg.jitter_us > 0 {
        let jitter = Faults::network_jitter(cfg.seed, cfg.jitter_us.saturating_mul(1_000), true);
        world.inject(jitter, Box::new(NoRestarts));
    }
    Ok(world)
}

/// The control plane of a rack in `mode`: the micro-benchmark's one hot key is cacheable.
pub fn control_plane(mode: Mode) -> ControlPlane {
    ControlPlane { mode, keys: vec![HOT_KEY] }
}

/// The world of a rack, its run done.
pub type RackWorld = World<RackHost, Switch<Gotthard>, RackObserver>;

/// Runs one point to completion and returns its figures.
pub fn run(mode: Mode, cfg: &RackConfig) -> Result<RackFigures, String> {
    let mut world = build(mode, cfg)?;
    world.run(0, Nanos::MAX / 2, EVENTS_MAX).map_err(|e| e.to_string())?;
    Ok(figures(&world))
}

/// Runs one point to completion, checks the oracles ([`RackObserver::check`]) and returns its
/// figures, or the first oracle that failed.
pub fn run_checked(mode: Mode, cfg: &RackConfig) -> Result<RackFigures, String> {
    let mut world = build(mode, cfg)?;
    world.run(0, Nanos::MAX / 2, EVENTS_MAX).map_err(|e| e.to_string())?;
    let f = figures(&world);
    world.observer().check(cfg.clients, f.final_value)?;
    Ok(f)
}

/// The figures of a world whose run is done.
pub fn figures(world: &RackWorld) -> RackFigures {
    let final_value = match &world.hosts()[usize::from(STORE_HOST)] {
        RackHost::Store(s) => s.value(HOT_KEY),
        RackHost::Client(_) | RackHost::Controller(_) => 0,
    };
    let mut f = world.observer().figures(final_value);
    f.events = world.events_processed();
    f.trace_hash = format!("{:016x}", world.trace_hash());
    f
}
