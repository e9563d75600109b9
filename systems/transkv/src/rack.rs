//! TransKV's data center on the simulator: the Fig. 6(c) hierarchy of [`crate::layout`] with
//! 16 storage nodes, 4 client hosts and the controller, 8 switches each running
//! [`TransKvProgram`] in its variant's mode, every link 10 GbE.
//!
//! A run goes until every client host has committed its transactions and the network is
//! empty; throughput is all commits over the time the last client finished. The cache is
//! filled at setup from the workload's popularity ([`Hierarchy::new`], [`fill`]).
//!
//! **End-of-run checks** ([`check`]): the committed history — reads as the clients saw them,
//! writes with the versions the storage nodes overwrote — is serializable *in timestamp
//! order* (`pisadb_check`'s `check_order`); every write a client counted was installed by a
//! node and every node's commit was counted; every cached value (all 48 bytes, read from the
//! switch's registers, where the entry holds one: a switch rebuilt after a crash holds only
//! timestamps) equals its node's, and no T-TS is left pending but the claim of a transaction
//! its node aborted that no request met after its lease (the first that does frees it:
//! `crate::program`, the lease); the controller and the nodes hold no transaction. The same checks judge the fault-injection cases (`crate::fuzz`).

use crate::client::{ClientConfig, ClientEvent, ClientHost, ClientTimer, Path};
use crate::control::{Controller, ControllerEvent, ControllerRecord, ControllerTimer};
use crate::layout::{self, Hierarchy, CLIENT0, CLIENTS, CONTROLLER, NODES, SWITCHES};
use crate::program::{fill, Mode, TransKvProgram, CACHE_TABLE, FULL_BITMAP, HITS, T_TS, VALUE0, VALUE_ARRAYS};
use crate::store::{NoTimer, NodeRecord, StorageNode, StoreEvent};
use crate::wire::{value_of, VALUE_BYTES};
use pisadb_check::{CommittedTxn, History};
use pisadb_core::{Nanos, TraceBytes, TraceHash, TupleKey};
use pisadb_host::{Host, HostOutbox, Route};
use pisadb_net::LinkParams;
use pisadb_report::latency::{Latency, LatencySummary};
use pisadb_sim::{Moment, Observer, World};
use pisadb_switch::{Switch, SwitchProfile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bound on simulated events of one run.
pub const EVENTS_MAX: u64 = 400_000_000;

/// The settings of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackConfig {
    /// Keys in the store (§VI: YCSB; the issue asks about 10M).
    pub records: u64,
    /// Keys each of the 8 switches caches (§V: 64K).
    pub cache_per_switch: u32,
    /// Zipf exponent of the key popularity; 0: uniform.
    pub zipf: f64,
    /// Share of write transactions, 0..=1.
    pub write_ratio: f64,
    /// Ops per transaction.
    pub ops_per_txn: u8,
    /// Transactions each client host keeps in flight.
    pub outstanding: u16,
    /// Transactions each client host commits.
    pub txns_per_client: u32,
    /// The seed of every random choice.
    pub seed: u64,
    /// A client resolves an attempt unanswered for this many microseconds.
    #[serde(default = "default_resolve_us")]
    pub resolve_us: u64,
    /// The lease of a switch's claim in microseconds (`crate::program`: a request meeting a
    /// claim older than this asks the key's node about it); 0: [`LEASE_RESOLVES`] ×
    /// `resolve_us`.
    #[serde(default)]
    pub lease_us: u64,
    /// The cache refresh's epoch in microseconds (§IV-D, `crate::refresh`); 0: no refresh,
    /// the setup fill stays (the paper's experiments draw from one fixed popularity, for which
    /// the fill is already the placement a refresh would choose). Variant `transkv` only.
    #[serde(default)]
    pub refresh_epoch_us: u64,
    /// The hot set moves at this time (µs; 0: never): from then on every client draws
    /// popularity rank r as key `key_of_rank(r + hot_shift_ranks)`.
    #[serde(default)]
    pub hot_shift_at_us: u64,
    /// How many ranks the hot set moves by (see `hot_shift_at_us`).
    #[serde(default)]
    pub hot_shift_ranks: u64,
    /// Cores of the controller (the coordinator): an assumption of the model
    /// ([`crate::costs::CONTROLLER_CORES`] by default), which bounds Tranx-Coor's throughput.
    #[serde(default = "default_controller_cores")]
    pub controller_cores: u16,
    /// The one-way latency of every NIC, in nanoseconds (10 GbE's assumed 1 µs by default).
    #[serde(default = "default_nic_ns")]
    pub nic_ns: Nanos,
}

fn default_resolve_us() -> u64 {
    10_000
}

fn default_controller_cores() -> u16 {
    crate::costs::CONTROLLER_CORES
}

fn default_nic_ns() -> Nanos {
    LinkParams::ten_gbe().nic_ns
}

/// The default lease, in resolve times: a claim this old outlived every resolve of its own
/// client by far, so a query is rare and never the normal way a claim ends.
pub const LEASE_RESOLVES: u64 = 4;

impl RackConfig {
    /// The lease of a switch's claim (`lease_us`, or its default).
    pub fn lease_ns(&self) -> Nanos {
        let us = if self.lease_us == 0 { LEASE_RESOLVES.saturating_mul(self.resolve_us) } else { self.lease_us };
        us.saturating_mul(1_000).max(1)
    }
}

impl Default for RackConfig {
    fn default() -> Self {
        RackConfig {
            records: 10_000_000,
            cache_per_switch: 65_536,
            zipf: 0.99,
            write_ratio: 0.0,
            ops_per_txn: 1,
            outstanding: 16,
            txns_per_client: 5_000,
            seed: 1,
            resolve_us: default_resolve_us(),
            lease_us: 0,
            refresh_epoch_us: 0,
            hot_shift_at_us: 0,
            hot_shift_ranks: 0,
            controller_cores: default_controller_cores(),
            nic_ns: default_nic_ns(),
        }
    }
}

/// The switch mode and client path of a variant, or the accepted names.
pub fn variant_of(variant: &str) -> Result<(Mode, Path), String> {
    match variant {
        "transkv" => Ok((Mode::Tso, Path::TransKv)),
        "tranx-coor" => Ok((Mode::Forward, Path::Coordinator)),
        "no-cache" => Ok((Mode::Forward, Path::NonTransactional)),
        "transkv-cache" => Ok((Mode::CacheOnly, Path::NonTransactional)),
        "transkv-log" => Ok((Mode::Tso, Path::TransKv)),
        other => Err(format!("variant `{other}`: accepted transkv, tranx-coor, no-cache, transkv-cache, transkv-log")),
    }
}

/// A host of the data center.
#[derive(Debug)]
pub enum RackHost {
    /// A storage node.
    Store(StorageNode),
    /// A client host.
    Client(Box<ClientHost>),
    /// The controller.
    Controller(Controller),
}

/// What a host reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RackEvent {
    /// From a storage node.
    Store(StoreEvent),
    /// From a client host.
    Client(ClientEvent),
    /// From the controller.
    Controller(ControllerEvent),
}

/// The hosts' timers (the clients' resolve timers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RackTimer {
    /// A client's.
    Client(ClientTimer),
    /// The controller's.
    Controller(ControllerTimer),
}

impl TraceBytes for RackTimer {
    fn trace(&self, hash: &mut TraceHash) {
        match self {
            RackTimer::Client(t) => t.trace(hash),
            RackTimer::Controller(t) => t.trace(hash),
        }
    }
}

/// The log records of a host that keeps none.
fn no_log(_: ()) -> Option<NodeRecord> {
    None
}

/// The controller's log records (variant `transkv-log`), in the rack's record type.
fn controller_log(record: ControllerRecord) -> Option<NodeRecord> {
    Some(NodeRecord::Controller(record))
}

/// A storage node's log records.
fn node_log(record: NodeRecord) -> Option<NodeRecord> {
    Some(record)
}

/// How an inner host's timers, events and log records become the rack's.
type Wrap<H> = (
    fn(<H as Host>::Timer) -> RackTimer,
    fn(<H as Host>::Event) -> RackEvent,
    fn(<H as Host>::Log) -> Option<NodeRecord>,
);

/// Runs `f` on an inner host with its own outbox and moves what it produced into `out`.
fn inner<H: Host>(
    host: &mut H,
    out: &mut HostOutbox<RackHost>,
    (timer, event, log): Wrap<H>,
    f: impl FnOnce(&mut H, &mut HostOutbox<H>),
) {
    let mut o = HostOutbox::<H>::default();
    f(host, &mut o);
    out.log.extend(o.log.into_iter().filter_map(log));
    out.sends.extend(o.sends);
    out.timers.extend(o.timers.into_iter().map(|(at, t)| (at, timer(t))));
    out.events.extend(o.events.into_iter().map(event));
    out.cpu_ns += o.cpu_ns;
}

fn no_timer(t: NoTimer) -> RackTimer {
    match t {}
}

/// Dispatches `$call` on whichever host `$self` is, wrapping its outputs.
macro_rules! each {
    ($self:expr, $out:expr, |$h:ident, $o:ident| $call:expr) => {
        match $self {
            RackHost::Store($h) => inner($h, $out, (no_timer, RackEvent::Store, node_log), |$h, $o| $call),
            RackHost::Client($h) => {
                inner(&mut **$h, $out, (RackTimer::Client, RackEvent::Client, no_log), |$h, $o| $call)
            }
            RackHost::Controller($h) => {
                inner($h, $out, (RackTimer::Controller, RackEvent::Controller, controller_log), |$h, $o| $call)
            }
        }
    };
}

impl Host for RackHost {
    type Timer = RackTimer;
    type Log = NodeRecord;
    type Event = RackEvent;

    fn cores(&self) -> u16 {
        match self {
            RackHost::Store(h) => h.cores(),
            RackHost::Client(h) => h.cores(),
            RackHost::Controller(h) => h.cores(),
        }
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        each!(self, out, |h, o| h.start(now, o));
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, _timer: &RackTimer) -> u16 {
        0
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        each!(self, out, |h, o| h.handle_datagram(now, bytes, o));
    }

    fn handle_timer(&mut self, now: Nanos, timer: RackTimer, out: &mut HostOutbox<Self>) {
        match (self, timer) {
            (RackHost::Client(c), RackTimer::Client(t)) => {
                inner(&mut **c, out, (RackTimer::Client, RackEvent::Client, no_log), |h, o| h.handle_timer(now, t, o))
            }
            (RackHost::Controller(c), RackTimer::Controller(t)) => {
                let wrap: Wrap<Controller> = (RackTimer::Controller, RackEvent::Controller, controller_log);
                inner(c, out, wrap, |h, o| h.handle_timer(now, t, o))
            }
            _ => {}
        }
    }

    fn stop(&mut self) {
        match self {
            RackHost::Store(h) => h.stop(),
            RackHost::Client(h) => h.stop(),
            RackHost::Controller(h) => h.stop(),
        }
    }

    fn is_idle(&self) -> bool {
        match self {
            RackHost::Store(h) => h.is_idle(),
            RackHost::Client(h) => h.is_idle(),
            RackHost::Controller(h) => h.is_idle(),
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RackFigures {
    /// When the last client finished, in seconds of simulated time.
    pub completion_s: f64,
    /// Committed transactions.
    pub commits: u64,
    /// Of them, write transactions.
    pub write_commits: u64,
    /// Of them, answered by a switch.
    pub switch_answers: u64,
    /// Throughput: commits per second of simulated time (millions).
    pub mtps: f64,
    /// Attempts aborted by a switch.
    pub aborts_switch: u64,
    /// Attempts aborted by a storage node.
    pub aborts_store: u64,
    /// Resolves the clients sent (attempts unanswered for `resolve_us`).
    pub resolves: u64,
    /// Transaction copies the switches sent to the controller's log.
    pub log_copies: u64,
    /// Lease queries the storage nodes answered (claims met past their lease, `program.rs`).
    #[serde(default)]
    pub lease_queries: u64,
    /// Read transactions' latency: mean, p50, p99 in µs (`latency_us_*`).
    pub read_latency: LatencySummary,
    /// Write transactions' latency: mean, p50, p99 in µs (`latency_us_*`).
    pub write_latency: LatencySummary,
    /// Read transactions' latency CDF: the 5th, 10th, …, 100th percentile in µs.
    pub read_cdf_us: Vec<f64>,
    /// Write transactions' latency CDF, as `read_cdf_us`.
    pub write_cdf_us: Vec<f64>,
    /// Keys cached over all switches.
    pub cached_keys: u64,
    /// Cache hits counted by the switches' hit counters (§IV-D), at the core, aggregation and
    /// ToR levels.
    pub hits_by_level: [u64; 3],
    /// Pipeline passes over all switches.
    pub passes: u64,
    /// Of them, recirculations (multi-op transactions, cleanups, installs).
    pub recirculations: u64,
    /// Packets the switches dropped (full recirculation queues, no route).
    pub switch_drops: u64,
    /// Datagrams the hosts rejected.
    pub rejected: u64,
    /// Simulated events.
    pub events: u64,
    /// The trace hash, hex.
    pub trace_hash: String,
}

/// Collects the figures and what the checks need.
#[derive(Debug)]
pub struct RackObserver {
    /// Read transactions' latencies.
    read_latency: Latency,
    /// Write transactions' latencies.
    write_latency: Latency,
    figures: RackFigures,
    finished_ns: Nanos,
    /// What the history check needs.
    ledger: Ledger,
    /// Per [`TIMELINE_BUCKET_NS`] of simulated time: (commits, of them decided wholly by
    /// switches).
    timeline: Vec<(u64, u64)>,
    /// The progress oracle, when the run is watched (`crate::progress`; the fuzz cases).
    progress: Option<crate::progress::Progress>,
}

/// The width of one bucket of [`RackObserver::timeline`].
pub const TIMELINE_BUCKET_NS: Nanos = 1_000_000;

/// The commits the hosts saw, what the history check needs: one per run in the simulator,
/// one per host process in real mode (merged afterwards, [`Ledger::merge`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Client host that finished all their transactions.
    pub finished: u16,
    /// Client commits: T-TS → (reads as (key, version), keys written).
    pub client_commits: BTreeMap<u32, (Vec<(u64, u64)>, u8)>,
    /// Node commits: T-TS → (key, previous version) per write, over every node the
    /// transaction wrote on.
    pub store_commits: BTreeMap<u32, Vec<(u64, u64)>>,
    /// A duplicate commit seen (an oracle failure).
    pub duplicate: Option<String>,
}

impl Ledger {
    /// Adds `other`'s commits; a timestamp counted in both is a duplicate.
    pub fn merge(&mut self, other: Ledger) {
        self.finished += other.finished;
        if self.duplicate.is_none() {
            self.duplicate = other.duplicate;
        }
        for (ts, c) in other.client_commits {
            if self.client_commits.insert(ts, c).is_some() {
                self.duplicate.get_or_insert(format!("T-TS {ts} counted by two clients"));
            }
        }
        for (ts, w) in other.store_commits {
            self.add_store_commit(ts, w);
        }
    }

    /// One node's writes of T-TS `ts`: a transaction spanning nodes is committed by each, on
    /// its own keys; a key installed twice is a duplicate.
    pub fn add_store_commit(&mut self, ts: u32, writes: Vec<(u64, u64)>) {
        let all = self.store_commits.entry(ts).or_default();
        if writes.iter().any(|(k, _)| all.iter().any(|(j, _)| j == k)) {
            self.duplicate.get_or_insert(format!("T-TS {ts} committed twice on a key"));
        }
        all.extend(writes);
        all.sort_unstable();
    }

    /// The committed history and its serializability in timestamp order; the clients' and the
    /// nodes' commits agree; nothing counted twice; if `all_finish`, every client host
    /// finished. The number of transactions checked.
    pub fn check(&self, all_finish: bool) -> Result<usize, String> {
        if let Some(d) = &self.duplicate {
            return Err(d.clone());
        }
        if all_finish && self.finished != CLIENTS {
            return Err(format!("{} of {CLIENTS} client hosts finished", self.finished));
        }
        let key = |k: u64| TupleKey::new(0, k);
        let mut history = History::new();
        for (&ts, (reads, wrote)) in &self.client_commits {
            let writes = match (self.store_commits.get(&ts), *wrote) {
                (Some(w), n) if w.len() == usize::from(n) => w.clone(),
                (Some(w), n) if n > 0 => {
                    return Err(format!(
                        "T-TS {ts} wrote {n} keys but the nodes installed {} (a partial commit)",
                        w.len()
                    ))
                }
                (None, n) if n > 0 => {
                    return Err(format!("T-TS {ts} was counted as a committed write no node installed"))
                }
                (Some(_), _) => return Err(format!("T-TS {ts} was read-only but a node installed writes")),
                (None, _) => Vec::new(),
            };
            history.record(CommittedTxn {
                id: u64::from(ts),
                reads: reads.iter().map(|&(k, v)| (key(k), v)).collect(),
                writes: writes.iter().map(|&(k, v)| (key(k), v)).collect(),
            });
        }
        if let Some(ts) = self.store_commits.keys().find(|ts| !self.client_commits.contains_key(ts)) {
            return Err(format!("a node committed T-TS {ts}, which no client counted"));
        }
        let order: Vec<u64> = self.client_commits.keys().map(|&ts| u64::from(ts)).collect();
        history.check_order(&order).map_err(|v| format!("not serializable in timestamp order: {v}"))?;
        Ok(order.len())
    }
}

/// The 5th, 10th, …, 100th percentiles of `latency` in µs (empty if nothing was recorded).
fn cdf(latency: &Latency) -> Vec<f64> {
    latency.cdf_us(20)
}

impl Default for RackObserver {
    fn default() -> Self {
        Self::new()
    }
}

impl RackObserver {
    /// An observer that has seen nothing.
    pub fn new() -> Self {
        RackObserver {
            read_latency: Latency::new(),
            write_latency: Latency::new(),
            figures: RackFigures {
                completion_s: 0.0,
                commits: 0,
                write_commits: 0,
                switch_answers: 0,
                mtps: 0.0,
                aborts_switch: 0,
                resolves: 0,
                log_copies: 0,
                lease_queries: 0,
                aborts_store: 0,
                read_latency: LatencySummary::default(),
                write_latency: LatencySummary::default(),
                read_cdf_us: Vec::new(),
                write_cdf_us: Vec::new(),
                cached_keys: 0,
                hits_by_level: [0; 3],
                passes: 0,
                recirculations: 0,
                switch_drops: 0,
                rejected: 0,
                events: 0,
                trace_hash: String::new(),
            },
            finished_ns: 0,
            ledger: Ledger::default(),
            timeline: Vec::new(),
            progress: None,
        }
    }

    /// Transactions committed so far.
    pub fn commits(&self) -> u64 {
        self.figures.commits
    }

    /// Attempts a switch aborted so far.
    pub fn switch_aborts(&self) -> u64 {
        self.figures.aborts_switch
    }

    /// The read and write latencies, for CDFs.
    pub fn latencies(&self) -> (&Latency, &Latency) {
        (&self.read_latency, &self.write_latency)
    }

    /// What the history check needs, as seen so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Per millisecond of simulated time: (commits, of them decided wholly by switches).
    pub fn timeline(&self) -> &[(u64, u64)] {
        &self.timeline
    }

    /// When the last client host that finished did (0: none has).
    pub fn finished_ns(&self) -> Nanos {
        self.finished_ns
    }

    /// Counts the commits a storage node's log holds (a node restarted in real mode: its
    /// earlier incarnation's events died with it, its log did not): per committed outcome,
    /// in log order, each written key with the version it overwrote.
    pub fn count_logged_commits(&mut self, log: &[NodeRecord]) {
        let mut versions: BTreeMap<u64, u64> = BTreeMap::new();
        for record in log {
            let NodeRecord::Outcome(m) = record else { continue };
            if m.status != crate::wire::Status::Committed {
                continue;
            }
            let writes: Vec<(u64, u64)> = m
                .ops
                .iter()
                .filter(|o| o.op_type == crate::wire::OpType::Write)
                .map(|o| {
                    let key = o.key as u64;
                    (key, versions.insert(key, u64::from(m.ts)).unwrap_or(0))
                })
                .collect();
            if !writes.is_empty() {
                self.count(RackEvent::Store(StoreEvent::Committed { ts: m.ts, writes }), 0);
            }
        }
    }

    /// The figures so far: counts, latency summaries and CDFs (not the completion time, the
    /// throughput or the switches' figures, which the caller knows).
    pub fn figures(&self) -> RackFigures {
        let mut f = self.figures.clone();
        f.read_latency = self.read_latency.summary();
        f.write_latency = self.write_latency.summary();
        f.read_cdf_us = cdf(&self.read_latency);
        f.write_cdf_us = cdf(&self.write_latency);
        f
    }

    /// Counts one host event seen at `at`.
    pub fn count(&mut self, event: RackEvent, at: Nanos) {
        let f = &mut self.figures;
        match event {
            RackEvent::Client(ClientEvent::Committed {
                ts,
                writes,
                latency_ns,
                by_switch,
                switch_decided,
                reads,
                ..
            }) => {
                let write = writes > 0;
                let bucket = usize::try_from(at / TIMELINE_BUCKET_NS).unwrap_or(usize::MAX);
                if bucket < 100_000 {
                    if self.timeline.len() <= bucket {
                        self.timeline.resize(bucket + 1, (0, 0));
                    }
                    self.timeline[bucket].0 += 1;
                    self.timeline[bucket].1 += u64::from(switch_decided);
                }
                f.commits += 1;
                f.write_commits += u64::from(write);
                f.switch_answers += u64::from(by_switch);
                let h = if write { &mut self.write_latency } else { &mut self.read_latency };
                h.record_ns(latency_ns.max(1));
                // Non-transactional reads (T-TS = 0) are not transactions of the history.
                if ts != 0 && self.ledger.client_commits.insert(ts, (reads, writes)).is_some() {
                    self.ledger.duplicate = Some(format!("a client counted T-TS {ts} twice"));
                }
            }
            RackEvent::Client(ClientEvent::Aborted { by_switch }) => {
                if by_switch {
                    f.aborts_switch += 1;
                } else {
                    f.aborts_store += 1;
                }
            }
            RackEvent::Client(ClientEvent::Resolving) => f.resolves += 1,
            RackEvent::Client(ClientEvent::Finished(_)) => {
                self.ledger.finished += 1;
                self.finished_ns = self.finished_ns.max(at);
            }
            RackEvent::Store(StoreEvent::Committed { ts, writes }) => self.ledger.add_store_commit(ts, writes),
            RackEvent::Client(ClientEvent::Rejected(_) | ClientEvent::Stale)
            | RackEvent::Store(StoreEvent::Rejected(_))
            | RackEvent::Controller(ControllerEvent::Rejected(_)) => f.rejected += 1,
            RackEvent::Controller(ControllerEvent::Logged) => f.log_copies += 1,
            RackEvent::Store(StoreEvent::LeaseQuery) => f.lease_queries += 1,
            RackEvent::Store(StoreEvent::Aborted) | RackEvent::Controller(ControllerEvent::Decided { .. }) => {}
        }
    }

    /// The same observer, failing the run when it stops making progress
    /// ([`crate::progress`]).
    pub fn watching_progress(mut self, bound_ns: Nanos) -> Self {
        self.progress = Some(crate::progress::Progress::new(bound_ns));
        self
    }

    /// The committed history and its serializability in timestamp order; the clients' and
    /// the nodes' commits agree; every client finished.
    pub fn check_history(&self) -> Result<usize, String> {
        self.ledger.check(true)
    }
}

impl Observer<RackHost, Switch<TransKvProgram>> for RackObserver {
    fn on_event(&mut self, _host: u16, event: RackEvent, moment: Moment) -> Result<(), String> {
        if let Some(progress) = self.progress.as_mut() {
            match &event {
                RackEvent::Client(ClientEvent::Committed { .. }) => progress.committed(moment.at),
                RackEvent::Client(ClientEvent::Finished(_)) => progress.finished(),
                _ => {}
            }
        }
        self.count(event, moment.at);
        self.progress.as_ref().map_or(Ok(()), |p| p.check(moment.at, moment.healthy_from))
    }
}

/// The world of a data center.
pub type RackWorld = World<RackHost, Switch<TransKvProgram>, RackObserver>;

/// Checks `cfg` for `variant` and places the keys: the variant's switch mode, client path
/// and cache fill (none for a forwarding variant).
pub fn placement(variant: &str, cfg: &RackConfig) -> Result<(Mode, Path, Arc<Hierarchy>), String> {
    let (mode, path) = variant_of(variant)?;
    if !(0.0..=1.0).contains(&cfg.write_ratio) {
        return Err(format!("write_ratio {}: accepted 0..=1", cfg.write_ratio));
    }
    if path == Path::NonTransactional && cfg.write_ratio > 0.0 {
        return Err(format!("variant {variant} runs non-transactional reads: write_ratio must be 0"));
    }
    if cfg.ops_per_txn == 0 || usize::from(cfg.ops_per_txn) > crate::wire::MAX_OPS {
        return Err(format!("ops_per_txn {}: accepted 1..={}", cfg.ops_per_txn, crate::wire::MAX_OPS));
    }
    if cfg.outstanding == 0 || cfg.txns_per_client == 0 {
        return Err("outstanding and txns_per_client must be at least 1".into());
    }
    if cfg.refresh_epoch_us > 0 && variant != "transkv" {
        return Err(format!(
            "refresh_epoch_us {}: the cache refresh runs with variant transkv only",
            cfg.refresh_epoch_us
        ));
    }
    let cache = if mode == Mode::Forward { 0 } else { cfg.cache_per_switch };
    Ok((mode, path, Arc::new(Hierarchy::new(cfg.records, cache)?)))
}

/// Client host `index` (0..[`CLIENTS`]) of a run.
pub fn client_host(index: u16, path: Path, cfg: &RackConfig, hierarchy: &Arc<Hierarchy>) -> Result<ClientHost, String> {
    ClientHost::new(ClientConfig {
        address: CLIENT0 + index,
        index,
        path,
        outstanding: cfg.outstanding,
        txns: cfg.txns_per_client,
        ops_per_txn: cfg.ops_per_txn,
        write_ratio: cfg.write_ratio,
        zipf: cfg.zipf,
        seed: cfg.seed,
        resolve_ns: cfg.resolve_us.saturating_mul(1_000).max(1),
        hierarchy: Arc::clone(hierarchy),
        hot_shift: (cfg.hot_shift_at_us.saturating_mul(1_000), cfg.hot_shift_ranks),
    })
}

/// The keys of `node` a refreshed cache holds from the setup fill (handed to their switches
/// at the node, `crate::refresh`); none without refresh.
pub fn initially_handed(cfg: &RackConfig, hierarchy: &Hierarchy, node: u16) -> Vec<u64> {
    if cfg.refresh_epoch_us == 0 {
        return Vec::new();
    }
    hierarchy.cached.keys().copied().filter(|&k| hierarchy.node_of(k) == node).collect()
}

/// The controller of a run of `variant`: with the cache refresh if `cfg` asks for one, its
/// transaction log durable in `transkv-log` ([`Controller::logging`]).
pub fn controller(variant: &str, cfg: &RackConfig, hierarchy: &Arc<Hierarchy>) -> Controller {
    let c = Controller::new(CONTROLLER, Arc::clone(hierarchy)).with_cores(cfg.controller_cores);
    let c = if variant == "transkv-log" { c.logging() } else { c };
    if cfg.refresh_epoch_us == 0 {
        return c;
    }
    let epoch_ns = cfg.refresh_epoch_us.saturating_mul(1_000);
    c.refreshing(crate::refresh::Refresher::new(
        CONTROLLER,
        (**hierarchy).clone(),
        epoch_ns,
        cfg.cache_per_switch.max(6),
    ))
}

/// The controller of a run of `variant` restarted from its `records` (its write-ahead log): in
/// `transkv-log` with its transaction log ([`Controller::restore`]), with a cache refresh with
/// its placement ([`crate::refresh::Refresher::restore`]), driving what it learns of itself
/// ([`Controller::restarted`]).
pub fn restored_controller(
    variant: &str,
    cfg: &RackConfig,
    hierarchy: &Arc<Hierarchy>,
    records: &[ControllerRecord],
) -> Controller {
    let c = if variant == "transkv-log" {
        Controller::restore(CONTROLLER, Arc::clone(hierarchy), records)
    } else {
        Controller::new(CONTROLLER, Arc::clone(hierarchy))
    };
    let c = if cfg.refresh_epoch_us == 0 {
        c
    } else {
        c.refreshing(crate::refresh::Refresher::restore(
            CONTROLLER,
            (**hierarchy).clone(),
            &Controller::placement_records(records),
            cfg.refresh_epoch_us.saturating_mul(1_000),
            cfg.cache_per_switch.max(6),
        ))
    };
    c.restarted()
}

/// Storage node `node` of a run of `variant` (empty, in memory; in `transkv-log` it copies
/// every commit to the controller's log).
pub fn storage_node(variant: &str, node: u16) -> StorageNode {
    let n = StorageNode::new(node);
    if variant == "transkv-log" {
        n.logging_to(CONTROLLER)
    } else {
        n
    }
}

/// The switch program of a run of `variant` in `mode` with claims leased for `lease_ns`.
pub fn rack_program(variant: &str, mode: Mode, lease_ns: Nanos) -> TransKvProgram {
    let program = match variant {
        "transkv-log" => TransKvProgram::logging(mode, CONTROLLER),
        _ => TransKvProgram::new(mode),
    };
    program.with_lease(lease_ns)
}

/// Switch `id` of a run of `variant` in `mode` (claims leased for `lease_ns`), its cache
/// filled with its keys of `hierarchy`.
pub fn rack_switch(
    variant: &str,
    mode: Mode,
    hierarchy: &Hierarchy,
    id: u16,
    lease_ns: Nanos,
) -> Result<Switch<TransKvProgram>, String> {
    let cached: Vec<(u64, u16)> =
        hierarchy.cached.iter().filter(|(_, &(s, _))| s == id).map(|(&key, &(_, slot))| (key, slot)).collect();
    filled_switch(variant, mode, &cached, lease_ns)
}

/// A switch of a run of `variant` in `mode` (claims leased for `lease_ns`), its cache filled
/// with `cached` (key, slot).
fn filled_switch(
    variant: &str,
    mode: Mode,
    cached: &[(u64, u16)],
    lease_ns: Nanos,
) -> Result<Switch<TransKvProgram>, String> {
    let program = rack_program(variant, mode, lease_ns);
    let mut switch = Switch::new(SwitchProfile::tofino1(), program).map_err(|e| e.to_string())?;
    for &(key, slot) in cached {
        fill(&mut switch, key, slot, &value_of(u128::from(key), 0), 0)?;
    }
    Ok(switch)
}

/// The world of one run of `variant`, not started, and its key placement.
pub fn build(variant: &str, cfg: &RackConfig) -> Result<(RackWorld, Arc<Hierarchy>), String> {
    build_with(variant, cfg, |_, _| Ok(()))
}

/// [`build`], with `prepare` run on the switches before the world starts (a test's setup).
pub fn build_with(
    variant: &str,
    cfg: &RackConfig,
    prepare: impl FnOnce(&Hierarchy, &mut [Switch<TransKvProgram>]) -> Result<(), String>,
) -> Result<(RackWorld, Arc<Hierarchy>), String> {
    build_observed(variant, cfg, prepare, RackObserver::new())
}

/// [`build_with`], the run seen by `observer` (one watching progress: the fuzz cases).
pub fn build_observed(
    variant: &str,
    cfg: &RackConfig,
    prepare: impl FnOnce(&Hierarchy, &mut [Switch<TransKvProgram>]) -> Result<(), String>,
    observer: RackObserver,
) -> Result<(RackWorld, Arc<Hierarchy>), String> {
    let (mode, path, hierarchy) = placement(variant, cfg)?;
    let mut hosts: Vec<RackHost> = (0..NODES)
        .map(|n| RackHost::Store(storage_node(variant, n).handing(initially_handed(cfg, &hierarchy, n))))
        .collect();
    for index in 0..CLIENTS {
        hosts.push(RackHost::Client(Box::new(client_host(index, path, cfg, &hierarchy)?)));
    }
    hosts.push(RackHost::Controller(controller(variant, cfg, &hierarchy)));
    // Each switch's keys, in key order, from one pass over the placement.
    let mut cached: Vec<Vec<(u64, u16)>> = vec![Vec::new(); usize::from(SWITCHES)];
    for (&key, &(switch, slot)) in &hierarchy.cached {
        cached[usize::from(switch)].push((key, slot));
    }
    let mut switches = cached
        .iter()
        .map(|keys| filled_switch(variant, mode, keys, cfg.lease_ns()))
        .collect::<Result<Vec<_>, String>>()?;
    prepare(&hierarchy, &mut switches)?;
    let topology = layout::topology(&LinkParams { nic_ns: cfg.nic_ns, ..LinkParams::ten_gbe() });
    hierarchy.routes_cover_cached_keys(&topology)?;
    let mut world = World::new(topology, hosts, switches, observer).map_err(|e| e.to_string())?;
    if cfg.refresh_epoch_us > 0 {
        // The refresh reaches every switch by id, hop by hop; each serves the controller.
        for s in 0..SWITCHES {
            world.set_controller(s, CONTROLLER);
        }
    }
    Ok((world, hierarchy))
}

/// Runs one point to completion; its world (for checks) and figures.
pub fn run_world(variant: &str, cfg: &RackConfig) -> Result<(RackWorld, Arc<Hierarchy>, RackFigures), String> {
    let (mut world, hierarchy) = build(variant, cfg)?;
    world.run(0, Nanos::MAX / 2, EVENTS_MAX).map_err(|e| e.to_string())?;
    let mut f = world.observer().figures.clone();
    f.completion_s = world.observer().finished_ns as f64 / 1e9;
    f.mtps = if f.completion_s > 0.0 { f.commits as f64 / f.completion_s / 1e6 } else { 0.0 };
    f.read_latency = world.observer().read_latency.summary();
    f.write_latency = world.observer().write_latency.summary();
    f.read_cdf_us = cdf(&world.observer().read_latency);
    f.write_cdf_us = cdf(&world.observer().write_latency);
    let placed = placement_now(&world, &hierarchy);
    f.cached_keys = placed.len() as u64;
    for (&key, &(switch, slot)) in &placed {
        let level = layout::levels_of(hierarchy.node_of(key)).iter().position(|&s| s == switch).unwrap_or(2);
        let hits = world.switch(switch).registers().read(HITS, u32::from(slot)).map_or(0, |c| c.0);
        f.hits_by_level[level] += u64::try_from(hits).unwrap_or(0);
    }
    for id in 0..SWITCHES {
        let stats = world.switch(id).stats();
        f.passes += stats.passes;
        f.recirculations += stats.recirculations;
        f.switch_drops += stats.dropped.values().sum::<u64>();
    }
    f.events = world.events_processed();
    f.trace_hash = format!("{:016x}", world.trace_hash());
    Ok((world, hierarchy, f))
}

/// Runs one point to completion and returns its figures.
pub fn run(variant: &str, cfg: &RackConfig) -> Result<RackFigures, String> {
    run_world(variant, cfg).map(|(_, _, f)| f)
}

/// Runs one point, checks it ([`check`]) and returns its figures.
pub fn run_checked(variant: &str, cfg: &RackConfig) -> Result<RackFigures, String> {
    let (world, hierarchy, f) = run_world(variant, cfg)?;
    check(&world, &hierarchy)?;
    Ok(f)
}

/// Where the keys are cached at the end: the controller's refreshed placement, or the setup
/// fill.
pub fn placement_now(world: &RackWorld, hierarchy: &Hierarchy) -> BTreeMap<u64, (u16, u16)> {
    world
        .hosts()
        .iter()
        .find_map(|h| match h {
            RackHost::Controller(c) => c.refresher().map(|r| r.placement().clone()),
            _ => None,
        })
        .unwrap_or_else(|| hierarchy.cached.clone())
}

/// The cache refresh's end state: no move under way or failed; every switch holds exactly the
/// keys placed on it, published (no entry left reserved or migrating); every node hands to
/// switches exactly its keys that are placed.
fn check_refresh(world: &RackWorld, hierarchy: &Hierarchy) -> Result<(), String> {
    let Some(r) = world.hosts().iter().find_map(|h| match h {
        RackHost::Controller(c) => c.refresher(),
        _ => None,
    }) else {
        return Ok(());
    };
    if let Some(e) = r.figures.errors.first() {
        return Err(format!("cache refresh: {e}"));
    }
    if !r.is_idle() {
        return Err("the cache refresh was still moving keys".into());
    }
    let placed = r.placement();
    for s in 0..SWITCHES {
        let here = placed.iter().filter(|(_, &(x, _))| x == s).count();
        let held = world.switch(s).tables().len(CACHE_TABLE).map_err(|e| e.to_string())?;
        if held != here {
            return Err(format!("switch {s} holds {held} cache entries, the placement {here}"));
        }
    }
    for (&key, &(switch, slot)) in placed {
        let entry = world.switch(switch).tables().get(CACHE_TABLE, key).map_err(|e| e.to_string())?;
        // Published: with its value, or (a switch rebuilt after a crash) only timestamps.
        let published = [FULL_BITMAP, 0].map(|b| Some(crate::program::entry_value(slot, b, slot)));
        if !published.contains(&entry) {
            return Err(format!("switch {switch}: key {key} at slot {slot} is not published: {entry:?}"));
        }
    }
    for (node, host) in world.hosts().iter().enumerate().take(usize::from(NODES)) {
        let RackHost::Store(store) = host else { continue };
        let expected: std::collections::BTreeSet<u64> =
            placed.keys().copied().filter(|&k| hierarchy.node_of(k) == node as u16).collect();
        if store.handed() != &expected {
            return Err(format!("node {node} hands {} keys, the placement {}", store.handed().len(), expected.len()));
        }
    }
    Ok(())
}

/// The end-of-run checks (module docs).
pub fn check(world: &RackWorld, hierarchy: &Hierarchy) -> Result<(), String> {
    world.observer().check_history()?;
    check_refresh(world, hierarchy)?;
    let placed = placement_now(world, hierarchy);
    let hosts = world.hosts();
    for host in hosts {
        match host {
            RackHost::Store(s) if s.prepared() > 0 => return Err("a storage node holds a prepared transaction".into()),
            RackHost::Controller(c) if c.waiting() > 0 => {
                return Err("the controller still coordinates a transaction".into())
            }
            _ => {}
        }
    }
    for (&key, &(switch, slot)) in &placed {
        let entry = world.switch(switch).tables().get(CACHE_TABLE, key).map_err(|e| e.to_string())?;
        let full = entry.is_some_and(|e| (e >> 16) & 0xff == u64::from(FULL_BITMAP));
        let node = hierarchy.node_of(key);
        let RackHost::Store(store) = &hosts[usize::from(node)] else { return Err("host layout".into()) };
        let registers = world.switch(switch).registers();
        let read = |r: u8| registers.read(r, u32::from(slot)).map(|c| c.0).map_err(|e| e.to_string());
        let mut cached = [0u8; VALUE_BYTES];
        for w in 0..VALUE_ARRAYS {
            let word = read(VALUE0 + w)? as u32;
            cached[4 * usize::from(w)..4 * usize::from(w) + 4].copy_from_slice(&word.to_be_bytes());
        }
        let expected = value_of(u128::from(key), store.version(key));
        // A rebuilt switch's entries hold no value (empty bitmap): only timestamps.
        if full && cached != expected {
            return Err(format!("switch {switch} caches key {key} at a value the store does not hold"));
        }
        // A claim may outlive its transaction only if the node aborted it and no request
        // met the claim after its lease (the first that does frees it: `program.rs`).
        let pending = read(T_TS)?;
        if pending != 0 && store.outcome(pending as u32) != Some(crate::wire::Status::Aborted) {
            return Err(format!("switch {switch} left key {key} with a pending writer"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> RackConfig {
        RackConfig {
            records: 20_000,
            cache_per_switch: 64,
            zipf: 0.99,
            write_ratio: 0.3,
            ops_per_txn: 2,
            outstanding: 8,
            txns_per_client: 150,
            seed: 3,
            resolve_us: 10_000,
            lease_us: 0,
            refresh_epoch_us: 0,
            hot_shift_at_us: 0,
            hot_shift_ranks: 0,
            controller_cores: 2,
            nic_ns: 1_000,
        }
    }

    /// The wedge the lease closes, in a whole data center: the hottest key's switch starts
    /// with a claim by a timestamp whose request was lost after claiming and whose client
    /// resolved it (its node never saw it). Every later writer of the key is refused by it;
    /// with the lease the first one past the lease asks the node, whose `Aborted` frees the
    /// key, and the run ends with every check passing. Without it (a lease longer than any
    /// run) no client of the key ever finishes.
    #[test]
    fn a_claim_lost_after_its_client_resolved_is_freed_by_the_lease_in_a_data_center() {
        let cfg = RackConfig { write_ratio: 1.0, ops_per_txn: 1, zipf: 1.2, txns_per_client: 40, ..small() };
        let plant = |h: &Hierarchy, switches: &mut [Switch<TransKvProgram>]| {
            let key = layout::key_of_rank(0, h.records);
            let &(s, slot) = h.cached.get(&key).ok_or("the hottest key is cached")?;
            switches[usize::from(s)].registers_mut().write(T_TS, u32::from(slot), 4, 0).map_err(|e| e.to_string())
        };
        let (mut world, hierarchy) = build_with("transkv", &cfg, plant).unwrap();
        world.run(0, Nanos::MAX / 2, EVENTS_MAX).unwrap();
        check(&world, &hierarchy).unwrap();
        assert!(world.observer().figures().lease_queries >= 1);
        assert_eq!(world.observer().commits(), 4 * 40);
        let no_lease = RackConfig { lease_us: 3_600_000_000, ..cfg };
        let (mut world, _) = build_with("transkv", &no_lease, plant).unwrap();
        let run = world.run(0, Nanos::MAX / 2, 3_000_000);
        assert!(run.is_err() || world.observer().commits() < 4 * 40, "wedged without the lease");
    }

    #[test]
    fn transkv_commits_everything_serializably_and_caches_agree_with_stores() {
        let f = run_checked("transkv", &RackConfig { ops_per_txn: 1, ..small() }).unwrap();
        assert_eq!(f.commits, 600);
        assert!(f.switch_answers > 0 && f.write_commits > 0 && f.aborts_switch > 0, "{f:?}");
        // Two-key transactions mix cached and uncached keys: switches and nodes decide together.
        let f = run_checked("transkv", &small()).unwrap();
        assert_eq!(f.commits, 600);
    }

    /// A data center whose hot set moves at 3 ms, refreshed every millisecond (the run lasts
    /// about 30 ms: the refresh after the move takes about 7 ms of control operations).
    fn shifting(refresh_epoch_us: u64) -> RackConfig {
        RackConfig {
            records: 20_000,
            cache_per_switch: 16,
            zipf: 1.2,
            write_ratio: 0.2,
            ops_per_txn: 1,
            outstanding: 8,
            txns_per_client: 8_000,
            refresh_epoch_us,
            hot_shift_at_us: 3_000,
            hot_shift_ranks: 7_919,
            ..small()
        }
    }

    #[test]
    fn cache_refresh_under_load_follows_a_moved_hot_set_and_loses_nothing() {
        let (world, hierarchy, f) = run_world("transkv", &shifting(1_000)).unwrap();
        // Serializable in timestamp order, every commit counted by client and node, cached
        // values equal the nodes', every switch holds exactly the placement, nodes agree.
        check(&world, &hierarchy).unwrap();
        assert_eq!(f.commits, 32_000);
        let RackHost::Controller(c) = &world.hosts()[usize::from(CONTROLLER)] else { panic!() };
        let r = c.refresher().unwrap();
        assert!(r.figures.inserted > 0 && r.figures.evicted >= r.figures.inserted, "{:?}", r.figures);
        // The share of commits the switches decided whole: high before the shift, about none
        // right after it, back up once the refresh moved the new hot keys in.
        let share = |ms: std::ops::Range<usize>| {
            let t = &world.observer().timeline()[ms];
            t.iter().map(|b| b.1).sum::<u64>() as f64 / t.iter().map(|b| b.0).sum::<u64>().max(1) as f64
        };
        let n = world.observer().timeline().len();
        let (before, after, recovered) = (share(0..3), share(3..5), share(n - 5..n));
        assert!(before > 0.6 && after < 0.1 && recovered > 0.5, "{before} {after} {recovered}");
        let placed = r.placement();
        let moved = placed.keys().filter(|k| !hierarchy.cached.contains_key(k)).count();
        assert!(moved > placed.len() / 2, "most of the cache follows the new hot set: {moved} of {}", placed.len());
    }

    #[test]
    fn a_refreshed_run_replays_its_trace_and_differs_from_one_without_refresh() {
        let cfg = RackConfig { txns_per_client: 1_500, ..shifting(500) };
        let (a, b) = (run("transkv", &cfg).unwrap(), run("transkv", &cfg).unwrap());
        assert_eq!(a.trace_hash, b.trace_hash, "same seed, same history");
        let off = run("transkv", &RackConfig { refresh_epoch_us: 0, ..cfg }).unwrap();
        assert_ne!(a.trace_hash, off.trace_hash);
    }

    #[test]
    fn every_variant_passes_its_checks() {
        for variant in ["tranx-coor", "no-cache", "transkv-cache"] {
            let cfg = if variant == "tranx-coor" { small() } else { RackConfig { write_ratio: 0.0, ..small() } };
            let f = run_checked(variant, &cfg).unwrap_or_else(|e| panic!("{variant}: {e}"));
            assert_eq!(f.commits, 600, "{variant}");
        }
    }
}
