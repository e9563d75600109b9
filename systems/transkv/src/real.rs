//! TransKV in real mode: the 16 storage nodes, the 4 client hosts and the controller as host
//! processes, the 8 switches of Fig. 6(c) as software-switch processes, all on loopback,
//! through the generic runtime (`pisadb_runtime`: host and switch processes, supervisor,
//! rendezvous).
//!
//! The same state machines as the simulator run here: [`RackHost`] per host process and
//! [`crate::program::TransKvProgram`] in each switch process, its cache filled with its share of the keys
//! ([`rack_switch`]: every process computes the same placement from the settings). The
//! network is [`layout::topology`]'s tree at loopback addresses
//! ([`Network::from_topology`]): each switch process forwards along the tree's unique paths,
//! so a key's timestamps live in one switch on every path to it, as in the simulator.
//!
//! **The store.** A storage node keeps its committed versions in a real embedded LSM store on
//! disk, fjall ([`FjallStore`], in `<node's data dir>/store`): each written key holds its
//! version and its 48-byte value. The protocol code is the simulator's; only the
//! [`NodeStore`] behind it differs. fjall rather than redb: it is LevelDB's kind (an LSM
//! tree, as the paper's storage nodes), and its point get and put are the costs the simulator
//! charges (`CALIBRATION.md`). Writes go to fjall's journal and are flushed to the OS as they
//! happen; the node makes them durable (`PersistMode::SyncAll`) before it reports. If the rack
//! runs durable, the node also logs its votes and outcomes ([`NodeRecord`]) to the runtime's
//! write-ahead log and a restarted node is rebuilt from it over its store
//! ([`StorageNode::restore_into`]).
//!
//! **Run.** The clients start transactions until the stop time (or until they have committed
//! `txns_per_client` each), then everything in flight drains.
//!
//! **`kill -9` of a storage node** ([`ClusterOptions::kills`]). Storage nodes always keep the
//! runtime's write-ahead log (group commit: a round's records are durable before its answers
//! leave). A killed node comes back from it over its fjall directory: every committed write
//! put (again), every decided timestamp answered as before, its votes kept, a timestamp
//! floor for the rest (`crate::store`). Its earlier incarnation's report died with it; the
//! restarted node counts the commits its log holds ([`RackObserver::count_logged_commits`]),
//! so the history check covers them, and nothing committed may be missing from a store.
//! In `transkv-log` the controller logs too (its transaction log's records,
//! `crate::control::ControllerRecord`) and may be killed the same way: it comes back with its
//! transaction log rebuilt from its write-ahead log ([`Controller::restore`]) and drives what it
//! learns of itself ([`Controller::restarted`]); its report says how many records it came back
//! with ([`HostReport::txn_log`]).
//!
//! **Cache refresh** (`--set refresh_epoch_us=N`): the controller process refreshes as in
//! the simulator (`crate::refresh`); every switch process serves it as its controller, its
//! control requests reaching each switch by id, hop by hop, and the nodes start with the
//! setup fill's keys handed. The controller reports its final placement
//! ([`RefreshReport`]), each node the keys it hands, each switch its whole table
//! ([`CacheReport::table`]), and the checks add the simulator's refresh checks. The
//! refreshing controller keeps a write-ahead log of its placement records, so it may be
//! killed (`--kill-node 20@S`) and comes back with its placement
//! ([`crate::rack::restored_controller`]), finishing or undoing the moves under way.
//!
//! **Checks** ([`run_cluster`]), as in the simulator: the hosts' ledgers merged, the
//! committed history serializable in timestamp order, the clients' and the nodes' commits
//! agree, nothing counted twice; every host drained; no node holds a prepared transaction and
//! the controller coordinates none; every cached value a switch holds (read from its
//! registers after it stopped) equals its node's, and no T-TS is left pending; with a cache
//! refresh, also the refresh's checks (above).

use crate::control::Controller;
use crate::layout::{self, CLIENT0, CLIENTS, CONTROLLER, NODES, SWITCHES};
use crate::program::{CACHE_TABLE, FULL_BITMAP, T_TS, VALUE0, VALUE_ARRAYS};
use crate::rack::{
    client_host, controller as rack_controller, initially_handed, placement, rack_switch, Ledger, RackConfig,
    RackFigures, RackHost, RackObserver,
};
use crate::store::{NodeRecord, NodeStore, StorageNode};
use crate::wire::{value_of, VALUE_BYTES};
use pisadb_core::TupleKey;
use pisadb_engine::{Storage, StorageError, Tuple};
use pisadb_harness::real::{ClusterOutcome, ClusterRun, RealFlag, RealKill};
use pisadb_net::LinkParams;
use pisadb_report::latency::LatencySummary;
use pisadb_runtime::host_proc::{self, HostRun};
use pisadb_runtime::supervisor::{free_ports, ConfigLaunch, Crash};
use pisadb_runtime::switch_proc::{self, SwitchReport};
use pisadb_runtime::{write_json, Network, RackConfig as RealConfig, Role, RuntimeError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system name in a TransKV rack's config.
pub const SYSTEM: &str = "transkv";
/// Host processes of a rack: 16 storage nodes, 4 client hosts, the controller.
pub const HOSTS: u16 = CONTROLLER + 1;

/// A storage node's committed versions in fjall, an embedded LSM store on disk. Key: the
/// 16-byte key, big-endian. Value: the tuple's value and version (8 bytes each, big-endian)
/// and the 48-byte value the version stands for.
pub struct FjallStore {
    keyspace: fjall::Keyspace,
    items: fjall::PartitionHandle,
    /// Failed gets (a get has no error path in [`Storage`]: it counts and answers "absent").
    get_errors: AtomicU64,
}

impl std::fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FjallStore {{ get_errors: {} }}", self.get_errors.load(Ordering::Relaxed))
    }
}

/// Bytes of a stored record: value, version, the 48-byte value.
const RECORD_BYTES: usize = 16 + VALUE_BYTES;

fn key_bytes(key: TupleKey) -> [u8; 16] {
    u128::from(key.row).to_be_bytes()
}

fn backend(key: TupleKey, e: impl std::fmt::Display) -> StorageError {
    StorageError::Backend { key, reason: e.to_string() }
}

impl FjallStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let keyspace = fjall::Config::new(dir).open().map_err(|e| format!("fjall at {}: {e}", dir.display()))?;
        let items = keyspace
            .open_partition("versions", fjall::PartitionCreateOptions::default())
            .map_err(|e| format!("fjall partition at {}: {e}", dir.display()))?;
        Ok(FjallStore { keyspace, items, get_errors: AtomicU64::new(0) })
    }

    /// The committed version of `key` in the store (0: never written).
    pub fn version(&self, key: u64) -> u64 {
        self.get(TupleKey::new(0, key)).map_or(0, |t| t.version)
    }

    fn write(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        self.items.insert(key_bytes(key), encode_record(key, tuple)).map_err(|e| backend(key, e))
    }

    /// The tuple of a stored record, or `None` counted as a failed read if the record is refused.
    fn read(&self, key: TupleKey, bytes: &[u8]) -> Option<Tuple> {
        let tuple = decode_record(key, bytes).ok();
        if tuple.is_none() {
            self.get_errors.fetch_add(1, Ordering::Relaxed);
        }
        tuple
    }
}

/// The stored record of `key`'s `tuple`: value and version (8 bytes each, big-endian) and the
/// 48-byte value the version stands for.
pub fn encode_record(key: TupleKey, tuple: Tuple) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_BYTES);
    record.extend_from_slice(&tuple.value.to_be_bytes());
    record.extend_from_slice(&tuple.version.to_be_bytes());
    record.extend_from_slice(&value_of(u128::from(key.row), tuple.version));
    record
}

/// Reads `key`'s stored record; refuses one of another length or whose 48-byte value is not
/// the one its version stands for (a record torn or written for another key), which the store
/// counts as a failed read rather than answering "absent".
pub fn decode_record(key: TupleKey, bytes: &[u8]) -> Result<Tuple, pisadb_wire::DecodeError> {
    pisadb_wire::exact_len(bytes.len(), RECORD_BYTES)?;
    let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (value, version) = (word(0) as i64, word(8));
    if bytes[16..] != value_of(u128::from(key.row), version) {
        return Err(pisadb_wire::DecodeError::BadField { field: "record_value", value: version });
    }
    Ok(Tuple { value, version })
}

impl NodeStore for FjallStore {
    fn persist(&self) -> Result<(), String> {
        self.keyspace.persist(fjall::PersistMode::SyncAll).map_err(|e| e.to_string())
    }

    fn failed_reads(&self) -> u64 {
        self.get_errors.load(Ordering::Relaxed)
    }
}

impl Storage for FjallStore {
    fn get(&self, key: TupleKey) -> Option<Tuple> {
        match self.items.get(key_bytes(key)) {
            Ok(found) => found.and_then(|bytes| self.read(key, &bytes)),
            Err(_) => {
                self.get_errors.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        // Every key exists (at version 0, the initial load, until first written).
        self.write(key, tuple)
    }

    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        self.write(key, tuple)
    }

    fn created_rows(&self) -> usize {
        0
    }

    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple)) {
        for item in self.items.iter() {
            match item {
                Ok((k, v)) if k.len() == 16 => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&k);
                    let key = TupleKey::new(0, u128::from_be_bytes(b) as u64);
                    if let Some(t) = self.read(key, &v) {
                        visit(key, t);
                    }
                }
                _ => {
                    self.get_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// What every process of a real TransKV rack is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The variant: `transkv`, `tranx-coor`, `no-cache`, `transkv-cache`, `transkv-log`.
    pub variant: String,
    /// The data center's settings, as the simulator takes them.
    pub rack: RackConfig,
}

/// The network of a rack: Fig. 6(c)'s tree ([`layout::topology`]) at `switches` and `hosts`.
pub fn network(switches: Vec<SocketAddr>, hosts: Vec<SocketAddr>) -> Result<Network, RuntimeError> {
    Network::from_topology(&layout::topology(&LinkParams::ten_gbe()), switches, hosts)
}

/// What a host process reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host.
    pub id: u16,
    /// Its figures (a client host's counts and latencies; `mtps` over its run).
    pub figures: RackFigures,
    /// What the history check needs from its events.
    pub ledger: Ledger,
    /// A storage node's committed version of each of its keys some switch caches.
    pub cached_versions: Vec<(u64, u64)>,
    /// A storage node's prepared transactions, the controller's open ones, when it left.
    pub open_transactions: usize,
    /// A storage node's keys in its store and failed store reads.
    pub store: Option<(u64, u64)>,
    /// The controller of `transkv-log`: records in its transaction log when it started (those
    /// rebuilt from its write-ahead log: none unless it was restarted) and when it left.
    pub txn_log: Option<(usize, usize)>,
    /// The controller of a run with a cache refresh: where it left the keys.
    #[serde(default)]
    pub refresh: Option<RefreshReport>,
    /// A storage node of a run with a cache refresh: the keys it hands to switches.
    #[serde(default)]
    pub handed: Option<Vec<u64>>,
    /// Whether it drained: nothing in flight when it left.
    pub drained: bool,
    /// Seconds it ran: until it finished (a client host), else until the stop time.
    pub seconds: f64,
}

/// What the controller of a run with a cache refresh reports of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefreshReport {
    /// Its placement when it left: (key, switch, slot).
    pub placement: Vec<(u64, u16, u16)>,
    /// Whether no epoch was under way.
    pub idle: bool,
    /// Steps that failed.
    pub errors: Vec<String>,
    /// Keys it inserted.
    pub inserted: u64,
}

/// What a switch process writes beside its report: every key it caches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheReport {
    /// Per cache table entry: the key, whether the entry holds a value (full bitmap), its 48
    /// bytes, and its pending writer's T-TS.
    pub entries: Vec<(u64, bool, Vec<u8>, u64)>,
    /// Per cache table entry: the key and its table value (`program::entry_value`).
    #[serde(default)]
    pub table: Vec<(u64, u64)>,
}

fn bad_id(id: u16, what: &str, count: u16) -> RuntimeError {
    RuntimeError::bad_setting("--id", id, format!("{what} of the rack: 0..{count}"))
}

fn bad_spec(variant: &str, e: String) -> RuntimeError {
    RuntimeError::bad_setting("rack settings", variant, e)
}

/// Runs host `id` of the rack `cfg` until it stops and drains; writes its report to
/// `<data_dir>/report.json` and returns it.
pub fn serve_host(cfg: &RealConfig<Spec>, id: u16, data_dir: &Path) -> Result<HostReport, RuntimeError> {
    let spec = &cfg.spec;
    let (_, path, hierarchy) = placement(&spec.variant, &spec.rack).map_err(|e| bad_spec(&spec.variant, e))?;
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    let name = format!("transkv host {id}");
    // Storage nodes always log (the answer of a node killed with `kill -9` must survive it);
    // the controller of `transkv-log` logs its transaction log's records, a refreshing one its
    // placement's.
    let logging = spec.variant == "transkv-log";
    let refreshing = spec.rack.refresh_epoch_us > 0;
    let durable = id < NODES || (id == CONTROLLER && (logging || refreshing));
    let (mut wal, records) = host_proc::open_log::<NodeRecord>(durable, data_dir, &name)?;
    let store_dir = data_dir.join("store");
    let mut restored = None;
    let mut host = match id {
        n if n < NODES => {
            let store = FjallStore::open(&store_dir).map_err(|e| bad_spec("store", e))?;
            // With a cache refresh, the setup fill's keys start handed to their switches.
            let handed = initially_handed(&spec.rack, &hierarchy, n);
            let node = if records.is_empty() {
                StorageNode::with_store(n, Box::new(store)).handing(handed)
            } else {
                StorageNode::restore_handing(n, Box::new(store), &records, handed).map_err(|e| bad_spec("log", e))?
            };
            RackHost::Store(if logging { node.logging_to(CONTROLLER) } else { node })
        }
        c if (CLIENT0..CLIENT0 + CLIENTS).contains(&c) => RackHost::Client(Box::new(
            client_host(c - CLIENT0, path, &spec.rack, &hierarchy).map_err(|e| bad_spec(&spec.variant, e))?,
        )),
        CONTROLLER if logging => {
            let own = crate::store::controller_records(&records);
            let c = Controller::restore(CONTROLLER, std::sync::Arc::clone(&hierarchy), &own);
            restored = Some(c.logged());
            // Restarted from a log: it drives what it learns of itself (`Controller::restarted`).
            RackHost::Controller(if records.is_empty() { c } else { c.restarted() })
        }
        // With a cache refresh (`refresh_epoch_us`), it refreshes as in the simulator; killed,
        // it comes back with its placement (moves under way finished or undone).
        CONTROLLER if records.is_empty() => {
            RackHost::Controller(rack_controller(&spec.variant, &spec.rack, &hierarchy))
        }
        CONTROLLER => {
            let own = crate::store::controller_records(&records);
            RackHost::Controller(crate::rack::restored_controller(&spec.variant, &spec.rack, &hierarchy, &own))
        }
        _ => return Err(bad_id(id, "a host", HOSTS)),
    };
    let mut observer = RackObserver::new();
    observer.count_logged_commits(&records);
    let run: HostRun = host_proc::serve(cfg, id, &name, &mut host, wal.as_mut(), |now, event| {
        observer.count(event, now);
    })?;
    let mut figures = observer.figures();
    // A client host that finished early ran until it finished; else until the stop time.
    let finished = observer.ledger().finished > 0;
    figures.completion_s = if finished { observer.finished_ns() as f64 / 1e9 } else { run.seconds };
    figures.mtps = if figures.completion_s > 0.0 { figures.commits as f64 / figures.completion_s / 1e6 } else { 0.0 };
    let report_seconds = figures.completion_s;
    let (cached_versions, open_transactions, store) = match &host {
        RackHost::Store(node) => {
            // The keys of the setup fill and those it hands to switches now (a refresh's).
            let versions = hierarchy
                .cached
                .keys()
                .filter(|&&k| hierarchy.node_of(k) == id)
                .chain(node.handed())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|&k| (k, node.version(k)))
                .collect();
            // Reopening the store is not possible while the node holds it: count through it.
            let (keys, errors) = node.store_figures();
            (versions, node.prepared(), Some((keys, errors)))
        }
        RackHost::Controller(c) => (Vec::new(), c.waiting(), None),
        RackHost::Client(_) => (Vec::new(), 0, None),
    };
    if let RackHost::Store(node) = &host {
        node.persist_store().map_err(|e| bad_spec("store", e))?;
    }
    let refresh = match &host {
        RackHost::Controller(c) => c.refresher().map(|r| RefreshReport {
            placement: r.placement().iter().map(|(&k, &(s, slot))| (k, s, slot)).collect(),
            idle: r.is_idle(),
            errors: r.figures.errors.clone(),
            inserted: r.figures.inserted,
        }),
        _ => None,
    };
    let handed = match &host {
        RackHost::Store(node) if spec.rack.refresh_epoch_us > 0 => Some(node.handed().iter().copied().collect()),
        _ => None,
    };
    let report = HostReport {
        id,
        refresh,
        handed,
        figures,
        ledger: observer.ledger().clone(),
        cached_versions,
        open_transactions,
        store,
        txn_log: match &host {
            RackHost::Controller(c) => restored.map(|r| (r, c.logged())),
            _ => None,
        },
        drained: run.drained,
        seconds: report_seconds,
    };
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// The file beside switch `id`'s report where it lists its cache.
pub fn cache_report_path(data_dir: &Path, id: u16) -> PathBuf {
    data_dir.join(format!("switch-{id}-cache.json"))
}

/// Runs switch `id` of the rack `cfg` (the TransKV program in the variant's mode, its share
/// of the cache filled) until SIGINT/SIGTERM; writes its report to `report` if given, and
/// its cache ([`CacheReport`]) beside it.
pub fn serve_switch(cfg: &RealConfig<Spec>, id: u16, report: Option<&Path>) -> Result<SwitchReport, RuntimeError> {
    if id >= SWITCHES {
        return Err(bad_id(id, "a switch", SWITCHES));
    }
    let spec = &cfg.spec;
    let (mode, _, hierarchy) = placement(&spec.variant, &spec.rack).map_err(|e| bad_spec(&spec.variant, e))?;
    let mut switch = rack_switch(&spec.variant, mode, &hierarchy, id, spec.rack.lease_ns())
        .map_err(|e| bad_spec(&spec.variant, e))?;
    if spec.rack.refresh_epoch_us > 0 {
        // The refresh reaches every switch by id, hop by hop; each serves the controller.
        switch.set_controller(CONTROLLER);
    }
    let out = switch_proc::serve_and_report(cfg, id, &mut switch, spec.rack.seed ^ u64::from(id), report)?;
    if let Some(dir) = report.and_then(Path::parent) {
        let mut entries = Vec::new();
        // Every entry the table holds (the setup fill's, or where a refresh left the keys).
        let table: Vec<(u64, u64)> =
            switch.tables().entries(CACHE_TABLE).map_err(|e| bad_spec("cache", e.to_string()))?.collect();
        for &(key, entry) in &table {
            let slot = (entry & 0xffff) as u16;
            let full = (entry >> 16) & 0xff == u64::from(FULL_BITMAP);
            let read = |r: u8| switch.registers().read(r, u32::from(slot)).map(|c| c.0).unwrap_or(0);
            let mut value = Vec::with_capacity(VALUE_BYTES);
            for w in 0..VALUE_ARRAYS {
                value.extend_from_slice(&(read(VALUE0 + w) as u32).to_be_bytes());
            }
            entries.push((key, full, value, read(T_TS) as u64));
        }
        write_json(&cache_report_path(dir, id), &CacheReport { entries, table })?;
    }
    Ok(out)
}

/// What to run with [`run_cluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The data center.
    pub spec: Spec,
    /// Seconds until the clients stop starting transactions.
    pub seconds: f64,
    /// Where the config, the reports and the hosts' data directories go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Storage nodes (or, in `transkv-log`, the controller) to `kill -9` and restart: (host,
    /// seconds into the run).
    pub kills: Vec<(u16, f64)>,
    /// Seconds a killed node stays down.
    pub down_s: f64,
}

/// What [`run_cluster`] saw.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterResult {
    /// Committed transactions over all client hosts, of them writes, answered by a switch.
    pub commits: [u64; 3],
    /// Aborts by a switch and by a node, resolves.
    pub aborts: [u64; 3],
    /// Commits per second over the run (thousands).
    pub ktps: f64,
    /// Read latency over all clients, µs: the mean over all, the p50 and p99 of the client
    /// host with the most commits.
    pub read_latency: LatencySummary,
    /// As `read_latency`, for writes.
    pub write_latency: LatencySummary,
    /// Transactions the history check checked.
    pub checked: usize,
    /// Keys in the storage nodes' fjall stores.
    pub stored_keys: u64,
    /// Cached keys compared with their nodes (with a value, only timestamps).
    pub cached_compared: (usize, usize),
    /// Each switch's report, by id.
    pub switches: Vec<SwitchReport>,
    /// Each host's report, by id.
    pub hosts: Vec<HostReport>,
    /// Storage nodes killed and restarted: (node, seconds into the run).
    pub killed: Vec<(u16, f64)>,
    /// The first check that failed, if any.
    pub failure: Option<String>,
}

/// Runs a real TransKV data center on loopback for `opts.seconds`, collects every process's
/// report and runs the checks (module docs). A caller that wants Ctrl-C to stop the rack in
/// order installs `pisadb_runtime::install_stop_signals` first.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult, RuntimeError> {
    placement(&opts.spec.variant, &opts.spec.rack)
        .map_err(|e| RuntimeError::bad_setting("--variant/--set", &opts.spec.variant, e))?;
    let addrs = free_ports(usize::from(SWITCHES) + usize::from(HOSTS))?;
    let (switch_addrs, host_addrs) = addrs.split_at(usize::from(SWITCHES));
    let network = network(switch_addrs.to_vec(), host_addrs.to_vec())?;
    // The controller of `transkv-log` or of a refreshed run comes back from its write-ahead log
    // (and, finding records there, knows it restarted); any other keeps no log to tell it so.
    let controller_logs = opts.spec.variant == "transkv-log" || opts.spec.rack.refresh_epoch_us > 0;
    if let Some(&(node, _)) =
        opts.kills.iter().find(|&&(node, _)| node >= NODES && !(node == CONTROLLER && controller_logs))
    {
        return Err(RuntimeError::bad_setting(
            "--kill-node",
            node,
            format!(
                "a storage node: 0..{NODES} (or the controller, {CONTROLLER}, in transkv-log or with refresh_epoch_us)"
            ),
        ));
    }
    let mut supervisor = ConfigLaunch::start(SYSTEM, opts.spec.clone(), network, &opts.data_dir, opts.exe.clone())?;
    let go = supervisor.start_together(opts.seconds)?;
    let crashes: Vec<Crash> =
        opts.kills.iter().map(|&(node, at_s)| Crash { role: Role::Host(node), at_s, down_s: opts.down_s }).collect();
    let killed = supervisor.inject(go.epoch_unix_ns, &crashes)?;
    supervisor.wait_for_hosts()?;
    supervisor.stop_switches()?;
    let hosts: Vec<HostReport> = ConfigLaunch::host_reports(&opts.data_dir, HOSTS)?;
    let switches = ConfigLaunch::switch_reports(&opts.data_dir, SWITCHES)?;
    let caches = (0..SWITCHES)
        .map(|id| pisadb_runtime::read_json::<CacheReport>(&cache_report_path(&opts.data_dir, id)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut result = judge(hosts, switches, &caches);
    result.killed = killed.iter().map(|c| (if let Role::Host(h) = c.role { h } else { u16::MAX }, c.at_s)).collect();
    Ok(result)
}

/// A run with a cache refresh, as the simulator checks it (`rack::check`'s refresh part): no
/// epoch left under way or failed, every switch's table exactly the controller's placement
/// for it, published, and every node handing exactly its placed keys; `None` if it holds (or
/// the run did not refresh).
fn check_refresh(hosts: &[HostReport], caches: &[CacheReport]) -> Option<String> {
    let refresh = hosts.iter().find_map(|h| h.refresh.as_ref())?;
    if let Some(e) = refresh.errors.first() {
        return Some(format!("cache refresh: {e}"));
    }
    if !refresh.idle {
        return Some("the cache refresh was still moving keys".into());
    }
    for (switch, cache) in caches.iter().enumerate() {
        let placed: Vec<(u64, u64)> = refresh
            .placement
            .iter()
            .filter(|p| usize::from(p.1) == switch)
            .map(|&(key, _, slot)| (key, crate::program::entry_value(slot, FULL_BITMAP, slot)))
            .collect();
        if cache.table != placed {
            return Some(format!(
                "switch {switch} holds {} cache entries, the controller's placement {} (or one is not published)",
                cache.table.len(),
                placed.len()
            ));
        }
    }
    // Each key is handed by its own node only (hand-offs go there): the nodes' handed keys
    // together are the placed keys, each once.
    let mut handed: Vec<u64> = hosts.iter().filter_map(|h| h.handed.as_ref()).flatten().copied().collect();
    handed.sort_unstable();
    let mut placed: Vec<u64> = refresh.placement.iter().map(|p| p.0).collect();
    placed.sort_unstable();
    if handed != placed {
        return Some(format!("the nodes hand {} keys, the controller's placement {}", handed.len(), placed.len()));
    }
    None
}

/// The checks over the reports (module docs) and the run's figures.
fn judge(hosts: Vec<HostReport>, switches: Vec<SwitchReport>, caches: &[CacheReport]) -> ClusterResult {
    let mut ledger = Ledger::default();
    hosts.iter().for_each(|h| ledger.merge(h.ledger.clone()));
    // A host that left with work in flight explains what the ledger then lacks, and is said
    // first: a client host that left before a commit's reply reached it makes the check report
    // "a node committed T-TS …, which no client counted", which is no protocol violation (the
    // failure seen under load while the drain had a fixed grace and a restored refresher
    // could keep the rack from ever draining).
    let mut failure = hosts.iter().find(|h| !h.drained).map(|h| format!("host {} left with work in flight", h.id));
    let checked = match ledger.check(false) {
        Ok(n) => n,
        Err(e) => {
            failure.get_or_insert(e);
            0
        }
    };
    if let Some(h) = hosts.iter().find(|h| h.open_transactions > 0) {
        failure.get_or_insert(format!("host {} left {} transactions open", h.id, h.open_transactions));
    }
    if let Some(h) = hosts.iter().find(|h| h.store.is_some_and(|(_, errors)| errors > 0)) {
        failure.get_or_insert(format!("storage node {}'s store failed reads", h.id));
    }
    if let Some(why) = check_refresh(&hosts, caches) {
        failure.get_or_insert(why);
    }
    let versions: std::collections::BTreeMap<u64, u64> =
        hosts.iter().flat_map(|h| h.cached_versions.iter().copied()).collect();
    let (mut with_value, mut without) = (0, 0);
    for (switch, cache) in caches.iter().enumerate() {
        for (key, full, value, t_ts) in &cache.entries {
            if *t_ts != 0 {
                failure.get_or_insert(format!("switch {switch} left key {key} with a pending writer"));
            }
            if !*full {
                without += 1;
                continue;
            }
            with_value += 1;
            let version = versions.get(key).copied().unwrap_or(0);
            if value.as_slice() != value_of(u128::from(*key), version).as_slice() {
                failure.get_or_insert(format!(
                    "switch {switch} caches key {key} at a value its node does not hold (version {version})"
                ));
            }
        }
    }
    let clients: Vec<&HostReport> = hosts.iter().filter(|h| (CLIENT0..CLIENT0 + CLIENTS).contains(&h.id)).collect();
    let sum = |f: &dyn Fn(&RackFigures) -> u64| clients.iter().map(|h| f(&h.figures)).sum::<u64>();
    let commits = [sum(&|f| f.commits), sum(&|f| f.write_commits), sum(&|f| f.switch_answers)];
    let aborts = [sum(&|f| f.aborts_switch), sum(&|f| f.aborts_store), sum(&|f| f.resolves)];
    let seconds = clients.iter().map(|h| h.seconds).fold(0.0, f64::max);
    let busiest = clients.iter().max_by_key(|h| h.figures.commits);
    let mean = |f: &dyn Fn(&RackFigures) -> (f64, u64)| {
        let (sum, n) = clients.iter().map(|h| f(&h.figures)).fold((0.0, 0), |(s, n), (m, k)| (s + m * k as f64, n + k));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    };
    let read_mean = mean(&|f| (f.read_latency.latency_us_mean, f.commits - f.write_commits));
    let write_mean = mean(&|f| (f.write_latency.latency_us_mean, f.write_commits));
    let read_latency = busiest.map_or_else(LatencySummary::default, |h| h.figures.read_latency.with_mean_us(read_mean));
    let write_latency =
        busiest.map_or_else(LatencySummary::default, |h| h.figures.write_latency.with_mean_us(write_mean));
    ClusterResult {
        commits,
        aborts,
        ktps: if seconds > 0.0 { commits[0] as f64 / seconds / 1e3 } else { 0.0 },
        read_latency,
        write_latency,
        checked,
        stored_keys: hosts.iter().filter_map(|h| h.store.map(|(k, _)| k)).sum(),
        cached_compared: (with_value, without),
        switches,
        hosts,
        killed: Vec::new(),
        failure,
    }
}

/// `pisadb cluster --system transkv`: TransKV's data center (8 switch processes, 16 storage
/// nodes over fjall, 4 client hosts, the controller) on loopback, checked, and its report.
pub fn cluster(run: &ClusterRun) -> Result<ClusterOutcome, String> {
    pisadb_runtime::install_stop_signals().map_err(|e| e.to_string())?;
    let kills = run.kills.iter().filter_map(|kill| match *kill {
        RealKill::Node { id, at_s } => Some((id, at_s)),
        RealKill::Switch { .. } => None,
    });
    let opts = ClusterOptions {
        spec: Spec { variant: run.variant.clone(), rack: run.read_settings()? },
        seconds: run.seconds,
        data_dir: run.data_dir.clone(),
        exe: run.exe.clone(),
        kills: kills.collect(),
        down_s: run.down_s,
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    let rack = &opts.spec.rack;
    let mut lines: Vec<String> = r
        .killed
        .iter()
        .map(|(node, at)| format!("storage node {node} killed (kill -9) at {at} s and restarted from its log"))
        .collect();
    let (read, write) = (&r.read_latency, &r.write_latency);
    let passes: u64 = r.switches.iter().map(|s| s.passes).sum();
    lines.extend([
        format!(
            "TransKV ({}) on loopback: 8 switch processes, 16 storage nodes (fjall), 4 client hosts, the \
             controller; {} records, Zipf {}, {:.0}% writes, {} s\n",
            run.variant,
            rack.records,
            rack.zipf,
            rack.write_ratio * 100.0,
            run.seconds
        ),
        format!(
            "commits {} ({} writes, {} answered by a switch)   {:.1} ktxn/s   aborts switch/node {}/{}   resolves {}",
            r.commits[0], r.commits[1], r.commits[2], r.ktps, r.aborts[0], r.aborts[1], r.aborts[2]
        ),
        format!(
            "read µs mean/p50/p99 {:.0}/{:.0}/{:.0}   write µs {:.0}/{:.0}/{:.0}",
            read.latency_us_mean,
            read.latency_us_p50,
            read.latency_us_p99,
            write.latency_us_mean,
            write.latency_us_p50,
            write.latency_us_p99
        ),
        format!(
            "keys in the fjall stores {}   cached keys compared {} (+{} holding only timestamps)   switch passes {}",
            r.stored_keys, r.cached_compared.0, r.cached_compared.1, passes
        ),
    ]);
    let ok = "serializable in timestamp order, clients and nodes agree, every cached value equals its node's, \
              nothing pending, every host drained";
    let json = serde_json::to_value(&r).expect("a result serializes");
    let reports = ConfigLaunch::host_dir(&opts.data_dir, 0);
    Ok(ClusterOutcome::checked(lines.join("\n") + "\n", json, r.failure.clone(), ok, &opts.data_dir, &reports))
}

/// TransKV's real mode in the system contract ([`pisadb_harness::real`]).
pub struct Real;

/// TransKV's [`Real`], for the binary's table of real modes.
pub static REAL: Real = Real;

impl pisadb_harness::real::RealMode for Real {
    fn name(&self) -> &'static str {
        SYSTEM
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[RealFlag::KillNode, RealFlag::Down, RealFlag::Set, RealFlag::Preset]
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_host(cfg, id, data_dir))
    }

    fn processes(&self, _variant: &str, _settings: &serde_json::Value) -> Option<(u16, u16)> {
        Some((CONTROLLER + 1, SWITCHES))
    }

    fn run_cluster(&self, run: &ClusterRun) -> Result<ClusterOutcome, String> {
        cluster(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Hierarchy;

    #[test]
    fn a_stored_record_of_the_wrong_length_or_value_is_refused_and_counted() {
        let key = TupleKey::new(0, 7);
        let tuple = Tuple { value: -3, version: 42 };
        let record = encode_record(key, tuple);
        assert_eq!(decode_record(key, &record), Ok(tuple));
        assert_eq!(decode_record(key, &record[..16]).unwrap_err().reason(), "too_short");
        assert_eq!(decode_record(key, &[&record[..], &[0]].concat()).unwrap_err().reason(), "trailing_bytes");
        assert_eq!(decode_record(TupleKey::new(0, 8), &record).unwrap_err().reason(), "record_value");
        let dir = std::env::temp_dir().join(format!("pisadb-transkv-fjall-short-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = FjallStore::open(&dir).unwrap();
        store.items.insert(key_bytes(key), &record[..16]).unwrap();
        assert_eq!(store.get(key), None);
        assert_eq!(store.failed_reads(), 1, "a torn record is a failed read, not an absent key");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fjall_store_round_trips_versions_and_values_on_disk() {
        let dir = std::env::temp_dir().join(format!("pisadb-transkv-fjall-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let mut store = FjallStore::open(&dir).unwrap();
            assert_eq!(store.get(TupleKey::new(0, 7)), None, "never written: absent (version 0)");
            store.put(TupleKey::new(0, 7), Tuple { value: 0, version: 42 }).unwrap();
            store.put(TupleKey::new(0, 9), Tuple { value: 0, version: 5 }).unwrap();
            assert_eq!(store.get(TupleKey::new(0, 7)).map(|t| t.version), Some(42));
            store.persist().unwrap();
        }
        let store = FjallStore::open(&dir).unwrap();
        let mut seen = Vec::new();
        store.scan(&mut |k, t| seen.push((k.row, t.version)));
        assert_eq!(seen, vec![(7, 42), (9, 5)], "reopened: both writes, in key order");
        assert_eq!(store.failed_reads(), 0);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_network_is_the_simulators_tree_and_covers_every_cached_key() {
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let n = network((0..SWITCHES).map(|i| addr(9000 + i)).collect(), (0..HOSTS).map(|i| addr(9100 + i)).collect())
            .unwrap();
        assert_eq!(n.hosts_of(layout::CORES[0]), vec![16, 17, CONTROLLER]);
        assert_eq!(n.switch_of(15), layout::tor_of(15));
        let h = Hierarchy::new(20_000, 32).unwrap();
        h.routes_cover_cached_keys(&n.topology()).unwrap();
    }

    #[test]
    fn a_node_record_log_reads_back_and_cuts_a_torn_tail() {
        use crate::wire::{Message, Op, OpType, Status};
        use pisadb_runtime::framed_log;
        let msg = |ts| Message {
            ts,
            status: Status::Committed,
            client: 16,
            seq: 1,
            ops: vec![Op { op_type: OpType::Write, flags: 0, key: 3, value: value_of(3, u64::from(ts)) }],
        };
        let mut bytes = Vec::new();
        framed_log::append(&NodeRecord::Prepared(msg(5)), &mut bytes);
        framed_log::append(&NodeRecord::Outcome(msg(5)), &mut bytes);
        let whole = bytes.len();
        framed_log::append(&NodeRecord::Outcome(msg(6)), &mut bytes);
        bytes.truncate(bytes.len() - 4);
        let log = framed_log::read::<NodeRecord>(&bytes).unwrap();
        assert_eq!(log.records, vec![NodeRecord::Prepared(msg(5)), NodeRecord::Outcome(msg(5))]);
        assert_eq!((log.valid_bytes, log.torn_tail.is_some()), (whole, true));
    }

    fn host(id: u16, ledger: Ledger, cached_versions: Vec<(u64, u64)>) -> HostReport {
        let mut figures = RackObserver::new().figures();
        figures.commits = ledger.client_commits.len() as u64;
        HostReport {
            id,
            figures,
            ledger,
            cached_versions,
            open_transactions: 0,
            store: (id < NODES).then_some((1, 0)),
            txn_log: None,
            refresh: None,
            handed: None,
            drained: true,
            seconds: 1.0,
        }
    }

    #[test]
    fn the_judge_of_a_refreshed_run_compares_every_table_and_the_handed_keys_with_the_placement() {
        let published = |slot: u16| crate::program::entry_value(slot, FULL_BITMAP, slot);
        let mut controller = host(CONTROLLER, Ledger::default(), Vec::new());
        let placement = vec![(5, 0, 3)];
        controller.refresh = Some(RefreshReport { placement, idle: true, errors: Vec::new(), inserted: 1 });
        let mut node = host(0, Ledger::default(), vec![(5, 0)]);
        node.handed = Some(vec![5]);
        let caches = |table: Vec<(u64, u64)>| {
            let mut all = vec![CacheReport { entries: Vec::new(), table }];
            all.extend((1..SWITCHES).map(|_| CacheReport { entries: Vec::new(), table: Vec::new() }));
            all
        };
        let hosts = || vec![node.clone(), controller.clone()];
        assert_eq!(judge(hosts(), Vec::new(), &caches(vec![(5, published(3))])).failure, None);
        let moved = judge(hosts(), Vec::new(), &caches(vec![(5, published(4))])).failure.unwrap();
        assert!(moved.contains("switch 0 holds 1 cache entries"), "{moved}");
        let migrating = crate::program::entry_value(3, FULL_BITMAP | crate::program::MIGRATING, 3);
        assert!(judge(hosts(), Vec::new(), &caches(vec![(5, migrating)])).failure.is_some());
        let mut unhanded_node = node.clone();
        unhanded_node.handed = Some(Vec::new());
        let unhanded = judge(vec![unhanded_node, controller.clone()], Vec::new(), &caches(vec![(5, published(3))]))
            .failure
            .unwrap();
        assert!(unhanded.contains("the nodes hand 0 keys"), "{unhanded}");
    }

    #[test]
    fn the_judge_refuses_a_stale_cached_value_a_pending_writer_and_an_unknown_commit() {
        // Client 16 committed T-TS 8 writing key 5 over version 0, node 0 installed it.
        let mut client = Ledger::default();
        client.client_commits.insert(8, (Vec::new(), 1));
        let mut node = Ledger::default();
        node.store_commits.insert(8, vec![(5, 0)]);
        let hosts = || vec![host(0, node.clone(), vec![(5, 8)]), host(16, client.clone(), Vec::new())];
        let cache = |version: u64, t_ts: u64| {
            vec![CacheReport { entries: vec![(5, true, value_of(5, version).to_vec(), t_ts)], table: Vec::new() }]
        };
        let ok = judge(hosts(), Vec::new(), &cache(8, 0));
        assert_eq!((ok.failure, ok.checked, ok.cached_compared), (None, 1, (1, 0)));
        let stale = judge(hosts(), Vec::new(), &cache(0, 0)).failure.unwrap();
        assert!(stale.contains("caches key 5 at a value its node does not hold"), "{stale}");
        let pending = judge(hosts(), Vec::new(), &cache(8, 9)).failure.unwrap();
        assert!(pending.contains("pending writer"), "{pending}");
        let lone = judge(vec![host(0, node.clone(), vec![(5, 8)])], Vec::new(), &cache(8, 0)).failure.unwrap();
        assert!(lone.contains("which no client counted"), "{lone}");
        // A client host that left with a reply in flight is the failure, not the commit it
        // never counted.
        let mut left = host(0, node.clone(), vec![(5, 8)]);
        left.drained = false;
        let left = judge(vec![left], Vec::new(), &cache(8, 0)).failure.unwrap();
        assert_eq!(left, "host 0 left with work in flight");
    }

    #[test]
    fn a_restarted_node_resets_store_writes_its_log_never_confirmed() {
        use crate::wire::{Message, Op, OpType, Status};
        let dir = std::env::temp_dir().join(format!("pisadb-transkv-restore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = FjallStore::open(&dir).unwrap();
        // Key 5: committed by T-TS 8 (in the log). Key 11: written by T-TS 77 while handling,
        // killed before the round's log records were durable (never answered).
        store.put(TupleKey::new(0, 5), Tuple { value: 0, version: 8 }).unwrap();
        store.put(TupleKey::new(0, 11), Tuple { value: 0, version: 77 }).unwrap();
        let op = Op { op_type: OpType::Write, flags: 0, key: 5, value: value_of(5, 8) };
        let committed = Message { ts: 8, status: Status::Committed, client: 16, seq: 1, ops: vec![op] };
        let node = StorageNode::restore_into(0, Box::new(store), &[NodeRecord::Outcome(committed)]).unwrap();
        assert_eq!((node.version(5), node.version(11)), (8, 0));
        assert_eq!(node.store_figures(), (2, 0));
        drop(node);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
