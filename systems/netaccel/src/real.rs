//! NetAccel in real mode: the master, the segments and the control plane as processes, the
//! switch as a software-switch process running the same [`NetAccel`] program, all on
//! loopback, through the generic runtime (`pisadb_runtime`: host and switch processes,
//! supervisor, rendezvous). Real tuples travel as real UDP datagrams, one per tuple, from
//! the segments' deparse operators through the switch; what overflows goes out of the
//! switch's CPU port to the control-plane process; the drained groups come back to the
//! segments; the master gathers Q20's rows.
//!
//! Every process generates the same TPC-H data from the scale factor (tpchgen is
//! deterministic) and keeps its own share, so nothing but the query's own traffic moves
//! between them. The hosts are the simulator's state machines ([`crate::rack::hosts`]), the
//! switch is the simulator's ([`crate::rack::rack_switch`]).
//!
//! **Pacing.** On a simulated link each tuple takes its serialization time; on loopback
//! nothing slows a segment down, and a software switch fed faster than it forwards loses
//! datagrams in its socket's buffer. The barrier's per-stream counts catch such a loss and
//! the query fails with [`LOSS_ERROR`] instead of answering from incomplete input; to make
//! it not happen, each segment here leaves `tuple_gap_ns` between two tuples (a deparse
//! operator throttled to the rate the software switch keeps up with, as the real one is to
//! its NIC's). Response times are therefore the software rack's, not a Tofino's: real mode
//! shows the system working end to end with real datagrams, the simulator gives the figures.
//!
//! **End.** A query ends by itself: when the master has what it waits for (or a barrier
//! reports a loss) it leaves a mark in its data directory, the cluster sees it and asks every
//! host to stop ([`pisadb_runtime::supervisor::Supervisor::wait_for_hosts_or`]); `seconds` is
//! only the longest the query may take.
//!
//! **Checks.** The cluster computes the plain reference itself and compares: pattern 1's
//! groups as the segments hold them, or Q20's rows as the master has them.
//!
//! **Kills.** A segment, the master, the control plane or the switch can be killed (`kill -9`)
//! mid-query and restarted ([`ClusterOptions::crashes`]). None of them logs: a restarted one
//! has lost its part of the query, so the query must end in a clear failure (a barrier's
//! loss, a missed deadline, an answer that is not the reference's, a host left undrained,
//! each naming the kill) or, if the lost part did not matter, with the right answer; the
//! judge never passes a wrong one.

use crate::calibration::CpuCosts;
use crate::hosts::{NetEvent, Plan, Query, RackHost};
use crate::offline::{control_plane_host, MASTER};
use crate::program::NetAccel;
use crate::rack::{
    group_rows, groups_equal_reference, hosts, overflow_shares, rack_switch, RackConfig, RackObserver, LOSS_ERROR,
};
use pisadb_core::Nanos;
use pisadb_harness::real::{AliasTo, ClusterOutcome, ClusterRun, FlagAlias, RealFlag};
use pisadb_olap::q20::{reference, AnswerRow};
use pisadb_olap::tpch::{generate, Q20Data, Q20Params};
use pisadb_runtime::host_proc::{self, HostRun};
use pisadb_runtime::supervisor::{free_ports, ConfigLaunch, Crash};
use pisadb_runtime::switch_proc::{self, SwitchReport};
use pisadb_runtime::wal_file::WalFile;
use pisadb_runtime::{write_json, Network, RackConfig as RealConfig, Role, RuntimeError};
use pisadb_switch::Switch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The system name in a NetAccel rack's config.
pub const SYSTEM: &str = "netaccel";

/// The gap between two deparsed tuples a real rack leaves by default. On the project machine
/// (2 cores for a switch process, 5 host processes and whatever else runs) 3 segments at one
/// tuple per 4 µs each (750k datagrams/s) pass without loss when the machine is otherwise
/// idle, and lose datagrams in the switch's 16 MB socket buffer while compilers run beside
/// them; one per 10 µs leaves room for that.
pub const TUPLE_GAP_NS: Nanos = 10_000;

/// The mark the master (or a segment that detected a loss) leaves in its data directory when
/// the query has ended.
const ENDED_MARK: &str = "ended";

/// What every process of a real NetAccel rack is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The plan of pattern 1.
    pub plan: Plan,
    /// The rack's settings, as the simulator takes them.
    pub rack: RackConfig,
    /// The least time between two tuples a segment deparses (see the module docs).
    pub tuple_gap_ns: Nanos,
}

impl Spec {
    /// The number of host processes: the master, the segments, the control plane.
    pub fn hosts(&self) -> u16 {
        self.rack.segments + 2
    }
}

/// What a host process reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host.
    pub id: u16,
    /// When the query completed, in ns of rack time (the master only).
    pub completed_ns: Option<Nanos>,
    /// Whether a barrier here detected lost tuples.
    pub loss_detected: bool,
    /// Groups and answer rows the master counted.
    pub counted: (u64, usize),
    /// The control plane's overflow tuples by type, its groups, the longest wait for its core.
    pub control_plane: ([u64; 3], u64, u64),
    /// Pattern 1's groups this segment holds: `l_partkey`, `l_suppkey`, `sum_qty`.
    pub groups: Vec<[i64; 3]>,
    /// Q20's rows, if this is the master and it has them.
    pub answer: Option<Vec<AnswerRow>>,
    /// Datagrams it ignored, by reason.
    pub ignored: BTreeMap<String, u64>,
    /// Whether it drained: nothing in flight when it left.
    pub drained: bool,
    /// Datagrams received from and sent to the switch.
    pub datagrams: (u64, u64),
}

fn bad_id(id: u16, what: &str, count: u16) -> RuntimeError {
    RuntimeError::bad_setting("--id", id, format!("{what} of the rack: 0..{count}"))
}

fn bad_spec(e: String) -> RuntimeError {
    RuntimeError::bad_setting("rack settings", "the config's spec", e)
}

/// The query's data, as every process generates it.
fn data(spec: &Spec) -> Result<Q20Data, RuntimeError> {
    spec.rack.check().map_err(bad_spec)?;
    generate(spec.rack.sf, &Q20Params::validation()).map_err(|e| bad_spec(e.to_string()))
}

/// Runs host `id` of the rack `cfg` until the query has ended and every host drained; writes
/// its report to `<data_dir>/report.json` and returns it.
pub fn serve_host(cfg: &RealConfig<Spec>, id: u16, data_dir: &Path) -> Result<HostReport, RuntimeError> {
    let spec = &cfg.spec;
    if id >= spec.hosts() {
        return Err(bad_id(id, "a host", spec.hosts()));
    }
    let data = data(spec)?;
    let mut host = hosts(spec.plan, &spec.rack, &data, CpuCosts::MEASURED).swap_remove(usize::from(id));
    drop(data);
    if let RackHost::Segment(s) = &mut host {
        s.pace(spec.tuple_gap_ns);
    }
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    let mark = data_dir.join(ENDED_MARK);
    let query = spec.rack.query;
    let mut observer = RackObserver::default();
    let name = format!("netaccel host {id}");
    let run: HostRun = host_proc::serve(cfg, id, &name, &mut host, None::<&mut WalFile<()>>, |now, event| {
        let ends = matches!(event, NetEvent::LossDetected)
            || matches!((query, &event), (Query::Pattern1, NetEvent::Pattern1Complete { .. }))
            || matches!((query, &event), (Query::Q20, NetEvent::Answered { .. }));
        observer.record(event, now);
        if ends {
            // Best effort: without the mark the rack still stops at its deadline.
            let _ = std::fs::write(&mark, b"");
        }
    })?;
    let (groups, answer) = match &host {
        RackHost::Segment(s) => (group_rows(s).collect(), None),
        RackHost::Master(m) => (Vec::new(), m.answer().map(<[AnswerRow]>::to_vec)),
        RackHost::ControlPlane(_) => (Vec::new(), None),
    };
    let report = HostReport {
        id,
        completed_ns: observer.completed_ns(query),
        loss_detected: observer.loss_detected(),
        counted: observer.counted(),
        control_plane: observer.control_plane(),
        groups,
        answer,
        ignored: observer.ignored().iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        drained: run.drained,
        datagrams: (run.datagrams_in, run.datagrams_out),
    };
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// Runs the switch of the rack `cfg` (the NetAccel program in the rack's layout, the control
/// plane behind its CPU port) until SIGINT/SIGTERM; writes its report to `report` if given.
pub fn serve_switch(cfg: &RealConfig<Spec>, id: u16, report: Option<&Path>) -> Result<SwitchReport, RuntimeError> {
    if id != 0 {
        return Err(bad_id(id, "a switch", 1));
    }
    let spec = &cfg.spec;
    let mut switch: Switch<NetAccel> = rack_switch(spec.plan, &spec.rack, &data(spec)?).map_err(bad_spec)?;
    switch.set_controller(control_plane_host(spec.rack.segments));
    switch_proc::serve_and_report(cfg, id, &mut switch, spec.rack.seed, report)
}

/// What to run with [`run_cluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The rack.
    pub spec: Spec,
    /// The longest the query may take beyond what pacing needs, in seconds (it ends by
    /// itself before).
    pub seconds: f64,
    /// Where the config, the reports and the hosts' data directories go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
    /// Processes to `kill -9` mid-query and restart (a segment, the master, the control plane
    /// or the switch): the query must then fail with a clear error or answer right.
    pub crashes: Vec<Crash>,
}

/// What [`run_cluster`] saw.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterResult {
    /// The plan that ran pattern 1.
    pub plan: Plan,
    /// The split the switch was loaded with: join positions, group positions.
    pub split: [u8; 2],
    /// When the master had what it waits for, in ms after the rack's start.
    pub response_ms: Option<f64>,
    /// Groups of pattern 1 the segments hold.
    pub groups: u64,
    /// Q20's answer rows the master has.
    pub answer_rows: usize,
    /// Whether the groups (pattern 1) or the rows (Q20) equal the plain reference.
    pub answer_ok: bool,
    /// Whether a barrier detected lost tuples (the query then fails).
    pub loss_detected: bool,
    /// `part_FP` and `lineitem_FP` tuples.
    pub tuples: [u64; 2],
    /// Overflow tuples (i), (ii), (iii) the control-plane process received.
    pub overflow: [u64; 3],
    /// (i) as % of outer tuples, (ii) and (iii) as % of inner tuples.
    pub overflow_pct: [f64; 3],
    /// Each host's report, by id.
    pub hosts: Vec<HostReport>,
    /// The switch's report.
    pub switch: SwitchReport,
    /// The kills carried out: (process, seconds into the run, seconds down).
    pub crashes: Vec<(Role, f64, f64)>,
    /// Why the run failed, if it did.
    pub failure: Option<String>,
}

/// Host `id`'s data directory under `data_dir`.
pub fn host_dir(data_dir: &Path, id: u16) -> PathBuf {
    ConfigLaunch::host_dir(data_dir, id)
}

/// Runs a real NetAccel rack on loopback until the query has ended (at most `opts.seconds`),
/// collects every process's report and checks the answer against the reference. A caller
/// that wants Ctrl-C to stop the rack in order installs `pisadb_runtime::install_stop_signals`
/// first.
pub fn run_cluster(opts: &ClusterOptions) -> Result<ClusterResult, RuntimeError> {
    let spec = &opts.spec;
    let data = data(spec)?;
    if spec.plan == Plan::Orig && spec.rack.query != Query::Q20 {
        return Err(RuntimeError::bad_setting("--variant", "orig", "orig runs the whole of Q20: add --set query=q20"));
    }
    let n = spec.hosts();
    let addrs = free_ports(1 + usize::from(n))?;
    let network = Network::rack(addrs[0], addrs[1..].to_vec());
    let mut supervisor = ConfigLaunch::start(SYSTEM, spec.clone(), network, &opts.data_dir, opts.exe.clone())?;
    let fits = |role: Role| match role {
        Role::Switch(id) => id == 0,
        Role::Host(id) => id < n,
    };
    if let Some(c) = opts.crashes.iter().find(|c| !fits(c.role)) {
        let accepted = format!("a host of the rack: 0..{n}, or switch 0");
        return Err(RuntimeError::bad_setting("--kill-node/--kill-switch", format!("{:?}", c.role), accepted));
    }
    let go = supervisor.start_together(opts.seconds + pacing_s(spec, &data))?;
    let crashes: Vec<(Role, f64, f64)> =
        supervisor.inject(go.epoch_unix_ns, &opts.crashes)?.into_iter().map(|c| (c.role, c.at_s, c.down_s)).collect();
    let marks: Vec<PathBuf> = (0..n).map(|id| host_dir(&opts.data_dir, id).join(ENDED_MARK)).collect();
    supervisor.wait_for_hosts_or(|| marks.iter().any(|m| m.exists()))?;
    supervisor.stop_switches()?;
    let hosts = ConfigLaunch::host_reports(&opts.data_dir, n)?;
    let switch = ConfigLaunch::switch_reports(&opts.data_dir, 1)?.remove(0);
    let mut result = judge(spec, &data, hosts, switch);
    // A query with a process killed under it answers right or fails saying so: the judge
    // never lets a wrong answer pass, and its failure names the kill.
    if let (Some(why), Some((role, at_s, _))) = (&result.failure, crashes.first()) {
        // A killed process comes back with nothing of its part (NetAccel logs nothing), so
        // the datagrams the switch's counters miss went to its earlier life, not to loopback.
        let why = match why.starts_with("the query did not complete") {
            true => "the query did not complete before the deadline: the process came back with nothing of its part \
                     of the query (NetAccel keeps no log), so no answer was given"
                .to_string(),
            false => why.clone(),
        };
        result.failure = Some(format!("{role:?} was killed at {at_s} s: {why}"));
    }
    result.crashes = crashes;
    Ok(result)
}

/// How long the segments' pacing alone makes the query take, in seconds (the deadline adds
/// it to `seconds`): a segment's share of every stream it deparses, with some slack for
/// uneven shares.
fn pacing_s(spec: &Spec, data: &Q20Data) -> f64 {
    let mut tuples = data.part_fp.rows() + data.lineitem_fp.rows();
    if spec.rack.query == Query::Q20 {
        tuples += data.partsupp.rows();
    }
    1.5 * tuples as f64 / f64::from(spec.rack.segments) * spec.tuple_gap_ns as f64 / 1e9
}

/// The run's figures from the hosts' reports, and its verdict.
fn judge(spec: &Spec, data: &Q20Data, hosts: Vec<HostReport>, switch: SwitchReport) -> ClusterResult {
    let master = &hosts[usize::from(MASTER)];
    let control_plane = &hosts[usize::from(control_plane_host(spec.rack.segments))];
    let loss_detected = hosts.iter().any(|h| h.loss_detected);
    let answer_ok = match spec.rack.query {
        Query::Pattern1 => groups_equal_reference(hosts.iter().flat_map(|h| h.groups.iter().copied()), data),
        Query::Q20 => master.answer.as_deref() == Some(reference(data).as_slice()),
    };
    let tuples = [data.part_fp.rows() as u64, data.lineitem_fp.rows() as u64];
    let overflow = control_plane.control_plane.0;
    let layout = spec.rack.loaded_layout(data);
    let failure = if loss_detected {
        Some(format!("{LOSS_ERROR} (try a larger --tuple-gap-ns than {})", spec.tuple_gap_ns))
    } else if master.completed_ns.is_none() {
        let sent: u64 = hosts.iter().map(|h| h.datagrams.1).sum();
        Some(if switch.datagrams_in < sent {
            format!(
                "the query did not complete before the deadline: the switch received {} of the {sent} datagrams the \
                 hosts sent (lost on loopback; a larger --tuple-gap-ns than {} paces the segments more)",
                switch.datagrams_in, spec.tuple_gap_ns
            )
        } else {
            "the query did not complete before the deadline (--seconds)".to_string()
        })
    } else if !answer_ok {
        Some("the answer differs from the plain reference".to_string())
    } else {
        hosts.iter().find(|h| !h.drained).map(|h| format!("host {} left with work in flight", h.id))
    };
    ClusterResult {
        plan: spec.plan,
        split: [layout.join_positions, layout.group_positions],
        response_ms: master.completed_ns.map(|ns| ns as f64 / 1e6),
        groups: hosts.iter().map(|h| h.groups.len() as u64).sum(),
        answer_rows: master.answer.as_ref().map_or(0, Vec::len),
        answer_ok,
        loss_detected,
        tuples,
        overflow,
        overflow_pct: overflow_shares(overflow, tuples).0,
        hosts,
        switch,
        crashes: Vec::new(),
        failure,
    }
}

/// The setting real mode adds to the simulator's: the least time between two tuples a segment
/// streams, in ns (on loopback nothing else paces the segments, and a software switch fed
/// faster than it forwards loses datagrams, which fails the query); default [`TUPLE_GAP_NS`].
pub const TUPLE_GAP_KEY: &str = "tuple_gap_ns";

/// The longest [`TUPLE_GAP_KEY`] accepted (ns): 1 ms.
pub const MAX_TUPLE_GAP_NS: Nanos = 1_000_000;

/// Real mode's settings as the rack's and the tuple gap, each checked.
fn real_settings(settings: &serde_json::Value, edits: &str) -> Result<(RackConfig, Nanos), String> {
    let mut settings = settings.clone();
    let gap = settings.as_object_mut().and_then(|m| m.remove(TUPLE_GAP_KEY));
    let tuple_gap_ns = match gap {
        None => TUPLE_GAP_NS,
        Some(v) => v.as_u64().filter(|&ns| ns <= MAX_TUPLE_GAP_NS).ok_or_else(|| {
            format!("--set {TUPLE_GAP_KEY}={v}: expected an integer of ns, at most {MAX_TUPLE_GAP_NS} (1 ms)")
        })?,
    };
    let rack: RackConfig = pisadb_harness::real::read_settings(&settings, edits)?;
    rack.check().map_err(|e| format!("--set: {e}"))?;
    Ok((rack, tuple_gap_ns))
}

/// `pisadb cluster --system netaccel`: NetAccel's rack as processes on loopback, until the
/// query is answered; checked, and its report.
pub fn cluster(run: &ClusterRun) -> Result<ClusterOutcome, String> {
    let plan = crate::system::plan_of(&run.variant)?;
    let (rack, tuple_gap_ns) = real_settings(&run.settings, &run.edits)?;
    pisadb_runtime::install_stop_signals().map_err(|e| e.to_string())?;
    let opts = ClusterOptions {
        spec: Spec { plan, rack, tuple_gap_ns },
        seconds: run.seconds,
        data_dir: run.data_dir.clone(),
        exe: run.exe.clone(),
        crashes: Crash::of_run(run),
    };
    let r = run_cluster(&opts).map_err(|e| e.to_string())?;
    let mut lines: Vec<String> = r
        .crashes
        .iter()
        .map(|(role, at_s, down_s)| {
            format!("{role:?} killed (kill -9) at {at_s} s and restarted {down_s} s later, with nothing of its part")
        })
        .collect();
    let rack = &opts.spec.rack;
    let response = r.response_ms.map_or("–".to_string(), |ms| format!("{ms:.1} ms"));
    lines.extend([
        format!(
            "NetAccel ({}, {:?}) on loopback: SF {}, {} segments, split {}x{}, one tuple per {} ns per segment\n",
            run.variant, rack.query, rack.sf, rack.segments, r.split[0], r.split[1], tuple_gap_ns
        ),
        format!(
            "response {response}   groups {}   answer rows {}   tuples {}/{}   overflow i/ii/iii {:.2}/{:.2}/{:.2}%",
            r.groups, r.answer_rows, r.tuples[0], r.tuples[1], r.overflow_pct[0], r.overflow_pct[1], r.overflow_pct[2]
        ),
        format!("switch: {} datagrams in, {} out", r.switch.datagrams_in, r.switch.datagrams_out),
    ]);
    let ok = "the answer equals the plain reference; every host drained";
    let json = serde_json::to_value(&r).expect("a result serializes");
    let reports = ConfigLaunch::host_dir(&opts.data_dir, 0);
    Ok(ClusterOutcome::checked(lines.join("\n") + "\n", json, r.failure.clone(), ok, &opts.data_dir, &reports))
}

/// NetAccel's real mode in the system contract ([`pisadb_harness::real`]).
pub struct Real;

/// NetAccel's [`Real`], for the binary's table of real modes.
pub static REAL: Real = Real;

impl pisadb_harness::real::RealMode for Real {
    fn name(&self) -> &'static str {
        SYSTEM
    }

    fn flags(&self) -> &'static [RealFlag] {
        &[RealFlag::KillNode, RealFlag::KillSwitch, RealFlag::Down, RealFlag::Set, RealFlag::Preset]
    }

    fn flag_aliases(&self) -> &'static [FlagAlias] {
        &[FlagAlias { flag: "--tuple-gap-ns", to: AliasTo::Set(TUPLE_GAP_KEY) }]
    }

    fn defaults(&self) -> Option<serde_json::Value> {
        let mut settings = pisadb_harness::System::default_settings(&crate::SYSTEM);
        if let Some(map) = settings.as_object_mut() {
            map.insert(TUPLE_GAP_KEY.into(), TUPLE_GAP_NS.into());
        }
        Some(settings)
    }

    fn check_settings(&self, _variant: &str, settings: &serde_json::Value) -> Result<(), String> {
        real_settings(settings, "--set").map(drop)
    }

    fn run_cluster(&self, run: &ClusterRun) -> Result<ClusterOutcome, String> {
        cluster(run)
    }

    fn serve_switch(&self, config: &Path, id: u16, _: &[PathBuf], _: u16, report: Option<&Path>) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_switch(cfg, id, report))
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String> {
        pisadb_runtime::serve_config(config, |cfg| serve_host(cfg, id, data_dir))
    }
}
