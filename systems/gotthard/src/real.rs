//! Gotthard in real mode: the client host, the store and the controller as processes, the
//! switch as a software-switch process, all on loopback, through the generic runtime
//! (`pisadb_runtime`: host and switch processes, supervisor, rendezvous).
//!
//! The same state machines as the simulator run here: [`RackHost`] per host process (host 0
//! the clients, host 1 the store, host 2 the controller, which installs the mode and the key
//! map over the control channel exactly as in the simulator) and [`Gotthard`] in the switch
//! process, with host 2 behind its CPU port.
//!
//! **WAN delays.** This kernel has no `netem`; the software switch plays the wires behind its
//! ports, delaying what it sends out of each. A port delays one direction only, so each host's
//! port delays by the *round trip* of its link, `2 × near_us` toward the clients and
//! `2 × far_us` toward the store: every round trip — client to store and back, or client to
//! switch and back for a switch-made answer — takes as long as in the simulated rack (the
//! one-way halves differ, which no figure here depends on).
//!
//! **Checks.** Each host process keeps a [`Ledger`] of its own events and writes it in its
//! report; the cluster merges them and runs the simulator's oracles on the real run
//! ([`Ledger::check`]): the store's history serializable, nothing committed or counted twice,
//! the counted writes equal to the store's and to the final value, every client finished, the
//! configuration acknowledged. The clients stop starting transactions at the stop time; the
//! run ends once everything in flight has finished.
//!
//! **Store kills.** The store logs every commit ([`StoreRecord`], the one framed log) before
//! its reply leaves, and `--kill-node 1@S` kills it (`kill -9`) and restarts it from that log
//! ([`ClusterOptions::crashes`]). The proof is against a record the store never held: the
//! client host, never killed, counts every commit it was answered, and the checks require
//! every counted write to be among the store's commits (rebuilt from its log across its
//! lives) and the hot key's final value to equal the counted writes.

use crate::client::{ClientConfig, ClientHost, HOT_KEY};
use crate::control::Controller;
use crate::program::Gotthard;
use crate::rack::{
    control_plane, mode_of, Ledger, RackConfig, RackEvent, RackFigures, RackHost, RackObserver, CONTROLLER_HOST,
    STORE_HOST,
};
use crate::store::{Store, StoreRecord};
use pisadb_harness::real::{ClusterOutcome, ClusterRun, RealFlag};
use pisadb_runtime::host_proc::open_log;
use pisadb_runtime::host_proc::{self, HostRun};
use pisadb_runtime::supervisor::{free_ports, ConfigLaunch, Crash};
use pisadb_runtime::switch_proc::{self, SwitchReport};
use pisadb_runtime::wire::PortWire;
use pisadb_runtime::{write_json, Network, RackConfig as RealConfig, Role, RuntimeError};
use pisadb_switch::{Switch, SwitchProfile};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The system name in a Gotthard rack's config.
pub const SYSTEM: &str = "gotthard";
/// Host processes of a rack: the clients, the store, the controller.
pub const HOSTS: u16 = 3;

/// What every process of a real Gotthard rack is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The variant (the switch's mode): `gotthard`, `forward`, `read-cache`, `early-abort`.
    pub variant: String,
    /// The rack's settings, as the simulator takes them.
    pub rack: RackConfig,
}

/// The network of a rack: the switch at `switch`, the hosts at `hosts` (clients, store,
/// controller), the links' delays played by the switch's ports (see the module docs), and
/// `extra` (loss, jitter) on the clients' and the store's ports.
pub fn network(switch: SocketAddr, hosts: Vec<SocketAddr>, rack: &RackConfig, extra: &PortWire) -> Network {
    let mut network = Network::rack(switch, hosts);
    let delay = |one_way_us: u64| PortWire { delay_us: 2 * one_way_us, ..extra.clone() };
    network.wire = vec![delay(rack.near_us), delay(rack.far_us), PortWire::default()];
    network
}

/// What a host process reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host.
    pub id: u16,
    /// Its figures (the client host's are the run's).
    pub figures: RackFigures,
    /// What the oracles need from its events.
    pub ledger: Ledger,
    /// The store's final value of the hot key (the store only).
    pub final_value: Option<i32>,
    /// Whether it drained: nothing in flight when it left.
    pub drained: bool,
    /// Datagrams from addresses other than its switch.
    pub not_from_switch: u64,
}

fn bad_id(id: u16, what: &str, count: u16) -> RuntimeError {
    RuntimeError::bad_setting("--id", id, format!("{what} of the rack: 0..{count}"))
}

/// Runs host `id` of the rack `cfg` until it stops and drains; writes its report to
/// `<data_dir>/report.json` and returns it.
pub fn serve_host(cfg: &RealConfig<Spec>, id: u16, data_dir: &Path) -> Result<HostReport, RuntimeError> {
    let rack = &cfg.spec.rack;
    let mode = mode_of(&cfg.spec.variant).map_err(|e| RuntimeError::bad_setting("variant", &cfg.spec.variant, e))?;
    let mut host = match id {
        0 => RackHost::Client(ClientHost::new(ClientConfig {
            address: 0,
            store: STORE_HOST,
            clients: rack.clients,
            write_share: rack.write_share,
            commits_per_client: rack.commits_per_client,
            seed: rack.seed,
            retransmit_ns: rack.retransmit_ns(),
        })),
        STORE_HOST => RackHost::Store(Store::new(STORE_HOST)),
        CONTROLLER_HOST => RackHost::Controller(
            Controller::new(CONTROLLER_HOST, &control_plane(mode))
                .map_err(|e| RuntimeError::bad_setting("control plane", &cfg.spec.variant, e))?,
        ),
        _ => return Err(bad_id(id, "a host", HOSTS)),
    };
    let mut observer = RackObserver::new();
    let mut refused = None;
    let name = format!("gotthard host {id}");
    // The store logs every commit before its reply leaves and, restarted after a kill, comes
    // back from its log; the commits of its earlier lives are counted again from the log.
    let (mut wal, records) = open_log::<StoreRecord>(id == STORE_HOST, data_dir, &name)?;
    if id == STORE_HOST {
        let store =
            Store::restore(STORE_HOST, &records).map_err(|e| RuntimeError::bad_setting("store log", &name, e))?;
        host = RackHost::Store(store);
        for r in &records {
            observer
                .count(RackEvent::Store(r.event()), 0)
                .map_err(|e| RuntimeError::bad_setting("store log", &name, e))?;
        }
    }
    let run: HostRun = host_proc::serve(cfg, id, &name, &mut host, wal.as_mut(), |now, event| {
        if let Err(e) = observer.count(event, now) {
            refused.get_or_insert(e);
        }
    })?;
    if let Some(why) = refused {
        return Err(RuntimeError::bad_setting("control plane", &cfg.spec.variant, why));
    }
    let final_value = match &host {
        RackHost::Store(s) => Some(s.value(HOT_KEY)),
        _ => None,
    };
    let report = HostReport {
        id,
        figures: observer.figures(final_value.unwrap_or(0)),
        ledger: observer.ledger().clone(),
        final_value,
        drained: run.drained,
        not_from_switch: run.not_from_switch,
    };
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// Runs the switch of the rack `cfg` (the Gotthard program, unconfigured until the controller
/// installs its tables) until SIGINT/SIGTERM; writes its report to `report` if given.
pub fn serve_switch(cfg: &RealConfig<Spec>, id: u16, report: Option<&Path>) -> Result<SwitchReport, RuntimeError> {
    if id != 0 {
        return Err(bad_id(id, "a switch", 1));
    }
    let mut switch = Switch::new(SwitchProfile::tofino1(), Gotthard::new())
        .map_err(|e| RuntimeError::bad_setting("program", "gotthard", e.to_string()))?;
    switch.set_controller(CONTROLLER_HOST);
    switch_proc::serve_and_report(cfg, id, &mut switch, cfg.spec.rack.seed, report)
}

/// What to run with [`run_cluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The rack.
    pub spec: Spec,
    /// Seconds until the clients stop starting transactions.
    pub seconds: f64,
    /// Where the config, the reports and the hosts' data directories go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Loss and jitter on the clients' and the store's ports (their delays come from the rack).
    pub extra: PortWire,
    /// Kills: the store only (`Role::Host(1)`), which restarts from its log.
    pub crashes: Vec<Crash>,
}

/// What [`run_cluster`] saw.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterResult {
    /// The client host's figures (completion: when the last client stopped).
    pub figures: RackFigures,
    /// The store's final value of the hot key.
    pub final_value: i32,
    /// Each host's report, by id.
    pub hosts: Vec<HostReport>,
    /// The switch's report.
    pub switch: SwitchReport,
    /// The kills carried out: (process, seconds into the run, seconds down).
    pub crashes: Vec<(Role, f64, f64)>,
    /// The first oracle that failed, if any.
    pub failure: Option<String>,
}

/// Host `id`'s data directory under `data_dir`.
pub fn host_dir(data_dir: &Path, id: u16) -> PathBuf {
    ConfigLaunch::host_dir(data_dir, id)
}

/// Runs a real Gotthard rack on loopback for `opts.seconds`, collects every process's report
/// and checks the oracles. A caller that wants Ctrl-C to stop the rack in order installs
/// `pisadb_runtime::install_stop_signals` first.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult, RuntimeError> {
    mode_of(&opts.spec.variant).map_err(|e| RuntimeError::bad_setting("--variant", &opts.spec.variant, e))?;
    opts.extra.validate()?;
    let addrs = free_ports(1 + usize::from(HOSTS))?;
    let network = network(addrs[0], addrs[1..].to_vec(), &opts.spec.rack, &opts.extra);
    if let Some(c) = opts.crashes.iter().find(|c| c.role != Role::Host(STORE_HOST)) {
        let accepted = format!("the store, host {STORE_HOST} (it logs; the clients hold the run's own record)");
        return Err(RuntimeError::bad_setting("--kill-node/--kill-switch", format!("{:?}", c.role), accepted));
    }
    let mut supervisor = ConfigLaunch::start(SYSTEM, opts.spec.clone(), network, &opts.data_dir, opts.exe.clone())?;
    let go = supervisor.start_together(opts.seconds)?;
    let crashes =
        supervisor.inject(go.epoch_unix_ns, &opts.crashes)?.into_iter().map(|c| (c.role, c.at_s, c.down_s)).collect();
    supervisor.wait_for_hosts()?;
    supervisor.stop_switches()?;
    let hosts: Vec<HostReport> = ConfigLaunch::host_reports(&opts.data_dir, HOSTS)?;
    let switch = ConfigLaunch::switch_reports(&opts.data_dir, 1)?.remove(0);
    let final_value = hosts[usize::from(STORE_HOST)].final_value.unwrap_or(0);
    let mut ledger = Ledger::default();
    hosts.iter().for_each(|h| ledger.merge(h.ledger.clone()));
    // A host that left with work in flight explains what the ledger then lacks (a commit the
    // store made whose reply its client never got is no protocol violation): it is said first.
    let undrained = hosts.iter().find(|h| !h.drained).map(|h| format!("host {} left with work in flight", h.id));
    let failure = undrained.or_else(|| ledger.check(opts.spec.rack.clients, final_value).err());
    Ok(ClusterResult { figures: hosts[0].figures.clone(), final_value, hosts, switch, crashes, failure })
}

/// `pisadb cluster --system gotthard`: the rack `run` asks for, checked, and its report.
pub fn cluster(run: &ClusterRun) -> Result<ClusterOutcome, String> {
    pisadb_runtime::install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { variant: run.variant.clone(), rack: run.read_settings()? },
        seconds: run.seconds,
        data_dir: run.data_dir.clone(),
        exe: run.exe.clone(),
        extra: PortWire::from(run.wire),
        crashes: Crash::of_run(run),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    let (f, rack) = (&r.figures, &opts.spec.rack);
    let mut lines = vec![
        format!(
            "Gotthard ({}) on loopback: {} clients, {:.0}% writes, {} s; port delays {} µs (clients) and {} µs \
             (store), each its link's round trip\n",
            run.variant,
            rack.clients,
            rack.write_share * 100.0,
            run.seconds,
            2 * rack.near_us,
            2 * rack.far_us
        ),
        format!(
            "commits {} ({} writes)   aborts store/switch/opt {}/{}/{}   retries {}   retransmits {}   mean {:.1} ms   \
             p99 {:.1} ms",
            f.commits,
            f.write_commits,
            f.aborts_store,
            f.aborts_switch,
            f.aborts_switch_optimistic,
            f.retries,
            f.retransmissions,
            f.latency.latency_us_mean / 1e3,
            f.latency.latency_us_p99 / 1e3
        ),
        format!("store's hot key: {}   switch: {} passes", r.final_value, r.switch.passes),
    ];
    lines.extend(r.crashes.iter().map(|(role, at_s, down_s)| {
        format!("{role:?} killed (kill -9) at {at_s} s, restarted from its log {down_s} s later")
    }));
    let ok = "serializable, nothing committed or counted twice, every client finished";
    let json = serde_json::to_value(&r).expect("a result serializes");
    let reports = host_dir(&opts.data_dir, 0);
    Ok(ClusterOutcome::checked(lines.join("\n") + "\n", json, r.failure.clone(), ok, &opts.data_dir, &reports))
}

/// Gotthard's real mode in the system contract ([`pisadb_harness::real`]).
pub struct Real;

/// Gotthard's [`Real`], for the binary's table of real modes.
pub static REAL: Real = Real;

/// The most clients the one client process runs: every client keeps a request in flight, and
/// past this many the process cannot answer them all before their retransmission timers fire
/// (assumed from runs on a 2-core machine; a larger rack needs a client host per thousand).
pub const MAX_CLIENTS: u64 = 1024;

impl pisadb_harness::real::RealMode for Real {
    fn name(&self) -> &'static str {
        SYSTEM
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[RealFlag::Loss, RealFlag::JitterUs, RealFlag::KillNode, RealFlag::Down, RealFlag::Set, RealFlag::Preset]
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_host(cfg, id, data_dir))
    }

    fn run_cluster(&self, run: &ClusterRun) -> Result<ClusterOutcome, String> {
        cluster(run)
    }

    fn processes(&self, _variant: &str, _settings: &serde_json::Value) -> Option<(u16, u16)> {
        Some((HOSTS, 1))
    }

    fn check_settings(&self, _variant: &str, settings: &serde_json::Value) -> Result<(), String> {
        match settings["clients"].as_u64() {
            Some(n) if (1..=MAX_CLIENTS).contains(&n) => Ok(()),
            n => Err(format!(
                "--set clients={}: expected 1..={MAX_CLIENTS} (a run with no clients checks nothing; more than \
                 the one client process can keep in flight)",
                n.map_or("?".to_string(), |n| n.to_string())
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kill test's oracle, broken on purpose: a store that came back without its log has
    /// lost a write its client counted, and the check against the client's record says so.
    #[test]
    fn a_store_restarted_without_its_log_fails_the_check_against_the_clients_record() {
        use crate::client::ClientEvent;
        use crate::store::StoreEvent;
        let store_commit = |client, request| {
            RackEvent::Store(StoreEvent::Committed {
                client,
                request,
                id: u64::from(request) + u64::from(client) * 10,
                writes: vec![(crate::client::HOT_KEY, 1)],
                read_versions: vec![],
                write_versions: vec![],
            })
        };
        let counted = RackEvent::Client(ClientEvent::Committed {
            client: 1,
            request: 1,
            write: true,
            by_switch: false,
            latency_ns: 1,
            retries: 0,
        });
        let mut ledger = Ledger::default();
        [store_commit(0, 1), counted, RackEvent::Client(ClientEvent::Finished(0))]
            .iter()
            .for_each(|e| ledger.record(e));
        ledger.installed = true;
        let err = ledger.check(1, 0).unwrap_err();
        assert!(err.contains("client 1 counted request 1 as committed, which the store never committed"), "{err}");
        ledger.record(&store_commit(1, 1));
        assert_eq!(ledger.check(1, 1), Ok(()), "with the log's commit back, the record agrees");
    }

    #[test]
    fn each_port_delays_by_its_links_round_trip() {
        let rack = RackConfig { near_us: 300, far_us: 1_200, ..RackConfig::default() };
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let lossy = PortWire { loss: 0.01, ..PortWire::default() };
        let n = network(addr(1), vec![addr(2), addr(3), addr(4)], &rack, &lossy);
        assert_eq!(n.validate().map_err(|e| e.to_string()), Ok(()));
        assert_eq!((n.wire_of(0).delay_us, n.wire_of(1).delay_us, n.wire_of(2).delay_us), (600, 2_400, 0));
        assert_eq!((n.wire_of(0).loss, n.wire_of(2).loss), (0.01, 0.0), "the controller's port is perfect");
    }
}
