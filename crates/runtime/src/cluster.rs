//! The supervisor: starts a switch and N nodes as child processes on loopback (or each in its
//! own network namespace: [`crate::netns`]), gives them the go once all are ready (see
//! "Starting together" in the crate documentation), injects the crashes it is asked for
//! (`kill -9` and restart), waits for the run to end, and checks it.
//!
//! ## Stopping
//!
//! The children run in their own process group, so a Ctrl-C reaches the supervisor alone. It
//! then stops the rack in order: the nodes first (SIGTERM: they stop starting transactions and
//! drain, with the switch still serving them), then the switch, and the checks still run. A
//! child whose supervisor dies is sent SIGTERM by the kernel (parent-death signal), and
//! whatever way the supervisor leaves, it kills what still runs and removes its namespaces.
//!
//! ## Checks after a run
//!
//! - *Nothing committed is lost*: every node's store, rebuilt from its log alone
//!   ([`pisadb_p4db::node::Node::recover`]), equals the store the node ended with.
//! - *The switch's state is what its transactions imply*: a fresh switch rebuilt from all nodes'
//!   logs ([`pisadb_p4db::node::rebuild`]) holds the same hot values as the live one at the end.
//! - *Workload invariants* (SmallBank's money, TPC-C's consistency) on the union of the stores
//!   and the switch, given every committed transaction. A killed node's report dies with it,
//!   so after a node kill this check is skipped (and says so).

use crate::netns::Netns;
use crate::node_proc::{DrainStatus, NodeReport};
use crate::switch_proc::{fresh_switch, hot_values, SwitchReport};
use crate::wal_file::read_dir_log;
use crate::{install_stop_signals, stop_requested, unix_now_ns, RealConfig};
use pisadb_core::SerialStore;
use pisadb_p4db::node::{Mode, Node};
use pisadb_p4db::RackPlan;
use pisadb_workload::GeneratedTxn;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A crash to inject.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// `kill -9` node `node` this many seconds into the run, restart it after `down_s`.
    KillNode {
        /// The node.
        node: u16,
        /// When, in seconds after the start.
        at_s: f64,
        /// How long it stays down.
        down_s: f64,
    },
    /// `kill -9` the switch, restart it (rebuilt from the nodes' logs) after `down_s`.
    KillSwitch {
        /// When, in seconds after the start.
        at_s: f64,
        /// How long it stays down.
        down_s: f64,
    },
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The rack, as for the simulator.
    pub run: pisadb_p4db::RunConfig,
    /// Seconds of load.
    pub seconds: f64,
    /// Where the nodes' data directories, the config and the reports go.
    pub data_dir: PathBuf,
    /// Write-ahead logs with fdatasync.
    pub durable: bool,
    /// Keep committed transactions and stores for the checks.
    pub verify: bool,
    /// Peer timeout in ms.
    pub peer_timeout_ms: u64,
    /// Crashes to inject.
    pub faults: Vec<Fault>,
    /// The wire behind each node's switch port (loss, delay), by node id.
    pub wire: Vec<crate::wire::PortWire>,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Run the switch and each node in its own network namespace ([`crate::netns`]) instead of
    /// all on loopback.
    pub netns: bool,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct ClusterResult {
    /// Each node's last report.
    pub nodes: Vec<NodeReport>,
    /// The switch's last report.
    pub switch: SwitchReport,
    /// Committed transactions per second over all nodes.
    pub committed_per_s: f64,
    /// Aborted attempts over all attempts.
    pub abort_rate: f64,
    /// The checks: (what, passed, detail).
    pub checks: Vec<(String, bool, String)>,
    /// The network namespaces the rack ran in (removed since), if any.
    pub namespaces: Vec<String>,
}

/// Runs a cluster on loopback; see the module documentation.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult, String> {
    install_stop_signals()?;
    std::fs::create_dir_all(&opts.data_dir).map_err(|e| format!("{}: {e}", opts.data_dir.display()))?;
    for id in 0..opts.run.nodes {
        let dir = node_dir(&opts.data_dir, id);
        if dir.join(crate::wal_file::LOG_FILE).exists() {
            return Err(format!("{} holds a log from an earlier run: pick an empty --data-dir", dir.display()));
        }
    }
    // Declared before the processes, so dropped after them: namespaces go once nothing runs.
    let netns = if opts.netns { Some(Netns::create(opts.run.nodes)?) } else { None };
    let (switch_addr, node_addrs) = match &netns {
        Some(ns) => (ns.switch_addr(), ns.node_addrs()),
        None => {
            let addrs = free_ports(usize::from(opts.run.nodes) + 1)?;
            (addrs[0], addrs[1..].to_vec())
        }
    };
    let namespaces = netns.as_ref().map(Netns::names);
    let plan = pisadb_p4db::plan(&opts.run).map_err(|e| e.to_string())?;
    // Leftovers of an earlier start in this directory must not start this one.
    let _ = std::fs::remove_dir_all(opts.data_dir.join(crate::READY_DIR));
    let _ = std::fs::remove_file(opts.data_dir.join(crate::GO_FILE));
    let _ = std::fs::remove_dir_all(opts.data_dir.join(crate::DRAIN_DIR));
    let _ = std::fs::remove_file(opts.data_dir.join(crate::DONE_FILE));
    let cfg = RealConfig {
        run: opts.run.clone(),
        switch: switch_addr,
        nodes: node_addrs,
        // Set by the go, once every process is ready.
        epoch_unix_ns: 0,
        stop_unix_ns: 0,
        peer_timeout_ms: opts.peer_timeout_ms,
        durable: opts.durable,
        verify: opts.verify,
        wire: opts.wire.clone(),
        rendezvous: Some(opts.data_dir.clone()),
    };
    let config_path = opts.data_dir.join("rack.json");
    cfg.save(&config_path)?;
    let procs = Procs {
        exe: opts.exe.clone(),
        config: config_path,
        data_dir: opts.data_dir.clone(),
        nodes: cfg.run.nodes,
        namespaces: namespaces.clone(),
    };
    let mut rack = Children { switch: None, nodes: Vec::new() };
    rack.switch = Some(procs.spawn_switch(0)?);
    let mut switch_epoch = 0;
    for id in 0..cfg.run.nodes {
        rack.nodes.push(procs.spawn_node(id)?);
    }
    eprintln!(
        "cluster: switch on {} and {} nodes {}, planning the rack; data in {}",
        cfg.switch,
        cfg.run.nodes,
        if netns.is_some() { "in network namespaces" } else { "on loopback" },
        opts.data_dir.display()
    );
    let go = start_together(&opts.data_dir, &mut rack, opts.seconds)?;
    let epoch = go.epoch_unix_ns;
    eprintln!("cluster: every process is ready; load runs {:.1} s", opts.seconds);
    let mut faults = opts.faults.clone();
    faults.sort_by(|a, b| fault_time(a).total_cmp(&fault_time(b)));
    let mut node_killed = false;
    for fault in faults {
        sleep_until(epoch + (fault_time(&fault) * 1e9) as u64);
        if stop_requested() {
            break;
        }
        match fault {
            Fault::KillNode { node, down_s, .. } => {
                let child = rack.nodes.get_mut(usize::from(node)).ok_or_else(|| format!("no node {node} to kill"))?;
                eprintln!("cluster: kill -9 node {node}");
                kill9(child)?;
                node_killed = true;
                std::thread::sleep(Duration::from_secs_f64(down_s));
                eprintln!("cluster: restarting node {node}");
                *child = procs.spawn_node(node)?;
            }
            Fault::KillSwitch { down_s, .. } => {
                eprintln!("cluster: kill -9 switch");
                kill9(rack.switch())?;
                std::thread::sleep(Duration::from_secs_f64(down_s));
                eprintln!("cluster: restarting switch, rebuilt from the nodes' logs");
                switch_epoch += 1;
                rack.switch = Some(procs.spawn_switch(switch_epoch)?);
            }
        }
    }
    // Stopped early (SIGINT/SIGTERM): the load ran until then, not the whole time asked for.
    let load_s = match rack.wait_for_nodes(&opts.data_dir)? {
        Some(at) => (at.saturating_sub(epoch) as f64 / 1e9).clamp(1e-3, opts.seconds),
        None => opts.seconds,
    };
    stop(rack.switch())?;
    let reports = (0..cfg.run.nodes)
        .map(|id| read_json::<NodeReport>(&node_dir(&opts.data_dir, id).join("report.json")))
        .collect::<Result<Vec<_>, _>>()?;
    let switch_report: SwitchReport = read_json(&opts.data_dir.join("switch.json"))?;
    let committed: u64 = reports.iter().map(|r| r.committed).sum();
    let aborts: u64 = reports.iter().map(|r| r.aborts).sum();
    let mut checks = Vec::new();
    if opts.durable && opts.verify {
        checks = verify(&cfg, &plan, &opts.data_dir, &reports, &switch_report, node_killed)?;
    }
    Ok(ClusterResult {
        committed_per_s: committed as f64 / load_s,
        abort_rate: if committed + aborts == 0 { 0.0 } else { aborts as f64 / (committed + aborts) as f64 },
        nodes: reports,
        switch: switch_report,
        checks,
        namespaces: namespaces.unwrap_or_default(),
    })
}

/// The rack's processes. Whatever way the supervisor leaves (an error, a failed node), none
/// outlives it: dropping this kills what still runs.
struct Children {
    switch: Option<Child>,
    nodes: Vec<Child>,
}

impl Children {
    fn switch(&mut self) -> &mut Child {
        self.switch.as_mut().expect("the switch was started")
    }
}

impl Children {
    /// Waits until every node has ended. On SIGINT/SIGTERM to the supervisor alone (a Ctrl-C
    /// in a terminal reaches the children too) the nodes are asked to stop; the switch keeps
    /// serving them while they drain. Once every node reports itself idle with nothing moving,
    /// it tells them they may leave (see "Leaving together" in [`crate::node_proc`]). Returns
    /// when the stop was asked for, if it was.
    fn wait_for_nodes(&mut self, dir: &Path) -> Result<Option<u64>, String> {
        let mut asked = None;
        let mut last_drain = None;
        loop {
            let mut running = 0;
            for (id, child) in self.nodes.iter_mut().enumerate() {
                match child.try_wait().map_err(|e| format!("waiting for node {id}: {e}"))? {
                    Some(status) if !status.success() => {
                        return Err(format!("node {id} failed ({status}); see its messages above"))
                    }
                    Some(_) => {}
                    None => running += 1,
                }
            }
            if running == 0 {
                return Ok(asked);
            }
            // Every node idle, and nothing moved since the last look: they may all leave.
            let drain = drain_statuses(dir, self.nodes.len());
            if drain.as_ref().is_some_and(|d| d.iter().all(|s| s.idle)) && drain == last_drain {
                let _ = std::fs::write(dir.join(crate::DONE_FILE), b"");
            }
            last_drain = drain;
            if stop_requested() && asked.is_none() {
                asked = Some(unix_now_ns());
                for child in &mut self.nodes {
                    // Only a child not yet reaped: a reaped one's pid may belong to another.
                    if matches!(child.try_wait(), Ok(None)) {
                        terminate(child);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Every node's last drain report, if every node has made one.
fn drain_statuses(dir: &Path, nodes: usize) -> Option<Vec<DrainStatus>> {
    (0..nodes)
        .map(|id| {
            let bytes = std::fs::read(dir.join(crate::DRAIN_DIR).join(format!("node-{id}"))).ok()?;
            serde_json::from_slice(&bytes).ok()
        })
        .collect()
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in self.switch.iter_mut().chain(self.nodes.iter_mut()) {
            // A child already waited for is not signalled again (std remembers its status).
            if matches!(child.try_wait(), Ok(None)) {
                let _ = kill9(child);
            }
        }
    }
}

/// Waits until every process of `rack` is ready at the rendezvous in `dir`, then gives the go:
/// the rack's time starts in a moment and load runs `seconds`.
fn start_together(dir: &Path, rack: &mut Children, seconds: f64) -> Result<crate::Go, String> {
    let names: Vec<String> =
        std::iter::once("switch".to_string()).chain((0..rack.nodes.len()).map(|id| format!("node-{id}"))).collect();
    let deadline = unix_now_ns() + crate::RENDEZVOUS_TIMEOUT_NS;
    loop {
        if names.iter().all(|n| dir.join(crate::READY_DIR).join(n).exists()) {
            break;
        }
        for (name, child) in names.iter().zip(rack.switch.iter_mut().chain(rack.nodes.iter_mut())) {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "the {name} process ended before the rack started ({status}); see its messages above"
                ));
            }
        }
        if stop_requested() {
            return Err("stopped before the rack started".into());
        }
        if unix_now_ns() > deadline {
            return Err(format!(
                "not every process was ready within 600 s (see {})",
                dir.join(crate::READY_DIR).display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // A moment for every process to see the go before the rack's time starts.
    let epoch = unix_now_ns() + 50_000_000;
    let go = crate::Go { epoch_unix_ns: epoch, stop_unix_ns: epoch + (seconds * 1e9) as u64 };
    crate::node_proc::write_atomically(&dir.join(crate::GO_FILE), &go)?;
    Ok(go)
}

fn fault_time(f: &Fault) -> f64 {
    match *f {
        Fault::KillNode { at_s, .. } | Fault::KillSwitch { at_s, .. } => at_s,
    }
}

/// A node's data directory.
pub fn node_dir(data_dir: &Path, id: u16) -> PathBuf {
    data_dir.join(format!("node-{id}"))
}

/// How the supervisor (and the switch benchmark) start the rack's processes.
pub(crate) struct Procs {
    /// The `pisadb` binary.
    pub exe: PathBuf,
    /// The rack's config file.
    pub config: PathBuf,
    /// Where the reports and the nodes' data directories go.
    pub data_dir: PathBuf,
    /// Nodes in the rack.
    pub nodes: u16,
    /// Network namespaces to run in (the switch's first, then each node's), or none: loopback.
    pub namespaces: Option<Vec<String>>,
}

impl Procs {
    /// Starts `pisadb switch` in `epoch`: 0 at first, and after its `epoch`-th kill rebuilt from
    /// every node's log; it writes its report to `<data_dir>/switch.json` when stopped.
    pub(crate) fn spawn_switch(&self, epoch: u16) -> Result<Child, String> {
        let mut args: Vec<OsString> = vec!["switch".into(), "--config".into(), self.config.clone().into()];
        args.extend(["--report".into(), self.data_dir.join("switch.json").into()]);
        if epoch > 0 {
            args.extend(["--epoch".into(), epoch.to_string().into()]);
            for id in 0..self.nodes {
                args.extend(["--recover-from".into(), node_dir(&self.data_dir, id).into()]);
            }
        }
        spawn(self.command(0, args), "switch")
    }

    /// Starts `pisadb node` for node `id`.
    pub(crate) fn spawn_node(&self, id: u16) -> Result<Child, String> {
        let mut args: Vec<OsString> = vec!["node".into(), "--config".into(), self.config.clone().into()];
        args.extend(["--id".into(), id.to_string().into(), "--data-dir".into(), node_dir(&self.data_dir, id).into()]);
        spawn(self.command(1 + usize::from(id), args), &format!("node {id}"))
    }

    /// `pisadb args…`, in namespace number `ns` if the rack has namespaces (`ip netns exec`
    /// replaces itself with the program: the child's pid is the program's, so `kill -9`
    /// reaches it).
    fn command(&self, ns: usize, args: Vec<OsString>) -> Command {
        let mut cmd = match &self.namespaces {
            Some(names) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &names[ns]]).arg(&self.exe);
                cmd
            }
            None => Command::new(&self.exe),
        };
        cmd.args(args);
        cmd
    }
}

/// Starts a rack process in its own process group, so a Ctrl-C in the terminal reaches the
/// supervisor alone, which then stops the rack in order (nodes drain while the switch still
/// serves them). A process whose supervisor dies gets SIGTERM and stops cleanly, so none is
/// left behind.
fn spawn(mut cmd: Command, what: &str) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).process_group(0);
    // SAFETY: between fork and exec the child only makes one prctl system call, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).map_err(std::io::Error::from)
        });
    }
    cmd.spawn().map_err(|e| format!("cannot start the {what} process: {e}"))
}

fn kill9(child: &mut Child) -> Result<(), String> {
    child.kill().map_err(|e| format!("kill: {e}"))?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(())
}

/// Asks a process to stop (SIGTERM) and waits for it.
pub(crate) fn stop(child: &mut Child) -> Result<(), String> {
    terminate(child);
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    if !status.success() {
        return Err(format!("the switch process failed ({status})"));
    }
    Ok(())
}

/// Sends SIGTERM to a child that still runs (it stops cleanly).
fn terminate(child: &Child) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
}

/// Sleeps until the wall clock reads `unix_ns`, or a stop is requested.
fn sleep_until(unix_ns: u64) {
    while !stop_requested() {
        let now = unix_now_ns();
        if now >= unix_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos((unix_ns - now).min(10_000_000)));
    }
}

/// `n` free UDP ports on loopback (bound, noted and released; nothing else runs here).
pub(crate) fn free_ports(n: usize) -> Result<Vec<SocketAddr>, String> {
    let sockets = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free UDP port: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sockets.iter().map(|s| s.local_addr().expect("bound")).collect())
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The end-of-run checks of the module documentation.
fn verify(
    cfg: &RealConfig,
    plan: &RackPlan,
    data_dir: &Path,
    reports: &[NodeReport],
    switch: &SwitchReport,
    node_killed: bool,
) -> Result<Vec<(String, bool, String)>, String> {
    let mut checks = Vec::new();
    let mut logs = Vec::new();
    for r in reports {
        let dir = node_dir(data_dir, r.id);
        let log = read_dir_log(&dir)?;
        let node_cfg = plan.node_config(&cfg.run, r.id);
        let (node, _) =
            Node::recover(node_cfg, plan.node_workload(&cfg.run, r.id), plan.switch_view(), cfg.run.seed, &log)?;
        let recovered: BTreeMap<_, _> = node.store().iter().map(|(k, t)| (k, t.value)).collect();
        let live: BTreeMap<_, _> = r.store.iter().copied().collect();
        let differing = live.iter().filter(|(k, v)| recovered.get(k) != Some(v)).count()
            + recovered.keys().filter(|k| !live.contains_key(k)).count();
        checks.push((
            format!("node {}: store rebuilt from its log ({} records) equals its live store", r.id, log.len()),
            differing == 0,
            format!("{} tuples, {differing} differ", live.len()),
        ));
        logs.push(log);
    }
    if cfg.run.mode == Mode::P4db {
        let mut fresh = fresh_switch(plan, cfg)?;
        let rebuilt = match &mut fresh {
            pisadb_p4db::RackSwitch::P4db(s) => pisadb_p4db::node::rebuild::rebuild_switch(s, &logs).map(|_| ()),
            pisadb_p4db::RackSwitch::LockManager(_) => Ok(()),
        };
        let (ok, detail) = match rebuilt {
            Ok(()) => {
                let expected = hot_values(plan, &fresh);
                let differing = expected.iter().zip(&switch.hot_values).filter(|(a, b)| a != b).count();
                (
                    differing == 0 && expected.len() == switch.hot_values.len(),
                    format!("{} hot tuples, {differing} differ", expected.len()),
                )
            }
            Err(e) => (false, e),
        };
        checks.push(("switch: registers rebuilt from all logs equal the live switch's".into(), ok, detail));
    }
    let undrained: Vec<u16> = reports.iter().filter(|r| !r.drained).map(|r| r.id).collect();
    if !undrained.is_empty() {
        checks.push((
            "workload invariants".into(),
            false,
            format!(
                "nodes {undrained:?} stopped with transactions in flight, so their list of commits is incomplete; {}",
                reports
                    .iter()
                    .flat_map(|r| r.stuck.iter().map(move |l| format!("node {}: {l}", r.id)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    } else if node_killed {
        checks.push((
            "workload invariants".into(),
            true,
            "skipped: a killed node's list of committed transactions died with it".into(),
        ));
    } else {
        let mut db = SerialStore::default();
        for r in reports {
            r.store.iter().for_each(|&(k, v)| db.set(k, v));
        }
        switch.hot_values.iter().for_each(|&(k, v)| db.set(k, v));
        let mut kinds: BTreeMap<String, &'static str> = BTreeMap::new();
        let gens: Vec<(GeneratedTxn, Vec<i64>)> = reports
            .iter()
            .flat_map(|r| r.committed_txns.iter())
            .map(|c| {
                // Transaction types are a handful of names: intern each once.
                let kind = *kinds.entry(c.kind.clone()).or_insert_with(|| Box::leak(c.kind.clone().into_boxed_str()));
                let gen = GeneratedTxn {
                    txn: c.txn.clone(),
                    class: c.class,
                    inserts: c.inserts.clone(),
                    distributed: c.distributed,
                    home: c.home,
                    kind,
                };
                (gen, c.outputs.clone())
            })
            .collect();
        let committed: Vec<(&GeneratedTxn, &[i64])> = gens.iter().map(|(g, o)| (g, o.as_slice())).collect();
        let result = plan.workload.check_invariants(&db, &committed);
        checks.push((
            format!("workload invariants over {} committed transactions", committed.len()),
            result.is_ok(),
            result.err().unwrap_or_else(|| "hold".into()),
        ));
    }
    Ok(checks)
}
