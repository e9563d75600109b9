//! The supervisor: starts a switch and N nodes as child processes on loopback, injects the
//! crashes it is asked for (`kill -9` and restart), waits for the run to end, and checks it.
//!
//! ## Checks after a run
//!
//! - *Nothing committed is lost*: every node's store, rebuilt from its log alone
//!   ([`pisadb_node::Node::recover`]), equals the store the node ended with.
//! - *The switch's state is what its transactions imply*: a fresh switch rebuilt from all nodes'
//!   logs ([`pisadb_node::rebuild`]) holds the same hot values as the live one at the end.
//! - *Workload invariants* (SmallBank's money, TPC-C's consistency) on the union of the stores
//!   and the switch, given every committed transaction. A killed node's report dies with it,
//!   so after a node kill this check is skipped (and says so).

use crate::node_proc::NodeReport;
use crate::switch_proc::{fresh_switch, hot_values, SwitchReport};
use crate::wal_file::read_dir_log;
use crate::{install_stop_signals, stop_requested, unix_now_ns, RealConfig};
use pisadb_core::SerialStore;
use pisadb_node::{Mode, Node};
use pisadb_sim::RackPlan;
use pisadb_workload::GeneratedTxn;
use std::collections::BTreeMap;
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
    pub run: pisadb_sim::RunConfig,
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
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
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
    let addrs = free_ports(usize::from(opts.run.nodes) + 1)?;
    // Every process plans the rack before it starts (layout fitting); give them that time.
    #[allow(clippy::disallowed_methods)] // the supervisor measures its own start-up
    let planned = std::time::Instant::now();
    let plan = pisadb_sim::plan(&opts.run).map_err(|e| e.to_string())?;
    let startup_ns = (planned.elapsed().as_nanos() as u64).saturating_mul(3) + 1_000_000_000;
    let epoch = unix_now_ns() + startup_ns;
    let cfg = RealConfig {
        run: opts.run.clone(),
        switch: addrs[0],
        nodes: addrs[1..].to_vec(),
        epoch_unix_ns: epoch,
        stop_unix_ns: epoch + (opts.seconds * 1e9) as u64,
        peer_timeout_ms: opts.peer_timeout_ms,
        durable: opts.durable,
        verify: opts.verify,
    };
    let config_path = opts.data_dir.join("rack.json");
    cfg.save(&config_path)?;
    let procs =
        Procs { exe: opts.exe.clone(), config: config_path, data_dir: opts.data_dir.clone(), nodes: cfg.run.nodes };
    let mut switch = procs.spawn_switch(false)?;
    let mut nodes = (0..cfg.run.nodes).map(|id| procs.spawn_node(id)).collect::<Result<Vec<_>, _>>()?;
    eprintln!(
        "cluster: switch on {} and {} nodes on loopback; load starts in {:.1} s and runs {:.1} s; data in {}",
        cfg.switch,
        cfg.run.nodes,
        startup_ns as f64 / 1e9,
        opts.seconds,
        opts.data_dir.display()
    );
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
                let child = nodes.get_mut(usize::from(node)).ok_or_else(|| format!("no node {node} to kill"))?;
                eprintln!("cluster: kill -9 node {node}");
                kill9(child)?;
                node_killed = true;
                std::thread::sleep(Duration::from_secs_f64(down_s));
                eprintln!("cluster: restarting node {node}");
                *child = procs.spawn_node(node)?;
            }
            Fault::KillSwitch { down_s, .. } => {
                eprintln!("cluster: kill -9 switch");
                kill9(&mut switch)?;
                std::thread::sleep(Duration::from_secs_f64(down_s));
                eprintln!("cluster: restarting switch, rebuilt from the nodes' logs");
                switch = procs.spawn_switch(true)?;
            }
        }
    }
    for (id, child) in nodes.iter_mut().enumerate() {
        let status = child.wait().map_err(|e| format!("waiting for node {id}: {e}"))?;
        if !status.success() {
            let _ = stop(&mut switch);
            return Err(format!("node {id} failed ({status}); see its messages above"));
        }
    }
    stop(&mut switch)?;
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
        committed_per_s: committed as f64 / opts.seconds,
        abort_rate: if committed + aborts == 0 { 0.0 } else { aborts as f64 / (committed + aborts) as f64 },
        nodes: reports,
        switch: switch_report,
        checks,
    })
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

struct Procs {
    exe: PathBuf,
    config: PathBuf,
    data_dir: PathBuf,
    nodes: u16,
}

impl Procs {
    fn spawn_switch(&self, recover: bool) -> Result<Child, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("switch").arg("--config").arg(&self.config).arg("--report").arg(self.data_dir.join("switch.json"));
        if recover {
            for id in 0..self.nodes {
                cmd.arg("--recover-from").arg(node_dir(&self.data_dir, id));
            }
        }
        spawn(cmd, "switch")
    }

    fn spawn_node(&self, id: u16) -> Result<Child, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("node").arg("--config").arg(&self.config).arg("--id").arg(id.to_string());
        cmd.arg("--data-dir").arg(node_dir(&self.data_dir, id));
        spawn(cmd, &format!("node {id}"))
    }
}

fn spawn(mut cmd: Command, what: &str) -> Result<Child, String> {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
    cmd.spawn().map_err(|e| format!("cannot start the {what} process: {e}"))
}

fn kill9(child: &mut Child) -> Result<(), String> {
    child.kill().map_err(|e| format!("kill: {e}"))?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(())
}

/// Asks a process to stop (SIGTERM) and waits for it.
fn stop(child: &mut Child) -> Result<(), String> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    if !status.success() {
        return Err(format!("the switch process failed ({status})"));
    }
    Ok(())
}

fn sleep_until(unix_ns: u64) {
    let now = unix_now_ns();
    if unix_ns > now {
        std::thread::sleep(Duration::from_nanos(unix_ns - now));
    }
}

/// `n` free UDP ports on loopback (bound, noted and released; nothing else runs here).
fn free_ports(n: usize) -> Result<Vec<SocketAddr>, String> {
    let sockets = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free UDP port: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sockets.iter().map(|s| s.local_addr().expect("bound")).collect())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
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
            pisadb_sim::RackSwitch::P4db(s) => pisadb_node::rebuild::rebuild_switch(s, &logs).map(|_| ()),
            pisadb_sim::RackSwitch::LockManager(_) => Ok(()),
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
            format!("nodes {undrained:?} stopped with transactions in flight, so their list of commits is incomplete"),
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
